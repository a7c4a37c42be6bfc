"""The LLM synthesis path through the real client and the real sandbox, with recorded answers."""

import json
from pathlib import Path

import pytest

from compoworld.runtime.registry import Registry
from compoworld.specs.build import (
  COMPILER_VERSION,
  compile_and_validate,
  load_compiled_library,
  synthesize_entry,
)
from compoworld.specs.ingest import McpTool, ServiceSpec
from compoworld.synthesis.sandbox import unavailable_reason
from compoworld.synthesis.synthesizer import (
  Synthesizer,
  load_synthesized,
  parse_answer,
  run_sandboxed,
)
from compoworld.tasks.facets import FacetRegistry
from tests.compoworld.recorded import Recorded, client_for

UNAVAILABLE = unavailable_reason()
#: Tests that run generated code skip, saying why, where the sandbox cannot be set up.
needs_sandbox = pytest.mark.skipif(
  UNAVAILABLE is not None, reason=f"the sandbox is unavailable: {UNAVAILABLE}"
)

GOOD = (Path(__file__).parent / "data" / "synth_notes_answer.md").read_text()
MODULE, TESTS = parse_answer(GOOD)
# create_memo keeps only a placeholder title (and the answer leaves out the tests that would
# notice): the adversarial suite has to catch it
BROKEN = (
  "```python\n"
  + MODULE.replace(
    'memo = Memo(id=self.state.new_id("memo"), title=title, body=body)',
    'memo = Memo(id=self.state.new_id("memo"), title="untitled")',
  )
  + "```\n"
)


def _schema(props, required=()):
  return {
    "type": "object",
    "properties": props,
    "required": list(required),
    "additionalProperties": False,
  }


SPEC = ServiceSpec(
  name="memos",
  source="test",
  server="memos",
  domain="productivity",
  description="Short memos.",
  tools=(
    McpTool(name="create_memo", description="Create a memo.",
            input_schema=_schema({"title": {"type": "string"}, "body": {"type": "string"}}, ["title"])),
    McpTool(name="get_memo", description="Read a memo.", annotations={"readOnlyHint": True},
            input_schema=_schema({"memo_id": {"type": "string"}}, ["memo_id"])),
    McpTool(name="list_memos", description="List memos.", annotations={"readOnlyHint": True},
            input_schema=_schema({"query": {"type": "string"},
                                  "limit": {"type": "integer", "minimum": 1, "maximum": 100}})),
    McpTool(name="delete_memo", description="Delete a memo.",
            input_schema=_schema({"memo_id": {"type": "string"}}, ["memo_id"])),
  ),
)  # fmt: skip


def synthesizer(answers, tmp_path, **kwargs):
  recorded = Recorded(answers)
  return Synthesizer(client_for(recorded), "recorded", tmp_path / "synth", **kwargs), recorded


@needs_sandbox
def test_a_good_module_is_accepted_saved_and_loadable(tmp_path):
  synth, recorded = synthesizer([GOOD], tmp_path)
  verdict = synth.synthesize(SPEC)
  assert (verdict.accepted, verdict.quarantined, verdict.attempts) == (True, {}, 1)
  assert verdict.tests == {"test_create_then_get": "passed", "test_unknown_memo_is_404": "passed"}
  prompt = recorded.requests[0]["messages"]
  assert "create_memo" in prompt[1]["content"] and "class Notes(Service)" in prompt[0]["content"]
  reg = Registry(providers=())
  cls = load_synthesized(verdict.module_path, reg=reg)
  svc = reg.get("memos").create(seed=0)
  made = svc.call("create_memo", {"title": "Plan"})
  assert svc.call("get_memo", {"memo_id": made["data"]["id"]})["data"]["title"] == "Plan"
  assert cls.__module__ == "compoworld_synthesized.memos"


@needs_sandbox
def test_sandbox_errors_go_back_to_the_model_for_a_revision(tmp_path):
  hostile = "```python\nimport socket\nsocket.create_connection(('127.0.0.1', 80))\n```"
  synth, recorded = synthesizer([hostile, GOOD], tmp_path)
  verdict = synth.synthesize(SPEC)
  assert verdict.accepted and verdict.attempts == 2
  feedback = recorded.requests[1]["messages"][-1]["content"]
  assert "import failed: PermissionError: [Errno 1] Operation not permitted" in feedback


@needs_sandbox
@pytest.mark.parametrize(
  ("module", "timeout", "error"),
  [
    ("x = bytearray(8 * 1024 ** 3)\n", 30, "MemoryError"),
    (
      "import urllib.request\nurllib.request.urlopen('http://127.0.0.1:9')\n",
      30,
      "Operation not permitted",
    ),
    ("open('/tmp/escape.txt', 'w').write('x' * (4 << 20))\n", 30, "File too large"),
    ("class Nothing:\n  pass\n", 30, "one Service subclass named 'memos'"),
  ],
)
def test_the_sandbox_contains_bad_modules(module, timeout, error):
  report = run_sandboxed(SPEC, module, timeout=timeout)
  assert report["ok"] is False and error in report["error"]


@needs_sandbox
def test_failing_own_tests_reject_the_module():
  report = run_sandboxed(SPEC, MODULE, "def test_wrong(service_cls):\n  assert False, 'no'\n")
  assert report["error"] == "its own tests fail: test_wrong"


@needs_sandbox  # synthesis refuses to start without one, whatever the answer
def test_a_module_that_never_works_quarantines_every_tool(tmp_path):
  synth, _ = synthesizer(["no code, sorry"], tmp_path, revisions=0)
  verdict = synth.synthesize(SPEC)
  assert not verdict.accepted and verdict.module_path is None
  assert verdict.quarantined == {
    t.name: "synthesis failed: the answer has no fenced python block" for t in SPEC.tools
  }


@needs_sandbox
def test_tools_failing_the_suite_are_quarantined_and_simulated(tmp_path):
  synth, _ = synthesizer([BROKEN, BROKEN], tmp_path, revisions=1)
  verdict = synth.synthesize(SPEC)
  assert verdict.accepted and list(verdict.quarantined) == ["create_memo"]
  assert verdict.quarantined["create_memo"].startswith("create_get: expected ")
  cls = load_synthesized(verdict.module_path, reg=Registry(providers=()))
  out = cls.create(seed=0).call("create_memo", {"title": "Plan"})
  assert out["ok"] and out["data"]["simulated"] is True


def test_rejected_modules_are_never_imported(tmp_path):
  (tmp_path / "memos.py").write_text("raise SystemExit('imported!')\n")
  (tmp_path / "memos.json").write_text(json.dumps({"accepted": False}))
  with pytest.raises(ValueError, match="never imported"):
    load_synthesized(tmp_path / "memos.py", reg=Registry(providers=()))


def test_parse_answer():
  assert parse_answer("```python\na = 1\n```\n```py\nb = 2\n```") == ("a = 1\n", "b = 2\n")
  assert parse_answer("```python\na = 1\n```") == ("a = 1\n", "")
  with pytest.raises(ValueError, match="no fenced python block"):
    parse_answer("nothing")


@needs_sandbox
def test_the_build_hands_quarantined_services_to_synthesis_and_loads_the_result(tmp_path):
  entry = compile_and_validate(SPEC)
  entry["tools"][0].update(status="quarantined", reason="create_get: expected ...")
  synth, _ = synthesizer([GOOD], tmp_path)
  synthesize_entry(entry, synth)
  assert [(t["status"], t.get("implementation")) for t in entry["tools"]] == [
    ("deterministic", "synthesized")
  ] * 4
  manifest = {"compiler": COMPILER_VERSION, "services": [entry]}
  (tmp_path / "manifest.json").write_text(json.dumps(manifest))
  reg = Registry(providers=())
  assert load_compiled_library(tmp_path, reg=reg, facets=FacetRegistry()) == ["memos"]
  assert reg.get("memos").__module__ == "compoworld_synthesized.memos"
