"""Compiling a train step for a large mesh from abstract shapes: no weight is ever allocated.

Used to check that the full-size model partitions and fits before any hardware is booked.
"""

from __future__ import annotations

import math
import time
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx
from jax.sharding import NamedSharding, PartitionSpec

from models import sharding
from models.config import PUBLISHED_SIZES, ModelConfig, get_config
from models.loss import lm_loss
from models.model import abstract_model
from models.perf.flops import param_counts


def per_device_bytes(state) -> int:
  """Bytes of `state` that one device holds, from each leaf's sharding."""
  total = 0
  for leaf in jax.tree.leaves(state):
    shard = leaf.sharding.shard_shape(leaf.shape)
    total += math.prod(shard) * jnp.dtype(leaf.dtype).itemsize
  return total


def compile_train_step(
  config: ModelConfig,
  mesh: jax.sharding.Mesh,
  *,
  batch: int,
  seq_len: int,
  learning_rate: float = 1e-5,
) -> dict[str, Any]:
  """Lowers and compiles forward + backward + an SGD update of `config` on `mesh`.

  Returns compile time and XLA's per-device memory figures: parameters (from their shardings),
  arguments, outputs, and temporaries (activations and gradients in flight).
  """
  model = abstract_model(config, mesh)
  graphdef, state = nnx.split(model)
  tokens = jax.ShapeDtypeStruct(
    (batch, seq_len),
    jnp.int32,
    sharding=NamedSharding(mesh, sharding.logical_to_spec(("act_batch", None))),
  )

  def train_step(state, tokens_bt):
    def loss_fn(state):
      return lm_loss(nnx.merge(graphdef, state), tokens_bt)[0]

    loss, grads = jax.value_and_grad(loss_fn)(state)
    new_state = jax.tree.map(lambda p, g: (p - learning_rate * g).astype(p.dtype), state, grads)
    return new_state, loss

  state_shardings = jax.tree.map(lambda leaf: leaf.sharding, state)
  step = jax.jit(
    train_step,
    out_shardings=(state_shardings, NamedSharding(mesh, PartitionSpec())),
    donate_argnums=0,
  )
  with sharding.use_mesh(mesh):
    start = time.perf_counter()
    lowered = step.lower(state, tokens)
    lowered_at = time.perf_counter()
    compiled = lowered.compile()
    compiled_at = time.perf_counter()
  memory = compiled.memory_analysis()
  counts = param_counts(model)
  return {
    **counts,
    "mesh": dict(mesh.shape),
    "batch": batch,
    "seq_len": seq_len,
    "lower_seconds": lowered_at - start,
    "compile_seconds": compiled_at - lowered_at,
    "per_device_param_bytes": per_device_bytes(state),
    "per_device_argument_bytes": memory.argument_size_in_bytes,
    "per_device_output_bytes": memory.output_size_in_bytes,
    "per_device_temp_bytes": memory.temp_size_in_bytes,
  }


def compile_named(
  name: str, mesh: jax.sharding.Mesh, *, batch: int, seq_len: int, **overrides: Any
) -> dict[str, Any]:
  """`compile_train_step` for a named config (fields replaced by `overrides`), with its parameter
  counts checked against the published sizes, each rounded to the billions the card states."""
  config = get_config(name, **overrides)
  summary = {
    "config": name,
    **overrides,
    **compile_train_step(config, mesh, batch=batch, seq_len=seq_len),
  }
  published = PUBLISHED_SIZES.get(name)
  if published:
    summary["published"] = published
    summary["matches_published"] = all(
      round(summary[key] / 1e9) == round(value / 1e9) for key, value in published.items()
    )
  return summary
