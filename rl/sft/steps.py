"""The SFT step functions: the masked token loss, the optimizer and its schedule, and the jitted
train and eval steps (``rl.sft.trainer`` runs them; ``rl.sft.copying`` trains its rows with them too).

The loss is the cross-entropy of the agent's tokens only, summed and divided by the number of
loss tokens of the whole global batch, so gradient accumulation over micro-batches gives the
gradient of the big batch exactly.
"""

from __future__ import annotations

from collections.abc import Mapping

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
from flax import nnx

from models.copy_head import training_pointer
from models.layers import at_positions
from models.loss import copy_head_losses, head_eval, positions_to_score, weighted_head_losses
from rl.data.packing import BATCH_KEYS


def token_losses(
  logits_btv: jax.Array, targets_bt: jax.Array, loss_mask_bt: jax.Array
) -> tuple[jax.Array, jax.Array]:
  """Summed masked next-token NLL and the number of correct predictions, both scalars.

  A prediction is correct when the target's logit is the row's maximum (an argmax, ties counted
  as correct): a comparison with the max the softmax needs anyway, where XLA's CPU argmax over
  the vocabulary costs as much as the whole cross-entropy.
  """
  logits_btv = logits_btv.astype(jnp.float32)
  nll_bt = optax.softmax_cross_entropy_with_integer_labels(logits_btv, targets_bt)
  mask_bt = loss_mask_bt.astype(jnp.float32)
  target_bt = jnp.take_along_axis(logits_btv, targets_bt[..., None], axis=-1)[..., 0]
  correct_bt = (target_bt >= jnp.max(logits_btv, axis=-1)).astype(jnp.float32)
  return jnp.sum(nll_bt * mask_bt), jnp.sum(correct_bt * mask_bt)


def loss_weights(
  batch: Mapping[str, jax.Array], context_weight: float = 0.0, value_weight: float = 0.0
) -> jax.Array:
  """[B, T] float weights of the SFT objective: 1 on assistant tokens (``loss_mask``),
  ``context_weight`` on every other real token (system, user and tool turns; not padding), and
  ``value_weight`` more on the tokens of the argument values a call passes on (``value_mask``,
  `rl.decoding.arguments.value_tokens`: the copies a small policy gets wrong most).

  ``context_weight`` > 0 also teaches the model the environment's language (the tool outputs'
  JSON, ids and values it must later copy) from the ~8x more tokens around the assistant's; a
  model trained from scratch has no other source of it (OpenAI's fine-tuning API called this
  ``prompt_loss_weight``)."""
  mask = batch["loss_mask"].astype(jnp.float32)
  if context_weight < 0 or value_weight < 0:
    raise ValueError(f"weights must be >= 0, got {context_weight=} and {value_weight=}")
  if value_weight:
    mask = mask + value_weight * batch["value_mask"].astype(jnp.float32)
  if not context_weight:
    return mask
  real = (batch["segment_ids"] > 0).astype(jnp.float32)
  return mask + context_weight * real * (batch["loss_mask"] == 0)


def turn_matches(correct_bt: np.ndarray, loss_mask_bt: np.ndarray) -> tuple[int, int]:
  """(turns reproduced, turns): a turn is a run of loss tokens (one assistant message and its
  ``<|im_end|>``); it is reproduced when every one of its targets is the argmax, i.e. greedy
  decoding from the oracle's history writes it token for token. A run cut by the row's end is
  not counted."""
  mask = np.asarray(loss_mask_bt) > 0
  wrong = (~np.asarray(correct_bt, bool)) & mask
  matched = turns = 0
  for m_t, w_t in zip(mask, wrong, strict=True):
    edges = np.diff(np.concatenate([[0], m_t.astype(np.int8), [0]]))
    starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    keep = ends < len(m_t)  # the run ends inside the row
    errors = np.add.reduceat(w_t, starts)[keep] if len(starts) else np.zeros(0)
    turns += int(keep.sum())
    matched += int((errors == 0).sum())
  return matched, turns


def _forward(graphdef, params, rest, batch: Mapping[str, jax.Array]):
  """The merged model and its forward pass on a packed batch."""
  model = nnx.merge(graphdef, params, rest)
  out = model.forward(
    batch["tokens"], positions_bt=batch["positions"], segment_ids_bt=batch["segment_ids"]
  )
  return model, out


def weighted_positions(batch: Mapping[str, np.ndarray], context_weight: float = 0.0) -> int:
  """The most positions of non-zero SFT weight (`loss_weights`) any row of a host batch holds:
  a step that scores K positions a row (``loss_positions``) takes the batch whole when this is
  at most K."""
  weighted = np.asarray(batch["loss_mask"]) > 0
  if context_weight:
    weighted |= np.asarray(batch["segment_ids"]) > 0
  return int(weighted.sum(axis=1).max(initial=0))


def _losses(
  graphdef,
  params,
  rest,
  batch,
  loss_chunk: int,
  context_weight: float = 0.0,
  loss_positions: int = 0,
  value_weight: float = 0.0,
  copy_weight: float = 0.0,
):
  """(weighted NLL objective, summed NLL on the loss mask, correct count, MoE aux loss) of a
  batch; `loss_chunk` < 0: from full logits. `loss_positions` K > 0: the LM head and the copy
  head's queries run only at each row's first K positions of non-zero weight
  (`models.loss.positions_to_score`), the same loss while no row holds more (`weighted_positions`).
  `copy_weight` > 0 (a model with a copy head): the argument values' tokens (``value_mask``)
  that stand earlier in the row are also scored by the pointer path alone
  (`models.loss.copy_head_losses`)."""
  model, out = _forward(graphdef, params, rest, batch)
  targets, mask = batch["targets"], batch["loss_mask"]
  weight = loss_weights(batch, context_weight, value_weight)
  copy = copy_weight * batch["value_mask"].astype(jnp.float32) if copy_weight else None
  hidden, pointer = out.hidden, out.pointer
  if copy is not None and (pointer is None or loss_chunk < 0):
    raise ValueError(
      "copy_weight needs a model with a copy head and the fused loss (loss_chunk >= 0)"
    )
  if loss_positions and loss_chunk >= 0:
    index = positions_to_score(weight, loss_positions)
    if pointer is not None:
      pointer = training_pointer(
        model.copy_head, hidden, batch["tokens"], batch["segment_ids"], query_index_bk=index
      )
    hidden, targets, mask, weight = (
      at_positions(x, index) for x in (hidden, targets, mask, weight)
    )
    copy = None if copy is None else at_positions(copy, index)
  if loss_chunk < 0:
    nll_sum, correct = token_losses(out.logits, targets, mask)
    weighted = context_weight or value_weight
    objective = token_losses(out.logits, targets, weight)[0] if weighted else nll_sum
  elif pointer is not None:
    objective, nll_sum, correct = copy_head_losses(
      hidden, model.head_weight(), pointer, targets, weight, mask, loss_chunk or None, copy
    )
  else:
    objective, nll_sum, correct = weighted_head_losses(
      hidden, model.head_weight(), targets, weight, mask, loss_chunk or None
    )
  return objective, nll_sum, correct, out.aux_loss


def make_optimizer(config: ml_collections.ConfigDict, total_steps: int):
  """AdamW with linear warmup and cosine decay to ``min_lr_ratio * lr``, after global-norm
  clipping; returns the transformation and its schedule."""
  o = config.optim
  warmup = o.warmup_steps if o.warmup_steps >= 0 else int(o.warmup_ratio * total_steps)
  warmup = min(warmup, max(total_steps - 1, 0))
  schedule = optax.warmup_cosine_decay_schedule(
    init_value=0.0 if warmup else o.lr,
    peak_value=o.lr,
    warmup_steps=warmup,
    decay_steps=max(total_steps, warmup + 1),
    end_value=o.lr * o.min_lr_ratio,
  )
  tx = optax.chain(
    optax.clip_by_global_norm(o.clip_norm),
    optax.adamw(schedule, b1=o.b1, b2=o.b2, eps=o.eps, weight_decay=o.weight_decay),
  )
  return tx, schedule


def make_train_step(
  graphdef,
  tx,
  schedule,
  *,
  grad_accum: int,
  aux_loss_coef: float,
  loss_chunk: int = 0,
  context_weight: float = 0.0,
  loss_positions: int = 0,
  value_weight: float = 0.0,
  copy_weight: float = 0.0,
):
  """``step(state, batch) -> (state, metrics)``; state = {step, params, rest, opt_state}.

  The batch [B, T] is cut into ``grad_accum`` micro-batches of B / grad_accum rows (rows
  i, i + n, i + 2n, ... so each keeps its spread over the batch shards). Every micro-batch's summed
  NLL is divided by the loss tokens of the whole batch, so the accumulated gradient is that of the
  single big batch. The MoE load-balancing loss is a per-micro-batch mean, averaged.
  `loss_chunk`: time steps per chunk of the fused head loss (0: automatic, -1: full logits).
  With a copy head the fused loss is `models.loss.copy_head_losses`, whose reported accuracy
  counts the targets of probability > 1/2 (a lower bound of the argmax's).
  `context_weight`: the objective's weight on non-assistant tokens (``loss_weights``); the
  reported loss and accuracy stay those of the assistant tokens; `value_weight`: the weight
  added on the argument values' tokens (``loss_weights``), likewise; `copy_weight`: the weight
  of those tokens' pointer-path NLL (`_losses`), added to the objective likewise.
  `loss_positions` K > 0: the heads score K positions a row (`_losses`); the caller gives this
  step only batches whose rows hold at most K weighted positions (`weighted_positions`).
  """

  def micro_loss(params, rest, micro, n_weight):
    objective, nll_sum, correct, aux = _losses(
      graphdef,
      params,
      rest,
      micro,
      loss_chunk,
      context_weight,
      loss_positions,
      value_weight,
      copy_weight,
    )
    loss = objective / n_weight + aux_loss_coef * aux / grad_accum
    return loss, (nll_sum, correct, aux)

  grad_fn = jax.grad(micro_loss, has_aux=True)

  def step(state, batch):
    params, rest = state["params"], state["rest"]
    n_loss = jnp.maximum(jnp.sum(batch["loss_mask"]), 1).astype(jnp.float32)
    n_weight = jnp.maximum(jnp.sum(loss_weights(batch, context_weight, value_weight)), 1e-6)

    def split(x_bt):  # [B, T] -> [n, B / n, T]
      b = x_bt.shape[0]
      return x_bt.reshape(b // grad_accum, grad_accum, *x_bt.shape[1:]).swapaxes(0, 1)

    micro_batches = {k: split(batch[k]) for k in BATCH_KEYS}

    def accumulate(grads, micro):
      g, stats = grad_fn(params, rest, micro, n_weight)
      return jax.tree.map(jnp.add, grads, g), stats

    zeros = jax.tree.map(jnp.zeros_like, params)
    grads, (nll, correct, aux) = jax.lax.scan(accumulate, zeros, micro_batches)
    updates, opt_state = tx.update(grads, state["opt_state"], params)
    new_state = {
      "step": state["step"] + 1,
      "params": optax.apply_updates(params, updates),
      "rest": rest,
      "opt_state": opt_state,
    }
    metrics = {
      "loss": jnp.sum(nll) / n_loss,
      "accuracy": jnp.sum(correct) / n_loss,
      "aux_loss": jnp.mean(aux),
      "grad_norm": optax.tree.norm(grads),
      "lr": schedule(state["step"]),
      "loss_tokens": n_loss,
      "tokens": jnp.sum(batch["segment_ids"] > 0).astype(jnp.float32),
    }
    return new_state, metrics

  return step


def make_eval_step(graphdef, loss_chunk: int = 0):
  """``eval(state, batch) -> (summed NLL, correct, loss tokens, per-token correct [B, T])``."""

  def evaluate(state, batch):
    model, out = _forward(graphdef, state["params"], state["rest"], batch)
    targets, mask = batch["targets"], batch["loss_mask"]
    # A copy head's argmax is over its whole mixture: the logits path.
    if loss_chunk < 0 or out.pointer is not None:
      logits = out.logits.astype(jnp.float32)
      nll_sum = token_losses(logits, targets, mask)[0]
      target = jnp.take_along_axis(logits, targets[..., None], axis=-1)[..., 0]
      correct_bt = target >= jnp.max(logits, axis=-1)
    else:
      head = model.head_weight()
      nll_sum, correct_bt = head_eval(out.hidden, head, targets, mask, loss_chunk or None)
    correct = jnp.sum(jnp.where(correct_bt, mask, 0)).astype(jnp.float32)
    return nll_sum, correct, jnp.sum(mask).astype(jnp.float32), correct_bt

  return evaluate
