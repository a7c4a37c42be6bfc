import jax
import jax.numpy as jnp
import numpy as np
import pytest

from models import deltanet

# Jitted: op-by-op execution would compile every primitive of the scans separately.
chunked_gated_delta_rule = jax.jit(deltanet.chunked_gated_delta_rule, static_argnames="chunk")
recurrent_gated_delta_rule = jax.jit(deltanet.recurrent_gated_delta_rule)
causal_conv = jax.jit(deltanet.causal_conv)

B, T, H, K, V = 2, 29, 3, 8, 5


def _unit(x):
  return x / np.linalg.norm(x, axis=-1, keepdims=True)


def _inputs(seed=0):
  """Random inputs made with numpy: eager jax ops would each compile a kernel."""
  rng = np.random.default_rng(seed)
  q = _unit(rng.normal(size=(B, T, H, K))) * K**-0.5
  k = _unit(rng.normal(size=(B, T, H, K)))
  v = rng.normal(size=(B, T, H, V))
  g = -np.logaddexp(0.0, rng.normal(size=(B, T, H)))  # -softplus: log decays below 0
  beta = 1 / (1 + np.exp(-rng.normal(size=(B, T, H))))
  state = rng.normal(size=(B, H, K, V))
  # Segment starts mid-chunk, at a chunk boundary (8, 16) and at the last token.
  reset = np.zeros((B, T), bool)
  reset[0, [5, 16, 28]] = True
  reset[1, [8, 9]] = True
  floats = (jnp.asarray(a, jnp.float32) for a in (q, k, v, g, beta))
  return (*floats, jnp.asarray(reset), jnp.asarray(state, jnp.float32))


@pytest.mark.parametrize("chunk", [8, 64])
def test_chunked_equals_recurrent(chunk):
  args = _inputs()
  out_r, state_r = recurrent_gated_delta_rule(*args)
  out_c, state_c = chunked_gated_delta_rule(*args, chunk=chunk)
  np.testing.assert_allclose(out_c, out_r, atol=2e-5, rtol=1e-5)
  np.testing.assert_allclose(state_c, state_r, atol=2e-5, rtol=1e-5)


def test_chunked_gradients_equal_recurrent_gradients():
  q, k, v, g, beta, reset, state = _inputs(1)

  def loss(fn, q, k, v, g, beta, state):
    out, final = fn(q, k, v, g, beta, reset, state)
    return jnp.sum(jnp.sin(out)) + jnp.sum(final**2)

  grads_r = jax.jit(
    jax.grad(lambda *a: loss(deltanet.recurrent_gated_delta_rule, *a), argnums=range(6))
  )
  grads_c = jax.jit(
    jax.grad(
      lambda *a: loss(lambda *x: deltanet.chunked_gated_delta_rule(*x, chunk=8), *a),
      argnums=range(6),
    )
  )
  for gr, gc in zip(
    grads_r(q, k, v, g, beta, state), grads_c(q, k, v, g, beta, state), strict=True
  ):
    np.testing.assert_allclose(gc, gr, atol=1e-4, rtol=1e-4)


def test_unit_lower_inverse_and_its_gradient_match_a_dense_inverse():
  rng = np.random.default_rng(3)
  lower = jnp.asarray(np.tril(rng.normal(size=(2, 3, 16, 16)) * 0.3, -1), jnp.float32)
  weights = jnp.asarray(rng.normal(size=(2, 3, 16, 16)), jnp.float32)
  eye = jnp.eye(16, dtype=jnp.float32)

  def ours(lower):
    return jnp.sum(jnp.sin(deltanet._unit_lower_inverse(lower)) * weights)

  def dense(lower):  # the entries on and above the diagonal are not inputs: masked
    return jnp.sum(jnp.sin(jnp.linalg.inv(eye + jnp.tril(lower, -1))) * weights)

  np.testing.assert_allclose(
    jax.jit(deltanet._unit_lower_inverse)(lower), jnp.linalg.inv(eye + lower), atol=1e-5
  )
  np.testing.assert_allclose(
    jax.jit(jax.grad(ours))(lower), jax.jit(jax.grad(dense))(lower), atol=1e-4, rtol=1e-4
  )


def test_reset_forgets_the_past():
  q, k, v, g, beta, _, state = _inputs(2)
  reset = np.zeros((B, T), bool)
  reset[:, 10] = True
  out, _ = chunked_gated_delta_rule(q, k, v, g, beta, reset, state, chunk=8)
  # From the reset on, the output is that of a fresh start on the remaining tokens.
  fresh, _ = recurrent_gated_delta_rule(q[:, 10:], k[:, 10:], v[:, 10:], g[:, 10:], beta[:, 10:])
  np.testing.assert_allclose(out[:, 10:], fresh, atol=2e-5, rtol=1e-5)
  no_reset, _ = chunked_gated_delta_rule(q, k, v, g, beta, None, state, chunk=8)
  assert not np.allclose(no_reset[:, 10:], fresh, atol=1e-3)


def test_zero_beta_and_decay_steps_leave_the_state_unchanged():
  q, k, v, g, beta, _, state = _inputs(3)
  g, beta = np.array(g), np.array(beta)
  g[:, 20:] = 0.0
  beta[:, 20:] = 0.0
  _, full = chunked_gated_delta_rule(q, k, v, g, beta, None, state, chunk=8)
  _, prefix = recurrent_gated_delta_rule(
    q[:, :20], k[:, :20], v[:, :20], g[:, :20], beta[:, :20], None, state
  )
  np.testing.assert_allclose(full, prefix, atol=2e-5, rtol=1e-5)


def test_causal_conv_does_not_cross_segments():
  rng = np.random.default_rng(4)
  x, w = rng.normal(size=(1, 12, 3)).astype(np.float32), rng.normal(size=(4, 3)).astype(np.float32)
  zeros = np.zeros((1, 3, 3), np.float32)
  segments = np.array([[0] * 5 + [1] * 7])
  packed = causal_conv(x, w, zeros, segments)
  first = causal_conv(x[:, :5], w, zeros)
  second = causal_conv(x[:, 5:], w, zeros)
  np.testing.assert_allclose(packed, np.concatenate([first, second], axis=1), atol=1e-6)
  # Without segment ids the second segment sees the first one.
  assert not np.allclose(causal_conv(x, w, zeros)[:, 5:], second, atol=1e-3)


def test_causal_conv_with_a_prefix_continues_the_sequence():
  rng = np.random.default_rng(6)
  x, w = rng.normal(size=(2, 10, 3)).astype(np.float32), rng.normal(size=(4, 3)).astype(np.float32)
  whole = causal_conv(x, w, np.zeros((2, 3, 3), np.float32))
  tail = causal_conv(x[:, 6:], w, x[:, 3:6])
  np.testing.assert_allclose(tail, whole[:, 6:], atol=1e-6)
