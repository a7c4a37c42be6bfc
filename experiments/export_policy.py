"""A servable policy from an SFT run's training checkpoint: ``python -m
experiments.export_policy --workdir=RUN [--step=N] [--out=DIR]``.

A run writes ``RUN/policy`` (what ``--agent=checkpoint:``, ``serve_policy`` and
``diagnose_policy`` read) only when it finishes. This exports the weights of any kept training
checkpoint (``RUN/checkpoints/<step>``, default the latest) in the same format, to
``RUN/policy-<step>`` unless ``--out`` says where: to score a run that was stopped, or one of its
earlier steps.
"""

from absl import flags

from experiments.common import run_main
from rl.serve.policy import find_checkpoint
from rl.sft.trainer import export_checkpoint

_WORKDIR = flags.DEFINE_string("workdir", None, "The SFT run's workdir (its config.json).")
_STEP = flags.DEFINE_integer("step", -1, "The checkpoint's step; -1: the latest.")
_OUT = flags.DEFINE_string("out", "", "Where the policy goes; '': RUN/policy-<step>.")


def main(argv):
  del argv
  step = None if _STEP.value < 0 else _STEP.value
  out = export_checkpoint(_WORKDIR.value, step, _OUT.value or None)
  print(f"policy of step {find_checkpoint(out).name}: {out}")


if __name__ == "__main__":
  flags.mark_flags_as_required(["workdir"])
  run_main(main)
