"""``runs/bench_peers/summary.json``: what ``experiments.bench_peers`` writes, how its figures are
compared, and how the README's performance table is rendered from it. Standard library only (no
flags, no JAX): the benchmark scripts read the peer figures through `peer_figure`, and the tests
run without Tunix.

A benchmark's entry holds, for ``ours`` and ``theirs``, each repeat's figure (``values``) and their
``median``; ``ratio`` is ours / theirs of the medians (of the benchmark's metric: tokens/s, or
seconds per step), and ``speedup`` how many times faster ours is (the ratio for a throughput, its
inverse for a time); ``paired_speedup_median`` is the median of the speed-ups of the repeats run
back to back.
"""

from __future__ import annotations

import functools
import json
import statistics
import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

DEFAULT_PATH = Path("runs/bench_peers/summary.json")

#: name -> (README label, metric, unit, higher is better)
BENCHMARKS: dict[str, tuple[str, str, str, bool]] = {
  "sft": ("SFT tokens/s", "tokens_per_s", "tokens/s", True),
  "sampler": ("sampler tokens/s", "tokens_per_s", "tokens/s", True),
  "grpo_beta_0.04": ("GRPO step, β = 0.04 (KL to a frozen reference)", "step_s", "s", False),
  "grpo_beta_0": ("GRPO step, β = 0 (no reference)", "step_s", "s", False),
}


def median(values: Sequence[float]) -> float:
  if not values:
    raise ValueError("no values")
  return float(statistics.median(values))


def repeat_figure(metric: str, seconds: float, steps: int, work_per_step: float) -> float:
  """One repeat's figure from its wall time: tokens/s (`work_per_step` tokens a step) or s/step."""
  if seconds <= 0 or steps < 1:
    raise ValueError(f"bad repeat: {seconds} s for {steps} steps")
  if metric == "tokens_per_s":
    return work_per_step * steps / seconds
  if metric == "step_s":
    return seconds / steps
  raise ValueError(f"unknown metric {metric!r}")


def compare(ours: Sequence[float], theirs: Sequence[float], higher_is_better: bool) -> dict:
  """Both sides' repeats, their medians, ours / theirs of the medians and the speed-up of ours;
  and the speed-up of each alternating pair (ours' repeat i against theirs' repeat i, run back to
  back) with their median, which load that changes over the run moves less."""
  if len(ours) != len(theirs):
    raise ValueError(f"{len(ours)} repeats of ours, {len(theirs)} of theirs")
  ours_m, theirs_m = median(ours), median(theirs)
  ratio = ours_m / theirs_m
  paired = [o / t if higher_is_better else t / o for o, t in zip(ours, theirs, strict=True)]
  return {
    "ours": {"values": list(ours), "median": ours_m},
    "theirs": {"values": list(theirs), "median": theirs_m},
    "ratio": ratio,
    "speedup": ratio if higher_is_better else 1 / ratio,
    "paired_speedups": paired,
    "paired_speedup_median": median(paired),
  }


def load_summary(path: str | Path = DEFAULT_PATH) -> dict | None:
  path = Path(path)
  if not path.is_file():
    return None
  return json.loads(path.read_text(encoding="utf-8"))


def peer_figure(
  name: str,
  *,
  config: Mapping[str, Any] | None = None,
  model_shape: Mapping[str, Any] | None = None,
  path: str | Path = DEFAULT_PATH,
) -> dict | None:
  """Tunix's figure for benchmark `name` from the last ``make bench-peers``, or None when there is
  no summary, no such benchmark, or it ran another `config` / `model_shape` (keys compared are
  those given). The peer's figure is only comparable with ours from the same run (``ours``)."""
  summary = load_summary(path)
  if summary is None or name not in summary.get("benchmarks", {}):
    return None
  entry = summary["benchmarks"][name]
  for given, stored in ((config, entry.get("config", {})), (model_shape, summary["model_shape"])):
    if given is not None and any(stored.get(k) != v for k, v in given.items()):
      return None
  return {
    "peer": summary["peer"],
    "metric": entry["metric"],
    "theirs": entry["theirs"]["median"],
    "ours_same_run": entry["ours"]["median"],
    "speedup_same_run": entry["speedup"],
    "date": summary["date"],
    "machine": machine_line(summary["machine"]),
    "source": str(path),
  }


# --------------------------------------------------------------------------------------------------
# The README table


def machine_line(machine: Mapping[str, Any]) -> str:
  before = ", ".join(f"{x:.2f}" for x in machine["load_average_before"])
  after = ", ".join(f"{x:.2f}" for x in machine["load_average_after"])
  return (
    f"{machine['cpu_model']}, {machine['cpu_count']} cores, load average {before} before "
    f"and {after} after"
  )


def config_line(name: str, config: Mapping[str, Any]) -> str:
  if name == "sft":
    return f"batch {config['batch_size']} × {config['seq_len']}"
  if name == "sampler":
    return (
      f"batch {config['batch_size']} × {config['prompt_len']}-token prompts × "
      f"{config['new_tokens']} new"
    )
  return (
    f"{config['prompts']} prompts × {config['num_rollouts']} rollouts × {config['new_tokens']} "
    f"new ({config['prompt_len']}-token prompts)"
  )


def format_figure(value: float, unit: str) -> str:
  if unit == "s":
    return f"{value:.2f} s"
  return f"{value:,.0f}"


def render_readme(summary: Mapping[str, Any]) -> str:
  """The README's performance paragraph and table (markdown) from a summary."""
  peer = summary["peer"]
  m = summary["model_shape"]
  lines = [
    f"Measured by `make bench-peers` on {summary['date'][:10]} ({machine_line(summary['machine'])}):"
    f" ours and {peer} on the same shapes in one run, alternating, median of "
    f"{summary['repeats']} repeat{'s' if summary['repeats'] != 1 else ''} each (`{summary.get('path', DEFAULT_PATH)}`). Model: vocab "
    f"{m['vocab_size']:,}, hidden {m['d_model']}, {m['num_layers']} layers, {m['num_heads']} query /"
    f" {m['num_kv_heads']} KV heads of dim {m['head_dim']}, {m['num_experts']} experts top-"
    f"{m['num_experts_per_tok']} of width {m['expert_dim']}, float32 (Tunix: its Qwen3 model "
    "class with these dimensions).",
    "",
    f"| benchmark | shape | ours | {peer} | speed-up | speed-up, paired |",
    "|---|---|---|---|---|---|",
  ]
  for name, entry in summary["benchmarks"].items():
    unit = entry["unit"]
    lines.append(
      f"| {entry['label']} | {config_line(name, entry['config'])} | "
      f"{format_figure(entry['ours']['median'], unit)} | "
      f"{format_figure(entry['theirs']['median'], unit)} | {entry['speedup']:.2f}× | "
      f"{entry['paired_speedup_median']:.2f}× |"
    )
  lines += [
    "",
    "Speed-up: of the medians, ours / theirs for tokens/s, theirs / ours for step times; paired: "
    "the median of that ratio over the repeats run back to back (ours, then theirs). What each "
    "side runs, "
    "and where they differ, is in each benchmark's `notes` in the summary. "
    + " ".join(summary.get("notes", [])),
  ]
  wrap = functools.partial(textwrap.fill, width=100, break_long_words=False, break_on_hyphens=False)
  text = "\n".join(line if line.startswith("|") else wrap(line) for line in lines)
  return text.rstrip() + "\n"


BEGIN, END = "<!-- bench-peers:begin -->", "<!-- bench-peers:end -->"


def update_readme(readme: str, summary: Mapping[str, Any]) -> str:
  """`readme` with the text between the bench-peers markers replaced by `render_readme`."""
  start, end = readme.find(BEGIN), readme.find(END)
  if start < 0 or end < start:
    raise ValueError(f"README has no {BEGIN} ... {END} block")
  return readme[: start + len(BEGIN)] + "\n" + render_readme(summary) + readme[end:]
