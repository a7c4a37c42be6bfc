"""Where a policy loses, turn by turn: ``python -m experiments.diagnose_policy --policy=RUN/policy
--trajectories=HELDOUT/sft.jsonl --workdir=DIR``.

Teacher-forced on the reference (oracle) trajectories: the share of assistant turns the policy's
greedy argmax reproduces, split into the opening sentence, the call header (service and tool),
the arguments and the final answer, and each argument value by whether it is copied from the
conversation or written (``rl.pipeline.diagnose``).
"""

from absl import flags

from experiments.common import run_main, write_summary
from rl.pipeline.diagnose import diagnose_policy

_POLICY = flags.DEFINE_string("policy", None, "An exported policy (an SFT or GRPO run's policy/).")
_TRAJECTORIES = flags.DEFINE_string("trajectories", None, "Reference trajectories (JSONL).")
_NUM = flags.DEFINE_integer("num", 100, "Trajectories to score (0: all).")
_MAX_LEN = flags.DEFINE_integer("max_len", 0, "Tokens per row; 0: the policy's SFT seq_len.")
_WORKDIR = flags.DEFINE_string("workdir", "runs/diagnose", "Where summary.json goes.")


def main(argv):
  del argv
  summary = diagnose_policy(_POLICY.value, _TRAJECTORIES.value, _NUM.value, _MAX_LEN.value)
  write_summary(_WORKDIR.value, summary)


if __name__ == "__main__":
  flags.mark_flags_as_required(["policy", "trajectories"])
  run_main(main)
