"""Small building blocks shared by the mixers and the MoE: norm, rotary embedding, SwiGLU."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from models import sharding
from models.config import ModelConfig


def at_positions(x_bt: jax.Array, index_bk: jax.Array) -> jax.Array:
  """x [B, T, ...] at each row's positions ``index_bk`` [B, K]: [B, K, ...]."""
  index = index_bk.reshape(index_bk.shape + (1,) * (x_bt.ndim - 2))
  return jnp.take_along_axis(x_bt, index, axis=1)


def normal(std: float):
  return jax.nn.initializers.normal(std)


def rms_normalize(x: jax.Array, eps: float) -> jax.Array:
  """x / rms(x) over the last axis, in float32."""
  x = x.astype(jnp.float32)
  return x * jax.lax.rsqrt(jnp.mean(jnp.square(x), axis=-1, keepdims=True) + eps)


class RMSNorm(nnx.Module):
  """RMSNorm with a zero-centred scale: y = x / rms(x) * (1 + w), w initialised to 0.

  Qwen3.5 stores w, not 1 + w (transformers' `Qwen3_5MoeRMSNorm`), so checkpoints load unchanged.
  """

  def __init__(self, dim: int, config: ModelConfig, *, rngs: nnx.Rngs):
    self.eps = config.rms_norm_eps
    self.scale = sharding.param(
      jax.nn.initializers.zeros, rngs.params(), (dim,), ("norm",), config.weight_dtype
    )

  def __call__(self, x: jax.Array) -> jax.Array:
    y = rms_normalize(x, self.eps) * (1.0 + self.scale[...].astype(jnp.float32))
    return y.astype(x.dtype)


def rotary(x_bthd: jax.Array, positions_bt: jax.Array, rotary_dim: int, theta: float) -> jax.Array:
  """Rotates the first `rotary_dim` features of each head (partial RoPE, rotate-half layout).

  Text-only Qwen3.5 gives the three mRoPE sections the same position, which makes mRoPE this
  plain 1-D rotary embedding.
  """
  if rotary_dim == 0:
    return x_bthd
  inv_freq = 1.0 / theta ** (jnp.arange(0, rotary_dim, 2, dtype=jnp.float32) / rotary_dim)
  angles_btf = positions_bt.astype(jnp.float32)[..., None] * inv_freq  # [B, T, rotary_dim / 2]
  cos = jnp.cos(angles_btf)[:, :, None, :]
  sin = jnp.sin(angles_btf)[:, :, None, :]
  x_rot, x_pass = x_bthd[..., :rotary_dim], x_bthd[..., rotary_dim:]
  x1, x2 = jnp.split(x_rot.astype(jnp.float32), 2, axis=-1)
  rotated = jnp.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)
  return jnp.concatenate([rotated.astype(x_bthd.dtype), x_pass], axis=-1)


class SwiGLU(nnx.Module):
  """down(silu(x W_gate) * x W_up): the shared expert, and the dense baseline of the benchmark."""

  def __init__(self, config: ModelConfig, hidden_dim: int, *, rngs: nnx.Rngs):
    d, f, dtype = config.d_model, hidden_dim, config.weight_dtype
    init = normal(config.init_std)
    self.w_gate_df = sharding.param(init, rngs.params(), (d, f), ("embed", "mlp"), dtype)
    self.w_up_df = sharding.param(init, rngs.params(), (d, f), ("embed", "mlp"), dtype)
    self.w_down_fd = sharding.param(init, rngs.params(), (f, d), ("mlp", "embed"), dtype)
    self.dtype = config.compute_dtype

  def __call__(self, x_nd: jax.Array) -> jax.Array:
    x_nd = x_nd.astype(self.dtype)
    gate_nf = x_nd @ self.w_gate_df[...].astype(self.dtype)
    up_nf = x_nd @ self.w_up_df[...].astype(self.dtype)
    return (jax.nn.silu(gate_nf) * up_nf) @ self.w_down_fd[...].astype(self.dtype)
