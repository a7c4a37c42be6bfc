"""The child side of the synthesis sandbox: loads one generated module and does what it is told.

``python -I sandbox_runner.py MEMORY_MB CPU_SECONDS FILE_MB OPEN_FILES SERVICE`` — started by
``compoworld.synthesis.sandbox`` inside bubblewrap, never imported by the main process. Before anything
generated is imported it lowers its own hard rlimits (they cannot be raised again) and installs a
seccomp filter that refuses new processes and threads, ``exec``, sockets, and the namespace,
mount, tracing, BPF and io_uring calls. ``--self-check`` stops there and proves the filter holds.

Then it answers JSON lines from the parent, one answer per request, echoing the request's id:

  load      the description of the module's service (every request first imports
            ``/sandbox/service.py`` and ``/sandbox/tests.py`` if that has not happened yet)
  generate  the service's seeded state, as data
  call      one tool call on a state the parent holds (sent once, then named by its key): the
            envelope and, after a successful write, the scalars and the records that changed
  patch     check (and with a ``new_key``, apply) a world model's patch for a quarantined tool
  test      run one of the module's own tests

Nothing here is trusted by the parent: the module can rewrite this file's functions or write to
the channel itself. The parent checks every answer and keeps the state and the verdict.
"""

from __future__ import annotations

import collections
import ctypes
import importlib.util
import json
import os
import platform
import resource
import struct
import sys
import typing
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from pydantic import TypeAdapter

from compoworld.runtime.service import Service

#: Denied system calls: (x86_64, aarch64) numbers; aarch64 has no fork or vfork.
_DENIED = {
  "clone": (56, 220),
  "clone3": (435, 435),
  "fork": (57, None),
  "vfork": (58, None),
  "execve": (59, 221),
  "execveat": (322, 281),
  "socket": (41, 198),
  "ptrace": (101, 117),
  "process_vm_readv": (310, 270),
  "process_vm_writev": (311, 271),
  "unshare": (272, 97),
  "setns": (308, 268),
  "mount": (165, 40),
  "umount2": (166, 39),
  "pivot_root": (155, 41),
  "chroot": (161, 51),
  "add_key": (248, 217),
  "request_key": (249, 218),
  "keyctl": (250, 219),
  "bpf": (321, 280),
  "perf_event_open": (298, 241),
  "userfaultfd": (323, 282),
  "io_uring_setup": (425, 425),
  "io_uring_enter": (426, 426),
  "io_uring_register": (427, 427),
  "kexec_load": (246, 104),
  "init_module": (175, 105),
  "finit_module": (313, 273),
  "open_tree": (428, 428),
  "move_mount": (429, 429),
  "fsopen": (430, 430),
  "fsconfig": (431, 431),
  "fsmount": (432, 432),
  "fspick": (433, 433),
}
_ARCHES = {"x86_64": (0, 0xC000003E), "aarch64": (1, 0xC00000B7)}  # column, AUDIT_ARCH_*
_EPERM = 1
_RET_ALLOW, _RET_ERRNO, _RET_KILL = 0x7FFF0000, 0x00050000, 0x80000000
_LD_ABS, _JEQ, _JGE, _RET = 0x20, 0x15, 0x35, 0x06  # BPF_LD|W|ABS, BPF_JMP|JEQ|K, |JGE|K, BPF_RET|K
_X32_BIT = 0x40000000


def seccomp_program() -> bytes:
  """A classic-BPF seccomp filter: other architectures are killed, x32 calls and the denied calls
  fail with EPERM, everything else is allowed."""
  machine = platform.machine()
  if machine not in _ARCHES:
    raise OSError(f"no seccomp table for {machine}; the sandbox supports {sorted(_ARCHES)}")
  column, arch = _ARCHES[machine]

  def op(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("<HBBI", code, jt, jf, k)

  denied = sorted({n[column] for n in _DENIED.values() if n[column] is not None})
  prog = [op(_LD_ABS, 4), op(_JEQ, arch, 1, 0), op(_RET, _RET_KILL), op(_LD_ABS, 0)]
  if machine == "x86_64":
    prog += [op(_JGE, _X32_BIT, 0, 1), op(_RET, _RET_ERRNO | _EPERM)]
  for nr in denied:
    prog += [op(_JEQ, nr, 0, 1), op(_RET, _RET_ERRNO | _EPERM)]
  prog.append(op(_RET, _RET_ALLOW))
  return b"".join(prog)


class _Fprog(ctypes.Structure):
  _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def lock_down(memory_mb: int, cpu_seconds: int, file_mb: int, open_files: int) -> None:
  """Caps this process for good, then forbids the calls a service never needs."""
  for limit, value in (
    (resource.RLIMIT_AS, memory_mb << 20),
    (resource.RLIMIT_CPU, cpu_seconds),
    (resource.RLIMIT_FSIZE, file_mb << 20),
    (resource.RLIMIT_NOFILE, open_files),
    (resource.RLIMIT_CORE, 0),
  ):
    resource.setrlimit(limit, (value, value))
  program = seccomp_program()
  buffer = ctypes.create_string_buffer(program, len(program))
  fprog = _Fprog(len(program) // 8, ctypes.addressof(buffer))
  libc = ctypes.CDLL(None, use_errno=True)
  pr_set_no_new_privs, pr_set_seccomp, seccomp_mode_filter = 38, 22, 2
  if libc.prctl(pr_set_no_new_privs, ctypes.c_ulong(1), 0, 0, 0) != 0:
    raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
  if libc.prctl(pr_set_seccomp, ctypes.c_ulong(seccomp_mode_filter), ctypes.byref(fprog), 0, 0):
    raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP) failed: no seccomp filters here")


def self_check() -> str:
  """Proves the filter holds: a process, a thread and a socket are each refused."""
  import socket
  import threading

  for what, attempt in (
    ("fork", os.fork),
    ("a thread", lambda: threading.Thread(target=int).start()),
    ("a socket", lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM)),
  ):
    try:
      attempt()
    except (OSError, RuntimeError):
      continue
    if what == "fork":
      os._exit(0)  # the child of a fork that should not have happened
    return f"the seccomp filter let {what} through"
  return "sandbox ok"


def _error(err: BaseException) -> str:
  return f"{type(err).__name__}: {err}"[:2000]


class Runner:
  """One sandboxed module: its class, its tests, and the states the parent sent."""

  MAX_STATES = 256

  def __init__(self, service: str):
    self.service = service
    self.cls: type[Service] | None = None
    self.tests: dict[str, Any] = {}
    self.problem = ""  # why the module could not be loaded
    self.states: collections.OrderedDict[str, Any] = collections.OrderedDict()
    self.adapters: dict[type, TypeAdapter] = {}

  def _import(self, path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module

  def _load(self) -> str:
    """Imports the module and its tests, once; why that failed, or ''."""
    name = f"compoworld_synthesized.{self.service}"
    try:
      module = self._import(Path("/sandbox/service.py"), name)
    except BaseException as err:  # the module itself is broken (or hostile)
      return f"import failed: {_error(err)}"
    classes = [
      v
      for v in vars(module).values()
      if isinstance(v, type) and issubclass(v, Service) and getattr(v, "name", None) == self.service
    ]
    if len(classes) != 1:
      return f"the module must define one Service subclass named '{self.service}'"
    if Path("/sandbox/tests.py").exists():
      try:
        tests = self._import(Path("/sandbox/tests.py"), f"{name}_tests")
      except BaseException as err:
        return f"its tests do not import: {_error(err)}"
      self.tests = {
        k: v for k, v in sorted(vars(tests).items()) if k.startswith("test_") and callable(v)
      }
    self.cls = classes[0]
    return ""

  def ready(self) -> bool:
    if self.cls is None and not self.problem:
      self.problem = self._load()
    return self.cls is not None

  def load(self, request: dict[str, Any]) -> dict[str, Any]:
    fields = self.cls.State.model_fields
    tools = [
      {"name": s.name, "mutates": s.mutates, "produces": s.produces, "consumes": s.consumes}
      for s in self.cls.tools.values()
    ]
    return {
      "domain": self.cls.domain,
      "description": self.cls.description,
      "tables": {
        name: list(typing.get_args(fields[name].annotation)[0].model_fields)
        for name in self.cls.State._table_fields
      },
      "tools": tools,
      "tests": list(self.tests),
    }

  def _rows(self, table: Any, rows: dict[str, Any]) -> dict[str, Any]:
    adapter = self.adapters.get(table.record_type)
    if adapter is None:
      adapter = self.adapters[table.record_type] = TypeAdapter(dict[str, table.record_type])
    return adapter.dump_python(rows, mode="json")

  def _dump(self, state: Any) -> dict[str, Any]:
    """The whole state as JSON: its scalars and every table's records."""
    tables = {name: self._rows(table, table._rows) for name, table in state.tables().items()}
    return {"scalars": state.scalars(), "tables": tables}

  def _delta(self, state: Any, since: Any) -> dict[str, Any]:
    """What a write changed: the scalars, and per table written to the records that are new
    or replaced (records are immutable, so identity tells) and the ids removed."""
    tables = {}
    for name, table in state.tables().items():
      old, new = since.tables()[name]._rows, table._rows
      if new is old:
        continue
      changed = {k: r for k, r in new.items() if old.get(k) is not r}
      removed = [k for k in old if k not in new]
      tables[name] = {"changed": self._rows(table, changed), "removed": removed}
    return {"scalars": state.scalars(), "tables": tables}

  def _keep(self, key: str, state: Any) -> None:
    self.states[key] = state
    if len(self.states) > self.MAX_STATES:
      self.states.popitem(last=False)

  def generate(self, request: dict[str, Any]) -> dict[str, Any]:
    state = self.cls.generate(request["seed"], request["size"])
    if not isinstance(state, self.cls.State):
      return {
        "error": f"generate returned a {type(state).__name__}, not a {self.cls.State.__name__}"
      }
    self._keep(request["key"], state)
    return {"state": self._dump(state)}

  def _state_of(self, request: dict[str, Any]) -> Any:
    """The state a request names by key (sent along the first time), or None if not held."""
    key = request["key"]
    if "state" in request:
      data = request["state"]
      self._keep(key, self.cls.State.model_validate({**data["scalars"], **data["tables"]}))
    state = self.states.get(key)
    if state is not None:
      self.states.move_to_end(key)
    return state

  def call(self, request: dict[str, Any]) -> dict[str, Any]:
    state = self._state_of(request)
    if state is None:
      return {"need_state": True}
    svc = self.cls(state.fork())
    out = svc.call(request["tool"], request["arguments"])
    answer: dict[str, Any] = {"envelope": out}
    spec = self.cls.tools.get(request["tool"])
    if out.get("ok") and spec is not None and spec.mutates:
      self._keep(request["new_key"], svc.state)
      answer["state"] = self._delta(svc.state, since=state)
    return answer

  def patch(self, request: dict[str, Any]) -> dict[str, Any]:
    """A world model's patch checked against the typed state, and with ``new_key`` applied."""
    from compoworld.specs.world_model import PatchError, apply_patch, check_patch

    state = self._state_of(request)
    if state is None:
      return {"need_state": True}
    work = state.fork()
    try:
      ops = check_patch(work, request["patch"], request["mutates"])
    except PatchError as err:
      return {"patch_error": str(err)}
    if request.get("new_key") is None:
      return {"checked": True}
    apply_patch(work, ops)
    self._keep(request["new_key"], work)
    return {"state": self._delta(work, since=state)}

  def test(self, request: dict[str, Any]) -> dict[str, Any]:
    try:
      self.tests[request["name"]](self.cls)
    except BaseException as err:
      return {"result": f"failed: {_error(err)}"[:500]}
    return {"result": "passed"}


def serve(service: str, channel_in: Any, channel_out: Any) -> None:
  runner = Runner(service)
  ops = {
    "load": runner.load,
    "generate": runner.generate,
    "call": runner.call,
    "patch": runner.patch,
    "test": runner.test,
  }
  for line in channel_in:
    request = json.loads(line)
    try:
      answer = ops[request["op"]](request) if runner.ready() else {"error": runner.problem}
    except BaseException as err:  # a tool's SystemExit, a memory error outside a call, ...
      answer = {"error": _error(err)}
    answer["id"] = request["id"]
    channel_out.write(json.dumps(answer, default=str).encode() + b"\n")
    channel_out.flush()


def main() -> None:
  # The channel moves off fds 0 and 1: whatever the module prints lands on stderr, and a read
  # of stdin sees end of file, so neither can garble the conversation by accident.
  channel_in, channel_out = os.fdopen(os.dup(0), "rb"), os.fdopen(os.dup(1), "wb")
  empty, closed = os.pipe()
  os.close(closed)
  os.dup2(empty, 0)
  os.dup2(2, 1)
  memory_mb, cpu_seconds, file_mb, open_files = (int(v) for v in sys.argv[1:5])
  lock_down(memory_mb, cpu_seconds, file_mb, open_files)
  if sys.argv[5] == "--self-check":
    channel_out.write(self_check().encode() + b"\n")
    channel_out.flush()
    return
  serve(sys.argv[5], channel_in, channel_out)


if __name__ == "__main__":
  main()
