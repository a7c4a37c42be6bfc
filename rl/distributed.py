"""Many processes, one program: JAX's multi-controller runtime for SFT and GRPO.

A TPU pod slice or a multi-node GPU cluster runs one process per host (or per GPU); each runs the
same script, ``jax.distributed.initialize`` connects them, and ``jax.devices()`` is then every
process's devices, so the trainers' mesh spans all of them. What differs per process is the data:
each loads only its own rows of the global batch (`local_rows`) and builds the global arrays from
them (`global_batch`). Anything written outside Orbax (metrics, summaries, exported configs) comes
from process 0 only (`is_primary`).

On one CPU host, ``--num_processes=2 --process_id=I --coordinator_address=127.0.0.1:PORT`` with
``XLA_FLAGS=--xla_force_host_platform_device_count=N`` runs the same thing as two processes of N
CPU devices each, talking over gloo (the tests do).
"""

from __future__ import annotations

import json
import os
import pickle
from collections.abc import Mapping
from typing import Any

import jax
import numpy as np
from absl import flags
from jax.experimental import multihost_utils
from jax.sharding import NamedSharding, PartitionSpec


def define_flags() -> None:
  """``--coordinator_address``, ``--num_processes``, ``--process_id``, ``--cluster_detect``:
  defaults from ``JAX_COORDINATOR_ADDRESS``, ``JAX_NUM_PROCESSES``, ``JAX_PROCESS_ID``."""
  env = os.environ
  flags.DEFINE_string(
    "coordinator_address",
    env.get("JAX_COORDINATOR_ADDRESS", ""),
    "host:port of process 0's coordinator; with --num_processes > 1 this process joins a "
    "multi-process run (jax.distributed). Default: $JAX_COORDINATOR_ADDRESS.",
  )
  flags.DEFINE_integer(
    "num_processes", int(env.get("JAX_NUM_PROCESSES", "1")), "Processes in the run."
  )
  flags.DEFINE_integer("process_id", int(env.get("JAX_PROCESS_ID", "0")), "This process's index.")
  flags.DEFINE_bool(
    "cluster_detect",
    False,
    "Let jax.distributed.initialize find the run from the cluster's environment (SLURM, Open "
    "MPI, Cloud TPU, Kubernetes) instead of the three flags above.",
  )


def initialize_from_flags() -> bool:
  """Joins the multi-process run the flags describe (a no-op for one process); True if joined."""
  f = flags.FLAGS
  if f.cluster_detect:
    return initialize(detect=True)
  return initialize(f.coordinator_address, f.num_processes, f.process_id)


def initialize(
  coordinator_address: str = "",
  num_processes: int = 1,
  process_id: int = 0,
  *,
  detect: bool = False,
) -> bool:
  """``jax.distributed.initialize`` for a run of `num_processes` > 1 (or `detect`: from the
  cluster's environment), with the CPU backend's collectives on gloo so CPU devices of different
  processes can talk; returns whether a multi-process run was joined. Call before any JAX
  computation."""
  if not detect and num_processes <= 1:
    return False
  if not detect:
    if not coordinator_address:
      raise ValueError(f"--num_processes={num_processes} needs --coordinator_address (host:port)")
    if not 0 <= process_id < num_processes:
      raise ValueError(f"--process_id={process_id} is not in [0, {num_processes})")
  jax.config.update("jax_cpu_collectives_implementation", "gloo")
  if detect:
    jax.distributed.initialize()
  else:
    jax.distributed.initialize(coordinator_address, num_processes, process_id)
  return True


def is_primary() -> bool:
  """Whether this process writes what is written once per run (metrics, summaries, configs)."""
  return jax.process_index() == 0


def row_range(sharding: NamedSharding, shape: tuple[int, ...]) -> tuple[int, int]:
  """The rows [start, stop) of a global array of `shape` that this process's devices hold under
  `sharding`; an error when they are not one block (the mesh would need rows of another
  process loaded here too)."""
  spans = set()
  for index in sharding.addressable_devices_indices_map(shape).values():
    rows = index[0]
    spans.add((rows.start or 0, shape[0] if rows.stop is None else rows.stop))
  start, stop = min(s for s, _ in spans), max(e for _, e in spans)
  covered = np.zeros(stop - start, bool)
  for s, e in spans:
    covered[s - start : e - start] = True
  if not covered.all():
    raise ValueError(f"this process's devices hold rows {sorted(spans)}, not one block")
  return start, stop


def own_rows(whole: Mapping[str, np.ndarray], sharding: NamedSharding) -> dict[str, np.ndarray]:
  """This process's `row_range` of each array of a whole batch (the same on every process):
  what it passes to `global_batch`. On one process, every row."""
  whole = {k: np.asarray(v) for k, v in whole.items()}
  if jax.process_count() == 1:
    return whole
  rows = len(next(iter(whole.values())))
  start, stop = row_range(sharding, (rows, 1))
  return {k: v[start:stop] for k, v in whole.items()}


def global_batch(batch: Mapping[str, np.ndarray], sharding: NamedSharding, rows: int) -> dict:
  """This process's rows of a batch (each ``[rows / processes, ...]``, in `row_range` order) as
  global arrays of `rows` rows sharded by `sharding` over their first axis (an array of more
  axes keeps the rest whole)."""
  out = {}
  for key, local in batch.items():
    local = np.asarray(local)
    spec = PartitionSpec(sharding.spec[0], *([None] * (local.ndim - 1)))
    out[key] = jax.make_array_from_process_local_data(
      NamedSharding(sharding.mesh, spec), local, (rows, *local.shape[1:])
    )
  return out


def local_rows(x: jax.Array) -> np.ndarray:
  """The rows of a global array that this process's devices hold, in order (one copy of each)."""
  if x.is_fully_addressable:
    return np.asarray(jax.device_get(x))
  parts: dict[int, np.ndarray] = {}
  for shard in x.addressable_shards:
    parts.setdefault(shard.index[0].start or 0, np.asarray(shard.data))
  return np.concatenate([parts[k] for k in sorted(parts)])


def sum_over_processes(*values: float) -> tuple[float, ...]:
  """Each value summed over every process (the values themselves on one process)."""
  if jax.process_count() == 1:
    return values
  gathered = multihost_utils.process_allgather(np.asarray(values, np.float64))
  return tuple(float(v) for v in np.asarray(gathered).reshape(jax.process_count(), -1).sum(0))


def all_processes(value: int, reduce=min) -> int:
  """`reduce` (min, max, ...) of an integer over every process."""
  if jax.process_count() == 1:
    return value
  gathered = multihost_utils.process_allgather(np.asarray([value], np.int64))
  return int(reduce(np.asarray(gathered).ravel().tolist()))


def gather_json(item: Mapping[str, Any]) -> dict[str, Any]:
  """Every process's JSON object merged into one (the same on every process): keys must not
  collide. Used for the data iterators' states, each process's own shards under their keys."""
  merged: dict[str, Any] = {}
  for part in gather_objects(json.loads(json.dumps(item))):
    if clash := set(part) & set(merged):
      raise ValueError(f"processes wrote the same keys {sorted(clash)}")
    merged.update(part)
  return merged


def gather_objects(obj: Any) -> list[Any]:
  """Every process's (picklable) `obj`, in process order, on every process."""
  if jax.process_count() == 1:
    return [obj]
  data = np.frombuffer(pickle.dumps(obj), np.uint8)
  longest = all_processes(len(data), max)
  padded = np.zeros(longest + 8, np.uint8)
  padded[:8] = np.frombuffer(np.int64(len(data)).tobytes(), np.uint8)
  padded[8 : 8 + len(data)] = data
  rows = np.asarray(multihost_utils.process_allgather(padded)).reshape(jax.process_count(), -1)
  out = []
  for row in rows:
    length = int(np.frombuffer(row[:8].tobytes(), np.int64)[0])
    out.append(pickle.loads(row[8 : 8 + length].tobytes()))
  return out


def local_mesh(mesh: jax.sharding.Mesh) -> jax.sharding.Mesh:
  """A mesh of this process's devices with `mesh`'s axis names: the batch axis ``fsdp`` takes
  them all (where one process samples on its own, e.g. GRPO's rollouts)."""
  devices = np.asarray(jax.local_devices())
  shape = [1] * len(mesh.axis_names)
  shape[mesh.axis_names.index("fsdp")] = devices.size
  return jax.sharding.Mesh(
    devices.reshape(shape), mesh.axis_names, axis_types=(jax.sharding.AxisType.Auto,) * len(shape)
  )


def to_local(tree, mesh: jax.sharding.Mesh):
  """A pytree of global arrays copied whole to every process, each leaf placed on `mesh` (a
  `local_mesh`) with its own partition spec: a process-local copy of, e.g., the parameters."""

  def copy(x):
    if not isinstance(x, jax.Array):
      return x
    spec = x.sharding.spec if isinstance(x.sharding, NamedSharding) else PartitionSpec()
    value = x if x.is_fully_addressable else multihost_utils.process_allgather(x, tiled=True)
    return jax.device_put(np.asarray(value), NamedSharding(mesh, spec))

  return jax.tree.map(copy, tree)


def barrier(name: str) -> None:
  """Waits until every process reaches the barrier `name` (nothing on one process)."""
  if jax.process_count() > 1:
    multihost_utils.sync_global_devices(name)
