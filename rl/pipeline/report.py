"""The pipeline's ``report.md``: library and task statistics, training curves (PNG), the
before/after evaluation table, where the trained policies' failed episodes leave the oracle's
path, and one example trajectory."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from compoworld.agents.divergence import KINDS, breakdown, read_results, reference_calls
from compoworld.agents.episode import Trajectory, render_transcript
from compoworld.tasks.rubric import VerifyResult
from compoworld.tasks.task import load_tasks
from rl.decoding.modes import DECODINGS
from rl.pipeline.plots import Curve, line_plot
from rl.pipeline.stages import POLICIES, STAGES, eval_name

#: Evaluation rows in table order, with what each one is.
ROWS = {
  "oracle": "oracle (reference solutions; the ceiling)",
  "before_sft": "policy before SFT (random initialisation)",
  "after_sft": "policy after SFT",
  "after_grpo": "policy after GRPO",
}
_COLUMNS = ("tasks", "pass_rate", "rubric_score", "tool_error_rate", "mean_turns")


def _stage_order(name: str) -> int:
  evals = [f"eval {eval_name(p, d)}" for p in POLICIES for d in DECODINGS]
  order = [s for s in STAGES if s != "eval"] + evals + ["report"]
  return order.index(name) if name in order else len(order)


def _rows(evaluations: dict[str, Any]) -> list[tuple[str, str]]:
  """(key, label) of the evaluations present, in table order: each policy, then the same
  policy under each other decoding."""
  rows = []
  for n, label in ROWS.items():
    for d in ["free"] if n == "oracle" else DECODINGS:
      if (key := eval_name(n, d)) in evaluations:
        rows.append((key, label if d == "free" else f"{label}, {d} decoding"))
  return rows


def wilson_interval(passed: float, n: int, z: float = 1.96) -> tuple[float, float]:
  """The 95% Wilson score interval of a pass rate ``passed`` over ``n`` tasks (sound at 0 and
  1 and for a few dozen tasks, where the normal approximation is not)."""
  if n <= 0:
    return (0.0, 1.0)
  centre = (passed + z * z / (2 * n)) / (1 + z * z / n)
  half = z * math.sqrt(passed * (1 - passed) / n + z * z / (4 * n * n)) / (1 + z * z / n)
  return (max(0.0, centre - half), min(1.0, centre + half))


def _pass_interval(summary: dict[str, Any]) -> str:
  n = int(summary.get("samples") or summary.get("tasks") or 0)
  low, high = wilson_interval(float(summary["pass_rate"]), n)
  return f"[{low:.2f}, {high:.2f}]"


def _row(cells) -> str:
  return "| " + " | ".join(str(c) for c in cells) + " |"


def _table(header: list[str], rows: list[list[Any]]) -> list[str]:
  return [_row(header), _row(["---", *["---:"] * (len(header) - 1)]), *map(_row, rows)]


def _metrics(path: Path, key: str) -> tuple[list[int], list[float]]:
  """The steps and values of ``key`` in a ``metrics.jsonl``."""
  steps, values = [], []
  if path.is_file():
    for line in path.read_text(encoding="utf-8").splitlines():
      record = json.loads(line)
      if key in record:
        steps.append(int(record["step"]))
        values.append(float(record[key]))
  return steps, values


def sft_plot(sft: dict[str, Any], workdir: Path) -> str | None:
  losses = sft.get("losses") or []
  if not losses:
    return None
  start = sft.get("start_step", 0)
  curves = [Curve("train loss", list(range(start + 1, start + len(losses) + 1)), losses)]
  steps, evals = _metrics(Path(sft["workdir"]) / "metrics.jsonl", "eval_loss")
  if steps:
    curves.append(Curve("held-out loss (oracle, eval split)", steps, evals))
  return line_plot(
    workdir / "sft_loss.png",
    curves,
    xlabel="step",
    ylabel="loss (nats/token)",
    title="SFT: masked cross-entropy on agent tokens",
  )


def grpo_plot(grpo: dict[str, Any], workdir: Path) -> str | None:
  rewards, passes = grpo.get("mean_reward") or [], grpo.get("pass_rate") or []
  if not rewards:
    return None
  steps = list(range(1, len(rewards) + 1))
  curves = [Curve(f"mean reward ({grpo.get('reward', '?')})", steps, rewards)]
  if len(passes) == len(rewards):
    curves.append(Curve("full-pass rate of rollouts", steps, passes))
  if grpo.get("eval_steps"):
    curves.append(Curve("held-out rubric score", grpo["eval_steps"], grpo["eval_rubric_score"]))
  return line_plot(
    workdir / "grpo_curves.png",
    curves,
    xlabel="step",
    ylabel="reward / pass rate / score",
    title="GRPO: training reward and held-out score",
    ylim=(-0.02, 1.02),
  )


def example_transcript(workdir: Path, name: str) -> str | None:
  """The transcript of the first held-out task as the policy ``name`` played it."""
  path = workdir / "eval" / name / "results.jsonl"
  if not path.is_file():
    return None
  first = json.loads(path.read_text(encoding="utf-8").splitlines()[0])
  sample = first["samples"][0]
  if sample["result"] is None:
    return f"(the agent could not reply: {sample['error']})\n"
  tasks = {t.id: t for t in load_tasks(workdir / "split" / "eval.jsonl")}
  traj = Trajectory(
    task_id=sample["task_id"],
    agent=sample["agent"],
    messages=sample["messages"],
    final_answer=sample["final_answer"],
    result=VerifyResult.model_validate(sample["result"]),
    turns=sample["turns"],
    tool_calls=sample["tool_calls"],
    tool_errors=sample["tool_errors"],
  )
  return render_transcript(traj, tasks[first["task_id"]])


def failure_breakdowns(
  workdir: str | Path, names: list[str], oracle: dict[str, Any]
) -> dict[str, dict[str, int]]:
  """For each evaluation in ``names`` with results in ``workdir/eval``: its failed episodes
  counted by where they first leave the oracle's path (played with ``oracle``, the SFT data's
  settings; `compoworld.agents.divergence`)."""
  wd = Path(workdir)
  runs = {n: wd / "eval" / n / "results.jsonl" for n in names}
  rows = {n: read_results(p) for n, p in runs.items() if p.is_file()}
  if not any(rows.values()):
    return {}
  played = [r for rs in rows.values() for r in rs]
  references = reference_calls(wd / "split" / "eval.jsonl", played, oracle)
  return {
    n: {kind: row["count"] for kind, row in breakdown(references, rs)["kinds"].items()}
    for n, rs in rows.items()
  }


def _failure_lines(failures: dict[str, dict[str, int]], evaluations: dict[str, Any]) -> list[str]:
  names = [(n, label) for n, label in _rows(evaluations) if n in failures]
  kinds = [k for k in KINDS if any(failures[n].get(k) for n, _ in names)]
  if not names or not kinds:
    return []
  lines = ["", "Failed episodes by where they first leave the oracle's path (its calls as the SFT"]
  lines += ["data plays them; `python -m experiments.failure_breakdown` lists examples):", ""]
  return lines + _table(
    ["first divergence", *(label for _, label in names)],
    [[kind, *(failures[n].get(kind, 0) for n, _ in names)] for kind in kinds],
  )


def write_report(
  summary: dict[str, Any], evaluations: dict[str, dict[str, Any]], workdir: str | Path
) -> dict[str, str]:
  """Writes ``report.md`` and its plots in ``workdir``; returns their paths by name."""
  wd = Path(workdir)
  lib, tasks, split = summary["library"], summary["task_summary"], summary["split"]
  traj, sft, grpo = summary["trajectory_summary"], summary["sft"], summary["grpo"]
  lines = [f"# CompoWorld pipeline: `{summary['config']}` config", ""]
  lines += ["Wall time per stage (seconds; * = from an earlier run of the stages left out):", ""]
  ran = {*summary.get("stages_run", [k.split()[0] for k in summary["stage_seconds"]]), "report"}
  lines += _table(
    ["stage", "seconds"],
    [
      [k if k.split()[0] in ran else f"{k} *", v]
      for k, v in sorted(summary["stage_seconds"].items(), key=lambda kv: _stage_order(kv[0]))
    ],
  )
  lines += ["", "## Service library", ""]
  lines += [
    f"{lib['services']} services, {lib['tools']} tools compiled from "
    f"{lib.get('specs') or 'the hand-written services exported as MCP specs'}; "
    f"{lib['deterministic_share']:.1%} of executable tools deterministic, "
    f"{lib['quarantined']} quarantined, {len(lib['domains'])} domains.",
    "",
    "## Tasks",
    "",
    f"{tasks['tasks']} verified tasks, {tasks['distinct_service_sets']} distinct service sets; "
    f"K: {tasks['k_histogram']}; walk lengths L: {tasks['walk_length_histogram']}; "
    f"criteria per task: {tasks['criteria_per_task']}.",
    "",
    f"Held-out split ({split['mode']}): {split['train_tasks']} training tasks over "
    f"{split['train_service_sets']} service sets; {split['eval_tasks']} held-out tasks over "
    f"{split['eval_service_sets']} service sets "
    + (
      "(task instances no training task has)."
      if split["mode"] == "instances"
      else "never seen together in training."
    ),
    "",
    f"Oracle trajectories on the training tasks: {traj['kept']} of {traj['tasks']} verified "
    f"(v = 1), {traj['mean_turns']} turns and {traj['mean_tool_calls']} tool calls on average.",
    "",
    "## Training",
    "",
  ]
  files = {"report": str(wd / "report.md")}
  sft_png = sft_plot(sft, wd)
  if sft_png:
    files["sft_loss"] = sft_png
  line = f"SFT: {sft['steps']} steps on {sft['train_trajectories']} trajectories"
  if sft.get("final_loss") is not None:
    line += f"; train loss {sft['initial_loss']:.3f} → {sft['final_loss']:.3f}"
  if sft.get("eval_loss") is not None and sft.get("initial_eval_loss") is not None:
    line += f", held-out loss {sft['initial_eval_loss']:.3f} → {sft['eval_loss']:.3f}"
  if sft.get("eval_turn_match") is not None and sft.get("initial_eval_turn_match") is not None:
    line += (
      f", held-out oracle turns reproduced greedily {sft['initial_eval_turn_match']:.3f} → "
      f"{sft['eval_turn_match']:.3f}"
    )
  if sft.get("tokens_per_s"):
    line += f"; {sft['tokens_per_s']:.0f} tokens/s"
  if sft.get("tokens_seen"):
    line += (
      f"; {sft['tokens_seen']:,} tokens seen ({sft['loss_tokens_seen']:,} of them trained on) "
      f"in {sft['train_seconds'] / 60:.1f} min"
    )
  lines += [line + ".", ""]
  if sft_png:
    lines += ["![SFT loss](sft_loss.png)", ""]
  if grpo:
    grpo_png = grpo_plot(grpo, wd)
    rewards = grpo.get("mean_reward") or [float("nan")]
    line = (
      f"GRPO ({grpo.get('reward', '?')} reward): {grpo['steps']} steps; mean reward "
      f"{rewards[0]:.3f} → {rewards[-1]:.3f}"
    )
    if grpo.get("mean_groups_with_signal") is not None:  # absent in summaries written before it
      line += f"; groups with a reward spread {grpo['mean_groups_with_signal']:.3f} (mean share)"
    lines += [line + ".", ""]
    if grpo_png:
      files["grpo_curves"] = grpo_png
      lines += ["![GRPO curves](grpo_curves.png)", ""]
  else:
    lines += ["GRPO: not run.", ""]
  lines += ["## Held-out evaluation", ""]
  held = (
    "instances never trained on"
    if split["mode"] == "instances"
    else "service sets never trained on"
  )
  lines += [f"On the {split['eval_tasks']} held-out tasks ({held}):", ""]
  lines += _table(
    ["agent", *_COLUMNS[:2], "pass rate 95% interval", *_COLUMNS[2:]],
    [
      [label, *(evaluations[n][c] for c in _COLUMNS[:2]), _pass_interval(evaluations[n])]
      + [evaluations[n][c] for c in _COLUMNS[2:]]
      for n, label in _rows(evaluations)
    ],
  )
  lines += _failure_lines(summary.get("failures") or {}, evaluations)
  last = next((n for n in ("after_grpo", "after_sft", "before_sft") if n in evaluations), None)
  transcript = example_transcript(wd, last) if last else None
  if transcript:
    lines += ["", f"## Example trajectory ({ROWS[last]})", "", transcript]
  (wd / "report.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
  return files
