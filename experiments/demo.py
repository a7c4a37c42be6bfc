"""The project's main job: ``python -m experiments.demo --workdir=runs/demo`` (``make demo``).

Runs the whole pipeline on the embedded tiny default (``configs/demo.py:tiny``): the service
library compiled from its MCP specs → generated tasks → held-out service sets → oracle
trajectories → SFT → GRPO → the policy evaluated on the held-out compositions before and after
each training stage. Writes ``report.md``, the training curves and ``summary.json`` in the workdir.
``--stages`` runs a subset (the others read an earlier run's files); ``--scenario`` runs the
foundation's demo instead: the Appendix D meetup task solved by the oracle.
"""

from pathlib import Path

from absl import flags
from ml_collections import config_flags

from experiments.common import run_main, write_summary

_CONFIG = config_flags.DEFINE_config_file(
  "config", "configs/demo.py", "Pipeline config (configs/demo.py:tiny or :test).", lock_config=True
)
_WORKDIR = flags.DEFINE_string("workdir", "runs/demo", "Where results are written.")
_STAGES = flags.DEFINE_list(
  "stages",
  "library,tasks,split,trajectories,sft,grpo,eval",
  "Stages to run: library, tasks, split, trajectories, sft, grpo, eval.",
)
_SCENARIO = flags.DEFINE_bool("scenario", False, "Only the meetup scenario with the oracle.")
_SEED = flags.DEFINE_integer("seed", 0, "--scenario: world seed of the scenario.")


def main(argv):
  del argv
  if _SCENARIO.value:
    from compoworld.agents.demo import run_demo
    from envs.scenarios import community_meetup

    write_summary(_WORKDIR.value, run_demo(community_meetup(_SEED.value), _WORKDIR.value))
    return
  from rl.pipeline.run import run

  summary = run(_CONFIG.value, _WORKDIR.value, _STAGES.value)
  write_summary(_WORKDIR.value, summary)
  # Last, after the summary's JSON line: where to look.
  print(f"report: {summary['files']['report']}")
  print(f"summary: {Path(_WORKDIR.value) / 'summary.json'}")


if __name__ == "__main__":
  run_main(main)
