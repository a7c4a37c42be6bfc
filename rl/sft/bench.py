"""SFT train-step throughput: the reference model shape, the matmul peak of the local devices, and
tokens/s and MFU of a compiled step on random full rows (what ``experiments.bench_train`` runs).
"""

from __future__ import annotations

import math
import time
from typing import Any

import jax
import numpy as np
from tqdm import tqdm

import models
from models.loss import loss_chunk_length
from models.perf.flops import model_summary
from rl.sft.steps import make_optimizer, make_train_step
from rl.sft.trainer import get_default_config, init_state, measure_matmul_peak, shard_batch

#: The issue's reference shape for training throughput (``experiments.bench_train``): vocab
#: 8192, hidden 256, 4 layers of full attention with 4 query / 2 KV heads of dim 64, 8 experts
#: top-2 of width 256, no shared expert, untied embeddings, float32; batch 8 x 512 tokens.
REFERENCE_SHAPE = {
  "vocab_size": 8192,
  "d_model": 256,
  "num_layers": 4,
  "full_attention_interval": 1,
  "num_heads": 4,
  "num_kv_heads": 2,
  "head_dim": 64,
  "partial_rotary_factor": 1.0,
  "num_experts": 8,
  "num_experts_per_tok": 2,
  "expert_dim": 256,
  "shared_expert_dim": 0,
  "tie_embeddings": False,
  "dtype": "float32",
  "param_dtype": "float32",
}


REFERENCE_BATCH = {"batch_size": 8, "seq_len": 512}


def reference_model_config(**overrides: Any) -> models.ModelConfig:
  """The reference shape (`REFERENCE_SHAPE`) as a model config; `overrides` change how it runs
  (``moe_backend``, ``remat``, ...) or, for other experiments, its shape."""
  return models.ModelConfig(**{**REFERENCE_SHAPE, "moe_backend": "sort", **overrides})


def _bench_step(model_config, batch, *, steps, grad_accum, loss_chunk, mesh):
  """A compiled train step of `model_config` on `batch` and its state; returns a function that
  runs one step to completion, and the first (compiling) step's seconds."""
  config = get_default_config()
  config.optim.grad_accum = grad_accum
  tx, schedule = make_optimizer(config, steps)
  with models.use_mesh(mesh):
    model = models.create_model(model_config, seed=0, mesh=mesh)
    graphdef, state = init_state(model, tx, mesh)
    del model
    step = jax.jit(
      make_train_step(
        graphdef,
        tx,
        schedule,
        grad_accum=grad_accum,
        aux_loss_coef=model_config.router_aux_loss_coef,
        loss_chunk=loss_chunk,
      ),
      donate_argnums=0,
    )
    device_batch = shard_batch(batch, mesh)
  box = {"state": state, "loss": math.nan}

  def run() -> float:
    t0 = time.perf_counter()
    box["state"], metrics = step(box["state"], device_batch)
    box["loss"] = float(metrics["loss"])  # waits for the step
    return time.perf_counter() - t0

  return run, box, run()


def benchmark(
  model_config: models.ModelConfig,
  *,
  batch_size: int,
  seq_len: int,
  steps: int = 10,
  warmup: int = 2,
  grad_accum: int = 1,
  mesh=None,
  loss_chunk: int = 0,
  baseline: models.ModelConfig | None = None,
  baseline_loss_chunk: int = -1,
) -> dict[str, Any]:
  """Steady-state train-step throughput of `model_config` on random full rows (every token is a
  loss token): tokens/s, and MFU against the measured matmul peak of the local devices.

  With a `baseline` config (e.g. every expert on every token and the loss from full logits), its
  step runs in the same process, alternating with ours step by step, so a machine shared with
  other work slows both alike; ``speedup_vs_baseline`` is the ratio of the median step times.
  """
  if steps < 1 or warmup < 1:
    raise ValueError("need at least one warm-up and one timed step")
  mesh = mesh if mesh is not None else models.make_mesh()
  rng = np.random.default_rng(0)
  tokens = rng.integers(0, model_config.vocab_size, size=(batch_size, seq_len + 1), dtype=np.int32)
  batch = {
    "tokens": tokens[:, :-1],
    "targets": tokens[:, 1:],
    "loss_mask": np.ones((batch_size, seq_len), np.int32),
    "value_mask": np.zeros((batch_size, seq_len), np.int32),
    "segment_ids": np.ones((batch_size, seq_len), np.int32),
    "positions": np.broadcast_to(np.arange(seq_len, dtype=np.int32), (batch_size, seq_len)),
  }
  total = steps + warmup
  runs = {"ours": (model_config, loss_chunk)}
  if baseline is not None:
    runs["baseline"] = (baseline, baseline_loss_chunk)
  steppers, first_s = {}, {}
  for name, (cfg, chunk) in runs.items():
    run, box, first = _bench_step(
      cfg, batch, steps=total, grad_accum=grad_accum, loss_chunk=chunk, mesh=mesh
    )
    steppers[name], first_s[name] = (run, box), first
  for _ in range(warmup - 1):
    for run, _ in steppers.values():
      run()
  times: dict[str, list[float]] = {name: [] for name in steppers}
  for _ in tqdm(range(steps), desc="bench", mininterval=1.0):
    for name, (run, _) in steppers.items():
      times[name].append(run())
  flops_per_token = model_summary(model_config, seq_len)["flops_per_token"]
  peak = measure_matmul_peak(dtype=model_config.dtype)
  tokens_per_step = batch_size * seq_len
  step_s = float(np.median(times["ours"]))
  tokens_per_s = tokens_per_step / step_s
  summary = {
    "tokens_per_s": tokens_per_s,
    "tokens_per_s_best": tokens_per_step / float(np.min(times["ours"])),
    "step_s_median": step_s,
    "step_s_min": float(np.min(times["ours"])),
    "first_step_s": first_s["ours"],
    "mfu": tokens_per_s * flops_per_token / peak,
    "flops_per_token": flops_per_token,
    "matmul_peak_flops": peak,
    "final_loss": steppers["ours"][1]["loss"],
    "batch_size": batch_size,
    "seq_len": seq_len,
    "steps": steps,
    "loss_chunk": loss_chunk or loss_chunk_length(seq_len, batch_size // grad_accum),
    "devices": len(jax.devices()),
    "mesh": dict(mesh.shape),
  }
  if baseline is not None:
    base_s = float(np.median(times["baseline"]))
    summary.update(
      baseline_tokens_per_s=tokens_per_step / base_s,
      baseline_step_s_median=base_s,
      baseline_mfu=tokens_per_step / base_s * flops_per_token / peak,
      baseline_final_loss=steppers["baseline"][1]["loss"],
      speedup_vs_baseline=base_s / step_s,
    )
  return summary
