"""Causal block-skipping attention equals the full masked attention, values and gradients."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from models.attention import _gqa_attention, causal_block_size


def _inputs(b=2, t=64, h=4, g=2, d=8, seed=0):
  """q [B, T, H, D]; k, v [B, G, T, D] (the cache's heads-major layout)."""
  rng = np.random.default_rng(seed)
  q = jnp.asarray(rng.normal(size=(b, t, h, d)), jnp.float32)
  k, v = (jnp.asarray(rng.normal(size=(b, g, t, d)), jnp.float32) for _ in range(2))
  segments = jnp.asarray(np.where(np.arange(t) < t // 3, 1, 2)[None].repeat(b, 0))
  segments = segments.at[1, t - 5 :].set(0)  # padding
  index = jnp.arange(t)
  mask = (index[None, :] <= index[:, None])[None] & (segments[:, :, None] == segments[:, None, :])
  return q, k, v, mask


@pytest.mark.parametrize("block", [8, 16, 32])
def test_causal_blocks_equal_full_attention(block):
  # Compiled, as training runs it: op by op, the unrolled blocks' many differently shaped slices
  # and their gradients each compile alone (several times slower at 8 blocks).
  q, k, v, mask = _inputs()
  attention = jax.jit(_gqa_attention, static_argnums=4)
  full = attention(q, k, v, mask, 0)
  np.testing.assert_allclose(attention(q, k, v, mask, block), full, rtol=1e-5, atol=1e-6)

  def loss(q, k, v, blk):
    return jnp.sum(jnp.sin(_gqa_attention(q, k, v, mask, blk)))

  grad = jax.jit(jax.grad(loss, argnums=(0, 1, 2)), static_argnums=3)
  grads, grads_full = grad(q, k, v, block), grad(q, k, v, 0)
  for a, b in zip(grads, grads_full, strict=True):
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


def test_grouped_heads_read_their_kv_head():
  """Query head h reads KV head h // (H / G): compared with a per-head loop in numpy."""
  q, k, v, mask = _inputs(b=1, t=16, h=4, g=2, d=4, seed=1)
  out = np.asarray(_gqa_attention(q, k, v, mask, 8))
  q, k, v, mask = map(np.asarray, (q, k, v, mask))
  for head in range(4):
    kv = head // 2
    logits = q[0, :, head] @ k[0, kv].T / 2.0
    logits = np.where(mask[0], logits, -np.inf)
    probs = np.exp(logits - logits.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    np.testing.assert_allclose(out[0, :, head], probs @ v[0, kv], rtol=1e-5, atol=1e-6)


def test_block_size_follows_the_row_length():
  assert causal_block_size(256) == 0  # one block: nothing to skip
  assert causal_block_size(300) == 0  # does not split evenly
  assert causal_block_size(2048) == 256
  assert causal_block_size(16384) == 1024  # at most 16 unrolled blocks
