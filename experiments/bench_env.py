"""Benchmarks the service runtime: ``python -m experiments.bench_env --workdir=DIR``."""

from absl import flags

from compoworld.compose.benchmark import DEFAULT_SERVICES, bench_env, bench_sandboxed
from experiments.common import run_main, write_summary

_WORKDIR = flags.DEFINE_string("workdir", "runs/bench_env", "Where summary.json goes.")
_SERVICES = flags.DEFINE_list("services", list(DEFAULT_SERVICES), "The joint state's services.")
_RECORDS = flags.DEFINE_integer("records", 1000, "Main records per service.")
_CALLS = flags.DEFINE_integer("calls", 5000, "Calls timed for each of read and write.")
_SANDBOXED = flags.DEFINE_integer(
  "sandboxed_calls", 2000, "Calls timed through the synthesis sandbox (0: skip)."
)


def main(argv):
  del argv
  summary = bench_env(tuple(_SERVICES.value), records=_RECORDS.value, calls=_CALLS.value)
  if _SANDBOXED.value:
    summary.update(bench_sandboxed(_SANDBOXED.value))
  write_summary(_WORKDIR.value, summary)


if __name__ == "__main__":
  run_main(main)
