"""The Flax NNX policy: a Qwen3.5-style hybrid Gated DeltaNet / gated attention MoE."""

from models.config import CONFIGS, ModelConfig, get_config
from models.decode import decode_step, greedy_generate, prefill
from models.io.hf import config_from_hf, config_to_hf, from_pretrained, save_pretrained
from models.loss import lm_loss
from models.model import Cache, Output, Transformer, abstract_model, create_model
from models.perf.flops import model_summary
from models.sharding import RULES, make_mesh, use_mesh

__all__ = [
  "CONFIGS",
  "RULES",
  "Cache",
  "ModelConfig",
  "Output",
  "Transformer",
  "abstract_model",
  "config_from_hf",
  "config_to_hf",
  "create_model",
  "decode_step",
  "from_pretrained",
  "get_config",
  "greedy_generate",
  "lm_loss",
  "make_mesh",
  "model_summary",
  "prefill",
  "save_pretrained",
  "use_mesh",
]
