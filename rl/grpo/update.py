"""The GRPO update (paper eq. 8): log-probabilities at the loss tokens only, the optimizer, and the
jitted, sharded step ``state, batch -> state, metrics`` (state donated) with its initial state and
batch placement on the mesh; or, with micro-batches (``MicroStep``), the same update as gradients
of fixed-size row chunks added up on the device, so batches of any number of rows run one
compiled program.
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


def _loss_terms(graphdef, loss_config: GRPOLossConfig, temperature: float, head_chunk: int):
  """``logp(params, rest, mb)`` (``policy_logp`` at the loss positions) and ``loss(params, rest,
  mb, ref_logp_bk) -> (eq. 8 loss, MoE aux loss, metrics)`` of one minibatch."""

  def logp(params, rest, mb):
    model = nnx.merge(graphdef, params, rest)
    return policy_logp(model, mb, temperature, mb["loss_index"], head_chunk)

  def loss(params, rest, mb, ref_logp_bk):
    logp_bk, entropy_bk, aux = logp(params, rest, mb)
    if not loss_config.entropy_coef:  # a metric only: no backward pass through [B, K, V]
      entropy_bk = jax.lax.stop_gradient(entropy_bk)
    loss_tokens = gather_loss_tokens(mb)
    value, metrics = grpo_loss(
      logp_bk, loss_tokens["old_logp"], mb["advantages"], loss_tokens["loss_mask"], loss_config,
      ref_logp_bk, entropy_bk,
    )  # fmt: skip
    return value, aux, {**metrics, "aux_loss": aux}

  return logp, loss


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
  logp, policy_loss = _loss_terms(graphdef, loss_config, temperature, head_chunk)

  def loss_fn(params, rest, mb, ref_logp_bk):
    loss, aux, metrics = policy_loss(params, rest, mb, ref_logp_bk)
    return loss + aux_loss_coef * aux, metrics

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


def loss_weights(loss_mask_b: np.ndarray, chunks: int, aggregation: str) -> np.ndarray:
  """Weights [chunks] under which the chunks' own losses (``grpo_loss`` of their rows alone) add
  up to the loss of all their rows: each chunk's share of the loss's denominator, its loss
  tokens (``token-mean``) or its rows with loss tokens (the ``seq-mean-*`` aggregations).
  ``loss_mask_b`` is [B, L] (rows cut into `chunks` consecutive equal parts). Without any loss
  token every loss is 0; the weights are then equal."""
  tokens_cb = _tokens_per_row(loss_mask_b).reshape(chunks, -1)
  per_chunk = tokens_cb.sum(-1) if aggregation == "token-mean" else (tokens_cb > 0).sum(-1)
  return _shares(per_chunk)


def _tokens_per_row(loss_mask_b: np.ndarray) -> np.ndarray:
  return np.asarray(loss_mask_b, bool).sum(-1)


def _shares(counts: np.ndarray) -> np.ndarray:
  """counts / their sum; equal shares when every count is 0."""
  total = counts.sum()
  return counts / total if total else np.full(len(counts), 1.0 / len(counts))


class MicroStep:
  """The GRPO update (``make_grpo_step``'s) run `rows` rows at a time: ``step(state, batch,
  advantages) -> (state, metrics)`` on host arrays (``ROW_KEYS`` [B, ...], advantages [B]).

  Each minibatch's rows (rows i, i + n, ... as ``make_grpo_step`` cuts them) go through the loss
  in chunks of `rows`, whose gradients add up on the device, weighted by ``loss_weights`` so
  that they are the minibatch's gradient; then one optimizer step. Every batch whose row count
  is a multiple of `rows` runs the same two compiled programs (chunk gradient, optimizer step),
  where the fused step compiles once per batch size, and memory holds one chunk's activations.
  The MoE aux loss is the chunks' mean (the fused step's is over the minibatch's tokens at
  once: a load-balancing term, not an exact sum). Metrics as ``make_grpo_step``'s: loss terms
  summed under the weights, token means weighted by loss tokens, ratio extremes, the gradient
  norm of the summed gradient.
  """

  def __init__(
    self,
    graphdef,
    tx,
    loss_config: GRPOLossConfig,
    mesh,
    *,
    rows: int,
    temperature: float,
    num_minibatches: int = 1,
    aux_loss_coef: float = 0.0,
    head_chunk: int = 0,
  ):
    if rows < 1 or num_minibatches < 1:
      raise ValueError(f"need rows >= 1 and num_minibatches >= 1; got {rows}, {num_minibatches}")
    self.rows, self.num_minibatches, self.mesh = rows, num_minibatches, mesh
    self.aggregation, self.use_ref = loss_config.aggregation, loss_config.kl_coef > 0

    logp, policy_loss = _loss_terms(graphdef, loss_config, temperature, head_chunk)

    def loss_fn(params, rest, mb, ref_logp_bk, weight, aux_weight):
      loss, aux, metrics = policy_loss(params, rest, mb, ref_logp_bk)
      return weight * loss + aux_weight * aux_loss_coef * aux, metrics

    def add_chunk(params, rest, ref_params, acc, mb, weight, aux_weight):
      ref_logp_bk = None
      if self.use_ref:  # outside the gradient's trace: NNX merges variables of one trace only
        ref_logp_bk = jax.lax.stop_gradient(logp(ref_params, rest, mb)[0])
      grads, metrics = jax.grad(loss_fn, has_aux=True)(
        params, rest, mb, ref_logp_bk, weight, aux_weight
      )
      return jax.tree.map(jnp.add, acc, grads), metrics

    def apply(params, opt_state, acc):
      updates, opt_state = tx.update(acc, opt_state, params)
      return optax.apply_updates(params, updates), opt_state, optax.tree.norm(acc)

    self._add_chunk = jax.jit(add_chunk, donate_argnums=3)
    self._apply = jax.jit(apply, donate_argnums=(0, 1))

  def chunk_shape(self, batch: Mapping[str, np.ndarray]) -> tuple:
    """The shapes the compiled programs see: a chunk's tokens and loss index."""
    return (self.rows, *batch["tokens"].shape[1:]), (self.rows, *batch["loss_index"].shape[1:])

  def __call__(self, state, batch: Mapping[str, np.ndarray], advantages_b: np.ndarray):
    b, n, rows = len(advantages_b), self.num_minibatches, self.rows
    if b % n or (b // n) % rows:
      raise ValueError(f"{b} rows do not split into {n} minibatches of chunks of {rows} rows")
    chunks = b // n // rows
    params, opt_state = state["params"], state["opt_state"]
    per_mb = []
    for m in range(n):
      mb = {k: np.asarray(batch[k])[m::n] for k in ROW_KEYS}
      adv = np.asarray(advantages_b, np.float32)[m::n]
      weights = loss_weights(mb["loss_mask"], chunks, self.aggregation)
      # each chunk's share of the minibatch's loss tokens: the weight of its token means
      token_shares = _shares(_tokens_per_row(mb["loss_mask"]).reshape(chunks, -1).sum(-1))
      acc = jax.tree.map(jnp.zeros_like, params)
      parts = []
      for c in range(chunks):
        part = slice(c * rows, (c + 1) * rows)
        sharded = shard_batch({k: v[part] for k, v in mb.items()}, adv[part], self.mesh)
        acc, metrics = self._add_chunk(
          params, state["rest"], state.get("ref_params"), acc, sharded,
          np.float32(weights[c]), np.float32(1.0 / chunks),
        )  # fmt: skip
        parts.append(metrics)  # fetched once the chunks are queued
      params, opt_state, grad_norm = self._apply(params, opt_state, acc)
      per_mb.append(self._combine(jax.device_get(parts), weights, token_shares, float(grad_norm)))
    state = {**state, "step": state["step"] + 1, "params": params, "opt_state": opt_state}
    metrics = {k: float(np.mean([m[k] for m in per_mb])) for k in per_mb[0]}
    metrics["ratio_min"] = min(m["ratio_min"] for m in per_mb)
    metrics["ratio_max"] = max(m["ratio_max"] for m in per_mb)
    metrics["first_loss"] = per_mb[0]["loss"]
    return state, metrics

  @staticmethod
  def _combine(
    parts: list[dict], weights: np.ndarray, by_tokens: np.ndarray, grad_norm: float
  ) -> dict[str, float]:
    """One minibatch's metrics from its chunks' (see the class docstring)."""
    out = {"grad_norm": grad_norm}
    for key in parts[0]:
      values = np.asarray([float(p[key]) for p in parts])
      if key in ("loss", "pg_loss"):
        out[key] = float(values @ weights)
      elif key == "ratio_min":
        out[key] = float(values.min())
      elif key == "ratio_max":
        out[key] = float(values.max())
      elif key == "aux_loss":
        out[key] = float(values.mean())
      else:
        out[key] = float(values @ by_tokens)
    return out


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
