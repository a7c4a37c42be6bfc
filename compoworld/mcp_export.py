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

from compoworld.service import Service
from compoworld.specs import McpTool

_DESTRUCTIVE = ("delete", "remove", "cancel", "revoke", "void", "archive", "purge")


def annotations(name: str, mutates: bool) -> dict[str, bool]:
  """MCP tool annotations from the runtime's ``mutates`` flag."""
  return {
    "readOnlyHint": not mutates,
    "destructiveHint": mutates and name.lower().startswith(_DESTRUCTIVE),
    "openWorldHint": False,
  }


def tools_list(service: type[Service]) -> dict[str, Any]:
  """The service's answer to MCP ``tools/list``."""
  return {
    "tools": [
      {
        "name": spec.name,
        "description": spec.description,
        "inputSchema": spec.input_schema,
        "annotations": annotations(spec.name, spec.mutates),
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
