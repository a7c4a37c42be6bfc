"""Sizes and FLOPs of a model config: ``python -m experiments.model_info --config=NAME --workdir=DIR``."""

from absl import flags

from experiments.common import run_main, write_summary
from models import get_config
from models.perf.flops import model_summary

_CONFIG = flags.DEFINE_string("config", "tiny", "Model config name (models.config.CONFIGS).")
_WORKDIR = flags.DEFINE_string("workdir", "runs/model_info", "Where summary.json goes.")
_SEQ_LEN = flags.DEFINE_integer("seq_len", 4096, "Sequence length the per-token FLOPs assume.")


def main(argv):
  del argv
  summary = {"config": _CONFIG.value, **model_summary(get_config(_CONFIG.value), _SEQ_LEN.value)}
  write_summary(_WORKDIR.value, summary)


if __name__ == "__main__":
  run_main(main)
