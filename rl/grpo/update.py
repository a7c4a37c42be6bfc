"""The GRPO update (paper eq. 8): log-probabilities at the loss tokens only, the optimizer, and the
jitted, sharded step ``state, batch -> state, metrics`` (state donated) with its initial state and
batch placement on the mesh.
"""

from __future__ import annotations

from collections.abc import Mapping

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
from flax import nnx
from jax.sharding import NamedSharding, PartitionSpec

import models
from models import sharding
from rl import distributed
from rl.grpo.batches import ROW_KEYS
from rl.grpo.loss import GRPOLossConfig, grpo_loss, token_logp_and_entropy
from rl.sft import trainer as sft


def head_logp(
  h_bkd: jax.Array, head_dv: jax.Array, targets_bk: jax.Array, temperature: float, chunk: int = 0
) -> tuple[jax.Array, jax.Array]:
  """log softmax(h @ head / temperature)[targets] and the entropy, both [B, K].

  ``chunk`` > 0 sends `chunk` positions of every row through the head at a time, each piece
  rematerialized in the backward pass: memory holds one [B, chunk, V] piece, not [B, K, V]
  (needed at a real vocabulary), for one more head matmul.
  """

  def piece(h_bcd, targets_bc):
    logits_bcv = jnp.einsum("bcd,dv->bcv", h_bcd, head_dv, preferred_element_type=jnp.float32)
    logits_bcv = sharding.constrain(logits_bcv, ("act_batch", "act_seq", "act_vocab"))
    return token_logp_and_entropy(logits_bcv / temperature, targets_bc)

  b, k = targets_bk.shape
  if not chunk or chunk >= k:
    return piece(h_bkd, targets_bk)
  n = -(-k // chunk)
  pad = n * chunk - k
  h = jnp.pad(h_bkd, ((0, 0), (0, pad), (0, 0))).reshape(b, n, chunk, -1).swapaxes(0, 1)
  t = jnp.pad(targets_bk, ((0, 0), (0, pad))).reshape(b, n, chunk).swapaxes(0, 1)
  logp_nbc, entropy_nbc = jax.lax.map(jax.checkpoint(lambda x: piece(*x)), (h, t))

  def unchunk(x_nbc):
    return x_nbc.swapaxes(0, 1).reshape(b, n * chunk)[:, :k]

  return unchunk(logp_nbc), unchunk(entropy_nbc)


def policy_logp(
  model: models.Transformer,
  batch: Mapping[str, jax.Array],
  temperature: float,
  index_bk: jax.Array | None = None,
  head_chunk: int = 0,
) -> tuple[jax.Array, jax.Array, jax.Array]:
  """log pi(targets) and the entropy of the tempered policy at positions `index_bk` of each row
  ([B, K]; all L positions when None), and the MoE aux loss.

  As the rollout engine records them: ``log_softmax(logits / temperature)`` over the model's
  whole vocabulary, before any top-p filtering. Only the gathered positions go through the LM
  head (``head_logp``), so prompt and tool tokens never cost [V]-wide logits (under jit the
  model's own full logits are unused and never computed).
  """
  out = model.forward(
    batch["tokens"], positions_bt=batch["positions"], segment_ids_bt=batch["segment_ids"]
  )
  targets_bk = batch["targets"]
  if index_bk is not None:
    targets_bk = jnp.take_along_axis(targets_bk, index_bk, axis=1)
  if out.pointer is not None:  # the copy head's mixture: [B, K, V] at the gathered positions
    logits_bkv = out.logits if index_bk is None else model.logits_at(out, index_bk)
    logp_bk, entropy_bk = token_logp_and_entropy(logits_bkv / temperature, targets_bk)
  else:
    h_bkd = out.hidden
    if index_bk is not None:
      h_bkd = jnp.take_along_axis(h_bkd, index_bk[..., None], axis=1)
    head = model.head_weight()
    logp_bk, entropy_bk = head_logp(h_bkd, head, targets_bk, temperature, head_chunk)
  return logp_bk, entropy_bk, out.aux_loss


def gather_loss_tokens(batch: Mapping[str, jax.Array]) -> dict[str, jax.Array]:
  """``old_logp`` and ``loss_mask`` at the ``loss_index`` positions [B, K]; the padding of the
  index (past each row's count of loss tokens) is masked out."""
  index_bk = batch["loss_index"]
  count_b = jnp.sum(batch["loss_mask"], axis=-1)
  return {
    "old_logp": jnp.take_along_axis(batch["old_logp"], index_bk, axis=1),
    "loss_mask": jnp.arange(index_bk.shape[1])[None, :] < count_b[:, None],
  }


def make_optimizer(config: ml_collections.ConfigDict) -> optax.GradientTransformation:
  """Adam (the paper's) at a constant rate, after optional global-norm clipping."""
  o = config.optim
  adam = optax.adamw(o.lr, b1=o.b1, b2=o.b2, eps=o.eps, weight_decay=o.weight_decay)
  return optax.chain(optax.clip_by_global_norm(o.clip_norm), adam) if o.clip_norm > 0 else adam


def make_grpo_step(
  graphdef,
  tx,
  loss_config: GRPOLossConfig,
  *,
  temperature: float,
  num_minibatches: int = 1,
  aux_loss_coef: float = 0.0,
  head_chunk: int = 0,
):
  """``step(state, batch) -> (state, metrics)``; state = {step, params, rest, opt_state} plus
  ``ref_params`` (frozen) when ``loss_config.kl_coef > 0``.

  The batch (``ROW_KEYS`` and ``advantages`` [B]) is cut into ``num_minibatches``
  minibatches of rows i, i + n, i + 2n, ... (each keeps its spread over the batch shards), and each
  takes one optimizer step with the eq. 8 loss of its own rows: the first sees ratio 1, later ones
  the policy moved by the earlier ones. Metrics are means over minibatches (ratio_min / ratio_max:
  the extremes), with ``first_loss``, the loss of the first minibatch before any update.
  ``head_chunk``: see ``head_logp``.
  """
  use_ref = loss_config.kl_coef > 0

  def logp(params, rest, mb):
    model = nnx.merge(graphdef, params, rest)
    return policy_logp(model, mb, temperature, mb["loss_index"], head_chunk)

  def loss_fn(params, rest, mb, ref_logp_bk):
    logp_bk, entropy_bk, aux = logp(params, rest, mb)
    if not loss_config.entropy_coef:  # a metric only: no backward pass through [B, K, V]
      entropy_bk = jax.lax.stop_gradient(entropy_bk)
    loss_tokens = gather_loss_tokens(mb)
    loss, metrics = grpo_loss(
      logp_bk, loss_tokens["old_logp"], mb["advantages"], loss_tokens["loss_mask"], loss_config,
      ref_logp_bk, entropy_bk,
    )  # fmt: skip
    return loss + aux_loss_coef * aux, {**metrics, "aux_loss": aux}

  grad_fn = jax.grad(loss_fn, has_aux=True)

  def step(state, batch):
    def split(x):  # [B, ...] -> [n, B / n, ...]
      return x.reshape(x.shape[0] // num_minibatches, num_minibatches, *x.shape[1:]).swapaxes(0, 1)

    minibatches = {k: split(batch[k]) for k in (*ROW_KEYS, "advantages")}

    # Everything the body reads goes through the carry: NNX refuses variables captured from the
    # enclosing trace.
    def update(carry, mb):
      params, opt_state, rest, ref_params = carry
      ref_logp_bk = None
      if use_ref:
        ref_logp_bk = jax.lax.stop_gradient(logp(ref_params, rest, mb)[0])
      grads, metrics = grad_fn(params, rest, mb, ref_logp_bk)
      updates, opt_state = tx.update(grads, opt_state, params)
      metrics["grad_norm"] = optax.tree.norm(grads)
      return (optax.apply_updates(params, updates), opt_state, rest, ref_params), metrics

    carry = (state["params"], state["opt_state"], state["rest"], state.get("ref_params"))
    (params, opt_state, _, _), per_mb = jax.lax.scan(update, carry, minibatches)
    new_state = {**state, "step": state["step"] + 1, "params": params, "opt_state": opt_state}
    metrics = {k: jnp.mean(v) for k, v in per_mb.items()}
    metrics["ratio_min"] = jnp.min(per_mb["ratio_min"])
    metrics["ratio_max"] = jnp.max(per_mb["ratio_max"])
    metrics["first_loss"] = per_mb["loss"][0]
    return new_state, metrics

  return step


def init_state(model: models.Transformer, tx, mesh, *, keep_reference: bool):
  """``rl.sft.trainer.init_state``'s graph definition and state, plus a frozen copy of the parameters
  (``ref_params``, its own buffers: the state is donated) when a KL term needs the reference."""
  graphdef, state = sft.init_state(model, tx, mesh)
  if keep_reference:
    state["ref_params"] = jax.tree.map(jnp.copy, state["params"])
  return graphdef, state


def shard_batch(batch: Mapping[str, np.ndarray], advantages_b: np.ndarray, mesh) -> dict:
  """The update's inputs (the whole batch, the same on every process) as global arrays, rows
  split over the batch axes of `mesh`; each process passes on the rows its devices hold."""
  rows = NamedSharding(mesh, PartitionSpec(sft.BATCH_AXES, None))
  whole = {k: np.asarray(batch[k]) for k in ROW_KEYS}
  whole["advantages"] = np.asarray(advantages_b, np.float32)
  return distributed.global_batch(distributed.own_rows(whole, rows), rows, len(whole["advantages"]))
