"""Line plots with optional 95% bands, as PNG: the demo's training curves and the experiments'
figures share this one function."""

from __future__ import annotations

import dataclasses
import textwrap
from collections.abc import Sequence
from pathlib import Path


@dataclasses.dataclass(frozen=True)
class Curve:
  """One line: ``y`` over ``x``; ``low``/``high`` (same length) shade an interval around it."""

  label: str
  x: Sequence[float]
  y: Sequence[float]
  low: Sequence[float] | None = None
  high: Sequence[float] | None = None

  def __post_init__(self):
    n = len(self.x)
    for name in ("y", "low", "high"):
      values = getattr(self, name)
      if values is not None and len(values) != n:
        raise ValueError(f"curve {self.label!r}: {name} has {len(values)} points, x has {n}")
    if (self.low is None) != (self.high is None):
      raise ValueError(f"curve {self.label!r}: give both low and high, or neither")


def _pyplot():
  import matplotlib  # here, not at the top: only reports need it

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  return plt


def _save(fig, path: str | Path) -> str:
  fig.tight_layout()
  path = Path(path)
  path.parent.mkdir(parents=True, exist_ok=True)
  fig.savefig(path, dpi=100)
  _pyplot().close(fig)
  return str(path)


def line_plot(
  path: str | Path,
  curves: Sequence[Curve],
  *,
  xlabel: str,
  ylabel: str,
  title: str,
  logx: bool = False,
  ylim: tuple[float, float] | None = None,
) -> str:
  """Draws ``curves`` on one axis (markers on every point) and saves a PNG at ``path``."""
  plt = _pyplot()
  if not curves:
    raise ValueError(f"{path}: nothing to plot")
  fig, ax = plt.subplots(figsize=(5, 3.5))
  for curve in curves:
    many = len(curve.x) > 30
    (line,) = ax.plot(curve.x, curve.y, marker=None if many else "o", ms=4, label=curve.label)
    if curve.low is not None:
      ax.fill_between(curve.x, curve.low, curve.high, color=line.get_color(), alpha=0.2, lw=0)
  if logx:  # ticks at the points themselves, written plainly
    ax.set_xscale("log")
    ticks = sorted({float(x) for c in curves for x in c.x})
    ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
    ax.minorticks_off()
  if ylim is not None:
    ax.set_ylim(*ylim)
  ax.set_xlabel(xlabel)
  ax.set_ylabel(ylabel)
  ax.set_title(title, fontsize=9)
  ax.grid(alpha=0.3)
  if len(curves) > 1 or curves[0].low is not None:
    ax.legend(fontsize=8)
  return _save(fig, path)


def bar_plot(
  path: str | Path,
  labels: Sequence[str],
  values: Sequence[float],
  *,
  errors: Sequence[tuple[float, float] | None] | None = None,
  ylabel: str,
  title: str,
) -> str:
  """One bar per label; ``errors`` (low, high) per bar draw its interval (None: no interval)."""
  plt = _pyplot()
  if len(labels) != len(values) or (errors is not None and len(errors) != len(values)):
    raise ValueError(f"{path}: {len(labels)} labels, {len(values)} values and errors must match")
  fig, ax = plt.subplots(figsize=(max(3.5, 1.2 * len(labels) + 1.5), 3.5))
  x = list(range(len(labels)))
  ax.bar(x, values, width=0.6)
  for i, err in enumerate(errors or []):
    if err is not None:
      low, high = err
      ax.errorbar([i], [values[i]], yerr=[[values[i] - low], [high - values[i]]], color="k",
                  capsize=4)  # fmt: skip
  ax.set_xticks(x, labels)
  ax.set_ylabel(_wrap(ylabel, 32))
  ax.set_title(_wrap(title, 42), fontsize=9)
  ax.grid(axis="y", alpha=0.3)
  return _save(fig, path)


def _wrap(text: str, width: int) -> str:
  """``text`` with each of its lines broken at ``width`` characters: a bar plot's figure is
  narrow, and a long title or axis label would run off it."""
  return "\n".join(textwrap.fill(line, width) for line in text.split("\n"))
