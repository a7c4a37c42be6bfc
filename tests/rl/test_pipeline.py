"""The whole pipeline (``make demo``) at a minimal size, and its pieces."""

import importlib.util
import json
import subprocess
import sys

import pytest

from compoworld.tasks.task import load_tasks
from configs.demo import get_config
from rl.pipeline.run import STAGES, one_per_composition, run
from rl.serve.agent import PolicyAgent
from rl.serve.policy import ContextFull, RequestError

HAS_GRPO = importlib.util.find_spec("rl.grpo.trainer") is not None


class _Refusing:
  """A policy that refuses every request with ``error``."""

  def __init__(self, error):
    self.error = error

  def chat(self, messages, tools, **kwargs):
    raise self.error


def test_a_full_context_ends_the_episode_and_other_errors_propagate():
  full = ContextFull("the prompt is 5000 tokens; the context is 4096", "messages")
  agent = PolicyAgent(policy=_Refusing(full))
  assert agent.act([{"role": "user", "content": "hi"}], []) == {"role": "assistant", "content": ""}
  with pytest.raises(RequestError, match="do not render"):
    bad = RequestError("messages do not render in the chat format: x", "messages")
    PolicyAgent(policy=_Refusing(bad)).act([], [])


def test_bad_stages_and_missing_inputs_fail_clearly(tmp_path):
  with pytest.raises(ValueError, match="unknown stages"):
    run(get_config("test"), tmp_path, ["library", "rl"])
  with pytest.raises(FileNotFoundError, match="run the 'library' stage first"):
    run(get_config("test"), tmp_path, ["eval"])
  config = get_config("test")
  config.eval.decodings = ("free", "beam")
  with pytest.raises(ValueError, match=r"eval\.decodings must name some of free, constrained"):
    run(config, tmp_path, ["eval"])


def test_one_per_composition_keeps_the_first_task_of_each_service_set(tasks):
  twin = tasks[0].model_copy(update={"id": "twin"})
  kept = one_per_composition([tasks[0], twin, *tasks[1:]])
  assert kept[0].id == tasks[0].id and "twin" not in [t.id for t in kept]


def test_the_oracle_plays_the_training_tasks_as_the_sft_recipe_says():
  from rl.pipeline.run import oracle_kwargs

  config = get_config("tiny")
  detours = config.sft.generate.detours
  assert oracle_kwargs(config) == {
    "discovery": "none",
    "narrate": True,
    "reads": "needed",
    "detours": detours,
  }
  config.trajectories.narrate = False
  config.trajectories.reads = "all"
  config.trajectories.detours = 0.5
  assert oracle_kwargs(config) == {
    "discovery": "none",
    "narrate": False,
    "reads": "all",
    "detours": 0.5,
  }
  # The held-out tasks' trajectories (held-out loss, turn match, the oracle's row): no detour.
  assert oracle_kwargs(config, held_out=True)["detours"] == 0.0


@pytest.mark.slow
@pytest.mark.heavy  # every stage of the demo, each compiling its own programs: ~130 s
def test_pipeline_end_to_end_at_a_minimal_size(tmp_path):
  stages = [s for s in STAGES if HAS_GRPO or s != "grpo"]
  summary = run(get_config("test"), tmp_path, stages)
  on_disk = json.loads((tmp_path / "summary.json").read_text())
  assert on_disk["tasks"] == summary["tasks"] > 0
  assert 0 < on_disk["sft_trajectories"] <= on_disk["tasks"]
  names = ["before_sft", "after_sft", *(["after_grpo"] if HAS_GRPO else [])]
  # every policy is scored decoding freely and under the typed grammar with grounded strings
  names += [f"{n}+constrained+grounded" for n in names]
  assert set(on_disk["evaluation"]) == {"oracle", *names}
  for name in ["oracle", *names]:
    row = on_disk["evaluation"][name]
    assert 0 <= row["pass_rate"] <= row["rubric_score"] <= 1, (name, row)
  assert on_disk["evaluation"]["oracle"]["pass_rate"] == 1.0
  # held out: no evaluation task's service set was trained on, every service was
  train = {tuple(sorted(t.services)) for t in load_tasks(tmp_path / "split/train.jsonl")}
  held = {tuple(sorted(t.services)) for t in load_tasks(tmp_path / "split/eval.jsonl")}
  assert held and not held & train
  assert {s for h in held for s in h} <= {s for t in train for s in t}
  assert on_disk["sft"]["steps"] == 2 and len(on_disk["sft"]["losses"]) == 2
  assert set(on_disk["stage_seconds"]) >= {"library", "tasks", "sft", "eval after_sft", "report"}
  report = (tmp_path / "report.md").read_text()
  for heading in ("## Service library", "## Tasks", "## Held-out evaluation", "Example trajectory"):
    assert heading in report
  assert "| policy after SFT, constrained+grounded decoding |" in report
  # the trained policies' failed episodes, each counted once by its first divergence
  trained = [n for n in names if not n.startswith("before_sft")]
  assert set(on_disk["failures"]) == set(trained)
  for name in trained:
    row = on_disk["evaluation"][name]
    failed = round(row["tasks"] * (1 - row["pass_rate"]))  # one sample a task
    assert sum(on_disk["failures"][name].values()) == failed, (name, on_disk["failures"][name])
  assert "| first divergence | policy after SFT |" in report
  assert (tmp_path / "sft_loss.png").stat().st_size > 1000
  if HAS_GRPO:
    assert (tmp_path / "grpo_curves.png").stat().st_size > 1000
  # a rerun of the evaluation alone reads the earlier stages' files
  again = run(get_config("test"), tmp_path, ["eval"])
  assert again["evaluation"]["after_sft"] == summary["evaluation"]["after_sft"]


_COMPOSE = """
import sys
from configs.demo import get_config
from rl.pipeline.run import run

config = get_config("test")
config.library.compose = True
config.tasks.num_tasks = 12
config.split.mode = "instances"  # 12 long walks: no service set whose parts others also show
try:
  run(config, sys.argv[1], ["library", "tasks", "split", "trajectories"])
except FileNotFoundError as err:  # the SFT stage was left out, and nothing before it failed
  assert "'sft' stage" in str(err), err
"""


@pytest.mark.slow
def test_compiled_services_are_composed_into_tasks_the_oracle_solves(tmp_path):
  # A subprocess: loading the compiled library changes the process-wide service registry.
  subprocess.run([sys.executable, "-c", _COMPOSE, str(tmp_path)], check=True, timeout=600)
  tasks = load_tasks(tmp_path / "tasks" / "tasks.jsonl")
  manifest = json.loads((tmp_path / "library" / "manifest.json").read_text())
  compiled = {service["name"] for service in manifest["services"]}
  assert any(set(task.services) & compiled for task in tasks)
  for part in ("train", "eval"):
    summary = json.loads((tmp_path / "trajectories" / part / "summary.json").read_text())
    assert summary["rejected"] == 0 and summary["success_rate"] == 1.0, summary


def test_wilson_interval_golden_values():
  from rl.pipeline.report import wilson_interval

  low, high = wilson_interval(0.0, 45)
  assert low == 0.0 and abs(high - 0.0787) < 1e-3
  low, high = wilson_interval(0.5, 40)
  assert abs(low - 0.3520) < 1e-3 and abs(high - 0.6480) < 1e-3
  assert wilson_interval(1.0, 10)[1] == 1.0 and wilson_interval(0.3, 0) == (0.0, 1.0)
