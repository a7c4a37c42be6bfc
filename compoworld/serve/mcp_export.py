"""Every service, hand-written or compiled, as MCP ``tools/list`` JSON and as spec-corpus lines.

The export is what the compiler ingests: a clone with no spec corpus compiles the library's own
exported specs, and a compiled copy of a hand-written service can be held to the same
adversarial suite as its original.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from compoworld.runtime.service import Service
from compoworld.runtime.tools import ToolSpec
from compoworld.specs.ingest import McpTool
from compoworld.specs.naming import common_prefix, role_of

#: Verb kinds (``naming.role_of``) whose writes only add: a new record, message or share.
_ADDITIVE = frozenset({"create", "send"})


def tool_annotations(service: type[Service] | Service, spec: ToolSpec) -> dict[str, bool]:
  """The MCP annotations of one of ``service``'s tools: the one rule that both ``tools/list`` of
  the MCP server (``compoworld.serve.mcp_server``) and this export use.

  * ``readOnlyHint``: the tool cannot change state, ``not spec.mutates`` (the runtime enforces
    it: a read runs on a throwaway fork).
  * ``destructiveHint`` (False for reads, where MCP ignores it): a write the tool's source spec
    marks as destructive or not keeps that mark (a compiled service keeps its spec). Otherwise
    it is read from the tool's verb as the compiler reads it: False for the purely additive
    kinds (create, add, schedule, upload; send, post, reply, share), True for updates, deletes
    and state actions (cancel, archive, approve), which change or remove existing records, and
    True, MCP's default, for any write whose verb says neither.
  * ``openWorldHint``: False, a tool touches only its service's simulated state.
  """
  destructive = False
  if spec.mutates:
    compiled_from = getattr(service, "service_spec", None)
    declared = {}
    if compiled_from is not None:
      declared = next((t.annotations for t in compiled_from.tools if t.name == spec.name), {})
    if isinstance(declared.get("destructiveHint"), bool):
      destructive = declared["destructiveHint"]
    else:
      strip = common_prefix(list(service.tools))
      destructive = role_of(spec.name, spec.input_schema, declared, strip).kind not in _ADDITIVE
  return {"readOnlyHint": not spec.mutates, "destructiveHint": destructive, "openWorldHint": False}


def tools_list(service: type[Service]) -> dict[str, Any]:
  """The service's answer to MCP ``tools/list``."""
  return {
    "tools": [
      {
        "name": spec.name,
        "description": spec.description,
        "inputSchema": spec.input_schema,
        "annotations": tool_annotations(service, spec),
      }
      for spec in service.tools.values()
    ]
  }


def mcp_tools(service: type[Service]) -> list[McpTool]:
  """The service's tools as normalized specs (what the validator reads)."""
  compiled_from = getattr(service, "service_spec", None)
  if compiled_from is not None:  # a compiled service keeps the spec it came from
    return list(compiled_from.tools)
  return [
    McpTool(
      name=t["name"],
      description=t["description"],
      input_schema=t["inputSchema"],
      annotations=t["annotations"],
    )
    for t in tools_list(service)["tools"]
  ]


def export_corpus(services: Iterable[type[Service]], path: str | Path) -> int:
  """Writes the services' tools as spec-corpus lines (the shape of ``tools.jsonl``); returns the
  number of tools written."""
  path = Path(path)
  path.parent.mkdir(parents=True, exist_ok=True)
  n = 0
  with open(path, "w", encoding="utf-8") as f:
    for service in services:
      for tool in tools_list(service)["tools"]:
        line = {
          "source": "compoworld",
          "server": service.name,
          "category": service.domain,
          "name": tool["name"],
          "description": tool["description"],
          "inputSchema": tool["inputSchema"],
          "meta": {"annotations": tool["annotations"], "server_name": service.name},
        }
        f.write(json.dumps(line, sort_keys=True) + "\n")
        n += 1
  return n
