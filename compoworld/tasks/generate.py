"""Task generation at scale: sample a walk, author it, keep it only if every gate passes.

Deterministic by task index: task ``i`` of seed ``s`` is drawn from ``Random(f"task:{s}:{i}")``
whatever the sharding, so ``--shard_index``/``--num_shards`` split the work across processes
or machines and the concatenated shards equal a single run.
"""

from __future__ import annotations

import collections
import concurrent.futures
import multiprocessing
import random
import time
from collections.abc import Iterator
from typing import Any

from tqdm import tqdm

from compoworld.compose.env import ComposedEnv
from compoworld.runtime.registry import registry
from compoworld.tasks.authoring import AuthoringError, realize
from compoworld.tasks.facets import FacetRegistry, facets
from compoworld.tasks.task import Task, gate_failures
from compoworld.tasks.walks import sample_walk

#: Worlds the base data is drawn from; the scenario's own records vary per task on top.
WORLD_SEEDS = 32


def _pool(reg: FacetRegistry, domains: list[str] | None) -> list[str]:
  pool = sorted(s for s in reg.services() if s in registry)
  if domains:
    pool = [s for s in pool if registry.get(s).domain in domains]
  return pool


def generate_one(
  index: int,
  seed: int,
  *,
  k: int = 5,
  num_distractors: int = 5,
  min_walk: int = 7,
  max_walk: int = 12,
  domains: list[str] | None = None,
  max_attempts: int = 60,
  reg: FacetRegistry | None = None,
  rejected: collections.Counter | None = None,
  author: Any = None,
) -> Task | None:
  """Task ``index`` of ``seed``, or None if no candidate passed the gates.

  ``k`` services per task; ``k`` = 1 gives single-service tasks (``walks.sample_single_walk``),
  which raises ValueError if no service of the pool can hold one.

  ``author`` is None for the procedural author, or an object with the same ``realize``
  signature (``compoworld.agents.llm_author.LLMAuthor``).
  """
  if k < 1:
    raise ValueError(f"a task composes K >= 1 services, got K = {k}")
  reg = (reg or facets).load()
  rejected = rejected if rejected is not None else collections.Counter()
  rng = random.Random(f"task:{seed}:{index}")
  pool = _pool(reg, domains)
  distractor_pool = sorted(registry.names())
  for _ in range(max_attempts):
    length = rng.randint(max(min_walk, k + 1), max(max_walk, k + 1))
    walk = sample_walk(reg, rng, k, length, pool)
    if walk is None:
      rejected["no_walk"] += 1
      continue
    others = [s for s in distractor_pool if s not in walk.services]
    distractors = rng.sample(others, min(num_distractors, len(others)))
    world_seed = rng.randrange(WORLD_SEEDS)
    env = ComposedEnv.from_services(walk.services, seed=world_seed, distractors=distractors)
    task_id, meta = f"t{seed}-{index:06d}", {"seed": seed, "index": index}
    try:
      if author is None:
        task = realize(walk, reg, env, rng, task_id, world_seed, meta)
      else:
        task = author.realize(walk, env, rng, task_id, world_seed, meta)
    except AuthoringError as err:
      rejected[err.reason] += 1
      continue
    except Exception as err:  # a facet bug costs one candidate, not the whole run
      rejected[f"facet_error:{type(err).__name__}"] += 1
      continue
    failures = gate_failures(task)
    if failures:
      rejected[failures[0].split("_at_call")[0]] += 1
      continue
    return task
  return None


def _run_chunk(
  indices: list[int], seed: int, kwargs: dict[str, Any]
) -> tuple[list[Task], collections.Counter, int]:
  rejected: collections.Counter = collections.Counter()
  tasks = [generate_one(i, seed, rejected=rejected, **kwargs) for i in indices]
  return [t for t in tasks if t is not None], rejected, sum(t is None for t in tasks)


def generate_tasks(
  num_tasks: int,
  seed: int = 0,
  shard_index: int = 0,
  num_shards: int = 1,
  workers: int = 1,
  progress: bool = True,
  chunk_size: int = 50,
  **kwargs: Any,
) -> tuple[list[Task], dict[str, Any]]:
  """Tasks ``shard_index, shard_index + num_shards, ...`` below ``num_tasks``, and a summary.

  ``workers`` > 1 spreads chunks of indices over processes; the output does not depend on it.
  """
  if not 0 <= shard_index < num_shards:
    raise ValueError(f"shard_index {shard_index} is not in [0, {num_shards})")
  t0 = time.perf_counter()
  indices = list(range(shard_index, num_tasks, num_shards))
  chunks = [indices[i : i + chunk_size] for i in range(0, len(indices), chunk_size)]
  bar = tqdm(total=len(indices), desc="tasks", disable=not progress, mininterval=1.0)
  results = []
  if workers > 1 and len(chunks) > 1:
    facets.load()  # import the library once, before forking
    ctx = multiprocessing.get_context("fork")
    with concurrent.futures.ProcessPoolExecutor(workers, mp_context=ctx) as pool:
      futures = [pool.submit(_run_chunk, c, seed, kwargs) for c in chunks]
      for chunk, fut in zip(chunks, futures, strict=True):
        results.append(fut.result())
        bar.update(len(chunk))
  else:
    for chunk in chunks:
      results.append(_run_chunk(chunk, seed, kwargs))
      bar.update(len(chunk))
  bar.close()
  tasks = [t for chunk_tasks, _, _ in results for t in chunk_tasks]
  rejected = sum((r for _, r, _ in results), collections.Counter())
  missing = sum(m for _, _, m in results)
  return tasks, summarize(tasks, rejected, missing, time.perf_counter() - t0)


def summarize(
  tasks: list[Task], rejected: collections.Counter, missing: int, seconds: float
) -> dict[str, Any]:
  def hist(values: Iterator[Any]) -> dict[str, int]:
    return {str(k): v for k, v in sorted(collections.Counter(values).items())}

  return {
    "tasks": len(tasks),
    "indices_without_task": missing,
    "rejected": dict(sorted(rejected.items())),
    "distinct_service_sets": len({tuple(sorted(t.services)) for t in tasks}),
    "walk_length_histogram": hist(len(t.walk) for t in tasks),
    "k_histogram": hist(len(t.services) for t in tasks),
    "domains": hist(d for t in tasks for d in t.meta["domains"]),
    "business_functions": hist(f for t in tasks for f in t.meta["business_functions"]),
    "patterns": hist(p for t in tasks for p in t.meta["patterns"]),
    "distinct_patterns": len({p for t in tasks for p in t.meta["patterns"]}),
    "criteria_per_task": hist(len(t.rubric) for t in tasks),
    "must_not_tasks": sum(any(c.kind == "must_not" for c in t.rubric) for t in tasks),
    "answer_tasks": sum(t.reference_answer is not None for t in tasks),
    "seconds": round(seconds, 2),
  }
