"""The decoder: embedding, `num_blocks` scanned blocks of (interval - 1) DeltaNet layers and one
attention layer, each layer followed by an MoE; final norm; LM head."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from flax import nnx, struct

from models import sharding
from models.attention import GatedAttention, KVCache
from models.config import ModelConfig
from models.copy_head import (
  CopyCache,
  CopyHead,
  Pointer,
  cached_pointer,
  mixture_logits,
  training_pointer,
)
from models.deltanet import DeltaNetCache, GatedDeltaNet
from models.layers import RMSNorm, normal
from models.moe import MoE

_CHECKPOINT_POLICIES = {
  "full": None,  # save nothing: recompute the layer in the backward pass
  "dots": jax.checkpoint_policies.dots_with_no_batch_dims_saveable,
}


@struct.dataclass
class Cache:
  """Decoding state: each DeltaNet layer's conv + recurrent state (leading axes: block, layer in
  block), each attention layer's KV cache (leading axis: block), each row's tokens so far, and
  the copy head's keys and tokens (None without one)."""

  linear: DeltaNetCache
  attention: KVCache
  lengths_b: jax.Array  # [B] int32
  copy: CopyCache | None = None

  @classmethod
  def zeros(cls, config: ModelConfig, batch: int, max_len: int) -> Cache:
    linear_layers = (config.num_blocks, config.full_attention_interval - 1)
    linear = jax.tree.map(
      lambda x: jnp.broadcast_to(x, (*linear_layers, *x.shape)), DeltaNetCache.zeros(config, batch)
    )
    attention = jax.tree.map(
      lambda x: jnp.broadcast_to(x, (config.num_blocks, *x.shape)),
      KVCache.zeros(config, batch, max_len),
    )
    copy = CopyCache.zeros(config, batch, max_len) if config.copy_head else None
    lengths_b = jnp.zeros((batch,), jnp.int32)
    return cls(linear=linear, attention=attention, lengths_b=lengths_b, copy=copy)


class Output(NamedTuple):
  logits: jax.Array  # [B, T, V] float32
  cache: Cache | None
  aux_loss: jax.Array  # [] mean over layers of the load-balancing loss
  expert_load: jax.Array  # [num_layers, E]
  # [B, T, D] final-normed hidden states, the LM head's input: a loss that fuses the head with the
  # cross-entropy reads these, and under jit the unused `logits` are never computed.
  hidden: jax.Array | None = None
  # The copy head's pointer at every position (None without one): `Transformer.logits_at`.
  pointer: Pointer | None = None


class DecoderLayer(nnx.Module):
  """x + mixer(norm(x)), then + moe(norm(x)); the mixer is a DeltaNet or a gated attention."""

  def __init__(self, config: ModelConfig, kind: str, *, rngs: nnx.Rngs):
    self.kind = kind
    self.input_norm = RMSNorm(config.d_model, config, rngs=rngs)
    if kind == "linear_attention":
      self.mixer = GatedDeltaNet(config, rngs=rngs)
    else:
      self.mixer = GatedAttention(config, rngs=rngs)
    self.post_norm = RMSNorm(config.d_model, config, rngs=rngs)
    self.moe = MoE(config, rngs=rngs)

  def __call__(self, x_btd, ctx: dict[str, Any], cache, dense_experts=None):
    h_btd = self.input_norm(x_btd)
    if self.kind == "linear_attention":
      mixed, cache = self.mixer(h_btd, ctx["segment_ids"], cache, ctx["valid"])
    else:
      mixed, cache = self.mixer(
        h_btd, ctx["positions"], ctx["segment_ids"], cache, ctx["cache_lengths"]
      )
    x_btd = x_btd + mixed.astype(x_btd.dtype)
    moe_out, stats = self.moe(self.post_norm(x_btd), ctx["valid"], dense=dense_experts)
    x_btd = x_btd + moe_out.astype(x_btd.dtype)
    return sharding.constrain(x_btd, ("act_batch", "act_seq", "act_embed")), cache, stats


class Block(nnx.Module):
  """One scanned unit: `full_attention_interval - 1` DeltaNet layers, then one attention layer.

  The DeltaNet layers are themselves stacked and scanned, so the block compiles one of each
  kind of layer whatever the interval.
  """

  def __init__(self, config: ModelConfig, *, rngs: nnx.Rngs):
    @nnx.split_rngs(splits=config.full_attention_interval - 1)
    @nnx.vmap(in_axes=(0,), out_axes=0, transform_metadata={nnx.PARTITION_NAME: "sublayers"})
    def make_linear(rngs: nnx.Rngs) -> DecoderLayer:
      return DecoderLayer(config, "linear_attention", rngs=rngs)

    self.linear = make_linear(rngs)
    self.attention = DecoderLayer(config, "full_attention", rngs=rngs)
    self.remat = config.remat

  def __call__(self, x_btd, ctx, linear_cache, attention_cache):
    def layer_fn(layer, x, cache):
      return layer(x, ctx, cache)

    # Rematerialised a layer at a time, not a block at a time: the backward pass then holds one
    # layer's activations (its MoE dispatch above all), not the whole block's.
    if self.remat != "none":
      layer_fn = nnx.remat(layer_fn, policy=_CHECKPOINT_POLICIES[self.remat])

    @nnx.scan(in_axes=(0, nnx.Carry, 0), out_axes=(nnx.Carry, 0, 0))
    def run_linear(layer, x, cache):
      return layer_fn(layer, x, cache)

    x_btd, linear_cache, linear_stats = run_linear(self.linear, x_btd, linear_cache)
    x_btd, attention_cache, stats = layer_fn(self.attention, x_btd, attention_cache)
    stats = jax.tree.map(lambda a, b: jnp.concatenate([a, b[None]]), linear_stats, stats)
    return x_btd, linear_cache, attention_cache, stats  # stats: [layers_per_block, ...]


def layer_context(
  t: int, positions_bt, segment_ids_bt, valid_bt, cache_lengths_b
) -> dict[str, Any]:
  """What every layer reads besides its input: positions (default 0..T-1, after the cached
  tokens when decoding), segment ids, the valid-token mask, the cache lengths."""
  if positions_bt is None:
    start = cache_lengths_b[:, None] if cache_lengths_b is not None else 0
    positions_bt = start + jnp.arange(t, dtype=jnp.int32)[None, :]
  return {
    "positions": positions_bt,
    "segment_ids": segment_ids_bt,
    "valid": valid_bt,
    "cache_lengths": cache_lengths_b,
  }


def embed(embed_vd: jax.Array, tokens_bt: jax.Array, config: ModelConfig) -> jax.Array:
  x_btd = embed_vd[tokens_bt].astype(config.compute_dtype)
  return sharding.constrain(x_btd, ("act_batch", "act_seq", "act_embed"))


def lm_head(h_btd: jax.Array, head_dv: jax.Array) -> jax.Array:
  """Float32 logits [B, T, V] of final-normed hidden states."""
  logits_btv = jnp.einsum("btd,dv->btv", h_btd, head_dv, preferred_element_type=jnp.float32)
  return sharding.constrain(logits_btv, ("act_batch", "act_seq", "act_vocab"))


class Transformer(nnx.Module):
  """`model(tokens)` gives logits; `model.forward(...)` also takes/returns a cache and MoE stats."""

  def __init__(self, config: ModelConfig, *, rngs: nnx.Rngs):
    self.config = config
    d, v, dtype = config.d_model, config.vocab_size, config.weight_dtype
    self.embed_vd = sharding.param(
      normal(config.init_std), rngs.params(), (v, d), ("vocab", "embed"), dtype
    )

    @nnx.split_rngs(splits=config.num_blocks)
    @nnx.vmap(in_axes=(0,), out_axes=0, transform_metadata={nnx.PARTITION_NAME: "layers"})
    def make_blocks(rngs: nnx.Rngs) -> Block:
      return Block(config, rngs=rngs)

    self.blocks = make_blocks(rngs)
    self.final_norm = RMSNorm(d, config, rngs=rngs)
    if not config.tie_embeddings:
      self.head_dv = sharding.param(
        normal(config.init_std), rngs.params(), (d, v), ("embed", "vocab"), dtype
      )
    if config.copy_head:
      self.copy_head = CopyHead(config, rngs=rngs)

  def __call__(self, tokens_bt: jax.Array, **kwargs) -> jax.Array:
    return self.forward(tokens_bt, **kwargs).logits

  def head_weight(self) -> jax.Array:
    """The LM head [D, V] in the compute dtype: logits = hidden @ head_weight()."""
    head_dv = self.embed_vd[...].T if self.config.tie_embeddings else self.head_dv[...]
    return head_dv.astype(self.config.compute_dtype)

  def logits_at(self, out: Output, index_bk: jax.Array) -> jax.Array:
    """The model's logits [B, K, V] at positions `index_bk` [B, K] of a forward pass, computed
    from those positions alone (the LM head, mixed with the copy head's pointer when there is
    one): what a caller that needs a few positions' logits uses instead of `out.logits`."""
    h_bkd = jnp.take_along_axis(out.hidden, index_bk[..., None], axis=1)
    logits_bkv = lm_head(h_bkd, self.head_weight())
    if out.pointer is None:
      return logits_bkv
    return mixture_logits(logits_bkv, out.pointer.take(index_bk))

  def forward(
    self,
    tokens_bt: jax.Array,
    *,
    positions_bt: jax.Array | None = None,
    segment_ids_bt: jax.Array | None = None,
    cache: Cache | None = None,
    valid_bt: jax.Array | None = None,
  ) -> Output:
    """Runs the decoder on int tokens [B, T].

    Training: `segment_ids_bt` packs several sequences per row (attention and DeltaNet state do
    not cross a segment change); `positions_bt` restart per segment (default 0..T-1).
    Decoding: with `cache`, the T tokens continue each row at its `cache.lengths_b`; `valid_bt`
    marks the real ones, a prefix of each row (rows of different lengths in one batch).
    """
    cfg = self.config
    t = tokens_bt.shape[1]
    if cache is not None and segment_ids_bt is not None:
      raise ValueError("segment ids (packed training rows) and a decoding cache do not mix")
    cache_lengths = cache.lengths_b if cache is not None else None
    ctx = layer_context(t, positions_bt, segment_ids_bt, valid_bt, cache_lengths)
    x_btd = embed(self.embed_vd[...], tokens_bt, cfg)

    @nnx.scan(in_axes=(0, nnx.Carry, None, 0, 0), out_axes=(nnx.Carry, 0, 0, 0))
    def run_blocks(block, x, ctx, linear_cache, attention_cache):
      return block(x, ctx, linear_cache, attention_cache)

    if cache is None:
      x_btd, _, _, stats = run_blocks(self.blocks, x_btd, ctx, None, None)
      new_cache = None
    else:
      x_btd, linear, attention, stats = run_blocks(
        self.blocks, x_btd, ctx, cache.linear, cache.attention
      )
      added_b = jnp.sum(valid_bt, axis=1, dtype=jnp.int32) if valid_bt is not None else t
      new_cache = Cache(linear=linear, attention=attention, lengths_b=cache.lengths_b + added_b)

    h_btd = self.final_norm(x_btd).astype(cfg.compute_dtype)
    logits_btv = lm_head(h_btd, self.head_weight())
    pointer = None
    if cfg.copy_head:
      if cache is None:
        pointer = training_pointer(self.copy_head, h_btd, tokens_bt, segment_ids_bt)
      else:
        pointer, copy = cached_pointer(
          self.copy_head, h_btd, tokens_bt, cache.copy, ctx["positions"], cache.lengths_b
        )
        new_cache = new_cache.replace(copy=copy)
      logits_btv = mixture_logits(logits_btv, pointer)
    # stats: MoEStats with leading [blocks, layers_per_block] axes, in transformers' layer order.
    return Output(
      logits=logits_btv,
      cache=new_cache,
      aux_loss=jnp.mean(stats.aux_loss),
      expert_load=stats.expert_load.reshape(cfg.num_layers, cfg.num_experts),
      hidden=h_btd,
      pointer=pointer,
    )


# Initialisation runs once and is mostly random-number kernels; XLA's CPU optimisation passes
# would take longer than they save.
_INIT_CPU_OPTIONS = {"xla_backend_optimization_level": 0, "xla_llvm_disable_expensive_passes": True}


def create_model(config: ModelConfig, *, seed: int = 0, mesh=None) -> Transformer:
  """A randomly initialised model, built by one compiled program: under `mesh` every parameter
  is created directly in its shards, so no device ever holds a whole unsharded weight."""

  def init():
    return nnx.state(Transformer(config, rngs=nnx.Rngs(seed)))

  options = _INIT_CPU_OPTIONS if jax.default_backend() == "cpu" else None
  with sharding.use_mesh(mesh):
    graphdef = nnx.graphdef(nnx.eval_shape(lambda: Transformer(config, rngs=nnx.Rngs(seed))))
    return nnx.merge(graphdef, jax.jit(init, compiler_options=options)())


def abstract_model(config: ModelConfig, mesh=None) -> Transformer:
  """The model with `jax.ShapeDtypeStruct` leaves: shapes and shardings, no memory."""
  with sharding.use_mesh(mesh):
    model = nnx.eval_shape(lambda: Transformer(config, rngs=nnx.Rngs(0)))
    return nnx.as_abstract(model) if mesh is not None else model
