"""Trajectory collection: an agent plays each task, the rubric verifies it, the successes are the
SFT set.

``trajectories.jsonl`` holds one record per played task: the chat ``messages`` (as the agent saw
and wrote them), the ``calls`` (each meta-tool call with its parsed arguments and the envelope it
returned), the rubric ``result`` with ``success`` and ``score``, and episode counts.
``sft.jsonl`` holds the records with v = 1 only. Work is split by task index like task generation
(``shard_index``, ``num_shards``), so shards can run anywhere and be concatenated.
"""

from __future__ import annotations

import collections
import concurrent.futures
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tqdm import tqdm

from compoworld.agents.agent import AgentError, make_agent
from compoworld.agents.episode import Trajectory, parse_arguments, run_episode
from compoworld.jsonl import read_lines, write_lines
from compoworld.tasks.task import Task

TRAJECTORIES_FILE, SFT_FILE = "trajectories.jsonl", "sft.jsonl"


def tool_steps(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
  """Each tool call with its arguments (parsed when valid JSON) and the envelope it got.

  Tool messages answer the calls of the assistant message before them, in order (as
  ``run_episode`` records them); ids are not trusted, since some endpoints reuse them.
  """
  steps = []
  for i, msg in enumerate(messages):
    calls = (msg.get("tool_calls") or []) if msg.get("role") == "assistant" else []
    for k, call in enumerate(calls):
      fn = call.get("function", {})
      arguments, bad = parse_arguments(fn.get("arguments"))
      reply = messages[i + 1 + k] if i + 1 + k < len(messages) else {}
      envelope = json.loads(reply["content"]) if reply.get("role") == "tool" else None
      steps.append(
        {
          "id": call.get("id", ""),
          "name": fn.get("name", ""),
          "arguments": arguments if bad is None else fn.get("arguments"),
          "envelope": envelope,
        }
      )
  return steps


def trajectory_record(traj: Trajectory, model: str | None = None) -> dict[str, Any]:
  """One line of ``trajectories.jsonl``."""
  return {
    **traj.to_json(),
    "model": model,
    "calls": tool_steps(traj.messages),
    "success": traj.result.success,
    "score": traj.result.score,
  }


def load_trajectories(path: str | Path) -> list[dict[str, Any]]:
  """Reads ``trajectories.jsonl`` or ``sft.jsonl``; errors name the bad line."""
  records = []
  for lineno, line in read_lines(path):
    try:
      record = json.loads(line)
    except json.JSONDecodeError as err:
      raise ValueError(f"{path}:{lineno}: not JSON: {err}") from err
    if not isinstance(record, dict) or not isinstance(record.get("messages"), list):
      raise ValueError(f"{path}:{lineno}: a trajectory record needs a 'messages' list")
    records.append(record)
  return records


def collect_trajectories(
  tasks: Sequence[Task],
  workdir: str | Path,
  agent: str = "oracle",
  agent_kwargs: dict[str, Any] | None = None,
  *,
  shard_index: int = 0,
  num_shards: int = 1,
  workers: int = 1,
  max_turns: int = 128,
  progress: bool = True,
) -> dict[str, Any]:
  """Plays tasks ``shard_index, shard_index + num_shards, ...`` with a fresh ``agent`` each,
  writes ``trajectories.jsonl`` and ``sft.jsonl`` (v = 1 only) under ``workdir`` and returns
  the summary. ``workers`` threads play tasks at once (for endpoints: the wait is the network);
  the files do not depend on it. ``max_turns`` is above ``run_episode``'s 64: the oracle needs up
  to ~90 turns on K = 5, L <= 12 tasks, and 64 cut a fifth of them."""
  if not 0 <= shard_index < num_shards:
    raise ValueError(f"shard_index {shard_index} is not in [0, {num_shards})")
  if workers < 1:
    raise ValueError(f"workers must be positive, got {workers}")
  agent_kwargs = dict(agent_kwargs or {})
  make_agent(agent, **agent_kwargs)  # fail on a bad name or argument before any work
  t0 = time.perf_counter()
  shard = list(tasks)[shard_index::num_shards]

  def play(task: Task) -> dict[str, Any] | str:
    try:
      traj, _ = run_episode(make_agent(agent, **agent_kwargs), task, max_turns=max_turns)
    except AgentError as err:
      return str(err)
    return trajectory_record(traj, agent_kwargs.get("model"))

  bar = tqdm(total=len(shard), desc="trajectories", disable=not progress, mininterval=1.0)
  with concurrent.futures.ThreadPoolExecutor(workers) as pool:
    outcomes = []
    for outcome in pool.map(play, shard):
      outcomes.append(outcome)
      bar.update(1)
  bar.close()

  records = [o for o in outcomes if isinstance(o, dict)]
  kept = [r for r in records if r["success"]]
  reasons: collections.Counter = collections.Counter()
  for r in records:
    if not r["success"]:
      reasons["no_final_answer" if r["final_answer"] is None else "verification_failed"] += 1
  errors = {t.id: o for t, o in zip(shard, outcomes, strict=True) if isinstance(o, str)}
  reasons["agent_error"] += len(errors)

  workdir = Path(workdir)
  workdir.mkdir(parents=True, exist_ok=True)
  write_lines(records, workdir / TRAJECTORIES_FILE)
  write_lines(kept, workdir / SFT_FILE)
  n_calls = sum(r["tool_calls"] for r in records)

  def mean(key: str) -> float:
    return round(sum(r[key] for r in records) / len(records), 4) if records else 0.0

  return {
    "agent": agent,
    "model": agent_kwargs.get("model"),
    "tasks": len(shard),
    "trajectories": len(records),
    "kept": len(kept),
    "rejected": len(shard) - len(kept),
    "rejected_reasons": {k: v for k, v in sorted(reasons.items()) if v},
    "agent_errors": dict(list(errors.items())[:10]),
    "success_rate": round(len(kept) / len(shard), 4) if shard else 0.0,
    "mean_score": mean("score"),
    "mean_turns": mean("turns"),
    "mean_tool_calls": mean("tool_calls"),
    "tool_error_rate": round(sum(r["tool_errors"] for r in records) / n_calls, 4)
    if n_calls
    else 0.0,
    "max_turns": max_turns,
    "shard_index": shard_index,
    "num_shards": num_shards,
    "files": {name: str(workdir / name) for name in (TRAJECTORIES_FILE, SFT_FILE)},
    "seconds": round(time.perf_counter() - t0, 2),
  }
