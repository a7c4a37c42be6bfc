"""Expert parallelism: tokens travel to their experts' devices and back (``moe_backend="all_to_all"``).

Without it every device gathers every expert's weights (`models.moe.all_experts`), which at full
size is most of a device's memory. Here each device of the mesh's ``expert`` axis keeps only its
E / X experts. Inside one `jax.shard_map` over the whole mesh, each device:

1. sorts its tokens' (token, expert) rows by the expert shard that holds the expert, into a
   send buffer of X slots of C rows (``moe_capacity_factor`` 0: C = every row, none ever dropped,
   the buffer X times what an even spread needs; f > 0: C = f times an even share, the rows past
   it dropped, as GShard's expert capacity);
2. exchanges the buffers with the other devices of its ``expert`` axis (`jax.lax.all_to_all`), so
   it holds the rows that other devices sent to its experts;
3. runs its own experts on them (`models.tiled_experts.dispatch_sort`, the CPU-sparse path);
4. sends the results back (a second all-to-all) and sums each token's k results with its routing
   weights.

Outside the MoE the ``expert`` axis is more data parallelism (``act_batch``), so every device has
its own tokens to send. The result equals the loop over experts (`models.moe.dispatch_loop`) in
values and gradients; the tests check it on 8 fake devices.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec

from models import sharding
from models.tiled_experts import dispatch_sort

EXPERT_AXIS = "expert"


def capacity(rows: int, shards: int, factor: float) -> int:
  """Rows a device sends to each expert shard: all of them (`factor` <= 0: none ever dropped), or
  `factor` times an even share, at most all."""
  if factor <= 0:
    return rows
  return min(rows, max(1, math.ceil(factor * rows / shards)))


def _local_dispatch(
  x_nd, weights_nk, experts_nk, w_gate, w_up, w_down, *, tile: int, shards: int, factor: float
):
  """One device's part: its N tokens' rows out to the X expert shards, its E / X experts on
  what arrives, the results back and combined. Runs inside `jax.shard_map`."""
  n, top_k = experts_nk.shape
  local_experts = w_gate.shape[0]
  rows = n * top_k
  cap = capacity(rows, shards, factor)
  flat_e = experts_nk.reshape(-1)
  dest_r = flat_e // local_experts  # the expert shard each row goes to
  order_r = jnp.argsort(dest_r, stable=True)
  counts_x = jnp.bincount(dest_r, length=shards)
  starts_x = jnp.cumsum(counts_x) - counts_x
  sorted_dest = dest_r[order_r]
  slot_r = jnp.arange(rows) - starts_x[sorted_dest]  # place within its destination's slot
  kept_r = slot_r < cap  # rows past a destination's capacity are dropped (contribute 0)
  # Send buffers [X, C, ...]: C rows for each destination shard.
  where = (sorted_dest, slot_r)
  send_xcd = jnp.zeros((shards, cap, x_nd.shape[1]), x_nd.dtype)
  send_xcd = send_xcd.at[where].set(x_nd[order_r // top_k], mode="drop")
  local_r = (flat_e % local_experts)[order_r]
  expert_xc = jnp.zeros((shards, cap), jnp.int32).at[where].set(local_r, mode="drop")
  valid_xc = jnp.zeros((shards, cap), x_nd.dtype).at[where].set(1, mode="drop")

  def exchange(a):
    return jax.lax.all_to_all(a, EXPERT_AXIS, 0, 0)

  recv_xcd, recv_expert_xc, recv_valid_xc = map(exchange, (send_xcd, expert_xc, valid_xc))
  out_rd = dispatch_sort(
    recv_xcd.reshape(shards * cap, -1),
    recv_valid_xc.reshape(-1, 1),  # empty slots: weight 0
    recv_expert_xc.reshape(-1, 1),
    w_gate,
    w_up,
    w_down,
    tile,
  )
  back_xcd = exchange(out_rd.reshape(shards, cap, -1))
  # Row r of this device's tokens came back at (its destination, its slot), unless dropped.
  out_sorted_rd = back_xcd[sorted_dest, jnp.minimum(slot_r, cap - 1)]
  out_sorted_rd = out_sorted_rd * kept_r[:, None].astype(out_sorted_rd.dtype)
  out_rd_tokens = jnp.zeros_like(out_sorted_rd).at[order_r].set(out_sorted_rd)
  return jnp.einsum(
    "nkd,nk->nd", out_rd_tokens.reshape(n, top_k, -1), weights_nk.astype(out_rd_tokens.dtype)
  )


def dispatch_all_to_all(
  x_gnd, weights_gnk, experts_gnk, w_gate_edf, w_up_edf, w_down_efd, tile, capacity_factor=0.0
):
  """The routed experts of each group of tokens (leading axis G: one group per batch shard of
  the mesh) with the experts split over the mesh's ``expert`` axis. `capacity_factor` bounds the
  rows a device sends to each expert shard (`capacity`; 0: every row, exact). Without a mesh it
  is the sort dispatch on each group."""
  mesh = jax.sharding.get_abstract_mesh()
  num_experts = w_gate_edf.shape[0]
  if mesh.empty:
    return jax.vmap(lambda x, w, e: dispatch_sort(x, w, e, w_gate_edf, w_up_edf, w_down_efd, tile))(
      x_gnd, weights_gnk, experts_gnk
    )
  shards = mesh.shape[EXPERT_AXIS]
  if num_experts % shards:
    raise ValueError(f"{num_experts} experts do not split over an expert axis of {shards}")
  batch_axes = sharding.logical_to_spec(("act_batch",))[0]
  batch_shards = sharding.mesh_shards("act_batch")
  if x_gnd.shape[0] % batch_shards:
    raise ValueError(
      f"moe_backend='all_to_all' needs the token groups ({x_gnd.shape[0]}) to split over the "
      f"{batch_shards} batch shards (data x fsdp x expert): more rows per batch, or moe_groups"
    )
  tokens = PartitionSpec(batch_axes, None, None)
  experts = PartitionSpec(EXPERT_AXIS, None, None)  # whole experts here, E / X of them

  def per_device(x, w, e, gate, up, down):
    def one_group(xg, wg, eg):
      return _local_dispatch(
        xg, wg, eg, gate, up, down, tile=tile, shards=shards, factor=capacity_factor
      )

    return jax.vmap(one_group)(x, w, e)

  return jax.shard_map(
    per_device,
    mesh=mesh,
    in_specs=(tokens, tokens, tokens, experts, experts, experts),
    out_specs=tokens,
    check_vma=False,
  )(x_gnd, weights_gnk, experts_gnk, w_gate_edf, w_up_edf, w_down_efd)
