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
