"""Gated full attention: GQA, QK RMSNorm, partial rotary, a sigmoid output gate, and a KV cache."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx, struct

from models import sharding
from models.config import ModelConfig
from models.layers import RMSNorm, normal, rotary


@struct.dataclass
class KVCache:
  """Keys and values of every position written so far; row b holds `lengths[b]` valid entries.

  Heads lead positions ([B, G, S, D]): decoding reads each (row, KV head) as one contiguous
  [S, D] matrix, the layout the score and value matmuls take without a transposed copy.
  """

  k_bgsk: jax.Array  # [B, G, S, D]
  v_bgsk: jax.Array  # [B, G, S, D]

  @classmethod
  def zeros(cls, config: ModelConfig, batch: int, max_len: int) -> KVCache:
    shape = (batch, config.num_kv_heads, max_len, config.head_dim)
    zeros = jnp.zeros(shape, config.compute_dtype)
    return cls(k_bgsk=zeros, v_bgsk=zeros)


def _write_rows(cache_bgsk: jax.Array, new_btgk: jax.Array, start_b: jax.Array) -> jax.Array:
  """Writes each row's T new entries at its own offset (the caller keeps start + T <= S)."""

  def write(row_gsk, new_tgk, start):
    new_gtk = new_tgk.transpose(1, 0, 2).astype(row_gsk.dtype)
    return jax.lax.dynamic_update_slice(row_gsk, new_gtk, (0, start, 0))

  return jax.vmap(write)(cache_bgsk, new_btgk, start_b)


class GatedAttention(nnx.Module):
  """Causal softmax attention whose output is multiplied by sigmoid(x W_gate) before W_o."""

  def __init__(self, config: ModelConfig, *, rngs: nnx.Rngs):
    d, h, kv, hd = config.d_model, config.num_heads, config.num_kv_heads, config.head_dim
    init, dtype = normal(config.init_std), config.weight_dtype
    self.w_q_dhk = sharding.param(
      init, rngs.params(), (d, h, hd), ("embed", "q_heads", "head_dim"), dtype
    )
    self.w_gate_dhk = sharding.param(
      init, rngs.params(), (d, h, hd), ("embed", "q_heads", "head_dim"), dtype
    )
    self.w_k_dgk = sharding.param(
      init, rngs.params(), (d, kv, hd), ("embed", "kv_heads", "head_dim"), dtype
    )
    self.w_v_dgk = sharding.param(
      init, rngs.params(), (d, kv, hd), ("embed", "kv_heads", "head_dim"), dtype
    )
    self.w_o_hkd = sharding.param(
      init, rngs.params(), (h, hd, d), ("q_heads", "head_dim", "embed"), dtype
    )
    self.q_norm = RMSNorm(hd, config, rngs=rngs)
    self.k_norm = RMSNorm(hd, config, rngs=rngs)
    self.config = config

  def __call__(
    self,
    x_btd: jax.Array,
    positions_bt: jax.Array,
    segment_ids_bt: jax.Array | None = None,
    cache: KVCache | None = None,
    cache_lengths_b: jax.Array | None = None,
  ) -> tuple[jax.Array, KVCache | None]:
    """Attends causally within segments, or over `cache` plus the new tokens when one is given.

    With a cache, token t of row b sits at position `cache_lengths_b[b] + t` and `positions_bt`
    must say so; segment ids are not used.
    """
    cfg, dtype = self.config, self.config.compute_dtype
    x_btd = x_btd.astype(dtype)
    q_bthk = jnp.einsum("btd,dhk->bthk", x_btd, self.w_q_dhk[...].astype(dtype))
    gate_bthk = jnp.einsum("btd,dhk->bthk", x_btd, self.w_gate_dhk[...].astype(dtype))
    k_btgk = jnp.einsum("btd,dgk->btgk", x_btd, self.w_k_dgk[...].astype(dtype))
    v_btgk = jnp.einsum("btd,dgk->btgk", x_btd, self.w_v_dgk[...].astype(dtype))
    q_bthk = rotary(self.q_norm(q_bthk), positions_bt, cfg.rotary_dim, cfg.rope_theta)
    k_btgk = rotary(self.k_norm(k_btgk), positions_bt, cfg.rotary_dim, cfg.rope_theta)
    q_bthk = sharding.constrain(q_bthk, ("act_batch", "act_seq", "act_heads", None))

    if cache is None:
      k_bgsk, v_bgsk = k_btgk.transpose(0, 2, 1, 3), v_btgk.transpose(0, 2, 1, 3)
      index_t = jnp.arange(x_btd.shape[1])
      mask_bts = (index_t[None, :] <= index_t[:, None])[None]
      if segment_ids_bt is not None:
        mask_bts &= segment_ids_bt[:, :, None] == segment_ids_bt[:, None, :]
      new_cache = None
    else:
      new_cache = KVCache(
        k_bgsk=_write_rows(cache.k_bgsk, k_btgk, cache_lengths_b),
        v_bgsk=_write_rows(cache.v_bgsk, v_btgk, cache_lengths_b),
      )
      k_bgsk, v_bgsk = new_cache.k_bgsk, new_cache.v_bgsk
      key_positions_s = jnp.arange(k_bgsk.shape[2])
      # Slots past a row's length hold stale or zero entries; every one of them lies after the
      # query's own position, so the causal test alone excludes them.
      mask_bts = key_positions_s[None, None, :] <= positions_bt[:, :, None]

    block = causal_block_size(x_btd.shape[1]) if cache is None else 0
    out_bthk = _gqa_attention(q_bthk, k_bgsk, v_bgsk, mask_bts, block)
    out_bthk = out_bthk * jax.nn.sigmoid(gate_bthk.astype(jnp.float32)).astype(dtype)
    out_btd = jnp.einsum("bthk,hkd->btd", out_bthk, self.w_o_hkd[...].astype(dtype))
    return out_btd, new_cache


#: Query rows per block of causal training attention (`_gqa_attention`'s `causal_block`).
CAUSAL_BLOCK = 256
#: At most this many query blocks: the blocks are unrolled, and each compiles on its own.
MAX_CAUSAL_BLOCKS = 16


def causal_block_size(t: int) -> int:
  """Query rows per causal block for a T-token row: `CAUSAL_BLOCK`, or more for long rows so
  at most `MAX_CAUSAL_BLOCKS` blocks; 0 (one block) when T does not split evenly."""
  block = max(CAUSAL_BLOCK, -(-t // MAX_CAUSAL_BLOCKS))
  return block if t > block and t % block == 0 else 0


def _gqa_attention(q_bthk, k_bgsk, v_bgsk, mask_bts, causal_block: int = 0) -> jax.Array:
  """Softmax(q k^T / sqrt(d)) v with query head h reading KV head h // (H / G).

  Scores are batched matmuls with the (batch, KV head) axes leading and the R = H / G query
  heads of a KV head stacked as rows, the layout XLA's CPU dot runs fastest. With
  `causal_block` > 0 (training and prefill, where S = T and `mask_bts` is causal), query block i
  reads only keys [0, (i + 1) * block): the blocks above the diagonal, about half of a long
  row's scores, are never computed; the result is the same.
  """
  b, t, h, d = q_bthk.shape
  g, s = k_bgsk.shape[1], k_bgsk.shape[2]
  r = h // g
  q_bgrtk = q_bthk.reshape(b, t, g, r, d).transpose(0, 2, 3, 1, 4)

  def attend(q_bgrqk, k_bgsk, v_bgsk, mask_bqs):
    tq, sk = q_bgrqk.shape[3], k_bgsk.shape[2]
    logits = jnp.einsum(
      "bgqk,bgsk->bgqs", q_bgrqk.reshape(b, g, r * tq, d), k_bgsk,
      preferred_element_type=jnp.float32,
    ) * (d**-0.5)  # fmt: skip
    logits_bgrqs = jnp.where(mask_bqs[:, None, None], logits.reshape(b, g, r, tq, sk), -jnp.inf)
    probs = jax.nn.softmax(logits_bgrqs, axis=-1).astype(v_bgsk.dtype)
    out = jnp.einsum("bgqs,bgsk->bgqk", probs.reshape(b, g, r * tq, sk), v_bgsk)
    return out.reshape(b, g, r, tq, d)

  if causal_block and s == t and t > causal_block and t % causal_block == 0:
    blocks = []
    for i in range(t // causal_block):
      rows, keys = slice(i * causal_block, (i + 1) * causal_block), slice(0, (i + 1) * causal_block)
      blocks.append(
        attend(
          q_bgrtk[:, :, :, rows], k_bgsk[:, :, keys], v_bgsk[:, :, keys], mask_bts[:, rows, keys]
        )
      )
    out_bgrtk = jnp.concatenate(blocks, axis=3)
  else:
    out_bgrtk = attend(q_bgrtk, k_bgsk, v_bgsk, mask_bts)
  return out_bgrtk.transpose(0, 3, 1, 2, 4).reshape(b, t, h, d)
