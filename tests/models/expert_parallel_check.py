"""Run as `python -m tests.models.expert_parallel_check` with 8 host devices: the all-to-all
expert dispatch against the loop over experts, values and gradients, and the whole model with
``moe_backend="all_to_all"`` on an expert-parallel mesh (fsdp 2 x expert 4) against the same
model unsharded.

A separate process, because the fake-device flag must be set before jax starts. Prints one JSON
line.
"""

import os

os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"

import json

import jax
import jax.numpy as jnp
import numpy as np

from models import get_config, make_mesh, use_mesh
from models.expert_parallel import capacity, dispatch_all_to_all
from models.moe import dispatch_loop, route
from tests.models.sharded_check import compare


def dispatch_check(mesh) -> dict:
  rng = np.random.default_rng(0)
  g, n, d, e, f, k = 8, 16, 8, 8, 4, 2
  x = jnp.asarray(rng.normal(size=(g, n, d)), jnp.float32)
  router = jnp.asarray(rng.normal(size=(d, e)), jnp.float32)
  gate, up = (jnp.asarray(rng.normal(size=(e, d, f)) * 0.3, jnp.float32) for _ in range(2))
  down = jnp.asarray(rng.normal(size=(e, f, d)) * 0.3, jnp.float32)
  _, weights, experts = route(x @ router, k)

  def loss(fn, x, weights, gate, up, down):
    return jnp.sum(jnp.sin(fn(x, weights, experts, gate, up, down, 0)))

  def loop(x, w, ex, gate, up, down, tile):
    return jax.vmap(lambda xg, wg, eg: dispatch_loop(xg, wg, eg, gate, up, down, tile))(x, w, ex)

  args = (x, weights, gate, up, down)
  ref, ref_grads = jax.value_and_grad(lambda *a: loss(loop, *a), argnums=range(5))(*args)
  with use_mesh(mesh):
    got, grads = jax.jit(
      jax.value_and_grad(lambda *a: loss(dispatch_all_to_all, *a), argnums=range(5))
    )(*args)
    out = jax.jit(lambda *a: dispatch_all_to_all(a[0], a[1], experts, *a[2:], 0))(*args)
  ref_out = loop(x, weights, experts, gate, up, down, 0)
  # With a capacity of an even share (factor 1), the rows past it are dropped: the loop with
  # those rows' routing weights set to 0.
  shards = mesh.shape["expert"]
  cap = capacity(n * k, shards, 1.0)
  kept = np.zeros((g, n * k), bool)
  for group in range(g):
    dest = np.asarray(experts[group]).reshape(-1) // (e // shards)
    order = np.argsort(dest, kind="stable")
    rank = np.empty(n * k, int)
    for x_shard in range(shards):
      rows = order[dest[order] == x_shard]
      rank[rows] = np.arange(len(rows))
    kept[group] = rank < cap
  kept_weights = weights * jnp.asarray(kept.reshape(g, n, k), weights.dtype)
  ref_capped = loop(x, kept_weights, experts, gate, up, down, 0)
  with use_mesh(mesh):
    capped = jax.jit(
      lambda *a: dispatch_all_to_all(a[0], a[1], experts, *a[2:], 0, capacity_factor=1.0)
    )(*args)
  return {
    "loss": float(ref),
    "loss_all_to_all": float(got),
    "max_out_diff": float(jnp.abs(out - ref_out).max()),
    "max_out": float(jnp.abs(ref_out).max()),
    "max_grad_diff": max(
      float(jnp.abs(a - b).max()) for a, b in zip(grads, ref_grads, strict=True)
    ),
    "max_grad": max(float(jnp.abs(a).max()) for a in ref_grads),
    "expert_shards": mesh.shape["expert"],
    "capacity_dropped_rows": int((~kept).sum()),
    "capacity_max_out_diff": float(jnp.abs(capped - ref_capped).max()),
    "capacity_vs_exact_diff": float(jnp.abs(capped - ref_out).max()),
  }


def main():
  assert jax.device_count() == 8, jax.devices()
  mesh = make_mesh(data=1, fsdp=2, tensor=1, expert=4)
  dispatch = dispatch_check(mesh)
  config = get_config("tiny", num_layers=4)
  tokens = jnp.asarray(np.random.default_rng(0).integers(0, config.vocab_size, (8, 16)))
  model, sharded = compare(config.replace(moe_backend="all_to_all"), mesh, tokens)
  experts = sharded.blocks.linear.moe.w_gate_edf[...]
  shard_shape = list(experts.addressable_shards[0].data.shape)
  print(json.dumps({"dispatch": dispatch, "model": model, "expert_shard_shape": shard_shape}))


if __name__ == "__main__":
  main()
