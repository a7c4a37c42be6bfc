"""The world model: simulated transitions for quarantined and external-effect tools.

An LLM behind any OpenAI-compatible endpoint (``compoworld.llm.make_client``) receives the
service's state (a bounded slice), the tool's spec and the call, and answers with a JSON state
patch and an observation. The patch goes through the service's own Pydantic record models: an
invalid patch is sent back with the reason, a bounded number of times, and then the call returns
an error envelope; the typed state is never corrupted (validation happens before any write, and
the runtime rolls back failed calls anyway). Answers are cached on disk by (service, state hash,
tool, arguments, model), so a run replays deterministically.

With no endpoint, ``OfflineSimulator`` answers from the spec alone: an observation that conforms
to the tool's output schema and, for a write on a compiled service, a typed patch (the record its
arguments describe), deterministic in the state's hash (for reads, its seed) and the call.

Patch format: ``{"<collection>": {"insert": [record, ...], "update": [{"id": ..., "fields":
{...}}, ...], "delete": [id, ...]}}``.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import random
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from pydantic_core import to_jsonable_python

from compoworld.llm import extract_json, make_client
from compoworld.runtime import envelope
from compoworld.runtime.envelope import ToolError
from compoworld.runtime.state import ServiceState
from compoworld.specs.ingest import McpTool
from compoworld.specs.naming import field_name, leaf_args, role_of
from compoworld.specs.schema_values import example

#: Records per collection shown to the model; the counts say how many there are in all.
STATE_SLICE = 20


class WorldModelError(ToolError):
  """500: the world model gave no valid answer within its retries."""

  status = 500
  type = "world_model_error"


class PatchError(ValueError):
  """A patch that does not fit the service's state; the message says why."""


def _tool_error(status: Any, message: str) -> ToolError:
  classes = {400: envelope.InvalidArgument, 404: envelope.NotFound, 409: envelope.Conflict}
  return classes.get(status, envelope.Unprocessable)(message)


def check_patch(state: ServiceState, patch: Any, mutates: bool) -> list[tuple[str, str, Any]]:
  """The patch's operations, each validated against the typed state before anything is written:
  ``(op, collection, record | id)``. Raises ``PatchError``."""
  if not isinstance(patch, dict):
    raise PatchError(f"the patch must be a JSON object, got {type(patch).__name__}")
  ops: list[tuple[str, str, Any]] = []
  if patch and not mutates:
    raise PatchError("this tool is read-only: its patch must be {}")
  collections = state.tables()
  for name, change in patch.items():
    if name not in collections:
      raise PatchError(f"no collection '{name}'; collections: {', '.join(collections) or 'none'}")
    if not isinstance(change, dict) or set(change) - {"insert", "update", "delete"}:
      raise PatchError(f"{name}: use {{'insert': [...], 'update': [...], 'delete': [...]}}")
    table = collections[name]
    for record in change.get("insert", []):
      if not isinstance(record, dict):
        raise PatchError(f"{name}.insert: records are JSON objects")
      record = {"id": record.get("id") or "", **record}
      if record["id"] and str(record["id"]) in table:
        raise PatchError(f"{name}.insert: id '{record['id']}' already exists")
      try:
        ops.append(
          ("insert", name, table.record_type.model_validate({**record, "id": str(record["id"])}))
        )
      except ValidationError as err:
        raise PatchError(f"{name}.insert: {_errors(err)}") from None
    for update in change.get("update", []):
      if not isinstance(update, dict) or "id" not in update:
        raise PatchError(f"{name}.update: each update is {{'id': ..., 'fields': {{...}}}}")
      current = table.find(str(update["id"]))
      if current is None:
        raise PatchError(f"{name}.update: no record '{update['id']}'")
      fields = update.get("fields", {})
      if not isinstance(fields, dict) or "id" in fields:
        raise PatchError(f"{name}.update: 'fields' is an object and cannot change the id")
      try:
        ops.append(("update", name, current.with_changes(**fields)))
      except (ValidationError, ToolError) as err:
        detail = _errors(err) if isinstance(err, ValidationError) else err.message
        raise PatchError(f"{name}.update '{update['id']}': {detail}") from None
    for record_id in change.get("delete", []):
      if str(record_id) not in table:
        raise PatchError(f"{name}.delete: no record '{record_id}'")
      ops.append(("delete", name, str(record_id)))
  return ops


def _errors(err: ValidationError) -> str:
  return "; ".join(
    f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in err.errors(include_url=False)
  )


def apply_patch(state: ServiceState, ops: list[tuple[str, str, Any]]) -> None:
  """Writes checked operations (they cannot fail: ``check_patch`` validated each one)."""
  for op, name, value in ops:
    table = state.table(name)
    if op == "insert":
      if not value.id:
        value = value.model_copy(update={"id": state.new_id(name[:4])})
      table.insert(value)
    elif op == "update":
      table.update(
        value.id, **{f: getattr(value, f) for f in type(value).model_fields if f != "id"}
      )
    else:
      table.delete(value)


def _checked(state: Any, patch: Any, mutates: bool) -> Any:
  """``check_patch``, or the state's own check where its typed records live elsewhere (a
  sandboxed service's, ``compoworld.synthesis.sandboxed.Snapshot``: they are in the sandbox)."""
  own = getattr(state, "check_patch", None)
  return own(patch, mutates) if own is not None else check_patch(state, patch, mutates)


class OfflineSimulator:
  """No endpoint configured: a deterministic stand-in for the LLM, answering from the spec.

  The observation conforms to the tool's output schema where it has one (else it says it is
  simulated and carries a result made up from the call); a tool that writes, on a compiled
  service whose plan names a table of its records, inserts the record its arguments describe or
  updates the one its id argument names. The patch goes through the same checks as an LLM's
  (``check_patch``): one the typed records refuse becomes no change. A write's answer depends on
  the state's hash and the call alone, a read's on the state's seed and the call (what lies
  outside does not change within an episode), and both are cached on that, so a replay, or a
  task that reads the same outside value its author read, gets the same answer.
  """

  def __init__(self, max_cached: int = 4096):
    self.max_cached = max_cached
    self._cache: dict[str, dict[str, Any]] = {}

  def simulate(self, svc: Any, tool: McpTool, arguments: dict[str, Any]) -> Any:
    mutates = svc.tools[tool.name].mutates
    # a read of the world outside (a rate, a forecast) answers the same all episode, whatever
    # the agent writes meanwhile; a write's answer depends on the state it changes
    world = svc.state.content_hash() if mutates else f"seed:{svc.state.seed}"
    key = json.dumps([svc.name, world, tool.name, arguments], sort_keys=True, default=str)
    answer = self._cache.get(key)
    if answer is None:
      answer = self._answer(svc, tool, arguments, mutates, key)
      if len(self._cache) >= self.max_cached:
        self._cache.pop(next(iter(self._cache)))
      self._cache[key] = answer
    ops = _checked(svc.state, answer["patch"], mutates)
    if hasattr(svc.state, "apply_patch"):
      svc.state.apply_patch(ops)
    else:
      apply_patch(svc.state, ops)
    return copy.deepcopy(answer["observation"])

  def _answer(self, svc, tool, arguments, mutates, key) -> dict[str, Any]:
    rng = random.Random(hashlib.sha256(key.encode()).hexdigest())
    record, patch = self._patch(svc, tool, arguments, rng) if mutates else (None, {})
    if tool.output_schema:
      observation = example(tool.output_schema, rng, "result", full=True)
      if isinstance(observation, dict) and record:
        props = tool.output_schema.get("properties", {})
        observation.update({k: v for k, v in record.items() if k in props and k in observation})
    else:
      observation = {
        "simulated": True,
        "note": f"'{tool.name}' was simulated offline (no world model endpoint is configured).",
        "result": record if record is not None else example({"type": "string"}, rng, tool.name),
      }
    return {"patch": patch, "observation": observation}

  def _patch(self, svc, tool, arguments, rng) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """The record a write describes and the patch that stores it, or (None, {})."""
    plan = getattr(svc, "plans", {}).get(tool.name)
    entity = getattr(svc, "entities", {}).get(plan.entity) if plan else None
    if entity is None:
      return None, {}
    table = svc.state.table(entity.table)
    fields = table.record_type.model_fields
    values = {}
    for arg in leaf_args(tool.input_schema):
      value, name = _at(arguments, arg.path), field_name(arg.key)
      if value is not None and name in fields and name != "id":
        values[name] = value
    role = role_of(tool.name, tool.input_schema, tool.annotations)
    own = _at(arguments, role.id_arg.path) if role.id_arg is not None else None
    if own is not None and str(own) in table:
      patch = {entity.table: {"update": [{"id": str(own), "fields": values}]}}
      record = {"id": own, **values}
    else:
      new_id = (
        rng.randint(10**6, 10**7)
        if entity.integer_ids
        else f"{entity.prefix}_{rng.getrandbits(32):08x}"
      )
      patch = {entity.table: {"insert": [{**values, "id": str(new_id)}]}}
      record = {"id": new_id, **values}
    try:
      check_patch(svc.state, patch, mutates=True)
    except PatchError:
      return None, {}
    return to_jsonable_python(record), patch


def _at(arguments: Any, path: tuple[str, ...]) -> Any:
  for part in path:
    arguments = arguments.get(part) if isinstance(arguments, dict) else None
  return arguments


_SYSTEM = """You are the world model of a tool service in a simulated environment. Given the
service's current state, a tool's specification and a call, decide what the call does.
Answer with one JSON object only:
{"patch": {<collection>: {"insert": [records], "update": [{"id": ..., "fields": {...}}], "delete": [ids]}},
 "observation": <the tool's result, as the real service would return it>}
or, if the call must fail, {"patch": {}, "error": {"status": 400|404|409, "message": "..."}}.
Records must use exactly the fields of the collection's records. Read-only tools use "patch": {}.
Be consistent with the state: ids that are not in it do not exist."""


class LLMWorldModel:
  """Transitions from a language model, validated, retried, and cached on disk."""

  def __init__(self, client: Any, model: str, cache_dir: str | Path, max_attempts: int = 3):
    if max_attempts < 1:
      raise ValueError("max_attempts must be at least 1")
    self.client, self.model, self.max_attempts = client, model, max_attempts
    self.cache_dir = Path(cache_dir)

  def _cache_path(self, svc: Any, tool: McpTool, arguments: dict[str, Any]) -> Path:
    key = json.dumps(
      [svc.name, svc.state.content_hash(), tool.name, arguments, self.model],
      sort_keys=True,
      default=str,
    )
    digest = hashlib.sha256(key.encode()).hexdigest()
    return self.cache_dir / digest[:2] / f"{digest}.json"

  def _prompt(self, svc: Any, tool: McpTool, arguments: dict[str, Any], mutates: bool) -> str:
    state = {}
    for name, table in svc.state.tables().items():
      rows = [to_jsonable_python(r) for r in list(table)[:STATE_SLICE]]
      fields = list(getattr(table, "fields", None) or table.record_type.model_fields)
      state[name] = {"count": len(table), "fields": fields, "records": rows}
    return json.dumps(
      {
        "service": {"name": svc.name, "description": svc.description, "now": str(svc.state.now)},
        "state": state,
        "tool": {
          "name": tool.name,
          "description": tool.description,
          "input_schema": tool.input_schema,
          "read_only": not mutates,
        },
        "call": arguments,
      },
      default=str,
    )

  def simulate(self, svc: Any, tool: McpTool, arguments: dict[str, Any]) -> Any:
    mutates = svc.tools[tool.name].mutates
    path = self._cache_path(svc, tool, arguments)
    if path.exists():
      answer = json.loads(path.read_text(encoding="utf-8"))
      return self._outcome(svc, answer, mutates)
    messages = [
      {"role": "system", "content": _SYSTEM},
      {"role": "user", "content": self._prompt(svc, tool, arguments, mutates)},
    ]
    problem = ""
    for _ in range(self.max_attempts):
      reply = self.client.chat.completions.create(
        model=self.model, messages=messages, temperature=0.0
      )
      text = reply.choices[0].message.content or ""
      try:
        answer = extract_json(text)
        if not isinstance(answer, dict) or not ("observation" in answer or "error" in answer):
          raise PatchError("answer with an object holding 'patch' and 'observation' (or 'error')")
        _checked(svc.state, answer.get("patch", {}), mutates)
      except (ValueError, PatchError) as err:
        problem = str(err)
        messages += [
          {"role": "assistant", "content": text},
          {"role": "user", "content": f"That answer is invalid: {problem}. Answer again."},
        ]
        continue
      path.parent.mkdir(parents=True, exist_ok=True)
      path.write_text(json.dumps(answer, sort_keys=True), encoding="utf-8")
      return self._outcome(svc, answer, mutates)
    raise WorldModelError(
      f"{tool.name}: the world model gave no valid answer in {self.max_attempts} attempts "
      f"(last problem: {problem})"
    )

  def _outcome(self, svc: Any, answer: dict[str, Any], mutates: bool) -> Any:
    error = answer.get("error")
    if isinstance(error, dict):
      raise _tool_error(error.get("status"), str(error.get("message", "the call failed")))
    ops = _checked(svc.state, answer.get("patch", {}), mutates)
    if hasattr(svc.state, "apply_patch"):  # a sandboxed service's state applies its own
      svc.state.apply_patch(ops)
    else:
      apply_patch(svc.state, ops)
    return answer.get("observation")


FALLBACK = OfflineSimulator()


def simulate(svc: Any, tool: McpTool, arguments: dict[str, Any]) -> Any:
  """Runs a simulated tool with the service class's world model (the offline simulator when unset)."""
  return (type(svc).world_model or FALLBACK).simulate(svc, tool, arguments)


def make_world_model(
  base_url: str | None = None,
  model: str | None = None,
  api_key: str | None = None,
  cache_dir: str | Path = "runs/world_model_cache",
  **client_kwargs: Any,
) -> LLMWorldModel | OfflineSimulator:
  """An LLM world model when an endpoint is given (argument or ``OPENAI_BASE_URL``), else the
  offline simulator. ``model`` defaults to ``COMPOWORLD_WORLD_MODEL``."""
  base_url = base_url or os.environ.get("OPENAI_BASE_URL")
  if not base_url:
    return FALLBACK
  model = model or os.environ.get("COMPOWORLD_WORLD_MODEL")
  if not model:
    raise ValueError(
      "an endpoint is configured but no model: pass model= or set COMPOWORLD_WORLD_MODEL"
    )
  client = make_client(base_url=base_url, api_key=api_key, **client_kwargs)
  return LLMWorldModel(client, model, cache_dir)
