"""Benchmarks the model on this machine: ``python -m experiments.bench_model --workdir=DIR``."""

from absl import flags

from experiments.common import run_main, write_summary
from models.perf.benchmark import bench_model

_WORKDIR = flags.DEFINE_string("workdir", "runs/bench_model", "Where summary.json goes.")
_CONFIG = flags.DEFINE_string("config", "small", "Model config name.")
_BATCH = flags.DEFINE_integer("batch", 4, "Training rows per step.")
_SEQ_LEN = flags.DEFINE_integer("seq_len", 512, "Training tokens per row.")
_MOE_TOKENS = flags.DEFINE_integer("moe_tokens", 16384, "Tokens through the MoE-vs-dense block.")
_MOE_D_MODEL = flags.DEFINE_integer("moe_d_model", 512, "Model width of the MoE-vs-dense block.")
_MOE_EXPERT_DIM = flags.DEFINE_integer(
  "moe_expert_dim", 256, "Expert width there (64 experts, top-4)."
)
_PROMPT_LEN = flags.DEFINE_integer("prompt_len", 128, "Decoding prompt length.")
_DECODE_STEPS = flags.DEFINE_integer("decode_steps", 32, "Decoded tokens per row.")
_REPEATS = flags.DEFINE_integer("repeats", 3, "Timed repetitions; the fastest counts.")


def main(argv):
  del argv
  summary = bench_model(
    _CONFIG.value,
    batch=_BATCH.value,
    seq_len=_SEQ_LEN.value,
    moe_tokens=_MOE_TOKENS.value,
    moe_d_model=_MOE_D_MODEL.value,
    moe_expert_dim=_MOE_EXPERT_DIM.value,
    prompt_len=_PROMPT_LEN.value,
    decode_steps=_DECODE_STEPS.value,
    repeats=_REPEATS.value,
  )
  write_summary(_WORKDIR.value, summary)


if __name__ == "__main__":
  run_main(main)
