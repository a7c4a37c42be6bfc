"""The evaluation harness's OpenAI agent solves tasks through the policy server over real HTTP.

Everything on the path is the real one: uvicorn on a loopback port, the server's request checks
and chat-format prompt rendering, the parsing of generated ids back into OpenAI ``tool_calls``,
the official ``openai`` client inside ``OpenAIAgent`` (the agent used for hosted models), the
episode loop, the composed environment and the rubric. Only the choice of ids is scripted, since
a tiny model cannot solve a task: ``OraclePolicy.generate`` (the documented override point)
reads the conversation from the prompt ids and returns the oracle's next turn as the ids a model
would generate in the chat format.
"""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from compoworld.agents.agent import OracleAgent
from compoworld.agents.episode import run_episode
from compoworld.agents.evaluation import evaluate, run_evaluation
from compoworld.tasks.task import save_tasks
from envs.scenarios import community_meetup
from models import abstract_model, get_config
from rl.data.chat import IM_END, IM_START, TOOL_RESPONSE, assistant_body
from rl.serve.policy import Policy
from rl.serve.server import BackgroundServer, create_app

REPO = Path(__file__).resolve().parents[2]
MODEL, KEY = "oracle-policy", "sesame"
_ASSISTANT = f"{IM_START}assistant\n"


class OraclePolicy(Policy):
  """Speaks the oracle's turns. The task is the one whose instruction is the prompt's user turn;
  the assistant turns already in the prompt say how far the oracle has got."""

  def __init__(self, tokenizer, tasks, **kwargs):
    # The weights are never run (generate is scripted): the abstract model is enough.
    model = abstract_model(get_config("tiny", vocab_size=tokenizer.vocab_size))
    super().__init__(model, tokenizer, name=MODEL, **kwargs)
    self.tasks, self.prompts = list(tasks), []

  def generate(self, prompt_ids, max_tokens, temperature=0.0, seed=0):
    prompt = self.renderer.decode(prompt_ids)
    self.prompts.append(prompt)
    [task] = [t for t in self.tasks if f"{IM_START}user\n{t.instruction}{IM_END}" in prompt]
    assert prompt.endswith(_ASSISTANT)  # the generation prompt
    oracle = OracleAgent()
    oracle.reset(task)
    for _ in range(prompt.count(_ASSISTANT) - 1):  # the turns taken so far
      oracle.act([], [])
    reply = oracle.act([], [])
    return self.renderer.encode_text(assistant_body(reply) + IM_END)[:max_tokens]


@pytest.fixture(scope="module")
def solve_tasks(tasks):
  """The Appendix D meetup (its rubric reads state) and a generated task whose rubric also
  checks the final answer."""
  answered = next(t for t in tasks if t.reference_answer is not None)
  return [community_meetup(0), answered]


@pytest.fixture(scope="module")
def server(tokenizer, solve_tasks):
  policy = OraclePolicy(tokenizer, solve_tasks, max_context=1 << 17, default_max_tokens=4096)
  with BackgroundServer(create_app(policy, api_key=KEY)) as served:
    served.policy = policy
    yield served


def test_openai_agent_solves_tasks_through_the_policy_server(server, solve_tasks):
  kwargs = {"model": MODEL, "base_url": server.url, "api_key": KEY, "max_retries": 0}
  results = evaluate(solve_tasks, "openai", kwargs, progress=False)
  assert server.policy.prompts, "the policy never generated: the requests did not reach it"
  for task, result in zip(solve_tasks, results, strict=True):
    [sample] = result["samples"]
    assert sample["error"] is None and sample["agent"] == "openai"
    assert sample["success"] is True and sample["score"] == 1.0
    assert all(sample["result"]["criteria"])
    # The same calls and answer as the oracle in process, answered with the same bytes.
    local, _ = run_episode(OracleAgent(), task)
    assert sample["final_answer"] == local.final_answer
    assert sample["tool_calls"] == local.tool_calls and sample["tool_errors"] == 0
    assert sample["turns"] == local.turns
    tool_bytes = [m["content"] for m in sample["messages"] if m["role"] == "tool"]
    assert tool_bytes == [m["content"] for m in local.messages if m["role"] == "tool"]
    # The calls came back as OpenAI tool calls parsed by the server, with its ids (the oracle's
    # are call_1, call_2, ...).
    calls = [
      c for m in sample["messages"] if m["role"] == "assistant" for c in m.get("tool_calls") or []
    ]
    assert len(calls) == local.tool_calls
    assert all(re.fullmatch(r"call_\d+_1", c["id"]) for c in calls)
  # Tool results went back to the policy inside <tool_response> in its next prompt.
  assert TOOL_RESPONSE in server.policy.prompts[-1]


def test_evaluation_reads_the_endpoint_from_the_environment(
  server, solve_tasks, tmp_path, monkeypatch
):
  path = tmp_path / "tasks.jsonl"
  save_tasks(solve_tasks[:1], path)
  monkeypatch.setenv("OPENAI_BASE_URL", server.url)
  monkeypatch.setenv("OPENAI_API_KEY", KEY)
  summary = run_evaluation(path, tmp_path / "eval", f"openai:{MODEL}", progress=False, plots=False)
  assert summary["model"] == MODEL
  assert summary["pass_rate"] == summary["rubric_score"] == 1.0 and summary["agent_errors"] == 0


def test_evaluate_script_with_base_url_flag(server, solve_tasks, tmp_path):
  """``python -m experiments.evaluate --agent=openai:MODEL --base_url=URL``, key from the env."""
  path = tmp_path / "tasks.jsonl"
  save_tasks(solve_tasks, path)
  cmd = [sys.executable, "-m", "experiments.evaluate", f"--agent=openai:{MODEL}"]
  cmd += [f"--tasks={path}", f"--workdir={tmp_path / 'eval'}", f"--base_url={server.url}"]
  env = {**os.environ, "OPENAI_API_KEY": KEY}
  env.pop("OPENAI_BASE_URL", None)
  proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
  assert proc.returncode == 0, proc.stderr[-3000:]
  summary = json.loads(proc.stdout.strip().splitlines()[-1])
  assert summary["agent"] == f"openai:{MODEL}" and summary["tasks"] == len(solve_tasks)
  assert summary["pass_rate"] == summary["rubric_score"] == 1.0 and summary["agent_errors"] == 0
  assert summary["pass_hat_k"] == {"1": 1.0}


def test_a_wrong_key_fails_the_sample_with_the_servers_error(server, solve_tasks):
  kwargs = {"model": MODEL, "base_url": server.url, "api_key": "wrong", "max_retries": 0}
  [result] = evaluate(solve_tasks[:1], "openai", kwargs, progress=False)
  [sample] = result["samples"]
  assert sample["success"] is False and sample["score"] == 0.0
  assert "401" in sample["error"] and "invalid API key" in sample["error"]
