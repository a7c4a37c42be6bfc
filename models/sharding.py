"""Logical axis names and the one table that maps them onto the device mesh.

Layers name logical axes only: parameters through `param`, activations through `constrain`. The
mesh always has the four axes of `MESH_AXES` (size 1 where unused), so every rule resolves.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Sequence

import jax
import numpy as np
from flax import nnx
from jax.sharding import AxisType, Mesh, PartitionSpec

MESH_AXES = ("data", "fsdp", "tensor", "expert")

# logical axis -> mesh axis (or axes, or None for replicated).
RULES: tuple[tuple[str, str | tuple[str, ...] | None], ...] = (
  # parameters
  ("vocab", "tensor"),
  ("embed", "fsdp"),
  ("q_heads", "tensor"),
  ("kv_heads", None),  # 2 KV heads in the full model: fewer than any useful tensor width
  ("head_dim", None),
  ("linear_k_heads", "tensor"),
  ("linear_v_heads", "tensor"),
  ("conv", None),
  ("mlp", "tensor"),
  ("expert", "expert"),
  ("expert_mlp", "tensor"),
  ("layers", None),  # the scanned block axis
  ("sublayers", None),  # the scanned DeltaNet layers within a block
  ("norm", None),
  # activations
  # Outside the MoE the expert axis is more data parallelism: every device gets its own rows.
  ("act_batch", ("data", "fsdp", "expert")),
  ("act_seq", None),
  ("act_embed", None),
  ("act_heads", "tensor"),
  ("act_vocab", "tensor"),
)

_RULES = dict(RULES)


def logical_to_spec(names: Sequence[str | None]) -> PartitionSpec:
  """The mesh PartitionSpec for a tuple of logical axis names."""
  return PartitionSpec(*(_RULES[n] if n is not None else None for n in names))


def make_mesh(
  data: int = 1, fsdp: int = -1, tensor: int = 1, expert: int = 1, devices=None
) -> Mesh:
  """A mesh over `devices` (all by default); one size may be -1 to take the remaining devices."""
  devices = list(jax.devices() if devices is None else devices)
  shape = [data, fsdp, tensor, expert]
  if shape.count(-1) > 1:
    raise ValueError("at most one mesh axis may be -1")
  known = math.prod(s for s in shape if s != -1)
  if -1 in shape:
    shape[shape.index(-1)] = len(devices) // known
  if math.prod(shape) != len(devices):
    raise ValueError(
      f"mesh {dict(zip(MESH_AXES, shape, strict=True))} does not cover {len(devices)} devices"
    )
  # Auto axes: jax.make_mesh now defaults to Explicit, which NNX's eager sharding does not expect.
  return Mesh(np.asarray(devices).reshape(shape), MESH_AXES, axis_types=(AxisType.Auto,) * 4)


@contextlib.contextmanager
def use_mesh(mesh: Mesh | None) -> Iterator[None]:
  """Context for building and running the model: sharded under `mesh`, plain when it is None."""
  with nnx.logical_axis_rules(RULES):
    if mesh is None:
      with nnx.use_eager_sharding(False):
        yield
    else:
      with jax.set_mesh(mesh):
        yield


def param(init, key: jax.Array, shape: Sequence[int], names: Sequence[str | None], dtype):
  """An `nnx.Param` annotated with logical axis names (sharded eagerly when a mesh is set)."""
  if len(names) != len(shape):
    raise ValueError(f"{len(names)} axis names {names} for shape {shape}")
  return nnx.Param(init(key, tuple(shape), dtype), out_sharding=tuple(names))


def mesh_shards(name: str) -> int:
  """How many ways the current mesh splits logical axis `name` (1 when no mesh is set)."""
  mesh = jax.sharding.get_abstract_mesh()
  if mesh.empty:
    return 1
  axes = _RULES[name]
  axes = () if axes is None else (axes,) if isinstance(axes, str) else axes
  return math.prod(mesh.shape[a] for a in axes)


def constrain(x: jax.Array, names: Sequence[str | None]) -> jax.Array:
  """Pins an activation's sharding by logical names; a no-op when no mesh is set."""
  if jax.sharding.get_abstract_mesh().empty:
    return x
  return jax.lax.with_sharding_constraint(x, logical_to_spec(names))
