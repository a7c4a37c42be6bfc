"""Collect a spec corpus from MCP servers you can start:
``python -m experiments.fetch_mcp_specs --packages=@modelcontextprotocol/server-memory,... --out=DIR``.

Each server is started over stdio (an npm package through ``npx -y PACKAGE``, or any command
with ``--commands``), asked for ``tools/list`` with the MCP client, and stopped; its tools are
written to ``DIR/tools.jsonl`` in the corpus format of ``../shared/mcp_specs`` (source, server,
category, name, description, inputSchema, meta with annotations and outputSchema), ready for
``experiments.build_library --specs=DIR/tools.jsonl``. A server that does not start, or answers
nothing in ``--timeout`` seconds, is reported in ``DIR/summary.json`` and skipped. With
``--exclude=CORPUS``, servers whose tool set equals one already in that corpus are dropped, so
what is left is a corpus the compiler was never developed on.
"""

from __future__ import annotations

import asyncio
import json
import shlex
from pathlib import Path
from typing import Any

from absl import flags
from tqdm import tqdm

from experiments.common import run_main, write_summary

_PACKAGES = flags.DEFINE_list("packages", [], "npm packages of MCP servers (run with npx -y).")
_COMMANDS = flags.DEFINE_multi_string("commands", [], "Commands that start an MCP server on stdio.")
_OUT = flags.DEFINE_string("out", "runs/mcp_specs", "Where tools.jsonl and summary.json go.")
_TIMEOUT = flags.DEFINE_float(
  "timeout", 120.0, "Seconds a server gets to start and list its tools."
)
_EXCLUDE = flags.DEFINE_string("exclude", None, "A corpus whose tool sets are dropped.")


async def list_tools(command: list[str], timeout: float) -> list[dict[str, Any]]:
  """The ``tools/list`` answer of the server that ``command`` starts, as plain dicts."""
  from mcp import ClientSession, StdioServerParameters, types
  from mcp.client.stdio import stdio_client

  params = StdioServerParameters(command=command[0], args=command[1:])

  async def ask():
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
      await session.initialize()
      tools, page_params = [], None
      while True:
        page = await session.list_tools(params=page_params)
        tools += [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in page.tools]
        if not page.next_cursor:
          return tools
        page_params = types.PaginatedRequestParams(cursor=page.next_cursor)

  return await asyncio.wait_for(ask(), timeout)


def corpus_lines(server: str, tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
  """Corpus records of one server's tools."""
  return [
    {
      "source": "fetched",
      "server": server,
      "category": None,
      "name": tool["name"],
      "description": tool.get("description") or "",
      "inputSchema": tool.get("inputSchema") or {"type": "object", "properties": {}},
      "meta": {
        k: v
        for k, v in (
          ("annotations", tool.get("annotations")),
          ("outputSchema", tool.get("outputSchema")),
        )
        if v
      },
    }
    for tool in tools
  ]


def _tool_sets(path: str) -> set[frozenset[str]]:
  """The tool-name sets of every server in a corpus (how a known server is recognised)."""
  servers: dict[str, set[str]] = {}
  with open(path, encoding="utf-8") as f:
    for line in f:
      if line.strip():
        record = json.loads(line)
        servers.setdefault(f"{record.get('source')}:{record.get('server')}", set()).add(
          record["name"]
        )
  return {frozenset(names) for names in servers.values()}


def main(argv):
  del argv
  servers = [(p, ["npx", "-y", p]) for p in _PACKAGES.value]
  servers += [(c, shlex.split(c)) for c in _COMMANDS.value]
  if not servers:
    raise ValueError("name servers with --packages or --commands")
  known = _tool_sets(_EXCLUDE.value) if _EXCLUDE.value else set()
  out = Path(_OUT.value)
  out.mkdir(parents=True, exist_ok=True)
  lines, report = [], {}
  for name, command in tqdm(servers, desc="servers", unit="server"):
    try:
      tools = asyncio.run(list_tools(command, _TIMEOUT.value))
    except Exception as err:  # a server that does not start is reported, not fatal
      while isinstance(err, BaseExceptionGroup) and err.exceptions:
        err = err.exceptions[0]  # the task group's first cause, not the group
      report[name] = f"failed: {type(err).__name__}: {err}"[:300]
      continue
    if frozenset(t["name"] for t in tools) in known:
      report[name] = f"dropped: its {len(tools)} tools are a server of {_EXCLUDE.value}"
      continue
    report[name] = f"{len(tools)} tools"
    lines += corpus_lines(name, tools)
  (out / "tools.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines), encoding="utf-8")
  write_summary(
    out,
    {
      "servers": report,
      "kept_servers": len({r["server"] for r in lines}),
      "tools": len(lines),
      "file": str(out / "tools.jsonl"),
    },
  )


if __name__ == "__main__":
  run_main(main)
