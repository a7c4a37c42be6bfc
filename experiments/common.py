"""What every experiment script shares: how it starts (``run_main``) and how it ends (write
summary.json and print it last)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from absl import app, flags, logging


def run_main(main: Callable[[list[str]], Any]) -> None:
  """``app.run(main)`` with the libraries' INFO logs (Orbax, grain) off: progress bars and the
  scripts' own lines are what a run shows. ``--verbosity=0`` brings the logs back."""

  def quiet_main(argv: list[str]) -> Any:
    if not flags.FLAGS["verbosity"].present:
      logging.set_verbosity(logging.WARNING)
    return main(argv)

  app.run(quiet_main)


def write_summary(workdir: str | Path, summary: dict[str, Any]) -> None:
  path = Path(workdir) / "summary.json"
  path.parent.mkdir(parents=True, exist_ok=True)
  path.write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n", encoding="utf-8")
  print(f"results: {path.parent}")
  print(json.dumps(summary, sort_keys=True))
