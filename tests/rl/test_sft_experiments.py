"""The single arm's data for single vs composed (section 5.3.2), without training anything."""

import types
from pathlib import Path

import pytest

from compoworld.tasks.task import load_tasks
from configs.experiments import get_config
from rl.pipeline.sft_experiments import prepare, prepare_single, spread_over_compositions


def test_single_vs_composed_defaults_to_single_service_tasks():
  for name in ("single_vs_composed", "single_vs_composed_test"):
    config = get_config(name)
    assert config.single_k == 1 and config.tasks.num_services > 1


def test_the_single_arm_spreads_its_trajectories_over_services():
  services = ["a", "b", "a", "a", "c", "b"]
  tasks = [types.SimpleNamespace(id=i, services=[s]) for i, s in enumerate(services)]
  order = [t.id for t in spread_over_compositions(tasks)]
  assert order == [0, 1, 4, 2, 5, 3]  # a, b, c in task order, then a, b, then a


def test_held_out_service_sets_need_two_services(tmp_path):
  with pytest.raises(ValueError, match="prepare_single"):
    prepare(get_config("single_vs_composed_test"), 0, 1, tmp_path)


def test_prepare_single_plays_k1_tasks_with_the_oracle(tmp_path):
  config = get_config("single_vs_composed_test")
  config.tasks.num_tasks, config.tasks.workers = 6, 1
  data = prepare_single(config, 0, tmp_path)
  assert data["k"] == 1 and data["tasks"] == data["verified_trajectories"] == 6
  tasks = load_tasks(data["train_tasks_file"])
  assert all(len(t.services) == 1 for t in tasks)
  assert len(Path(data["train_file"]).read_text().splitlines()) == 6
  assert prepare_single(config, 0, tmp_path) == data  # reused
