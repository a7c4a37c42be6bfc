"""The composed environment E_C (paper, section 3) and its four meta-tools.

The joint state is the tuple of the services' states; a call to ``(service, tool)`` touches only
that service (eq. 1). Tools are namespaced ``service__tool``. Agents reach them through the
meta-tools ``list_services``, ``list_tools``, ``describe_tool`` and ``call_tool``, whose bad
input is answered with an error envelope like any other call.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterable
from typing import Any

from compoworld.runtime import envelope
from compoworld.runtime.envelope import Envelope
from compoworld.runtime.registry import registry
from compoworld.runtime.service import Service

SEP = "__"


def _obj(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
  return {
    "type": "object",
    "properties": properties,
    "required": required,
    "additionalProperties": False,
  }


_SERVICE_ARG = {"type": "string", "description": "Service name, as listed by list_services."}
_TOOL_ARG = {"type": "string", "description": "Tool name, as listed by list_tools."}

#: The four meta-tools as OpenAI function schemas (paper, section 5.1).
META_TOOLS: list[dict[str, Any]] = [
  {
    "type": "function",
    "function": {
      "name": "list_services",
      "description": "List the services available in this environment with their domain and "
      "a one-line description.",
      "parameters": _obj({}, []),
    },
  },
  {
    "type": "function",
    "function": {
      "name": "list_tools",
      "description": "List the tools of one service with a one-line description each.",
      "parameters": _obj({"service": _SERVICE_ARG}, ["service"]),
    },
  },
  {
    "type": "function",
    "function": {
      "name": "describe_tool",
      "description": "Show a tool's full description and the JSON Schema of its arguments.",
      "parameters": _obj({"service": _SERVICE_ARG, "tool": _TOOL_ARG}, ["service", "tool"]),
    },
  },
  {
    "type": "function",
    "function": {
      "name": "call_tool",
      "description": "Call a tool of a service with JSON arguments and return its response "
      "envelope: {ok, status, data} or {ok, status, error}.",
      "parameters": _obj(
        {
          "service": _SERVICE_ARG,
          "tool": _TOOL_ARG,
          "arguments": {"type": "object", "description": "The tool's arguments."},
        },
        ["service", "tool"],
      ),
    },
  },
]
META_TOOL_NAMES = tuple(t["function"]["name"] for t in META_TOOLS)


class ComposedEnv:
  """The product of independently executable services, with namespaced tools."""

  def __init__(
    self,
    services: dict[str, Service],
    task_services: Iterable[str] | None = None,
    seed: int = 0,
  ):
    self.services = dict(services)
    self.task_services = tuple(task_services if task_services is not None else self.services)
    self.distractors = tuple(n for n in self.services if n not in self.task_services)
    self.seed = seed

  @classmethod
  def from_services(
    cls,
    names: Iterable[str],
    seed: int = 0,
    distractors: Iterable[str] = (),
    size: int | None = None,
  ) -> ComposedEnv:
    """Builds each named service from the registry with the same seed (one shared world)."""
    names, distractors = list(names), list(distractors)
    dupes = {n for n in names + distractors if (names + distractors).count(n) > 1}
    if dupes:
      raise ValueError(f"services listed more than once: {sorted(dupes)}")
    services = {n: registry.get(n).create(seed=seed, size=size) for n in names + distractors}
    return cls(services, task_services=names, seed=seed)

  # --- the meta-tools ----------------------------------------------------------------------

  def _service(self, name: Any) -> Service | Envelope:
    if not isinstance(name, str) or name not in self.services:
      return envelope.error(
        404,
        "unknown_service",
        f"no service named {name!r}; available services: {', '.join(sorted(self.services))}",
      )
    return self.services[name]

  def list_services(self) -> Envelope:
    """Task services and distractors together, in a seeded shuffled order."""
    names = sorted(self.services)
    random.Random(self.seed).shuffle(names)
    return envelope.ok(
      [
        {
          "name": n,
          "domain": self.services[n].domain,
          "description": self.services[n].description,
        }
        for n in names
      ]
    )

  def list_tools(self, service: str) -> Envelope:
    svc = self._service(service)
    if isinstance(svc, dict):
      return svc
    return envelope.ok(
      {
        "service": service,
        "tools": [
          {"name": s.name, "description": s.summary, "mutates": s.mutates}
          for s in svc.tools.values()
        ],
      }
    )

  def describe_tool(self, service: str, tool: str) -> Envelope:
    svc = self._service(service)
    if isinstance(svc, dict):
      return svc
    spec = svc.spec(tool) if isinstance(tool, str) else None
    if spec is None:
      return svc.unknown_tool(tool)
    return envelope.ok({"service": service, **spec.describe()})

  def call_tool(self, service: str, tool: str, arguments: dict[str, Any] | None = None) -> Envelope:
    svc = self._service(service)
    if isinstance(svc, dict):
      return svc
    return svc.call(tool, arguments)

  def call_meta(self, name: str, arguments: Any = None) -> Envelope:
    """Dispatches one meta-tool call; malformed input becomes a 400 envelope."""
    if arguments is None:
      arguments = {}
    if not isinstance(arguments, dict):
      return envelope.error(400, "invalid_argument", f"{name}: arguments must be a JSON object")
    required = {
      "list_services": (),
      "list_tools": ("service",),
      "describe_tool": ("service", "tool"),
      "call_tool": ("service", "tool"),
    }
    if not isinstance(name, str) or name not in required:
      return envelope.error(
        404, "unknown_tool", f"no meta-tool {name!r}; meta-tools: {', '.join(META_TOOL_NAMES)}"
      )
    allowed = set(required[name]) | ({"arguments"} if name == "call_tool" else set())
    missing = [a for a in required[name] if a not in arguments]
    extra = sorted(set(arguments) - allowed)
    if missing or extra:
      problems = [f"missing required argument '{a}' (expected string)" for a in missing]
      problems += [f"unknown argument '{a}'" for a in extra]
      return envelope.error(400, "invalid_argument", f"{name}: " + "; ".join(problems))
    wrong = [a for a in required[name] if not isinstance(arguments[a], str)]
    if wrong:
      return envelope.error(
        400, "invalid_argument", f"{name}: argument '{wrong[0]}' expected string"
      )
    if name == "list_services":
      return self.list_services()
    if name == "list_tools":
      return self.list_tools(arguments["service"])
    if name == "describe_tool":
      return self.describe_tool(arguments["service"], arguments["tool"])
    inner = arguments.get("arguments", {})
    if not isinstance(inner, dict):
      return envelope.error(
        400, "invalid_argument", "call_tool: argument 'arguments' expected object"
      )
    return self.call_tool(arguments["service"], arguments["tool"], inner)

  # --- namespaced tools --------------------------------------------------------------------

  def tool_schemas(self) -> list[dict[str, Any]]:
    """Every tool as an OpenAI function named ``service__tool``."""
    return [
      spec.openai_schema(f"{name}{SEP}{spec.name}")
      for name, svc in self.services.items()
      for spec in svc.tools.values()
    ]

  def call(self, namespaced: str, arguments: dict[str, Any] | None = None) -> Envelope:
    service, sep, tool = namespaced.partition(SEP) if isinstance(namespaced, str) else ("", "", "")
    if not sep:
      return envelope.error(
        404, "unknown_tool", f"tool names look like 'service{SEP}tool', got {namespaced!r}"
      )
    return self.call_tool(service, tool, arguments)

  # --- fork, hash, diff --------------------------------------------------------------------

  def fork(self) -> ComposedEnv:
    """An independent copy (for one of N parallel rollouts from the same s0)."""
    twin = ComposedEnv.__new__(ComposedEnv)
    twin.services = {n: s.fork() for n, s in self.services.items()}
    twin.task_services, twin.distractors, twin.seed = (
      self.task_services,
      self.distractors,
      self.seed,
    )
    return twin

  def state_hash(self) -> str:
    h = hashlib.blake2b(digest_size=16)
    for name in sorted(self.services):
      h.update(f"{name}={self.services[name].state_hash()};".encode())
    return h.hexdigest()

  def diff(self, other: ComposedEnv) -> dict[str, Any]:
    """Per-service record diff from this joint state to ``other``'s."""
    if set(self.services) != set(other.services):
      raise ValueError("cannot diff environments over different service sets")
    out = {}
    for name, svc in self.services.items():
      d = svc.diff(other.services[name])
      if d:
        out[name] = d
    return out
