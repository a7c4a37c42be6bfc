"""Import/export against transformers' own Qwen3.5-MoE; skipped when torch/transformers are absent."""

import json

import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from models import from_pretrained, get_config, save_pretrained
from models.io.hf import config_from_hf, config_to_hf
from models.io.safetensors_io import INDEX_FILE, SafetensorsDir, ShardedWriter

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
from transformers import Qwen3_5MoeForCausalLM, Qwen3_5MoeForConditionalGeneration  # noqa: E402
from transformers.models.qwen3_5_moe import Qwen3_5MoeConfig, Qwen3_5MoeTextConfig  # noqa: E402

TEXT = dict(
  vocab_size=96,
  hidden_size=32,
  num_hidden_layers=8,
  num_attention_heads=4,
  num_key_value_heads=2,
  head_dim=16,
  linear_key_head_dim=8,
  linear_value_head_dim=8,
  linear_num_key_heads=2,
  linear_num_value_heads=4,
  moe_intermediate_size=16,
  shared_expert_intermediate_size=24,
  num_experts=8,
  num_experts_per_tok=2,
)
TOKENS = np.random.default_rng(0).integers(0, TEXT["vocab_size"], (2, 70))  # > one 64-token chunk


def _randomise(model):
  """transformers initialises norms to 0 (1 + w) or 1: perturb them so layout errors show."""
  torch.manual_seed(1)
  with torch.no_grad():
    for name, p in model.named_parameters():
      if "norm" in name or "dt_bias" in name:
        p.add_(0.2 * torch.randn_like(p))
  return model.eval()


def _hf_logits(model, tokens=TOKENS):
  with torch.no_grad():
    return model(input_ids=torch.tensor(tokens)).logits.float().numpy()


_logits = nnx.jit(lambda model, tokens: model(tokens))


def _ours(model, tokens=TOKENS):
  return np.asarray(_logits(model, jnp.asarray(tokens, jnp.int32)))


@pytest.fixture(scope="module")
def text_checkpoint(tmp_path_factory):
  torch.manual_seed(0)
  model = _randomise(Qwen3_5MoeForCausalLM(Qwen3_5MoeTextConfig(**TEXT)))
  path = tmp_path_factory.mktemp("qwen3_5_moe_text")
  model.save_pretrained(path)
  return path, _hf_logits(model)


def test_parity_with_transformers(text_checkpoint):
  path, reference = text_checkpoint
  model, config = from_pretrained(path)
  assert config.num_layers == 8 and config.num_experts == 8
  logits = _ours(model)
  assert logits.dtype == np.float32 and logits.shape == reference.shape
  assert np.abs(logits - reference).max() <= 1e-4


def test_multimodal_layout_imports_its_language_model(tmp_path):
  torch.manual_seed(2)
  config = Qwen3_5MoeConfig(
    text_config=TEXT,
    vision_config=dict(
      depth=1, hidden_size=16, intermediate_size=32, num_heads=2, out_hidden_size=32
    ),
  )
  hf_model = _randomise(Qwen3_5MoeForConditionalGeneration(config))
  hf_model.save_pretrained(tmp_path)
  assert any(k.startswith("model.language_model.") for k in SafetensorsDir(tmp_path))
  model, _ = from_pretrained(tmp_path)
  assert np.abs(_ours(model) - _hf_logits(hf_model)).max() <= 1e-4


def test_export_loads_in_transformers_and_round_trips(text_checkpoint, tmp_path):
  path, reference = text_checkpoint
  model, _ = from_pretrained(path)
  save_pretrained(model, tmp_path)
  assert json.loads((tmp_path / "config.json").read_text())["model_type"] == "qwen3_5_moe_text"
  reloaded = Qwen3_5MoeForCausalLM.from_pretrained(tmp_path, use_kernels=False).eval()
  assert np.abs(_hf_logits(reloaded) - reference).max() <= 1e-4
  again, _ = from_pretrained(tmp_path)
  for a, b in zip(jax_leaves(model), jax_leaves(again), strict=True):
    np.testing.assert_array_equal(a, b)


def test_fused_expert_tensors_import_like_split_ones(text_checkpoint, tmp_path):
  """Checkpoints may hold experts fused (gate_up_proj [E, 2F, D], down_proj [E, D, F])."""
  path, reference = text_checkpoint
  tensors = SafetensorsDir(path)
  writer = ShardedWriter(tmp_path, max_shard_bytes=64 * 1024)  # several files and an index
  for i in range(TEXT["num_hidden_layers"]):
    prefix = f"model.layers.{i}.mlp.experts"
    experts = range(TEXT["num_experts"])
    gate_up = [
      np.concatenate([tensors[f"{prefix}.{e}.{p}_proj.weight"] for p in ("gate", "up")])
      for e in experts
    ]
    writer.add(f"{prefix}.gate_up_proj", np.stack(gate_up))
    writer.add(
      f"{prefix}.down_proj", np.stack([tensors[f"{prefix}.{e}.down_proj.weight"] for e in experts])
    )
  for name in tensors:
    if ".mlp.experts." not in name:
      writer.add(name, np.asarray(tensors[name]))
  assert len(writer.close()) > 1 and (tmp_path / INDEX_FILE).exists()
  (tmp_path / "config.json").write_text((path / "config.json").read_text())
  model, _ = from_pretrained(tmp_path)
  assert np.abs(_ours(model) - reference).max() <= 1e-4


def test_unsupported_layer_pattern_is_rejected(text_checkpoint):
  hf = json.loads((text_checkpoint[0] / "config.json").read_text())
  hf["layer_types"] = ["full_attention"] + ["linear_attention"] * 7  # not a repeated block
  with pytest.raises(ValueError, match="layer_types"):
    config_from_hf(hf)


def jax_leaves(model):
  return [np.asarray(v[...]) for _, v in nnx.to_flat_state(nnx.state(model, nnx.Param))]


@pytest.mark.parametrize("interval", [1, 2, 4])
def test_config_round_trips_whatever_the_attention_interval(interval):
  config = get_config("tiny", num_layers=4, full_attention_interval=interval)
  assert config_from_hf(config_to_hf(config)).layer_kinds() == config.layer_kinds()
  hf = config_to_hf(config)
  del hf["full_attention_interval"]  # configs that carry only `layer_types`
  assert config_from_hf(hf).full_attention_interval == interval
