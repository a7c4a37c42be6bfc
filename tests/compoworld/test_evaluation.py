"""The evaluation harness: metrics on hand-built results, the oracle and a bad agent on generated
tasks, a recorded OpenAI endpoint, the files the script writes, and determinism."""

import itertools
import json
import math
import subprocess
import sys
from pathlib import Path

import httpx2
import pytest

from compoworld.agents import evaluation
from compoworld.agents.agent import Agent, tool_call_message
from compoworld.agents.evaluation import (
  evaluate,
  markdown,
  pass_hat_k,
  resolve_agent,
  run_evaluation,
  split_info,
  summarize,
  task_labels,
)
from compoworld.compose.env import META_TOOL_NAMES
from compoworld.tasks.generate import generate_tasks
from compoworld.tasks.splits import split_by_services
from compoworld.tasks.task import save_tasks
from envs.scenarios import community_meetup
from experiments.common import write_summary
from tests.compoworld.recorded import URL, completion, mock_http

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tasks():
  tasks, _ = generate_tasks(4, seed=0, progress=False)
  assert len(tasks) == 4
  return tasks


# --- metrics on hand-built results -----------------------------------------------------------


def sample(success, score, turns, calls, errors, final="done", error=None):
  return {
    "success": success,
    "score": score,
    "turns": turns,
    "tool_calls": calls,
    "tool_errors": errors,
    "final_answer": None if error else final,
    "error": error,
  }


def task_result(task_id, domains, functions, k, length, samples):
  return {
    "task_id": task_id,
    "domains": domains,
    "business_functions": functions,
    "K": k,
    "L": length,
    "samples": samples,
  }


HAND_BUILT = [
  task_result(
    "a",
    ["finance", "hr"],
    ["finance", "hr"],
    2,
    7,
    [sample(True, 1.0, 4, 3, 0), sample(True, 1.0, 4, 3, 1), sample(True, 1.0, 6, 5, 0)],
  ),
  task_result(
    "b",
    ["finance"],
    ["finance"],
    2,
    7,
    [sample(True, 1.0, 2, 1, 0), sample(False, 0.5, 10, 8, 4, None), sample(True, 1.0, 2, 1, 0)],
  ),
  task_result(
    "c",
    ["hr"],
    ["hr"],
    3,
    9,
    [
      sample(False, 0.0, 0, 0, 0, error="endpoint down"),
      sample(False, 0.25, 5, 4, 2),
      sample(False, 0.0, 3, 2, 2),
    ],
  ),
]


def test_pass_hat_k_hand_values():
  counts = [(3, 3), (3, 2), (3, 0)]
  # k=1: (1 + 2/3 + 0) / 3;  k=2: (1 + C(2,2)/C(3,2) + 0) / 3;  k=3: (1 + 0 + 0) / 3
  assert pass_hat_k(counts, 1) == pytest.approx(5 / 9)
  assert pass_hat_k(counts, 2) == pytest.approx(4 / 9)
  assert pass_hat_k(counts, 3) == pytest.approx(1 / 3)


def test_pass_hat_k_is_the_chance_that_k_drawn_samples_all_pass():
  # Reference: enumerate every k-subset of each task's samples.
  outcomes = [[1, 0, 1, 1], [0, 0, 1, 0], [1, 1, 1, 1], [0, 0, 0, 0], [1, 0, 0, 1]]
  for k in range(1, 5):
    expected = sum(
      sum(all(s) for s in itertools.combinations(o, k)) / math.comb(4, k) for o in outcomes
    ) / len(outcomes)
    assert pass_hat_k([(4, sum(o)) for o in outcomes], k) == pytest.approx(expected)


@pytest.mark.parametrize("counts,k", [([], 1), ([(3, 4)], 1), ([(3, 1)], 4), ([(3, 1)], 0)])
def test_pass_hat_k_rejects_undefined_input(counts, k):
  with pytest.raises(ValueError):
    pass_hat_k(counts, k)


def test_summary_of_hand_built_results():
  s = summarize(HAND_BUILT)
  assert (s["tasks"], s["samples"], s["samples_per_task"]) == (3, 9, 3)
  assert s["pass_rate"] == pytest.approx(5 / 9, abs=1e-4)
  assert s["rubric_score"] == pytest.approx(5.75 / 9, abs=1e-4)
  assert s["pass_hat_k"] == {"1": 0.5556, "2": 0.4444, "3": 0.3333}
  assert s["tool_error_rate"] == pytest.approx(9 / 27, abs=1e-4)
  # the agent-error sample is a failure but uses no turns: 36 turns over 8 played samples
  assert s["mean_turns"] == 4.5 and s["mean_tool_calls"] == pytest.approx(27 / 8, abs=1e-4)
  assert s["agent_errors"] == 1 and s["no_final_answer"] == 1
  finance = {
    "tasks": 2,
    "samples": 6,
    "pass_rate": 0.8333,
    "rubric_score": 0.9167,
    "tool_error_rate": 0.2381,
    "mean_turns": 4.6667,
  }
  hr = {
    "tasks": 2,
    "samples": 6,
    "pass_rate": 0.5,
    "rubric_score": 0.5417,
    "tool_error_rate": 0.2941,
    "mean_turns": 4.4,
  }
  c = {
    "tasks": 1,
    "samples": 3,
    "pass_rate": 0.0,
    "rubric_score": 0.0833,
    "tool_error_rate": 0.6667,
    "mean_turns": 4.0,
  }
  assert s["by_domain"] == {"finance": finance, "hr": hr}
  assert s["by_business_function"] == {"finance": finance, "hr": hr}
  assert s["by_k"] == {"2": finance, "3": c}
  assert s["by_walk_length"] == {"7": finance, "9": c}
  table = markdown({**s, "agent": "hand", "tasks_file": "x.jsonl", "split": None})
  assert "| pass^k | 0.5556 | 0.4444 | 0.3333 |" in table
  assert "| finance | 2 | 6 | 0.8333 | 0.9167 | 0.2381 | 4.6667 |" in table
  assert "| 9 | 1 | 3 | 0.0 | 0.0833 | 0.6667 | 4.0 |" in table


# --- agents on generated tasks ---------------------------------------------------------------


def test_oracle_scores_one(tasks):
  s = summarize(evaluate(tasks, "oracle", k=2, progress=False))
  assert s["pass_rate"] == 1.0 and s["rubric_score"] == 1.0
  assert s["pass_hat_k"] == {"1": 1.0, "2": 1.0}
  assert s["tool_error_rate"] == 0.0 and s["no_final_answer"] == 0
  assert sum(row["tasks"] for row in s["by_walk_length"].values()) == len(tasks)


class Fumbler(Agent):
  """Lists the services, calls a service that does not exist, asks about a tool that does not
  exist, and gives up: 3 calls, 2 of them errors, 4 turns."""

  def reset(self, task):
    self.replies = [
      tool_call_message("", "list_services", {}, "c1"),
      tool_call_message("", "call_tool", {"service": "nowhere", "tool": "x"}, "c2"),
      tool_call_message("", "describe_tool", {"service": task.services[0], "tool": "nope"}, "c3"),
      {"role": "assistant", "content": "I could not finish the task."},
    ]

  def act(self, messages, tools):
    return self.replies.pop(0)


def test_a_bad_agent_scores_zero_with_its_error_rate(tasks):
  results = evaluate(tasks, Fumbler, k=2, progress=False)
  s = summarize(results)
  assert s["pass_rate"] == 0.0 and s["rubric_score"] == 0.0
  assert s["pass_hat_k"] == {"1": 0.0, "2": 0.0}
  assert s["tool_error_rate"] == pytest.approx(2 / 3, abs=1e-4)
  assert s["mean_turns"] == 4.0 and s["mean_tool_calls"] == 3.0 and s["agent_errors"] == 0
  first = results[0]["samples"][0]
  assert [m["role"] for m in first["messages"]][:3] == ["system", "user", "assistant"]
  assert first["final_answer"] == "I could not finish the task."


def test_samples_play_on_independent_forks(tasks):
  """A first sample that writes must not change what the second one starts from."""

  class WriteOnce(Agent):
    calls = 0

    def reset(self, task):
      WriteOnce.calls += 1
      self.steps = []
      if WriteOnce.calls == 1:  # only the first sample plays the reference solution
        self.steps = [
          tool_call_message(
            "", "call_tool", {"service": c.service, "tool": c.tool, "arguments": c.arguments}, "c"
          )
          for c in task.reference_solution
        ]
      self.answer = task.reference_answer or "done"

    def act(self, messages, tools):
      return self.steps.pop(0) if self.steps else {"role": "assistant", "content": self.answer}

  (result,) = evaluate(tasks[:1], WriteOnce, k=2, progress=False)
  first, second = result["samples"]
  assert first["success"] and not second["success"]


# --- an OpenAI-compatible endpoint, recorded -------------------------------------------------


def openai_kwargs(handler):
  return {
    "model": "recorded",
    "base_url": URL,
    "api_key": "k",
    "max_retries": 0,
    "http_client": mock_http(handler),
  }


def test_openai_agent_through_a_recorded_endpoint(tasks):
  requests = []
  answers = [
    {
      "role": "assistant",
      "content": None,
      "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "list_services", "arguments": "{}"}}
      ],
    },
    {"role": "assistant", "content": "All done."},
  ] * 2

  def handler(request):
    requests.append(json.loads(request.content))
    return httpx2.Response(200, json=completion(answers.pop(0)))

  (result,) = evaluate(tasks[:1], "openai", openai_kwargs(handler), k=2, progress=False)
  assert len(requests) == 4 and not answers
  assert [t["function"]["name"] for t in requests[0]["tools"]] == list(META_TOOL_NAMES)
  assert requests[1]["messages"][-1]["role"] == "tool"
  for s in result["samples"]:
    assert (s["turns"], s["tool_calls"], s["tool_errors"]) == (2, 1, 0)
    assert s["final_answer"] == "All done." and not s["success"] and s["agent"] == "openai"


def test_an_unreachable_endpoint_counts_as_failed_samples(tasks):
  def handler(request):
    return httpx2.Response(500, json={"error": {"message": "down"}})

  results = evaluate(tasks[:2], "openai", openai_kwargs(handler), progress=False)
  s = summarize(results)
  assert s["agent_errors"] == 2 and s["pass_rate"] == 0.0 and s["rubric_score"] == 0.0
  assert "recorded" in results[0]["samples"][0]["error"]


# --- files, splits, determinism, bad input ---------------------------------------------------


def test_the_script_writes_its_files_and_records_the_split(tasks, tmp_path):
  held = tasks[0].services[0]
  train, evaluation, info = split_by_services(tasks, held_out=[held])
  split_dir = tmp_path / "split"
  save_tasks(train, split_dir / "train.jsonl")
  save_tasks(evaluation, split_dir / "eval.jsonl")
  write_summary(split_dir, {**info, "source": "tasks.jsonl"})
  out = tmp_path / "eval"
  proc = subprocess.run(
    [
      sys.executable,
      "-m",
      "experiments.evaluate",
      "--agent=oracle",
      "--k=2",
      f"--tasks={split_dir / 'eval.jsonl'}",
      f"--workdir={out}",
    ],
    cwd=ROOT,
    capture_output=True,
    text=True,
    check=True,
  )
  summary = json.loads((out / "summary.json").read_text())
  assert json.loads(proc.stdout.strip().splitlines()[-1]) == summary
  assert summary["split"] == {
    "summary_path": str(split_dir / "summary.json"),
    "part": "eval",
    **info,
    "source": "tasks.jsonl",
  }
  assert summary["tasks"] == len(evaluation) and summary["pass_rate"] == 1.0
  lines = (out / "results.jsonl").read_text().splitlines()
  assert [json.loads(line)["task_id"] for line in lines] == [t.id for t in evaluation]
  first = json.loads(lines[0])
  assert len(first["samples"]) == 2 and first["samples"][0]["messages"][1]["role"] == "user"
  table = (out / "results.md").read_text()
  assert f"Split: services (eval part), from {split_dir / 'summary.json'}" in table
  assert "| pass_rate | 1.0 |" in table
  for name in ("pass_rate_by_walk_length.png", "pass_rate_by_domain.png", "pass_hat_k.png"):
    assert (out / name).read_bytes().startswith(b"\x89PNG")


def test_tasks_without_generator_labels_get_them_from_the_registry():
  # the Appendix D meetup: simosphere (communication), calendar (productivity), geo
  # (location_travel), forum (social_media); none maps to one of the six business functions
  assert task_labels(community_meetup(0)) == {
    "domains": ["communication", "location_travel", "productivity", "social_media"],
    "business_functions": ["productivity"],
    "K": 4,
    "L": 7,
  }


def test_split_info_is_none_for_a_plain_task_file(tasks, tmp_path):
  save_tasks(tasks, tmp_path / "tasks.jsonl")
  write_summary(tmp_path, {"tasks": len(tasks)})
  assert split_info(tmp_path / "tasks.jsonl") is None
  save_tasks(tasks, tmp_path / "eval.jsonl")  # an eval.jsonl beside a summary that is no split
  assert split_info(tmp_path / "eval.jsonl") is None


def test_results_are_deterministic_and_independent_of_workers(tasks, tmp_path):
  one = evaluate(tasks, Fumbler, k=2, progress=False)
  again = evaluate(tasks, Fumbler, k=2, progress=False)
  parallel = evaluate(tasks, Fumbler, k=2, workers=2, progress=False)
  assert json.dumps(one, sort_keys=True) == json.dumps(again, sort_keys=True)
  assert json.dumps(one, sort_keys=True) == json.dumps(parallel, sort_keys=True)
  save_tasks(tasks, tmp_path / "tasks.jsonl")
  a = run_evaluation(tmp_path / "tasks.jsonl", tmp_path / "a", progress=False, plots=False)
  b = run_evaluation(tmp_path / "tasks.jsonl", tmp_path / "b", workers=2, progress=False)
  assert (tmp_path / "a" / "results.jsonl").read_bytes() == (
    tmp_path / "b" / "results.jsonl"
  ).read_bytes()
  drop = ("seconds", "files", "plots")
  assert {k: v for k, v in a.items() if k not in drop} == {
    k: v for k, v in b.items() if k not in drop
  }


def test_bad_input_is_refused_with_a_reason(tasks):
  assert resolve_agent("oracle") == ("oracle", {})
  assert resolve_agent("openai:m", base_url="http://x") == (
    "openai",
    {"model": "m", "base_url": "http://x", "temperature": 0.0},
  )
  with pytest.raises(ValueError, match="openai:MODEL"):
    resolve_agent("openai")
  with pytest.raises(ValueError, match="unknown agent"):
    resolve_agent("gpt4")
  with pytest.raises(FileNotFoundError, match="does not exist"):
    resolve_agent("checkpoint:/nonexistent/ckpt")
  with pytest.raises(ValueError, match="at least 1"):
    evaluate(tasks, "oracle", k=0, progress=False)
  with pytest.raises(ValueError, match="unique"):
    evaluate([tasks[0], tasks[0]], "oracle", progress=False)
  with pytest.raises(KeyError, match="oracle"):
    evaluate(tasks, "nobody", progress=False)


def test_the_checkpoint_agent_loads_on_demand_in_a_fresh_process():
  # experiments.evaluate imports no rl module: --agent=checkpoint:DIR must still find the agent.
  code = (
    "from compoworld.agents.agent import AGENTS, make_agent\n"
    "assert 'checkpoint' not in AGENTS\n"
    "try:\n"
    "  make_agent('checkpoint', checkpoint_dir='/nonexistent/run')\n"
    "except FileNotFoundError as err:\n"
    "  print('refused:', err)\n"
    "print('registered' if 'checkpoint' in AGENTS else 'missing')\n"
  )
  out = subprocess.run(
    [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
  )
  assert "refused:" in out.stdout and out.stdout.strip().endswith("registered")


def test_workers_once_jax_runs_are_spawned_for_an_agent_given_by_name(tasks, caplog):
  """A pipeline that trained a policy has JAX running, so forking would deadlock: an agent
  given by name plays in spawned workers, with the results of one worker; an agent given as a
  factory (no name a fresh process can make) falls back to one worker and says so."""
  import jax.numpy as jnp

  jnp.zeros(1).block_until_ready()  # JAX's runtime is up in this process
  assert evaluation._jax_started() and evaluation._static_services(tasks)
  one = evaluate(tasks[:3], "oracle", progress=False)
  with caplog.at_level("WARNING"):
    spawned = evaluate(tasks[:3], "oracle", workers=2, progress=False)
  assert not caplog.records
  assert json.dumps(one, sort_keys=True) == json.dumps(spawned, sort_keys=True)
  with caplog.at_level("WARNING"):
    fallback = evaluate(tasks[:3], Fumbler, k=2, workers=2, progress=False)
  assert "one worker instead of 2" in caplog.text
  assert json.dumps(fallback, sort_keys=True) == json.dumps(
    evaluate(tasks[:3], Fumbler, k=2, progress=False), sort_keys=True
  )
