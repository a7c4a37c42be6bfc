"""The "sort" MoE backend: expert groups padded to whole tiles, a loop over the used tiles.

Routed rows are counting-placed into slots so each expert's group starts on a tile boundary; the
loop then runs one tile at a time: gather its rows, SwiGLU with its expert's weights, scatter
the routing-weighted result onto the tokens. Work is about N*k + E*tile/2 rows, so sparsity is
real on CPU, where `ragged_dot` computes every expert densely.

The backward pass is written out (`jax.custom_vjp`): differentiating the loop automatically
turns each tile's read of `w[e]` into a full-size [E, D, F] gradient per tile, whereas here the
weight gradients accumulate in place, one expert slice per tile, from the forward's saved tile
activations (gate, up, output: about N*k*(2F + D) numbers).

With a leading group axis (`dispatch_sort_groups`) each group of tokens is planned on its own
and the tile loop is vmapped over the groups, so under a mesh whose batch shards hold the groups
nothing token-sized leaves its device. An empty slot points at token 0 with routing weight 0
(it adds nothing), so the token count stays as divisible as the batch.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp


def sort_tile_rows(num_rows: int, num_experts: int) -> int:
  """Default tile height: a power of two near a quarter of the mean group, 8 to 512 rows.

  Padding costs about half a tile per expert (~1/8 of the rows here); taller tiles run the CPU
  matmuls closer to their peak.
  """
  target = max(num_rows // (4 * num_experts), 8)
  return min(1 << (target.bit_length() - 1), 512)


def map_groups(fn, *args_g):
  """`fn` on each group (the leading axis of every arg): vmapped, or called directly for one."""
  if args_g[0].shape[0] == 1:
    return jax.tree.map(lambda y: y[None], fn(*(a[0] for a in args_g)))
  return jax.vmap(fn)(*args_g)


def dispatch_sort(x_nd, weights_nk, experts_nk, w_gate_edf, w_up_edf, w_down_efd, tile):
  """sum_k weights_nk * expert_{experts_nk}(x_n) over tiles of `tile` rows (0: automatic)."""
  weights = (w_gate_edf, w_up_edf, w_down_efd)
  return dispatch_sort_groups(x_nd[None], weights_nk[None], experts_nk[None], *weights, tile)[0]


def dispatch_sort_groups(
  x_gnd, weights_gnk, experts_gnk, w_gate_edf, w_up_edf, w_down_efd, tile, gather=None
):
  """`dispatch_sort` on each group of tokens (leading axis G): every group sorts and tiles its
  own rows; one loop runs over tile i of all groups at once, up to the most any group uses.

  `gather(w)` runs on each expert weight at the start of the forward and of the backward pass
  (e.g. an all-gather of sharded weights), so its result is not kept in between."""
  gather = gather or _identity
  num_experts = w_gate_edf.shape[0]
  _, n, top_k = experts_gnk.shape
  tile = tile or sort_tile_rows(n * top_k, num_experts)
  plan_g = map_groups(
    functools.partial(_plan, tile=tile, num_experts=num_experts, dtype=x_gnd.dtype),
    weights_gnk,
    experts_gnk,
  )
  token_gs, weight_gs, tile_expert_gi, used_g = plan_g
  used = jnp.max(used_g)  # one scalar for all groups, so the loop's skip is a real branch

  def tiled(x_nd, weight_s, token_s, tile_expert_i):
    plan = (token_s, tile_expert_i, used)
    return _tiled_swiglu(tile, gather, x_nd, weight_s, w_gate_edf, w_up_edf, w_down_efd, plan)

  return map_groups(tiled, x_gnd, weight_gs, token_gs, tile_expert_gi)


def _identity(w):
  return w


def _plan(weights_nk, experts_nk, *, tile, num_experts, dtype):
  """Where each (token, expert) row goes: slot -> token and routing weight, with every expert's
  group starting on a tile boundary; per tile its expert; and how many tiles are used."""
  n, top_k = experts_nk.shape
  num_rows = n * top_k
  flat_r = experts_nk.reshape(-1)
  order_r = jnp.argsort(flat_r, stable=True)  # row r is token r // k
  group_sizes_e = jnp.bincount(flat_r, length=num_experts)
  tiles_e = -(-group_sizes_e // tile)
  tile_end_e = jnp.cumsum(tiles_e)
  expert_sorted = flat_r[order_r]
  rank_sorted = jnp.arange(num_rows) - (jnp.cumsum(group_sizes_e) - group_sizes_e)[expert_sorted]
  slot_sorted = (tile_end_e - tiles_e)[expert_sorted] * tile + rank_sorted
  # Static bound: every group may leave one partial tile. Tiles past the used ones are skipped.
  num_slots = (-(-num_rows // tile) + num_experts) * tile
  # An empty slot reads token 0 with weight 0: it adds nothing, and no padding row is needed.
  token_s = jnp.zeros((num_slots,), order_r.dtype).at[slot_sorted].set(order_r // top_k)
  weight_s = (
    jnp.zeros((num_slots,), dtype)
    .at[slot_sorted]
    .set(weights_nk.reshape(-1)[order_r].astype(dtype))
  )
  tile_expert_i = jnp.minimum(
    jnp.searchsorted(tile_end_e, jnp.arange(num_slots // tile), side="right"), num_experts - 1
  )
  return token_s, weight_s, tile_expert_i, tile_end_e[-1]


def _tile_inputs(x_nd, weight_s, plan, tile, i):
  token_s, tile_expert_i, _ = plan
  tokens_m = jax.lax.dynamic_slice_in_dim(token_s, i * tile, tile)
  weight_m = jax.lax.dynamic_slice_in_dim(weight_s, i * tile, tile)
  return tokens_m, weight_m, x_nd[tokens_m], tile_expert_i[i]


@functools.partial(jax.custom_vjp, nondiff_argnums=(0, 1))
def _tiled_swiglu(tile, gather, x_nd, weight_s, w_gate_edf, w_up_edf, w_down_efd, plan):
  weights = tuple(map(gather, (w_gate_edf, w_up_edf, w_down_efd)))
  return _tiled_forward(x_nd, weight_s, weights, plan, tile, keep=False)[0]


def _tiled_forward(x_nd, weight_s, weights, plan, tile, keep: bool):
  """The weighted expert outputs summed per token [N, D]; with `keep`, also every tile's
  gate and up projections and unweighted output, which the backward pass reuses."""
  w_gate_edf, w_up_edf, w_down_efd = weights
  used = plan[2]

  def run_tile(out_nd, i):
    tokens_m, weight_m, x_md, e = _tile_inputs(x_nd, weight_s, plan, tile, i)

    def compute():
      g_mf, u_mf = x_md @ w_gate_edf[e], x_md @ w_up_edf[e]
      return g_mf, u_mf, (jax.nn.silu(g_mf) * u_mf) @ w_down_efd[e]

    def skip():
      f = w_gate_edf.shape[-1]
      return (
        jnp.zeros((tile, f), x_md.dtype),
        jnp.zeros((tile, f), x_md.dtype),
        jnp.zeros_like(x_md),
      )

    g_mf, u_mf, y_md = jax.lax.cond(i < used, compute, skip)
    out_nd = out_nd.at[tokens_m].add(y_md * weight_m[:, None])
    return out_nd, (g_mf, u_mf, y_md) if keep else None

  num_tiles = plan[0].shape[0] // tile
  return jax.lax.scan(run_tile, jnp.zeros_like(x_nd), jnp.arange(num_tiles))


def _tiled_fwd(tile, gather, x_nd, weight_s, w_gate_edf, w_up_edf, w_down_efd, plan):
  weights = (w_gate_edf, w_up_edf, w_down_efd)
  out, activations = _tiled_forward(x_nd, weight_s, tuple(map(gather, weights)), plan, tile, True)
  return out, (x_nd, weight_s, weights, plan, activations)


def _tiled_bwd(tile, gather, residuals, d_out_nd):
  x_nd, weight_s, weights, plan, activations = residuals
  w_gate_edf, w_up_edf, w_down_efd = map(gather, weights)
  used = plan[2]

  def run_tile(carry, inputs):
    dx_nd, dweight_s, dgate, dup, ddown = carry
    i, g_mf, u_mf, y_md = inputs
    tokens_m, weight_m, x_md, e = _tile_inputs(x_nd, weight_s, plan, tile, i)
    wg, wu, wd = w_gate_edf[e], w_up_edf[e], w_down_efd[e]

    def compute():
      sig_mf = jax.nn.sigmoid(g_mf)
      act_mf = g_mf * sig_mf
      dout_md = d_out_nd[tokens_m]
      dweight_m = jnp.sum(y_md * dout_md, axis=-1)
      dy_md = dout_md * weight_m[:, None]
      dh_mf = dy_md @ wd.T
      dg_mf = dh_mf * u_mf * sig_mf * (1 + g_mf * (1 - sig_mf))
      du_mf = dh_mf * act_mf
      dx_md = dg_mf @ wg.T + du_mf @ wu.T
      return dx_md, dweight_m, x_md.T @ dg_mf, x_md.T @ du_mf, (act_mf * u_mf).T @ dy_md

    def skip():
      return tuple(map(jnp.zeros_like, (x_md, weight_m, wg, wu, wd)))

    dx_md, dweight_m, dwg, dwu, dwd = jax.lax.cond(i < used, compute, skip)

    def add_at(acc, delta):  # in-place update of one expert's slice
      return jax.lax.dynamic_update_index_in_dim(acc, acc[e] + delta, e, 0)

    carry = (
      dx_nd.at[tokens_m].add(dx_md),
      jax.lax.dynamic_update_slice_in_dim(dweight_s, dweight_m, i * tile, 0),
      add_at(dgate, dwg),
      add_at(dup, dwu),
      add_at(ddown, dwd),
    )
    return carry, None

  zeros = jax.tree.map(jnp.zeros_like, (x_nd, weight_s, w_gate_edf, w_up_edf, w_down_efd))
  num_tiles = plan[0].shape[0] // tile
  inputs = (jnp.arange(num_tiles), *activations)
  (dx, dweight, dgate, dup, ddown), _ = jax.lax.scan(run_tile, zeros, inputs)
  return dx, dweight, dgate, dup, ddown, None


_tiled_swiglu.defvjp(_tiled_fwd, _tiled_bwd)
