"""The foundation's end-to-end job: gate a task, solve it with the oracle, verify, report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from compoworld.agents.agent import OracleAgent
from compoworld.agents.episode import render_transcript, run_episode
from compoworld.tasks.task import Task, gate_failures, save_tasks


def run_demo(task: Task, workdir: str | Path) -> dict[str, Any]:
  """Writes tasks.jsonl, trajectories.jsonl and transcript.md under ``workdir``; returns the
  summary (the caller writes it as summary.json)."""
  workdir = Path(workdir)
  workdir.mkdir(parents=True, exist_ok=True)
  failures = gate_failures(task)
  save_tasks([task], workdir / "tasks.jsonl")
  s0_result = task.verify(task.make_env())
  traj, env = run_episode(OracleAgent(), task)
  with open(workdir / "trajectories.jsonl", "w", encoding="utf-8") as f:
    f.write(json.dumps(traj.to_json(), sort_keys=True) + "\n")
  (workdir / "transcript.md").write_text(render_transcript(traj, task), encoding="utf-8")
  summary = {
    "task_id": task.id,
    "services": task.services,
    "distractors": task.distractors,
    "walk": task.walk,
    "gates_passed": not failures,
    "gate_failures": failures,
    "score_at_s0": s0_result.score,
    "success": traj.result.success,
    "score": traj.result.score,
    "criteria": dict(zip(traj.result.ids, traj.result.criteria, strict=True)),
    "turns": traj.turns,
    "tool_calls": traj.tool_calls,
    "tool_errors": traj.tool_errors,
    "changed_services": sorted(task.make_env().diff(env)),
    "files": {
      name: str(workdir / name)
      for name in ("tasks.jsonl", "trajectories.jsonl", "transcript.md", "summary.json")
    },
  }
  return summary
