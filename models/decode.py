"""Cached decoding: prefill a batch of prompts of different lengths, then one token per step.

Token-by-token loops run the layers unrolled (`unroll`, `forward_unrolled`): the model's scan
over stacked layers slices every layer's weights and caches out of the stacks, and writes the
caches back, on each step — copies that cost more than a small batch's arithmetic. Unrolled,
each layer owns its weights and cache buffers for the whole loop and the cache is updated in
place; the slicing happens once per loop.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from flax import nnx

from models.config import ModelConfig
from models.copy_head import CopyHead, cached_pointer, mixture_logits
from models.layers import RMSNorm
from models.model import Cache, DecoderLayer, Transformer, embed, layer_context, lm_head
from models.moe import DenseExperts, decode_dense
from models.moe import dense_experts as moe_dense


def prefill(
  model: Transformer, tokens_bt: jax.Array, lengths_b: jax.Array, max_len: int
) -> tuple[jax.Array, Cache]:
  """Runs right-padded prompts (row b: `lengths_b[b] >= 1` real tokens) into a fresh cache.

  Returns the logits after each row's last real token [B, V] and the cache; `max_len` bounds
  prompt plus generated tokens.
  """
  b, t = tokens_bt.shape
  if t > max_len:
    raise ValueError(f"prompt length {t} exceeds the cache length {max_len}")
  cache = Cache.zeros(model.config, b, max_len)
  valid_bt = jnp.arange(t)[None, :] < lengths_b[:, None]
  out = model.forward(tokens_bt, cache=cache, valid_bt=valid_bt)
  last_bv = jnp.take_along_axis(out.logits, (lengths_b - 1)[:, None, None], axis=1)[:, 0]
  return last_bv, out.cache


def decode_step(model: Transformer, tokens_b: jax.Array, cache: Cache) -> tuple[jax.Array, Cache]:
  """Appends one token per row; returns its logits [B, V] and the updated cache."""
  out = model.forward(tokens_b[:, None], cache=cache)
  return out.logits[:, 0], out.cache


@nnx.jit(static_argnames=("steps", "max_len"))
def greedy_generate(
  model: Transformer, tokens_bt: jax.Array, lengths_b: jax.Array, steps: int, max_len: int
) -> jax.Array:
  """`steps` greedy tokens per row after its prompt [B, steps], one compiled program; the steps
  run the layers unrolled."""
  config = model.config
  logits_bv, cache = prefill(model, tokens_bt, lengths_b, max_len)
  weights = unroll(model, dense_experts=decode_dense(config, tokens_bt.shape[0]))

  def step(carry, _):
    logits_bv, caches, lengths_b = carry
    next_b = jnp.argmax(logits_bv, axis=-1).astype(jnp.int32)
    logits_btv, caches, lengths_b = forward_unrolled(
      config, weights, next_b[:, None], caches, lengths_b
    )
    return (logits_btv[:, 0], caches, lengths_b), next_b

  init = (logits_bv, unroll_cache(cache), cache.lengths_b)
  _, tokens_sb = jax.lax.scan(step, init, length=steps)
  return tokens_sb.T


class Unrolled(NamedTuple):
  """The model's weights with one entry per layer (pure dicts of arrays, in layer order)."""

  embed_vd: jax.Array
  head_dv: jax.Array  # in the compute dtype
  final_norm: dict[str, Any]
  layers: tuple[dict[str, Any], ...]
  # Each layer's experts laid out for the dense path (`models.moe.dispatch_dense`), or None.
  dense_experts: tuple[DenseExperts, ...] | None = None
  copy_head: dict[str, Any] | None = None  # the copy head's weights, when the model has one


def unroll(model: Transformer, dense_experts: bool = False) -> Unrolled:
  """Slices the stacked layers apart (a copy of their weights); with `dense_experts` also lays
  out each layer's experts for the dense path (another copy of them)."""
  cfg = model.config
  linear = nnx.to_pure_dict(nnx.state(model.blocks.linear))  # leaves [blocks, interval - 1, ...]
  attention = nnx.to_pure_dict(nnx.state(model.blocks.attention))  # leaves [blocks, ...]
  layers = _per_layer(linear, attention)
  dense = None
  if dense_experts:
    dtype = cfg.compute_dtype
    dense = tuple(
      moe_dense(*(layer["moe"][name].astype(dtype) for name in _EXPERT_WEIGHTS)) for layer in layers
    )
  return Unrolled(
    embed_vd=model.embed_vd[...],
    head_dv=model.head_weight(),
    final_norm=nnx.to_pure_dict(nnx.state(model.final_norm)),
    layers=layers,
    dense_experts=dense,
    copy_head=nnx.to_pure_dict(nnx.state(model.copy_head)) if cfg.copy_head else None,
  )


_EXPERT_WEIGHTS = ("w_gate_edf", "w_up_edf", "w_down_efd")


def unroll_cache(cache: Cache) -> tuple[Any, ...]:
  """One cache per layer, in layer order (`ModelConfig.layer_kinds`; copies), then the copy
  head's when there is one."""
  copy = (cache.copy,) if cache.copy is not None else ()
  return _per_layer(cache.linear, cache.attention) + copy


def _per_layer(linear: Any, attention: Any) -> tuple[Any, ...]:
  """Slices of the stacked trees in layer order: `linear`'s leaves are [blocks, interval - 1,
  ...], `attention`'s [blocks, ...]; each block's DeltaNet layers, then its attention layer."""
  blocks, per_block = jax.tree.leaves(linear)[0].shape[:2]
  out = []
  for b in range(blocks):
    out += [jax.tree.map(lambda x, b=b, j=j: x[b, j], linear) for j in range(per_block)]
    out.append(jax.tree.map(lambda x, b=b: x[b], attention))
  return tuple(out)


def roll_cache(like: Cache, layers: tuple[Any, ...], lengths_b: jax.Array) -> Cache:
  """The per-layer caches (and the copy head's last, when `like` has one) stacked back into
  `like`'s layout."""
  copy = None
  if like.copy is not None:
    layers, copy = layers[:-1], layers[-1]
  blocks, per_block = jax.tree.leaves(like.linear)[0].shape[:2]
  step = per_block + 1
  attention = jax.tree.map(lambda *xs: jnp.stack(xs), *layers[per_block::step])
  linear = like.linear
  if per_block:
    rows = [layers[b * step : b * step + per_block] for b in range(blocks)]
    linear = jax.tree.map(
      lambda *xs: jnp.stack(xs).reshape(blocks, per_block, *xs[0].shape),
      *[layer for row in rows for layer in row],
    )
  return Cache(linear=linear, attention=attention, lengths_b=lengths_b, copy=copy)


def _module(make, pure: dict[str, Any]):
  """The module `make()` builds, holding the arrays of `pure` (a `nnx.to_pure_dict` tree)."""
  with nnx.use_eager_sharding(False):
    graphdef, state = nnx.split(nnx.eval_shape(make))
  nnx.replace_by_pure_dict(state, pure)
  return nnx.merge(graphdef, state)


def forward_unrolled(
  config: ModelConfig,
  weights: Unrolled,
  tokens_bt: jax.Array,
  layer_caches: tuple[Any, ...],
  lengths_b: jax.Array,
  valid_bt: jax.Array | None = None,
) -> tuple[jax.Array, tuple[Any, ...], jax.Array]:
  """`Transformer.forward` with a cache, on unrolled weights and caches: the T tokens continue
  each row at `lengths_b[b]`, `valid_bt` marks the real ones (a prefix of each row). Returns
  the logits [B, T, V], the new caches and lengths. With a copy head, `layer_caches` ends with
  its cache (`unroll_cache`)."""
  t = tokens_bt.shape[1]
  ctx = layer_context(t, None, None, valid_bt, lengths_b)
  x_btd = embed(weights.embed_vd, tokens_bt, config)
  new_caches = []
  dense = weights.dense_experts or (None,) * len(weights.layers)
  copy_cache = layer_caches[-1] if config.copy_head else None
  layer_caches = layer_caches[: config.num_layers]
  layers = zip(config.layer_kinds(), weights.layers, dense, layer_caches, strict=True)
  for kind, pure, dense_experts, cache in layers:
    layer = _module(lambda kind=kind: DecoderLayer(config, kind, rngs=nnx.Rngs(0)), pure)
    x_btd, cache, _ = layer(x_btd, ctx, cache, dense_experts)
    new_caches.append(cache)
  norm = _module(lambda: RMSNorm(config.d_model, config, rngs=nnx.Rngs(0)), weights.final_norm)
  h_btd = norm(x_btd).astype(config.compute_dtype)
  logits_btv = lm_head(h_btd, weights.head_dv)
  if config.copy_head:
    head = _module(lambda: CopyHead(config, rngs=nnx.Rngs(0)), weights.copy_head)
    pointer, copy_cache = cached_pointer(
      head, h_btd, tokens_bt, copy_cache, ctx["positions"], lengths_b
    )
    logits_btv = mixture_logits(logits_btv, pointer)
    new_caches.append(copy_cache)
  added_b = jnp.sum(valid_bt, axis=1, dtype=jnp.int32) if valid_bt is not None else t
  return logits_btv, tuple(new_caches), lengths_b + added_b


def take_rows(cache: Cache, index_b: jax.Array) -> Cache:
  """The cache rows `index_b` (batch axis: 2 for DeltaNet leaves, 1 for KV leaves, 0 for the
  lengths and the copy head's)."""
  return Cache(
    linear=jax.tree.map(lambda x: jnp.take(x, index_b, axis=2), cache.linear),
    attention=jax.tree.map(lambda x: jnp.take(x, index_b, axis=1), cache.attention),
    lengths_b=jnp.take(cache.lengths_b, index_b, axis=0),
    copy=jax.tree.map(lambda x: jnp.take(x, index_b, axis=0), cache.copy),
  )
