"""Generated services seen from this process: ordinary ``Service``s whose code runs in the sandbox.

A synthesized module never runs here. ``ModuleHost`` keeps it in a jailed child
(``compoworld.synthesis.sandbox``) and checks every answer; ``proxy_class`` makes a ``SandboxedService``
subclass whose tools are the spec's (the schemas and descriptions agents see come from the spec,
not from the module) and whose calls go to the child. The state stays in this process, as data
(``Snapshot``): the child gets it with each call (by key once it has it) and answers with the
envelope and, after a successful write, the records that changed. So this process, not the module,
decides what is committed (a failed call or a read-only tool commits nothing), computes hashes and
diffs, and forks for free; a child that dies or misbehaves is replaced without losing any state.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, ClassVar

from compoworld.runtime.domains import DOMAINS
from compoworld.runtime.envelope import NotFound, ToolError
from compoworld.runtime.ports import check_ports
from compoworld.runtime.service import Service
from compoworld.specs.ingest import McpTool, ServiceSpec
from compoworld.specs.jsonschema_args import schema_tool
from compoworld.specs.world_model import PatchError, simulate
from compoworld.synthesis.sandbox import Limits, Sandbox, SandboxError

#: What a sandboxed service may use at use time: one child per service, replaced when it dies.
USE_LIMITS = Limits(memory_mb=1024, cpu_seconds=600)
CALL_TIMEOUT = 10.0  # seconds one request may take at use time


def _digest(payload: Any) -> str:
  text = json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str)
  return hashlib.sha256(text.encode()).hexdigest()[:32]


class DataTable:
  """One collection as JSON records (id → record), never changed in place: what rubric checks,
  facets, diffs and the world model's prompt read. Records are plain dicts; ``fields`` names
  the fields of the module's record type."""

  __slots__ = ("_digest", "_rows", "fields")
  record_type = dict

  def __init__(self, rows: dict[str, dict[str, Any]], fields: tuple[str, ...]):
    self._rows, self.fields = rows, fields
    self._digest: str | None = None

  def get(self, record_id: str) -> dict[str, Any]:
    try:
      return self._rows[record_id]
    except (KeyError, TypeError):
      raise NotFound(f"record '{record_id}' not found") from None

  def find(self, record_id: str) -> dict[str, Any] | None:
    return self._rows.get(record_id)

  def ids(self) -> list[str]:
    return list(self._rows)

  def __contains__(self, record_id: object) -> bool:
    return record_id in self._rows

  def __len__(self) -> int:
    return len(self._rows)

  def __iter__(self):
    return iter(self._rows.values())

  def digest(self) -> str:
    if self._digest is None:
      self._digest = _digest([self._rows[k] for k in sorted(self._rows)])
    return self._digest

  def diff(self, other: DataTable) -> dict[str, Any]:
    """Record-level changes from ``self`` to ``other``, as ``compoworld.runtime.state.Table.diff``."""
    mine, theirs = self._rows, other._rows
    out: dict[str, Any] = {}
    added = [k for k in theirs if k not in mine]
    updated = []
    for k, old in mine.items():
      new = theirs.get(k)
      if new is not None and new != old:
        fields = {f: [old.get(f), new.get(f)] for f in {*old, *new} if old.get(f) != new.get(f)}
        updated.append({"id": k, "fields": dict(sorted(fields.items()))})
    removed = [k for k in mine if k not in theirs]
    for name, ids in (("added", added), ("updated", updated), ("removed", removed)):
      if ids:
        out[name] = ids
    return out


class Snapshot:
  """A sandboxed service's state, held here as data. Tables are shared between forks and never
  changed in place; ``key`` names the copy the child (of ``host``) already holds (None: send it
  whole)."""

  def __init__(
    self, scalars: dict[str, Any], tables: dict[str, DataTable], key: str | None, host: ModuleHost
  ):
    self._scalars, self._tables, self.key, self.host = scalars, tables, key, host
    self._hash: str | None = None

  @property
  def now(self) -> datetime:
    return datetime.fromisoformat(self._scalars["now"])

  @property
  def seed(self) -> Any:
    return self._scalars.get("seed")

  def scalars(self) -> dict[str, Any]:
    return dict(self._scalars)

  def tables(self) -> dict[str, DataTable]:
    return dict(self._tables)

  def table(self, name: str) -> DataTable:
    if name not in self._tables:
      raise NotFound(f"no collection '{name}'; collections: {', '.join(self._tables)}")
    return self._tables[name]

  def fork(self) -> Snapshot:
    twin = Snapshot(dict(self._scalars), self._tables, self.key, self.host)
    twin._hash = self._hash
    return twin

  def advance(self, delta: timedelta) -> None:
    self._scalars["now"] = (self.now + delta).isoformat()
    self.key = self._hash = None

  def content_hash(self) -> str:
    if self._hash is None:
      digests = {name: table.digest() for name, table in self._tables.items()}
      self._hash = _digest([self._scalars, digests])
    return self._hash

  def diff(self, other: Snapshot) -> dict[str, Any]:
    """Per-collection record diff plus changed scalars, as ``ServiceState.diff``."""
    out: dict[str, Any] = {}
    for name, table in self._tables.items():
      d = table.diff(other._tables[name])
      if d:
        out[name] = d
    mine, theirs = self._scalars, other._scalars
    changed = {k: [mine[k], theirs.get(k)] for k in mine if mine[k] != theirs.get(k)}
    if changed:
      out["_scalars"] = changed
    return out

  def to_json(self) -> dict[str, Any]:
    return {"scalars": self._scalars, "tables": {n: t._rows for n, t in self._tables.items()}}

  def updated(self, data: dict[str, Any], key: str) -> Snapshot:
    """This state with a write's delta applied: new scalars, and per table the records that
    are new or replaced and the ids removed."""
    tables = dict(self._tables)
    for name, delta in data["tables"].items():
      rows = dict(tables[name]._rows)
      rows.update(delta["changed"])
      for record_id in delta["removed"]:
        rows.pop(record_id, None)
      tables[name] = DataTable(rows, tables[name].fields)
    return Snapshot(data["scalars"], tables, key, self.host)

  # The world model's patches (quarantined tools) are checked and applied against the typed
  # records, which only the sandbox has (``compoworld.specs.world_model`` defers to these).

  def check_patch(self, patch: Any, mutates: bool) -> tuple[Any, bool]:
    """The patch, once the sandbox found it fits (else ``PatchError`` with its reason)."""
    problem = self.host.patch(self, patch, mutates, None)
    if problem:
      raise PatchError(problem)
    return patch, mutates

  def apply_patch(self, ops: tuple[Any, bool]) -> None:
    """Applies a checked patch to this state (the runtime's working fork of a call)."""
    new = self.host.patch(self, *ops, self.host.new_key())
    self._scalars, self._tables, self.key, self._hash = new._scalars, new._tables, new.key, None


def _check(condition: bool, what: str) -> None:
  if not condition:
    raise SandboxError(f"the sandbox answered a malformed {what}")


def _strings(value: Any) -> bool:
  return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _checked_envelope(out: Any) -> dict[str, Any]:
  """The envelope the child answered, rebuilt from its checked parts."""
  _check(isinstance(out, dict) and isinstance(out.get("ok"), bool), "envelope")
  if out["ok"]:
    _check(out.get("status") == 200 and "data" in out, "envelope")
    return {"ok": True, "status": 200, "data": out["data"]}
  error, status = out.get("error"), out.get("status")
  _check(type(status) is int and 400 <= status <= 599 and isinstance(error, dict), "envelope")
  _check(isinstance(error.get("type"), str) and isinstance(error.get("message"), str), "envelope")
  return {
    "ok": False,
    "status": status,
    "error": {"type": error["type"], "message": error["message"]},
  }


class RemoteError(ToolError):
  """A failed call's envelope from the child, raised so that the runtime commits nothing."""

  def __init__(self, out: dict[str, Any]):
    super().__init__(out["error"]["message"])
    self.status, self.type = out["status"], out["error"]["type"]


class ModuleHost:
  """One generated module in its own jailed child; every answer is checked before it is used.

  Judging gives a ``deadline`` (time.monotonic) for everything and no restarts; use time gives
  each request ``timeout`` seconds and replaces a child that failed.
  """

  def __init__(
    self,
    service: str,
    module: Path,
    tests: Path | None = None,
    limits: Limits = USE_LIMITS,
    restart: bool = True,
    timeout: float = CALL_TIMEOUT,
    deadline: float | None = None,
  ):
    files = {"service.py": Path(module)}
    if tests is not None:
      files["tests.py"] = Path(tests)
    self.sandbox = Sandbox(service, files, limits, restart)
    self.timeout, self.deadline = timeout, deadline
    self.described: dict[str, Any] = {}
    self._keys = itertools.count(1)  # names of the states the child holds (next() is atomic)

  def _ask(self, op: str, **fields: Any) -> dict[str, Any]:
    if self.deadline is None:
      deadline = time.monotonic() + self.timeout
    else:
      deadline = self.deadline
    answer = self.sandbox.request({"op": op, **fields}, deadline, self.timeout)
    if "error" in answer:
      _check(isinstance(answer["error"], str), "error")
      raise SandboxError(answer["error"])
    return answer

  def _violation(self, err: SandboxError) -> SandboxError:
    """A malformed answer: the child is killed, and a judge rejects the module."""
    return self.sandbox.fail(str(err))

  def describe(self) -> dict[str, Any]:
    """The module's service: its domain, description, tables, tools and tests (checked)."""
    answer = self._ask("load")
    try:
      _check(answer.get("domain") in DOMAINS and isinstance(answer.get("description"), str), "load")
      tables = answer.get("tables")
      _check(isinstance(tables, dict) and all(_strings(f) for f in tables.values()), "load")
      _check(all(isinstance(n, str) for n in tables) and _strings(answer.get("tests")), "load")
      tools = answer.get("tools")
      _check(isinstance(tools, list) and all(isinstance(t, dict) for t in tools), "load")
      for t in tools:
        _check(isinstance(t.get("name"), str) and isinstance(t.get("mutates"), bool), "load")
        _check(_strings(t.get("produces")) and _strings(t.get("consumes")), "load")
        check_ports(f"tool {t['name']}", (*t["produces"], *t["consumes"]))
    except (SandboxError, TypeError) as err:
      raise self._violation(SandboxError(str(err))) from None
    self.described = {k: answer[k] for k in ("domain", "description", "tables", "tools", "tests")}
    return self.described

  def _state(self, data: Any, base: Snapshot | None, key: str) -> Snapshot:
    """The child's state (whole, or a write's delta on ``base``) as a checked ``Snapshot``."""
    tables = set(self.described["tables"])
    try:
      _check(isinstance(data, dict), "state")
      scalars, sent = data.get("scalars"), data.get("tables")
      _check(isinstance(scalars, dict) and isinstance(sent, dict), "state")
      _check(set(sent) <= tables and (base is not None or set(sent) == tables), "state")
      datetime.fromisoformat(scalars.get("now"))
      if base is not None:
        for delta in sent.values():
          _check(isinstance(delta, dict) and _strings(delta.get("removed")), "state")
        sent = {name: delta["changed"] for name, delta in sent.items()}
      for rows in sent.values():
        _check(isinstance(rows, dict) and all(isinstance(r, dict) for r in rows.values()), "state")
    except (SandboxError, TypeError, ValueError):
      raise self._violation(SandboxError("the sandbox answered a malformed state")) from None
    if base is None:
      fields = self.described["tables"]
      return Snapshot(scalars, {n: DataTable(sent[n], tuple(fields[n])) for n in tables}, key, self)
    return base.updated(data, key)

  def new_key(self) -> str:
    return f"s{next(self._keys)}"

  def generate(self, seed: int, size: int | None) -> Snapshot:
    key = self.new_key()
    answer = self._ask("generate", seed=seed, size=size, key=key)
    return self._state(answer.get("state"), None, key)

  def _on(self, op: str, state: Snapshot, **fields: Any) -> dict[str, Any]:
    """Asks ``op`` about ``state``: named by its key, sent whole when the child lacks it."""
    if state.key is None:
      state.key = self.new_key()
      return self._ask(op, key=state.key, state=state.to_json(), **fields)
    answer = self._ask(op, key=state.key, **fields)
    if answer.get("need_state"):  # the child dropped it, or is a new one
      answer = self._ask(op, key=state.key, state=state.to_json(), **fields)
    return answer

  def call(self, state: Snapshot, tool: str, arguments: dict[str, Any]):
    """Runs one call on ``state``: its envelope, and the new state after a successful write."""
    new_key = self.new_key()
    answer = self._on("call", state, tool=tool, arguments=arguments, new_key=new_key)
    try:
      out = _checked_envelope(answer.get("envelope"))
    except SandboxError as err:
      raise self._violation(err) from None
    if not out["ok"] or "state" not in answer:
      return out, None
    return out, self._state(answer["state"], state, new_key)

  def patch(self, state: Snapshot, patch: Any, mutates: bool, new_key: str | None):
    """A world model's patch on ``state``: without ``new_key``, why it does not fit ('' when it
    does); with one, the state it makes."""
    answer = self._on("patch", state, patch=patch, mutates=mutates, new_key=new_key)
    if new_key is not None:
      return self._state(answer.get("state"), state, new_key)
    problem = answer.get("patch_error", "")
    if not isinstance(problem, str) or not (problem or answer.get("checked")):
      raise self._violation(SandboxError("the sandbox answered a malformed patch check"))
    return problem

  def test(self, name: str) -> str:
    result = self._ask("test", name=name).get("result")
    if not isinstance(result, str):
      raise self._violation(SandboxError("the sandbox answered a malformed test result"))
    return result

  def close(self) -> None:
    self.sandbox.close()


class SandboxedService(Service):
  """Base of the classes ``proxy_class`` makes: the tools run in the sandbox, the state is here."""

  host: ClassVar[ModuleHost]
  service_spec: ClassVar[ServiceSpec]
  world_model: ClassVar[Any] = None
  State = Snapshot

  @classmethod
  def generate(cls, seed: int, size: int | None) -> Snapshot:
    return cls.host.generate(seed, size)


def _remote(tool: McpTool):
  def act(svc: SandboxedService, arguments: dict[str, Any]) -> Any:
    out, state = svc.host.call(svc.state, tool.name, arguments)
    if not out["ok"]:
      raise RemoteError(out)
    # The runtime steps the clock of the fork it handed this call, but the child's state carries
    # its own clock: what is committed is a copy that step cannot reach, the child's new state
    # or, when it sent none (a success that claims no write), the state as it was.
    svc.state = state if state is not None else svc.state.fork()
    return out["data"]

  return act


def _simulated(tool: McpTool):
  def act(svc: SandboxedService, arguments: dict[str, Any]) -> Any:
    return simulate(svc, tool, arguments)

  return act


def proxy_class(
  host: ModuleHost,
  spec: ServiceSpec,
  quarantined: dict[str, str] | None = None,
  world_model: Any = None,
) -> type[SandboxedService]:
  """The service of ``spec`` whose tools run in ``host`` (described already); ``quarantined``
  tools, and those the module lacks, run on ``world_model`` in this process instead."""
  quarantined = dict(quarantined or {})
  module_tools = {t["name"]: t for t in host.described["tools"]}
  tools = {}
  for tool in spec.tools:
    own = module_tools.get(tool.name)
    if tool.name not in quarantined and own is None:
      continue
    act = _simulated(tool) if tool.name in quarantined or own is None else _remote(tool)
    if own is not None:
      mutates, ports = own["mutates"], (own["produces"], own["consumes"])
    else:
      mutates, ports = tool.annotations.get("readOnlyHint") is not True, ((), ())
    tools[tool.name] = schema_tool(spec.name, tool, act, mutates, ports, f"{tool.name}.")
  class_name = "".join(w.capitalize() for w in spec.name.split("_")) + "Sandboxed"
  cls = type(
    class_name,
    (SandboxedService,),
    {
      "name": spec.name,
      "domain": spec.domain,
      "description": spec.description,
      "host": host,
      "service_spec": spec,
      "world_model": world_model,
      "__module__": f"compoworld_synthesized.{spec.name}",
    },
  )
  cls.tools = tools
  return cls
