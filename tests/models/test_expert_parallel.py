"""Expert parallelism (`models.expert_parallel`): the all-to-all dispatch equals the loop over
experts, and a model using it on an expert-parallel mesh equals the model unsharded."""

import jax.numpy as jnp
import numpy as np
import pytest

from models import get_config
from models.expert_parallel import capacity, dispatch_all_to_all
from models.moe import dispatch_sort, route
from tests.rl.fake_devices import run_module


def test_capacity_is_every_row_or_a_share():
  assert capacity(64, 4, 0.0) == 64  # exact: room for every row at one shard
  assert capacity(64, 4, 1.0) == 16 and capacity(64, 4, 1.25) == 20
  assert capacity(64, 4, 100.0) == 64 and capacity(3, 4, 0.1) == 1


def test_without_a_mesh_it_is_the_sort_dispatch():
  rng = np.random.default_rng(1)
  x = jnp.asarray(rng.normal(size=(2, 6, 4)), jnp.float32)
  _, weights, experts = route(x @ jnp.asarray(rng.normal(size=(4, 4)), jnp.float32), 2)
  gate, up = (jnp.asarray(rng.normal(size=(4, 4, 3)), jnp.float32) for _ in range(2))
  down = jnp.asarray(rng.normal(size=(4, 3, 4)), jnp.float32)
  got = dispatch_all_to_all(x, weights, experts, gate, up, down, 0)
  for g in range(2):
    want = dispatch_sort(x[g], weights[g], experts[g], gate, up, down, 0)
    np.testing.assert_allclose(got[g], want, atol=1e-6)
  assert get_config("tiny", moe_backend="all_to_all").moe_backend == "all_to_all"


@pytest.mark.slow
@pytest.mark.heavy  # 8 fake devices in a subprocess, ~1-2 min: make test-all and CI run it
def test_all_to_all_equals_the_loop_on_an_expert_parallel_mesh():
  result = run_module("tests.models.expert_parallel_check")
  d = result["dispatch"]
  assert d["expert_shards"] == 4
  assert abs(d["loss"] - d["loss_all_to_all"]) <= 1e-5 * max(1.0, abs(d["loss"]))
  assert d["max_out_diff"] <= 1e-5 * max(1.0, d["max_out"])
  assert d["max_grad_diff"] <= 1e-5 * max(1.0, d["max_grad"])
  # capacity factor 1: some rows dropped, the rest exactly the loop's
  assert d["capacity_dropped_rows"] > 0 and d["capacity_vs_exact_diff"] > 1e-3
  assert d["capacity_max_out_diff"] <= 1e-5 * max(1.0, d["max_out"])
  m = result["model"]
  assert abs(m["loss"] - m["loss_sharded"]) <= 1e-5
  assert m["max_grad_diff"] <= 1e-5 * max(1.0, m["max_grad"])
  # each device keeps 2 of the 8 experts (the leading axes: scanned blocks and sublayers)
  assert result["expert_shard_shape"][2] == 2
