"""The project's main job on its embedded default: ``python -m experiments.demo --workdir=DIR``.

At this stage: the Appendix D meetup task is built and gated, the oracle agent solves it
through the four meta-tools, the verifier scores it, and a summary plus a readable transcript
are written under the workdir.
"""

from absl import app, flags

from compoworld.demo import run_demo
from envs.scenarios import community_meetup
from experiments.common import write_summary

_WORKDIR = flags.DEFINE_string("workdir", "runs/demo", "Where results are written.")
_SEED = flags.DEFINE_integer("seed", 0, "World seed of the scenario.")


def main(argv):
  del argv
  write_summary(_WORKDIR.value, run_demo(community_meetup(_SEED.value), _WORKDIR.value))


if __name__ == "__main__":
  app.run(main)
