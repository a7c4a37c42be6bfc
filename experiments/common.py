"""What every experiment script does at the end: write summary.json and print it last."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def write_summary(workdir: str | Path, summary: dict[str, Any]) -> None:
  path = Path(workdir) / "summary.json"
  path.parent.mkdir(parents=True, exist_ok=True)
  path.write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n", encoding="utf-8")
  print(f"results: {path.parent}")
  print(json.dumps(summary, sort_keys=True))
