"""Splits a task file for composition tests.

``python -m experiments.split_tasks --tasks=FILE --mode=composition|services --workdir=DIR``
writes ``train.jsonl``, ``eval.jsonl`` and ``summary.json`` (the split, recorded).
"""

import os

from absl import flags

from compoworld.tasks.splits import SPLITS, split_by_services
from compoworld.tasks.task import load_tasks, save_tasks
from experiments.common import run_main, write_summary

_TASKS = flags.DEFINE_string("tasks", None, "tasks.jsonl to split.", required=True)
_MODE = flags.DEFINE_enum(
  "mode", "composition", ["composition", "instances", "services"], "What is held out."
)
_EVAL_FRACTION = flags.DEFINE_float(
  "eval_fraction", 0.1, "composition, instances: share of tasks held out."
)
_KNOWN_PARTS = flags.DEFINE_bool(
  "known_parts",
  True,
  "composition: hold out a service set only if every facet and tool of its tasks also occurs "
  "in training (off: its services alone).",
)
_HELD_OUT = flags.DEFINE_list("held_out", None, "services: the services to hold out.")
_NUM_HELD_OUT = flags.DEFINE_integer("num_held_out", 3, "services: how many, if not named.")
_SEED = flags.DEFINE_integer("seed", 0, "Seed of the split.")
_WORKDIR = flags.DEFINE_string("workdir", "runs/split", "Where the split files go.")


def main(argv):
  del argv
  tasks = load_tasks(_TASKS.value)
  if _MODE.value in SPLITS:
    kw = {"known_parts": _KNOWN_PARTS.value} if _MODE.value == "composition" else {}
    train, evaluation, info = SPLITS[_MODE.value](tasks, _EVAL_FRACTION.value, _SEED.value, **kw)
  else:
    train, evaluation, info = split_by_services(
      tasks, _HELD_OUT.value, _NUM_HELD_OUT.value, _SEED.value
    )
  save_tasks(train, os.path.join(_WORKDIR.value, "train.jsonl"))
  save_tasks(evaluation, os.path.join(_WORKDIR.value, "eval.jsonl"))
  write_summary(_WORKDIR.value, {**info, "source": _TASKS.value})


if __name__ == "__main__":
  run_main(main)
