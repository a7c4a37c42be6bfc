"""The paper's SFT-data experiments (section 5.3): what the held-out score owes to the number of
distinct compositions trained on (environment scaling, 5.3.1) and to training on composed rather
than simpler tasks at the same budget (5.3.2).

Per seed, each arm generates its tasks, holds out service sets (``compoworld.tasks.splits``), plays one
training task per distinct composition with the oracle, trains the configured SFT recipe on the
first ``n`` verified trajectories, and evaluates the policy on the held-out tasks (pass rate,
rubric score, and the held-out SFT loss on the oracle's held-out trajectories, which moves long
before a tiny policy passes anything). The "single" arm of 5.3.2 is K = 1 by default: tasks in
one service each (``compoworld.tasks.walks.sample_single_walk``), prepared by ``prepare_single``.
"""

from __future__ import annotations

import collections
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import ml_collections

from compoworld.agents.trajectories import SFT_FILE, TRAJECTORIES_FILE, collect_trajectories
from compoworld.tasks.task import Task, load_tasks, save_tasks
from rl.pipeline.experiments import band_note, curve, describe, over_seeds, run_seeds
from rl.pipeline.plots import bar_plot, line_plot
from rl.pipeline.run import (
  composition,
  evaluate_policy,
  make_tasks,
  one_per_composition,
  oracle_kwargs,
  run_sft,
  save_split,
)
from rl.serve.policy import POLICY_DIR

#: What each trained policy is scored by, and the plot label of each.
METRICS = {
  "pass_rate": "held-out pass rate",
  "rubric_score": "held-out rubric score",
  "eval_loss": "held-out SFT loss",
  # Held-out oracle turns that greedy decoding reproduces token for token from the oracle's
  # history (rl.sft.trainer.turn_matches): moves before whole episodes pass.
  "eval_turn_match": "held-out turns reproduced",
}


def prepare(
  config: ml_collections.ConfigDict, seed: int, k: int, workdir: Path, eval_k: int | None = None
) -> dict[str, Any]:
  """Tasks with K = ``k``, their held-out split and the oracle's verified trajectories, one per
  distinct training composition (``workdir/train/sft.jsonl``, in task order), and its play of
  the held-out tasks (``workdir/eval``). Reused when ``workdir/prepared.json`` exists.

  K >= 2: the split holds out service sets whose services all stay in training, which no K = 1
  task set has (``prepare_single`` is the single arm's)."""
  if k < 2:
    raise ValueError(f"held-out service sets need K >= 2, got K = {k}; see prepare_single")
  done = workdir / "prepared.json"
  if done.is_file():
    return json.loads(done.read_text(encoding="utf-8"))
  tasks, task_summary = make_tasks(config.tasks, seed, k=k)
  info = save_split(tasks, config.split.eval_fraction, seed, workdir / "split")
  held = load_tasks(workdir / "split" / "eval.jsonl")[: config.eval.max_tasks]
  save_tasks(held, workdir / "split" / "eval.jsonl")  # the split's summary.json stays beside it
  train = one_per_composition(load_tasks(workdir / "split" / "train.jsonl"))
  collected = collect_trajectories(train, workdir / "train", agent_kwargs=oracle_kwargs(config))
  oracle = collect_trajectories(held, workdir / "eval", agent_kwargs=oracle_kwargs(config))
  prepared = {
    "k": k,
    "tasks": task_summary["tasks"],
    "split": info,
    "train_compositions": len(train),
    "verified_trajectories": collected["kept"],
    "eval_tasks": len(held),
    "oracle_eval_pass_rate": oracle["success_rate"],
    "train_file": str(workdir / "train" / SFT_FILE),
    "train_tasks_file": str(workdir / "split" / "train.jsonl"),
    "eval_tasks_file": str(workdir / "split" / "eval.jsonl"),
    "eval_trajectories_file": str(workdir / "eval" / TRAJECTORIES_FILE),
  }
  done.write_text(json.dumps(prepared, indent=2, sort_keys=True) + "\n", encoding="utf-8")
  return prepared


def spread_over_compositions(tasks: Sequence[Task]) -> list[Task]:
  """``tasks`` round-robin over their service sets: the first task of each set in task order,
  then the second of each, and so on, so that every prefix spreads as evenly as it can."""
  rank: collections.Counter = collections.Counter()
  keyed = []
  for i, task in enumerate(tasks):
    key = composition(task)
    keyed.append((rank[key], i, task))
    rank[key] += 1
  return [task for _, _, task in sorted(keyed, key=lambda x: x[:2])]


def prepare_single(config: ml_collections.ConfigDict, seed: int, workdir: Path) -> dict[str, Any]:
  """The single arm's data: K = 1 tasks (one service each, the config's walk lengths and
  distractors) and the oracle's verified trajectories of all of them, spread round-robin over
  the services (``workdir/train/sft.jsonl``), so the first ``n`` cover as many services as they
  can. There are only as many K = 1 compositions as services, so services repeat (unlike
  ``prepare``'s one task per composition); no split, the arm is scored on the composed arm's
  held-out tasks. Reused when ``workdir/prepared.json`` exists for K = 1."""
  done = workdir / "prepared.json"
  if done.is_file():
    prepared = json.loads(done.read_text(encoding="utf-8"))
    if prepared.get("k") == 1:
      return prepared
  tasks, task_summary = make_tasks(config.tasks, seed, k=1)
  if not tasks:
    raise ValueError(
      f"no K = 1 task out of {config.tasks.num_tasks} indices passed the gates: "
      f"rejections {task_summary['rejected']}"
    )
  train = spread_over_compositions(tasks)
  save_tasks(train, workdir / "split" / "train.jsonl")
  collected = collect_trajectories(train, workdir / "train", agent_kwargs=oracle_kwargs(config))
  prepared = {
    "k": 1,
    "tasks": task_summary["tasks"],
    "split": None,
    "train_compositions": len({composition(t) for t in train}),
    "verified_trajectories": collected["kept"],
    "train_file": str(workdir / "train" / SFT_FILE),
    "train_tasks_file": str(workdir / "split" / "train.jsonl"),
  }
  workdir.mkdir(parents=True, exist_ok=True)
  done.write_text(json.dumps(prepared, indent=2, sort_keys=True) + "\n", encoding="utf-8")
  return prepared


def train_and_evaluate(
  config: ml_collections.ConfigDict,
  train_file: str | Path,
  eval_tasks_file: str | Path,
  eval_trajectories_file: str | Path,
  workdir: Path,
  seed: int,
) -> dict[str, Any]:
  """The SFT recipe (model seed and data order from ``seed``) on ``train_file``, then the policy
  on the held-out tasks."""
  t0 = time.perf_counter()
  sft_config = ml_collections.ConfigDict(config.sft.to_dict())
  sft_config.seed = seed
  sft_config.data.seed = seed
  sft = run_sft(sft_config, train_file, workdir / "sft", eval_trajectories_file)
  ev = evaluate_policy(workdir / "sft" / POLICY_DIR, eval_tasks_file, workdir / "eval", config.eval)
  return {
    "pass_rate": ev["pass_rate"],
    "rubric_score": ev["rubric_score"],
    "eval_loss": sft["eval_loss"],
    "eval_turn_match": sft["eval_turn_match"],
    "sft_steps": sft["steps"],
    "final_train_loss": sft["final_loss"],
    "seconds": round(time.perf_counter() - t0, 1),
  }


def _subset(train_file: str, n: int, out: Path) -> Path:
  lines = Path(train_file).read_text(encoding="utf-8").splitlines()
  if len(lines) < n:
    raise ValueError(
      f"{train_file} holds {len(lines)} verified trajectories (of distinct compositions for "
      f"K >= 2), fewer than the {n} asked for: generate more tasks (--config.tasks.num_tasks)"
      " or raise K"
    )
  out.mkdir(parents=True, exist_ok=True)
  (out / SFT_FILE).write_text("\n".join(lines[:n]) + "\n", encoding="utf-8")
  return out / SFT_FILE


def _finish(
  name: str, results: list[dict[str, Any]], x_name: str, arms: dict[str, list[str]], workdir: Path
) -> dict[str, Any]:
  """Intervals over seeds of every ``<arm>_<metric>`` curve, one plot per metric, the summary."""
  keys = [f"{arm}_{m}" for arm in arms for m in METRICS]
  stats = over_seeds(results, keys)
  plots, band = [], "\n" + band_note(len(results))
  for metric, label in METRICS.items():
    path = workdir / f"{metric}.png"
    if all(len(xs) == 1 for xs in arms.values()):  # one point per arm: bars
      points = [stats[f"{arm}_{metric}"][0] for arm in arms]
      errors = [None if p["low"] is None else (p["low"], p["high"]) for p in points]
      means = [p["mean"] for p in points]
      title = f"{name}: {label} {band}"
      plots.append(bar_plot(path, list(arms), means, errors=errors, ylabel=label, title=title))
      continue
    curves = [curve(arm, arms[arm], stats[f"{arm}_{metric}"]) for arm in arms]
    title = f"{name}: {label} {band}"
    plots.append(line_plot(path, curves, xlabel=x_name, ylabel=label, title=title, logx=True))
  lines = {
    f"{arm} @ {x}: {label}": describe(stats[f"{arm}_{m}"][i])
    for arm, xs in arms.items()
    for i, x in enumerate(xs)
    for m, label in METRICS.items()
  }
  return {
    "experiment": name,
    "seeds": [r["seed"] for r in results],
    x_name: next(iter(arms.values())),
    "stats": stats,
    "table": lines,
    "per_seed": results,
    "plots": plots,
  }


def env_scaling(
  config: ml_collections.ConfigDict, seeds: Sequence[int], workdir: str | Path
) -> dict[str, Any]:
  """SFT on ``config.sizes`` trajectories, each from a distinct composition (section 5.3.1)."""
  workdir, sizes = Path(workdir), sorted(config.sizes)

  def one_seed(seed: int, wd: Path) -> dict[str, Any]:
    data = prepare(config, seed, config.tasks.num_services, wd / "data")
    out: dict[str, Any] = {"data": data, **{f"sft_{m}": [] for m in METRICS}}
    for n in sizes:
      print(f"--- seed {seed}: SFT on {n} trajectories")
      train_file = _subset(data["train_file"], n, wd / f"n{n}")
      r = train_and_evaluate(
        config,
        train_file,
        data["eval_tasks_file"],
        data["eval_trajectories_file"],
        wd / f"n{n}",
        seed,
      )
      out[f"n{n}"] = r
      for m in METRICS:
        out[f"sft_{m}"].append(r[m])
    return out

  results = run_seeds(one_seed, seeds, workdir, config)
  return _finish("environment scaling", results, "trajectories", {"sft": sizes}, workdir)


def single_vs_composed(
  config: ml_collections.ConfigDict, seeds: Sequence[int], workdir: str | Path
) -> dict[str, Any]:
  """The same budget of trajectories from tasks of ``config.single_k`` services (default 1:
  single-service tasks, ``prepare_single``) and of ``config.tasks.num_services``; both scored on
  held-out composed tasks (section 5.3.2)."""
  workdir, budget = Path(workdir), config.budget
  arms = {"single": config.single_k, "composed": config.tasks.num_services}

  def one_seed(seed: int, wd: Path) -> dict[str, Any]:
    composed = prepare(config, seed, arms["composed"], wd / "data_composed")
    out: dict[str, Any] = {"data_composed": composed}
    for arm, k in arms.items():
      if arm == "composed":
        data = composed
      elif k == 1:
        data = prepare_single(config, seed, wd / f"data_{arm}")
      else:
        data = prepare(config, seed, k, wd / f"data_{arm}")
      out[f"data_{arm}"] = data
      print(f"--- seed {seed}: SFT on {budget} trajectories of K = {k} tasks ({arm})")
      train_file = _subset(data["train_file"], budget, wd / arm)
      r = train_and_evaluate(
        config,
        train_file,
        composed["eval_tasks_file"],
        composed["eval_trajectories_file"],
        wd / arm,
        seed,
      )
      out[arm] = r
      for m in METRICS:
        out[f"{arm}_{m}"] = [r[m]]
    return out

  results = run_seeds(one_seed, seeds, workdir, config)
  summary = _finish(
    "single vs composed", results, "budget", {arm: [budget] for arm in arms}, workdir
  )
  return {**summary, "arms_k": arms}
