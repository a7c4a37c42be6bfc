"""Suite-wide set-up: JAX's persistent compilation cache under ``.cache/jax`` in the checkout.

Many tests compile the same small programs (a tiny model's forward, train or decode step) from
new closures, which JAX's in-memory cache does not share across tests, nor across pytest-xdist
workers and the subprocesses of the multi-device tests. The on-disk cache is keyed by the
compiled program, so every one of them compiles once per checkout; a later run of the suite
reuses it all. Set ``JAX_COMPILATION_CACHE_DIR`` to move it (or to "" to turn it off).
"""

import os
from pathlib import Path

_CACHE = Path(__file__).resolve().parents[1] / ".cache" / "jax"
# Environment variables, not jax.config: the test modules import JAX after this file, and the
# subprocesses that tests start inherit them.
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", str(_CACHE))
# Compiles shorter than this are not worth a disk write and read.
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0.2")
