import math

import pytest

from models import CONFIGS, abstract_model, get_config
from models.perf.flops import param_counts


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_named_configs_validate_and_have_whole_blocks(name):
  config = get_config(name)
  kinds = config.layer_kinds()
  assert len(kinds) == config.num_layers == config.num_blocks * config.full_attention_interval
  assert kinds[: config.full_attention_interval] == ["linear_attention"] * 3 + ["full_attention"]


@pytest.mark.parametrize(
  "change",
  [
    {"num_layers": 6},  # not a multiple of the 4-layer block
    {"num_heads": 3},  # not a multiple of the KV heads
    {"linear_num_value_heads": 3},
    {"num_experts_per_tok": 9},
    {"moe_backend": "dense"},
    {"remat": "sometimes"},
    {"dtype": "int8"},
    {"d_model": 0},
    {"partial_rotary_factor": 0.1},  # 1.6 rotary features: not an even count
  ],
)
def test_invalid_configs_are_rejected(change):
  with pytest.raises(ValueError):
    get_config("tiny", **change)


def test_unknown_config_name():
  with pytest.raises(KeyError, match="valid"):
    get_config("huge")


def test_full_size_matches_the_published_35b_a3b():
  counts = param_counts(abstract_model(get_config("qwen3_5_35b_a3b")))
  assert round(counts["total_params"] / 1e9) == 35
  assert round(counts["active_params"] / 1e9) == 3


def test_small_is_tens_of_millions_and_tiny_is_tiny():
  small = param_counts(abstract_model(get_config("small")))["total_params"]
  tiny = param_counts(abstract_model(get_config("tiny")))["total_params"]
  assert 10e6 < small < 100e6
  assert tiny < 1e6


def test_parameters_are_stacked_per_block():
  config = get_config("tiny")
  model = abstract_model(config)
  linear = (config.num_blocks, config.full_attention_interval - 1)
  w = model.blocks.linear.moe.w_gate_edf
  assert w.shape == (*linear, config.num_experts, config.d_model, config.expert_dim)
  assert model.blocks.attention.moe.w_gate_edf.shape == w.shape[:1] + w.shape[2:]
  assert math.prod(model.embed_vd.shape) == config.vocab_size * config.d_model
