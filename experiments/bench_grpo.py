"""Times one GRPO step on the SFT benchmark's reference shape, split into sampling and update.

``python -m experiments.bench_grpo --workdir=DIR``: vocab 8192, hidden 256, 4 layers, 4 query /
2 KV heads of dim 64, 8 experts top-2 of width 256 (``rl.sft.reference_model_config``, the SFT
benchmark's model; every layer full attention unless ``--hybrid``). A step is 2 random 64-token prompts x N rollouts x 128
new tokens: sampling = the rollout engine's device path (prefill each prompt once, copy its cache
to its N rows, ``rl.rollout.sample_turn`` at temperature 1 with the tempered log-probs recorded;
no stop token, so every rollout is exactly 128 tokens); update = batch assembly, rewards, group
advantages and one jitted, donated ``rl.grpo`` step (eq. 8 loss, Adam). Environment time is not in
it (the rollout benchmark measures that). Tunix 0.1.7 takes ~2.9 s per GRPO step for 2 prompts x 4
rollouts on this kind of machine; the target is half that.
"""

import time

import jax
import jax.numpy as jnp
import numpy as np
from absl import flags
from flax import nnx

import models
from configs.grpo import get_config
from experiments.common import run_main, write_summary
from rl import grpo
from rl.grpo_loss import GRPOLossConfig
from rl.rollout import Rollout, make_sampler, sample_turn, take_rows
from rl.sft import measure_matmul_peak, reference_model_config

_WORKDIR = flags.DEFINE_string("workdir", "runs/bench_grpo", "Where summary.json goes.")
_STEPS = flags.DEFINE_integer("steps", 5, "Timed steps per shape (after one compiling step).")
_ROLLOUTS = flags.DEFINE_list("num_rollouts", ["8", "4"], "N per prompt; one measurement each.")
_PROMPTS = flags.DEFINE_integer("prompts", 2, "Prompts (tasks) per step.")
_PROMPT_LEN = flags.DEFINE_integer("prompt_len", 64, "Tokens per prompt.")
_NEW = flags.DEFINE_integer("new_tokens", 128, "Tokens sampled per rollout.")
_BACKEND = flags.DEFINE_enum("moe_backend", "sort", list(models.config.MOE_BACKENDS), "MoE kernel.")
_HYBRID = flags.DEFINE_bool("hybrid", False, "Gated DeltaNet in 3 of 4 layers.")
TUNIX_STEP_S = 2.9  # 2 prompts x 4 rollouts


def bench_shape(model_config: models.ModelConfig, n: int) -> dict:
  g, p, new = _PROMPTS.value, _PROMPT_LEN.value, _NEW.value
  config = get_config("paper")  # Adam 1e-5, clip 0.20 / 0.28, no KL: no reference model
  mesh = models.make_mesh()
  tx = grpo.make_optimizer(config)
  rng = np.random.default_rng(0)
  prompts = rng.integers(3, model_config.vocab_size, (g, p)).astype(np.int32)
  sampler = make_sampler(1.0, 1.0, model_config.vocab_size)
  max_len = p + new
  with models.use_mesh(mesh):
    model = models.create_model(model_config, seed=0, mesh=mesh)
    graphdef, state = grpo.init_state(model, tx, mesh, keep_reference=False)
    full_graphdef = nnx.graphdef(model)
    del model
    step_fn = grpo.make_grpo_step(graphdef, tx, GRPOLossConfig(), temperature=1.0)
    shardings = jax.tree.map(lambda x: x.sharding, state)
    update = jax.jit(step_fn, out_shardings=(shardings, None), donate_argnums=0)

    @jax.jit
    def prefill(model_state, tokens_bt):
      lengths_b = jnp.full((tokens_bt.shape[0],), tokens_bt.shape[1], jnp.int32)
      return models.prefill(nnx.merge(full_graphdef, model_state), tokens_bt, lengths_b, max_len)

    def sample(model_state, seed):
      """The engine's path: one prefill per prompt, its cache copied to the prompt's N rows."""
      logits_gv, cache = prefill(model_state, jnp.asarray(prompts))
      rows = jnp.repeat(jnp.arange(g), n)
      cache, logits_bv = take_rows(cache, rows), jnp.take(logits_gv, rows, axis=0)
      b = g * n
      ids, logps, _, _, _ = sample_turn(
        full_graphdef, model_state, cache, logits_bv, jnp.full((b,), new, jnp.int32),
        jnp.arange(b, dtype=jnp.int32), jnp.zeros((b,), jnp.int32), jax.random.key(seed),
        sampler=sampler, steps=new, stop_id=-1, temperature=1.0,
      )  # fmt: skip
      return np.asarray(ids), np.asarray(logps)

    def rollouts(ids, logps, seed):
      out = []
      passed = np.random.default_rng(seed).random((g * n, 4)) < 0.5  # 4 rubric criteria
      for row in range(g * n):
        tokens = np.concatenate([prompts[row // n], ids[row]]).astype(np.int32)
        mask = np.arange(p + new) >= p
        out.append(Rollout(
          task_id=f"t{row // n}", group=row // n, index=row % n, tokens=tokens, loss_mask=mask,
          logprobs=np.where(mask, np.concatenate([np.zeros(p), logps[row]]), 0).astype(np.float32),
          messages=[], final_answer=None, finished=False, turns=1, tool_calls=0, tool_errors=0,
          criteria=[f"c{j}" for j in range(4)], passed=passed[row], generated_tokens=new,
          env_seconds=0.0,
        ))  # fmt: skip
      return out

    reward_fn = grpo.reward_function(config)
    times = {"sample": [], "update": []}
    for it in range(_STEPS.value + 1):
      t0 = time.perf_counter()
      model_state = nnx.split(nnx.merge(graphdef, state["params"], state["rest"]))[1]
      ids, logps = sample(model_state, it)
      t1 = time.perf_counter()
      batch = grpo.assemble_batch(rollouts(ids, logps, it), g, n, min_length=128)
      _, advantages = grpo.rewards_and_advantages(batch, reward_fn, config.reward.delta)
      state, metrics = update(state, grpo.shard_batch(batch, advantages.reshape(-1), mesh))
      metrics = jax.device_get(metrics)
      t2 = time.perf_counter()
      print(f"step {it}{' (compiles)' if it == 0 else ''}: sample {t1 - t0:.3f} s, "
            f"update {t2 - t1:.3f} s, ratio max {float(metrics['ratio_max']):.4f}")  # fmt: skip
      if it:
        times["sample"].append(t1 - t0)
        times["update"].append(t2 - t1)
  sample_s, update_s = float(np.median(times["sample"])), float(np.median(times["update"]))
  return {
    "prompts": g,
    "num_rollouts": n,
    "prompt_len": p,
    "new_tokens": new,
    "batch_length": int(batch["tokens"].shape[1]),
    "sample_s": sample_s,
    "update_s": update_s,
    "step_s": sample_s + update_s,
    "sample_tokens_per_s": g * n * new / sample_s,
    "ratio_max_last": float(metrics["ratio_max"]),  # 1: sampler and trainer agree
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
    "reference_tunix_step_s_2x4": TUNIX_STEP_S,
  }
  for shape in shapes:
    if shape["num_rollouts"] == 4 and shape["prompts"] == 2:
      summary["speedup_vs_tunix_2x4"] = TUNIX_STEP_S / shape["step_s"]
  write_summary(_WORKDIR.value, summary)


if __name__ == "__main__":
  run_main(main)
