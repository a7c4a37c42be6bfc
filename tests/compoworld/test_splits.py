import json
import subprocess
import sys

import pytest

from compoworld.tasks.generate import generate_tasks
from compoworld.tasks.splits import (
  split_by_composition,
  split_by_instances,
  split_by_services,
  task_parts,
)
from compoworld.tasks.task import save_tasks


@pytest.fixture(scope="module")
def tasks():
  return generate_tasks(40, seed=3, progress=False)[0]


def test_composition_split_holds_out_sets_but_not_services(tasks):
  train, evaluation, info = split_by_composition(tasks, eval_fraction=0.25, seed=1)
  assert evaluation and train and len(train) + len(evaluation) == len(tasks)
  train_sets = {tuple(sorted(t.services)) for t in train}
  train_services = {s for t in train for s in t.services}
  for task in evaluation:
    assert tuple(sorted(task.services)) not in train_sets
    assert set(task.services) <= train_services
  assert info["eval_tasks"] == len(evaluation) and info["mode"] == "composition"


def test_composition_split_holds_out_only_sets_whose_parts_training_shows(tasks):
  def unknown_parts(train, evaluation):
    known = set().union(*(task_parts(t) for t in train))
    return [sorted(task_parts(t) - known) for t in evaluation if not task_parts(t) <= known]

  train, evaluation, info = split_by_composition(tasks, eval_fraction=0.25, seed=1)
  assert evaluation and info["known_parts"] and info["sets_kept_in_training"] > 0
  assert unknown_parts(train, evaluation) == []
  # Checking services alone holds out sets whose facets and tools no training task has.
  train, evaluation, info = split_by_composition(tasks, 0.25, seed=1, known_parts=False)
  assert len(unknown_parts(train, evaluation)) >= len(evaluation) // 2 > 0
  assert any(p.startswith("facet:") for parts in unknown_parts(train, evaluation) for p in parts)


def test_service_split_hides_services_even_as_distractors(tasks):
  held = sorted({s for t in tasks for s in t.services})[:2]
  train, evaluation, info = split_by_services(tasks, held_out=held)
  assert evaluation and info["held_out_services"] == held
  assert all(set(held) & set(t.services) for t in evaluation)
  assert not any(set(held) & (set(t.services) | set(t.distractors)) for t in train)


def test_split_script_records_the_split(tmp_path, tasks):
  save_tasks(tasks, tmp_path / "tasks.jsonl")
  out = subprocess.run(
    [sys.executable, "-m", "experiments.split_tasks", f"--tasks={tmp_path / 'tasks.jsonl'}",
     "--mode=services", "--num_held_out=2", f"--workdir={tmp_path}"],
    capture_output=True, text=True, check=True,
  )  # fmt: skip
  summary = json.loads(out.stdout.strip().splitlines()[-1])
  assert len(summary["held_out_services"]) == 2
  n_eval = len((tmp_path / "eval.jsonl").read_text().splitlines())
  assert n_eval == summary["eval_tasks"] > 0
  out = subprocess.run(
    [sys.executable, "-m", "experiments.split_tasks", f"--tasks={tmp_path / 'tasks.jsonl'}",
     "--mode=composition", "--noknown_parts", "--eval_fraction=0.25", "--seed=1",
     f"--workdir={tmp_path}"],
    capture_output=True, text=True, check=True,
  )  # fmt: skip
  summary = json.loads(out.stdout.strip().splitlines()[-1])
  assert summary["known_parts"] is False
  assert summary["eval_tasks"] == len(split_by_composition(tasks, 0.25, 1, False)[1])


def test_instance_split_holds_out_unseen_single_service_tasks():
  single, _ = generate_tasks(
    30, seed=5, k=1, min_walk=2, max_walk=2, num_distractors=0, progress=False
  )
  train, evaluation, info = split_by_instances(single, eval_fraction=0.2, seed=0)
  assert len(evaluation) + len(train) + info["dropped_tasks"] == len(single)
  assert len(evaluation) >= 4 and info["mode"] == "instances"
  seen = {t.instruction for t in train}
  assert not {t.id for t in train} & {t.id for t in evaluation}
  assert all(t.instruction not in seen for t in evaluation)
  # Seeded: the same split twice, another with another seed.
  assert [t.id for t in split_by_instances(single, 0.2, seed=0)[1]] == [t.id for t in evaluation]
  assert [t.id for t in split_by_instances(single, 0.2, seed=1)[1]] != [t.id for t in evaluation]
