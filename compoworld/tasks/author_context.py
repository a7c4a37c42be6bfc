"""What a facet sees while a task is authored: the live environment and the recorders.

It sits below both the facets (whose functions take it) and the procedural author (which makes
it), so neither imports the other for it.
"""

from __future__ import annotations

import copy
import random
from typing import Any

from compoworld.compose.env import ComposedEnv
from compoworld.runtime.state import ServiceState
from compoworld.tasks.task import Patch, ToolCall, apply_patch


class AuthoringError(Exception):
  """A candidate that cannot be authored; ``reason`` is counted in the summary."""

  def __init__(self, reason: str, detail: str = ""):
    super().__init__(f"{reason}: {detail}" if detail else reason)
    self.reason = reason


class AuthorContext:
  """What a facet sees: the live env (s0 plus the probe's effects so far) and the recorders."""

  def __init__(self, env: ComposedEnv, rng: random.Random):
    self.env, self.rng = env, rng
    self.patches: list[Patch] = []
    self.calls: list[ToolCall] = []
    self.outputs: list[Any] = []  # what each probe call returned
    self.scratch: dict[str, Any] = {}  # facets' notes for the rest of this task (used topics)
    self._s0_now = {n: s.state.now.isoformat() for n, s in env.services.items()}

  def state(self, service: str) -> ServiceState:
    return self.env.services[service].state

  def since(self, service: str) -> str:
    """s0's logical time of ``service``: records made by the agent are stamped at or after it."""
    return self._s0_now[service]

  def fresh_id(self, prefix: str) -> str:
    return f"{prefix}_{self.rng.getrandbits(32):08x}"

  def put(self, service: str, collection: str, record: dict[str, Any]) -> dict[str, Any]:
    """Adds one of the scenario's own records to s0."""
    self._patch(Patch(service=service, op="put", collection=collection, record=record))
    return record

  def update(self, service: str, collection: str, record_id: str, **fields: Any) -> None:
    """Edits a generated record of s0."""
    self._patch(
      Patch(service=service, op="update", collection=collection, id=record_id, fields=fields)
    )

  def _patch(self, patch: Patch) -> None:
    try:
      apply_patch(self.env, patch)
    except Exception as err:  # a facet built an invalid record: reject the candidate
      raise AuthoringError("invalid_patch", f"{patch.service}.{patch.collection}: {err}") from err
    self.patches.append(patch)

  def call(self, service: str, tool: str, /, **arguments: Any) -> Any:
    """One probe call: recorded in the reference solution, and its data returned."""
    out = self.env.call_tool(service, tool, arguments)
    if not out["ok"]:
      raise AuthoringError("probe_error", f"{service}.{tool}: {out['error']['message']}")
    self.calls.append(ToolCall(service=service, tool=tool, arguments=arguments))
    self.outputs.append(out["data"])
    return copy.deepcopy(out["data"])  # facets may annotate what they get; keep the record

  def choice(self, items: list[Any] | tuple[Any, ...]) -> Any:
    if not items:
      raise AuthoringError("nothing_to_pick")
    return items[self.rng.randrange(len(items))]
