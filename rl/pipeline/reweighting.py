"""Reward reweighting (paper, appendix A; figures 5b and 6): GRPO from the same SFT policy with the
completion-focused reward (eq. 5), uniform rubric averaging and binary success, on the same
seeds, tasks and held-out split.

Every arm's own reward is on its own scale, so besides it the training curves include two numbers
every arm logs alike: the share of criteria its rollouts meet (the uniform reward) and their
full-pass rate (the binary one). The held-out curve is the greedy policy's rubric score and pass
rate on the held-out service sets every ``eval_every`` steps (step 0: the SFT policy).

``--config.init=POLICY --config.train_tasks=T --config.eval_tasks=H`` starts every arm from one
given policy (e.g. the demo's SFT policy) on given task files; ``--config.min_criteria=2`` keeps
the tasks of both files with two or more rubric criteria, the only ones on which the three
rewards differ.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import ml_collections

from compoworld.jsonl import read_lines
from rl.pipeline.arm_data import first_trajectories, prepare
from rl.pipeline.experiments import band_note, curve, describe, over_seeds, run_seeds
from rl.pipeline.plots import line_plot
from rl.pipeline.run import run_grpo, run_sft
from rl.serve.policy import POLICY_DIR

#: Per-arm curves: GRPO summary key → (plot file, y label, x axis: "step" or "eval").
CURVES = {
  "mean_reward": ("train_reward.png", "training reward (the arm's own)", "step"),
  "criterion_pass_rate": ("train_criteria_met.png", "criteria met by rollouts", "step"),
  "pass_rate": ("train_pass_rate.png", "full-pass rate of rollouts", "step"),
  "eval_rubric_score": ("eval_rubric_score.png", "held-out rubric score", "eval"),
  "eval_pass_rate": ("eval_pass_rate.png", "held-out pass rate", "eval"),
}


def tasks_with_criteria(src: str | Path, min_criteria: int, dst: Path) -> tuple[Path, int]:
  """The tasks of ``src`` whose rubric has at least ``min_criteria`` criteria, written to ``dst``
  (the lines as they are); with fewer than two criteria the three rewards are the same number."""
  dst.parent.mkdir(parents=True, exist_ok=True)
  kept = [line for _, line in read_lines(src) if len(json.loads(line)["rubric"]) >= min_criteria]
  if not kept:
    raise ValueError(f"reweighting: no task of {src} has {min_criteria} or more criteria")
  dst.write_text("".join(kept), encoding="utf-8")
  return dst, len(kept)


def reweighting(
  config: ml_collections.ConfigDict, seeds: Sequence[int], workdir: str | Path
) -> dict[str, Any]:
  """For each seed: tasks, split, oracle trajectories, one SFT run, then GRPO per reward; with
  ``config.init``, GRPO per reward from that policy on ``config.train_tasks`` (held out:
  ``config.eval_tasks``)."""
  workdir, rewards = Path(workdir), list(config.rewards)
  if config.grpo.get("missing"):
    raise RuntimeError("the reweighting experiment needs rl/grpo/trainer.py and configs/grpo.py")

  init = config.get("init", "")
  if init and not (config.get("train_tasks") and config.get("eval_tasks")):
    raise ValueError("reweighting from a given policy (init) needs train_tasks and eval_tasks")
  for name in ("init", "train_tasks", "eval_tasks"):
    if config.get(name) and not Path(config[name]).exists():
      raise FileNotFoundError(f"reweighting: {name}={config[name]} does not exist")
  given = {
    "train_tasks_file": config.get("train_tasks", ""),
    "eval_tasks_file": config.get("eval_tasks", ""),
  }
  if init and config.get("min_criteria"):  # only the tasks on which the rewards differ
    for key, name in (("train_tasks_file", "train"), ("eval_tasks_file", "eval")):
      path, count = tasks_with_criteria(
        given[key], config.min_criteria, workdir / "tasks" / f"{name}.jsonl"
      )
      given[key] = str(path)
      print(f"reweighting: {count} {name} tasks with {config.min_criteria}+ criteria -> {path}")

  def one_seed(seed: int, wd: Path) -> dict[str, Any]:
    if init:  # one given policy and task set for every seed
      data = dict(given)
      policy = init
    else:
      data = prepare(config, seed, config.tasks.num_services, wd / "data")
      train_file = data["train_file"]
      if config.get("sft_trajectories"):  # the SFT policy's budget: the first N trajectories
        train_file = first_trajectories(train_file, config.sft_trajectories, wd / "sft_data")
      sft_config = ml_collections.ConfigDict(config.sft.to_dict())
      sft_config.seed = sft_config.data.seed = seed
      if not (wd / "sft" / POLICY_DIR).is_dir():
        run_sft(sft_config, train_file, wd / "sft", data["eval_trajectories_file"])
      policy = wd / "sft"
    out: dict[str, Any] = {"data": data, "init": str(policy)}
    for reward in rewards:
      print(f"--- seed {seed}: GRPO with the {reward} reward")
      grpo_config = ml_collections.ConfigDict(config.grpo.to_dict())
      grpo_config.seed = seed
      grpo_config.reward.name = reward
      grpo_config.eval.every = config.eval_every
      summary = run_grpo(
        grpo_config,
        policy,
        data["train_tasks_file"],
        wd / f"grpo_{reward}",
        data["eval_tasks_file"],
      )
      out["eval_steps"] = summary["eval_steps"]
      for key in CURVES:
        out[f"{reward}_{key}"] = summary[key]
    return out

  results = run_seeds(one_seed, seeds, workdir, config)
  stats = over_seeds(results, [f"{r}_{k}" for r in rewards for k in CURVES])
  steps = list(range(1, len(results[0][f"{rewards[0]}_mean_reward"]) + 1))
  eval_steps = results[0]["eval_steps"]
  plots = []
  for key, (name, label, axis) in CURVES.items():
    x = steps if axis == "step" else eval_steps
    plots.append(
      line_plot(
        workdir / name,
        [curve(r, x, stats[f"{r}_{key}"]) for r in rewards],
        xlabel="GRPO step",
        ylabel=label,
        title=f"reward reweighting: {label}\n{band_note(len(results))}",
      )
    )
  final = {
    f"{r}: final {CURVES[k][1]}": describe(stats[f"{r}_{k}"][-1]) for r in rewards for k in CURVES
  }
  return {
    "experiment": "reweighting",
    "rewards": rewards,
    "seeds": [r["seed"] for r in results],
    "steps": steps,
    "eval_steps": eval_steps,
    "stats": stats,
    "table": final,
    "per_seed": results,
    "plots": plots,
  }
