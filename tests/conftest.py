"""Suite-wide set-up: JAX's persistent compilation cache under ``.cache/jax`` in the checkout.

Many tests compile the same small programs (a tiny model's forward, train or decode step) from
new closures, which JAX's in-memory cache does not share across tests, nor across pytest-xdist
workers and the subprocesses of the multi-device tests. The on-disk cache is keyed by the
compiled program, so every one of them compiles once per checkout; a later run of the suite
reuses it all. Set ``JAX_COMPILATION_CACHE_DIR`` to move it (or to "" to turn it off).

Where JAX has only the CPU (no accelerator plugin installed), the tests compile without LLVM's
optimisation passes (``XLA_FLAGS`` ``--xla_backend_optimization_level=0``, as
``models.create_model`` compiles its one-off initialisation): nearly every test program runs
once or a few times on tiny shapes, so the passes cost more than they save (a train step
compiles in about half the time; the suite takes about a fifth less CPU time). Matmuls still run
in Eigen at full speed. An optimisation level already in ``XLA_FLAGS`` is kept.
"""

import importlib.util
import os
from pathlib import Path

_CACHE = Path(__file__).resolve().parents[1] / ".cache" / "jax"
# Environment variables, not jax.config: the test modules import JAX after this file, and the
# subprocesses that tests start inherit them.
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", str(_CACHE))
# Compiles shorter than this are not worth a disk write and read.
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0.2")
_XLA_FLAGS = os.environ.get("XLA_FLAGS", "")
_ACCELERATOR = any(importlib.util.find_spec(name) for name in ("jax_plugins", "libtpu"))
if not _ACCELERATOR and "--xla_backend_optimization_level" not in _XLA_FLAGS:
  os.environ["XLA_FLAGS"] = f"{_XLA_FLAGS} --xla_backend_optimization_level=0".strip()
