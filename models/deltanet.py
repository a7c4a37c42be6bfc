"""Gated DeltaNet: linear attention with a decayed delta-rule state, in chunked and recurrent form.

Per value head the state S [K, V] evolves as (Yang et al., "Gated Delta Networks")
    S_t = exp(g_t) S_{t-1} + k_t beta_t (v_t - exp(g_t) S_{t-1}^T k_t)^T,    o_t = S_t^T q_t.
`recurrent_gated_delta_rule` runs this token by token (decoding, and the test reference);
`chunked_gated_delta_rule` computes the same thing a chunk at a time with matmuls (training and
prefill). Packed sequences reset the state at every segment start in both forms.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from flax import nnx, struct

from models import sharding
from models.config import ModelConfig
from models.layers import normal, rms_normalize


@struct.dataclass
class DeltaNetCache:
  """The last K-1 convolution inputs and the recurrent state of each row."""

  conv_q: jax.Array  # [B, K-1, Hk, Dk]
  conv_k: jax.Array  # [B, K-1, Hk, Dk]
  conv_v: jax.Array  # [B, K-1, Hv, Dv]
  state_bhkv: jax.Array  # [B, Hv, Dk, Dv], float32

  @classmethod
  def zeros(cls, config: ModelConfig, batch: int) -> DeltaNetCache:
    width = config.linear_conv_kernel - 1
    hk, hv = config.linear_num_key_heads, config.linear_num_value_heads
    dk, dv = config.linear_key_head_dim, config.linear_value_head_dim
    dtype = config.compute_dtype
    return cls(
      conv_q=jnp.zeros((batch, width, hk, dk), dtype),
      conv_k=jnp.zeros((batch, width, hk, dk), dtype),
      conv_v=jnp.zeros((batch, width, hv, dv), dtype),
      state_bhkv=jnp.zeros((batch, hv, dk, dv), jnp.float32),
    )


def recurrent_gated_delta_rule(
  q_bthk, k_bthk, v_bthv, g_bth, beta_bth, reset_bt=None, state_bhkv=None
):
  """The delta rule one token at a time. q, k: [B, T, H, K] (normalized); returns out, state."""
  b, t, h, dk = k_bthk.shape
  dv = v_bthv.shape[-1]
  if state_bhkv is None:
    state_bhkv = jnp.zeros((b, h, dk, dv), jnp.float32)
  if reset_bt is None:
    reset_bt = jnp.zeros((b, t), bool)
  keep_bt = 1.0 - reset_bt.astype(jnp.float32)

  def step(s_bhkv, inputs):
    q, k, v, g, beta, keep = inputs
    s_bhkv = s_bhkv * (jnp.exp(g) * keep[:, None])[..., None, None]
    predicted_bhv = jnp.einsum("bhkv,bhk->bhv", s_bhkv, k)
    delta_bhv = (v - predicted_bhv) * beta[..., None]
    s_bhkv = s_bhkv + jnp.einsum("bhk,bhv->bhkv", k, delta_bhv)
    return s_bhkv, jnp.einsum("bhkv,bhk->bhv", s_bhkv, q)

  inputs = (q_bthk, k_bthk, v_bthv, g_bth, beta_bth, keep_bt)
  inputs = jax.tree.map(lambda x: jnp.moveaxis(x.astype(jnp.float32), 1, 0), inputs)
  state_bhkv, out_tbhv = jax.lax.scan(step, state_bhkv.astype(jnp.float32), inputs)
  return jnp.moveaxis(out_tbhv, 0, 1), state_bhkv


def chunked_gated_delta_rule(
  q_bthk, k_bthk, v_bthv, g_bth, beta_bth, reset_bt=None, state_bhkv=None, chunk: int = 64
):
  """The delta rule a chunk of C tokens at a time; same arguments and results as the recurrence.

  Within a chunk the C delta updates collapse, via the UT transform, into one unit-lower-
  triangular system; only the chunk-to-chunk state passing is sequential.
  """
  b, t, h, dk = k_bthk.shape
  dv = v_bthv.shape[-1]
  c = min(chunk, t)
  pad = (-t) % c
  n = (t + pad) // c
  if state_bhkv is None:
    state_bhkv = jnp.zeros((b, h, dk, dv), jnp.float32)
  if reset_bt is None:
    reset_bt = jnp.zeros((b, t), bool)

  def to_chunks(x):  # [B, T, H, ...] -> [B, H, N, C, ...]; padded steps have g = beta = 0: no-ops
    x = jnp.pad(x.astype(jnp.float32), [(0, 0), (0, pad)] + [(0, 0)] * (x.ndim - 2))
    x = x.reshape(b, n, c, *x.shape[2:])
    return jnp.moveaxis(x, 3, 1) if x.ndim > 3 else x[:, None]

  q, k, v, g, beta = map(to_chunks, (q_bthk, k_bthk, v_bthv, g_bth, beta_bth))
  seg = jnp.cumsum(to_chunks(reset_bt), axis=-1)  # [B, 1, N, C]: resets seen so far in the chunk
  cum = jnp.cumsum(g, axis=-1)  # [B, H, N, C]: log decay from the chunk start

  causal_cc = jnp.tril(jnp.ones((c, c), bool))
  linked = causal_cc & (seg[..., :, None] == seg[..., None, :])  # j <= i in the same segment
  decay_ij = jnp.exp(jnp.where(linked, cum[..., :, None] - cum[..., None, :], -jnp.inf))
  from_start = jnp.where(seg == 0, jnp.exp(cum), 0.0)  # decay of the incoming state, 0 after reset
  to_end = jnp.where(seg == seg[..., -1:], jnp.exp(cum[..., -1:] - cum), 0.0)
  chunk_decay = jnp.where(seg[..., -1] == 0, jnp.exp(cum[..., -1]), 0.0)  # [B, H, N]

  k_beta = k * beta[..., None]
  # (I + strictly_lower(beta_i k_i.k_j decay_ij)) [u | w] = [beta v | beta k decay_from_start]
  system = jnp.tril((k_beta @ jnp.swapaxes(k, -1, -2)) * decay_ij, -1)
  rhs = jnp.concatenate([v * beta[..., None], k_beta * from_start[..., None]], axis=-1)
  solved = _unit_lower_inverse(system) @ rhs
  values_u, keys_w = solved[..., :dv], solved[..., dv:]
  intra = (q @ jnp.swapaxes(k, -1, -2)) * decay_ij  # [B, H, N, C, C]
  q_start = q * from_start[..., None]
  k_end = k * to_end[..., None]

  def step(s_bhkv, xs):
    u, w, q_s, attn, k_e, decay = xs
    v_new = u - w @ s_bhkv  # the part of each value the incoming state does not predict
    out = q_s @ s_bhkv + attn @ v_new
    s_bhkv = s_bhkv * decay[..., None, None] + jnp.swapaxes(k_e, -1, -2) @ v_new
    return s_bhkv, out

  xs = (values_u, keys_w, q_start, intra, k_end, chunk_decay)
  xs = jax.tree.map(lambda x: jnp.moveaxis(x, 2, 0), xs)
  state_bhkv, out_nbhcv = jax.lax.scan(step, state_bhkv.astype(jnp.float32), xs)
  out_bthv = jnp.moveaxis(out_nbhcv, 0, 2).reshape(b, h, n * c, dv).swapaxes(1, 2)
  return out_bthv[:, :t], state_bhkv


@jax.custom_vjp
def _unit_lower_inverse(lower_cc: jax.Array) -> jax.Array:
  """(I + L)^-1 for strictly lower-triangular L [..., C, C], by forward substitution over rows.

  Row i of the inverse is e_i - L[i] @ inverse (rows i and later are still zero). XLA's CPU
  triangular_solve deadlocks under its concurrent scheduler inside this model's loops, and this
  scan of matmuls runs the same everywhere. Its gradient is the inverse's own (below): autodiff
  through the scan would keep every intermediate inverse, C copies of it, for the backward pass.
  """
  c = lower_cc.shape[-1]
  eye = jnp.eye(c, dtype=lower_cc.dtype)

  def row(inverse, i):
    lower_i = jax.lax.dynamic_index_in_dim(lower_cc, i, axis=-2, keepdims=False)
    new_row = eye[i] - jnp.einsum("...j,...jk->...k", lower_i, inverse)
    return jax.lax.dynamic_update_index_in_dim(inverse, new_row, i, axis=-2), None

  inverse, _ = jax.lax.scan(row, jnp.zeros_like(lower_cc), jnp.arange(c))
  return inverse


def _unit_lower_inverse_fwd(lower_cc):
  inverse = _unit_lower_inverse(lower_cc)
  return inverse, inverse


def _unit_lower_inverse_bwd(inverse, grad_inverse):
  # X = (I + L)^-1, dX = -X dL X, so the cotangent of L is -X^T G X^T; the substitution reads
  # only the entries below the diagonal, so the others get none.
  inverse_t = jnp.swapaxes(inverse, -1, -2)
  return (jnp.tril(-(inverse_t @ grad_inverse @ inverse_t), -1),)


_unit_lower_inverse.defvjp(_unit_lower_inverse_fwd, _unit_lower_inverse_bwd)


def causal_conv(x_bt, w_k, prefix_bk, segment_ids_bt=None):
  """Depthwise causal convolution over time, then SiLU; `prefix_bk` holds the K-1 earlier inputs.

  x_bt: [B, T, ...channels], w_k: [K, ...channels], prefix_bk: [B, K-1, ...channels]. With
  segment ids, a tap that reaches into an earlier segment is dropped.
  """
  width, t = w_k.shape[0], x_bt.shape[1]
  xp = jnp.concatenate([prefix_bk.astype(x_bt.dtype), x_bt], axis=1)  # [B, K-1+T, ...]
  out = jnp.zeros(x_bt.shape, jnp.float32)
  for s in range(width):  # tap s reads the input `width - 1 - s` steps back
    tap = xp[:, s : s + t].astype(jnp.float32) * w_k[s].astype(jnp.float32)
    lag = width - 1 - s
    if segment_ids_bt is not None and lag:
      earlier = jnp.pad(segment_ids_bt, [(0, 0), (lag, 0)], constant_values=-1)[:, :t]
      same = (earlier == segment_ids_bt).reshape(*segment_ids_bt.shape, *([1] * (x_bt.ndim - 2)))
      tap = tap * same
    out = out + tap
  return jax.nn.silu(out).astype(x_bt.dtype)


def _last_inputs(prefix_bk, x_bt, valid_b):
  """The K-1 inputs before each row's next token: its window ending after `valid_b` new tokens."""
  xp = jnp.concatenate([prefix_bk.astype(x_bt.dtype), x_bt], axis=1)
  width = prefix_bk.shape[1]

  def window(row, start):
    return jax.lax.dynamic_slice_in_dim(row, start, width, axis=0)

  return jax.vmap(window)(xp, valid_b)


def l2_normalize(x: jax.Array, eps: float = 1e-6) -> jax.Array:
  x = x.astype(jnp.float32)
  return x * jax.lax.rsqrt(jnp.sum(jnp.square(x), axis=-1, keepdims=True) + eps)


class GatedDeltaNet(nnx.Module):
  """The token mixer of three layers in four: convolved q, k, v; gated delta rule; gated norm."""

  def __init__(self, config: ModelConfig, *, rngs: nnx.Rngs):
    d, hk, hv = config.d_model, config.linear_num_key_heads, config.linear_num_value_heads
    dk, dv, width = (
      config.linear_key_head_dim,
      config.linear_value_head_dim,
      config.linear_conv_kernel,
    )
    init, dtype = normal(config.init_std), config.weight_dtype
    conv_init = jax.nn.initializers.uniform(2 / math.sqrt(width))  # PyTorch's Conv1d bound
    p = rngs.params
    self.w_q_dhk = sharding.param(
      init, p(), (d, hk, dk), ("embed", "linear_k_heads", "head_dim"), dtype
    )
    self.w_k_dhk = sharding.param(
      init, p(), (d, hk, dk), ("embed", "linear_k_heads", "head_dim"), dtype
    )
    self.w_v_dhk = sharding.param(
      init, p(), (d, hv, dv), ("embed", "linear_v_heads", "head_dim"), dtype
    )
    self.w_z_dhk = sharding.param(
      init, p(), (d, hv, dv), ("embed", "linear_v_heads", "head_dim"), dtype
    )
    self.w_beta_dh = sharding.param(init, p(), (d, hv), ("embed", "linear_v_heads"), dtype)
    self.w_alpha_dh = sharding.param(init, p(), (d, hv), ("embed", "linear_v_heads"), dtype)
    self.conv_q = sharding.param(
      conv_init, p(), (width, hk, dk), ("conv", "linear_k_heads", "head_dim"), dtype
    )
    self.conv_k = sharding.param(
      conv_init, p(), (width, hk, dk), ("conv", "linear_k_heads", "head_dim"), dtype
    )
    self.conv_v = sharding.param(
      conv_init, p(), (width, hv, dv), ("conv", "linear_v_heads", "head_dim"), dtype
    )
    self.dt_bias = sharding.param(jax.nn.initializers.ones, p(), (hv,), ("linear_v_heads",), dtype)

    def a_log_init(key, shape, dtype):  # A ~ U(0.01, 16), as transformers initialises it
      return jnp.log(jax.random.uniform(key, shape, jnp.float32, 0.01, 16.0)).astype(dtype)

    self.a_log = sharding.param(a_log_init, p(), (hv,), ("linear_v_heads",), dtype)
    self.norm_scale = sharding.param(jax.nn.initializers.ones, p(), (dv,), ("norm",), dtype)
    self.w_o_hkd = sharding.param(
      init, p(), (hv, dv, d), ("linear_v_heads", "head_dim", "embed"), dtype
    )
    self.config = config

  def __call__(
    self,
    x_btd: jax.Array,
    segment_ids_bt: jax.Array | None = None,
    cache: DeltaNetCache | None = None,
    valid_bt: jax.Array | None = None,
  ) -> tuple[jax.Array, DeltaNetCache | None]:
    """Mixes along time. With a cache, continues each row from it; `valid_bt` marks the real new
    tokens, a prefix of each row (padding steps leave the state untouched)."""
    cfg, dtype = self.config, self.config.compute_dtype
    b = x_btd.shape[0]
    x_btd = x_btd.astype(dtype)

    def proj(w):
      return jnp.einsum("btd,d...->bt...", x_btd, w[...].astype(dtype))

    raw = (proj(self.w_q_dhk), proj(self.w_k_dhk), proj(self.w_v_dhk))
    start = cache if cache is not None else DeltaNetCache.zeros(cfg, b)
    prefixes = (start.conv_q, start.conv_k, start.conv_v)
    convs = (self.conv_q, self.conv_k, self.conv_v)
    q, k, v = (
      causal_conv(x, w[...], pre, segment_ids_bt)
      for x, w, pre in zip(raw, convs, prefixes, strict=True)
    )

    group = cfg.linear_num_value_heads // cfg.linear_num_key_heads
    q = jnp.repeat(l2_normalize(q) * cfg.linear_key_head_dim**-0.5, group, axis=2)
    k = jnp.repeat(l2_normalize(k), group, axis=2)  # value head j reads key head j // group
    beta_bth = jax.nn.sigmoid(proj(self.w_beta_dh).astype(jnp.float32))
    alpha_bth = proj(self.w_alpha_dh).astype(jnp.float32) + self.dt_bias[...].astype(jnp.float32)
    g_bth = -jnp.exp(self.a_log[...].astype(jnp.float32)) * jax.nn.softplus(alpha_bth)
    if valid_bt is not None:
      beta_bth = jnp.where(valid_bt[..., None], beta_bth, 0.0)
      g_bth = jnp.where(valid_bt[..., None], g_bth, 0.0)
    reset_bt = None
    if segment_ids_bt is not None:
      reset_bt = jnp.pad(segment_ids_bt[:, 1:] != segment_ids_bt[:, :-1], [(0, 0), (1, 0)])

    args = (q, k, v, g_bth, beta_bth, reset_bt, start.state_bhkv)
    if cache is not None and x_btd.shape[1] == 1:
      out_bthv, state_bhkv = recurrent_gated_delta_rule(*args)
    else:
      out_bthv, state_bhkv = chunked_gated_delta_rule(*args, chunk=cfg.deltanet_chunk)

    new_cache = None
    if cache is not None:
      valid_b = (
        jnp.sum(valid_bt, axis=1) if valid_bt is not None else jnp.full((b,), x_btd.shape[1])
      )
      conv_q, conv_k, conv_v = (
        _last_inputs(pre, x, valid_b) for pre, x in zip(prefixes, raw, strict=True)
      )
      new_cache = DeltaNetCache(conv_q, conv_k, conv_v, state_bhkv)

    z_bthv = proj(self.w_z_dhk).astype(jnp.float32)
    y_bthv = rms_normalize(out_bthv, cfg.rms_norm_eps) * self.norm_scale[...].astype(jnp.float32)
    y_bthv = (y_bthv * jax.nn.silu(z_bthv)).astype(dtype)
    y_bthv = sharding.constrain(y_bthv, ("act_batch", "act_seq", "act_heads", None))
    return jnp.einsum("bthk,hkd->btd", y_bthv, self.w_o_hkd[...].astype(dtype)), new_cache
