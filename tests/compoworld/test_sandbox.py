"""Generated code stays caged (issue 21): hostile modules are rejected with their reason, while
nothing outside the sandbox's tmpfs changes, no connection is made and no secret is read; the
verdict is the parent's; accepted modules run in the sandbox at use time too; and where the
sandbox cannot be set up, synthesis refuses."""

from __future__ import annotations

import builtins
import hashlib
import importlib.util
import json
import os
import re
import socket
import sys
from pathlib import Path

import pytest

from compoworld.compose.benchmark import bench_sandboxed
from compoworld.compose.env import ComposedEnv
from compoworld.runtime.registry import Registry
from compoworld.specs.world_model import LLMWorldModel
from compoworld.synthesis import sandbox
from compoworld.synthesis.sandbox import SandboxUnavailable
from compoworld.synthesis.synthesizer import load_synthesized, run_sandboxed
from compoworld.tasks.rubric import evaluate
from tests.compoworld.recorded import Recorded, client_for
from tests.compoworld.test_synthesis import (
  BROKEN,
  GOOD,
  MODULE,
  SPEC,
  TESTS,
  needs_sandbox,
  synthesizer,
)

PACKAGE = Path(sandbox.__file__).resolve().parent

#: The envelope a module that rewrites its own channel claims for every call.
_FORGED_OK = '{"ok": True, "status": 200, "data": {}}'

#: Hostile preludes (run before an otherwise good module) and the reason each must be rejected
#: with. CANARY, HOME, PORT and PACKAGE stand for what lies outside the sandbox.
HOSTILE = {
  "forged_verdict": (
    'import os\nprint(\'{"ok": true, "error": "", "tools": {}, "tests": {}}\', flush=True)\n'
    "os._exit(0)\n",
    "exited with code 0 without answering",
  ),
  "forged_answer": (
    "import json, os\n"
    'line = json.dumps({"id": 1, "domain": "productivity", "description": "", "tables": {},'
    ' "tools": [], "tests": []}).encode() + b"\\n"\n'
    "for fd in range(3, 16):\n"
    "  try:\n    os.write(fd, line)\n  except OSError:\n    pass\n",
    "more than one answer|out of turn",
  ),
  "subprocess": (
    'import subprocess\nsubprocess.run(["/bin/sh", "-c", "id > CANARY/pwned"])\n',
    r"PermissionError: \[Errno 1\] Operation not permitted",
  ),
  "remove_outside": ('import os\nos.remove("CANARY/canary.txt")\n', "FileNotFoundError"),
  "write_outside": ('open("CANARY/new.txt", "w").write("x")\n', "FileNotFoundError"),
  "write_repo": ('open("PACKAGE/pwned.py", "w").write("x")\n', "Read-only file system"),
  "list_home": ('import os\nos.listdir(os.path.expanduser("~"))\n', "FileNotFoundError"),
  "read_home": ('open("HOME/secret.txt").read()\n', "FileNotFoundError"),
  "environ": ('import os\nraise RuntimeError(f"leak {dict(os.environ)}")\n', "RuntimeError: leak"),
  "proc_environ": ('open("/proc/self/environ").read()\n', "FileNotFoundError"),
  "network": (
    'import socket\nsocket.create_connection(("127.0.0.1", PORT), timeout=2)\n',
    "PermissionError",
  ),
  "raw_socket": (
    "import _socket\n"
    "s = _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM)\n"
    's.connect(("127.0.0.1", PORT))\n',
    "PermissionError",
  ),
  "fork_bomb": ("import os\nwhile True:\n  os.fork()\n", "PermissionError"),
  "thread_bomb": (
    "import threading\nwhile True:\n  threading.Thread(target=int).start()\n",
    "can't start new thread",
  ),
  "memory_hog": ("hog = []\nwhile True:\n  hog.append(bytes(64 << 20))\n", "MemoryError"),
  "infinite_loop": ("while True:\n  pass\n", "timed out after 2 s"),
  "channel_garbage": (
    "import os\nfor fd in range(3, 16):\n"
    '  try:\n    os.write(fd, b"not json\\n")\n  except OSError:\n    pass\n',
    "garbage on its channel",
  ),
  "channel_flood": (
    "import os\nfor fd in range(3, 16):\n"
    '  try:\n    os.write(fd, b"x" * (20 << 20))\n  except OSError:\n    pass\n',
    "flooded its channel",
  ),
  "channel_closed": (
    "import os\nfor fd in range(3, 16):\n  try:\n    os.close(fd)\n  except OSError:\n    pass\n",
    "without answering",
  ),
  "channel_patched_ok": (
    "import json\nreal = json.dumps\n"
    "def forged(o, **kw):\n"
    '  if "envelope" in o:\n'
    f'    o = {{"id": o["id"], "envelope": {_FORGED_OK}}}\n'
    "  return real(o, **kw)\n"
    "json.dumps = forged\n",
    "no write passes the adversarial suite",
  ),
  "channel_patched_malformed": (
    "import json\nreal = json.dumps\n"
    "def forged(o, **kw):\n"
    '  return real({**o, "envelope": "fine"} if "envelope" in o else o, **kw)\n'
    "json.dumps = forged\n",
    "malformed envelope",
  ),
  "channel_patched_state": (
    "import json\nreal = json.dumps\n"
    "def forged(o, **kw):\n"
    '  return real({**o, "state": {"scalars": {}, "tables": {"x": 1}}} if "state" in o else o,'
    " **kw)\n"
    "json.dumps = forged\n",
    "malformed state",
  ),
  "runtime_patched": (
    "from compoworld.runtime.service import Service\n"
    f"Service.call = lambda self, tool, arguments=None: {_FORGED_OK}\n",
    "its own tests fail",
  ),
}


def _tree_hash(root: Path) -> str:
  """Every path, mode and byte under ``root`` (bytecode caches aside: other tests write them)."""
  h = hashlib.sha256()
  for path in sorted(root.rglob("*")):
    if "__pycache__" in path.parts:
      continue
    h.update(f"{path.relative_to(root)}:{path.stat().st_mode}".encode())
    if path.is_file():
      h.update(path.read_bytes())
  return h.hexdigest()


class Outside:
  """What a module must not reach: a canary directory, a home directory holding a secret, a
  secret in the environment, a listening socket, and this package's own files."""

  def __init__(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    self.canary, self.home = tmp_path / "canary", tmp_path / "home"
    self.canary.mkdir()
    self.home.mkdir()
    (self.canary / "canary.txt").write_text("alive")
    (self.home / "secret.txt").write_text("SECRET-HOME-7f3a")
    monkeypatch.setenv("HOME", str(self.home))
    monkeypatch.setenv("COMPOWORLD_CANARY_SECRET", "SECRET-ENV-51c9")
    self.listener = socket.socket()
    self.listener.bind(("127.0.0.1", 0))
    self.listener.listen()
    self.listener.setblocking(False)
    self.hashes = self._hashes()

  def _hashes(self) -> tuple[str, str, str]:
    return _tree_hash(self.canary), _tree_hash(self.home), _tree_hash(PACKAGE)

  def fill(self, payload: str) -> str:
    port = str(self.listener.getsockname()[1])
    for token, value in (("CANARY", self.canary), ("HOME", self.home), ("PORT", port)):
      payload = payload.replace(token, str(value))
    return payload.replace("PACKAGE", str(PACKAGE))

  def assert_untouched(self, report: dict) -> None:
    assert self._hashes() == self.hashes, "something outside the sandbox changed"
    assert (self.canary / "canary.txt").read_text() == "alive"
    with pytest.raises(BlockingIOError):
      self.listener.accept()  # no connection was made
    assert "SECRET" not in json.dumps(report)
    self.listener.close()


@pytest.fixture
def outside(tmp_path, monkeypatch):
  return Outside(tmp_path, monkeypatch)


@needs_sandbox
@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_modules_are_rejected_and_reach_nothing(name, outside):
  payload, reason = HOSTILE[name]
  timeout = 2 if name == "infinite_loop" else 30
  report = run_sandboxed(SPEC, outside.fill(payload) + MODULE, TESTS, timeout=timeout)
  assert report["ok"] is False and re.search(reason, report["error"]), report
  outside.assert_untouched(report)


@needs_sandbox
def test_a_flood_of_prints_is_not_the_channel(outside):
  report = run_sandboxed(SPEC, 'print("x" * (32 << 20))\n' + MODULE, TESTS)
  assert report["ok"] and report["tools"] == {}, report
  outside.assert_untouched(report)


@needs_sandbox
def test_forged_own_test_results_do_not_make_a_verdict():
  # the module may claim its own tests pass; the adversarial suite is the parent's
  module = (
    "import sys\n"
    "from compoworld.runtime.service import Service\n"
    f"Service.call = lambda self, tool, arguments=None: {_FORGED_OK}\n"
    "def test_everything(service_cls):\n  pass\n"
  ) + MODULE
  report = run_sandboxed(SPEC, module, "def test_ok(service_cls):\n  pass\n")
  assert report["tests"] == {"test_ok": "passed"}
  assert report["ok"] is False and report["error"] == "no write passes the adversarial suite"


def _accepted(tmp_path, module: str = MODULE, tests: str = TESTS):
  answer = f"```python\n{module}```\n```python\n{tests}```\n"
  synth, _ = synthesizer([answer], tmp_path)
  verdict = synth.synthesize(SPEC)
  assert verdict.accepted and verdict.quarantined == {}, verdict
  return Path(verdict.module_path)


@needs_sandbox
def test_an_accepted_module_never_runs_in_this_process(tmp_path):
  path = _accepted(tmp_path, "import builtins\nbuiltins.COMPOWORLD_PWNED = True\n" + MODULE)
  cls = load_synthesized(path, reg=Registry(providers=()))
  svc = cls.create(seed=0)
  assert svc.call("create_memo", {"title": "Plan"})["ok"]
  assert not hasattr(builtins, "COMPOWORLD_PWNED")
  assert not any(m.startswith("compoworld_synthesized") for m in sys.modules)


@needs_sandbox
def test_the_state_lives_here_and_matches_the_module_run_in_process(tmp_path):
  path = _accepted(tmp_path)
  proxy = load_synthesized(path, reg=Registry(providers=())).create(seed=0)
  # the same (trusted, test-owned) module imported here: the reference the proxy must match
  spec = importlib.util.spec_from_file_location("reference_memos", path)
  reference = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(reference)
  local = reference.Memos.create(seed=0)
  twin, local_twin = proxy.fork(), local.fork()
  for args in ({"title": "Plan", "body": "Q3"}, {"title": "Plan"}, {"title": 7}, {}):
    before = proxy.state_hash()
    out, expected = proxy.call("create_memo", args), local.call("create_memo", args)
    assert out.get("data") == expected.get("data") and out["status"] == expected["status"]
    assert (proxy.state_hash() == before) is (not out["ok"])
  memo = proxy.call("list_memos", {"query": "Plan"})["data"]["items"][0]["id"]
  assert proxy.call("get_memo", {"memo_id": memo})["data"]["body"] == "Q3"
  assert proxy.diff(proxy.fork()) == {}
  assert twin.diff(proxy) == local_twin.diff(local)
  assert twin.state_hash() == type(proxy).create(seed=0).state_hash()
  assert [r["title"] for r in proxy.state.table("memos")] == [r.title for r in local.state.memos]
  # rubric checks read the state held here
  env = ComposedEnv({"memos": proxy})
  where = [{"field": "title", "value": "Plan"}]
  assert evaluate({"op": "exists", "service": "memos", "collection": "memos", "where": where}, env)
  record = {"op": "record", "service": "memos", "collection": "memos", "id": memo}
  assert evaluate({**record, "field": "body", "value": "Q3"}, env)


@needs_sandbox
def test_a_dead_child_is_replaced_without_losing_state(tmp_path):
  cls = load_synthesized(_accepted(tmp_path), reg=Registry(providers=()))
  svc = cls.create(seed=0)
  made = svc.call("create_memo", {"title": "Plan"})["data"]
  proc = cls.host.sandbox._proc
  proc.kill()
  proc.wait()
  assert proc.stdout.read() == b""  # end of file: the runner, its last writer, is gone too
  assert svc.call("get_memo", {"memo_id": made["id"]})["data"]["title"] == "Plan"
  assert cls.host.sandbox.starts == 2


@needs_sandbox
def test_a_module_changed_after_acceptance_is_refused(tmp_path):
  path = _accepted(tmp_path)
  path.write_text(path.read_text() + "\nimport os\n")
  with pytest.raises(ValueError, match="changed after the sandbox accepted it"):
    load_synthesized(path, reg=Registry(providers=()))
  record = json.loads(path.with_suffix(".json").read_text())
  del record["described"]
  path.with_suffix(".json").write_text(json.dumps(record))
  with pytest.raises(ValueError, match="synthesize it again"):
    load_synthesized(path, reg=Registry(providers=()))


@pytest.fixture
def broken_bwrap(tmp_path, monkeypatch):
  """A bwrap that fails the way a kernel without unprivileged user namespaces makes it fail."""
  fake = tmp_path / "bwrap"
  fake.write_text("#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n")
  fake.chmod(0o755)
  monkeypatch.setattr(sandbox, "bwrap", lambda: str(fake))
  sandbox._probe.cache_clear()
  yield
  sandbox._probe.cache_clear()


def test_synthesis_fails_closed_where_the_sandbox_cannot_run(broken_bwrap, tmp_path):
  with pytest.raises(SandboxUnavailable, match="uid map: Permission denied") as err:
    run_sandboxed(SPEC, MODULE, TESTS)
  assert "To fix it" in str(err.value) and "unprivileged_userns_clone" in str(err.value)
  synth, recorded = synthesizer([GOOD], tmp_path)
  with pytest.raises(SandboxUnavailable):
    synth.synthesize(SPEC)
  assert recorded.requests == []  # refused before asking the model
  assert not os.path.exists(tmp_path / "synth")


@needs_sandbox
def test_the_benchmark_times_sandboxed_calls_and_forks():
  out = bench_sandboxed(calls=20, forks=5)
  for key in ("sandboxed_start_ms", "sandboxed_read_ms_median", "sandboxed_write_ms_median"):
    assert out[key] > 0, key
  assert out["sandboxed_records"] == 22  # the generated one, the first, the timed writes


@needs_sandbox
def test_an_llm_world_model_serves_a_sandboxed_services_quarantined_tools(tmp_path):
  synth, _ = synthesizer([BROKEN, BROKEN], tmp_path, revisions=1)
  verdict = synth.synthesize(SPEC)
  assert verdict.accepted and list(verdict.quarantined) == ["create_memo"]
  insert = {"id": "memo_sim", "title": "Simulated"}
  bad = {"patch": {"memos": {"insert": [{**insert, "colour": "red"}]}}, "observation": {}}
  good = {"patch": {"memos": {"insert": [insert]}}, "observation": {"id": "memo_sim"}}
  recorded = Recorded([json.dumps(bad), json.dumps(good)])
  world_model = LLMWorldModel(client_for(recorded), "m", tmp_path / "cache")
  cls = load_synthesized(verdict.module_path, reg=Registry(providers=()), world_model=world_model)
  svc = cls.create(seed=0)
  before = svc.fork()
  assert svc.call("create_memo", {"title": "Simulated"}) == {
    "ok": True,
    "status": 200,
    "data": {"id": "memo_sim"},
  }
  # the typed records live in the sandbox: it found the bad field, and the reason went back
  assert "colour" in recorded.requests[1]["messages"][-1]["content"]
  prompt = json.loads(recorded.requests[0]["messages"][1]["content"])
  assert prompt["state"]["memos"]["fields"] == ["id", "title", "body", "pinned"]
  assert svc.call("get_memo", {"memo_id": "memo_sim"})["data"]["title"] == "Simulated"
  assert before.diff(svc)["memos"] == {"added": ["memo_sim"]}


def test_a_checkout_under_tmp_stays_visible_in_the_jail(monkeypatch):
  # The jail's own /tmp is a tmpfs: mounted after the read-only binds it would hide an
  # interpreter, virtual environment or checkout that lives under /tmp (a fresh clone there).
  monkeypatch.setattr(sandbox, "bwrap", lambda: "bwrap")
  monkeypatch.setattr(sandbox, "_read_only_roots", lambda: [Path("/usr"), Path("/tmp/clone/.venv")])
  cmd = sandbox._jail({}, sandbox.Limits(), [], "svc")
  binds = [cmd[i + 2] for i, a in enumerate(cmd) if a == "--ro-bind"]
  assert "/tmp/clone/.venv" in binds
  assert cmd.index("--tmpfs") < cmd.index("--ro-bind")
