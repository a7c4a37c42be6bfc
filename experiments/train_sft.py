"""Supervised fine-tuning on verified trajectories.

``python -m experiments.train_sft --config=configs/sft.py:tiny --workdir=DIR`` trains (or resumes
from the latest checkpoint in ``DIR/checkpoints``), writes metrics as TensorBoard event files and
``DIR/summary.json`` (steps, initial_loss, final_loss, eval_loss, tokens_per_s, mfu, ...).

As several processes (``--num_processes``, ``--process_id``, ``--coordinator_address``, or
``--cluster_detect``; BUILD.md, "Many processes"), each loads only its own data shards.
"""

from absl import flags
from ml_collections import config_flags

from experiments.common import run_main, write_summary
from rl import distributed
from rl.sft.trainer import train

_CONFIG = config_flags.DEFINE_config_file("config", None, "SFT config file.", lock_config=True)
_WORKDIR = flags.DEFINE_string("workdir", "runs/sft", "Checkpoints, metrics and summary.json.")
distributed.define_flags()


def main(argv):
  del argv
  distributed.initialize_from_flags()
  summary = train(_CONFIG.value, _WORKDIR.value)
  if distributed.is_primary():
    write_summary(_WORKDIR.value, summary)


if __name__ == "__main__":
  flags.mark_flags_as_required(["config"])
  run_main(main)
