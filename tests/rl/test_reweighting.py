"""The reweighting experiment's wiring (rl.pipeline.reweighting), GRPO itself stubbed out."""

import json
from pathlib import Path

import pytest

from configs.experiments import get_config
from rl.pipeline import reweighting


def fake_summary(steps=2, evals=2):
  curve = [0.1 * (i + 1) for i in range(steps)]
  return {
    "mean_reward": curve,
    "criterion_pass_rate": curve,
    "pass_rate": curve,
    "eval_rubric_score": [0.0] * evals,
    "eval_pass_rate": [0.0] * evals,
    "eval_steps": list(range(evals)),
  }


def test_from_a_given_policy_every_arm_starts_there_and_no_sft_runs(tmp_path, monkeypatch):
  policy, train, held = tmp_path / "policy", tmp_path / "train.jsonl", tmp_path / "held.jsonl"
  policy.mkdir()
  train.write_text("")
  held.write_text("")
  calls = []

  def run_grpo(config, init, tasks_file, workdir, eval_tasks_file=""):
    calls.append((config.reward.name, config.seed, str(init), str(tasks_file), eval_tasks_file))
    return fake_summary()

  def no_sft(*args, **kwargs):
    raise AssertionError("no SFT run when the experiment starts from a given policy")

  monkeypatch.setattr(reweighting, "run_grpo", run_grpo)
  monkeypatch.setattr(reweighting, "run_sft", no_sft)
  monkeypatch.setattr(reweighting, "prepare", no_sft)
  config = get_config("reweighting_test")
  config.init, config.train_tasks, config.eval_tasks = str(policy), str(train), str(held)
  summary = reweighting.reweighting(config, [0, 1], tmp_path / "out")
  assert sorted(calls) == sorted(
    (reward, seed, str(policy), str(train), str(held))
    for reward in config.rewards
    for seed in (0, 1)
  )
  assert summary["seeds"] == [0, 1] and summary["steps"] == [1, 2]
  assert all(p.endswith(".png") for p in summary["plots"])


def ids(path):
  return [json.loads(line)["id"] for line in Path(path).read_text().splitlines() if line]


def test_min_criteria_keeps_the_tasks_on_which_the_rewards_differ(tmp_path, monkeypatch):
  policy, train, held = tmp_path / "policy", tmp_path / "train.jsonl", tmp_path / "held.jsonl"
  policy.mkdir()
  one, two = (
    {"id": "a", "rubric": [{"id": "c1"}]},
    {"id": "b", "rubric": [{"id": "c1"}, {"id": "c2"}]},
  )
  train.write_text(f"{json.dumps(one)}\n{json.dumps(two)}\n")
  held.write_text(f"{json.dumps(two)}\n\n{json.dumps(one)}\n")
  played = []

  def run_grpo(config, init, tasks_file, workdir, eval_tasks_file=""):
    played.append((ids(tasks_file), eval_tasks_file))
    return fake_summary()

  monkeypatch.setattr(reweighting, "run_grpo", run_grpo)
  config = get_config("reweighting_test")
  config.init, config.train_tasks, config.eval_tasks = str(policy), str(train), str(held)
  config.min_criteria = 2
  reweighting.reweighting(config, [0], tmp_path / "out")
  assert {tuple(ids) for ids, _ in played} == {("b",)}
  assert ids(played[0][1]) == ["b"]
  config.min_criteria = 3
  with pytest.raises(ValueError, match=r"no task of .* has 3 or more criteria"):
    reweighting.reweighting(config, [0], tmp_path / "out3")


def test_a_given_policy_needs_its_task_files(tmp_path):
  config = get_config("reweighting_test")
  config.init = str(tmp_path)
  with pytest.raises(ValueError, match="needs train_tasks and eval_tasks"):
    reweighting.reweighting(config, [0], tmp_path / "out")
  config.train_tasks = config.eval_tasks = str(tmp_path / "missing.jsonl")
  with pytest.raises(FileNotFoundError, match="train_tasks="):
    reweighting.reweighting(config, [0], tmp_path / "out")


def test_each_seeds_sft_policy_trains_on_its_budget_of_composed_trajectories(tmp_path, monkeypatch):
  config = get_config("reweighting")
  assert config.tasks.num_services == 2 and config.grpo.data.min_length == 4096
  config.sft_trajectories = 3
  train = tmp_path / "sft.jsonl"
  train.write_text("".join(f'{{"task_id": "t{i}"}}\n' for i in range(5)))
  data = {
    "train_file": str(train),
    "eval_trajectories_file": "HELD_TRAJ",
    "train_tasks_file": "TRAIN",
    "eval_tasks_file": "HELD",
  }
  trained, started = [], []

  def run_sft(sft_config, train_file, workdir, eval_file):
    lines = Path(train_file).read_text().splitlines(keepends=True)
    trained.append((lines, eval_file, sft_config.seed))

  def run_grpo(config, init, tasks_file, workdir, eval_tasks_file=""):
    started.append((str(init), tasks_file, eval_tasks_file))
    return fake_summary()

  monkeypatch.setattr(reweighting, "prepare", lambda *args: data)
  monkeypatch.setattr(reweighting, "run_sft", run_sft)
  monkeypatch.setattr(reweighting, "run_grpo", run_grpo)
  reweighting.reweighting(config, [7], tmp_path / "out")
  [(lines, eval_file, seed)] = trained
  assert lines == [f'{{"task_id": "t{i}"}}\n' for i in range(3)]
  assert (eval_file, seed) == ("HELD_TRAJ", 7)
  sft_dir = str(tmp_path / "out" / "seed_7" / "sft")
  assert started == [(sft_dir, "TRAIN", "HELD")] * len(config.rewards)
