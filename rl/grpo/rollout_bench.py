"""Rollout benchmarks (issue 7): the engine with the environment in the loop, cached decoding
against recomputing the prefix, and the sampler on the SFT benchmark's reference shape.

Every figure is wall-clock time on the machine it runs on, after a first run that compiles; the
process CPU time of the same runs is reported beside it (on a machine shared with other jobs the
wall time is the larger, and CPU time says what one free core would take).
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from tqdm import tqdm

import models
from compoworld.agents.agent import OracleAgent
from compoworld.agents.episode import run_episode
from compoworld.tasks.generate import generate_tasks
from compoworld.tasks.task import Task
from configs.sft import get_config as sft_config
from rl.data.chat import IM_END, SPECIAL_TOKENS, ChatRenderer, assistant_body
from rl.data.corpus import build_corpus
from rl.data.tokenizer import SentencePieceTokenizer
from rl.grpo.rollout import (
  RolloutConfig,
  RolloutEngine,
  append_ids,
  make_sampler,
  sample_turn,
  scripted_sampler,
)
from rl.sft.bench import reference_model_config


def timed(fn: Callable[[int], Any], repeats: int) -> tuple[float, float]:
  """Median wall and CPU seconds of `fn(i)` over `repeats` calls, after one (compiling) call."""
  jax.block_until_ready(fn(0))
  wall, cpu = [], []
  for i in range(1, repeats + 1):
    w, c = time.perf_counter(), time.process_time()
    jax.block_until_ready(fn(i))
    wall.append(time.perf_counter() - w)
    cpu.append(time.process_time() - c)
  return float(np.median(wall)), float(np.median(cpu))


def _random_prompts(config: models.ModelConfig, batch: int, length: int) -> jax.Array:
  rng = np.random.default_rng(0)
  return jnp.asarray(rng.integers(3, config.vocab_size, (batch, length)), jnp.int32)


def sampler_run(
  config: models.ModelConfig, batch: int, prompt_len: int, new_tokens: int
) -> Callable[[int], jax.Array]:
  """`run(seed)`: the engine's device path on random prompts, prefill, then one `sample_turn` of
  exactly `new_tokens` per row (no stop id) at temperature 1; returns the sampled ids [B, new]."""
  model = models.create_model(config, seed=0)
  graphdef, state = nnx.split(model)
  prompts_bt = _random_prompts(config, batch, prompt_len)
  sampler = make_sampler(1.0, 1.0, config.vocab_size)

  def run(seed):
    cache = models.Cache.zeros(config, batch, prompt_len + new_tokens)
    logits_bv = jnp.zeros((batch, config.vocab_size), jnp.float32)
    count_b = jnp.full((batch,), prompt_len, jnp.int32)
    cache, logits_bv = append_ids(graphdef, state, cache, logits_bv, prompts_bt, count_b)
    ids, *_ = sample_turn(
      graphdef, state, cache, logits_bv, jnp.full((batch,), new_tokens, jnp.int32),
      jnp.arange(batch, dtype=jnp.int32), jnp.zeros((batch,), jnp.int32), jax.random.key(seed),
      sampler=sampler, steps=new_tokens, stop_id=-1, temperature=1.0,
    )  # fmt: skip
    return ids

  return run


def sampler_throughput(
  config: models.ModelConfig, batch: int, prompt_len: int, new_tokens: int, repeats: int = 3
) -> dict[str, float]:
  """`sampler_run`'s tokens/s (sampled tokens) and per CPU second, median of `repeats`."""
  wall, cpu = timed(sampler_run(config, batch, prompt_len, new_tokens), repeats)
  tokens = batch * new_tokens
  return {
    "batch": batch,
    "prompt_len": prompt_len,
    "new_tokens": new_tokens,
    "seconds": wall,
    "cpu_seconds": cpu,
    "tokens_per_s": tokens / wall,
    "tokens_per_cpu_s": tokens / cpu,
  }


def recompute_throughput(
  config: models.ModelConfig, batch: int, prompt_len: int, new_tokens: int, repeats: int = 3
) -> dict[str, float]:
  """The same sampling without a cache: every step runs the whole sequence so far (padded to
  its final length, one compiled shape) through the model and samples after the last token."""
  model = models.create_model(config, seed=0)
  graphdef, state = nnx.split(model)
  prompts_bt = _random_prompts(config, batch, prompt_len)
  sampler = make_sampler(1.0, 1.0, config.vocab_size)
  total = prompt_len + new_tokens

  @jax.jit
  def run_jit(state, key):
    tokens_bt = jnp.zeros((batch, total), jnp.int32).at[:, :prompt_len].set(prompts_bt)
    rows_b = jnp.arange(batch, dtype=jnp.int32)
    keys_b = jax.vmap(jax.random.fold_in, in_axes=(None, 0))(key, rows_b)

    def step(i, carry):
      tokens_bt, state = carry
      position = prompt_len + i
      logits_btv = nnx.merge(graphdef, state)(tokens_bt)
      logits_bv = jax.lax.dynamic_index_in_dim(logits_btv, position - 1, axis=1, keepdims=False)
      key_b = jax.vmap(jax.random.fold_in, in_axes=(0, None))(keys_b, position)
      token_b = sampler(logits_bv, key_b, i, rows_b, jnp.zeros_like(rows_b))
      return tokens_bt.at[:, position].set(token_b), state

    tokens_bt, _ = jax.lax.fori_loop(0, new_tokens, step, (tokens_bt, state))
    return tokens_bt

  wall, cpu = timed(lambda seed: run_jit(state, jax.random.key(seed)), repeats)
  tokens = batch * new_tokens
  return {
    "seconds": wall,
    "cpu_seconds": cpu,
    "tokens_per_s": tokens / wall,
    "tokens_per_cpu_s": tokens / cpu,
  }


def oracle_sampler(renderer: ChatRenderer, tasks: Sequence[Task], num_rollouts: int):
  """A sampler that makes row g * N + i say what the oracle agent says on task g, turn by turn
  (the policy's text is scripted; the engine, caches and environment do their real work), and
  the longest turn in ids."""
  scripts = []
  for task in tasks:
    trajectory, _ = run_episode(OracleAgent(), task)
    turns = [
      renderer.encode_text(assistant_body(m) + IM_END)
      for m in trajectory.messages
      if m["role"] == "assistant"
    ]
    scripts += [turns] * num_rollouts
  longest = max(len(ids) for turns in scripts for ids in turns)
  return scripted_sampler(scripts, renderer.im_end_id), longest


def rollout_throughput(
  engine: RolloutEngine, tasks: Sequence[Task], seed: int = 0, repeats: int = 1
) -> dict[str, float]:
  """`engine.run` on `tasks` (after one compiling run): generated tokens/s, tool calls/s and the
  share of the wall time spent in the environment (tool calls, forks and verification)."""
  engine.run(tasks, seed=seed)
  results = []
  for i in range(repeats):
    w, c = time.perf_counter(), time.process_time()
    rollouts = engine.run(tasks, seed=seed + 1 + i)
    results.append((time.perf_counter() - w, time.process_time() - c, rollouts))
  wall, cpu, rollouts = sorted(results, key=lambda x: x[0])[len(results) // 2]
  generated = sum(r.generated_tokens for r in rollouts)
  total = sum(len(r.tokens) for r in rollouts)
  calls = sum(r.tool_calls for r in rollouts)
  env = sum(r.env_seconds for r in rollouts)
  return {
    "rollouts": len(rollouts),
    "seconds": wall,
    "cpu_seconds": cpu,
    "generated_tokens": generated,
    "context_tokens": total,  # prompts, generated ids and tool turns
    "generated_tokens_per_s": generated / wall,
    "context_tokens_per_s": total / wall,
    "tool_calls": calls,
    "tool_calls_per_s": calls / wall,
    "env_seconds": env,
    "env_share": env / wall,
    "mean_turns": float(np.mean([r.turns for r in rollouts])),
    "finished_rate": float(np.mean([r.finished for r in rollouts])),
    "pass_rate": float(np.mean([r.passed.all() for r in rollouts])),
  }


def tiny_setup(
  num_tasks: int, seed: int = 0
) -> tuple[list[Task], ChatRenderer, models.ModelConfig]:
  """Tasks, a trained tokenizer and the model shape of the tiny SFT config (configs/sft.py:tiny):
  two services, walks of three or four calls, a 2048-id SentencePiece, a two-layer hybrid."""
  c = sft_config("tiny")
  g = c.generate
  tasks, _ = generate_tasks(
    num_tasks,
    seed=seed,
    k=g.num_services,
    min_walk=g.min_walk,
    max_walk=g.max_walk,
    num_distractors=g.num_distractors,
  )
  corpus = build_corpus(tasks, progress=False)
  tokenizer = SentencePieceTokenizer.train(corpus, c.tokenizer.vocab_size, SPECIAL_TOKENS)
  overrides = c.model.overrides.to_dict()
  config = models.get_config(c.model.name, vocab_size=tokenizer.vocab_size, **overrides)
  return tasks, ChatRenderer(tokenizer), config


def run_benchmarks(
  *,
  num_tasks: int = 16,
  num_rollouts: int = 8,
  max_turns: int = 4,
  turn_tokens: int = 64,
  max_total_tokens: int = 4096,
  batch: int = 8,
  prompt_len: int = 64,
  new_tokens: int = 128,
  repeats: int = 3,
  moe_backend: str = "sort",
  seed: int = 0,
) -> dict[str, Any]:
  """Every figure of the rollout benchmark (see the module docstring), as one summary dict."""
  bar = tqdm(total=5, desc="bench_rollout", mininterval=0)
  tasks, renderer, tiny = tiny_setup(num_tasks, seed)
  model = models.create_model(tiny, seed=seed)  # random weights
  rollout_config = RolloutConfig(
    num_rollouts=num_rollouts,
    max_turns=max_turns,
    max_new_tokens_per_turn=turn_tokens,
    max_total_tokens=max_total_tokens,
  )
  sampled = rollout_throughput(RolloutEngine(model, renderer, rollout_config), tasks, seed)
  bar.update()
  sampler, longest = oracle_sampler(renderer, tasks, num_rollouts)
  scripted_config = dataclasses.replace(rollout_config, max_new_tokens_per_turn=longest)
  engine = RolloutEngine(model, renderer, scripted_config, sampler=sampler)
  scripted = rollout_throughput(engine, tasks, seed)
  bar.update()
  cached = sampler_throughput(tiny, batch, prompt_len, new_tokens, repeats)
  bar.update()
  recomputed = recompute_throughput(tiny, batch, prompt_len, new_tokens, repeats)
  bar.update()
  reference = sampler_throughput(
    reference_model_config(moe_backend=moe_backend), batch, prompt_len, new_tokens, repeats
  )
  bar.update()
  bar.close()
  return {
    "weights": "random (no trained checkpoint): sampled rollouts are noise, cut by the turn budget",
    "tiny_model": {"num_layers": tiny.num_layers, "vocab_size": tiny.vocab_size},
    "rollout_config": dataclasses.asdict(rollout_config),
    "rollout_sampled": sampled,
    "rollout_oracle_script": {
      **scripted,
      "note": "each rollout's text is the oracle agent's, forced through the engine (caches, "
      "parsing, forked environments, appends do their real work); same budgets",
    },
    "cache_vs_recompute": {
      "shape": {"batch": batch, "prompt_len": prompt_len, "new_tokens": new_tokens},
      "cached": cached,
      "recompute": recomputed,
      "speedup": recomputed["seconds"] / cached["seconds"],
    },
    "sampler_reference": {**reference, "moe_backend": moe_backend},
    "machine": {
      "backend": jax.default_backend(),
      "cpu_count": os.cpu_count(),
      "load_average_at_end": os.getloadavg(),
      "note": "shared with other jobs while measured: wall times are inflated; CPU times are "
      "the process's own",
    },
  }
