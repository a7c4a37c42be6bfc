"""Times steady-state SFT train steps on the issue's reference shape.

``python -m experiments.bench_train --workdir=DIR``: vocab 8192, hidden 256, 4 layers, 4 query /
2 KV heads of dim 64, 8 experts top-2 of width 256, untied embeddings, batch 8 x 512 tokens,
float32; writes tokens/s and MFU (against the measured matmul peak) to ``DIR/summary.json``.
``--hybrid`` keeps the model's DeltaNet layers (3 of 4); by default every layer is full attention,
as in the Qwen3-MoE the reference figure was measured on.
"""

from absl import app, flags

import models
from experiments.common import write_summary
from rl.sft import benchmark

_WORKDIR = flags.DEFINE_string("workdir", "runs/bench_train", "Where summary.json goes.")
_STEPS = flags.DEFINE_integer("steps", 10, "Timed steps.")
_BATCH = flags.DEFINE_integer("batch_size", 8, "Rows per step.")
_SEQ_LEN = flags.DEFINE_integer("seq_len", 512, "Tokens per row.")
_BACKEND = flags.DEFINE_enum("moe_backend", "sort", list(models.config.MOE_BACKENDS), "MoE kernel.")
_HYBRID = flags.DEFINE_bool("hybrid", False, "Gated DeltaNet in 3 of 4 layers.")


def main(argv):
  del argv
  config = models.ModelConfig(
    vocab_size=8192,
    d_model=256,
    num_layers=4,
    full_attention_interval=4 if _HYBRID.value else 1,
    num_heads=4,
    num_kv_heads=2,
    head_dim=64,
    partial_rotary_factor=1.0,
    num_experts=8,
    num_experts_per_tok=2,
    expert_dim=256,
    shared_expert_dim=0,
    moe_backend=_BACKEND.value,
    tie_embeddings=False,
  )
  summary = benchmark(config, batch_size=_BATCH.value, seq_len=_SEQ_LEN.value, steps=_STEPS.value)
  summary.update(hybrid=_HYBRID.value, moe_backend=_BACKEND.value, reference_tokens_per_s=1100)
  summary["speedup_vs_reference"] = summary["tokens_per_s"] / 1100
  write_summary(_WORKDIR.value, summary)


if __name__ == "__main__":
  app.run(main)
