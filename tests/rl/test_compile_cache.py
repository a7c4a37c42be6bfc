"""The persistent compilation cache (rl.compile_cache), in fresh processes: JAX reads the setting
once per process."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent(
  """
  import sys, time
  import jax, jax.numpy as jnp
  from rl.compile_cache import use_compilation_cache
  print(use_compilation_cache(sys.argv[1] or None, min_compile_seconds=0.0))
  f = jax.jit(lambda x: jnp.sin(x) @ jnp.cos(x).T + 1.5)
  f(jnp.ones((64, 64))).block_until_ready()
  """
)


def _run(cache: str, env_cache: str | None = None) -> str:
  env = {k: v for k, v in os.environ.items() if k != "JAX_COMPILATION_CACHE_DIR"}
  env["PYTHONPATH"] = str(ROOT)
  env["JAX_PLATFORMS"] = "cpu"
  if env_cache:
    env["JAX_COMPILATION_CACHE_DIR"] = env_cache
  out = subprocess.run(
    [sys.executable, "-c", SCRIPT, cache], env=env, capture_output=True, text=True, check=True
  )
  return out.stdout.strip().splitlines()[-1]


def test_compiled_programs_are_written_to_the_cache_and_a_configured_one_wins(tmp_path):
  cache = tmp_path / "cache"
  assert _run(str(cache)) == str(cache)
  entries = sorted(p.name for p in cache.iterdir())
  assert entries  # the jitted function's executable
  assert _run(str(cache)) == str(cache)
  assert sorted(p.name for p in cache.iterdir()) == entries  # loaded, not written again
  other = tmp_path / "from_env"
  assert _run(str(cache), env_cache=str(other)) == str(other)
  assert _run("") == "None"
