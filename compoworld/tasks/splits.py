"""Train/evaluation splits that test composition (paper, section 5.3).

* ``composition``: held-out service *sets*. Every evaluation task's set of services never
  occurs in training, while every service it uses does, and so does every step it is built of
  (its facets and the oracle's tools; ``known_parts``): the combination is new, its parts are
  not. Without that check one pair whose service has a facet found with no other partner (geo +
  maps: maps' stop-list facets) can fill the held-out set with tasks no training task teaches.
* ``instances``: held-out *task instances*, for single-service (K = 1) tasks, whose service set
  cannot be held out without hiding the service: a random share of the tasks, none of whose
  instructions any training task has.
* ``services``: held-out *services*. Evaluation tasks use at least one service that no
  training task shows, not even as a distractor.
"""

from __future__ import annotations

import collections
import random
from typing import Any

from compoworld.tasks.task import Task


def _key(task: Task) -> tuple[str, ...]:
  return tuple(sorted(task.services))


def task_parts(task: Task) -> set[str]:
  """What a task is built of: its services, its walk's facets (``meta["facets"]``, where the
  author recorded them) and the tools of its reference solution, as ``service.tool``."""
  facets = task.meta.get("facets") or []
  tools = {f"{call.service}.{call.tool}" for call in task.reference_solution}
  return set(task.services) | {f"facet:{f}" for f in facets} | tools


def split_by_composition(
  tasks: list[Task], eval_fraction: float = 0.1, seed: int = 0, known_parts: bool = True
) -> tuple[list[Task], list[Task], dict[str, Any]]:
  """Holds out whole service sets, in a seeded order, until ``eval_fraction`` of the tasks are
  held out. A set is held out only if every part of its tasks (``task_parts``; its services
  alone when ``known_parts`` is False) still occurs in some training task."""
  groups: dict[tuple[str, ...], list[Task]] = collections.defaultdict(list)
  for task in tasks:
    groups[_key(task)].append(task)
  keys = sorted(groups)
  random.Random(seed).shuffle(keys)
  target = round(eval_fraction * len(tasks))

  def parts(task: Task) -> set[str]:
    return task_parts(task) if known_parts else set(task.services)

  group_use = {k: collections.Counter(p for t in groups[k] for p in parts(t)) for k in keys}
  train_use = sum(group_use.values(), collections.Counter())
  held: list[tuple[str, ...]] = []
  n_eval = 0
  skipped = 0
  for key in keys:
    if n_eval >= target:
      break
    # keep the set only if each of its parts still appears in some training task
    if all(train_use[p] > n for p, n in group_use[key].items()):
      held.append(key)
      n_eval += len(groups[key])
      train_use -= group_use[key]
    else:
      skipped += 1
  held_set = set(held)
  train = [t for t in tasks if _key(t) not in held_set]
  evaluation = [t for t in tasks if _key(t) in held_set]
  info = {
    "mode": "composition",
    "seed": seed,
    "eval_fraction": eval_fraction,
    "known_parts": known_parts,
    "train_tasks": len(train),
    "eval_tasks": len(evaluation),
    "eval_service_sets": len(held_set),
    "train_service_sets": len({_key(t) for t in train}),
    "sets_kept_in_training": skipped,  # passed over: a part found in no other set
  }
  return train, evaluation, info


def split_by_services(
  tasks: list[Task], held_out: list[str] | None = None, num_held_out: int = 3, seed: int = 0
) -> tuple[list[Task], list[Task], dict[str, Any]]:
  if held_out is None:
    used = sorted({s for t in tasks for s in t.services})
    held_out = sorted(random.Random(seed).sample(used, min(num_held_out, len(used))))
  hidden = set(held_out)
  evaluation = [t for t in tasks if hidden & set(t.services)]
  train = [t for t in tasks if not hidden & (set(t.services) | set(t.distractors))]
  info = {
    "mode": "services",
    "seed": seed,
    "held_out_services": sorted(hidden),
    "train_tasks": len(train),
    "eval_tasks": len(evaluation),
    "dropped_tasks": len(tasks) - len(train) - len(evaluation),
  }
  return train, evaluation, info


def split_by_instances(
  tasks: list[Task], eval_fraction: float = 0.1, seed: int = 0
) -> tuple[list[Task], list[Task], dict[str, Any]]:
  order = list(range(len(tasks)))
  random.Random(seed).shuffle(order)
  held = set(order[: round(eval_fraction * len(tasks))])
  train = [t for i, t in enumerate(tasks) if i not in held]
  seen = {t.instruction for t in train}
  # A held-out instance is one training never saw: an instruction repeated in training is dropped.
  evaluation = [t for i, t in enumerate(tasks) if i in held and t.instruction not in seen]
  info = {
    "mode": "instances",
    "seed": seed,
    "eval_fraction": eval_fraction,
    "train_tasks": len(train),
    "eval_tasks": len(evaluation),
    "dropped_tasks": len(held) - len(evaluation),
    "eval_service_sets": len({_key(t) for t in evaluation}),
    "train_service_sets": len({_key(t) for t in train}),
  }
  return train, evaluation, info


SPLITS = {"composition": split_by_composition, "instances": split_by_instances}
