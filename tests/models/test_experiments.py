import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from models import get_config, make_mesh
from models.perf.abstract_compile import compile_train_step

ROOT = Path(__file__).resolve().parents[2]


def test_model_info_writes_and_prints_the_summary(tmp_path):
  run = subprocess.run(
    [
      sys.executable,
      "-m",
      "experiments.model_info",
      "--config=tiny",
      f"--workdir={tmp_path}",
      "--seq_len=64",
    ],
    cwd=ROOT,
    env={**os.environ, "PYTHONPATH": str(ROOT)},
    capture_output=True,
    text=True,
    timeout=300,
    check=False,
  )
  assert run.returncode == 0, run.stderr[-2000:]
  printed = json.loads(run.stdout.strip().splitlines()[-1])
  assert printed == json.loads((tmp_path / "summary.json").read_text())
  assert printed["config"] == "tiny" and printed["seq_len"] == 64
  assert 0 < printed["active_params"] < printed["total_params"]
  assert printed["flops_per_token"] == 3 * printed["forward_flops_per_token"] > 0


@pytest.mark.slow
def test_abstract_train_step_compiles_and_reports_memory():
  # The tiny model's one block (three DeltaNet layers, one attention layer): with a second, XLA
  # keeps the loop over blocks, which doubles the compile time.
  config = get_config("tiny", remat="full", num_layers=4)
  summary = compile_train_step(config, make_mesh(), batch=2, seq_len=16)
  assert summary["per_device_param_bytes"] == 4 * summary["total_params"]  # float32, one device
  assert summary["per_device_temp_bytes"] > 0 and summary["compile_seconds"] > 0
