"""Runs a script in a subprocess on fake CPU devices (the count is fixed before JAX starts)."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_script(script: str, devices: int = 8, timeout: int = 600):
  """The JSON object on the last line of ``script``'s output (``{root}`` = the repository)."""
  env = {
    **os.environ,
    "XLA_FLAGS": f"--xla_force_host_platform_device_count={devices}",
    "JAX_PLATFORMS": "cpu",
  }
  out = subprocess.run(
    [sys.executable, "-c", script.format(root=str(ROOT))],
    env=env,
    cwd=ROOT,
    capture_output=True,
    text=True,
    timeout=timeout,
  )
  assert out.returncode == 0, out.stderr[-3000:]
  return json.loads(out.stdout.strip().splitlines()[-1])


def run_module(module: str, timeout: int = 900):
  """The JSON object on the last line of ``python -m module``'s output (a check module that sets
  its own fake-device count before JAX starts)."""
  out = subprocess.run(
    [sys.executable, "-m", module],
    cwd=ROOT,
    env={**os.environ, "PYTHONPATH": str(ROOT), "JAX_PLATFORMS": "cpu"},
    capture_output=True,
    text=True,
    timeout=timeout,
    check=False,
  )
  assert out.returncode == 0, out.stderr[-3000:]
  return json.loads(out.stdout.strip().splitlines()[-1])
