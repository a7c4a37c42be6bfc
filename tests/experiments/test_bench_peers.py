"""`make bench-peers`'s summary: medians and ratios, the README table rendered from it, the peer
figure the benchmark scripts read from it; and no peer figure left as a constant in the code.
None of it needs Tunix."""

import ast
import json
import re
import sys
from pathlib import Path

import pytest

from experiments.peers import summary as ps

ROOT = Path(__file__).resolve().parents[2]


def make_summary() -> dict:
  sft = ps.compare([3000.0, 3200.0, 3100.0], [1400.0, 1300.0, 1350.0], higher_is_better=True)
  grpo = ps.compare([1.2, 1.0, 1.1], [2.0, 2.4, 2.2], higher_is_better=False)
  return {
    "date": "2026-12-04T14:00:00+00:00",
    "peer": "Tunix 0.1.7",
    "path": "runs/bench_peers/summary.json",
    "repeats": 3,
    "model_shape": {
      "vocab_size": 8192,
      "d_model": 256,
      "num_layers": 4,
      "num_heads": 4,
      "num_kv_heads": 2,
      "head_dim": 64,
      "num_experts": 8,
      "num_experts_per_tok": 2,
      "expert_dim": 256,
      "full_attention_interval": 1,
    },
    "machine": {
      "cpu_model": "AMD EPYC",
      "cpu_count": 2,
      "load_average_before": [1.5, 1.25, 1.0],
      "load_average_after": [2.0, 1.5, 1.0],
    },
    "benchmarks": {
      "sft": {
        "label": "SFT tokens/s",
        "metric": "tokens_per_s",
        "unit": "tokens/s",
        "higher_is_better": True,
        "config": {"batch_size": 8, "seq_len": 512},
        **sft,
      },
      "grpo_beta_0.04": {
        "label": "GRPO step, β = 0.04",
        "metric": "step_s",
        "unit": "s",
        "higher_is_better": False,
        "config": {
          "prompts": 2,
          "num_rollouts": 4,
          "prompt_len": 64,
          "new_tokens": 128,
          "beta": 0.04,
        },
        **grpo,
      },
    },
    "notes": ["A note."],
  }


def test_median_and_ratios():
  assert ps.median([3.0, 1.0, 2.0]) == 2.0
  assert ps.median([4.0, 1.0, 2.0, 3.0]) == 2.5
  with pytest.raises(ValueError):
    ps.median([])
  out = ps.compare([3000.0, 3200.0, 3100.0], [1400.0, 1300.0, 1350.0], higher_is_better=True)
  assert out["ours"] == {"values": [3000.0, 3200.0, 3100.0], "median": 3100.0}
  assert out["theirs"]["median"] == 1350.0
  assert out["ratio"] == pytest.approx(3100 / 1350)
  assert out["speedup"] == out["ratio"]
  assert out["paired_speedups"] == pytest.approx([3000 / 1400, 3200 / 1300, 3100 / 1350])
  assert out["paired_speedup_median"] == pytest.approx(3100 / 1350)
  out = ps.compare([1.2, 1.0, 1.1], [2.0, 2.4, 2.2], higher_is_better=False)  # seconds a step
  assert out["ratio"] == pytest.approx(1.1 / 2.2)
  assert out["speedup"] == pytest.approx(2.0)
  assert out["paired_speedups"] == pytest.approx([2.0 / 1.2, 2.4 / 1.0, 2.2 / 1.1])
  assert out["paired_speedup_median"] == pytest.approx(2.0)
  with pytest.raises(ValueError):
    ps.compare([1.0, 2.0], [1.0], higher_is_better=True)


def test_repeat_figure():
  assert ps.repeat_figure("tokens_per_s", 2.0, 4, 4096) == pytest.approx(8192)
  assert ps.repeat_figure("step_s", 3.0, 3, 0) == pytest.approx(1.0)
  with pytest.raises(ValueError):
    ps.repeat_figure("step_s", 0.0, 3, 0)
  with pytest.raises(ValueError):
    ps.repeat_figure("flops", 1.0, 1, 1)


def test_render_readme():
  text = ps.render_readme(make_summary())
  prose = " ".join(text.split())  # paragraphs are wrapped at 100 columns, table rows are not
  assert all(len(line) <= 100 for line in text.splitlines() if not line.startswith("|"))
  assert "2026-12-04" in prose
  machine = "AMD EPYC, 2 cores, load average 1.50, 1.25, 1.00 before and 2.00, 1.50, 1.00 after"
  assert machine in prose
  assert "median of 3 repeats" in prose
  assert "| benchmark | shape | ours | Tunix 0.1.7 | speed-up | speed-up, paired |" in text
  assert "| SFT tokens/s | batch 8 × 512 | 3,100 | 1,350 | 2.30× | 2.30× |" in text
  row = (
    "| GRPO step, β = 0.04 | 2 prompts × 4 rollouts × 128 new (64-token prompts) | 1.10 s | "
    "2.20 s | 2.00× | 2.00× |"
  )
  assert row in text
  assert text.endswith("\n")


def test_update_readme():
  readme = f"# Title\n\nbefore\n{ps.BEGIN}\nold table\n{ps.END}\nafter\n"
  out = ps.update_readme(readme, make_summary())
  assert "old table" not in out
  assert out.startswith(f"# Title\n\nbefore\n{ps.BEGIN}\nMeasured by `make bench-peers`")
  assert out.endswith(f"{ps.END}\nafter\n")
  assert ps.update_readme(out, make_summary()) == out  # idempotent
  with pytest.raises(ValueError):
    ps.update_readme("# no markers\n", make_summary())


def test_peer_figure(tmp_path):
  assert ps.peer_figure("sft", path=tmp_path / "missing.json") is None
  path = tmp_path / "summary.json"
  path.write_text(json.dumps(make_summary()), encoding="utf-8")
  got = ps.peer_figure("sft", config={"batch_size": 8, "seq_len": 512}, path=path)
  assert got["theirs"] == 1350.0
  assert got["ours_same_run"] == 3100.0
  assert got["speedup_same_run"] == pytest.approx(3100 / 1350)
  assert got["date"].startswith("2026-12-04")
  assert ps.peer_figure("sft", config={"batch_size": 4, "seq_len": 512}, path=path) is None
  assert ps.peer_figure("sft", model_shape={"full_attention_interval": 4}, path=path) is None
  assert ps.peer_figure("sft", model_shape={"num_layers": 4, "d_model": 256}, path=path)
  assert ps.peer_figure("sampler", path=path) is None  # not run


def _source_files():
  for top in ("compoworld", "configs", "envs", "experiments", "models", "rl"):
    yield from (ROOT / top).rglob("*.py")


def test_no_peer_constant_in_code():
  """Peer figures come from runs/bench_peers/summary.json, measured beside ours, never from a
  constant (as `TUNIX_TOKENS_PER_S = 1100` once was)."""
  pattern = re.compile(r"\bTUNIX" + r"_[A-Z0-9_]*")
  found = [
    f"{path.relative_to(ROOT)}:{i}: {line.strip()}"
    for path in _source_files()
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
    if pattern.search(line)
  ]
  assert not found, "\n".join(found)


def test_peer_worker_imports_only_the_peer_stack():
  """The Tunix worker runs in .venv-peers: the standard library, Tunix and its JAX stack only."""
  tree = ast.parse((ROOT / "experiments/peers/tunix_bench.py").read_text(encoding="utf-8"))
  allowed = {"tunix", "jax", "flax", "optax", "numpy", "__future__"} | set(sys.stdlib_module_names)
  imported = set()
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      imported |= {alias.name.split(".")[0] for alias in node.names}
    elif isinstance(node, ast.ImportFrom):
      assert node.level == 0, "no relative imports"
      imported.add(node.module.split(".")[0])
  assert imported <= allowed, imported - allowed
