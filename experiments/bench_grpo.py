"""Times one GRPO step on the SFT benchmark's reference shape, split into sampling and update.

``python -m experiments.bench_grpo --workdir=DIR``: vocab 8192, hidden 256, 4 layers, 4 query /
2 KV heads of dim 64, 8 experts top-2 of width 256 (``rl.sft.bench.reference_model_config``, the SFT
benchmark's model; every layer full attention unless ``--hybrid``). A step is 2 random 64-token prompts x N rollouts x 128
new tokens: sampling = the rollout engine's device path (prefill each prompt once, copy its cache
to its N rows, ``rl.grpo.rollout.sample_turn`` at temperature 1 with the tempered log-probs recorded;
no stop token, so every rollout is exactly 128 tokens); update = batch assembly, rewards, group
advantages and one jitted, donated ``rl.grpo.trainer`` step (eq. 8 loss, Adam; ``rl.grpo.bench``).
Environment time is not in it (the rollout benchmark measures that). Each shape's ``peer`` is
Tunix's step time on it from the last ``make bench-peers`` (``runs/bench_peers/summary.json``, at
beta 0 as here, with ours from that same run), when there is one.
"""

import jax
import numpy as np
from absl import flags

import models
from experiments.common import run_main, write_summary
from experiments.peers.summary import peer_figure
from rl.grpo.bench import grpo_stepper
from rl.sft.bench import REFERENCE_SHAPE, reference_model_config
from rl.sft.trainer import measure_matmul_peak

_WORKDIR = flags.DEFINE_string("workdir", "runs/bench_grpo", "Where summary.json goes.")
_STEPS = flags.DEFINE_integer("steps", 5, "Timed steps per shape (after one compiling step).")
_ROLLOUTS = flags.DEFINE_list("num_rollouts", ["8", "4"], "N per prompt; one measurement each.")
_PROMPTS = flags.DEFINE_integer("prompts", 2, "Prompts (tasks) per step.")
_PROMPT_LEN = flags.DEFINE_integer("prompt_len", 64, "Tokens per prompt.")
_NEW = flags.DEFINE_integer("new_tokens", 128, "Tokens sampled per rollout.")
_BACKEND = flags.DEFINE_enum("moe_backend", "sort", list(models.config.MOE_BACKENDS), "MoE kernel.")
_HYBRID = flags.DEFINE_bool("hybrid", False, "Gated DeltaNet in 3 of 4 layers.")


def bench_shape(model_config: models.ModelConfig, n: int) -> dict:
  g, p, new = _PROMPTS.value, _PROMPT_LEN.value, _NEW.value
  step = grpo_stepper(model_config, prompts=g, num_rollouts=n, prompt_len=p, new_tokens=new)
  times = {"sample": [], "update": []}
  for it in range(_STEPS.value + 1):
    out = step(it)
    print(f"step {it}{' (compiles)' if it == 0 else ''}: sample {out['sample_s']:.3f} s, "
          f"update {out['update_s']:.3f} s, ratio max {out['ratio_max']:.4f}")  # fmt: skip
    if it:
      times["sample"].append(out["sample_s"])
      times["update"].append(out["update_s"])
  sample_s, update_s = float(np.median(times["sample"])), float(np.median(times["update"]))
  return {
    "prompts": g,
    "num_rollouts": n,
    "prompt_len": p,
    "new_tokens": new,
    "batch_length": out["batch_length"],
    "sample_s": sample_s,
    "update_s": update_s,
    "step_s": sample_s + update_s,
    "sample_tokens_per_s": g * n * new / sample_s,
    "ratio_max_last": out["ratio_max"],  # 1: sampler and trainer agree
  }


def main(argv):
  del argv
  model_config = reference_model_config(
    moe_backend=_BACKEND.value, full_attention_interval=4 if _HYBRID.value else 1
  )
  shapes = [bench_shape(model_config, int(n)) for n in _ROLLOUTS.value]
  summary = {
    "shapes": shapes,
    # this machine's float32 matmul rate now: the figures scale with it on a shared machine
    "matmul_peak_flops": measure_matmul_peak(),
    "devices": len(jax.devices()),
    "backend": jax.default_backend(),
    "hybrid": _HYBRID.value,
    "moe_backend": _BACKEND.value,
    "timed_steps": _STEPS.value,
  }
  model_shape = {**REFERENCE_SHAPE, "full_attention_interval": model_config.full_attention_interval}
  for shape in shapes:
    sizes = {k: shape[k] for k in ("prompts", "num_rollouts", "prompt_len", "new_tokens")}
    shape["peer"] = peer_figure("grpo_beta_0", config=sizes, model_shape=model_shape)
  write_summary(_WORKDIR.value, summary)


if __name__ == "__main__":
  run_main(main)
