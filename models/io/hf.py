"""Import and export of transformers' `qwen3_5_moe` checkpoints (the text model).

Reads both layouts transformers writes: text-only `qwen3_5_moe_text` (`model.layers.*`) and
multimodal `qwen3_5_moe` (`model.language_model.layers.*`, config under `text_config`; the vision
tower and MTP head are skipped). Experts load from per-expert tensors or the fused
`experts.gate_up_proj` / `experts.down_proj`. Export writes the text-only layout.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import numpy as np
from flax import nnx

from models import sharding
from models.config import ModelConfig
from models.io.safetensors_io import SafetensorsDir, ShardedWriter
from models.model import Transformer, abstract_model

Array = np.ndarray
Converter = tuple[Callable[[Array], Array], Callable[[Array], Array]]  # (hf -> ours, ours -> hf)


def config_from_hf(hf: dict[str, Any], **overrides: Any) -> ModelConfig:
  """Our config from a transformers `config.json` dict (text-only or multimodal)."""
  text = hf.get("text_config", hf) if hf.get("model_type") == "qwen3_5_moe" else hf
  if text.get("hidden_act", "silu") != "silu" or text.get("attention_bias", False):
    raise ValueError("only SiLU experts and bias-free attention are supported")
  rope = text.get("rope_parameters") or {}
  layer_types = text.get("layer_types")
  interval = text.get("full_attention_interval")
  if interval is None:  # transformers' configs carry `layer_types`, not always the interval
    full = "full_attention"
    interval = layer_types.index(full) + 1 if layer_types and full in layer_types else 4
  config = ModelConfig(
    vocab_size=text["vocab_size"],
    d_model=text["hidden_size"],
    num_layers=text["num_hidden_layers"],
    full_attention_interval=interval,
    num_heads=text["num_attention_heads"],
    num_kv_heads=text["num_key_value_heads"],
    head_dim=text.get("head_dim") or text["hidden_size"] // text["num_attention_heads"],
    rope_theta=rope.get("rope_theta", text.get("rope_theta", 10_000.0)),
    partial_rotary_factor=rope.get(
      "partial_rotary_factor", text.get("partial_rotary_factor", 0.25)
    ),
    linear_num_key_heads=text["linear_num_key_heads"],
    linear_num_value_heads=text["linear_num_value_heads"],
    linear_key_head_dim=text["linear_key_head_dim"],
    linear_value_head_dim=text["linear_value_head_dim"],
    linear_conv_kernel=text["linear_conv_kernel_dim"],
    num_experts=text["num_experts"],
    num_experts_per_tok=text["num_experts_per_tok"],
    expert_dim=text["moe_intermediate_size"],
    shared_expert_dim=text["shared_expert_intermediate_size"],
    router_aux_loss_coef=text.get("router_aux_loss_coef", 0.001),
    rms_norm_eps=text["rms_norm_eps"],
    tie_embeddings=hf.get("tie_word_embeddings", text.get("tie_word_embeddings", False)),
  ).replace(**overrides)
  if layer_types is not None and list(layer_types) != config.layer_kinds():
    raise ValueError(
      f"layer_types {layer_types} are not {config.full_attention_interval - 1} DeltaNet layers "
      "then one attention layer, repeated"
    )
  return config


def config_to_hf(config: ModelConfig) -> dict[str, Any]:
  """A `qwen3_5_moe_text` config.json dict for `Qwen3_5MoeForCausalLM`."""
  if config.copy_head:
    raise ValueError(
      "a model with a copy head (ModelConfig.copy_head) has no Qwen3_5MoeForCausalLM "
      "counterpart: transformers cannot load it"
    )
  return {
    "architectures": ["Qwen3_5MoeForCausalLM"],
    "model_type": "qwen3_5_moe_text",
    "vocab_size": config.vocab_size,
    "hidden_size": config.d_model,
    "num_hidden_layers": config.num_layers,
    "layer_types": config.layer_kinds(),
    "full_attention_interval": config.full_attention_interval,
    "num_attention_heads": config.num_heads,
    "num_key_value_heads": config.num_kv_heads,
    "head_dim": config.head_dim,
    "rope_parameters": {
      "rope_type": "default",
      "rope_theta": config.rope_theta,
      "partial_rotary_factor": config.partial_rotary_factor,
    },
    "linear_num_key_heads": config.linear_num_key_heads,
    "linear_num_value_heads": config.linear_num_value_heads,
    "linear_key_head_dim": config.linear_key_head_dim,
    "linear_value_head_dim": config.linear_value_head_dim,
    "linear_conv_kernel_dim": config.linear_conv_kernel,
    "num_experts": config.num_experts,
    "num_experts_per_tok": config.num_experts_per_tok,
    "moe_intermediate_size": config.expert_dim,
    "shared_expert_intermediate_size": config.shared_expert_dim,
    "router_aux_loss_coef": config.router_aux_loss_coef,
    "rms_norm_eps": config.rms_norm_eps,
    "tie_word_embeddings": config.tie_embeddings,
    "hidden_act": "silu",
    "attention_bias": False,
    "dtype": config.param_dtype,
  }


# --- tensor layouts -------------------------------------------------------------------------
# transformers stores a Linear as [out, in]; ours are [in, ...out axes] (and [...in axes, out]).


def _identity() -> Converter:
  return (lambda w: w), (lambda p: p)


def _transpose() -> Converter:
  return (lambda w: w.T), (lambda p: p.T)


def _in_proj(heads: int, dim: int) -> Converter:  # [heads * dim, D] <-> [D, heads, dim]
  return (
    lambda w: w.reshape(heads, dim, -1).transpose(2, 0, 1),
    lambda p: p.transpose(1, 2, 0).reshape(heads * dim, -1),
  )


def _out_proj(heads: int, dim: int) -> Converter:  # [D, heads * dim] <-> [heads, dim, D]
  return (lambda w: w.T.reshape(heads, dim, -1), lambda p: p.reshape(heads * dim, -1).T)


def _conv(heads: int, dim: int) -> Converter:  # [heads * dim, 1, K] <-> [K, heads, dim]
  return (
    lambda w: w[:, 0, :].T.reshape(-1, heads, dim),
    lambda p: p.reshape(p.shape[0], heads * dim).T[:, None, :],
  )


def _layer_tensors(config: ModelConfig, kind: str) -> list[tuple[str, tuple[str, ...], Converter]]:
  """(transformers name in a layer, our path in a DecoderLayer, converter), one to one."""
  c = config
  table = [
    ("input_layernorm.weight", ("input_norm", "scale"), _identity()),
    ("post_attention_layernorm.weight", ("post_norm", "scale"), _identity()),
    ("mlp.gate.weight", ("moe", "w_router_de"), _transpose()),
    ("mlp.shared_expert.gate_proj.weight", ("moe", "shared", "w_gate_df"), _transpose()),
    ("mlp.shared_expert.up_proj.weight", ("moe", "shared", "w_up_df"), _transpose()),
    ("mlp.shared_expert.down_proj.weight", ("moe", "shared", "w_down_fd"), _transpose()),
    (
      "mlp.shared_expert_gate.weight",
      ("moe", "w_shared_gate_d"),
      ((lambda w: w[0]), (lambda p: p[None])),
    ),
  ]
  if kind == "linear_attention":
    hv, dv = c.linear_num_value_heads, c.linear_value_head_dim
    table += [
      ("linear_attn.in_proj_z.weight", ("mixer", "w_z_dhk"), _in_proj(hv, dv)),
      ("linear_attn.in_proj_b.weight", ("mixer", "w_beta_dh"), _transpose()),
      ("linear_attn.in_proj_a.weight", ("mixer", "w_alpha_dh"), _transpose()),
      ("linear_attn.dt_bias", ("mixer", "dt_bias"), _identity()),
      ("linear_attn.A_log", ("mixer", "a_log"), _identity()),
      ("linear_attn.norm.weight", ("mixer", "norm_scale"), _identity()),
      ("linear_attn.out_proj.weight", ("mixer", "w_o_hkd"), _out_proj(hv, dv)),
    ]
  else:
    g, hd = c.num_kv_heads, c.head_dim
    table += [
      ("self_attn.k_proj.weight", ("mixer", "w_k_dgk"), _in_proj(g, hd)),
      ("self_attn.v_proj.weight", ("mixer", "w_v_dgk"), _in_proj(g, hd)),
      ("self_attn.o_proj.weight", ("mixer", "w_o_hkd"), _out_proj(c.num_heads, hd)),
      ("self_attn.q_norm.weight", ("mixer", "q_norm", "scale"), _identity()),
      ("self_attn.k_norm.weight", ("mixer", "k_norm", "scale"), _identity()),
    ]
  return table


def _qkv_heads(config: ModelConfig) -> list[tuple[str, int, int]]:
  """The DeltaNet q | k | v channel groups, in transformers' fused order: (name, heads, dim)."""
  c = config
  return [
    ("q", c.linear_num_key_heads, c.linear_key_head_dim),
    ("k", c.linear_num_key_heads, c.linear_key_head_dim),
    ("v", c.linear_num_value_heads, c.linear_value_head_dim),
  ]


def _import_layer(get: Callable[[str], Array], config: ModelConfig, kind: str):
  """Our DecoderLayer tensors {path: array} from a layer's transformers tensors (`get(suffix)`)."""
  out = {path: to_ours(get(name)) for name, path, (to_ours, _) in _layer_tensors(config, kind)}
  if kind == "linear_attention":
    qkv, conv = get("linear_attn.in_proj_qkv.weight"), get("linear_attn.conv1d.weight")
    start = 0
    for name, heads, dim in _qkv_heads(config):
      rows = slice(start, start + heads * dim)
      out["mixer", f"w_{name}_dhk"] = _in_proj(heads, dim)[0](qkv[rows])
      out["mixer", f"conv_{name}"] = _conv(heads, dim)[0](conv[rows])
      start += heads * dim
  else:
    # q_proj rows hold, per head, head_dim query features then head_dim output-gate features.
    q_h2kd = get("self_attn.q_proj.weight").reshape(config.num_heads, 2, config.head_dim, -1)
    out["mixer", "w_q_dhk"] = q_h2kd[:, 0].transpose(2, 0, 1)
    out["mixer", "w_gate_dhk"] = q_h2kd[:, 1].transpose(2, 0, 1)
  gate_edf, up_edf, down_efd = _import_experts(get, config)
  out["moe", "w_gate_edf"], out["moe", "w_up_edf"], out["moe", "w_down_efd"] = (
    gate_edf,
    up_edf,
    down_efd,
  )
  return out


def _import_experts(get, config: ModelConfig):
  try:  # fused, as transformers holds them in memory: gate_up [E, 2F, D], down [E, D, F]
    gate_up_efd = get("mlp.experts.gate_up_proj")
  except KeyError:
    experts = range(config.num_experts)
    gate = np.stack([get(f"mlp.experts.{e}.gate_proj.weight").T for e in experts])
    up = np.stack([get(f"mlp.experts.{e}.up_proj.weight").T for e in experts])
    down = np.stack([get(f"mlp.experts.{e}.down_proj.weight").T for e in experts])
    return gate, up, down
  f = config.expert_dim
  gate_up_edf = np.swapaxes(gate_up_efd, 1, 2)
  return gate_up_edf[..., :f], gate_up_edf[..., f:], np.swapaxes(get("mlp.experts.down_proj"), 1, 2)


def _export_layer(ours: Callable[[tuple[str, ...]], Array], config: ModelConfig, kind: str):
  """A layer's transformers tensors {suffix: array} from ours (`ours(path)`); experts unfused."""
  out = {name: to_hf(ours(path)) for name, path, (_, to_hf) in _layer_tensors(config, kind)}
  if kind == "linear_attention":
    heads = _qkv_heads(config)
    out["linear_attn.in_proj_qkv.weight"] = np.concatenate(
      [_in_proj(h, d)[1](ours(("mixer", f"w_{n}_dhk"))) for n, h, d in heads]
    )
    out["linear_attn.conv1d.weight"] = np.concatenate(
      [_conv(h, d)[1](ours(("mixer", f"conv_{n}"))) for n, h, d in heads]
    )
  else:
    q_hkd = ours(("mixer", "w_q_dhk")).transpose(1, 2, 0)
    gate_hkd = ours(("mixer", "w_gate_dhk")).transpose(1, 2, 0)
    out["self_attn.q_proj.weight"] = np.stack([q_hkd, gate_hkd], axis=1).reshape(-1, config.d_model)
  gate, up, down = (ours(("moe", n)) for n in ("w_gate_edf", "w_up_edf", "w_down_efd"))
  for e in range(config.num_experts):
    out[f"mlp.experts.{e}.gate_proj.weight"] = gate[e].T
    out[f"mlp.experts.{e}.up_proj.weight"] = up[e].T
    out[f"mlp.experts.{e}.down_proj.weight"] = down[e].T
  return out


def _layer_slot(config: ModelConfig, layer: int) -> tuple[str, tuple[int, ...]]:
  """Where transformers layer i lives: our stack ("linear" or "attention") and its index there,
  (block, layer in block) for the DeltaNet stack, (block,) for the attention stack."""
  block, slot = divmod(layer, config.full_attention_interval)
  if slot == config.full_attention_interval - 1:
    return "attention", (block,)
  return "linear", (block, slot)


def _text_prefix(names: list[str]) -> str:
  for prefix in ("model.language_model.", "model."):
    if any(n.startswith(prefix + "embed_tokens.") for n in names):
      return prefix
  raise ValueError("no `model.embed_tokens` or `model.language_model.embed_tokens` tensor found")


def load_hf_params(tensors: SafetensorsDir, config: ModelConfig) -> dict[tuple, Array]:
  """Our flat parameters {path: array}, blocks stacked on axis 0, from a checkpoint's tensors."""
  prefix = _text_prefix(tensors.keys())
  layers = []
  for i in range(config.num_layers):
    kind = config.layer_kinds()[i]
    layers.append(_import_layer(lambda n, i=i: tensors[f"{prefix}layers.{i}.{n}"], config, kind))
  params: dict[tuple, Array] = {}
  slots = [_layer_slot(config, i) for i in range(config.num_layers)]
  shapes = {
    "linear": (config.num_blocks, config.full_attention_interval - 1),
    "attention": (config.num_blocks,),
  }
  for stack, shape in shapes.items():  # each tensor of a stack, over the stack's layers
    members = [
      (index, layer) for (s, index), layer in zip(slots, layers, strict=True) if s == stack
    ]
    for path, first in members[0][1].items():
      stacked = np.empty((*shape, *first.shape), first.dtype)
      for index, layer in members:
        stacked[index] = layer[path]
      params["blocks", stack, *path] = stacked
  params["embed_vd",] = tensors[f"{prefix}embed_tokens.weight"]
  params["final_norm", "scale"] = tensors[f"{prefix}norm.weight"]
  if not config.tie_embeddings:
    params["head_dv",] = tensors["lm_head.weight"].T
  return params


def read_config(hf_dir: str | Path, **overrides: Any) -> ModelConfig:
  return config_from_hf(json.loads((Path(hf_dir) / "config.json").read_text()), **overrides)


def from_pretrained(
  hf_dir: str | Path, *, mesh: jax.sharding.Mesh | None = None, **overrides: Any
) -> tuple[Transformer, ModelConfig]:
  """`model, config = from_pretrained(dir)` for a transformers `qwen3_5_moe` save directory.

  `overrides` replace config fields (dtype, moe_backend, remat, ...); parameters are cast to
  `param_dtype` and, under `mesh`, placed with their sharding.
  """
  config = read_config(hf_dir, **overrides)
  params = load_hf_params(SafetensorsDir(hf_dir), config)
  model = abstract_model(config, mesh)
  graphdef, state = nnx.split(model)
  flat = dict(nnx.to_flat_state(state))
  if set(flat) != set(params):
    raise ValueError(
      f"parameter mismatch: missing {set(flat) - set(params)}, extra {set(params) - set(flat)}"
    )
  with sharding.use_mesh(mesh):
    for path, variable in flat.items():
      value = np.asarray(params[path], dtype=config.weight_dtype)
      if value.shape != variable.shape:
        raise ValueError(f"{path}: checkpoint shape {value.shape}, model shape {variable.shape}")
      target = None
      if mesh is not None:  # the abstract model's sharding names an abstract mesh: make it real
        target = jax.sharding.NamedSharding(mesh, variable.get_value().sharding.spec)
      variable.set_value(jax.device_put(value, target))
  return nnx.merge(graphdef, nnx.from_flat_state(flat)), config


def save_pretrained(
  model: Transformer, out_dir: str | Path, max_shard_bytes: int = 5 * 2**30
) -> None:
  """Writes `config.json` and safetensors that `Qwen3_5MoeForCausalLM.from_pretrained` reads."""
  config = model.config
  out_dir = Path(out_dir)
  out_dir.mkdir(parents=True, exist_ok=True)
  (out_dir / "config.json").write_text(json.dumps(config_to_hf(config), indent=2) + "\n")
  flat = {path: v for path, v in nnx.to_flat_state(nnx.state(model, nnx.Param))}
  writer = ShardedWriter(out_dir, max_shard_bytes)
  writer.add("model.embed_tokens.weight", np.asarray(flat["embed_vd",][...]))
  for i, kind in enumerate(config.layer_kinds()):
    stack, index = _layer_slot(config, i)

    def ours(path, stack=stack, index=index):
      return np.asarray(flat["blocks", stack, *path][...][index])

    for name, array in _export_layer(ours, config, kind).items():
      writer.add(f"model.layers.{i}.{name}", array)
  writer.add("model.norm.weight", np.asarray(flat["final_norm", "scale"][...]))
  if not config.tie_embeddings:
    writer.add("lm_head.weight", np.asarray(flat["head_dv",][...]).T)
  writer.close()
