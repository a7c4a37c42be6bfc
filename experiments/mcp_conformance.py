"""The official MCP conformance suite against a generated task served over HTTP.

``python -m experiments.mcp_conformance [--workdir=runs/mcp_conformance --skip_if_unavailable]``
generates one task, serves it with ``experiments.serve_mcp`` on a free loopback port and runs
``@modelcontextprotocol/conformance`` (the version pinned below, fetched by ``npx`` together with
Node 22) against it. ``mcp_conformance_expected_failures.yaml`` lists the scenarios that cannot
pass against a task server, each with its reason (most call the suite's own fixture tools,
prompts and resources, such as ``test_simple_text``). The run fails when any other scenario
fails, and when a listed one passes (the list is then stale). With ``--skip_if_unavailable``
(``make test``) a machine without ``npx`` or without the npm registry prints why and passes.
Takes about 10 s once npx has the suite cached (20 s the first time, which fetches 250 MB).
"""

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from absl import flags

from compoworld.tasks.generate import generate_tasks
from compoworld.tasks.task import save_tasks
from experiments.common import run_main, write_summary

SUITE = "@modelcontextprotocol/conformance@0.1.16"
# The suite needs Node >= 22. Once cached, npx runs it offline; without a cache or a network it
# fails at once instead of retrying for minutes.
NPX = ["npx", "--prefer-offline", "--fetch-retries=0", "-y", "-p", "node@22", "-p", SUITE]
NPX += ["conformance"]
REPO = Path(__file__).resolve().parents[1]
_FETCH_TIMEOUT_S = 600  # the first fetch downloads Node 22 and the suite
_START_TIMEOUT_S = 120
_SUITE_TIMEOUT_S = 300

_WORKDIR = flags.DEFINE_string("workdir", "runs/mcp_conformance", "Where summary.json goes.")
_EXPECTED = flags.DEFINE_string(
  "expected_failures",
  str(Path(__file__).with_name("mcp_conformance_expected_failures.yaml")),
  "The suite's expected-failures file: scenarios that cannot pass, each with its reason.",
)
_SKIP = flags.DEFINE_bool(
  "skip_if_unavailable", False, "Without npx or the npm registry, say why and pass."
)


def main(argv):
  del argv
  workdir = Path(_WORKDIR.value)
  t0 = time.perf_counter()
  unavailable = _unavailable()
  if unavailable is not None:
    if not _SKIP.value:
      raise SystemExit(f"conformance: {unavailable}")
    print(f"conformance: skipped: {unavailable}")
    write_summary(workdir, {"skipped": unavailable})
    return
  tasks, _ = generate_tasks(1, seed=0, progress=False)
  tasks_file = workdir / "tasks.jsonl"
  save_tasks(tasks, tasks_file)
  results = workdir / "results"
  shutil.rmtree(results, ignore_errors=True)
  with _served(tasks_file, workdir) as url:
    cmd = [*NPX, "server", "--url", url, "--expected-failures", _EXPECTED.value, "-o", str(results)]
    suite = subprocess.run(cmd, capture_output=True, text=True, timeout=_SUITE_TIMEOUT_S)
  (workdir / "suite.log").write_text(suite.stdout + suite.stderr)
  # The suite's own report: a line per scenario, then the check against the expected failures.
  start = suite.stdout.find("=== SUMMARY ===")
  print(suite.stdout[start:] if start >= 0 else suite.stdout + suite.stderr)
  failed = _failed_scenarios(results)
  expected = set(re.findall(r"^\s*-\s*([\w-]+)", Path(_EXPECTED.value).read_text(), re.M))
  write_summary(
    workdir,
    {
      "suite": SUITE,
      "task_id": tasks[0].id,
      "scenarios": len(failed),
      "passed": sorted(s for s, f in failed.items() if not f),
      "expected_failures": sorted(s for s, f in failed.items() if f and s in expected),
      "unexpected_failures": sorted(s for s, f in failed.items() if f and s not in expected),
      "stale_expected_failures": sorted(s for s, f in failed.items() if not f and s in expected),
      "seconds": round(time.perf_counter() - t0, 1),
    },
  )
  if suite.returncode != 0:
    raise SystemExit(f"conformance: the suite failed; its output is in {workdir / 'suite.log'}")


def _unavailable() -> str | None:
  """Why the suite cannot run here, or None; fetching it also warms npx's cache."""
  if shutil.which("npx") is None:
    return "npx is not on the PATH (the MCP conformance suite needs Node.js and npm)"
  try:
    fetch = subprocess.run(
      [*NPX, "--version"], capture_output=True, text=True, timeout=_FETCH_TIMEOUT_S
    )
  except subprocess.TimeoutExpired:
    return f"npx could not fetch {SUITE} within {_FETCH_TIMEOUT_S} s"
  if fetch.returncode != 0:
    lines = fetch.stderr.strip().splitlines() or ["no output"]
    why = next((line for line in lines if line.startswith("npm error")), lines[-1])
    return f"npx could not fetch {SUITE} (no npm registry?): {why}"
  return None


@contextlib.contextmanager
def _served(tasks_file: Path, workdir: Path) -> Iterator[str]:
  """``experiments.serve_mcp`` over HTTP on a free port: yields its URL, then stops it."""
  log = workdir / "server.log"
  cmd = [sys.executable, "-m", "experiments.serve_mcp", f"--tasks={tasks_file}"]
  cmd += ["--transport=http", "--port=0", f"--workdir={workdir / 'server'}"]
  # A token in the environment would make the server refuse the suite, which sends none.
  env = {k: v for k, v in os.environ.items() if k != "COMPOWORLD_MCP_TOKEN"}
  with log.open("w") as out:  # a file, not a pipe: nothing has to drain the server's output
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)
  try:
    deadline = time.monotonic() + _START_TIMEOUT_S
    while not (found := re.search(r"serving MCP on (\S+)", log.read_text())):
      if proc.poll() is not None or time.monotonic() > deadline:
        raise SystemExit(f"conformance: the MCP server did not start; see {log}")
      time.sleep(0.1)
    yield found.group(1)
  finally:
    proc.send_signal(signal.SIGINT)
    try:
      proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
      proc.kill()
      proc.wait()


def _failed_scenarios(results: Path) -> dict[str, bool]:
  """Each scenario the suite ran, and whether it failed: a failure or a warning among its
  checks, as the suite itself decides against the expected failures."""
  failed = {}
  for checks in results.glob("server-*/checks.json"):
    name = re.sub(r"^server-|-\d{4}-\d{2}-\d{2}T[\d-]+Z$", "", checks.parent.name)
    statuses = {check["status"] for check in json.loads(checks.read_text())}
    failed[name] = bool({"FAILURE", "WARNING"} & statuses)
  return failed


if __name__ == "__main__":
  run_main(main)
