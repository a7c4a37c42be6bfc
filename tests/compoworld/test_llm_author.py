"""The LLM author through the real ``openai`` client, with recorded answers on the transport."""

import json
import random

import pytest

from compoworld import registry
from compoworld.agents.llm_author import LLMAuthor
from compoworld.compose.env import ComposedEnv
from compoworld.llm import extract_json
from compoworld.tasks.authoring import AuthoringError, realize
from compoworld.tasks.facets import facets
from compoworld.tasks.generate import generate_one
from compoworld.tasks.task import gate_failures
from compoworld.tasks.walks import sample_single_walk, sample_walk
from tests.compoworld.recorded import Recorded, client_for


def distractor(walk):
  return [next(s for s in registry.names() if s not in walk.services)]


def scenario_of(task):
  """What a good model writes for a task: its scenario JSON."""
  return {
    "instruction": task.instruction,
    "patches": [p.model_dump(exclude_none=True) for p in task.initial_state.patches],
    "solution": [c.model_dump() for c in task.reference_solution],
    "answer": task.reference_answer,
    "rubric": [c.model_dump() for c in task.rubric],
    "stale": task.meta["stale_substitution"],
  }


@pytest.fixture(scope="module")
def walk_and_scenario():
  """A walk, and a scenario JSON for it that passes the gates (what a good model writes)."""
  reg = facets.load()
  rng = random.Random(11)
  while True:
    walk = sample_walk(reg, rng, 5, 8)
    if walk is None:
      continue
    env = ComposedEnv.from_services(walk.services, seed=2, distractors=distractor(walk))
    try:
      task = realize(walk, reg, env, rng, "ref", 2, {})
    except AuthoringError:
      continue
    if not gate_failures(task):
      break
  return walk, scenario_of(task)


def tool_call(name, arguments, call_id="c1"):
  return {
    "role": "assistant",
    "content": None,
    "tool_calls": [
      {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
    ],
  }


def test_four_phases_with_a_revision(walk_and_scenario):
  walk, scenario = walk_and_scenario
  svc = walk.services[0]
  recorded = Recorded(
    [
      tool_call("list_services", "{}"),
      tool_call("sample_records", json.dumps({"service": svc})),
      {"role": "assistant", "content": "I have what I need."},
      {"role": "assistant", "content": "Here it is: {not json"},
      {"role": "assistant", "content": f"```json\n{json.dumps(scenario)}\n```"},
    ]
  )
  env = ComposedEnv.from_services(walk.services, seed=2, distractors=distractor(walk))
  task = LLMAuthor(client_for(recorded), "recorded").realize(
    walk, env, random.Random(0), "llm-1", 2, {"index": 0}
  )
  assert gate_failures(task) == [] and task.meta["author"] == "llm:recorded"
  assert task.instruction == scenario["instruction"]
  # explore saw real tool results; the revision request quoted the parse error
  first_tool_result = recorded.requests[1]["messages"][-1]
  assert first_tool_result["role"] == "tool" and json.loads(first_tool_result["content"])["ok"]
  revise = recorded.requests[4]["messages"][-1]["content"]
  assert revise.startswith("Revise the JSON") and "JSON" in revise
  assert {t["function"]["name"] for t in recorded.requests[0]["tools"]} >= {
    "list_services",
    "call_tool",
    "sample_records",
  }


def test_gate_failures_go_back_to_the_model_and_revisions_are_bounded(walk_and_scenario):
  walk, scenario = walk_and_scenario
  lazy = {**scenario, "solution": scenario["solution"][:1]}  # never finishes the walk
  recorded = Recorded([{"role": "assistant", "content": "ready"}] + [
    {"role": "assistant", "content": json.dumps(lazy)}
  ] * 3)  # fmt: skip
  env = ComposedEnv.from_services(walk.services, seed=2, distractors=distractor(walk))
  author = LLMAuthor(client_for(recorded), "recorded", max_revisions=2)
  with pytest.raises(AuthoringError) as err:
    author.realize(walk, env, random.Random(0), "llm-2", 2, {})
  assert err.value.reason == "llm_revisions_exhausted"
  assert len(recorded.requests) == 4  # explore + 1 design + 2 revisions
  assert "follow the walk" in recorded.requests[-1]["messages"][-1]["content"]


def test_a_single_service_walk_goes_through_the_llm_author():
  reg = facets.load()
  rng = random.Random(5)
  for _ in range(200):
    walk = sample_single_walk(reg, rng, rng.randint(4, 6))
    if walk is None:
      continue
    env = ComposedEnv.from_services(walk.services, seed=3, distractors=distractor(walk))
    try:
      reference = realize(walk, reg, env, rng, "ref", 3, {})
    except AuthoringError:
      continue
    if not gate_failures(reference):
      break
  else:
    pytest.fail("no K = 1 walk realised in 200 draws")
  assert len(walk.services) == 1
  recorded = Recorded(
    [
      {"role": "assistant", "content": "I know the service."},
      {"role": "assistant", "content": json.dumps(scenario_of(reference))},
    ]
  )
  env = ComposedEnv.from_services(walk.services, seed=3, distractors=distractor(walk))
  task = LLMAuthor(client_for(recorded), "recorded").realize(
    walk, env, random.Random(0), "llm-k1", 3, {}
  )
  assert gate_failures(task) == [] and task.services == walk.services
  assert task.instruction == reference.instruction and len(recorded.requests) == 2


def test_generate_one_uses_an_llm_author():
  class Fails:
    def realize(self, *args):
      raise AuthoringError("llm_revisions_exhausted")

  rejected = __import__("collections").Counter()
  assert generate_one(0, 0, author=Fails(), max_attempts=6, rejected=rejected) is None
  # every attempt that found a walk went to the LLM author and was rejected by it
  assert rejected["llm_revisions_exhausted"] == 6 - rejected["no_walk"] > 0


@pytest.mark.parametrize(
  "text,value",
  [('{"a": 1}', {"a": 1}), ('sure:\n```json\n{"a": 2}\n```', {"a": 2}), ('x {"a": 3} y', {"a": 3})],
)
def test_extract_json(text, value):
  assert extract_json(text) == value


def test_extract_json_says_why():
  with pytest.raises(ValueError, match="no JSON"):
    extract_json("no braces here")
