"""Run as `python -m tests.models.sharded_check` with 8 host devices: sharded vs unsharded.

A separate process, because the fake-device flag must be set before jax starts. Prints one JSON
line: per MoE backend the loss of each run and the largest gradient difference. The sharded run
dispatches in one MoE token group per batch shard, the unsharded one in a single group.
"""

import os

os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"

import json

import jax
import numpy as np
import optax
from flax import nnx

from models import create_model, get_config, make_mesh, use_mesh
from models.moe import num_groups


def loss_fn(model, tokens):
  out = model.forward(tokens)
  ce = optax.softmax_cross_entropy_with_integer_labels(out.logits[:, :-1], tokens[:, 1:])
  return ce.mean() + 0.01 * out.aux_loss


@nnx.jit
def loss_and_grads(model, tokens):
  return nnx.value_and_grad(loss_fn)(model, tokens)


def compare(config, mesh, tokens):
  loss, grads = loss_and_grads(create_model(config, seed=0), tokens)
  sharded = create_model(config, seed=0, mesh=mesh)
  with use_mesh(mesh):
    loss_s, grads_s = loss_and_grads(sharded, tokens)
  pairs = zip(jax.tree.leaves(nnx.state(grads)), jax.tree.leaves(nnx.state(grads_s)), strict=True)
  result = {
    "loss": float(loss),
    "loss_sharded": float(loss_s),
    "max_grad_diff": max(float(np.abs(a - b).max()) for a, b in pairs),
    "max_grad": max(float(np.abs(a).max()) for a in jax.tree.leaves(nnx.state(grads))),
  }
  return result, sharded


def main():
  assert jax.device_count() == 8, jax.devices()
  config = get_config("tiny", num_layers=4)
  tokens = jax.numpy.asarray(np.random.default_rng(0).integers(0, config.vocab_size, (4, 16)))
  mesh = make_mesh(data=1, fsdp=2, tensor=2, expert=2)
  backends = {}
  for backend in ("ragged_dot", "sort"):
    backends[backend], sharded = compare(config.replace(moe_backend=backend), mesh, tokens)
  with use_mesh(mesh):
    groups = num_groups(config, tokens.shape[0])  # one per batch shard (fsdp x expert)
  experts = sharded.blocks.linear.moe.w_gate_edf[...]
  print(
    json.dumps(
      {
        "backends": backends,
        "moe_groups": groups,
        "expert_weight_spec": str(experts.sharding.spec),
        "expert_shards": len(experts.addressable_shards),
        "expert_shard_shape": list(experts.addressable_shards[0].data.shape),
      }
    )
  )


if __name__ == "__main__":
  main()
