"""Tunix's side of ``experiments.bench_peers``: one benchmark worker, driven over stdin/stdout.

Run by the driver with the peer environment's interpreter (``.venv-peers/bin/python``, Tunix 0.1.7);
it imports only Tunix, JAX, Flax, Optax, NumPy and the standard library, never this repository's
package. ``--bench`` is one of:

- ``sft``: ``tunix.sft.peft_trainer.PeftTrainer`` (full-parameter training, its default
  next-token loss) on random full rows of ``seq_len`` tokens; tokens/s counts ``batch x seq_len``;
- ``sampler``: ``tunix.generate.sampler.Sampler`` on ``batch`` random ``prompt_len``-token prompts,
  ``new_tokens`` sampled per row at temperature 1 (top-p 1: plain categorical sampling); no token
  stops a row, so every row samples exactly ``new_tokens``; tokens/s counts sampled tokens;
- ``grpo``: ``tunix.rl.grpo.grpo_learner.GRPOLearner`` on an ``RLCluster`` with the vanilla rollout
  engine, ``prompts`` random prompts x ``num_generations`` rollouts x ``new_tokens`` per step,
  ``beta`` the KL coefficient (> 0 adds the frozen reference model and its log-prob pass);
  ``step_s`` is one global step: rollout, reference log-probs, rewards and advantages, update.

The model is Tunix's ``Qwen3`` (``tunix.models.qwen3.model``) with the shape given as JSON.

Protocol: after building and compiling (``--warmup`` untimed steps) the worker prints one line
``@@peer {"event": "ready", ...}``; then each ``run`` line on stdin runs one repeat of ``--steps``
timed steps and prints ``@@peer {"event": "result", "seconds": S, "steps": K, ...}`` (the repeat's
wall time; ``step_seconds`` each step's where they are timed apart); ``quit`` (or end of input)
ends it. Anything else it prints is the libraries' own output.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from importlib import metadata

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx
from tunix.generate import sampler as sampler_lib
from tunix.models.qwen3 import model as qwen3
from tunix.rl import rl_cluster as rl_cluster_lib
from tunix.rl.grpo import grpo_learner
from tunix.rl.rollout import base_rollout
from tunix.sft import peft_trainer
from tunix.sft import utils as sft_utils

MARK = "@@peer "
PAD_ID = 0


def emit(event: str, **payload) -> None:
  print(MARK + json.dumps({"event": event, **payload}), flush=True)


def next_command() -> str:
  return sys.stdin.readline().strip() or "quit"


class IdTokenizer:
  """Text is the token ids written out, space separated: every prompt is random ids. Id 0 pads
  (and is never in a prompt); no id is a BOS; the EOS id (-1) is never sampled, so no row stops."""

  def encode(self, text: str, **kwargs) -> list[int]:
    del kwargs
    return [int(t) for t in text.split()]

  def decode(self, ids, **kwargs) -> str:
    del kwargs
    return " ".join(str(int(t)) for t in ids)

  def bos_id(self) -> int:
    return 0  # falsy: the sampler adds no BOS

  def eos_id(self) -> int:
    return -1

  def pad_id(self) -> int:
    return PAD_ID


def model_config(shape: dict) -> qwen3.ModelConfig:
  return qwen3.ModelConfig(
    num_layers=shape["num_layers"],
    vocab_size=shape["vocab_size"],
    embed_dim=shape["d_model"],
    hidden_dim=shape["expert_dim"],
    num_heads=shape["num_heads"],
    head_dim=shape["head_dim"],
    num_kv_heads=shape["num_kv_heads"],
    rope_theta=1_000_000,
    norm_eps=1e-6,
    use_tied_embedding=shape["tie_embeddings"],
    num_experts=shape["num_experts"],
    num_experts_per_tok=shape["num_experts_per_tok"],
    dtype=jnp.float32,
    param_dtype=jnp.float32,
  )


def make_mesh() -> jax.sharding.Mesh:
  """One device, Tunix's axis names, Auto axes (what its sharding constraints expect). Tunix reads
  the mesh from ``with mesh:`` (``pxla.thread_resources``), deprecated in JAX but still its way."""
  warnings.filterwarnings(
    "ignore", message=".*`with mesh:` context manager", category=DeprecationWarning
  )
  return jax.make_mesh((1, 1), ("fsdp", "tp"), axis_types=(jax.sharding.AxisType.Auto,) * 2)


def random_prompts(shape: dict, rows: int, length: int, seed: int = 0) -> list[str]:
  ids = np.random.default_rng(seed).integers(1, shape["vocab_size"], (rows, length))
  return [" ".join(map(str, row)) for row in ids]


def serve(run_repeat, steps: int) -> None:
  """Answer the driver: one repeat of `steps` timed steps per ``run``; `run_repeat(steps)` returns
  the result's fields."""
  while next_command() == "run":
    emit("result", steps=steps, **run_repeat(steps))


# --------------------------------------------------------------------------------------------------
# The three benchmarks: each sets up, warms up, reports ready, then serves repeats.


def bench_sft(shape: dict, bench: dict, steps: int, warmup: int) -> None:
  batch, seq_len = bench["batch_size"], bench["seq_len"]
  mesh = make_mesh()
  tokens = np.random.default_rng(0).integers(1, shape["vocab_size"], (batch, seq_len))
  example = peft_trainer.TrainingInput(
    input_tokens=jnp.asarray(tokens, jnp.int32), input_mask=jnp.ones((batch, seq_len), jnp.bool_)
  )

  def model_input(x: peft_trainer.TrainingInput) -> dict:  # as tunix.cli.peft_main does
    pad_mask = x.input_tokens != PAD_ID
    return {
      "input_tokens": x.input_tokens,
      "input_mask": x.input_mask,
      "positions": sft_utils.build_positions_from_mask(pad_mask),
      "attention_mask": sft_utils.make_causal_attn_mask(pad_mask),
    }

  # the same optimizer as ours (configs/sft.py:paper): clipping, then AdamW
  tx = optax.chain(
    optax.clip_by_global_norm(1.0),
    optax.adamw(1e-4, b1=0.9, b2=0.95, eps=1e-8, weight_decay=0.01),
  )
  with mesh:
    model = qwen3.Qwen3(model_config(shape), rngs=nnx.Rngs(0))
    trainer = peft_trainer.PeftTrainer(
      model, tx, peft_trainer.TrainingConfig(eval_every_n_steps=10**9, pbar_description=None)
    )
    trainer = trainer.with_gen_model_input_fn(model_input)
    trainer.is_managed_externally = True  # train() may be called again; the caller owns the loop
    t0 = time.perf_counter()
    trainer.train([example] * warmup)
    emit("ready", first_s=time.perf_counter() - t0)

    def repeat(n: int) -> dict:
      t = time.perf_counter()
      trainer.train([example] * n)  # returns once every step is done (its in-flight queue drained)
      return {"seconds": time.perf_counter() - t}

    serve(repeat, steps)


def bench_sampler(shape: dict, bench: dict, steps: int, warmup: int) -> None:
  batch, prompt_len, new = bench["batch_size"], bench["prompt_len"], bench["new_tokens"]
  mesh = make_mesh()
  prompts = random_prompts(shape, batch, prompt_len)
  config = model_config(shape)
  with mesh:
    model = qwen3.Qwen3(config, rngs=nnx.Rngs(0))
    cache = sampler_lib.CacheConfig(
      cache_size=prompt_len + new,
      num_layers=config.num_layers,
      num_kv_heads=config.num_kv_heads,
      head_dim=config.head_dim,
    )
    sampler = sampler_lib.Sampler(model, IdTokenizer(), cache)

    def sample(seed: int) -> float:
      t = time.perf_counter()
      out = sampler(
        prompts,
        max_generation_steps=new,
        max_prompt_length=prompt_len,
        temperature=1.0,
        top_p=1.0,
        seed=seed,
        eos_tokens=[-1],
      )
      elapsed = time.perf_counter() - t
      lengths = {len(t) for t in out.tokens}
      if lengths != {new}:
        raise RuntimeError(f"expected {new} sampled tokens per row, got lengths {lengths}")
      return elapsed

    t0 = time.perf_counter()
    for i in range(warmup):
      sample(i)
    emit("ready", first_s=time.perf_counter() - t0)
    seeds = iter(range(warmup, 10**9))

    def repeat(n: int) -> dict:
      times = [sample(next(seeds)) for _ in range(n)]
      return {"seconds": sum(times), "step_seconds": times}

    serve(repeat, steps)


def bench_grpo(shape: dict, bench: dict, steps: int, warmup: int) -> None:
  g, n = bench["prompts"], bench["num_rollouts"]
  prompt_len, new, beta = bench["prompt_len"], bench["new_tokens"], bench["beta"]
  mesh = make_mesh()
  prompts = np.asarray(random_prompts(shape, g, prompt_len))  # the learner np.repeat()s each leaf
  config = model_config(shape)
  rewards = np.random.default_rng(0)

  def reward_fn(prompts, completions, **kwargs):  # random rewards, as ours (random rubric passes)
    del kwargs, prompts
    return list(rewards.random(len(completions)))

  def dataset():
    """One batch of `g` prompts per global step. The learner pulls the next batch when it starts
    a step, i.e. once the previous one is done: the time between two pulls is one step."""
    t0 = time.perf_counter()
    for _ in range(warmup):
      yield {"prompts": prompts}
    emit("ready", first_s=time.perf_counter() - t0)
    while next_command() == "run":
      times = []
      for _ in range(steps):
        t = time.perf_counter()
        yield {"prompts": prompts}
        times.append(time.perf_counter() - t)
      emit("result", steps=steps, seconds=sum(times), step_seconds=times)

  with mesh:
    actor = qwen3.Qwen3(config, rngs=nnx.Rngs(0))
    reference = qwen3.Qwen3(config, rngs=nnx.Rngs(0)) if beta > 0 else None
    # the same optimizer as ours (configs/grpo.py:paper): clipping, then Adam at 1e-5
    tx = optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(1e-5, weight_decay=0.0))
    cluster_config = rl_cluster_lib.ClusterConfig(
      role_to_mesh={role: mesh for role in rl_cluster_lib.Role},
      rollout_engine="vanilla",
      offload_to_cpu=False,
      training_config=rl_cluster_lib.RLTrainingConfig(
        actor_optimizer=tx,
        eval_every_n_steps=10**9,
        max_steps=10**9,
        pbar_description=None,
      ),
      rollout_config=base_rollout.RolloutConfig(
        max_tokens_to_generate=new,
        max_prompt_length=prompt_len,
        kv_cache_size=prompt_len + new,
        temperature=1.0,
        top_p=1.0,
        top_k=None,
        eos_tokens=[-1],
      ),
    )
    cluster = rl_cluster_lib.RLCluster(
      actor=actor, reference=reference, tokenizer=IdTokenizer(), cluster_config=cluster_config
    )
    algo = grpo_learner.GRPOConfig(num_generations=n, num_iterations=1, beta=beta)
    learner = grpo_learner.GRPOLearner(rl_cluster=cluster, algo_config=algo, reward_fns=reward_fn)
    learner.train(dataset())


def versions() -> dict:
  names = ("google-tunix", "jax", "jaxlib", "flax", "optax", "numpy")
  return {name: metadata.version(name) for name in names} | {"python": sys.version.split()[0]}


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--bench", choices=("sft", "sampler", "grpo"), required=True)
  parser.add_argument("--shape", required=True, help="the model shape, JSON")
  parser.add_argument("--config", required=True, help="the benchmark's sizes, JSON")
  parser.add_argument("--steps", type=int, default=3, help="timed steps per repeat")
  parser.add_argument(
    "--warmup", type=int, default=2, help="untimed steps first (the second can compile again)"
  )
  args = parser.parse_args()
  emit("info", versions=versions(), backend=jax.default_backend(), devices=len(jax.devices()))
  fn = {"sft": bench_sft, "sampler": bench_sampler, "grpo": bench_grpo}[args.bench]
  fn(json.loads(args.shape), json.loads(args.config), args.steps, args.warmup)


if __name__ == "__main__":
  main()
