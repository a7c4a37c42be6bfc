"""The language-model training loss: next-token cross-entropy plus the MoE balancing term, with
the LM head fused into the cross-entropy in chunks so the [B, T, V] logits never exist."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from models.copy_head import Pointer, target_logp
from models.model import Transformer

#: Tokens per chunk of the fused LM-head loss (`head_losses`): 8K-vocabulary logits of 256
#: tokens (8 MiB) stay in cache, and per-chunk overhead is still small.
LOSS_CHUNK_TOKENS = 256


def _head_chunk(h_bcd, head_dv, targets_bc):
  """One chunk's float32 logits, the target one-hot, log-sum-exp, target logit and max."""
  logits = jnp.einsum("bcd,dv->bcv", h_bcd, head_dv, preferred_element_type=jnp.float32)
  # A one-hot compare, not a gather: it keeps a vocabulary split over devices local.
  onehot = jnp.arange(logits.shape[-1], dtype=jnp.int32) == targets_bc[..., None]
  max_bc = jnp.max(logits, axis=-1)
  lse_bc = max_bc + jnp.log(jnp.sum(jnp.exp(logits - max_bc[..., None]), axis=-1))
  target_bc = jnp.sum(jnp.where(onehot, logits, 0.0), axis=-1)
  return logits, onehot, lse_bc, target_bc, max_bc


def _time_chunks(x_bt, chunk):  # [B, T, ...] -> [T / chunk, B, chunk, ...]
  b, t = x_bt.shape[:2]
  return jnp.moveaxis(x_bt.reshape(b, t // chunk, chunk, *x_bt.shape[2:]), 1, 0)


def _head_scan(h_btd, head_dv, targets_bt, weight_bt2, chunk, with_grads):
  # weight_bt2[..., 0] weighs the objective (and its gradients), weight_bt2[..., 1] the
  # reported NLL and correct count.
  def body(carry, xs):
    nll2, correct, d_head = carry
    h_bcd, targets_bc, weight_bc2 = xs
    logits, onehot, lse_bc, target_bc, max_bc = _head_chunk(h_bcd, head_dv, targets_bc)
    nll2 = nll2 + jnp.sum((lse_bc - target_bc)[..., None] * weight_bc2, axis=(0, 1))
    correct = correct + jnp.sum(jnp.where(target_bc >= max_bc, weight_bc2[..., 1], 0.0))
    if not with_grads:
      return (nll2, correct, d_head), None
    # d(sum_w NLL) / d logits = w (softmax - onehot): both gradients now, while the chunk's
    # logits are at hand, so the backward pass only scales them.
    d_logits = (jnp.exp(logits - lse_bc[..., None]) - onehot) * weight_bc2[..., 0, None]
    d_logits = d_logits.astype(h_bcd.dtype)
    d_h = jnp.einsum("bcv,dv->bcd", d_logits, head_dv, preferred_element_type=jnp.float32)
    d_head = d_head + jnp.einsum("bcd,bcv->dv", h_bcd, d_logits, preferred_element_type=jnp.float32)
    return (nll2, correct, d_head), d_h.astype(h_bcd.dtype)

  zero = jnp.zeros((), jnp.float32)
  d_head = jnp.zeros(head_dv.shape, jnp.float32) if with_grads else zero
  xs = tuple(_time_chunks(x, chunk) for x in (h_btd, targets_bt, weight_bt2))
  (nll2, correct, d_head), d_h = jax.lax.scan(body, (jnp.zeros(2), zero, d_head), xs)
  if not with_grads:
    return nll2[0], nll2[1], correct
  d_h_btd = jnp.moveaxis(d_h, 0, 1).reshape(h_btd.shape)
  return (nll2[0], nll2[1], correct), (d_h_btd, d_head.astype(head_dv.dtype))


@functools.partial(jax.custom_vjp, nondiff_argnums=(4,))
def _fused_head_losses(h_btd, head_dv, targets_bt, weight_bt2, chunk):
  return _head_scan(h_btd, head_dv, targets_bt, weight_bt2, chunk, with_grads=False)


def _fused_head_fwd(h_btd, head_dv, targets_bt, weight_bt2, chunk):
  return _head_scan(h_btd, head_dv, targets_bt, weight_bt2, chunk, with_grads=True)


def _fused_head_bwd(chunk, grads, cotangents):
  del chunk
  d_h_btd, d_head = grads
  scale = cotangents[0]  # the objective's; the reported NLL and correct count have no gradient
  return (scale * d_h_btd).astype(d_h_btd.dtype), (scale * d_head).astype(d_head.dtype), None, None


_fused_head_losses.defvjp(_fused_head_fwd, _fused_head_bwd)


def loss_chunk_length(seq_len: int, rows: int, tokens: int = LOSS_CHUNK_TOKENS) -> int:
  """Time steps per chunk of the fused head loss: about `tokens` tokens of `rows` rows at a
  time, a divisor of `seq_len`."""
  chunk = max(1, min(seq_len, tokens // max(rows, 1)))
  while seq_len % chunk:
    chunk -= 1
  return chunk


def _checked_chunk(shape: tuple[int, int], chunk: int | None) -> int:
  """`chunk` (default `loss_chunk_length`) for targets of `shape` [B, T]; it must divide T."""
  b, t = shape
  chunk = chunk or loss_chunk_length(t, b)
  if t % chunk:
    raise ValueError(f"loss chunk {chunk} does not divide the {t} time steps")
  return chunk


def head_losses(
  hidden_btd: jax.Array,
  head_dv: jax.Array,
  targets_bt: jax.Array,
  loss_mask_bt: jax.Array,
  chunk: int | None = None,
) -> tuple[jax.Array, jax.Array]:
  """``token_losses(hidden @ head, targets, mask)`` without ever holding the [B, T, V] logits.

  The LM head and the cross-entropy run fused, `chunk` time steps of every row at a time
  (default: `loss_chunk_length`); under differentiation the same pass also forms both
  gradients (d hidden and d head), which the backward pass only scales, so the head costs
  three matmuls and one softmax over the vocabulary, as unfused, in cache-sized pieces.
  Differentiable in `hidden_btd` and `head_dv` (reverse mode, the summed NLL only).
  """
  objective, _, correct = weighted_head_losses(
    hidden_btd, head_dv, targets_bt, loss_mask_bt, loss_mask_bt, chunk
  )
  return objective, correct


def weighted_head_losses(
  hidden_btd: jax.Array,
  head_dv: jax.Array,
  targets_bt: jax.Array,
  weight_bt: jax.Array,
  loss_mask_bt: jax.Array,
  chunk: int | None = None,
) -> tuple[jax.Array, jax.Array, jax.Array]:
  """(sum of ``weight``-weighted NLL, summed NLL on ``loss_mask``, correct count on it), fused
  as ``head_losses``. Only the first is differentiable (reverse mode): the others are what a
  trainer reports when it weighs more tokens than it scores (``loss_weights``)."""
  chunk = _checked_chunk(targets_bt.shape, chunk)
  weight_bt2 = jnp.stack([weight_bt, loss_mask_bt], axis=-1).astype(jnp.float32)
  return _fused_head_losses(hidden_btd, head_dv, targets_bt.astype(jnp.int32), weight_bt2, chunk)


def _head_token_stats(hidden_btd, head_dv, targets_bt, chunk):
  """Each target's NLL under softmax(hidden @ head) and whether it is the argmax (ties
  counted), both [B, T], one chunk of time steps at a time."""
  b, t = targets_bt.shape

  def body(_, xs):
    h_bcd, targets_bc = xs
    _, _, lse_bc, target_bc, max_bc = _head_chunk(h_bcd, head_dv, targets_bc)
    return None, (lse_bc - target_bc, target_bc >= max_bc)

  xs = tuple(_time_chunks(x, chunk) for x in (hidden_btd, targets_bt.astype(jnp.int32)))
  _, (nll_nbc, correct_nbc) = jax.lax.scan(body, None, xs)
  return tuple(jnp.moveaxis(x, 0, 1).reshape(b, t) for x in (nll_nbc, correct_nbc))


def head_eval(
  hidden_btd: jax.Array,
  head_dv: jax.Array,
  targets_bt: jax.Array,
  loss_mask_bt: jax.Array,
  chunk: int | None = None,
) -> tuple[jax.Array, jax.Array]:
  """(summed NLL on ``loss_mask``, [B, T] bool: whether each target is the argmax of its
  logits, ties counted) in one chunked pass of the head, as ``head_losses`` runs it, so the
  [B, T, V] logits never exist. For evaluation: not differentiable through the custom rule."""
  chunk = _checked_chunk(targets_bt.shape, chunk)
  nll_bt, correct_bt = _head_token_stats(hidden_btd, head_dv, targets_bt, chunk)
  return jnp.sum(nll_bt * loss_mask_bt.astype(jnp.float32)), correct_bt


def positions_to_score(weight_bt: jax.Array, k: int) -> jax.Array:
  """[B, K] int32: each row's positions of non-zero weight in order, then zero-weight positions
  to fill K. A loss that gathers its inputs at these (`models.layers.at_positions`) runs the LM
  head and the copy head's queries on K positions a row instead of T, and loses nothing while no
  row holds more than K weighted positions (`rl.sft.steps.weighted_positions`)."""
  return jnp.argsort(weight_bt == 0, axis=1, stable=True)[:, :k].astype(jnp.int32)


def copy_head_losses(
  hidden_btd: jax.Array,
  head_dv: jax.Array,
  pointer: Pointer,
  targets_bt: jax.Array,
  weight_bt: jax.Array,
  loss_mask_bt: jax.Array,
  chunk: int | None = None,
  copy_weight_bt: jax.Array | None = None,
) -> tuple[jax.Array, jax.Array, jax.Array]:
  """``weighted_head_losses`` for a model with a copy head (`models.copy_head`): the NLL of the
  mixture, still without the [B, T, V] logits.

  The LM head's per-token NLL n is taken first (a chunked pass, no gradient); with the mixture's
  log p = logaddexp(log(1 - g) - n, log g + log copy), d(-log p) / dn is r = (1 - g) e^-n / p,
  so the LM head's gradient is the fused head loss's with weights w r, and the pointer's and
  the gate's come from log p with n held fixed. The correct count is of targets with p > 1/2
  (each surely the argmax): a lower bound of the greedy accuracy, for the training log only;
  evaluation takes the argmax of the full mixture.

  ``copy_weight_bt`` c adds sum c * -log(g copy(target)) over the targets some earlier position
  is followed by: the pointer path alone is asked to explain them (gate open, mass on the
  target), so a copy is learnt by the pointer even where the LM head could have memorised it.
  """
  chunk = _checked_chunk(targets_bt.shape, chunk)
  sg = jax.lax.stop_gradient
  nll_bt, _ = _head_token_stats(sg(hidden_btd), sg(head_dv), targets_bt, chunk)
  logp_bt, lm_bt, pointer_bt = target_logp(-nll_bt, pointer, targets_bt.astype(jnp.int32))
  weight_bt = weight_bt.astype(jnp.float32)
  resp_bt = sg(jnp.exp(jnp.minimum(lm_bt - logp_bt, 0.0)))  # r, at most 1
  surrogate, _, _ = weighted_head_losses(
    hidden_btd, head_dv, targets_bt, weight_bt * resp_bt, weight_bt * resp_bt, chunk
  )
  objective = jnp.sum(weight_bt * -logp_bt) + surrogate - sg(surrogate)
  if copy_weight_bt is not None:  # 0 where no earlier position is followed by the target
    copy_nll_bt = -jnp.where(jnp.isfinite(pointer_bt), pointer_bt, 0.0)
    objective += jnp.sum(copy_weight_bt.astype(jnp.float32) * copy_nll_bt)
  mask_bt = loss_mask_bt.astype(jnp.float32)
  correct = jnp.sum(jnp.where(logp_bt > jnp.log(0.5), mask_bt, 0.0))
  return objective, jnp.sum(mask_bt * -logp_bt), correct


def lm_loss(
  model: Transformer,
  tokens_bt: jax.Array,
  *,
  segment_ids_bt: jax.Array | None = None,
  positions_bt: jax.Array | None = None,
  loss_mask_bt: jax.Array | None = None,
  chunk: int | None = None,
) -> tuple[jax.Array, dict[str, jax.Array]]:
  """Mean cross-entropy of each next token that is in the same segment and unmasked, plus
  `router_aux_loss_coef` times the load-balancing loss. Returns (loss, metrics). The head runs
  fused with the cross-entropy (`weighted_head_losses`, `chunk` time steps at a time), so the
  [B, T, V] float32 logits are never held whole."""
  out = model.forward(tokens_bt, segment_ids_bt=segment_ids_bt, positions_bt=positions_bt)
  weight_bt = jnp.ones(tokens_bt[:, 1:].shape, jnp.float32)
  if segment_ids_bt is not None:  # no target across a packing boundary
    weight_bt *= segment_ids_bt[:, 1:] == segment_ids_bt[:, :-1]
  if loss_mask_bt is not None:
    weight_bt *= loss_mask_bt[:, 1:]
  # The last position predicts nothing: pad it with weight 0, so T stays whole for the chunks.
  targets_bt = jnp.pad(tokens_bt[:, 1:], ((0, 0), (0, 1)))
  weight_bt = jnp.pad(weight_bt, ((0, 0), (0, 1)))
  nll, _, _ = weighted_head_losses(
    out.hidden, model.head_weight(), targets_bt, weight_bt, weight_bt, chunk
  )
  ce = nll / jnp.maximum(jnp.sum(weight_bt), 1.0)
  loss = ce + model.config.router_aux_loss_coef * out.aux_loss
  return loss, {"ce": ce, "aux_loss": out.aux_loss, "expert_load": out.expert_load}
