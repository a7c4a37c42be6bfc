import jax
import jax.numpy as jnp
import pytest

from models import get_config
from models.perf.flops import count_flops, model_summary


def _spec(*shape, dtype=jnp.float32):
  return jax.ShapeDtypeStruct(shape, dtype)


def test_matmul_flops():
  assert count_flops(lambda x, w: x @ w, _spec(4, 8), _spec(8, 16)) == 2 * 4 * 8 * 16
  assert (
    count_flops(lambda x, w: jnp.einsum("bij,bjk->bik", x, w), _spec(3, 4, 5), _spec(3, 5, 6))
    == 2 * 3 * 4 * 5 * 6
  )
  assert count_flops(lambda x: jnp.tanh(x) + 1, _spec(4, 8)) == 0  # elementwise work is not counted


def test_scan_multiplies_its_body():
  def f(x, w):
    return jax.lax.scan(lambda c, _: (c @ w, None), x, length=5)[0]

  assert count_flops(f, _spec(4, 8), _spec(8, 8)) == 5 * 2 * 4 * 8 * 8


def test_ragged_dot_counts_each_row_once():
  f = jax.lax.ragged_dot
  assert count_flops(f, _spec(32, 8), _spec(4, 8, 16), _spec(4, dtype=jnp.int32)) == 2 * 32 * 8 * 16


def test_triangular_solve():
  def f(a, b):
    return jax.lax.linalg.triangular_solve(a, b, left_side=True, lower=True)

  assert count_flops(f, _spec(2, 6, 6), _spec(2, 6, 3)) == 2 * 6 * 6 * 3


def test_experts_cost_parameters_but_not_flops():
  """Doubling the experts at fixed top-k adds their weights, and only the router's matmul."""
  base = get_config("tiny")
  wide = base.replace(num_experts=2 * base.num_experts)
  small, big = model_summary(base, seq_len=16), model_summary(wide, seq_len=16)
  extra = base.num_experts
  per_layer = extra * 3 * base.d_model * base.expert_dim + base.d_model * extra
  assert big["total_params"] - small["total_params"] == base.num_layers * per_layer
  assert big["active_params"] - small["active_params"] == base.num_layers * base.d_model * extra
  router = 2 * base.d_model * extra * base.num_layers
  assert big["forward_flops_per_token"] - small["forward_flops_per_token"] == pytest.approx(router)
  assert small["flops_per_token"] == 3 * small["forward_flops_per_token"]
  # Every active weight is used in a matmul about once per token, attention comes on top.
  assert small["forward_flops_per_token"] >= 1.9 * small["active_params"]
