import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from models import get_config, use_mesh
from models.moe import (
  DISPATCH,
  MoE,
  decode_dense,
  dense_experts,
  dispatch_dense,
  dispatch_groups,
  load_balancing,
  num_groups,
  route,
)
from models.tiled_experts import sort_tile_rows

N, D, F, E, K = 48, 16, 8, 8, 2


def _weights(seed=0):
  rng = np.random.default_rng(seed)
  shapes = [(N, D), (D, E), (E, D, F), (E, D, F), (E, F, D)]
  return [
    jnp.asarray(rng.normal(size=s) * (1.0 if i < 2 else 0.3), jnp.float32)
    for i, s in enumerate(shapes)
  ]


@functools.partial(jax.jit, static_argnums=(0, 1, 2))
def _loss_and_grads(backend, tile, groups, skew, *weights):
  """groups=0: `DISPATCH[backend]` on all N tokens; else `dispatch_groups` on `groups` groups."""

  def loss(x, w_router, w_gate, w_up, w_down):
    logits = x @ w_router + skew * jnp.arange(E)  # skew > 0 sends most rows to the last experts
    _, weights, experts = route(logits, K)
    if groups:
      x, weights, experts = (a.reshape(groups, N // groups, -1) for a in (x, weights, experts))
      out = dispatch_groups(backend, x, weights, experts, w_gate, w_up, w_down, tile)
    else:
      out = DISPATCH[backend](x, weights, experts, w_gate, w_up, w_down, tile)
    return jnp.sum(jnp.sin(out))

  return jax.value_and_grad(loss, argnums=range(5))(*weights)


@pytest.mark.parametrize(
  ("backend", "tile", "groups", "skew"),
  [
    ("ragged_dot", 0, 0, 0.0),
    ("sort", 0, 0, 0.0),
    ("sort", 4, 0, 0.0),
    ("sort", 4, 0, 50.0),
    # Groups route their own tokens: the same result, each group sorted and tiled on its own.
    ("loop", 0, 3, 0.0),
    ("ragged_dot", 0, 4, 0.0),
    ("sort", 0, 1, 0.0),
    ("sort", 0, 4, 0.0),
    ("sort", 4, 3, 50.0),
  ],
)
def test_backends_agree_with_the_loop_reference(backend, tile, groups, skew):
  loss_ref, grads_ref = _loss_and_grads("loop", 0, 0, skew, *_weights())
  loss, grads = _loss_and_grads(backend, tile, groups, skew, *_weights())
  np.testing.assert_allclose(loss, loss_ref, rtol=1e-5)
  for g, g_ref in zip(grads, grads_ref, strict=True):  # x, router, gate, up, down
    np.testing.assert_allclose(g, g_ref, atol=2e-5, rtol=1e-4)


def test_route_renormalises_the_top_k():
  logits = jnp.log(jnp.array([[0.1, 0.4, 0.2, 0.3]]))
  probs, weights, experts = route(logits, 2)
  np.testing.assert_allclose(probs, [[0.1, 0.4, 0.2, 0.3]], rtol=1e-6)
  assert experts.tolist() == [[1, 3]]
  np.testing.assert_allclose(weights, [[0.4 / 0.7, 0.3 / 0.7]], rtol=1e-6)


def test_load_balancing_golden_values():
  num = 4
  uniform = jnp.full((num, num), 1 / num)
  spread = jnp.arange(num)[:, None]  # token i -> expert i
  balanced = load_balancing(uniform, spread, jnp.ones(num, bool))
  np.testing.assert_allclose(balanced.aux_loss, 1.0, rtol=1e-6)  # E * sum(1/4 * 1/4) * 4
  np.testing.assert_allclose(balanced.expert_load, [0.25] * 4)
  collapsed = load_balancing(
    jax.nn.one_hot(jnp.zeros(num, int), num), jnp.zeros((num, 1), int), jnp.ones(num, bool)
  )
  np.testing.assert_allclose(collapsed.aux_loss, float(num))  # all tokens, all probability: E
  np.testing.assert_allclose(collapsed.expert_load, [1, 0, 0, 0])
  # Masked tokens do not count: only token 0 (expert 0) and token 1 (expert 1) remain.
  masked = load_balancing(uniform, spread, jnp.array([True, True, False, False]))
  np.testing.assert_allclose(masked.expert_load, [0.5, 0.5, 0, 0])


@pytest.mark.parametrize(
  ("rows", "experts", "tile"), [(16, 8, 8), (4096, 64, 16), (65536, 64, 256), (10**7, 8, 512)]
)
def test_sort_tile_heights(rows, experts, tile):
  assert sort_tile_rows(rows, experts) == tile


@nnx.jit
def _moe_layer(moe, x, mask):  # compiled: op by op, the sort dispatch is several times slower
  return moe(x, mask)


@pytest.mark.parametrize("backend", ["sort", "ragged_dot"])
def test_moe_layer_groups_give_the_same_output_and_statistics(backend):
  config = get_config("tiny", moe_backend=backend)
  x = jnp.asarray(np.random.default_rng(1).normal(size=(4, 6, config.d_model)), jnp.float32)
  mask = jnp.arange(6)[None, :] < jnp.array([6, 3, 5, 1])[:, None]
  results = []
  for groups in (1, 4):
    with use_mesh(None):
      moe = MoE(config.replace(moe_groups=groups), rngs=nnx.Rngs(0))
    assert num_groups(moe.config, 4) == groups
    results.append(_moe_layer(moe, x, mask))
  (out, stats), (out_g, stats_g) = results
  np.testing.assert_allclose(out_g, out, atol=1e-6, rtol=1e-5)
  np.testing.assert_allclose(stats_g.aux_loss, stats.aux_loss, rtol=1e-6)
  np.testing.assert_allclose(stats_g.expert_load, stats.expert_load, rtol=1e-6)
  assert num_groups(config, 4) == 1  # automatic, without a mesh: one group
  with pytest.raises(ValueError, match="does not divide"):
    num_groups(config.replace(moe_groups=3), 4)


def test_dense_dispatch_agrees_with_the_loop_reference():
  """The decoding path: every expert on every token through two plain matmuls."""
  x, w_router, w_gate, w_up, w_down = _weights(seed=1)
  _, weights, experts = route(x @ w_router, K)
  ref = DISPATCH["loop"](x, weights, experts, w_gate, w_up, w_down, 0)
  out = jax.jit(dispatch_dense)(x, weights, experts, dense_experts(w_gate, w_up, w_down))
  np.testing.assert_allclose(out, ref, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(("tokens", "dense"), [(1, False), (3, False), (4, True), (16, True)])
def test_decoding_runs_the_experts_densely_once_every_expert_is_expected_in_use(tokens, dense):
  assert decode_dense(get_config("tiny", num_experts=8, num_experts_per_tok=2), tokens) is dense
