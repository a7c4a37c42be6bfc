"""Counts of the service library: ``python -m experiments.library_stats --workdir=DIR``.

Writes ``summary.json`` (services, tools, tools by domain, read/write split, port coverage) and
``manifest.json`` (every service and tool with its status and ports).
"""

import json
from pathlib import Path

from absl import flags

from compoworld.specs.library import library_stats, manifest
from experiments.common import run_main, write_summary

_WORKDIR = flags.DEFINE_string("workdir", "runs/library_stats", "Where results are written.")


def main(argv):
  del argv
  workdir = Path(_WORKDIR.value)
  workdir.mkdir(parents=True, exist_ok=True)
  (workdir / "manifest.json").write_text(json.dumps(manifest(), indent=2) + "\n")
  write_summary(workdir, library_stats())


if __name__ == "__main__":
  run_main(main)
