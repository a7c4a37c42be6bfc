"""One GRPO step on random prompts, split into sampling and update: what ``experiments.bench_grpo``
times, and ours in ``experiments.bench_peers``.

A step is G random prompts x N rollouts x `new_tokens` sampled tokens: sampling = the rollout
engine's device path (prefill each prompt once, copy its cache to its N rows,
``rl.grpo.rollout.sample_turn`` at temperature 1 with the tempered log-probs recorded; no stop token, so
every rollout is exactly `new_tokens` long); update = batch assembly, rewards (random rubric
passes), group advantages and one jitted, donated ``rl.grpo.trainer`` step (eq. 8 loss, Adam). With
``kl_coef`` > 0 the step keeps a frozen copy of the initial parameters and adds the k3 KL term to it
(one more forward pass of the reference policy over the batch). Environment time is not in it.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

import models
from configs.grpo import get_config
from rl.grpo import trainer as grpo
from rl.grpo.loss import GRPOLossConfig
from rl.grpo.rollout import Rollout, make_sampler, sample_turn, take_rows


def grpo_stepper(
  model_config: models.ModelConfig,
  *,
  prompts: int,
  num_rollouts: int,
  prompt_len: int,
  new_tokens: int,
  kl_coef: float = 0.0,
) -> Callable[[int], dict[str, float]]:
  """``step(seed)`` runs one GRPO step (the first compiles) and returns ``sample_s``, ``update_s``,
  ``batch_length`` and ``ratio_max`` (1: sampler and trainer agree)."""
  g, n, p, new = prompts, num_rollouts, prompt_len, new_tokens
  config = get_config("paper")  # Adam 1e-5, clip 0.20 / 0.28
  mesh = models.make_mesh()
  tx = grpo.make_optimizer(config)
  rng = np.random.default_rng(0)
  prompts_gp = rng.integers(3, model_config.vocab_size, (g, p)).astype(np.int32)
  sampler = make_sampler(1.0, 1.0, model_config.vocab_size)
  max_len = p + new
  with models.use_mesh(mesh):
    model = models.create_model(model_config, seed=0, mesh=mesh)
    graphdef, state = grpo.init_state(model, tx, mesh, keep_reference=kl_coef > 0)
    full_graphdef = nnx.graphdef(model)
    del model
    loss_config = GRPOLossConfig(kl_coef=kl_coef)
    step_fn = grpo.make_grpo_step(graphdef, tx, loss_config, temperature=1.0)
    shardings = jax.tree.map(lambda x: x.sharding, state)
    update = jax.jit(step_fn, out_shardings=(shardings, None), donate_argnums=0)

    @jax.jit
    def prefill(model_state, tokens_bt):
      lengths_b = jnp.full((tokens_bt.shape[0],), tokens_bt.shape[1], jnp.int32)
      return models.prefill(nnx.merge(full_graphdef, model_state), tokens_bt, lengths_b, max_len)

  def sample(model_state, seed):
    """The engine's path: one prefill per prompt, its cache copied to the prompt's N rows."""
    logits_gv, cache = prefill(model_state, jnp.asarray(prompts_gp))
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
      tokens = np.concatenate([prompts_gp[row // n], ids[row]]).astype(np.int32)
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
  box = {"state": state}

  def step(seed: int) -> dict[str, float]:
    with models.use_mesh(mesh):
      t0 = time.perf_counter()
      state = box["state"]
      model_state = nnx.split(nnx.merge(graphdef, state["params"], state["rest"]))[1]
      ids, logps = sample(model_state, seed)
      t1 = time.perf_counter()
      batch = grpo.assemble_batch(rollouts(ids, logps, seed), g, n, min_length=128)
      _, advantages = grpo.rewards_and_advantages(batch, reward_fn, config.reward.delta)
      box["state"], metrics = update(state, grpo.shard_batch(batch, advantages.reshape(-1), mesh))
      metrics = jax.device_get(metrics)
      t2 = time.perf_counter()
    return {
      "sample_s": t1 - t0,
      "update_s": t2 - t1,
      "batch_length": int(batch["tokens"].shape[1]),
      "ratio_max": float(metrics["ratio_max"]),
    }

  return step
