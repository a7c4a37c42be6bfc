"""The data of the SFT experiments' arms (``rl.pipeline.sft_experiments``): generated tasks, their
held-out sets and the oracle's verified trajectories, prepared once per seed and arm and reused
from ``prepared.json``.

- ``prepare``: K >= 2 tasks held out by service set (section 5.3's held-out compositions);
- ``prepare_single`` / ``prepare_instances``: K = 1 tasks, without a split or held out by
  instance (a K = 1 composition is a service);
- ``prepare_seen``: new instances of the service sets an arm trained on, which tell a policy
  that fails composed tasks apart from one that fails unseen compositions;
- the subsets an arm trains on (``first_trajectories``, ``services_subset``, ``in_services``,
  ``mix_trajectories``), the same tasks played again with other oracle settings (``replay``),
  and the tokenizer every arm of a seed shares (``shared_tokenizer``).
"""

from __future__ import annotations

import collections
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import ml_collections

from compoworld.agents.trajectories import SFT_FILE, TRAJECTORIES_FILE, collect_trajectories
from compoworld.tasks.task import Task, load_tasks, save_tasks
from rl.pipeline.run import composition, make_tasks, one_per_composition, oracle_kwargs, save_split


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
  held = _first_held_out(config, workdir / "split")
  train = load_tasks(workdir / "split" / "train.jsonl")
  # The paper's one trajectory per composition, or every training task spread round-robin
  # over the compositions (a budget larger than the number of compositions).
  spread = not config.get("one_per_composition", True)
  train = spread_over_compositions(train) if spread else one_per_composition(train)
  return _play(config, train, held, workdir, k=k, tasks=task_summary["tasks"], split=info)


def _play(
  config: ml_collections.ConfigDict,
  train: Sequence[Task],
  held: Sequence[Task],
  workdir: Path,
  **facts: Any,
) -> dict[str, Any]:
  """The oracle's verified trajectories of the training tasks (``workdir/train``) and its play
  of the held-out ones (``workdir/eval``); what a prepared arm records, with ``facts``, in
  ``workdir/prepared.json``."""
  collected = collect_trajectories(train, workdir / "train", agent_kwargs=oracle_kwargs(config))
  oracle = collect_trajectories(held, workdir / "eval", agent_kwargs=oracle_kwargs(config, True))
  prepared = {
    **facts,
    "train_compositions": len({composition(t) for t in train}),
    "train_services": sorted({s for t in train for s in t.services}),
    "verified_trajectories": collected["kept"],
    "eval_tasks": len(held),
    "oracle_eval_pass_rate": oracle["success_rate"],
    "train_file": str(workdir / "train" / SFT_FILE),
    "train_tasks_file": str(workdir / "split" / "train.jsonl"),
    "eval_tasks_file": str(workdir / "split" / "eval.jsonl"),
    "eval_trajectories_file": str(workdir / "eval" / TRAJECTORIES_FILE),
  }
  (workdir / "prepared.json").write_text(
    json.dumps(prepared, indent=2, sort_keys=True) + "\n", encoding="utf-8"
  )
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


def _first_held_out(config: ml_collections.ConfigDict, split_dir: Path) -> list[Task]:
  """The split's first ``eval.max_tasks`` held-out tasks, round-robin over their service sets
  (in task order one set can fill them: 51 of 60 from one pair, 2026-12-06), written back as
  its ``eval.jsonl`` (the split's summary.json stays beside it)."""
  held = spread_over_compositions(load_tasks(split_dir / "eval.jsonl"))[: config.eval.max_tasks]
  save_tasks(held, split_dir / "eval.jsonl")
  return held


#: Added to a seed to draw `prepare_seen`'s new instances of the trained service sets.
SEEN_SEED_OFFSET = 1000


def prepare_seen(
  config: ml_collections.ConfigDict, seed: int, trained: dict[str, Any], workdir: Path
) -> dict[str, Any]:
  """New instances of the service sets an arm trained on (``trained``: its train_file and
  train_tasks_file): tasks generated with seed ``seed + SEEN_SEED_OFFSET``, kept where their
  set is a trained one and their instruction none of a training task's, round-robin over the
  sets, the first ``eval.max_tasks``; played by the oracle (``workdir/eval``). What a held-out
  set of unseen sets cannot tell apart: whether a policy fails a composed task or an unseen
  composition. Reused when ``workdir/prepared.json`` exists."""
  done = workdir / "prepared.json"
  if done.is_file():
    return json.loads(done.read_text(encoding="utf-8"))
  tasks = {t.id: t for t in load_tasks(trained["train_tasks_file"])}
  lines = Path(trained["train_file"]).read_text(encoding="utf-8").splitlines()
  sets = {composition(tasks[json.loads(line)["task_id"]]) for line in lines}
  instructions = {t.instruction for t in tasks.values()}
  new, summary = make_tasks(config.tasks, seed + SEEN_SEED_OFFSET)
  kept = [t for t in new if composition(t) in sets and t.instruction not in instructions]
  held = spread_over_compositions(kept)[: config.eval.max_tasks]
  if not held:
    raise ValueError(f"no new task of seed {seed + SEEN_SEED_OFFSET} has a trained service set")
  save_tasks(held, workdir / "split" / "eval.jsonl")
  oracle = collect_trajectories(held, workdir / "eval", agent_kwargs=oracle_kwargs(config, True))
  prepared = {
    "tasks": summary["tasks"],
    "eval_tasks": len(held),
    "eval_service_sets": len({composition(t) for t in held}),
    "oracle_eval_pass_rate": oracle["success_rate"],
    "eval_tasks_file": str(workdir / "split" / "eval.jsonl"),
  }
  done.write_text(json.dumps(prepared, indent=2, sort_keys=True) + "\n", encoding="utf-8")
  return prepared


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


def prepare_instances(
  config: ml_collections.ConfigDict, seed: int, workdir: Path
) -> dict[str, Any]:
  """K = 1 tasks, held out by instance (``compoworld.tasks.splits``: held-out tasks whose
  instance no training task has), for environment scaling over services.

  The training tasks are spread round-robin over their services (``spread_over_compositions``)
  and played by the oracle (``workdir/train/sft.jsonl``); ``services`` lists the services in the
  order of their first training task, so a size-n arm trains on the first n. The first
  ``eval.max_tasks`` held-out tasks, round-robin over the services, are every arm's test, and
  the oracle's play of them its held-out loss. Reused when ``workdir/prepared.json`` exists."""
  done = workdir / "prepared.json"
  if done.is_file():
    return json.loads(done.read_text(encoding="utf-8"))
  tasks, task_summary = make_tasks(config.tasks, seed, k=1)
  info = save_split(tasks, config.split.eval_fraction, seed, workdir / "split", mode="instances")
  held = _first_held_out(config, workdir / "split")
  train = spread_over_compositions(load_tasks(workdir / "split" / "train.jsonl"))
  save_tasks(train, workdir / "split" / "train.jsonl")
  return _play(
    config,
    train,
    held,
    workdir,
    k=1,
    tasks=task_summary["tasks"],
    split=info,
    services=list(dict.fromkeys(composition(t)[0] for t in train)),
    eval_services=len({composition(t) for t in held}),
  )


def shared_tokenizer(
  config: ml_collections.ConfigDict, train_files: Sequence[str | Path], out: Path
) -> str:
  """One tokenizer for every arm of a seed, so that arms differ in their training data alone:
  trained (``config.sft.tokenizer``) on the first ``tokenizer_trajectories`` trajectories, an
  equal share from each of ``train_files``, and saved in ``out``; reused when ``out`` has one."""
  from rl.data.tokenizer import has_tokenizer
  from rl.sft.data import get_tokenizer

  if not has_tokenizer(out):
    per_file = config.get("tokenizer_trajectories", 2000) // len(train_files)
    sample = []
    for path in train_files:
      lines = Path(path).read_text(encoding="utf-8").splitlines()[:per_file]
      sample += [json.loads(line) for line in lines]
    get_tokenizer(config.sft, out, sample).save(out)
  return str(out)


def services_subset(data: dict[str, Any], n: int, out: Path) -> tuple[Path, int]:
  """The training trajectories of the first ``n`` services of ``data["services"]``
  (``prepare_instances``), in their order, as ``out/sft.jsonl``; returns it and their number."""
  if not 1 <= n <= len(data["services"]):
    raise ValueError(
      f"size {n}: the training tasks cover {len(data['services'])} services; sizes must be "
      f"1..{len(data['services'])}"
    )
  return in_services(data, data["services"][:n], out / SFT_FILE)


def in_services(data: dict[str, Any], services: Sequence[str], out: Path) -> tuple[Path, int]:
  """The trajectories of ``data["train_file"]`` whose task (in ``data["train_tasks_file"]``)
  uses only ``services``, in their order, written to ``out``; returns it and their number."""
  keep = set(services)
  ids = {t.id for t in load_tasks(data["train_tasks_file"]) if set(t.services) <= keep}
  lines = [
    line
    for line in Path(data["train_file"]).read_text(encoding="utf-8").splitlines()
    if json.loads(line)["task_id"] in ids
  ]
  out.parent.mkdir(parents=True, exist_ok=True)
  out.write_text("\n".join(lines) + "\n", encoding="utf-8")
  return out, len(lines)


def first_trajectories(train_file: str | Path, n: int, out: Path) -> Path:
  """The first ``n`` trajectories of ``train_file`` as ``out/sft.jsonl``."""
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


def mix_trajectories(parts: Sequence[tuple[str | Path, int]], out: Path) -> Path:
  """The first ``n`` trajectories of each ``(file, n)`` of ``parts``, interleaved evenly (the
  i-th of a part's n at position (i + 1/2) / n of the mix), as ``out/sft.jsonl``."""
  placed = []
  for part, (path, n) in enumerate(parts):
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    if len(lines) < n:
      raise ValueError(f"{path} holds {len(lines)} trajectories; the mix needs {n}")
    placed += [((i + 0.5) / n, part, line) for i, line in enumerate(lines[:n])]
  out.mkdir(parents=True, exist_ok=True)
  mixed = "\n".join(line for *_, line in sorted(placed, key=lambda p: p[:2]))
  (out / SFT_FILE).write_text(mixed + "\n", encoding="utf-8")
  return out / SFT_FILE


def replay(
  tasks_file: str | Path, out: Path, oracle: dict[str, Any], trajectories_file: str | Path = ""
) -> dict[str, Any]:
  """The oracle, with ``oracle``'s settings, on the tasks of ``tasks_file`` (or, given
  ``trajectories_file``, on its trajectories' tasks in its order: the same training set played
  another way), written to ``out`` (`collect_trajectories`); its summary. A task the oracle
  does not solve so is an error: the arm would otherwise train on fewer trajectories."""
  tasks = load_tasks(tasks_file)
  if trajectories_file:
    by_id = {t.id: t for t in tasks}
    lines = Path(trajectories_file).read_text(encoding="utf-8").splitlines()
    tasks = [by_id[json.loads(line)["task_id"]] for line in lines]
  collected = collect_trajectories(tasks, out, agent_kwargs=oracle)
  if collected["kept"] != len(tasks):
    raise RuntimeError(
      f"the oracle with {oracle} verified {collected['kept']} of {len(tasks)} tasks of "
      f"{tasks_file}; see {out / TRAJECTORIES_FILE}"
    )
  return collected


def with_clauses(
  config: ml_collections.ConfigDict, seed: int, k: int, tasks_files: Sequence[str | Path], out: Path
) -> list[Path]:
  """``tasks_files`` with each task's sentences and the calls they ask for
  (``meta["clauses"]``, what a quoting oracle reads), in the same order. A file whose tasks
  were saved before the generator recorded them is written anew to ``out`` (same name; the
  tasks generated again with the config's, ``seed`` and ``k``: the generator is deterministic),
  each task checked to be the same but for that."""
  loaded = {Path(f): load_tasks(f) for f in tasks_files}
  again: dict[str, Task] = {}
  paths = []
  for f, tasks in loaded.items():
    if all(t.meta.get("clauses") for t in tasks):
      paths.append(f)
      continue
    target = out / f.name
    paths.append(target)
    if target.is_file():
      continue
    again = again or {t.id: t for t in make_tasks(config.tasks, seed, k=k)[0]}
    annotated = [_same_task(t, again.get(t.id), f) for t in tasks]
    partial = target.with_suffix(".partial")
    save_tasks(annotated, partial)
    partial.replace(target)
  return paths


def _same_task(saved: Task, new: Task | None, tasks_file: Path) -> Task:
  """``new``, the task generated again, when it is ``saved`` but for its recorded sentences."""
  if (
    new is None
    or {**new.meta, "clauses": None} != {**saved.meta, "clauses": None}
    or (new.model_dump(exclude={"meta"}) != saved.model_dump(exclude={"meta"}))
  ):
    raise RuntimeError(
      f"task {saved.id} of {tasks_file} is not generated again the same: the task library "
      "changed since it was saved; prepare the seed anew"
    )
  return new
