"""The whole pipeline on one machine, stage by stage, as ``make demo`` runs it.

library (the spec compiler on the hand-written services' MCP exports) → tasks → held-out service
sets (``compoworld.tasks.splits``) → oracle trajectories → SFT → GRPO, with the policy evaluated on the
held-out compositions before SFT (its random initialisation), after SFT and after GRPO. Every stage
writes under its own directory of the run::

  library/  tasks/  split/  trajectories/{train,eval}/  policy_init/  sft/  grpo/
  eval/{before_sft,after_sft,after_grpo}/  report.md  summary.json  *.png

The oracle's play of the held-out tasks (``trajectories/eval``) is the table's ceiling row.

A stage left out of ``stages`` reads what an earlier run wrote there, so ``stages=("eval",)``
re-evaluates the policies of a finished run. The building blocks (``make_tasks``, ``init_policy``,
``evaluate_policy``, ...) are also what the paper's experiments (``rl.pipeline.sft_experiments``,
``rl.pipeline.reweighting``) are made of.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import ml_collections

from compoworld.agents.agent import oracle_settings
from compoworld.agents.evaluation import run_evaluation
from compoworld.agents.trajectories import SFT_FILE, TRAJECTORIES_FILE, collect_trajectories
from compoworld.specs.build import build_library, load_compiled_library
from compoworld.tasks.facets import facets
from compoworld.tasks.generate import generate_tasks
from compoworld.tasks.splits import SPLITS
from compoworld.tasks.task import Task, load_tasks, save_tasks
from rl.compile_cache import use_compilation_cache
from rl.decoding.modes import DECODINGS
from rl.decoding.modes import check_decodings as check_named
from rl.pipeline.report import failure_breakdowns, write_report
from rl.pipeline.stages import POLICIES, STAGES, eval_name
from rl.serve.policy import POLICY_DIR


def check_decodings(decodings) -> tuple[str, ...]:
  """``decodings`` as a tuple if each is one of `DECODINGS` (how the checkpoint agent decodes its
  tool calls in an evaluation: freely, typed by the tools' grammar, grounded in the conversation,
  or both; each policy is scored under each); a ValueError otherwise."""
  return check_named(decodings, "eval.decodings")


# --- progress --------------------------------------------------------------------------------


class Stages:
  """Prints a banner with the elapsed time around each stage and records its wall time."""

  def __init__(self, names: Sequence[str]):
    self.names, self.seconds, self.t0 = list(names), {}, time.perf_counter()

  @contextlib.contextmanager
  def __call__(self, name: str) -> Iterator[None]:
    i = self.names.index(name) + 1 if name in self.names else len(self.seconds) + 1
    elapsed = time.perf_counter() - self.t0
    print(f"\n=== [{i}/{len(self.names)}] {name}  (t = {elapsed:.0f} s) ===", flush=True)
    t0 = time.perf_counter()
    yield
    self.seconds[name] = round(time.perf_counter() - t0, 1)
    print(f"=== {name} done in {self.seconds[name]:.1f} s ===", flush=True)

  @property
  def total(self) -> float:
    return round(time.perf_counter() - self.t0, 1)


# --- data ------------------------------------------------------------------------------------


def make_tasks(
  cfg: ml_collections.ConfigDict, seed: int, num_tasks: int | None = None, k: int | None = None
) -> tuple[list[Task], dict[str, Any]]:
  """Generated tasks with the config's K, walk lengths and distractors (``cfg`` as
  ``configs/demo.py``'s ``tasks``); ``num_tasks`` and ``k`` override it."""
  return generate_tasks(
    num_tasks or cfg.num_tasks,
    seed=seed,
    k=k or cfg.num_services,
    min_walk=cfg.min_walk,
    max_walk=cfg.max_walk,
    num_distractors=cfg.num_distractors,
    workers=cfg.workers,
  )


def composition(task: Task) -> tuple[str, ...]:
  """A task's service set: what "distinct composition" and the held-out split are about."""
  return tuple(sorted(task.services))


def one_per_composition(tasks: Sequence[Task]) -> list[Task]:
  """The first task of each distinct service set, in task order."""
  seen: dict[tuple[str, ...], Task] = {}
  for task in tasks:
    seen.setdefault(composition(task), task)
  return list(seen.values())


def oracle_kwargs(config: ml_collections.ConfigDict, held_out: bool = False) -> dict[str, Any]:
  """The oracle's settings in ``config.trajectories`` (its discovery calls, whether it names
  each call in a sentence first, which reads it plays, its detours), as the recipe's. On
  ``held_out`` tasks (the held-out loss, turn match and the oracle's row) it makes no detour."""
  settings = oracle_settings(config.get("trajectories", {}))
  return {**settings, "detours": 0.0} if held_out else settings


def save_split(
  tasks: list[Task], eval_fraction: float, seed: int, workdir: Path, mode: str = "composition"
) -> dict:
  """Held-out service sets (or, ``mode="instances"``, task instances: compoworld.tasks.splits) as
  ``train.jsonl`` / ``eval.jsonl`` + ``summary.json`` (the layout
  ``compoworld.agents.evaluation.split_info`` records with every evaluation)."""
  if mode not in SPLITS:
    raise ValueError(f"unknown split mode {mode!r}; valid: {', '.join(SPLITS)}")
  train, held, info = SPLITS[mode](tasks, eval_fraction, seed)
  if not train or not held:
    raise ValueError(
      f"the split of {len(tasks)} tasks at eval_fraction={eval_fraction} left "
      f"{len(train)} train and {len(held)} held-out tasks; generate more tasks"
      + (
        f" ({info['sets_kept_in_training']} service sets kept in training: a facet or tool"
        " of theirs occurs in no other set)"
        if info.get("sets_kept_in_training")
        else ""
      )
    )
  save_tasks(train, workdir / "train.jsonl")
  save_tasks(held, workdir / "eval.jsonl")
  _write_json(workdir / "summary.json", info)
  return info


# --- policies --------------------------------------------------------------------------------


def init_policy(
  sft_config: ml_collections.ConfigDict, trajectories: Sequence[dict], sft_dir: Path, out: Path
) -> Path:
  """The policy SFT starts from, exported to ``out``: the SFT config's model at its seed, with
  the tokenizer trained on ``trajectories``, which is saved in ``sft_dir`` too so that SFT
  trains with the very same one."""
  from rl.serve.policy import save_policy
  from rl.sft.trainer import build_model, get_tokenizer

  sft_dir.mkdir(parents=True, exist_ok=True)
  tokenizer = get_tokenizer(sft_config, sft_dir, trajectories)
  tokenizer.save(sft_dir)
  model, _ = build_model(sft_config, tokenizer.vocab_size, tokenizer=tokenizer)
  save_policy(out, model, tokenizer, 0)
  return out


def evaluate_policy(
  policy_dir: str | Path,
  tasks_file: str | Path,
  workdir: str | Path,
  cfg: ml_collections.ConfigDict,
  seed: int = 0,
  progress: bool = True,
  decoding: str = "free",
) -> dict[str, Any]:
  """The policy in ``policy_dir`` on a task file (``cfg`` as ``configs/demo.py``'s ``eval``),
  decoding its tool calls as `DECODINGS` says: writes ``results.jsonl``, ``results.md`` and
  ``summary.json`` under ``workdir`` and returns the summary, with the split recorded when the
  file is a split's ``eval.jsonl``."""
  check_decodings([decoding])
  summary = run_evaluation(
    tasks_file,
    workdir,
    f"checkpoint:{policy_dir}",
    k=cfg.samples,
    max_turns=cfg.max_turns,
    temperature=cfg.temperature,
    # A full context ends the episode (the checkpoint agent answers with nothing more).
    agent_kwargs={
      "seed": seed,
      "max_context": cfg.max_context,
      "default_max_tokens": cfg.max_new_tokens,
      **DECODINGS[decoding],
    },
    workers=cfg.get("workers", 1),
    progress=progress,
    plots=False,
  )
  _write_json(Path(workdir) / "summary.json", summary)
  return summary


def run_sft(
  sft_config: ml_collections.ConfigDict,
  train_file: str | Path,
  workdir: str | Path,
  eval_file: str | Path = "",
) -> dict[str, Any]:
  """``rl.sft.trainer.train`` on a trajectory file (held-out loss on ``eval_file`` when given)."""
  from rl.sft.trainer import train

  config = ml_collections.ConfigDict(sft_config.to_dict())
  config.data.trajectories = str(train_file)
  config.data.eval_trajectories = str(eval_file)
  return train(config, workdir)


def run_grpo(
  grpo_config: ml_collections.ConfigDict,
  init: str | Path,
  tasks_file: str | Path,
  workdir: str | Path,
  eval_tasks_file: str | Path = "",
) -> dict[str, Any]:
  """GRPO from the policy ``init`` on the tasks of ``tasks_file``."""
  if grpo_config.get("missing"):
    raise RuntimeError(
      "the GRPO stage needs rl/grpo/trainer.py and configs/grpo.py, which this checkout does not have "
      "yet; run the other stages with --stages=library,tasks,split,trajectories,sft,eval"
    )
  from rl.grpo import trainer as grpo

  config = ml_collections.ConfigDict(grpo_config.to_dict())
  config.init = str(init)
  config.data.tasks = str(tasks_file)
  config.data.eval_tasks = str(eval_tasks_file)
  return grpo.train(config, workdir)


# --- the pipeline ----------------------------------------------------------------------------


def _write_json(path: Path, data: Any) -> None:
  path.parent.mkdir(parents=True, exist_ok=True)
  path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def _read_json(path: Path, stage: str) -> dict[str, Any]:
  if not path.is_file():
    raise FileNotFoundError(f"{path} is missing: run the {stage!r} stage first")
  return json.loads(path.read_text(encoding="utf-8"))


def run(
  config: ml_collections.ConfigDict, workdir: str | Path, stages: Sequence[str] = STAGES
) -> dict[str, Any]:
  """Runs ``stages`` of the pipeline in ``workdir``; writes ``summary.json``, ``report.md`` and
  the plots there and returns the summary."""

  unknown = sorted(set(stages) - set(STAGES))
  if unknown:
    raise ValueError(f"unknown stages {unknown}; valid: {', '.join(STAGES)}")
  decodings = check_decodings(config.eval.get("decodings", ("free",)))
  wd = Path(workdir)
  wd.mkdir(parents=True, exist_ok=True)
  if config.get("compilation_cache"):  # every policy and decoding jits the same programs
    use_compilation_cache(wd / "jax_cache")
  names = [s for s in STAGES if s in stages and s != "eval"]
  if "eval" in stages:
    names += [f"eval {eval_name(p, d)}" for p in POLICIES for d in decodings]
  stage = Stages([*names, "report"])
  paths = {
    "library": wd / "library",
    "tasks": wd / "tasks",
    "split": wd / "split",
    "train_traj": wd / "trajectories" / "train",
    "eval_traj": wd / "trajectories" / "eval",
    "init": wd / "policy_init",
    "sft": wd / "sft",
    "grpo": wd / "grpo",
  }

  if "library" in stages:
    with stage("library"):
      specs = config.library.specs or None
      library = build_library(specs, paths["library"], workers=config.library.workers)
      library["specs"] = config.library.specs
      _write_json(paths["library"] / "summary.json", library)
  library = _read_json(paths["library"] / "summary.json", "library")
  if config.library.get("compose"):  # every later stage may meet tasks over compiled services
    load_compiled_library(paths["library"], facets=facets.load())

  if "tasks" in stages:
    with stage("tasks"):
      tasks, task_summary = make_tasks(config.tasks, config.seed)
      save_tasks(tasks, paths["tasks"] / "tasks.jsonl")
      _write_json(paths["tasks"] / "summary.json", task_summary)
  task_summary = _read_json(paths["tasks"] / "summary.json", "tasks")

  if "split" in stages:
    with stage("split"):
      tasks = load_tasks(paths["tasks"] / "tasks.jsonl")
      mode = config.split.get("mode", "composition")
      save_split(tasks, config.split.eval_fraction, config.seed, paths["split"], mode)
  split = _read_json(paths["split"] / "summary.json", "split")
  train_tasks, eval_tasks = paths["split"] / "train.jsonl", paths["split"] / "eval.jsonl"

  if "trajectories" in stages:
    with stage("trajectories"):
      for part, tasks_file in (("train_traj", train_tasks), ("eval_traj", eval_tasks)):
        summary = collect_trajectories(
          load_tasks(tasks_file),
          paths[part],
          agent_kwargs=oracle_kwargs(config, held_out=part == "eval_traj"),
          max_turns=config.trajectories.max_turns,
        )
        _write_json(paths[part] / "summary.json", summary)
  trajectories = _read_json(paths["train_traj"] / "summary.json", "trajectories")
  if not trajectories["kept"]:
    raise ValueError(f"the oracle solved none of the training tasks: {trajectories}")

  policies = {"before_sft": paths["init"], "after_sft": paths["sft"] / POLICY_DIR}
  if "sft" in stages:
    with stage("sft"):
      from compoworld.agents.trajectories import load_trajectories

      # A fresh run: rl.sft.trainer.train would resume from an earlier run's checkpoints here.
      for old in (paths["sft"], paths["init"], paths["grpo"]):
        shutil.rmtree(old, ignore_errors=True)
      train_records = load_trajectories(paths["train_traj"] / SFT_FILE)
      init_policy(config.sft, train_records, paths["sft"], paths["init"])
      sft = run_sft(
        config.sft,
        paths["train_traj"] / SFT_FILE,
        paths["sft"],
        paths["eval_traj"] / TRAJECTORIES_FILE,
      )
      _write_json(paths["sft"] / "summary.json", sft)
  sft = _read_json(paths["sft"] / "summary.json", "sft")

  grpo = None
  if "grpo" in stages:
    with stage("grpo"):
      shutil.rmtree(paths["grpo"], ignore_errors=True)  # a fresh run, as for SFT
      grpo = run_grpo(config.grpo, policies["after_sft"], train_tasks, paths["grpo"], eval_tasks)
      _write_json(paths["grpo"] / "summary.json", grpo)
  elif (paths["grpo"] / "summary.json").is_file():
    grpo = _read_json(paths["grpo"] / "summary.json", "grpo")
  if grpo is not None:
    policies["after_grpo"] = paths["grpo"] / POLICY_DIR

  # The oracle's play of the held-out tasks (collected with the trajectories) is the ceiling.
  oracle = _read_json(paths["eval_traj"] / "summary.json", "trajectories")
  evaluations = {
    "oracle": {
      "pass_rate": oracle["success_rate"],
      "rubric_score": oracle["mean_score"],
      "tasks": oracle["tasks"],
      **{k: oracle[k] for k in ("tool_error_rate", "mean_turns", "mean_tool_calls")},
    }
  }
  for policy in POLICIES:
    for decoding in decodings:
      name = eval_name(policy, decoding)
      out = wd / "eval" / name
      if "eval" in stages and policy in policies:
        with stage(f"eval {name}"):
          summary = evaluate_policy(
            policies[policy], eval_tasks, out, config.eval, config.seed, decoding=decoding
          )
      elif (out / "summary.json").is_file():
        summary = _read_json(out / "summary.json", "eval")
      else:
        continue
      evaluations[name] = summary

  # Stages left out this time keep the wall time of the run that made their files.
  earlier = wd / "summary.json"
  earlier_seconds = json.loads(earlier.read_text())["stage_seconds"] if earlier.is_file() else {}
  earlier_seconds.pop("report", None)
  with stage("report"):
    summary = {
      "config": config.variant,
      "workdir": str(wd),
      "library": library,
      "tasks": task_summary["tasks"],
      "task_summary": task_summary,
      "split": split,
      "sft_trajectories": trajectories["kept"],
      "trajectory_summary": trajectories,
      "sft": sft,
      "grpo": grpo,
      "evaluation": {name: _headline(s) for name, s in evaluations.items()},
      "stages_run": list(stages),
      "stage_seconds": {**earlier_seconds, **stage.seconds},
    }
    trained = [n for n in evaluations if n.startswith(("after_sft", "after_grpo"))]
    summary["failures"] = failure_breakdowns(wd, trained, oracle_kwargs(config))
    summary["files"] = write_report(summary, evaluations, wd)
  summary["stage_seconds"] = {**earlier_seconds, **stage.seconds}
  summary["seconds"] = stage.total
  _write_json(wd / "summary.json", summary)
  return summary


def _headline(summary: dict[str, Any]) -> dict[str, Any]:
  keys = ("tasks", "pass_rate", "rubric_score", "tool_error_rate", "mean_turns", "mean_tool_calls")
  return {k: summary[k] for k in keys}
