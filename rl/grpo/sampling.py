"""Samplers for the rollout engine: one token id per row from its logits, seeded per token.

A sampler is ``sampler(logits_bv, key_b, step, row_b, turn_b) -> token_b`` (`Sampler`):
temperature and top-p sampling by one uniform draw per row (`make_sampler`, `categorical`), or
scripted ids for tests (`scripted_sampler`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

#: sampler(logits_bv, key_b, step, row_b, turn_b) -> token_b int32. `logits_bv` are the raw
#: logits of each row's next token, `key_b` its per-token key, `step` the index of the token in
#: the turn, `row_b` the rollout's global index (group * N + index), `turn_b` its turn (0-based).
Sampler = Callable[[jax.Array, jax.Array, jax.Array, jax.Array, jax.Array], jax.Array]


def top_p_filter(z_bv: jax.Array, top_p: float) -> jax.Array:
  """Logits with everything outside the smallest set of mass >= top_p set to -inf."""
  sorted_bv = jnp.sort(z_bv, axis=-1)[:, ::-1]
  probs_bv = jax.nn.softmax(sorted_bv, axis=-1)
  # A token is kept while the mass strictly before it is below top_p (the first always is).
  before_bv = jnp.cumsum(probs_bv, axis=-1) - probs_bv
  kept_b = jnp.sum(before_bv < top_p, axis=-1)
  threshold_b = jnp.take_along_axis(sorted_bv, (kept_b - 1)[:, None], axis=-1)
  return jnp.where(z_bv >= threshold_b, z_bv, -jnp.inf)


#: Vocabulary entries per block of the two-level inverse CDF in `categorical`.
CDF_BLOCK = 128


def categorical(key_b: jax.Array, z_bv: jax.Array, block: int = CDF_BLOCK) -> jax.Array:
  """One id per row from softmax(z_bv), by inverting the CDF at one uniform draw per row.

  `jax.random.categorical` draws a Gumbel variable per vocabulary entry (V random numbers per
  token, the largest cost of a small model's decoding step on CPU); this draws one. The CDF is
  inverted in two levels: over the masses of blocks of `block` ids, then within the chosen
  block, so no prefix sum runs over the whole vocabulary (XLA's CPU cumsum over V is slower
  than the model's LM head)."""
  b, v = z_bv.shape
  n = -(-v // block)
  probs_bv = jax.nn.softmax(z_bv.astype(jnp.float32), axis=-1)
  probs_bnk = jnp.pad(probs_bv, ((0, 0), (0, n * block - v))).reshape(b, n, block)
  mass_bn = jnp.sum(probs_bnk, axis=-1)
  cdf_bn = jnp.cumsum(mass_bn, axis=-1)
  u_b = jax.vmap(jax.random.uniform)(key_b) * cdf_bn[:, -1]
  # The first block whose CDF passes u: it has mass > 0, and ids of probability 0 are never chosen.
  block_b = jnp.minimum(jnp.sum(cdf_bn <= u_b[:, None], axis=-1, dtype=jnp.int32), n - 1)

  def pick(values_bn):
    return jnp.take_along_axis(values_bn, block_b[:, None], axis=1)[:, 0]

  rest_b = u_b - (pick(cdf_bn) - pick(mass_bn))  # u's offset into the chosen block
  row_bk = jnp.take_along_axis(probs_bnk, block_b[:, None, None], axis=1)[:, 0]
  inner_b = jnp.sum(jnp.cumsum(row_bk, axis=-1) <= rest_b[:, None], axis=-1, dtype=jnp.int32)
  # Rounding can put u past the block's own prefix sum: then its last id of nonzero probability.
  last_b = block - 1 - jnp.argmax(row_bk[:, ::-1] > 0, axis=-1).astype(jnp.int32)
  return block_b * block + jnp.minimum(inner_b, last_b)


@functools.cache
def make_sampler(temperature: float, top_p: float = 1.0, vocab_limit: int | None = None) -> Sampler:
  """Temperature / top-p sampling; ids >= `vocab_limit` (model rows the tokenizer lacks) are
  never drawn."""

  def sample(logits_bv, key_b, step, row_b, turn_b):
    del step, row_b, turn_b
    z_bv = logits_bv.astype(jnp.float32) / temperature
    if vocab_limit is not None and vocab_limit < z_bv.shape[-1]:
      z_bv = jnp.where(jnp.arange(z_bv.shape[-1]) < vocab_limit, z_bv, -jnp.inf)
    if top_p < 1.0:
      z_bv = top_p_filter(z_bv, top_p)
    return categorical(key_b, z_bv)

  return sample


def scripted_sampler(scripts: Sequence[Sequence[Sequence[int]]], fill_id: int) -> Sampler:
  """A sampler that makes row r emit `scripts[r][t]` in its turn t whatever the logits (ids past
  a script's end are `fill_id`; a row past its last turn repeats it). The policy's text is
  fixed while the engine, caches and environments do their real work: tests and benchmarks."""
  turns = max(len(s) for s in scripts)
  longest = max(len(ids) for s in scripts for ids in s)
  table = np.full((len(scripts), turns, longest), fill_id, np.int32)
  for r, script in enumerate(scripts):
    for t, ids in enumerate(script):
      table[r, t, : len(ids)] = ids
  table_rtl = jnp.asarray(table)

  def sample(logits_bv, key_b, step, row_b, turn_b):
    del logits_bv, key_b
    return table_rtl[row_b, jnp.minimum(turn_b, turns - 1), jnp.minimum(step, longest - 1)]

  return sample
