"""Ours against Tunix on the same shapes, in one run on one machine: ``make bench-peers``.

``python -m experiments.bench_peers --workdir=runs/bench_peers`` runs each benchmark as two worker
processes with their own interpreters, ours (``experiments/peers/ours_bench.py``, this checkout's
``.venv``) and the peer's (``experiments/peers/tunix_bench.py`` under ``.venv-peers``: Tunix 0.1.7,
started isolated (``python -I``) so it cannot import this package). Each worker builds its model,
compiles and warms up (untimed), then the driver alternates them, ours then theirs, one repeat
(``--steps`` timed steps) each at a time, ``--repeats`` times: load from other work on the machine
falls on both alike. Benchmarks (the model: ``rl.sft.bench.REFERENCE_SHAPE``, Tunix's Qwen3 class with
the same dimensions):

- ``sft``: SFT training tokens/s, batch 8 x 512;
- ``sampler``: sampled tokens/s, batch 8 x 64-token prompts x 128 new tokens, temperature 1;
- ``grpo_beta_0.04`` and ``grpo_beta_0``: one GRPO step (rollouts, then the update), 2 prompts x 4
  rollouts x 128 new tokens, with the KL term to a frozen reference at beta 0.04 (Tunix's default)
  on both sides, and with none on both.

Writes ``WORKDIR/summary.json`` (each repeat's figure and the median per side, ours / theirs, the
shape and sizes, versions, the machine and its load before and after, the date, what differs) and
the workers' logs under ``WORKDIR/logs``. ``--readme`` prints the README's performance table from an
existing summary instead; ``--update_readme`` also writes it into README.md between the
``bench-peers`` markers. ``--tiny`` runs tiny shapes with one repeat (a smoke test: a few minutes,
mostly compiling).
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from absl import flags

from experiments.common import run_main
from experiments.peers import summary as peers_summary

ROOT = Path(__file__).resolve().parents[1]
MARK = "@@peer "

_WORKDIR = flags.DEFINE_string("workdir", "runs/bench_peers", "Where summary.json and logs go.")
_REPEATS = flags.DEFINE_integer("repeats", 3, "Alternating repeats per side and benchmark.")
_STEPS = flags.DEFINE_integer("steps", 3, "Timed steps per repeat.")
_WARMUP = flags.DEFINE_integer("warmup", 2, "Untimed steps per worker first (compiling).")
_BENCHMARKS = flags.DEFINE_list(
  "benchmarks", ["sft", "sampler", "grpo_beta_0.04", "grpo_beta_0"], "Which to run, in order."
)
_SFT_BATCH = flags.DEFINE_integer("sft_batch", 8, "SFT rows per step.")
_SFT_SEQ_LEN = flags.DEFINE_integer("sft_seq_len", 512, "SFT tokens per row.")
_SAMPLER_BATCH = flags.DEFINE_integer("sampler_batch", 8, "Sampler rows.")
_PROMPT_LEN = flags.DEFINE_integer("prompt_len", 64, "Prompt tokens (sampler and GRPO).")
_NEW = flags.DEFINE_integer("new_tokens", 128, "Sampled tokens per row (sampler and GRPO).")
_GRPO_PROMPTS = flags.DEFINE_integer("grpo_prompts", 2, "GRPO prompts per step.")
_GRPO_ROLLOUTS = flags.DEFINE_integer("grpo_rollouts", 4, "GRPO rollouts per prompt.")
_TINY = flags.DEFINE_bool("tiny", False, "Tiny model and sizes, one repeat of two steps.")
_OURS_PYTHON = flags.DEFINE_string("ours_python", ".venv/bin/python", "Our interpreter.")
_PEER_PYTHON = flags.DEFINE_string("peer_python", ".venv-peers/bin/python", "Tunix's interpreter.")
_COMPILE_CACHE = flags.DEFINE_bool(
  "compile_cache", True, "Workers share a persistent JAX compilation cache under .cache/."
)
_TIMEOUT = flags.DEFINE_integer("timeout", 900, "Seconds a worker may take to answer.")
_README = flags.DEFINE_bool("readme", False, "Print the README table from WORKDIR/summary.json.")
_UPDATE_README = flags.DEFINE_bool(
  "update_readme", False, "Write the table into README.md (with --readme, or after the run)."
)

TINY_SHAPE = {
  "vocab_size": 512,
  "d_model": 64,
  "num_layers": 2,
  "num_heads": 4,
  "num_kv_heads": 2,
  "head_dim": 16,
  "num_experts": 4,
  "num_experts_per_tok": 2,
  "expert_dim": 64,
  "tie_embeddings": False,
}

# What each side runs, beyond the shared shape and sizes (stated in the summary).
MODELS = {
  "ours": "models.Transformer from rl.sft.bench.reference_model_config (every layer full attention, "
  "QK-norm, RoPE, sorted MoE dispatch: each token through its top-k experts only)",
  "theirs": "tunix.models.qwen3.model.Qwen3 (QK-norm, RoPE); on CPU its MoE layer takes its dense "
  "fallback, every expert on every token, weighted by the routing (Tunix's only CPU path)",
}
NOTES = {
  "sft": [
    "Ours: rl.sft.trainer's jitted train step, loss through the fused chunked LM head, the paper's SFT "
    "optimizer (clip 1.0, AdamW 1e-4 with its cosine schedule). Tunix: PeftTrainer.train (full "
    "parameters, its default loss from full float32 logits), clip 1.0 and AdamW 1e-4 as ours, a "
    "causal mask and positions built as tunix.cli.peft_main does.",
    "Both run seq_len tokens a row forward; ours has seq_len targets (the row shifted by one), "
    "Tunix's default loss seq_len - 1 (next token within the row); tokens/s counts batch x seq_len "
    "on both.",
  ],
  "sampler": [
    "Ours: prefill then rl.grpo.rollout.sample_turn, timed to the sampled ids on device. Tunix: "
    "Sampler.__call__ (prefill, its while-loop decode, the host-side output lists) with a "
    "tokenizer that reads space-separated ids; temperature 1, top-p 1 (plain categorical "
    "sampling) on both, a cache of prompt + new tokens, no stop token, so every row samples "
    "exactly new_tokens.",
  ],
  "grpo": [
    "Ours: rl.grpo.bench.grpo_stepper (the rollout engine's device path: each prompt prefilled "
    "once and its cache copied to its N rows; then batch assembly, rewards from random rubric "
    "passes, group advantages, one jitted rl.grpo.trainer update at Adam 1e-5, clip 1.0). Tunix: "
    "GRPOLearner.train on an RLCluster, one CPU mesh for every role, vanilla rollout "
    "(Sampler on the prompts repeated N times), random rewards, num_iterations 1, clip 1.0 and "
    "Adam 1e-5; a step is the time between two pulls of its data iterator.",
    "beta > 0 adds one forward pass of the frozen reference over the batch on both sides (ours "
    "inside the jitted update, with the k3 estimator; Tunix's get_ref_per_token_logps, its 'kl' "
    "estimator); at beta = 0 neither side keeps a reference. Neither side runs an extra "
    "old-policy pass (num_iterations 1: ours uses the sampler's log-probs, Tunix the current "
    "policy's).",
  ],
}


# --------------------------------------------------------------------------------------------------
# Workers


class Worker:
  """One benchmark process: its JSON events (``@@peer`` lines on stdout) arrive on a queue; every
  other line of its output goes to its log file."""

  def __init__(self, side: str, argv: list[str], log_path: Path, timeout: float):
    self.side, self.timeout = side, timeout
    self.log = log_path.open("w", encoding="utf-8")
    self.log.write("$ " + " ".join(argv) + "\n")
    self.log.flush()
    self.proc = subprocess.Popen(
      argv, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
      text=True, bufsize=1, env=worker_env(),
    )  # fmt: skip
    self.events: queue.Queue = queue.Queue()
    self.reader = threading.Thread(target=self._read, daemon=True)
    self.reader.start()

  def _read(self) -> None:
    for line in self.proc.stdout:
      if line.startswith(MARK):
        self.events.put(json.loads(line[len(MARK) :]))
      self.log.write(line)
      self.log.flush()
    self.events.put(None)  # the process closed its output

  def wait(self, event: str) -> dict:
    while True:
      try:
        got = self.events.get(timeout=self.timeout)
      except queue.Empty:
        raise RuntimeError(f"{self.side} worker: no {event!r} in {self.timeout} s") from None
      if got is None:
        self.proc.wait()
        raise RuntimeError(
          f"{self.side} worker exited ({self.proc.returncode}) before {event!r}; see {self.log.name}"
        )
      if got["event"] == event:
        return got
      if got["event"] != "info":
        raise RuntimeError(f"{self.side} worker: expected {event!r}, got {got}")
      self.info = got

  def send(self, command: str) -> None:
    self.proc.stdin.write(command + "\n")
    self.proc.stdin.flush()

  def close(self) -> None:
    try:
      self.send("quit")
      self.proc.stdin.close()
      self.proc.wait(timeout=120)
    except (OSError, subprocess.TimeoutExpired):
      self.proc.kill()
      self.proc.wait()
    self.reader.join(timeout=10)
    self.log.close()


def worker_env() -> dict[str, str]:
  """Both sides alike: JAX's persistent compilation cache under .cache/ (a later run compiles
  less; compiling is never timed), unless ``--nocompile_cache`` or the caller sets its own."""
  env = dict(os.environ)
  if _COMPILE_CACHE.value:
    env.setdefault("JAX_COMPILATION_CACHE_DIR", str(ROOT / ".cache" / "bench_peers" / "jax"))
  return env


def worker_argv(side: str, bench: str, shape: dict, config: dict) -> list[str]:
  args = [
    f"--bench={bench}",
    f"--shape={json.dumps(shape)}",
    f"--config={json.dumps(config)}",
    f"--steps={_STEPS.value}",
    f"--warmup={_WARMUP.value}",
  ]
  if side == "ours":
    return [_OURS_PYTHON.value, "-m", "experiments.peers.ours_bench", *args]
  return [_PEER_PYTHON.value, "-I", str(ROOT / "experiments/peers/tunix_bench.py"), *args]


def run_benchmark(name: str, shape: dict, config: dict, logs: Path) -> dict[str, Any]:
  """Both sides of one benchmark, alternating; returns its summary entry."""
  label, metric, unit, higher = peers_summary.BENCHMARKS[name]
  kind = name.split("_")[0]
  work = {
    "sft": config.get("batch_size", 0) * config.get("seq_len", 0),
    "sampler": config.get("batch_size", 0) * config.get("new_tokens", 0),
  }.get(kind, 0)
  load_before = os.getloadavg()
  workers: dict[str, Worker] = {}
  ready: dict[str, dict] = {}
  results: dict[str, list[dict]] = {"ours": [], "theirs": []}
  try:
    for side in ("ours", "theirs"):  # one at a time: neither compiles while the other is timed
      print(f"[{name}] {side}: building and compiling", flush=True)
      workers[side] = Worker(
        side, worker_argv(side, kind, shape, config), logs / f"{name}_{side}.log", _TIMEOUT.value
      )
      ready[side] = workers[side].wait("ready")
    for r in range(_REPEATS.value):
      for side in ("ours", "theirs"):
        workers[side].send("run")
        result = workers[side].wait("result")
        results[side].append(result)
        figure = peers_summary.repeat_figure(metric, result["seconds"], result["steps"], work)
        print(f"[{name}] repeat {r + 1}/{_REPEATS.value} {side}: {figure:,.3f} {unit}", flush=True)
  finally:
    for w in workers.values():
      w.close()
  values = {
    side: [peers_summary.repeat_figure(metric, x["seconds"], x["steps"], work) for x in res]
    for side, res in results.items()
  }
  entry = {
    "label": label,
    "metric": metric,
    "unit": unit,
    "higher_is_better": higher,
    "config": config,
    "steps_per_repeat": _STEPS.value,
    "warmup_steps": _WARMUP.value,
    **peers_summary.compare(values["ours"], values["theirs"], higher),
    "load_average_before": load_before,
    "load_average_after": os.getloadavg(),
    "notes": NOTES[kind],
  }
  for side in ("ours", "theirs"):
    entry[side].update(
      setup_s=ready[side]["first_s"],  # build, compile and the warm-up steps
      repeats=[{k: v for k, v in x.items() if k != "event"} for x in results[side]],
      versions=getattr(workers[side], "info", {}).get("versions"),
      devices=getattr(workers[side], "info", {}).get("devices"),
    )
  return entry


def bench_config(name: str) -> dict:
  kind = name.split("_")[0]
  if kind == "sft":
    return {"batch_size": _SFT_BATCH.value, "seq_len": _SFT_SEQ_LEN.value}
  if kind == "sampler":
    return {
      "batch_size": _SAMPLER_BATCH.value,
      "prompt_len": _PROMPT_LEN.value,
      "new_tokens": _NEW.value,
    }
  if name.startswith("grpo_beta_"):
    return {
      "prompts": _GRPO_PROMPTS.value,
      "num_rollouts": _GRPO_ROLLOUTS.value,
      "prompt_len": _PROMPT_LEN.value,
      "new_tokens": _NEW.value,
      "beta": float(name.removeprefix("grpo_beta_")),
    }
  raise ValueError(f"unknown benchmark {name!r}; valid: {', '.join(peers_summary.BENCHMARKS)}")


# --------------------------------------------------------------------------------------------------
# The machine


def cpu_model() -> str:
  try:
    for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
      if line.startswith("model name"):
        return line.split(":", 1)[1].strip()
  except OSError:
    pass
  return platform.processor() or platform.machine()


def git_commit() -> str:
  try:
    out = subprocess.run(
      ["git", "describe", "--always", "--dirty"],
      cwd=ROOT,
      capture_output=True,
      text=True,
      check=True,
    )
    return out.stdout.strip()
  except (OSError, subprocess.CalledProcessError):
    return "unknown"


# --------------------------------------------------------------------------------------------------


def write_readme(summary: dict) -> None:
  readme = ROOT / "README.md"
  readme.write_text(peers_summary.update_readme(readme.read_text("utf-8"), summary), "utf-8")
  print(f"updated {readme}")


def main(argv):
  del argv
  path = Path(_WORKDIR.value) / "summary.json"
  if _README.value:
    summary = peers_summary.load_summary(path)
    if summary is None:
      raise SystemExit(f"no {path}: run `make bench-peers` first")
    print(peers_summary.render_readme(summary), end="")
    if _UPDATE_README.value:
      write_readme(summary)
    return
  for python in (_OURS_PYTHON.value, _PEER_PYTHON.value):
    if not (ROOT / python).exists() and not Path(python).exists():
      raise SystemExit(f"no interpreter {python}: run `make bench-peers` (it builds .venv-peers)")
  if _TINY.value:
    for flag, value in (
      (_REPEATS, 1), (_STEPS, 2), (_SFT_BATCH, 2), (_SFT_SEQ_LEN, 32), (_SAMPLER_BATCH, 2),
      (_PROMPT_LEN, 8), (_NEW, 8), (_GRPO_ROLLOUTS, 2),
    ):  # fmt: skip
      if not flags.FLAGS[flag.name].present:
        flags.FLAGS[flag.name].value = value
  shape = dict(TINY_SHAPE) if _TINY.value else reference_shape()
  logs = Path(_WORKDIR.value) / "logs"
  logs.mkdir(parents=True, exist_ok=True)
  t0 = time.perf_counter()
  started = datetime.datetime.now(datetime.UTC)
  load_before = os.getloadavg()
  benchmarks = {}
  for name in _BENCHMARKS.value:
    benchmarks[name] = run_benchmark(name, shape, bench_config(name), logs)
  peer_versions = next(iter(benchmarks.values()))["theirs"]["versions"] if benchmarks else {}
  summary = {
    "date": started.isoformat(timespec="seconds"),
    "peer": f"Tunix {peer_versions.get('google-tunix', '?')}",
    "command": " ".join(
      [Path(sys.executable).name, "-m", "experiments.bench_peers", *sys.argv[1:]]
    ),
    "path": str(path),
    "repeats": _REPEATS.value,
    "order": "per benchmark: both workers compile one after the other (untimed), then repeats "
    "alternate ours, theirs, ours, theirs, ...",
    "tiny": _TINY.value,
    "model_shape": shape,
    "models": MODELS,
    "benchmarks": benchmarks,
    "versions": {
      "ours": next(iter(benchmarks.values()))["ours"]["versions"] if benchmarks else {},
      "theirs": peer_versions,
      "git": git_commit(),
    },
    "machine": {
      "cpu_model": cpu_model(),
      "cpu_count": os.cpu_count(),
      "cpus_available": len(os.sched_getaffinity(0)),
      "platform": platform.platform(),
      "load_average_before": load_before,
      "load_average_after": os.getloadavg(),
    },
    "wall_s": time.perf_counter() - t0,
    "notes": [
      "On a machine shared with other work the absolute figures move with its load; the "
      "alternation makes the ratio the figure to read."
    ],
  }
  path.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
  print(peers_summary.render_readme(summary), end="")
  print(f"results: {path} ({summary['wall_s']:.0f} s)")
  if _UPDATE_README.value:
    write_readme(summary)


def reference_shape() -> dict:
  """`rl.sft.bench.REFERENCE_SHAPE` (every layer full attention, float32; the workers read the dimensions
  in `TINY_SHAPE`'s keys), imported here only: the driver itself runs no model."""
  from rl.sft.bench import REFERENCE_SHAPE

  return dict(REFERENCE_SHAPE)


if __name__ == "__main__":
  run_main(main)
