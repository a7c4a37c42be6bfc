"""One assistant turn of every row of a rollout batch, sampled on the device in one call
(`sample_turn`): a ``lax.while_loop`` that samples and feeds one token per row until each row
has closed its turn or spent its budget, with the decoding constraints on the host called back
after every step (`rl.grpo.rollout` plays the batch, turn after turn)."""

from __future__ import annotations

import functools
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax.experimental import io_callback

from models.decode import forward_unrolled, roll_cache, unroll, unroll_cache
from models.model import Cache
from models.moe import decode_dense
from rl.grpo.sampling import Sampler

#: advance(token_b, active_b, step) -> bool [B, V]: a host function that feeds each active row's
#: sampled id to its decoding constraint and returns the ids each row may sample next.
Advance = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]
#: check(token_b, active_b, step) -> (ok_b bool [B], mask_bv bool [B, V]): a host function that
#: says which active rows' draws their constraint keeps, and for the others the ids it allows.
Check = Callable[[np.ndarray, np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]


@functools.partial(
  jax.jit,
  static_argnames=("graphdef", "sampler", "steps", "stop_id", "temperature", "advance", "check"),
)
def sample_turn(
  graphdef, state, cache: Cache, logits_bv, budget_b, row_b, turn_b, key, mask_bv=None, *,
  sampler: Sampler, steps: int, stop_id: int, temperature: float, advance: Advance | None = None,
  check: Check | None = None,
):  # fmt: skip
  """One assistant turn per row: up to `budget_b[b]` (<= `steps`) sampled ids, stopping after
  `stop_id`. Every sampled id is fed to the cache; done rows stop changing it and the loop ends
  when all rows are done. Returns ids [B, steps], their log-probs under softmax(logits /
  temperature) [B, steps], counts [B], the cache and the last logits.

  With `advance` (and `mask_bv`, the ids each row may sample first), each id is sampled among
  the ids the mask allows, and `advance` is called back on the host after every step for the
  next mask: constrained decoding inside the loop. The log-probs recorded are still those of
  the unconstrained model (what the GRPO trainer recomputes).

  With `check` too, the masks are proposals (supersets of what each row's constraint allows,
  `ArgumentConstraint.proposal`): each draw is checked on the host, and a row whose draw the
  constraint rejects draws again, under the mask `check` returns, with a key of its own. A
  proposal that is kept, or else a draw under the whole mask, is a draw from the allowed ids
  (rejection sampling), and a check costs one token's walk where a whole mask costs every
  token's."""
  b = budget_b.shape[0]
  row_keys = jax.vmap(jax.random.fold_in, in_axes=(None, 0))(key, row_b)
  model = nnx.merge(graphdef, state)
  config = model.config
  # Layers unrolled for the loop: each owns its weights and cache, updated in place.
  weights = unroll(model, dense_experts=decode_dense(config, b))

  def cond(carry):
    i, _, _, _, active_b, *_ = carry
    return (i < steps) & jnp.any(active_b)

  def body(carry):
    i, caches, lengths_b, logits_bv, active_b, ids_bs, logp_bs, mask_bv = carry
    key_b = jax.vmap(jax.random.fold_in)(row_keys, lengths_b)  # one key per position
    allowed_bv = logits_bv if mask_bv is None else jnp.where(mask_bv, logits_bv, -jnp.inf)
    token_b = sampler(allowed_bv, key_b, i, row_b, turn_b)
    if check is not None:
      shapes = (
        jax.ShapeDtypeStruct((b,), jnp.bool_),
        jax.ShapeDtypeStruct(mask_bv.shape, jnp.bool_),
      )
      kept_b, whole_bv = io_callback(check, shapes, token_b, active_b, i)
      again_b = jax.vmap(jax.random.fold_in, in_axes=(0, None))(key_b, 1)
      redrawn_b = sampler(jnp.where(whole_bv, logits_bv, -jnp.inf), again_b, i, row_b, turn_b)
      token_b = jnp.where(kept_b, token_b, redrawn_b)
    logp_bv = jax.nn.log_softmax(logits_bv.astype(jnp.float32) / temperature, axis=-1)
    logp_b = jnp.take_along_axis(logp_bv, token_b[:, None], axis=1)[:, 0]
    ids_bs = ids_bs.at[:, i].set(jnp.where(active_b, token_b, 0))
    logp_bs = logp_bs.at[:, i].set(jnp.where(active_b, logp_b, 0.0))
    logits_btv, caches, lengths_b = forward_unrolled(
      config, weights, token_b[:, None], caches, lengths_b, active_b[:, None]
    )
    ended_b = (token_b == stop_id) | (i + 1 >= budget_b)
    if mask_bv is not None:
      shape = jax.ShapeDtypeStruct(mask_bv.shape, jnp.bool_)
      mask_bv = io_callback(advance, shape, token_b, active_b & ~ended_b, i)
    return i + 1, caches, lengths_b, logits_btv[:, 0], active_b & ~ended_b, ids_bs, logp_bs, mask_bv

  if (mask_bv is None) != (advance is None):
    raise ValueError("sample_turn: a mask needs an advance callback, and the other way round")
  if check is not None and advance is None:
    raise ValueError("sample_turn: a check needs a mask and an advance callback")
  init = (
    jnp.int32(0),
    unroll_cache(cache),
    cache.lengths_b,
    logits_bv,
    budget_b > 0,
    jnp.zeros((b, steps), jnp.int32),
    jnp.zeros((b, steps), jnp.float32),
    mask_bv,
  )
  _, caches, lengths_b, logits_bv, _, ids_bs, logp_bs, _ = jax.lax.while_loop(cond, body, init)
  new_cache = roll_cache(cache, caches, lengths_b)
  return ids_bs, logp_bs, lengths_b - cache.lengths_b, new_cache, logits_bv
