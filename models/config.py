"""Model configuration: one frozen dataclass, validated on construction, and the named sizes."""

from __future__ import annotations

import dataclasses
from typing import Any

import jax.numpy as jnp

MOE_BACKENDS = ("ragged_dot", "sort", "loop", "all_to_all")
REMAT_POLICIES = ("none", "full", "dots")
DTYPES = ("float32", "bfloat16", "float16")


@dataclasses.dataclass(frozen=True)
class ModelConfig:
  """Sizes and numerics of the hybrid Gated DeltaNet / gated attention MoE decoder.

  Field names follow the model, not transformers; `models.io.hf` maps between the two.
  """

  vocab_size: int
  d_model: int
  num_layers: int
  # Every `full_attention_interval`-th layer is full attention, the others Gated DeltaNet; a scanned
  # block is one such group, so `num_layers` must be a multiple of it.
  full_attention_interval: int = 4

  # Gated full attention (GQA, QK-norm, partial rotary, sigmoid output gate).
  num_heads: int = 4
  num_kv_heads: int = 2
  head_dim: int = 16
  rope_theta: float = 10_000.0
  partial_rotary_factor: float = 0.25  # fraction of head_dim that is rotated

  # Gated DeltaNet.
  linear_num_key_heads: int = 2
  linear_num_value_heads: int = 4
  linear_key_head_dim: int = 16
  linear_value_head_dim: int = 16
  linear_conv_kernel: int = 4  # width of the short causal depthwise convolution
  deltanet_chunk: int = 64  # chunk length of the parallel (training / prefill) form

  # Mixture of experts: softmax router, top-k renormalized, SwiGLU experts, gated shared expert.
  num_experts: int = 8
  num_experts_per_tok: int = 2
  expert_dim: int = 32
  shared_expert_dim: int = 32
  # one of MOE_BACKENDS; "all_to_all" splits the experts over the mesh's expert axis and sends the
  # tokens to them (models.expert_parallel)
  moe_backend: str = "ragged_dot"
  # "all_to_all" only: rows a device sends to each expert shard, times an even share; 0 = all of
  # them (exact, no row dropped; memory for the worst case)
  moe_capacity_factor: float = 0.0
  moe_tile: int = 0  # rows per tile of the "sort" backend; 0 chooses from the token count
  # Token groups routed and dispatched independently (each sorts only its own rows), split along
  # the batch; 0: one per batch shard of the mesh, so dispatch stays local to each device.
  moe_groups: int = 0
  router_aux_loss_coef: float = 0.001  # weight of the load-balancing loss in the training loss

  # A pointer into the context mixed with the LM head's softmax (`models.copy_head`); not part of
  # Qwen3.5, off for imported checkpoints.
  copy_head: bool = False
  copy_head_dim: int = 64
  # The pointer's scores gain a learnt bonus where a key's token, and the token before it, equal
  # the query's: induction ("what followed my token last time") as a prior, not learnt from scratch.
  copy_head_match: bool = False
  # With the match bonus: R >= 3 adds a learnt bonus m_r for each r = 3..R where the key's last r
  # tokens all equal the query's, so a copy continued for r tokens points where those r tokens
  # stood (not at any earlier place of its last one or two); 0 = none.
  copy_head_match_run: int = 0
  # With the match bonus: a learnt gate sigmoid(h_t w + b) scales it at each query, so a query
  # where a copy starts (a JSON quote, whose earlier places are every value of every reply) can
  # set the induction prior aside and one that continues a copy keeps it.
  copy_head_match_gate: bool = False
  # A word is one token with its leading space ("▁Isla" in a sentence) and another without it
  # ("Isla" after a JSON quote): the pointer copies the word and a learnt gate picks the form, so a
  # value is copied between an instruction and a tool call. The pairs come from the tokenizer
  # (`models.copy_head.set_word_forms`); until they are set every token is its own word.
  copy_head_forms: bool = False

  rms_norm_eps: float = 1e-6
  tie_embeddings: bool = False
  init_std: float = 0.02

  param_dtype: str = "float32"  # master weights
  dtype: str = "float32"  # activations and matmuls; norms, router and softmax stay float32
  remat: str = "none"  # one of REMAT_POLICIES, applied to each decoder layer

  def __post_init__(self):
    positive = ("vocab_size", "d_model", "num_layers", "full_attention_interval", "num_heads")
    positive += ("num_kv_heads", "head_dim", "linear_num_key_heads", "linear_num_value_heads")
    positive += ("linear_key_head_dim", "linear_value_head_dim", "linear_conv_kernel")
    positive += ("deltanet_chunk", "num_experts", "num_experts_per_tok", "expert_dim")
    positive += ("copy_head_dim",)
    for name in positive:
      if getattr(self, name) <= 0:
        raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
    if self.num_layers % self.full_attention_interval:
      raise ValueError(
        f"num_layers={self.num_layers} must be a multiple of "
        f"full_attention_interval={self.full_attention_interval} (one scanned block per group)"
      )
    if self.num_heads % self.num_kv_heads:
      raise ValueError(f"num_heads={self.num_heads} not divisible by num_kv_heads")
    if self.linear_num_value_heads % self.linear_num_key_heads:
      raise ValueError("linear_num_value_heads must be a multiple of linear_num_key_heads")
    if self.num_experts_per_tok > self.num_experts:
      raise ValueError(f"top-{self.num_experts_per_tok} of {self.num_experts} experts")
    if self.rotary_dim % 2 or not 0 < self.partial_rotary_factor <= 1:
      raise ValueError(f"rotary dim {self.rotary_dim} must be even and within head_dim")
    if self.shared_expert_dim < 0 or self.moe_tile < 0 or self.moe_groups < 0:
      raise ValueError("shared_expert_dim, moe_tile and moe_groups must be >= 0")
    if self.copy_head_match_run and (self.copy_head_match_run < 3 or not self.copy_head_match):
      raise ValueError(
        f"copy_head_match_run={self.copy_head_match_run} must be 0, or >= 3 with copy_head_match"
      )
    if self.copy_head_match_gate and not self.copy_head_match:
      raise ValueError("copy_head_match_gate needs copy_head_match")
    if self.moe_backend not in MOE_BACKENDS:
      raise ValueError(f"moe_backend={self.moe_backend!r}; valid: {MOE_BACKENDS}")
    if self.remat not in REMAT_POLICIES:
      raise ValueError(f"remat={self.remat!r}; valid: {REMAT_POLICIES}")
    for name in ("param_dtype", "dtype"):
      if getattr(self, name) not in DTYPES:
        raise ValueError(f"{name}={getattr(self, name)!r}; valid: {DTYPES}")

  @property
  def num_blocks(self) -> int:
    return self.num_layers // self.full_attention_interval

  @property
  def rotary_dim(self) -> int:
    return int(self.head_dim * self.partial_rotary_factor)

  @property
  def compute_dtype(self) -> Any:
    return jnp.dtype(self.dtype)

  @property
  def weight_dtype(self) -> Any:
    return jnp.dtype(self.param_dtype)

  def layer_kinds(self) -> list[str]:
    """Per layer, "linear_attention" or "full_attention" (transformers' `layer_types`)."""
    interval = self.full_attention_interval
    return [
      "full_attention" if (i + 1) % interval == 0 else "linear_attention"
      for i in range(self.num_layers)
    ]

  def replace(self, **changes: Any) -> ModelConfig:
    return dataclasses.replace(self, **changes)


# Two blocks, so the scan over blocks is exercised; a forward pass takes milliseconds on CPU.
TINY = ModelConfig(
  vocab_size=256,
  d_model=64,
  num_layers=8,
  num_heads=4,
  num_kv_heads=2,
  head_dim=16,
  linear_num_key_heads=2,
  linear_num_value_heads=4,
  linear_key_head_dim=16,
  linear_value_head_dim=16,
  deltanet_chunk=8,
  num_experts=8,
  num_experts_per_tok=2,
  expert_dim=32,
  shared_expert_dim=32,
)

# CPU experiments: about 70M parameters, 64 experts top-4 as in the MoE benchmark.
SMALL = ModelConfig(
  vocab_size=32768,
  d_model=256,
  num_layers=8,
  num_heads=4,
  num_kv_heads=2,
  head_dim=64,
  linear_num_key_heads=4,
  linear_num_value_heads=8,
  linear_key_head_dim=32,
  linear_value_head_dim=32,
  deltanet_chunk=64,
  num_experts=64,
  num_experts_per_tok=4,
  expert_dim=128,
  shared_expert_dim=128,
  moe_backend="sort",
)

# Qwen3.5-35B-A3B / Qwen3.6-35B-A3B text model, sizes as published in its config.json.
QWEN3_5_35B_A3B = ModelConfig(
  vocab_size=248320,
  d_model=2048,
  num_layers=40,
  num_heads=16,
  num_kv_heads=2,
  head_dim=256,
  rope_theta=10_000_000.0,
  partial_rotary_factor=0.25,
  linear_num_key_heads=16,
  linear_num_value_heads=32,
  linear_key_head_dim=128,
  linear_value_head_dim=128,
  linear_conv_kernel=4,
  deltanet_chunk=64,
  num_experts=256,
  num_experts_per_tok=8,
  expert_dim=512,
  shared_expert_dim=512,
  rms_norm_eps=1e-6,
  dtype="bfloat16",
  remat="full",
)

CONFIGS = {"tiny": TINY, "small": SMALL, "qwen3_5_35b_a3b": QWEN3_5_35B_A3B}

# Sizes as the model card states them ("35B total, 3B activated"), to the stated precision.
PUBLISHED_SIZES = {"qwen3_5_35b_a3b": {"total_params": 35e9, "active_params": 3e9}}


def get_config(name: str, **overrides: Any) -> ModelConfig:
  """The named config, with `overrides` applied (and validated)."""
  if name not in CONFIGS:
    raise KeyError(f"unknown model config {name!r}; valid: {sorted(CONFIGS)}")
  return CONFIGS[name].replace(**overrides)
