"""JSON lines, the format tasks, trajectories and spec corpora are stored in: one object a line."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any


def read_lines(path: str | Path) -> Iterator[tuple[int, str]]:
  """The non-blank lines of a JSON-lines file with their line numbers (from 1), so that a
  reader's errors can name the line that is wrong."""
  with open(path, encoding="utf-8") as f:
    for lineno, line in enumerate(f, 1):
      if line.strip():
        yield lineno, line


def write_lines(records: Iterable[dict[str, Any]], path: str | Path) -> None:
  """Writes ``records`` as canonical JSON lines (sorted keys: same records, same bytes)."""
  with open(path, "w", encoding="utf-8") as f:
    for record in records:
      f.write(json.dumps(record, sort_keys=True, ensure_ascii=False) + "\n")
