"""Dropless mixture of experts: softmax top-k router, SwiGLU experts, gated shared expert.

Three interchangeable dispatch backends compute sum_k w_nk * expert_{e_nk}(x_n):
  "ragged_dot": sort the N*k (token, expert) rows by expert, one grouped matmul per weight
                (`jax.lax.ragged_dot`) — the GPU/TPU path; on CPU it computes every expert densely.
  "sort":       sort the rows by expert, pad each group to whole tiles and loop over the used
                tiles (`models.tiled_experts`) — sparsity that is real on CPU.
  "loop":       every expert on every token, weighted by the routing — the test reference.

Tokens are split along the batch into groups, routed and dispatched independently (`moe_groups`;
by default one group per batch shard of the mesh): every sort, gather and scatter then stays on
the device that holds the group's tokens, instead of running over all B*T tokens, which SPMD can
only do by replicating them. Each device gathers every expert's weights for its groups (no expert
parallelism yet).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
from flax import nnx, struct

from models import sharding
from models.config import ModelConfig
from models.expert_parallel import dispatch_all_to_all
from models.layers import SwiGLU, normal
from models.tiled_experts import dispatch_sort, dispatch_sort_groups, map_groups


@struct.dataclass
class MoEStats:
  """Logged per MoE layer: the load-balancing loss and each expert's share of the routed rows."""

  aux_loss: jax.Array  # [] Switch-style E * sum_e f_e P_e, 1 when perfectly balanced
  expert_load: jax.Array  # [E], sums to 1 over experts


def route(logits_ne: jax.Array, top_k: int) -> tuple[jax.Array, jax.Array, jax.Array]:
  """Softmax over all experts, then the top k renormalised: (probs [N,E], weights, experts [N,k])."""
  probs_ne = jax.nn.softmax(logits_ne.astype(jnp.float32), axis=-1)
  top_nk, experts_nk = jax.lax.top_k(probs_ne, top_k)
  return probs_ne, top_nk / jnp.sum(top_nk, axis=-1, keepdims=True), experts_nk


def load_balancing(probs_ne, experts_nk, mask_n) -> MoEStats:
  """f_e: fraction of tokens sent to e (sums to k); P_e: mean router probability (Switch eq. 4)."""
  num_experts = probs_ne.shape[-1]
  mask_n = mask_n.astype(jnp.float32)
  tokens = jnp.maximum(jnp.sum(mask_n), 1.0)
  # Reductions, not einsums: bookkeeping, which FLOP counts should not see as matmuls.
  onehot_nke = jax.nn.one_hot(experts_nk, num_experts, dtype=jnp.float32)
  counts_e = jnp.sum(onehot_nke * mask_n[:, None, None], axis=(0, 1))
  frac_e = counts_e / tokens
  prob_e = jnp.sum(probs_ne * mask_n[:, None], axis=0) / tokens
  return MoEStats(
    aux_loss=num_experts * jnp.sum(frac_e * prob_e),
    expert_load=counts_e / jnp.maximum(jnp.sum(counts_e), 1.0),
  )


def _swiglu(x, w_gate, w_up, w_down, matmul):
  return matmul(jax.nn.silu(matmul(x, w_gate)) * matmul(x, w_up), w_down)


def _sort_by_expert(experts_nk, num_experts):
  """The N*k (token, expert) rows in expert order (row r is token r // k), and group sizes [E]."""
  flat_r = experts_nk.reshape(-1)
  order_r = jnp.argsort(flat_r, stable=True)
  return order_r, jnp.bincount(flat_r, length=num_experts).astype(jnp.int32)


def _unsort_combine(out_rd, order_r, weights_nk):
  n, top_k = weights_nk.shape
  unsorted_rd = jnp.zeros_like(out_rd).at[order_r].set(out_rd)
  return jnp.einsum(
    "nkd,nk->nd", unsorted_rd.reshape(n, top_k, -1), weights_nk.astype(out_rd.dtype)
  )


def dispatch_ragged_dot(x_nd, weights_nk, experts_nk, w_gate_edf, w_up_edf, w_down_efd, tile):
  del tile
  order_r, group_sizes_e = _sort_by_expert(experts_nk, w_gate_edf.shape[0])
  rows_rd = x_nd[order_r // experts_nk.shape[1]]

  def matmul(x, w):
    return jax.lax.ragged_dot(x, w, group_sizes_e)

  out_rd = _swiglu(rows_rd, w_gate_edf, w_up_edf, w_down_efd, matmul)
  return _unsort_combine(out_rd, order_r, weights_nk)


def combine_weights(weights_nk, experts_nk, num_experts: int) -> jax.Array:
  """Each token's routing weight for every expert [N, E] (0 for experts it does not use)."""
  return jnp.einsum("nk,nke->ne", weights_nk, jax.nn.one_hot(experts_nk, num_experts))


def dispatch_loop(x_nd, weights_nk, experts_nk, w_gate_edf, w_up_edf, w_down_efd, tile):
  del tile
  num_experts = w_gate_edf.shape[0]
  combine_ne = combine_weights(weights_nk, experts_nk, num_experts)
  out_nd = jnp.zeros_like(x_nd)
  for e in range(num_experts):
    y_nd = _swiglu(x_nd, w_gate_edf[e], w_up_edf[e], w_down_efd[e], jnp.matmul)
    out_nd = out_nd + combine_ne[:, e, None].astype(y_nd.dtype) * y_nd
  return out_nd


class DenseExperts(NamedTuple):
  """Every expert's weights laid out for `dispatch_dense` (built once per decoding loop)."""

  gate_up_dx: jax.Array  # [D, 2 * E * F]: the gate, then the up projections of all experts
  down_efd: jax.Array  # [E, F, D], as stored


def dense_experts(
  w_gate_edf: jax.Array, w_up_edf: jax.Array, w_down_efd: jax.Array
) -> DenseExperts:
  e, d, f = w_gate_edf.shape
  gate_up_2edf = jnp.stack([w_gate_edf, w_up_edf])
  gate_up_dx = gate_up_2edf.transpose(2, 0, 1, 3).reshape(d, 2 * e * f)
  return DenseExperts(gate_up_dx=gate_up_dx, down_efd=w_down_efd)


def dispatch_dense(x_nd, weights_nk, experts_nk, dense: DenseExperts) -> jax.Array:
  """Every expert on every token as two plain matmuls, the routing weights (0 for experts a
  token does not use) applied between them: E / k times the routed FLOPs, but no sort, gather
  or tile loop, and each weight is read once. The fast path when a few tokens touch nearly
  every expert anyway, as in a decoding step (`decode_dense`)."""
  n, dtype = x_nd.shape[0], x_nd.dtype
  e, f, d = dense.down_efd.shape
  h_n2ef = (x_nd @ dense.gate_up_dx.astype(dtype)).reshape(n, 2, e, f)
  act_nef = jax.nn.silu(h_n2ef[:, 0]) * h_n2ef[:, 1]
  combine_ne = combine_weights(weights_nk, experts_nk, e)
  act_nef = act_nef * combine_ne[:, :, None].astype(dtype)
  return act_nef.reshape(n, e * f) @ dense.down_efd.reshape(e * f, d).astype(dtype)


def decode_dense(config: ModelConfig, tokens: int) -> bool:
  """Whether a step over `tokens` tokens runs the experts densely: when they route at least one
  row per expert (tokens * k >= E), so the sparse path would read about every expert anyway."""
  return tokens * config.num_experts_per_tok >= config.num_experts


DISPATCH: dict[str, Callable[..., jax.Array]] = {
  "ragged_dot": dispatch_ragged_dot,
  "sort": dispatch_sort,
  "loop": dispatch_loop,
}


def all_experts(w_edf: jax.Array) -> jax.Array:
  """Every expert's weights on every device (an all-gather under a mesh): without expert
  parallelism, any group of tokens may route to any expert."""
  return sharding.constrain(w_edf, (None,) * w_edf.ndim)


def dispatch_groups(
  backend,
  x_gnd,
  weights_gnk,
  experts_gnk,
  w_gate_edf,
  w_up_edf,
  w_down_efd,
  tile,
  gather=None,
  capacity_factor=0.0,
):
  """`DISPATCH[backend]` on each group of tokens (leading axis G) independently; `gather` (if
  any) runs on the expert weights first (the "sort" backend runs it again in the backward pass
  instead of keeping its result)."""
  weights = (w_gate_edf, w_up_edf, w_down_efd)
  if backend == "all_to_all":  # each device keeps its own experts: tokens travel instead
    return dispatch_all_to_all(x_gnd, weights_gnk, experts_gnk, *weights, tile, capacity_factor)
  if backend == "sort":  # the tile loop runs once for all groups, so unused tiles stay skipped
    return dispatch_sort_groups(x_gnd, weights_gnk, experts_gnk, *weights, tile, gather)
  if gather:
    weights = tuple(map(gather, weights))
  dispatch = DISPATCH[backend]
  groups = x_gnd.shape[0]
  if backend == "ragged_dot" and groups > 1:
    # ragged_dot batches only when every operand does: a copy of the experts per group, which
    # is one per device when the groups are sharded.
    weights = tuple(
      sharding.constrain(jnp.broadcast_to(w, (groups, *w.shape)), ("act_batch", None, None, None))
      for w in weights
    )
    return jax.vmap(lambda x, w, e, *ws: dispatch(x, w, e, *ws, tile))(
      x_gnd, weights_gnk, experts_gnk, *weights
    )
  return map_groups(
    lambda x, w, e: dispatch(x, w, e, *weights, tile), x_gnd, weights_gnk, experts_gnk
  )


def num_groups(config: ModelConfig, batch: int) -> int:
  """Token groups of the MoE for `batch` rows: `config.moe_groups`, or with 0 one per batch shard
  of the current mesh (1 without a mesh), as far as the rows divide evenly."""
  if config.moe_groups:
    if batch % config.moe_groups:
      raise ValueError(f"moe_groups={config.moe_groups} does not divide the batch of {batch}")
    return config.moe_groups
  return math.gcd(batch, sharding.mesh_shards("act_batch"))


_GATE_UP_AXES = ("expert", "embed", "expert_mlp")
_DOWN_AXES = ("expert", "expert_mlp", "embed")


class MoE(nnx.Module):
  """Routed SwiGLU experts plus a shared SwiGLU expert scaled by sigmoid(x w_shared_gate)."""

  def __init__(self, config: ModelConfig, *, rngs: nnx.Rngs):
    d, e, f = config.d_model, config.num_experts, config.expert_dim
    init, dtype, p = normal(config.init_std), config.weight_dtype, rngs.params
    self.w_router_de = sharding.param(init, p(), (d, e), ("embed", None), dtype)
    self.w_gate_edf = sharding.param(init, p(), (e, d, f), _GATE_UP_AXES, dtype)
    self.w_up_edf = sharding.param(init, p(), (e, d, f), _GATE_UP_AXES, dtype)
    self.w_down_efd = sharding.param(init, p(), (e, f, d), _DOWN_AXES, dtype)
    self.shared = SwiGLU(config, config.shared_expert_dim, rngs=rngs)
    self.w_shared_gate_d = sharding.param(init, p(), (d,), ("embed",), dtype)
    self.config = config

  def __call__(
    self,
    x_btd: jax.Array,
    mask_bt: jax.Array | None = None,
    backend: str | None = None,
    dense: DenseExperts | None = None,
  ) -> tuple[jax.Array, MoEStats]:
    """`mask_bt` excludes padding from the statistics (not from the computation). With `dense`
    (`dense_experts` of this layer's weights, prepared once by a decoding loop) the routed
    experts run densely."""
    cfg, dtype = self.config, self.config.compute_dtype
    b, t, d = x_btd.shape
    groups = num_groups(cfg, b)
    x_btd = x_btd.astype(dtype)
    # Groups are whole batch rows, in order, so group g lives where batch shard g does.
    x_gnd = sharding.constrain(x_btd.reshape(groups, -1, d), ("act_batch", None, "act_embed"))
    # The router runs in float32: near-tied logits in bfloat16 flip the top-k selection.
    logits_gne = x_gnd.astype(jnp.float32) @ self.w_router_de[...].astype(jnp.float32)
    probs_gne, weights_gnk, experts_gnk = route(logits_gne, cfg.num_experts_per_tok)

    if dense is not None:
      routed_gnd = map_groups(
        lambda x, w, e: dispatch_dense(x, w, e, dense), x_gnd, weights_gnk, experts_gnk
      )
    else:
      # Still sharded like the parameters: what the backward pass keeps of them between the passes.
      experts = [
        sharding.constrain(w[...].astype(dtype), names)
        for w, names in zip(
          (self.w_gate_edf, self.w_up_edf, self.w_down_efd),
          (_GATE_UP_AXES, _GATE_UP_AXES, _DOWN_AXES),
          strict=True,
        )
      ]
      routed_gnd = dispatch_groups(
        backend or cfg.moe_backend,
        *(x_gnd, weights_gnk, experts_gnk, *experts, cfg.moe_tile),
        gather=all_experts,
        capacity_factor=cfg.moe_capacity_factor,
      )
    routed_gnd = sharding.constrain(routed_gnd, ("act_batch", None, "act_embed"))
    shared_gate_bt1 = jax.nn.sigmoid(x_btd @ self.w_shared_gate_d[...].astype(dtype))[..., None]
    out_btd = routed_gnd.reshape(b, t, d) + shared_gate_bt1 * self.shared(x_btd)
    mask_n = jnp.ones((b * t,), bool) if mask_bt is None else mask_bt.reshape(-1)
    n, e = b * t, cfg.num_experts
    stats = load_balancing(probs_gne.reshape(n, e), experts_gnk.reshape(n, -1), mask_n)
    return out_btd, stats
