"""GRPO with the environment in the loop (the paper's second stage).

``python -m experiments.train_grpo --config=configs/grpo.py:tiny --workdir=DIR [--init=SFT_DIR]``
trains from the policy of an SFT workdir (``--init``; without it the tiny config first trains the
tiny SFT policy in ``DIR/sft``), resumes from the latest checkpoint in ``DIR/checkpoints``, writes
metrics as TensorBoard event files and ``DIR/summary.json`` (steps, reward, mean_reward and
pass_rate per step, the held-out eval curve, ...) and exports the policy to ``DIR/policy``.

As several processes (``--num_processes``, ``--process_id``, ``--coordinator_address``, or
``--cluster_detect``; BUILD.md), each process plays its own groups of every step with its own
environment forks on a local copy of the policy, and the update runs on the global batch.
"""

from absl import flags
from ml_collections import config_flags

from experiments.common import run_main, write_summary
from rl import distributed
from rl.grpo.trainer import train

_CONFIG = config_flags.DEFINE_config_file("config", None, "GRPO config file.", lock_config=True)
_WORKDIR = flags.DEFINE_string("workdir", "runs/grpo", "Checkpoints, metrics and summary.json.")
_INIT = flags.DEFINE_string("init", None, "SFT workdir or policy directory to start from.")
_TASKS = flags.DEFINE_string("tasks", None, "tasks.jsonl to train on (default: the SFT run's).")
distributed.define_flags()


def main(argv):
  del argv
  distributed.initialize_from_flags()
  config = _CONFIG.value
  with config.unlocked():
    if _INIT.value:
      config.init = _INIT.value
    if _TASKS.value:
      config.data.tasks = _TASKS.value
  summary = train(config, _WORKDIR.value)
  if distributed.is_primary():
    write_summary(_WORKDIR.value, summary)


if __name__ == "__main__":
  flags.mark_flags_as_required(["config"])
  run_main(main)
