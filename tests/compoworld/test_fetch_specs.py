"""A spec corpus collected from a running MCP server compiles like the shared one."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from compoworld.specs.build import build_library
from compoworld.tasks.task import save_tasks
from envs.scenarios import community_meetup
from experiments.fetch_mcp_specs import _tool_sets, corpus_lines

REPO = Path(__file__).resolve().parents[2]


def test_corpus_lines_keep_schemas_and_hints():
  tool = {
    "name": "get_note",
    "description": "Read a note.",
    "inputSchema": {"type": "object", "properties": {"note_id": {"type": "string"}}},
    "annotations": {"readOnlyHint": True},
  }
  [line] = corpus_lines("notes", [tool])
  assert line == {
    "source": "fetched",
    "server": "notes",
    "category": None,
    "name": "get_note",
    "description": "Read a note.",
    "inputSchema": tool["inputSchema"],
    "meta": {"annotations": {"readOnlyHint": True}},
  }


@pytest.mark.slow
def test_specs_fetched_from_our_own_mcp_server_compile(tmp_path):
  task = community_meetup(0)
  save_tasks([task], tmp_path / "tasks.jsonl")
  server = f"{sys.executable} -m experiments.serve_mcp --tasks={tmp_path / 'tasks.jsonl'}"
  known = tmp_path / "known.jsonl"  # a corpus holding the first server's tool set already

  def fetch(*flags):
    run = [sys.executable, "-m", "experiments.fetch_mcp_specs", f"--commands={server}", *flags]
    out = subprocess.run(run, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]

  fetch(f"--out={tmp_path / 'got'}", "--commands=false")
  summary = json.loads((tmp_path / "got" / "summary.json").read_text())
  assert summary["servers"]["false"].startswith("failed")  # reported, not fatal
  lines = (tmp_path / "got" / "tools.jsonl").read_text().splitlines()
  names = {json.loads(line)["name"] for line in lines}
  assert summary["tools"] == len(lines) > 0 and "list_services" not in names
  built = build_library(tmp_path / "got" / "tools.jsonl", tmp_path / "lib", progress=False)
  assert built["services"] == 1 and built["tools"] == len(lines)

  known.write_text((tmp_path / "got" / "tools.jsonl").read_text())
  assert _tool_sets(str(known)) == {frozenset(names)}
  fetch(f"--out={tmp_path / 'again'}", f"--exclude={known}")
  dropped = json.loads((tmp_path / "again" / "summary.json").read_text())
  assert dropped["tools"] == 0 and "dropped" in dropped["servers"][server]
