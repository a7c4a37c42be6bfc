"""The paper's SFT-data experiments (section 5.3): what the held-out score owes to the number of
distinct compositions trained on (environment scaling, 5.3.1) and to training on composed rather
than simpler tasks at the same budget (5.3.2).

Per seed, each arm generates its tasks, holds out service sets (``compoworld.tasks.splits``), plays one
training task per distinct composition with the oracle, trains the configured SFT recipe on the
first ``n`` verified trajectories, and evaluates the policy on the held-out tasks (pass rate,
rubric score, and the held-out SFT loss on the oracle's held-out trajectories, which moves long
before a tiny policy passes anything). The "single" arm of 5.3.2 is K = 1 by default: tasks in
one service each (``compoworld.tasks.walks.sample_single_walk``); each arm's data is prepared by
``rl.pipeline.arm_data``.

With K = 1 (``tasks.num_services = 1``, the CPU learning regime's tasks) environment scaling
counts *services*: a size-n arm trains on the tasks of n services, and every arm is scored on the
same held-out task instances of all of them (``prepare_instances``). ``budget`` says what the arms
hold equal: ``"steps"`` (every arm ``steps`` optimizer steps, the smaller ones repeating their
data; this separates diversity from training length) or ``"epochs"`` (one epoch over each arm's
tasks, so larger arms train longer, as the paper's).
"""

from __future__ import annotations

import itertools
import json
import math
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import ml_collections

from compoworld.agents.divergence import breakdown, read_results, reference_calls
from compoworld.agents.trajectories import SFT_FILE, TRAJECTORIES_FILE
from compoworld.tasks.task import load_tasks
from rl.pipeline.arm_data import (
  first_trajectories,
  in_services,
  mix_trajectories,
  prepare,
  prepare_instances,
  prepare_seen,
  prepare_single,
  replay,
  services_subset,
  shared_tokenizer,
  with_clauses,
)
from rl.pipeline.experiments import band_note, curve, describe, over_seeds, run_seeds
from rl.pipeline.plots import bar_plot, line_plot
from rl.pipeline.run import (
  evaluate_policy,
  oracle_kwargs,
  run_sft,
)
from rl.serve.policy import POLICY_DIR

#: An arm's scores on an extra task file (`score_on`).
SCORES = ("pass_rate", "rubric_score", "path_followed")

#: What a K = 1 environment-scaling arm holds equal to the others (``config.budget``).
BUDGETS = ("steps", "epochs")

#: What each trained policy is scored by, and the plot label of each.
METRICS = {
  "pass_rate": "held-out pass rate",
  "rubric_score": "held-out rubric score",
  "eval_loss": "held-out SFT loss",
  # Held-out oracle turns that greedy decoding reproduces token for token from the oracle's
  # history (rl.sft.trainer.turn_matches): moves before whole episodes pass.
  "eval_turn_match": "held-out turns reproduced",
}


def budget_overrides(
  config: ml_collections.ConfigDict, trajectories: int, tokenizer: str
) -> dict[str, Any]:
  """The SFT fields a K = 1 scaling arm of ``trajectories`` trajectories sets (`BUDGETS`): the
  shared tokenizer, and ``config.steps`` steps over as many epochs as they take (a row holds at
  least one trajectory, and rarely more than four) or one epoch."""
  if config.budget not in BUDGETS:
    raise ValueError(f"unknown budget {config.budget!r}; valid: {', '.join(BUDGETS)}")
  out: dict[str, Any] = {"tokenizer.path": tokenizer}
  if config.budget == "epochs":
    return {**out, "max_steps": 0, "data.num_epochs": 1}
  rows = config.steps * config.sft.data.batch_size
  return {**out, "max_steps": config.steps, "data.num_epochs": math.ceil(4 * rows / trajectories)}


def train_and_evaluate(
  config: ml_collections.ConfigDict,
  train_file: str | Path,
  eval_tasks_file: str | Path,
  eval_trajectories_file: str | Path,
  workdir: Path,
  seed: int,
  sft_overrides: dict[str, Any] | None = None,
  more_evals: dict[str, str | Path] | None = None,
) -> dict[str, Any]:
  """The SFT recipe (model seed and data order from ``seed``; ``sft_overrides`` maps dotted
  fields of ``config.sft`` to values) on ``train_file``, then the policy on the held-out tasks,
  decoding as ``config.eval.decoding`` says (default free), and on each of ``more_evals`` (name:
  task file), whose scores are ``<name>_pass_rate`` and ``<name>_rubric_score``."""
  t0 = time.perf_counter()
  sft_config = ml_collections.ConfigDict(config.sft.to_dict())
  sft_config.seed = seed
  sft_config.data.seed = seed
  for key, value in (sft_overrides or {}).items():
    *path, field = key.split(".")
    node = sft_config
    for part in path:
      node = node[part]
    node[field] = value
  sft = run_sft(sft_config, train_file, workdir / "sft", eval_trajectories_file)
  decoding = config.eval.get("decoding", "free")
  policy = workdir / "sft" / POLICY_DIR
  ev = evaluate_policy(policy, eval_tasks_file, eval_dir(workdir), config.eval, decoding=decoding)
  more: dict[str, Any] = {}
  for name, tasks_file in (more_evals or {}).items():
    more |= score_on(config, workdir, name, tasks_file)
  return {
    **more,
    "pass_rate": ev["pass_rate"],
    "rubric_score": ev["rubric_score"],
    "path_followed": path_followed(eval_dir(workdir), eval_tasks_file, config),
    "eval_loss": sft["eval_loss"],
    "eval_turn_match": sft["eval_turn_match"],
    "sft_steps": sft["steps"],
    "decoding": decoding,
    "final_train_loss": sft["final_loss"],
    "seconds": round(time.perf_counter() - t0, 1),
  }


def score_on(
  config: ml_collections.ConfigDict, arm_dir: Path, name: str, tasks_file: str | Path
) -> dict[str, float]:
  """An arm's trained policy on the extra task file ``name``: ``<name>_pass_rate``,
  ``<name>_rubric_score`` and ``<name>_path_followed``."""
  policy, out = arm_dir / "sft" / POLICY_DIR, eval_dir(arm_dir, name)
  decoding = config.eval.get("decoding", "free")
  e = evaluate_policy(policy, tasks_file, out, config.eval, decoding=decoding)
  return {
    f"{name}_pass_rate": e["pass_rate"],
    f"{name}_rubric_score": e["rubric_score"],
    f"{name}_path_followed": path_followed(out, tasks_file, config),
  }


def eval_dir(arm_dir: Path, name: str | None = None) -> Path:
  """Where `train_and_evaluate` writes an arm's evaluation: of the held-out tasks, or of the
  extra task file ``name``."""
  return arm_dir / ("eval" if name is None else f"eval_{name}")


def path_followed(
  eval_dir: str | Path, tasks_file: str | Path, config: ml_collections.ConfigDict
) -> float:
  """The mean share of the oracle's calls (played as ``config.trajectories`` plays it, without
  detours) that the episodes in ``eval_dir/results.jsonl`` make before first leaving its path
  (a pass: all): how far into held-out tasks a policy's own episodes get where the pass rate is
  still 0 (`compoworld.agents.divergence.breakdown`)."""
  rows = read_results(Path(eval_dir) / "results.jsonl")
  references = reference_calls(tasks_file, rows, oracle_kwargs(config, held_out=True))
  return breakdown(references, rows)["path_followed"]


def _finish(
  name: str,
  results: list[dict[str, Any]],
  x_name: str,
  arms: dict[str, list[str]],
  workdir: Path,
  metrics: dict[str, str] = METRICS,
) -> dict[str, Any]:
  """Intervals over seeds of every ``<arm>_<metric>`` curve, one plot per metric, the summary."""
  keys = [f"{arm}_{m}" for arm in arms for m in metrics]
  stats = over_seeds(results, keys)
  plots, band = [], "\n" + band_note(len(results))
  for metric, label in metrics.items():
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
    for m, label in metrics.items()
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
  """SFT on ``config.sizes`` trajectories, each from a distinct composition (section 5.3.1), or
  with K = 1 tasks on the tasks of ``config.sizes`` services (`service_scaling`)."""
  if config.tasks.num_services == 1:
    return service_scaling(config, seeds, workdir)
  workdir, sizes = Path(workdir), sorted(config.sizes)

  def one_seed(seed: int, wd: Path) -> dict[str, Any]:
    data = prepare(config, seed, config.tasks.num_services, wd / "data")
    out: dict[str, Any] = {"data": data, **{f"sft_{m}": [] for m in METRICS}}
    for n in sizes:
      print(f"--- seed {seed}: SFT on {n} trajectories")
      train_file = first_trajectories(data["train_file"], n, wd / f"n{n}")
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


def service_scaling(
  config: ml_collections.ConfigDict, seeds: Sequence[int], workdir: str | Path
) -> dict[str, Any]:
  """Environment scaling with K = 1 tasks: SFT on the tasks of ``config.sizes`` services, at
  equal steps or equal epochs (``config.budget``), every arm scored on the same held-out
  instances of all the services (``prepare_instances``)."""
  workdir, sizes = Path(workdir), sorted(config.sizes)

  def one_seed(seed: int, wd: Path) -> dict[str, Any]:
    data = prepare_instances(config, seed, wd / "data")
    tokenizer = shared_tokenizer(config, [data["train_file"]], wd / "data" / "tokenizer")
    out: dict[str, Any] = {"data": data, **{f"sft_{m}": [] for m in METRICS}}
    for n in sizes:
      train_file, count = services_subset(data, n, wd / f"s{n}")
      print(f"--- seed {seed}: SFT on the {count} trajectories of {n} services ({config.budget})")
      overrides = budget_overrides(config, count, tokenizer)
      r = train_and_evaluate(
        config,
        train_file,
        data["eval_tasks_file"],
        data["eval_trajectories_file"],
        wd / f"s{n}",
        seed,
        overrides,
      )
      out[f"s{n}"] = {**r, "trajectories": count}
      for m in METRICS:
        out[f"sft_{m}"].append(r[m])
    return out

  results = run_seeds(one_seed, seeds, workdir, config)
  name = f"environment scaling, equal {config.budget}"
  return _finish(name, results, "services", {"sft": sizes}, workdir)


def single_vs_composed(
  config: ml_collections.ConfigDict, seeds: Sequence[int], workdir: str | Path
) -> dict[str, Any]:
  """The same budget of trajectories from tasks of ``config.single_k`` services (default 1:
  single-service tasks) and of ``config.tasks.num_services``; both scored on held-out composed
  tasks (section 5.3.2).

  With ``config.held_out_single`` (the CPU regime's), the single arm's K = 1 tasks are held out
  by instance too (``prepare_instances``, ``config.single_tasks`` of them) and both arms are
  also scored on those held-out single-service tasks, so neither is scored only on its own
  training distribution; the single arm trains only on the services the composed arm's
  training tasks use, and one tokenizer (``shared_tokenizer``) serves both; and both are scored
  on new instances of the composed arm's training pairs (``prepare_seen``, ``seen_pairs_*``),
  which separates failing composed tasks from failing unseen compositions.

  With ``config.mixed_share`` > 0 (and ``held_out_single``) a third arm, "mixed", trains on the
  same budget drawn from both arms' training trajectories, that share of it composed (`_mixed`),
  and is scored on all three sets. With ``config.discovery_arm`` set (one of the oracle's
  ``discovery`` settings other than the recipe's, e.g. ``"services"``) another arm,
  "discovery", trains on the composed arm's very tasks played with those discovery calls
  (`_discovery`). With ``config.quote_arm`` another, "quote", trains on those tasks played by
  an oracle that quotes each sentence of the request before its first call (`_quote`), and
  "quote_bare" on quotes without the sentences' opening connectives (`quote_arms`). None
  of these settings is part of the seeds' config digest: these arms are added to seeds saved
  before."""
  workdir, budget = Path(workdir), config.budget
  arms = {"single": config.single_k, "composed": config.tasks.num_services}
  held_out_single = config.get("held_out_single", False)
  if held_out_single and arms["single"] != 1:
    raise ValueError(f"held_out_single needs single_k = 1, got {arms['single']}")
  mixed_share = config.get("mixed_share", 0.0)
  if not 0 <= mixed_share < 1 or (mixed_share and not held_out_single):
    raise ValueError(
      f"mixed_share must be in [0, 1) and needs held_out_single; got {mixed_share} "
      f"(held_out_single {held_out_single})"
    )
  discovery = config.get("discovery_arm", "")
  if discovery and not held_out_single:
    raise ValueError(f"discovery_arm needs held_out_single; got {discovery!r}")
  if discovery and discovery == oracle_kwargs(config).get("discovery", "full"):
    raise ValueError(
      f"discovery_arm {discovery!r} is the recipe's own: the arm is the composed one"
    )
  quotes = quote_arms(config.get("quote_arm", ""))
  if quotes and not held_out_single:
    raise ValueError("quote_arm needs held_out_single")
  if quotes and oracle_kwargs(config).get("quote", False):
    raise ValueError("quote_arm: the recipe's oracle quotes already; the arm is the composed one")
  metrics = dict(METRICS)
  metrics["path_followed"] = "held-out path followed"
  seen_metrics = {  # prepare_seen's tasks, scored after every seed has trained
    f"seen_pairs_{m}": f"{m.replace('_', ' ')}, trained pairs (new tasks)"
    for m in (SCORES if held_out_single else ())
  }
  if held_out_single:
    metrics["single_tasks_pass_rate"] = "held-out single-service pass rate"
    metrics["single_tasks_rubric_score"] = "held-out single-service rubric score"
    metrics["single_tasks_path_followed"] = "held-out single-service path followed"

  def single_data(seed: int, wd: Path, services: Sequence[str]) -> dict[str, Any]:
    single_config = ml_collections.ConfigDict(config.to_dict())
    single_config.tasks.num_tasks = config.single_tasks
    single_config.split.eval_fraction = config.single_eval_fraction
    data = prepare_instances(single_config, seed, wd)
    train_file, _ = in_services(data, services, wd / "train" / "in_composed_services.jsonl")
    return {**data, "train_file": str(train_file)}

  def one_seed(seed: int, wd: Path) -> dict[str, Any]:
    composed = prepare(config, seed, arms["composed"], wd / "data_composed")
    out: dict[str, Any] = {"data_composed": composed}
    data_of = {"composed": composed}
    k = arms["single"]
    if held_out_single:
      data_of["single"] = single_data(seed, wd / "data_single", composed["train_services"])
    elif k == 1:
      data_of["single"] = prepare_single(config, seed, wd / "data_single")
    else:
      data_of["single"] = prepare(config, seed, k, wd / "data_single")
    overrides, more_evals = {}, {}
    if held_out_single:
      files = [data_of[arm]["train_file"] for arm in arms]
      overrides["tokenizer.path"] = shared_tokenizer(config, files, wd / "tokenizer")
      more_evals["single_tasks"] = data_of["single"]["eval_tasks_file"]
    for arm, k in arms.items():
      out[f"data_{arm}"] = data = data_of[arm]
      print(f"--- seed {seed}: SFT on {budget} trajectories of K = {k} tasks ({arm})")
      train_file = first_trajectories(data["train_file"], budget, wd / arm)
      r = train_and_evaluate(
        config,
        train_file,
        composed["eval_tasks_file"],
        composed["eval_trajectories_file"],
        wd / arm,
        seed,
        overrides,
        more_evals,
      )
      r["train_services"] = _services_of(train_file, data["train_tasks_file"])
      out[arm] = r
      for m in metrics:
        out[f"{arm}_{m}"] = [r[m]]
    return out

  added_settings = ("mixed_share", "discovery_arm", "quote_arm")
  digest_config = {k: v for k, v in config.to_dict().items() if k not in added_settings}
  results = run_seeds(one_seed, seeds, workdir, digest_config)
  for r in results:  # a seed run before the path was measured: from its saved episodes
    evals = {None: r["data_composed"]["eval_tasks_file"]}
    if held_out_single:
      evals["single_tasks"] = r["data_single"]["eval_tasks_file"]
    for arm, (name, tasks_file) in itertools.product(arms, evals.items()):
      key = f"{name}_path_followed" if name else "path_followed"
      if f"{arm}_{key}" not in r:
        arm_dir = workdir / f"seed_{r['seed']}" / arm
        r[arm][key] = path_followed(eval_dir(arm_dir, name), tasks_file, config)
        r[f"{arm}_{key}"] = [r[arm][key]]
  for r in results if held_out_single else ():  # new instances of the trained pairs
    seed_dir = workdir / f"seed_{r['seed']}"
    if any(f"{arm}_seen_pairs_{m}" not in r for arm in arms for m in SCORES):
      print(f"--- seed {r['seed']}: both arms on new instances of the composed arm's pairs")
      trained = {**r["data_composed"], "train_file": seed_dir / "composed" / SFT_FILE}
      r["data_seen_pairs"] = prepare_seen(config, r["seed"], trained, seed_dir / "data_seen")
      for arm in arms:
        tasks_file = r["data_seen_pairs"]["eval_tasks_file"]
        r[arm] |= score_on(config, seed_dir / arm, "seen_pairs", tasks_file)
        r |= {f"{arm}_seen_pairs_{m}": [r[arm][f"seen_pairs_{m}"]] for m in SCORES}
      (seed_dir / "result.json").write_text(json.dumps(r, indent=2, sort_keys=True) + "\n")
  # the arms added to saved seeds: their setting, the key their result records it under
  added = {
    "mixed": (mixed_share, "share", _mixed),
    "discovery": (discovery, "oracle_discovery", _discovery),
    **{name: (quote, "oracle_quote", _quote) for name, quote in quotes.items()},
  }
  extra = [name for name, (setting, *_) in added.items() if setting]
  for name, r in itertools.product(extra, results):
    setting, key, train = added[name]
    seed_dir = workdir / f"seed_{r['seed']}"
    if r.get(name, {}).get(key) != setting:
      r[name] = train(config, r, seed_dir, setting)
      r |= {f"{name}_{m}": [r[name][m]] for m in metrics | seen_metrics}
      (seed_dir / "result.json").write_text(json.dumps(r, indent=2, sort_keys=True) + "\n")
  shown = {arm: [budget] for arm in [*arms, *extra]}
  summary = _finish("single vs composed", results, "budget", shown, workdir, metrics | seen_metrics)
  return {
    **summary,
    "arms_k": arms,
    "mixed_share": mixed_share,
    "discovery_arm": discovery,
    "quote_arm": config.get("quote_arm", ""),
  }


def _mixed(
  config: ml_collections.ConfigDict, r: dict[str, Any], seed_dir: Path, share: float
) -> dict[str, Any]:
  """The mixed arm of a seed of `single_vs_composed` (``r``, its result so far): the first
  ``round(share * budget)`` of the composed arm's training trajectories and the first of the
  single arm's for the rest, interleaved, trained with the seed's shared tokenizer and scored
  as the other arms (held-out pairs, held-out single-service tasks, trained pairs' new tasks).
  Its SFT resumes from its checkpoints when cut short; a changed share trains it anew."""
  n_composed = round(share * config.budget)
  print(f"--- seed {r['seed']}: SFT on {n_composed} composed + {config.budget - n_composed} single")
  arm_dir = _arm_dir(seed_dir / "mixed", "share.json", share)
  parts = [
    (seed_dir / "composed" / SFT_FILE, n_composed),
    (seed_dir / "single" / SFT_FILE, config.budget - n_composed),
  ]
  train_file = mix_trajectories(parts, arm_dir)
  composed, single = r["data_composed"], r["data_single"]
  out = _train_added_arm(
    config, r, seed_dir, arm_dir, train_file, composed["eval_trajectories_file"]
  )
  services = _service_set(parts[0][0], composed["train_tasks_file"], n_composed)
  services |= _service_set(parts[1][0], single["train_tasks_file"], config.budget - n_composed)
  return {**out, "share": share, "train_services": len(services)}


def _discovery(
  config: ml_collections.ConfigDict, r: dict[str, Any], seed_dir: Path, discovery: str
) -> dict[str, Any]:
  """The discovery arm of a seed of `single_vs_composed` (``r``, its result so far): the
  composed arm's tasks played again by the oracle with ``discovery`` calls (``"services"``:
  one ``list_services`` first, so the episode's services and their descriptions stand in the
  context when a composed task changes service; `_replayed_arm`)."""
  print(
    f"--- seed {r['seed']}: SFT on the composed arm's tasks, the oracle's discovery {discovery!r}"
  )
  arm_dir = _arm_dir(seed_dir / "discovery", "discovery.json", discovery)
  composed = r["data_composed"]
  files = (composed["train_tasks_file"], composed["eval_tasks_file"])
  out = _replayed_arm(config, r, seed_dir, arm_dir, files, {"discovery": discovery})
  return {**out, "oracle_discovery": discovery}


#: The quote arms of `single_vs_composed` (``config.quote_arm``'s forms): each one's name and
#: the oracle's ``quote`` setting.
QUOTE_ARMS = {"sentence": ("quote", True), "bare": ("quote_bare", "bare")}


def quote_arms(value: bool | str) -> dict[str, bool | str]:
  """The quote arms that ``config.quote_arm`` asks for, by name, with the oracle's ``quote``
  setting: "sentence" (or ``True``) the sentence whole, "bare" without its opening connective,
  "sentence,bare" both; "" (or ``False``) none."""
  if value is True:
    value = "sentence"
  forms = [f.strip() for f in str(value or "").split(",") if f.strip()]
  if unknown := [f for f in forms if f not in QUOTE_ARMS]:
    raise ValueError(
      f"quote_arm: unknown {unknown}; valid: {', '.join(QUOTE_ARMS)}, comma-separated"
    )
  return dict(QUOTE_ARMS[f] for f in forms)


def _quote(
  config: ml_collections.ConfigDict, r: dict[str, Any], seed_dir: Path, quote: bool | str
) -> dict[str, Any]:
  """A quote arm of a seed of `single_vs_composed`: the composed arm's tasks played again
  by the oracle quoting, before the first call for each sentence of the request, that
  sentence (``OracleAgent(quote=True)``; ``"bare"``: without its opening connective), so the
  next tool is read off the request's words, not off the pair of services (`_replayed_arm`).
  Tasks saved before the generator recorded their sentences are generated again for them
  (`with_clauses`)."""
  name = next(n for n, setting in QUOTE_ARMS.values() if setting == quote)
  form = "without its connective" if quote == "bare" else "whole"
  print(
    f"--- seed {r['seed']}: SFT on the composed arm's tasks, each sentence quoted first, {form}"
  )
  arm_dir = _arm_dir(seed_dir / name, "quote.json", quote)
  composed = r["data_composed"]
  files = [composed["train_tasks_file"], composed["eval_tasks_file"]]
  k = config.tasks.num_services
  files = with_clauses(config, r["seed"], k, files, arm_dir / "data" / "tasks")
  out = _replayed_arm(config, r, seed_dir, arm_dir, files, {"quote": quote})
  return {**out, "oracle_quote": quote}


def _replayed_arm(
  config: ml_collections.ConfigDict,
  r: dict[str, Any],
  seed_dir: Path,
  arm_dir: Path,
  tasks_files: Sequence[str | Path],
  oracle: dict[str, Any],
) -> dict[str, Any]:
  """An arm on the composed arm's very training tasks, in its order, and its held-out pairs'
  tasks (for the held-out loss), ``tasks_files`` (train, eval), played again by the oracle
  with the recipe's settings changed by ``oracle``; trained with the seed's shared tokenizer
  and scored as the other arms."""
  train_tasks, eval_tasks = tasks_files
  train = replay(
    train_tasks,
    arm_dir / "data" / "train",
    {**oracle_kwargs(config), **oracle},
    seed_dir / "composed" / SFT_FILE,
  )
  replay(eval_tasks, arm_dir / "data" / "eval", {**oracle_kwargs(config, True), **oracle})
  out = _train_added_arm(
    config,
    r,
    seed_dir,
    arm_dir,
    arm_dir / "data" / "train" / SFT_FILE,
    arm_dir / "data" / "eval" / TRAJECTORIES_FILE,
  )
  return {**out, "trajectories": train["kept"]}


def _arm_dir(arm_dir: Path, setting_file: str, setting: Any) -> Path:
  """An added arm's directory, emptied first when it holds another ``setting`` (its
  checkpoints are not to resume from), with the setting saved in ``setting_file``."""
  saved = arm_dir / setting_file
  if saved.is_file() and json.loads(saved.read_text()) != setting:
    shutil.rmtree(arm_dir)
  arm_dir.mkdir(parents=True, exist_ok=True)
  saved.write_text(json.dumps(setting))
  return arm_dir


def _train_added_arm(
  config: ml_collections.ConfigDict,
  r: dict[str, Any],
  seed_dir: Path,
  arm_dir: Path,
  train_file: str | Path,
  eval_trajectories_file: str | Path,
) -> dict[str, Any]:
  """An arm added to a saved seed (``r``), trained on ``train_file`` with the seed's shared
  tokenizer and scored as the other arms: held-out pairs, held-out single-service tasks and
  the trained pairs' new tasks."""
  more_evals = {
    "single_tasks": r["data_single"]["eval_tasks_file"],
    "seen_pairs": r["data_seen_pairs"]["eval_tasks_file"],
  }
  return train_and_evaluate(
    config,
    train_file,
    r["data_composed"]["eval_tasks_file"],
    eval_trajectories_file,
    arm_dir,
    r["seed"],
    {"tokenizer.path": str(seed_dir / "tokenizer")},
    more_evals,
  )


def _services_of(trajectories_file: str | Path, tasks_file: str | Path) -> int:
  """How many distinct services the tasks of a trajectory file use."""
  return len(_service_set(trajectories_file, tasks_file))


def _service_set(
  trajectories_file: str | Path, tasks_file: str | Path, n: int | None = None
) -> set[str]:
  """The services that the tasks (in ``tasks_file``) of the first ``n`` (default all)
  trajectories of a trajectory file use."""
  services = {t.id: t.services for t in load_tasks(tasks_file)}
  lines = Path(trajectories_file).read_text().splitlines()[:n]
  return {s for line in lines for s in services[json.loads(line)["task_id"]]}
