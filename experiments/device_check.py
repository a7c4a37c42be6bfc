"""A prepared accelerator check: ``python -m experiments.device_check --workdir=DIR``.

One run that says whether this host's accelerator computes the model right and how fast, in a
few minutes (`make device-check`; ≤ 8 minutes on a GPU or TPU host). Writes ``DIR/summary.json``:

- ``device``: platform, kind and count of `jax.devices()`, the jax / jaxlib versions, and
  whether an accelerator ran the check (``accelerator``);
- ``parity``: the model's logits on the accelerator against `jax.devices("cpu")[0]` in the same
  process, same weights and tokens: float32 at the highest matmul precision (sort and ragged_dot
  MoE) and bfloat16 activations, each with its max abs difference and a pass/fail tolerance
  suited to the dtype (`PARITY_TOLERANCE`, `BF16_ERROR_FACTOR`);
- ``train``: SFT train-step throughput (`rl.sft.bench.benchmark`, what `experiments.bench_train` runs)
  and ``sample``: sampler throughput (`rl.grpo.rollout_bench.sampler_throughput`, what
  `experiments.bench_rollout` runs), each with MFU against the device's dense bf16 peak
  (`PEAK_BF16_FLOPS`; null for a device not in the table) from the model's FLOP count
  (`models.perf.flops.model_summary`);
- ``sft_memory``: the memory one SFT step takes (the device's ``peak_bytes_in_use`` where it
  reports one, else the compiled step's temporaries + arguments);
- ``moe_backend``: one MoE layer's forward + backward on the train batch's tokens with
  ``ragged_dot`` and with ``sort``, and the faster one.

On a GPU or TPU the sizes are the ``small`` model config's (about 70M parameters, 64 experts
top-4) with bfloat16 activations; without one everything runs on the CPU at test size (the
``tiny`` config, a few steps) and the summary says so (``"accelerator": false, "size": "test"``).
``--size`` and ``--dtype`` override. The command fails (after writing the summary) when parity
fails or a section raised.
"""

from __future__ import annotations

import re
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import jaxlib
import numpy as np
from absl import flags
from flax import nnx

import models
from experiments.common import run_main, write_summary
from models.moe import MoE
from models.perf.benchmark import best_seconds
from rl.grpo.rollout_bench import sampler_throughput
from rl.sft.bench import benchmark
from rl.sft.trainer import (
  get_default_config,
  init_state,
  make_optimizer,
  make_train_step,
  shard_batch,
)

#: Dense bf16 peak FLOP/s of one chip, matched against ``device_kind`` (lower case) in order.
PEAK_BF16_FLOPS: tuple[tuple[str, float], ...] = (
  (r"\bh100\b.*\bpcie\b", 756e12),
  (r"\bh(100|200)\b", 989e12),
  (r"\ba100\b", 312e12),
  (r"\bl4\b", 121e12),
  (r"\btpu v4\b", 275e12),
  (r"\btpu v5( ?lite|e)\b", 197e12),
  (r"\btpu v5p?\b", 459e12),
  (r"\btpu v6( ?lite|e)\b", 918e12),
)

#: Parity tolerance on max |accelerator - CPU| / max |CPU logits|, by activation dtype: float32
#: (highest matmul precision) differs only in summation order; bfloat16 rounds every activation
#: (8-bit mantissa) through every layer, so two correct devices may differ by a few percent.
PARITY_TOLERANCE = {"float32": 2e-3, "bfloat16": 6e-2}
#: ...or, for bfloat16, this many times the CPU's own bfloat16 error against its float32 logits.
BF16_ERROR_FACTOR = 3.0
_PRECISION = {"float32": "highest", "bfloat16": "default"}

#: Everything one run measures, per size. `small` fits an 8-minute budget on one GPU or TPU chip,
#: compiles included; `test` is seconds on a CPU.
SIZES: dict[str, dict[str, Any]] = {
  "small": {
    "config": "small",
    "overrides": {},
    "parity_batch": 2,
    "parity_seq_len": 256,
    "batch_size": 16,
    "seq_len": 1024,
    "steps": 10,
    "warmup": 2,
    "sample_batch": 32,
    "prompt_len": 128,
    "new_tokens": 128,
    "repeats": 3,
  },
  "test": {
    # One Gated DeltaNet and one attention layer: tiny's 8 layers compile twice as long on a CPU.
    "config": "tiny",
    "overrides": {"num_layers": 2, "full_attention_interval": 2},
    "parity_batch": 2,
    "parity_seq_len": 32,
    "batch_size": 2,
    "seq_len": 32,
    "steps": 2,
    "warmup": 1,
    "sample_batch": 2,
    "prompt_len": 8,
    "new_tokens": 8,
    "repeats": 1,
  },
}

BUDGET_S = 480.0  # the issue's limit for the whole check on an accelerator host

_WORKDIR = flags.DEFINE_string("workdir", "runs/device_check", "Where summary.json goes.")
_SIZE = flags.DEFINE_enum(
  "size", None, list(SIZES), "Sizes to run; default small on an accelerator, test on CPU."
)
_DTYPE = flags.DEFINE_enum(
  "dtype",
  None,
  ["float32", "bfloat16"],
  "Activation dtype of the throughput, memory and MoE runs; default bfloat16 on an "
  "accelerator, float32 on CPU.",
)


def peak_bf16_flops(device_kind: str) -> float | None:
  """The dense bf16 peak FLOP/s of one `device_kind` chip, or None when it is not in the table."""
  kind = device_kind.lower()
  for pattern, peak in PEAK_BF16_FLOPS:
    if re.search(pattern, kind):
      return peak
  return None


def device_info() -> dict[str, Any]:
  devices = jax.devices()
  kind = devices[0].device_kind
  return {
    "platform": devices[0].platform,
    "device_kind": kind,
    "device_count": len(devices),
    "process_count": jax.process_count(),
    "jax_version": jax.__version__,
    "jaxlib_version": jaxlib.__version__,
    "accelerator": devices[0].platform != "cpu",
    "peak_bf16_flops_per_device": peak_bf16_flops(kind),
  }


def _mfu(flops_per_s: float, peak: float | None) -> float | None:
  return None if peak is None else flops_per_s / peak


# --------------------------------------------------------------------------------------------------
# Sections


def _cpu_device():
  try:
    return jax.devices("cpu")[0]
  except RuntimeError as error:
    raise RuntimeError("no CPU backend to compare with: JAX_PLATFORMS must include cpu") from error


def logits_parity(
  config: models.ModelConfig, batch: int, seq_len: int, device, cpu
) -> dict[str, Any]:
  """The logits of one set of weights on `device` and on `cpu`, per (dtype, MoE backend) case."""
  tokens = np.random.default_rng(1).integers(0, config.vocab_size, (batch, seq_len), np.int32)
  with jax.default_device(cpu):
    state = nnx.state(models.create_model(config.replace(dtype="float32"), seed=0))
  cases = {
    "float32_sort": config.replace(dtype="float32", moe_backend="sort"),
    "float32_ragged_dot": config.replace(dtype="float32", moe_backend="ragged_dot"),
    "bfloat16_sort": config.replace(dtype="bfloat16", moe_backend="sort"),
  }
  placed = {d: (jax.device_put(state, d), jax.device_put(tokens, d)) for d in {device, cpu}}

  forwards = {}
  for name, case in cases.items():
    graphdef = nnx.graphdef(models.abstract_model(case))
    forwards[name] = jax.jit(lambda s, t, g=graphdef: nnx.merge(g, s)(t).astype(jnp.float32))

  def run(name: str, d) -> np.ndarray:  # one compile per case and device
    with jax.default_matmul_precision(_PRECISION[cases[name].dtype]):
      return np.asarray(forwards[name](*placed[d]))

  # Every case is compared with the CPU's run of its dtype through the sort backend.
  references = {c.dtype: run(n, cpu) for n, c in cases.items() if c.moe_backend == "sort"}
  # bfloat16's own error on the CPU (against float32): a correct accelerator's bfloat16 logits
  # are about as far from float32, so at most about twice that from the CPU's.
  bf16_error = float(np.max(np.abs(references["bfloat16"] - references["float32"])))
  results = {}
  for name, case in cases.items():
    reference, logits = references[case.dtype], run(name, device)
    scale = float(np.max(np.abs(reference)))
    diff = float(np.max(np.abs(logits - reference)))
    tolerance = PARITY_TOLERANCE[case.dtype] * max(scale, 1.0)
    if case.dtype == "bfloat16":
      tolerance = max(tolerance, BF16_ERROR_FACTOR * bf16_error)
    finite = bool(np.isfinite(logits).all())
    results[name] = {
      "dtype": case.dtype,
      "moe_backend": case.moe_backend,
      "matmul_precision": _PRECISION[case.dtype],
      "max_abs_diff": diff,
      "mean_abs_diff": float(np.mean(np.abs(logits - reference))),
      "max_abs_cpu_logit": scale,
      "tolerance": tolerance,
      "argmax_agreement": float(np.mean(logits.argmax(-1) == reference.argmax(-1))),
      "finite": finite,
      "passed": finite and diff <= tolerance,
    }
  return {
    "batch": batch,
    "seq_len": seq_len,
    "reference": "the same weights and tokens on jax.devices('cpu')[0], sort backend, same dtype",
    "tolerance_rule": "max_abs_diff <= relative_tolerance[dtype] * max(1, max |CPU logit|); "
    f"bfloat16: or <= {BF16_ERROR_FACTOR} x the CPU's bfloat16-vs-float32 max abs difference",
    "relative_tolerance": PARITY_TOLERANCE,
    "cpu_bfloat16_vs_float32_max_abs_diff": bf16_error,
    "cases": results,
    "passed": all(r["passed"] for r in results.values()),
  }


def _random_batch(config: models.ModelConfig, batch: int, seq_len: int) -> dict[str, np.ndarray]:
  """Full rows of random ids, every token a loss token (as `rl.sft.bench.benchmark` builds them)."""
  tokens = np.random.default_rng(0).integers(0, config.vocab_size, (batch, seq_len + 1), np.int32)
  return {
    "tokens": tokens[:, :-1],
    "targets": tokens[:, 1:],
    "loss_mask": np.ones((batch, seq_len), np.int32),
    "value_mask": np.zeros((batch, seq_len), np.int32),
    "segment_ids": np.ones((batch, seq_len), np.int32),
    "positions": np.broadcast_to(np.arange(seq_len, dtype=np.int32), (batch, seq_len)),
  }


def sft_step_memory(
  config: models.ModelConfig, batch: int, seq_len: int, schedule_steps: int
) -> dict[str, Any]:
  """The memory of one SFT train step (AdamW, fused head loss, donated state) per device: the
  compiled step's `memory_analysis()`, and, where the device reports them, the first device's
  allocator's bytes in use before, and its peak after building the state and running the step.
  Run it first: the allocator's peak is the process's."""
  device = jax.devices()[0]
  before = device.memory_stats() or {}
  mesh = models.make_mesh()
  # The optimizer `rl.sft.bench.benchmark` builds for `schedule_steps` steps: the same program.
  tx, schedule = make_optimizer(get_default_config(), schedule_steps)
  with models.use_mesh(mesh):
    graphdef, state = init_state(models.create_model(config, seed=0, mesh=mesh), tx, mesh)
    step = jax.jit(
      make_train_step(
        graphdef, tx, schedule, grad_accum=1, aux_loss_coef=config.router_aux_loss_coef
      ),
      donate_argnums=0,
    )
    device_batch = shard_batch(_random_batch(config, batch, seq_len), mesh)
  # Compiled and run outside the mesh context, as `rl.sft.bench.benchmark` runs its step.
  t0 = time.perf_counter()
  compiled = step.lower(state, device_batch).compile()
  compile_s = time.perf_counter() - t0
  state, metrics = compiled(state, device_batch)
  loss = float(metrics["loss"])
  after = device.memory_stats() or {}
  analysis = compiled.memory_analysis()
  compiled_bytes = {
    name: int(getattr(analysis, f"{name}_size_in_bytes", 0) or 0)
    for name in ("temp", "argument", "output", "alias", "generated_code")
  }
  summary = {
    "batch_size": batch,
    "seq_len": seq_len,
    "dtype": config.dtype,
    "param_dtype": config.param_dtype,
    "compile_s": compile_s,
    "loss": loss,
    "compiled_bytes": compiled_bytes,
    "compiled_temp_plus_argument_bytes": compiled_bytes["temp"] + compiled_bytes["argument"],
    "bytes_in_use_before": before.get("bytes_in_use"),
    "peak_bytes_in_use": after.get("peak_bytes_in_use"),
    "bytes_limit": after.get("bytes_limit"),
  }
  if summary["peak_bytes_in_use"] is not None:
    summary.update(peak_bytes=summary["peak_bytes_in_use"], source="memory_stats")
  else:
    summary.update(
      peak_bytes=summary["compiled_temp_plus_argument_bytes"], source="memory_analysis"
    )
  del state
  return summary


def train_throughput(
  config: models.ModelConfig, size: dict[str, Any], peak: float | None
) -> dict[str, Any]:
  """`rl.sft.bench.benchmark` (bench_train's measurement) on `config`, with MFU against `peak` times
  the devices it ran on."""
  summary = benchmark(
    config,
    batch_size=size["batch_size"],
    seq_len=size["seq_len"],
    steps=size["steps"],
    warmup=size["warmup"],
  )
  total_peak = None if peak is None else peak * summary["devices"]
  flops_per_s = summary["tokens_per_s"] * summary["flops_per_token"]
  return {
    **summary,
    "mfu_vs_measured_matmul": summary.pop("mfu"),
    "model_flops_per_s": flops_per_s,
    "peak_bf16_flops": total_peak,
    "mfu": _mfu(flops_per_s, total_peak),
  }


def sample_throughput(
  config: models.ModelConfig, size: dict[str, Any], peak: float | None
) -> dict[str, Any]:
  """`rl.grpo.rollout_bench.sampler_throughput` (bench_rollout's sampler measurement) on `config` on
  the default device, with MFU from the forward FLOPs per token at the final context length
  (sampled tokens only; the prefill's work is not counted, so it is a lower bound)."""
  batch, prompt, new = size["sample_batch"], size["prompt_len"], size["new_tokens"]
  summary = sampler_throughput(config, batch, prompt, new, size["repeats"])
  flops_per_token = models.model_summary(config, prompt + new)["forward_flops_per_token"]
  flops_per_s = summary["tokens_per_s"] * flops_per_token
  return {
    **summary,
    "forward_flops_per_token": flops_per_token,
    "model_flops_per_s": flops_per_s,
    "peak_bf16_flops": peak,
    "mfu": _mfu(flops_per_s, peak),
  }


def moe_backends(config: models.ModelConfig, size: dict[str, Any]) -> dict[str, Any]:
  """One MoE layer of `config` (routed experts and the shared expert) on the train batch's
  tokens, forward + backward (gradients of the weights and the input), with each backend on the
  default device, the best of 5 calls after a compiling one; the faster one wins. The layer alone: the rest of the model is the same work
  whichever backend runs, and compiling the whole model twice more would cost minutes."""
  batch, seq_len = size["batch_size"], size["seq_len"]
  x_btd = np.random.default_rng(2).normal(size=(batch, seq_len, config.d_model))
  x_btd = jnp.asarray(x_btd, config.compute_dtype)
  times = {}
  for backend in ("ragged_dot", "sort"):
    with models.use_mesh(None):
      graphdef, params = nnx.split(MoE(config.replace(moe_backend=backend), rngs=nnx.Rngs(0)))

    def loss(params, x_btd, graphdef=graphdef):
      out_btd, stats = nnx.merge(graphdef, params)(x_btd)
      return jnp.mean(jnp.square(out_btd.astype(jnp.float32))) + stats.aux_loss

    grads = jax.jit(jax.grad(loss, argnums=(0, 1)))
    seconds = best_seconds(lambda grads=grads, params=params: grads(params, x_btd), 5)
    times[backend] = {"seconds": seconds, "tokens_per_s": batch * seq_len / seconds}
  winner = min(times, key=lambda b: times[b]["seconds"])
  loser = max(times, key=lambda b: times[b]["seconds"])
  return {
    "what": "one MoE layer (router, routed experts, shared expert), forward + backward",
    "tokens": batch * seq_len,
    "d_model": config.d_model,
    "num_experts": config.num_experts,
    "top_k": config.num_experts_per_tok,
    "expert_dim": config.expert_dim,
    "dtype": config.dtype,
    **times,
    "faster": winner,
    "speedup": times[loser]["seconds"] / times[winner]["seconds"],
  }


# --------------------------------------------------------------------------------------------------
# The run


def _section(summary: dict[str, Any], name: str, fn: Callable[[], dict[str, Any]]) -> None:
  """Runs one section into `summary[name]`, timing it; an exception is recorded, not raised."""
  print(f"device_check: {name} ...", flush=True)
  t0 = time.perf_counter()
  try:
    summary[name] = fn()
  except Exception as error:  # one broken section must not hide the others' figures
    traceback.print_exc()
    summary[name] = {"error": f"{type(error).__name__}: {error}"}
  summary["section_seconds"][name] = time.perf_counter() - t0


def run_check(size_name: str | None = None, dtype: str | None = None) -> dict[str, Any]:
  """Every section above at `size_name` ("small" or "test"; by default small on an accelerator,
  test on CPU), as one summary."""
  start = time.perf_counter()
  info = device_info()
  accelerator = info["accelerator"]
  size_name = size_name or ("small" if accelerator else "test")
  dtype = dtype or ("bfloat16" if accelerator else "float32")
  if not accelerator:
    print(f"device_check: no accelerator (platform {info['platform']}): running on the CPU at "
          f"{size_name} size", flush=True)  # fmt: skip
  size = SIZES[size_name]
  base = models.get_config(size["config"], **size["overrides"])
  config = base.replace(dtype=dtype)
  peak = info["peak_bf16_flops_per_device"]
  summary: dict[str, Any] = {
    "accelerator": accelerator,
    "size": size_name,
    "device": info,
    "model": {
      "config": size["config"],
      "overrides": size["overrides"],
      "num_layers": base.num_layers,
      "dtype": dtype,
      "param_dtype": config.param_dtype,
      **{k: v for k, v in models.model_summary(base, size["seq_len"]).items() if "params" in k},
    },
    "settings": size,
    "section_seconds": {},
  }
  # Memory first: the allocator's peak counts everything the process has held on the device.
  _section(
    summary,
    "sft_memory",
    lambda: sft_step_memory(
      config, size["batch_size"], size["seq_len"], size["steps"] + size["warmup"]
    ),
  )
  _section(
    summary,
    "parity",
    lambda: logits_parity(
      base, size["parity_batch"], size["parity_seq_len"], jax.devices()[0], _cpu_device()
    ),
  )
  _section(summary, "train", lambda: train_throughput(config, size, peak))
  _section(summary, "sample", lambda: sample_throughput(config, size, peak))
  _section(summary, "moe_backend", lambda: moe_backends(config, size))
  total = time.perf_counter() - start
  errors = [k for k, v in summary.items() if isinstance(v, dict) and "error" in v]
  summary.update(
    total_seconds=total,
    budget_seconds=BUDGET_S,
    within_budget=total <= BUDGET_S,
    errors=errors,
    passed=not errors and bool(summary["parity"].get("passed")),
  )
  return summary


def _fmt(value: float | None, spec: str, unit: str = "") -> str:
  return "n/a" if value is None else f"{value:{spec}}{unit}"


def _row(label: str, text: str) -> str:
  return f"  {label:<25} {text}"


def table(summary: dict[str, Any]) -> str:
  """The summary as a few lines for a person."""
  d, model = summary["device"], summary["model"]
  lines = [
    f"device check: {d['device_count']} x {d['device_kind']} ({d['platform']}), accelerator: "
    f"{'yes' if summary['accelerator'] else 'no'}, size {summary['size']} ({model['config']}, "
    f"{model['num_layers']} layers, {model['dtype']}), jax {d['jax_version']}",
  ]
  parity = summary.get("parity", {})
  for name, case in parity.get("cases", {}).items():
    verdict = "pass" if case["passed"] else "FAIL"
    lines.append(
      _row(
        f"parity {name}",
        f"max|diff| {case['max_abs_diff']:.2e}, tolerance {case['tolerance']:.2e}: {verdict}",
      )
    )
  peak = d["peak_bf16_flops_per_device"]
  lines.append(_row("peak bf16 per device", _fmt(peak and peak / 1e12, ".0f", " TFLOP/s")))
  for name, label in (("train", "train (SFT step)"), ("sample", "sample (decode)")):
    s = summary.get(name, {})
    if "tokens_per_s" in s:
      mfu = _fmt(s["mfu"] and 100 * s["mfu"], ".2f", "%")
      lines.append(_row(label, f"{s['tokens_per_s']:,.0f} tokens/s, MFU {mfu}"))
  m = summary.get("sft_memory", {})
  if "peak_bytes" in m:
    lines.append(_row("SFT step memory", f"{m['peak_bytes'] / 2**30:.3f} GiB ({m['source']})"))
  b = summary.get("moe_backend", {})
  if "faster" in b:
    lines.append(
      _row(
        "MoE layer fwd+bwd",
        f"ragged_dot {1e3 * b['ragged_dot']['seconds']:.1f} ms, sort "
        f"{1e3 * b['sort']['seconds']:.1f} ms: {b['faster']} ({b['speedup']:.2f}x)",
      )
    )
  for name in summary["errors"]:
    lines.append(_row(f"{name} ERROR", summary[name]["error"]))
  verdict = "PASSED" if summary["passed"] else "FAILED"
  lines.append(
    f"  total {summary['total_seconds']:.0f} s (budget {summary['budget_seconds']:.0f} s): {verdict}"
  )
  return "\n".join(lines)


def use_compilation_cache(workdir: str) -> str:
  """JAX's persistent compilation cache, under `workdir` unless one is configured already: the
  memory and throughput sections compile the same SFT step, which then compiles once, and a
  second run of the check reuses every compile."""
  if not jax.config.jax_compilation_cache_dir:
    jax.config.update("jax_compilation_cache_dir", str(Path(workdir) / "jax_cache"))
  return jax.config.jax_compilation_cache_dir


def main(argv):
  del argv
  cache = use_compilation_cache(_WORKDIR.value)
  summary = run_check(_SIZE.value, _DTYPE.value)
  summary["compilation_cache_dir"] = cache
  print(table(summary), flush=True)
  write_summary(_WORKDIR.value, summary)
  if not summary["passed"]:
    sys.exit(1)


if __name__ == "__main__":
  run_main(main)
