import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from experiments.device_check import peak_bf16_flops

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
  ("kind", "peak"),
  [
    ("NVIDIA H100 80GB HBM3", 989e12),
    ("NVIDIA H100 PCIe", 756e12),
    ("NVIDIA H200", 989e12),
    ("NVIDIA A100-SXM4-80GB", 312e12),
    ("NVIDIA L4", 121e12),
    ("NVIDIA L40S", None),
    ("TPU v4", 275e12),
    ("TPU v5 lite", 197e12),
    ("TPU v5", 459e12),
    ("TPU v5p", 459e12),
    ("TPU v6 lite", 918e12),
    ("cpu", None),
  ],
)
def test_peak_table_matches_device_kinds(kind, peak):
  assert peak_bf16_flops(kind) == peak


@pytest.mark.heavy  # every section compiles: 2.5 min cold on 2 shared cores, 45 s warm
def test_device_check_on_cpu_runs_at_test_size_and_passes_parity(tmp_path):
  run = subprocess.run(
    [sys.executable, "-m", "experiments.device_check", f"--workdir={tmp_path}"],
    cwd=ROOT,
    # CPU even on an accelerator host: the run must then choose the test size by itself.
    env={**os.environ, "PYTHONPATH": str(ROOT), "JAX_PLATFORMS": "cpu"},
    capture_output=True,
    text=True,
    timeout=600,
    check=False,
  )
  assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
  summary = json.loads((tmp_path / "summary.json").read_text())
  assert json.loads(run.stdout.strip().splitlines()[-1]) == summary
  assert "no accelerator" in run.stdout and "device check:" in run.stdout
  assert summary["accelerator"] is False and summary["size"] == "test"
  assert summary["passed"] and summary["errors"] == []
  device = summary["device"]
  assert device["platform"] == "cpu" and device["device_count"] >= 1
  assert device["jax_version"] and device["jaxlib_version"]
  assert device["peak_bf16_flops_per_device"] is None
  parity = summary["parity"]
  assert parity["passed"]
  assert set(parity["cases"]) == {"float32_sort", "float32_ragged_dot", "bfloat16_sort"}
  for case in parity["cases"].values():
    assert case["passed"] and case["max_abs_diff"] <= case["tolerance"]
  for name in ("train", "sample"):
    assert summary[name]["tokens_per_s"] > 0 and summary[name]["mfu"] is None
  assert summary["train"]["flops_per_token"] > 0
  assert summary["sample"]["forward_flops_per_token"] > 0
  memory = summary["sft_memory"]
  assert memory["source"] == "memory_analysis" and memory["peak_bytes"] > 0
  moe = summary["moe_backend"]
  assert moe["faster"] in ("ragged_dot", "sort")
  assert moe["ragged_dot"]["seconds"] > 0 and moe["sort"]["seconds"] > 0
  assert set(summary["section_seconds"]) == {
    "sft_memory",
    "parity",
    "train",
    "sample",
    "moe_backend",
  }
