"""Our side of ``experiments.bench_peers``: one benchmark worker, driven over stdin/stdout with the
same protocol and the same ``--bench`` / ``--shape`` / ``--config`` as ``tunix_bench.py``.

- ``sft``: ``rl.sft.trainer``'s jitted, donated train step (the paper's SFT optimizer, fused head loss,
  sorted MoE dispatch: what ``experiments.bench_train`` times) on random full rows;
- ``sampler``: the rollout engine's device path (``rl.grpo.rollout_bench.sampler_run``: prefill, then one
  ``rl.grpo.rollout.sample_turn`` of exactly ``new_tokens`` per row at temperature 1);
- ``grpo``: one GRPO step (``rl.grpo.bench.grpo_stepper``: sampling, then the update), ``beta`` the
  KL coefficient (``GRPOLossConfig.kl_coef``; > 0 keeps a frozen reference).

``python -m experiments.peers.ours_bench --bench=sft --shape=JSON --config=JSON``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from importlib import metadata

import jax
import numpy as np

import models
from rl.grpo.bench import grpo_stepper
from rl.grpo.rollout_bench import sampler_run
from rl.sft import bench as sft

MARK = "@@peer "


def emit(event: str, **payload) -> None:
  print(MARK + json.dumps({"event": event, **payload}), flush=True)


def serve(run_repeat, steps: int) -> None:
  while (sys.stdin.readline().strip() or "quit") == "run":
    emit("result", steps=steps, **run_repeat(steps))


def model_config(shape: dict) -> models.ModelConfig:
  """The reference shape's config (`rl.sft.bench.reference_model_config`) with `shape`'s dimensions."""
  keys = (
    "vocab_size", "d_model", "num_layers", "num_heads", "num_kv_heads", "head_dim",
    "num_experts", "num_experts_per_tok", "expert_dim", "tie_embeddings",
  )  # fmt: skip
  return sft.reference_model_config(**{k: shape[k] for k in keys})


def bench_sft(config: models.ModelConfig, bench: dict, steps: int, warmup: int) -> None:
  batch_size, seq_len = bench["batch_size"], bench["seq_len"]
  tokens = np.random.default_rng(0).integers(0, config.vocab_size, (batch_size, seq_len + 1))
  tokens = tokens.astype(np.int32)
  batch = {  # as rl.sft.bench.benchmark builds it: every token a loss token
    "tokens": tokens[:, :-1],
    "targets": tokens[:, 1:],
    "loss_mask": np.ones((batch_size, seq_len), np.int32),
    "segment_ids": np.ones((batch_size, seq_len), np.int32),
    "positions": np.broadcast_to(np.arange(seq_len, dtype=np.int32), (batch_size, seq_len)),
  }
  t0 = time.perf_counter()
  run, _, _ = sft._bench_step(  # the step `rl.sft.bench.benchmark` times; its first call compiles
    config, batch, steps=10**6, grad_accum=1, loss_chunk=0, mesh=models.make_mesh()
  )
  for _ in range(warmup - 1):
    run()
  emit("ready", first_s=time.perf_counter() - t0)

  def repeat(n: int) -> dict:
    times = [run() for _ in range(n)]
    return {"seconds": sum(times), "step_seconds": times}

  serve(repeat, steps)


def bench_sampler(config: models.ModelConfig, bench: dict, steps: int, warmup: int) -> None:
  batch = bench["batch_size"]
  run = sampler_run(config, batch, bench["prompt_len"], bench["new_tokens"])
  t0 = time.perf_counter()
  for i in range(warmup):
    jax.block_until_ready(run(i))
  emit("ready", first_s=time.perf_counter() - t0)
  seeds = iter(range(warmup, 10**9))

  def sample() -> float:
    t = time.perf_counter()
    jax.block_until_ready(run(next(seeds)))
    return time.perf_counter() - t

  def repeat(n: int) -> dict:
    times = [sample() for _ in range(n)]
    return {"seconds": sum(times), "step_seconds": times}

  serve(repeat, steps)


def bench_grpo(config: models.ModelConfig, bench: dict, steps: int, warmup: int) -> None:
  step = grpo_stepper(
    config,
    prompts=bench["prompts"],
    num_rollouts=bench["num_rollouts"],
    prompt_len=bench["prompt_len"],
    new_tokens=bench["new_tokens"],
    kl_coef=bench["beta"],
  )
  t0 = time.perf_counter()
  for i in range(warmup):
    step(i)
  emit("ready", first_s=time.perf_counter() - t0)
  seeds = iter(range(warmup, 10**9))

  def repeat(n: int) -> dict:
    outs = [step(next(seeds)) for _ in range(n)]
    times = [o["sample_s"] + o["update_s"] for o in outs]
    return {
      "seconds": sum(times),
      "step_seconds": times,
      "sample_seconds": [o["sample_s"] for o in outs],
      "update_seconds": [o["update_s"] for o in outs],
    }

  serve(repeat, steps)


def versions() -> dict:
  names = ("jax", "jaxlib", "flax", "optax", "numpy")
  return {name: metadata.version(name) for name in names} | {"python": sys.version.split()[0]}


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--bench", choices=("sft", "sampler", "grpo"), required=True)
  parser.add_argument("--shape", required=True, help="the model shape, JSON")
  parser.add_argument("--config", required=True, help="the benchmark's sizes, JSON")
  parser.add_argument("--steps", type=int, default=3, help="timed steps per repeat")
  parser.add_argument("--warmup", type=int, default=2, help="untimed steps first (compiles)")
  args = parser.parse_args()
  emit("info", versions=versions(), backend=jax.default_backend(), devices=len(jax.devices()))
  config = model_config(json.loads(args.shape))
  fn = {"sft": bench_sft, "sampler": bench_sampler, "grpo": bench_grpo}[args.bench]
  fn(config, json.loads(args.config), args.steps, args.warmup)


if __name__ == "__main__":
  main()
