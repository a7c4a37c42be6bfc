"""The experiments' statistics over seeds and their plots, on fixed numbers."""

import math

import pytest

from configs.experiments import EXPERIMENTS, get_config
from rl.pipeline.experiments import band_note, curve, describe, over_seeds, run_seeds, t_interval
from rl.pipeline.plots import Curve, bar_plot, line_plot

# t quantiles (two-sided 95%) from tables: 1 and 2 degrees of freedom.
T975_1, T975_2 = 12.706204736, 4.302652730


def test_t_interval_matches_hand_computed_values():
  # [1, 2, 3]: mean 2, sample sd 1, half-width t(0.975, 2) * 1 / sqrt(3)
  out = t_interval([1.0, 2.0, 3.0])
  assert out["mean"] == pytest.approx(2.0)
  assert out["half_width"] == pytest.approx(T975_2 / math.sqrt(3), rel=1e-8)
  assert (out["low"], out["high"]) == pytest.approx((2 - 2.484138, 2 + 2.484138), abs=1e-6)
  # [0.5, 0.7]: sd 0.1414, sd / sqrt(2) = 0.1, half-width = t(0.975, 1) * 0.1
  two = t_interval([0.5, 0.7])
  assert two["half_width"] == pytest.approx(T975_1 * 0.1, rel=1e-8)
  assert two["n"] == 2 and two["values"] == [0.5, 0.7]


def test_t_interval_of_equal_values_is_a_point_and_other_levels_are_narrower():
  same = t_interval([0.25, 0.25, 0.25])
  assert same["low"] == same["high"] == pytest.approx(0.25)
  wide, narrow = t_interval([1, 2, 3, 5]), t_interval([1, 2, 3, 5], confidence=0.8)
  assert narrow["half_width"] < wide["half_width"]


def test_one_seed_has_no_interval_and_says_so():
  out = t_interval([0.4])
  assert out["mean"] == 0.4 and out["low"] is None and out["high"] is None
  assert out["note"] == "one seed: no interval"
  assert describe(out) == "0.400 (1 seed, no interval)"
  assert describe(t_interval([1.0, 2.0, 3.0])) == "2.000 ± 2.484 (95% CI, 3 seeds)"
  assert band_note(1) == "1 seed: the values, no interval"
  assert band_note(3) == "mean and 95% t-interval over 3 seeds"


def test_bad_inputs_fail_clearly():
  with pytest.raises(ValueError, match="no values"):
    t_interval([])
  with pytest.raises(ValueError, match="confidence"):
    t_interval([1, 2], confidence=1.5)
  with pytest.raises(ValueError, match="different lengths"):
    over_seeds([{"c": [1, 2]}, {"c": [1]}], ["c"])


def test_over_seeds_gives_scalars_and_pointwise_curves():
  results = [{"s": 1.0, "c": [0.0, 1.0]}, {"s": 3.0, "c": [2.0, 1.0]}]
  out = over_seeds(results, ["s", "c"])
  assert out["s"]["mean"] == 2.0
  assert [p["mean"] for p in out["c"]] == [1.0, 1.0]
  assert out["c"][1]["half_width"] == 0.0
  assert out["c"][0]["half_width"] == pytest.approx(T975_1 * 1.0)  # sd sqrt(2), / sqrt(2)
  banded = curve("a", [1, 2], out["c"])
  assert banded.low == [p["low"] for p in out["c"]]
  assert curve("a", [1], [t_interval([0.3])]).low is None


def test_run_seeds_gives_each_seed_a_directory(tmp_path):
  seen = []

  def one(seed, wd):
    seen.append(wd.name)
    return {"x": seed * 2}

  results = run_seeds(one, [3, 5], tmp_path)
  assert [r["x"] for r in results] == [6, 10] and seen == ["seed_3", "seed_5"]
  assert (tmp_path / "seed_5" / "result.json").is_file()
  with pytest.raises(ValueError, match="repeat"):
    run_seeds(one, [1, 1], tmp_path)


def test_finished_seeds_of_the_same_config_are_reused(tmp_path):
  """A cut-short run resumes at its first unfinished seed; another config reruns every seed."""
  seen = []

  def one(seed, wd):
    seen.append(seed)
    return {"x": seed * 2}

  run_seeds(one, [1, 2], tmp_path, {"lr": 0.1})
  results = run_seeds(one, [1, 2, 3], tmp_path, {"lr": 0.1})
  assert seen == [1, 2, 3] and [r["x"] for r in results] == [2, 4, 6]
  run_seeds(one, [1], tmp_path, {"lr": 0.2})
  assert seen == [1, 2, 3, 1]


def _is_png(path):
  with open(path, "rb") as f:
    return f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_plots_write_pngs_and_check_their_inputs(tmp_path):
  curves = [Curve("a", [1, 2, 4], [0.1, 0.2, 0.3], [0.0, 0.1, 0.2], [0.2, 0.3, 0.4])]
  path = line_plot(tmp_path / "l.png", curves, xlabel="n", ylabel="s", title="t", logx=True)
  assert _is_png(path)
  assert _is_png(bar_plot(tmp_path / "b.png", ["x", "y"], [0.2, 0.5], errors=[None, (0.4, 0.6)],
                          ylabel="s", title="t"))  # fmt: skip
  with pytest.raises(ValueError, match="points"):
    Curve("bad", [1, 2], [1.0])
  with pytest.raises(ValueError, match="both low and high"):
    Curve("bad", [1], [1.0], low=[0.0])
  with pytest.raises(ValueError, match="nothing to plot"):
    line_plot(tmp_path / "e.png", [], xlabel="", ylabel="", title="")


@pytest.mark.parametrize("name", [*EXPERIMENTS, *(f"{e}_test" for e in EXPERIMENTS)])
def test_experiment_configs_load(name):
  config = get_config(name)
  assert config.experiment == name.removesuffix("_test")
  assert config.eval.max_tasks >= 1


def test_unknown_experiment_config_fails():
  with pytest.raises(ValueError, match="unknown experiment"):
    get_config("scaling")


def test_a_bar_plots_long_title_is_broken_into_lines_that_fit():
  from rl.pipeline.plots import _wrap

  title = "single vs composed: path followed, trained pairs (new tasks)\nmean over 3 seeds"
  wrapped = _wrap(title, 48)
  assert all(len(line) <= 48 for line in wrapped.split("\n"))
  assert wrapped.split() == title.split() and wrapped.count("\n") == 2
