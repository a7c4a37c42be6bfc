"""Runs a generated service module in a locked-down child process and reports on it as JSON.

``python -I sandbox_runner.py WORKDIR REPO_ROOT MEMORY_MB CPU_SECONDS`` — started by
``compoworld.synthesis``, never imported by the main process for a generated module. Before the
module is imported: address space and CPU time are capped, file writes are capped, and sockets
are disabled (plus a fresh network namespace where the kernel allows it). Then it imports
``WORKDIR/service.py``, checks that it defines the spec's service, runs the module's own tests
(``WORKDIR/tests.py``, functions ``test_*(service_cls)``) and the independent adversarial suite
built from ``WORKDIR/spec.json``, and prints one JSON report on the last line of stdout.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib.util
import json
import resource
import socket
import sys
import traceback
from pathlib import Path

_CLONE_NEWNET = 0x40000000


def _no_network(*args, **kwargs):
  raise PermissionError("network access is disabled in the synthesis sandbox")


class _NoSocket(socket.socket):
  """Still a class (code may subclass it), but one that cannot be made."""

  def __init__(self, *args, **kwargs):
    _no_network()


def lock_down(memory_mb: int, cpu_seconds: int) -> None:
  memory = memory_mb * 1024 * 1024
  resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
  resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds))
  resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))
  with contextlib.suppress(OSError, AttributeError):
    # a private network namespace has no interface but loopback (where the kernel allows it)
    ctypes.CDLL(None, use_errno=True).unshare(_CLONE_NEWNET)
  socket.socket = _NoSocket  # type: ignore[misc]
  socket.create_connection = _no_network  # type: ignore[assignment]
  socket.getaddrinfo = _no_network  # type: ignore[assignment]


def _load(path: Path, name: str):
  spec = importlib.util.spec_from_file_location(name, path)
  module = importlib.util.module_from_spec(spec)
  sys.modules[name] = module
  spec.loader.exec_module(module)
  return module


def run(workdir: Path) -> dict:
  from compoworld.service import Service
  from compoworld.specs import ServiceSpec
  from compoworld.validator import validate

  spec = ServiceSpec.model_validate_json((workdir / "spec.json").read_text(encoding="utf-8"))
  report: dict = {"ok": False, "error": "", "tools": {}, "tests": {}}
  try:
    module = _load(workdir / "service.py", f"synthesized_{spec.name}")
  except BaseException as err:  # the module itself is broken (or hostile)
    report["error"] = f"import failed: {type(err).__name__}: {err}"
    return report
  classes = [
    v
    for v in vars(module).values()
    if isinstance(v, type) and issubclass(v, Service) and getattr(v, "name", None) == spec.name
  ]
  if len(classes) != 1:
    report["error"] = f"the module must define one Service subclass named '{spec.name}'"
    return report
  cls = classes[0]
  missing = [t.name for t in spec.tools if t.name not in cls.tools]
  report["tools"] = {name: "not implemented by the module" for name in missing}
  tests_path = workdir / "tests.py"
  if tests_path.exists():
    try:
      tests = _load(tests_path, f"synthesized_{spec.name}_tests")
      for name, fn in sorted(vars(tests).items()):
        if name.startswith("test_") and callable(fn):
          try:
            fn(cls)
            report["tests"][name] = "passed"
          except BaseException as err:
            report["tests"][name] = f"failed: {type(err).__name__}: {err}"[:500]
    except BaseException as err:
      report["error"] = f"its tests do not import: {type(err).__name__}: {err}"
      return report
  failed_tests = [n for n, r in report["tests"].items() if r != "passed"]
  if failed_tests:
    report["error"] = f"its own tests fail: {', '.join(failed_tests)}"
    return report
  present = [t for t in spec.tools if t.name in cls.tools]
  try:
    failures = validate(cls, present)
  except BaseException as err:
    report["error"] = f"the adversarial suite could not run: {type(err).__name__}: {err}"
    return report
  for name, failure in failures.items():
    report["tools"][name] = failure.reason()[:500]
  report["ok"] = True
  return report


def main() -> None:
  workdir, repo, memory_mb, cpu_seconds = sys.argv[1:5]
  sys.path.insert(0, repo)
  lock_down(int(memory_mb), int(cpu_seconds))
  try:
    report = run(Path(workdir))
  except BaseException as err:
    report = {"ok": False, "error": f"{type(err).__name__}: {err}", "tools": {}, "tests": {}}
    traceback.print_exc()
  print(json.dumps(report, default=str))


if __name__ == "__main__":
  main()
