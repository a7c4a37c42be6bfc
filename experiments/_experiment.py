"""What the paper's experiment scripts share: ``--config``, ``--seeds``, ``--workdir``, the run,
and ``summary.json`` written and printed at the end."""

from collections.abc import Callable
from pathlib import Path
from typing import Any

from absl import flags
from ml_collections import config_flags

from experiments.common import run_main, write_summary
from rl.compile_cache import use_compilation_cache


def run_experiment(experiment: Callable[..., dict[str, Any]], name: str) -> None:
  """Defines the flags and runs ``experiment(config, seeds, workdir)`` under absl."""
  config = config_flags.DEFINE_config_file(
    "config", f"configs/experiments.py:{name}", "Experiment config.", lock_config=True
  )
  seeds = flags.DEFINE_list("seeds", ["0"], "Seeds (each: its tasks, split, model init, data).")
  workdir = flags.DEFINE_string("workdir", f"runs/{name}", "Where the results go.")

  def main(argv):
    del argv
    # Every arm and seed jits the same train step and policy programs.
    use_compilation_cache(Path(workdir.value) / "jax_cache")
    summary = experiment(config.value, [int(s) for s in seeds.value], workdir.value)
    write_summary(workdir.value, summary)

  run_main(main)
