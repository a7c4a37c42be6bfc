"""``--synthesis=llm`` end to end: the library build sends services to a model behind the project's
own OpenAI-compatible server (``rl.serve.server``), the sandbox runs what it wrote, the property
checks judge it, and the accepted module is what the registry loads.

The model is scripted, as in the LLM author's tests: it answers a synthesis prompt for the memos
service with a recorded module. Everything else is the real code path: the OpenAI client, HTTP,
the chat template and tokenizer on the server, the sandbox and the adversarial suite.
"""

import json
from pathlib import Path

import pytest

from compoworld.llm import make_client
from compoworld.runtime.registry import Registry
from compoworld.specs.build import build_library, load_compiled_library, read_manifest
from compoworld.synthesis.sandbox import unavailable_reason
from compoworld.synthesis.synthesizer import Synthesizer
from compoworld.tasks.facets import FacetRegistry
from models import abstract_model, get_config
from rl.data.chat import IM_END
from rl.serve.policy import Policy
from rl.serve.server import BackgroundServer, create_app

UNAVAILABLE = unavailable_reason()
ANSWER = (Path(__file__).parents[1] / "compoworld" / "data" / "synth_notes_answer.md").read_text()
MODEL, KEY = "scripted-coder", "sesame"

pytestmark = pytest.mark.skipif(
  UNAVAILABLE is not None, reason=f"the sandbox is unavailable: {UNAVAILABLE}"
)


class ScriptedCoder(Policy):
  """Answers a prompt that asks for the memos service with the recorded module and tests; any
  other prompt gets an answer with no code (which the synthesizer rejects)."""

  def __init__(self, tokenizer, **kwargs):
    model = abstract_model(get_config("tiny", vocab_size=tokenizer.vocab_size))
    super().__init__(model, tokenizer, name=MODEL, **kwargs)
    self.prompts = []

  def generate(self, prompt_ids, max_tokens, temperature=0.0, seed=0):
    prompt = self.renderer.decode(prompt_ids)
    self.prompts.append(prompt)
    reply = ANSWER if "create_memo" in prompt else "I cannot write that service."
    return self.renderer.encode_text(reply + IM_END)[:max_tokens]


def _corpus(path: Path) -> Path:
  """The memos service and a notes service, as corpus lines."""
  obj = {"type": "object", "additionalProperties": False}
  tools = {
    "memos": [
      ("create_memo", {"title": {"type": "string"}, "body": {"type": "string"}}, ["title"], {}),
      ("get_memo", {"memo_id": {"type": "string"}}, ["memo_id"], {"readOnlyHint": True}),
      (
        "list_memos",
        {"query": {"type": "string"}, "limit": {"type": "integer", "minimum": 1, "maximum": 100}},
        [],
        {"readOnlyHint": True},
      ),
      ("delete_memo", {"memo_id": {"type": "string"}}, ["memo_id"], {}),
    ],
    "tasks": [
      ("create_task", {"title": {"type": "string"}}, ["title"], {}),
      ("get_task", {"task_id": {"type": "string"}}, ["task_id"], {"readOnlyHint": True}),
    ],
  }
  lines = [
    {
      "source": "test",
      "server": server,
      "category": "productivity",
      "name": name,
      "description": f"{name.replace('_', ' ')}.",
      "inputSchema": {**obj, "properties": props, "required": required},
      "meta": {"annotations": hints},
    }
    for server, specs in tools.items()
    for name, props, required, hints in specs
  ]
  path.write_text("".join(json.dumps(line) + "\n" for line in lines))
  return path


@pytest.fixture(scope="module")
def served(tokenizer):
  policy = ScriptedCoder(tokenizer, max_context=1 << 17, default_max_tokens=8192)
  with BackgroundServer(create_app(policy, api_key=KEY)) as server:
    server.policy = policy
    yield server


def test_every_service_goes_through_the_model_behind_the_policy_server(served, tmp_path):
  specs = _corpus(tmp_path / "specs.jsonl")
  client = make_client(base_url=served.url, api_key=KEY)
  synth = Synthesizer(client, MODEL, tmp_path / "lib" / "synthesized", revisions=0)

  # repair mode: the compiler quarantined nothing, so the model is never asked
  repaired = build_library(specs, tmp_path / "repair", synthesizer=synth, progress=False)
  assert repaired["quarantined"] == 0 and served.policy.prompts == []

  summary = build_library(
    specs, tmp_path / "lib", synthesizer=synth, synthesis="llm", progress=False
  )
  assert len(served.policy.prompts) == 2  # one prompt a service: both went to the model
  services = {s["name"]: s for s in read_manifest(tmp_path / "lib")["services"]}
  memos, tasks = services["memos"], services["tasks"]
  assert memos["synthesis"]["accepted"] is True
  assert {t["implementation"] for t in memos["tools"]} == {"synthesized"}
  assert {t["status"] for t in memos["tools"]} == {"deterministic"}
  # no code in the answer: rejected, and the compiled service stays
  assert tasks["synthesis"]["accepted"] is False and "implementation" not in tasks["tools"][0]
  assert summary["quarantined"] == 0

  reg = Registry(providers=())
  assert sorted(load_compiled_library(tmp_path / "lib", reg=reg, facets=FacetRegistry())) == [
    "memos",
    "tasks",
  ]
  assert reg.get("memos").__module__ == "compoworld_synthesized.memos"
  svc = reg.get("memos").create(seed=0)
  made = svc.call("create_memo", {"title": "Q3 plan"})
  assert svc.call("get_memo", {"memo_id": made["data"]["id"]})["data"]["title"] == "Q3 plan"


def test_a_share_of_the_services_goes_to_the_model(served, tmp_path):
  specs = _corpus(tmp_path / "specs.jsonl")
  client = make_client(base_url=served.url, api_key=KEY)
  synth = Synthesizer(client, MODEL, tmp_path / "synth", revisions=0)
  before = len(served.policy.prompts)
  build_library(specs, tmp_path / "none", synthesizer=synth, synthesis="llm", synthesis_share=0.0)
  assert len(served.policy.prompts) == before
  with pytest.raises(ValueError, match="share"):
    build_library(specs, tmp_path / "bad", synthesizer=synth, synthesis="llm", synthesis_share=2)
