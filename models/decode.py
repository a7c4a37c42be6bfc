"""Cached decoding: prefill a batch of prompts of different lengths, then one token per step."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from models.model import Cache, Transformer


def prefill(
  model: Transformer, tokens_bt: jax.Array, lengths_b: jax.Array, max_len: int
) -> tuple[jax.Array, Cache]:
  """Runs right-padded prompts (row b: `lengths_b[b] >= 1` real tokens) into a fresh cache.

  Returns the logits after each row's last real token [B, V] and the cache; `max_len` bounds
  prompt plus generated tokens.
  """
  b, t = tokens_bt.shape
  if t > max_len:
    raise ValueError(f"prompt length {t} exceeds the cache length {max_len}")
  cache = Cache.zeros(model.config, b, max_len)
  valid_bt = jnp.arange(t)[None, :] < lengths_b[:, None]
  out = model.forward(tokens_bt, cache=cache, valid_bt=valid_bt)
  last_bv = jnp.take_along_axis(out.logits, (lengths_b - 1)[:, None, None], axis=1)[:, 0]
  return last_bv, out.cache


def decode_step(model: Transformer, tokens_b: jax.Array, cache: Cache) -> tuple[jax.Array, Cache]:
  """Appends one token per row; returns its logits [B, V] and the updated cache."""
  out = model.forward(tokens_b[:, None], cache=cache)
  return out.logits[:, 0], out.cache


@nnx.jit(static_argnames=("steps", "max_len"))
def greedy_generate(
  model: Transformer, tokens_bt: jax.Array, lengths_b: jax.Array, steps: int, max_len: int
) -> jax.Array:
  """`steps` greedy tokens per row after its prompt [B, steps], one compiled program."""
  logits_bv, cache = prefill(model, tokens_bt, lengths_b, max_len)
  graphdef, state = nnx.split(model)

  def step(carry, _):
    # The parameters ride in the carry: an NNX module cannot be closed over across trace levels.
    logits_bv, cache, state = carry
    next_b = jnp.argmax(logits_bv, axis=-1).astype(jnp.int32)
    logits_bv, cache = decode_step(nnx.merge(graphdef, state), next_b, cache)
    return (logits_bv, cache, state), next_b

  _, tokens_sb = jax.lax.scan(step, (logits_bv, cache, state), length=steps)
  return tokens_sb.T
