"""Abstract compile of the full-size train step on fake CPU devices:
``python -m experiments.compile_full --workdir=DIR [--devices=64 --fsdp=8 --expert=8]``."""

import os

from absl import flags

from experiments.common import run_main

_CONFIG = flags.DEFINE_string("config", "qwen3_5_35b_a3b", "Model config name.")
_WORKDIR = flags.DEFINE_string("workdir", "runs/compile_full", "Where summary.json goes.")
_DEVICES = flags.DEFINE_integer("devices", 64, "Fake CPU devices (set before JAX starts).")
_DATA = flags.DEFINE_integer("data", 1, "Mesh axis sizes; -1 takes the remaining devices.")
_FSDP = flags.DEFINE_integer("fsdp", -1, "")
_TENSOR = flags.DEFINE_integer("tensor", 1, "")
_EXPERT = flags.DEFINE_integer("expert", 8, "")
_BATCH = flags.DEFINE_integer("batch", 64, "Global batch (rows).")
_SEQ_LEN = flags.DEFINE_integer("seq_len", 4096, "Tokens per row.")
# On CPU, ragged_dot lowers to a dense computation over every expert, so its memory figures say
# nothing about an accelerator; the sort backend's do.
_MOE_BACKEND = flags.DEFINE_string("moe_backend", "sort", "MoE dispatch to compile.")
_CAPACITY = flags.DEFINE_float(
  "capacity_factor", 0.0, "moe_capacity_factor of the all_to_all backend (0: no row dropped)."
)


def main(argv):
  del argv
  # The device count is fixed when JAX starts its backend, so the flag goes in before JAX.
  flag = f"--xla_force_host_platform_device_count={_DEVICES.value}"
  os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {flag}"
  os.environ["JAX_PLATFORMS"] = "cpu"
  import jax

  from experiments.common import write_summary
  from models import make_mesh
  from models.perf.abstract_compile import compile_named

  if jax.device_count() != _DEVICES.value:
    raise RuntimeError(f"JAX started before the device flag: {jax.device_count()} devices")
  mesh = make_mesh(_DATA.value, _FSDP.value, _TENSOR.value, _EXPERT.value)
  summary = compile_named(
    _CONFIG.value,
    mesh,
    batch=_BATCH.value,
    seq_len=_SEQ_LEN.value,
    moe_backend=_MOE_BACKEND.value,
    moe_capacity_factor=_CAPACITY.value,
  )
  write_summary(_WORKDIR.value, summary)


if __name__ == "__main__":
  run_main(main)
