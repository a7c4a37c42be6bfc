"""What the paper's experiments share: a loop over seeds, the mean and 95% t-interval of every
metric over seeds, curves with bands, and the ``summary.json`` of a run.

An experiment is a function ``one_seed(seed, workdir) -> dict`` whose result maps names to numbers
or to lists of numbers (one per x value); ``run_seeds`` calls it for every seed in its own
``seed_<s>/`` directory and ``over_seeds`` turns the results into intervals.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rl.pipeline.plots import Curve

CONFIDENCE = 0.95


def t_interval(values: Sequence[float], confidence: float = CONFIDENCE) -> dict[str, Any]:
  """Mean of ``values`` and its two-sided t-interval (sample standard deviation, n - 1 degrees
  of freedom). One value has no interval: ``low`` and ``high`` are None and ``note`` says so."""
  from scipy import stats

  values = [float(v) for v in values]
  n = len(values)
  if not n:
    raise ValueError("no values to average")
  if not 0 < confidence < 1:
    raise ValueError(f"confidence must be in (0, 1), got {confidence}")
  mean = sum(values) / n
  out: dict[str, Any] = {"mean": mean, "n": n, "values": values, "confidence": confidence}
  if n == 1:
    return {**out, "low": None, "high": None, "half_width": None, "note": "one seed: no interval"}
  sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
  half = float(stats.t.ppf((1 + confidence) / 2, n - 1)) * sd / math.sqrt(n)
  return {**out, "low": mean - half, "high": mean + half, "half_width": half}


def over_seeds(results: Sequence[dict[str, Any]], keys: Sequence[str]) -> dict[str, Any]:
  """``keys`` of the per-seed results as intervals over seeds; a list-valued key (a curve)
  becomes a list of intervals, one per point."""
  out: dict[str, Any] = {}
  for key in keys:
    values = [r[key] for r in results]
    if isinstance(values[0], list):
      lengths = {len(v) for v in values}
      if len(lengths) != 1:
        raise ValueError(f"{key}: seeds have curves of different lengths {sorted(lengths)}")
      out[key] = [t_interval([v[i] for v in values]) for i in range(lengths.pop())]
    else:
      out[key] = t_interval(values)
  return out


def curve(label: str, x: Sequence[float], intervals: Sequence[dict[str, Any]]) -> Curve:
  """A plot curve of the means, shaded by the intervals when there are any."""
  mean = [i["mean"] for i in intervals]
  if any(i["low"] is None for i in intervals):
    return Curve(label, list(x), mean)
  return Curve(label, list(x), mean, [i["low"] for i in intervals], [i["high"] for i in intervals])


def describe(interval: dict[str, Any], digits: int = 3) -> str:
  """``0.412 ± 0.051 (95% CI, 3 seeds)``, or the value and "1 seed, no interval"."""
  if interval["low"] is None:
    return f"{interval['mean']:.{digits}f} (1 seed, no interval)"
  pct = round(100 * interval["confidence"])
  return (
    f"{interval['mean']:.{digits}f} ± {interval['half_width']:.{digits}f} "
    f"({pct}% CI, {interval['n']} seeds)"
  )


def band_note(num_seeds: int) -> str:
  """What a plot's shading means, for its title."""
  if num_seeds == 1:
    return "1 seed: the values, no interval"
  return f"mean and {round(100 * CONFIDENCE)}% t-interval over {num_seeds} seeds"


def run_seeds(
  one_seed: Callable[[int, Path], dict[str, Any]],
  seeds: Sequence[int],
  workdir: str | Path,
  config: Any = None,
) -> list[dict[str, Any]]:
  """``one_seed(seed, workdir / f"seed_{seed}")`` for every seed, with a banner per seed; each
  seed's result is also written as ``seed_<s>/result.json``.

  With ``config`` (JSON-serializable, or an ``ml_collections.ConfigDict``) its digest is stored in
  the result, and a seed whose ``result.json`` holds the same digest is not run again: a run cut
  short resumes at its first unfinished seed, and seeds can be added to a finished run."""
  if not seeds:
    raise ValueError("no seeds given")
  if len(set(seeds)) != len(seeds):
    raise ValueError(f"seeds repeat: {list(seeds)}")
  digest = config_digest(config) if config is not None else None
  results, t0 = [], time.perf_counter()
  for i, seed in enumerate(seeds, 1):
    seed_dir = Path(workdir) / f"seed_{seed}"
    done = seed_dir / "result.json"
    if digest and done.is_file():
      result = json.loads(done.read_text())
      if result.get("config_digest") == digest:
        print(f"\n##### seed {seed} ({i}/{len(seeds)}): done before, reusing {done}")
        results.append(result)
        continue
    print(f"\n##### seed {seed} ({i}/{len(seeds)}, t = {time.perf_counter() - t0:.0f} s)")
    seed_dir.mkdir(parents=True, exist_ok=True)
    result = {"seed": seed, **one_seed(seed, seed_dir)}
    if digest:
      result["config_digest"] = digest
    done.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    results.append(result)
  return results


def config_digest(config: Any) -> str:
  """A short digest of a config (its JSON, keys sorted)."""
  data = config.to_dict() if hasattr(config, "to_dict") else config
  text = json.dumps(data, sort_keys=True, default=str)
  return hashlib.sha256(text.encode()).hexdigest()[:16]
