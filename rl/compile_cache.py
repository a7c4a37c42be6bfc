"""JAX's persistent compilation cache, for the runs that load the same programs many times.

A policy jits its prefill and decode steps anew each time it is loaded, and an experiment builds
a train step of the same shapes in every arm: without a cache each of them compiles again (a
10-task evaluation of the demo's policy spends about half of its 34 s compiling 25 programs;
with the cache warm it takes 20 s). ``use_compilation_cache(dir)`` points JAX at a cache
directory, which the demo pipeline and the experiment scripts keep in their workdir, unless
one is configured already (``JAX_COMPILATION_CACHE_DIR`` or ``jax.config``), which wins.
"""

from __future__ import annotations

from pathlib import Path

import jax

#: Programs that compile faster than this are not worth a cache file (JAX's default is 1 s;
#: a policy's decode steps take ~0.6 s each on 2 CPU cores).
MIN_COMPILE_SECONDS = 0.2


def use_compilation_cache(
  directory: str | Path | None, min_compile_seconds: float = MIN_COMPILE_SECONDS
) -> str | None:
  """Caches compiled programs in ``directory`` (created) from now on; returns the directory in
  use: one already configured, ``directory``, or None when neither is given. Call it before
  the process compiles anything: JAX reads the setting when it first compiles."""
  current = jax.config.jax_compilation_cache_dir
  if current or not directory:
    return current or None
  Path(directory).mkdir(parents=True, exist_ok=True)
  jax.config.update("jax_compilation_cache_dir", str(directory))
  jax.config.update("jax_persistent_cache_min_compile_time_secs", min_compile_seconds)
  return str(directory)
