"""The evaluation harness: any agent on a task file, k samples per task, the paper's metrics.

Each task's s0 is materialised once and every sample plays on its own fork of it, with a fresh
agent. Metrics (AutomationBench and the paper, section 5):

* ``pass_rate``: the share of samples whose every rubric criterion passes (full pass rate);
* ``rubric_score``: the mean share of criteria passed (partial credit);
* ``pass_hat_k``: for k = 1..n, the probability that k samples of a task all pass, estimated per
  task from its n samples with c passes as C(c, k) / C(n, k) and averaged over tasks (tau-bench);
* ``tool_error_rate``: error envelopes over tool calls; ``mean_turns``: assistant turns used;
* the same pass rate and rubric score by domain, business function, K and walk length L.

A sample whose agent could not reply (``AgentError``: an endpoint down after its retries) counts
as a failure with score 0, is counted in ``agent_errors``, and is left out of the turn means.

``evaluate`` plays the tasks; ``summarize`` turns per-task results into the summary;
``run_evaluation`` does both for a task file and writes ``results.jsonl`` (one line per task,
every sample's trajectory included), ``results.md`` and PNG plots under the workdir.
"""

from __future__ import annotations

import collections
import concurrent.futures
import json
import logging
import math
import multiprocessing
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from tqdm import tqdm

from compoworld.agents.agent import LAZY_AGENTS, Agent, AgentError, load_agent, make_agent
from compoworld.agents.episode import run_episode
from compoworld.runtime.registry import registry
from compoworld.tasks.authoring import business_functions
from compoworld.tasks.task import Task, load_tasks

RESULTS_FILE, TABLE_FILE = "results.jsonl", "results.md"
#: The per-task fields the breakdowns group by, and the summary key of each breakdown.
BREAKDOWNS = {
  "domains": "by_domain",
  "business_functions": "by_business_function",
  "K": "by_k",
  "L": "by_walk_length",
}
_DIGITS = 4
#: The default turn budget. The oracle, which discovers every service and tool through the
#: meta-tools before calling it, needs up to 85 turns on generated tasks with L = 12.
MAX_TURNS = 128


# --- agents ----------------------------------------------------------------------------------


def resolve_agent(
  spec: str, base_url: str | None = None, temperature: float = 0.0
) -> tuple[str, dict[str, Any]]:
  """An agent spec (``oracle``, ``openai:MODEL``, ``checkpoint:DIR``) as a registered agent
  name and its keyword arguments."""
  kind, _, arg = spec.partition(":")
  if kind == "oracle" and not arg:
    return "oracle", {}
  if kind == "openai":
    if not arg:
      raise ValueError("--agent=openai needs a model name: --agent=openai:MODEL")
    return "openai", {"model": arg, "base_url": base_url, "temperature": temperature}
  if kind == "checkpoint":
    if not arg:
      raise ValueError("--agent=checkpoint needs a directory: --agent=checkpoint:DIR")
    if not load_agent("checkpoint"):
      raise NotImplementedError(f"no checkpoint agent is registered by {LAZY_AGENTS['checkpoint']}")
    if not Path(arg).is_dir():
      raise FileNotFoundError(f"checkpoint directory {arg!r} does not exist")
    return "checkpoint", {"checkpoint_dir": arg, "temperature": temperature}
  raise ValueError(f"unknown agent {spec!r}; use oracle, openai:MODEL or checkpoint:DIR")


AgentFactory = Callable[[], Agent]


def agent_factory(
  agent: str | AgentFactory, agent_kwargs: dict[str, Any] | None = None, *, check: bool = True
):
  """A function that makes a fresh agent: ``agent`` is a registered name or already one.
  ``check`` makes one agent now, so a bad name or argument fails before any episode."""
  if callable(agent):
    return agent
  kwargs = dict(agent_kwargs or {})
  if check:
    make_agent(agent, **kwargs)
  return lambda: make_agent(agent, **kwargs)


# --- playing ---------------------------------------------------------------------------------


def task_labels(task: Task) -> dict[str, Any]:
  """What the breakdowns group a task by; tasks without generator meta (hand-built scenarios)
  get their domains from the registry and K, L from their services and walk."""
  meta = task.meta
  domains = meta.get("domains") or sorted({registry.get(s).domain for s in task.services})
  return {
    "domains": sorted(domains),
    "business_functions": sorted(meta.get("business_functions") or business_functions(domains)),
    "K": int(meta.get("K", len(task.services))),
    "L": int(meta.get("L", len(task.walk))),
  }


def _failed_sample(task: Task, agent: str, sample: int, err: Exception) -> dict[str, Any]:
  return {
    "sample": sample,
    "task_id": task.id,
    "agent": agent,
    "messages": [],
    "final_answer": None,
    "result": None,
    "turns": 0,
    "tool_calls": 0,
    "tool_errors": 0,
    "success": False,
    "score": 0.0,
    "error": str(err),
  }


def play_task(
  task: Task, make: AgentFactory, k: int = 1, max_turns: int = MAX_TURNS
) -> dict[str, Any]:
  """``k`` episodes of fresh agents on independent forks of the task's s0: one results line."""
  s0 = task.make_env()
  samples = []
  for sample in range(k):
    agent = make()
    try:
      traj, _ = run_episode(agent, task, env=s0.fork(), max_turns=max_turns)
    except AgentError as err:
      samples.append(_failed_sample(task, agent.name, sample, err))
      continue
    samples.append(
      {
        "sample": sample,
        **traj.to_json(),
        "success": traj.result.success,
        "score": traj.result.score,
        "error": None,
      }
    )
  return {"task_id": task.id, "services": task.services, **task_labels(task), "samples": samples}


_JOB: tuple[Sequence[Task], AgentFactory, int, int] | None = None

# Agents that hold JAX state: with workers > 1 each forked worker loads its own, since a process
# forked after JAX has started its runtime deadlocks.
_JAX_AGENTS = frozenset({"checkpoint"})


def _jax_started() -> bool:
  if "jax" not in sys.modules:
    return False
  from jax._src import xla_bridge

  return xla_bridge.backends_are_initialized()


def _static_services(tasks: Sequence[Task]) -> bool:
  """Whether every service the tasks use is a class a fresh process finds by importing its
  module (not one registered at run time, as compiled services are)."""
  for name in {s for t in tasks for s in (*t.services, *t.distractors)}:
    cls = registry.get(name)
    module = sys.modules.get(cls.__module__)
    if module is None or getattr(module, cls.__qualname__, None) is not cls:
      return False
  return True


def _start_spawned(
  tasks: Sequence[Task],
  agent: str,
  agent_kwargs: dict[str, Any],
  k: int,
  max_turns: int,
  jax_cache: tuple[str | None, float],
) -> None:
  # Runs first in each spawned worker (a fresh interpreter): the job, and JAX's persistent
  # compilation cache as the parent had it, so a worker loads the programs the parent compiled.
  global _JOB
  cache_dir, min_seconds = jax_cache
  if cache_dir:
    import jax

    jax.config.update("jax_compilation_cache_dir", cache_dir)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", min_seconds)
  _JOB = (tasks, agent_factory(agent, agent_kwargs, check=False), k, max_turns)


def _jax_cache() -> tuple[str | None, float]:
  import jax

  return jax.config.jax_compilation_cache_dir, jax.config.jax_persistent_cache_min_compile_time_secs


def _play_index(i: int) -> dict[str, Any]:
  # Runs in a forked worker: the job was set before the fork, so agents built from closures
  # (and the loaded service library) need no pickling.
  assert _JOB is not None
  tasks, make, k, max_turns = _JOB
  return play_task(tasks[i], make, k, max_turns)


def evaluate(
  tasks: Sequence[Task],
  agent: str | AgentFactory = "oracle",
  agent_kwargs: dict[str, Any] | None = None,
  *,
  k: int = 1,
  workers: int = 1,
  max_turns: int = MAX_TURNS,
  progress: bool = True,
) -> list[dict[str, Any]]:
  """Plays every task ``k`` times; one result per task, in task order.

  ``workers`` > 1 plays tasks in forked processes; the results do not depend on it. A
  checkpoint agent is then loaded in each worker (CPU only: on an accelerator serve it behind an
  endpoint). Once this process has started JAX (a pipeline that trained the policy it now
  scores), forking would deadlock: an agent given by name is then played in spawned workers,
  fresh interpreters that load it again (through JAX's compilation cache when one is set), as
  long as every service the tasks use is importable there; otherwise it plays with one worker
  and says so.
  """
  global _JOB
  if k < 1:
    raise ValueError(f"k (samples per task) must be at least 1, got {k}")
  if workers < 1:
    raise ValueError(f"workers must be at least 1, got {workers}")
  if max_turns < 1:
    raise ValueError(f"max_turns must be at least 1, got {max_turns}")
  if not tasks:
    raise ValueError("no tasks to evaluate")
  dupes = [i for i, n in collections.Counter(t.id for t in tasks).items() if n > 1]
  if dupes:
    raise ValueError(f"task ids must be unique; repeated: {', '.join(sorted(dupes)[:5])}")
  parallel = workers > 1 and len(tasks) > 1
  spawn = parallel and _jax_started()
  if spawn and not (isinstance(agent, str) and _static_services(tasks)):
    logging.warning(
      "evaluate: JAX is already running in this process and a forked worker would deadlock, "
      "and the agent is no registered name or a service was registered at run time; "
      "playing %d tasks with one worker instead of %d",
      len(tasks),
      workers,
    )
    parallel = spawn = False
  make = agent_factory(agent, agent_kwargs, check=not (parallel and agent in _JAX_AGENTS))
  bar = tqdm(total=len(tasks), desc="evaluate", disable=not progress, mininterval=1.0)
  results, passed, played = [], 0, 0

  def done(result: dict[str, Any]) -> None:
    nonlocal passed, played
    results.append(result)
    passed += sum(s["success"] for s in result["samples"])
    played += len(result["samples"])
    bar.set_postfix(pass_rate=f"{passed / played:.3f}", refresh=False)
    bar.update(1)

  if parallel:
    if spawn:
      ctx, start = multiprocessing.get_context("spawn"), _start_spawned
      job = (list(tasks), agent, dict(agent_kwargs or {}), k, max_turns, _jax_cache())
    else:
      registry.names()  # import the library once, before forking
      ctx, start, job = multiprocessing.get_context("fork"), None, ()
      _JOB = (tasks, make, k, max_turns)
    try:
      with concurrent.futures.ProcessPoolExecutor(
        workers, mp_context=ctx, initializer=start, initargs=job
      ) as pool:
        for result in pool.map(_play_index, range(len(tasks))):
          done(result)
    finally:
      _JOB = None
  else:
    for task in tasks:
      done(play_task(task, make, k, max_turns))
  bar.close()
  return results


# --- metrics ---------------------------------------------------------------------------------


def pass_hat_k(counts: Iterable[tuple[int, int]], k: int) -> float:
  """pass^k over tasks given ``(n, c)`` per task (n samples, c of them passing): the mean of
  C(c, k) / C(n, k), the chance that k samples drawn without replacement all pass."""
  counts = list(counts)
  if not counts:
    raise ValueError("pass^k needs at least one task")
  for n, c in counts:
    if not 0 <= c <= n or not 1 <= k <= n:
      raise ValueError(f"pass^{k} is undefined for n={n} samples with c={c} passes")
  return sum(math.comb(c, k) / math.comb(n, k) for n, c in counts) / len(counts)


def _mean(values: Sequence[float]) -> float:
  return round(sum(values) / len(values), _DIGITS) if values else 0.0


def aggregate(results: Sequence[dict[str, Any]]) -> dict[str, Any]:
  """Pass rate, rubric score, tool-call error rate and turns over every sample of ``results``."""
  samples = [s for r in results for s in r["samples"]]
  played = [s for s in samples if s["error"] is None]
  calls = sum(s["tool_calls"] for s in samples)
  return {
    "tasks": len(results),
    "samples": len(samples),
    "pass_rate": _mean([float(s["success"]) for s in samples]),
    "rubric_score": _mean([s["score"] for s in samples]),
    "tool_error_rate": round(sum(s["tool_errors"] for s in samples) / calls, _DIGITS)
    if calls
    else 0.0,
    "mean_turns": _mean([s["turns"] for s in played]),
  }


def breakdown(results: Sequence[dict[str, Any]], field: str) -> dict[str, dict[str, Any]]:
  """``aggregate`` per value of a task label; a task with several domains counts in each."""
  groups: dict[Any, list[dict[str, Any]]] = collections.defaultdict(list)
  for r in results:
    values = r[field] if isinstance(r[field], list) else [r[field]]
    for value in values:
      groups[value].append(r)
  return {str(key): aggregate(groups[key]) for key in sorted(groups)}


def summarize(results: Sequence[dict[str, Any]]) -> dict[str, Any]:
  """The metrics of per-task results (as ``evaluate`` returns them)."""
  if not results:
    raise ValueError("no results to summarize")
  counts = [(len(r["samples"]), sum(s["success"] for s in r["samples"])) for r in results]
  n = min(c[0] for c in counts)
  samples = [s for r in results for s in r["samples"]]
  return {
    **aggregate(results),
    "samples_per_task": n,
    "pass_hat_k": {str(k): round(pass_hat_k(counts, k), _DIGITS) for k in range(1, n + 1)},
    "mean_tool_calls": _mean([s["tool_calls"] for s in samples if s["error"] is None]),
    "agent_errors": sum(s["error"] is not None for s in samples),
    "no_final_answer": sum(s["error"] is None and s["final_answer"] is None for s in samples),
    **{key: breakdown(results, field) for field, key in BREAKDOWNS.items()},
  }


# --- reports ---------------------------------------------------------------------------------


def split_info(tasks_path: str | Path) -> dict[str, Any] | None:
  """The recorded split when ``tasks_path`` is a ``train.jsonl`` or ``eval.jsonl`` written by
  ``experiments.split_tasks`` (its ``summary.json`` lies beside it), else None."""
  path = Path(tasks_path)
  summary = path.parent / "summary.json"
  if path.name not in ("train.jsonl", "eval.jsonl") or not summary.is_file():
    return None
  try:
    fields = json.loads(summary.read_text(encoding="utf-8"))
  except json.JSONDecodeError:
    return None
  if not isinstance(fields, dict) or fields.get("mode") not in ("composition", "services"):
    return None
  return {"summary_path": str(summary), "part": path.stem, **fields}


_COLUMNS = ("tasks", "samples", "pass_rate", "rubric_score", "tool_error_rate", "mean_turns")
_TITLES = {
  "by_domain": "domain",
  "by_business_function": "business function",
  "by_k": "K (services)",
  "by_walk_length": "L (walk length)",
}


def _row(cells: Iterable[Any]) -> str:
  return "| " + " | ".join(str(c) for c in cells) + " |"


def markdown(summary: dict[str, Any]) -> str:
  """``results.md``: the headline metrics, pass^k, then one table per breakdown."""
  lines = [f"# Evaluation: {summary['agent']} on {summary['tasks_file']}", ""]
  split = summary.get("split")
  if split:
    lines += [f"Split: {split['mode']} ({split['part']} part), from {split['summary_path']}", ""]
  lines += [_row(["metric", "value"]), _row(["---", "---:"])]
  for key in (
    "tasks",
    "samples_per_task",
    "pass_rate",
    "rubric_score",
    "tool_error_rate",
    "mean_turns",
    "mean_tool_calls",
    "agent_errors",
    "no_final_answer",
  ):
    lines.append(_row([key, summary[key]]))
  ks = list(summary["pass_hat_k"])
  lines += ["", "## pass^k", "", _row(["k", *ks]), _row(["---"] * (len(ks) + 1))]
  lines += [_row(["pass^k", *summary["pass_hat_k"].values()])]
  for key, title in _TITLES.items():
    lines += ["", f"## By {title}", "", _row([title, *_COLUMNS])]
    lines.append(_row(["---", *["---:"] * len(_COLUMNS)]))
    for value, row in summary[key].items():
      lines.append(_row([value, *(row[c] for c in _COLUMNS)]))
  return "\n".join(lines) + "\n"


def plot(summary: dict[str, Any], workdir: str | Path) -> list[str]:
  """PNG plots: pass rate and rubric score by walk length, by K and by domain; pass^k by k."""
  import matplotlib  # here, not at the top: only the reports need it

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  workdir = Path(workdir)
  paths = []
  for key, name in (
    ("by_walk_length", "pass_rate_by_walk_length.png"),
    ("by_k", "pass_rate_by_k.png"),
    ("by_domain", "pass_rate_by_domain.png"),
  ):
    groups = summary[key]
    labels = list(groups)
    x = range(len(labels))
    fig, ax = plt.subplots(figsize=(max(4.0, 0.7 * len(labels) + 2), 3.5))
    for offset, metric in ((-0.2, "pass_rate"), (0.2, "rubric_score")):
      values = [groups[g][metric] for g in labels]
      ax.bar([i + offset for i in x], values, width=0.4, label=metric.replace("_", " "))
    ax.set_xticks(list(x), [f"{g}\n(n={groups[g]['tasks']})" for g in labels], fontsize=8)
    if key == "by_domain":
      plt.setp(ax.get_xticklabels(), rotation=45, ha="right")
    ax.set_ylim(0, 1.25)  # headroom for the legend above the bars
    ax.set_yticks([0, 0.25, 0.5, 0.75, 1])
    ax.set_xlabel(_TITLES[key])
    ax.set_title(f"{summary['agent']}: pass rate and rubric score by {_TITLES[key]}", fontsize=9)
    ax.legend(fontsize=8, ncols=2, loc="upper left")
    fig.tight_layout()
    fig.savefig(workdir / name, dpi=100)
    plt.close(fig)
    paths.append(str(workdir / name))
  if len(summary["pass_hat_k"]) > 1:
    ks = [int(k) for k in summary["pass_hat_k"]]
    fig, ax = plt.subplots(figsize=(4, 3.5))
    ax.plot(ks, list(summary["pass_hat_k"].values()), marker="o")
    ax.set_xticks(ks)
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("k")
    ax.set_ylabel("pass^k")
    ax.set_title(f"{summary['agent']}: pass^k", fontsize=9)
    fig.tight_layout()
    fig.savefig(workdir / "pass_hat_k.png", dpi=100)
    plt.close(fig)
    paths.append(str(workdir / "pass_hat_k.png"))
  return paths


def run_evaluation(
  tasks_file: str | Path,
  workdir: str | Path,
  agent: str = "oracle",
  *,
  k: int = 1,
  workers: int = 1,
  max_turns: int = MAX_TURNS,
  base_url: str | None = None,
  temperature: float = 0.0,
  agent_kwargs: dict[str, Any] | None = None,
  progress: bool = True,
  plots: bool = True,
) -> dict[str, Any]:
  """Evaluates the agent spec ``agent`` on a task file; writes ``results.jsonl``,
  ``results.md`` and plots under ``workdir`` and returns the summary (the caller writes it as
  ``summary.json``). ``agent_kwargs`` go to the agent's constructor beside the spec's own."""
  name, kwargs = resolve_agent(agent, base_url=base_url, temperature=temperature)
  kwargs = {**kwargs, **(agent_kwargs or {})}
  tasks = load_tasks(tasks_file)
  if not tasks:
    raise ValueError(f"{tasks_file}: no tasks in the file")
  t0 = time.perf_counter()
  results = evaluate(
    tasks, name, kwargs, k=k, workers=workers, max_turns=max_turns, progress=progress
  )
  workdir = Path(workdir)
  workdir.mkdir(parents=True, exist_ok=True)
  with open(workdir / RESULTS_FILE, "w", encoding="utf-8") as f:
    for result in results:
      f.write(json.dumps(result, sort_keys=True, ensure_ascii=False) + "\n")
  summary = {
    "agent": agent,
    "model": kwargs.get("model"),
    "tasks_file": str(tasks_file),
    "split": split_info(tasks_file),
    "k": k,
    "max_turns": max_turns,
    **summarize(results),
  }
  (workdir / TABLE_FILE).write_text(markdown(summary), encoding="utf-8")
  summary["plots"] = plot(summary, workdir) if plots else []
  summary["files"] = {f: str(workdir / f) for f in (RESULTS_FILE, TABLE_FILE)}
  summary["seconds"] = round(time.perf_counter() - t0, 2)
  return summary
