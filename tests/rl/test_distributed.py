"""The multi-process helpers on one process (the 2-process runs are in test_multiprocess.py)."""

import jax
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec

import models
from rl import distributed


def test_one_process_joins_nothing():
  assert distributed.initialize("", 1, 0) is False
  assert distributed.is_primary()


@pytest.mark.parametrize(
  ("args", "match"),
  [(("", 2, 0), "needs --coordinator_address"), (("127.0.0.1:1", 2, 2), "not in \\[0, 2\\)")],
)
def test_bad_process_flags_fail_clearly(args, match):
  with pytest.raises(ValueError, match=match):
    distributed.initialize(*args)


def test_one_process_holds_every_row_and_gathers_itself():
  mesh = models.make_mesh()
  sharding = NamedSharding(mesh, PartitionSpec(("data", "fsdp"), None))
  assert distributed.row_range(sharding, (8, 3)) == (0, 8)
  rows = np.arange(24, dtype=np.int32).reshape(8, 3)
  batch = distributed.global_batch({"x": rows}, sharding, 8)
  np.testing.assert_array_equal(distributed.local_rows(batch["x"]), rows)
  assert distributed.gather_objects({"a": 1}) == [{"a": 1}]
  assert distributed.gather_json({"0": {"step": 3}}) == {"0": {"step": 3}}
  assert distributed.sum_over_processes(2.0, 3.0) == (2.0, 3.0)
  assert distributed.all_processes(5, max) == 5
  local = distributed.to_local({"w": batch["x"]}, distributed.local_mesh(mesh))
  np.testing.assert_array_equal(np.asarray(local["w"]), rows)
  assert len(jax.local_devices()) == distributed.local_mesh(mesh).shape["fsdp"]
