"""Generated services seen from this process: ordinary ``Service``s whose code runs in the sandbox.

A synthesized module never runs here. ``ModuleHost`` keeps it in a jailed child
(``compoworld.sandbox``) and checks every answer; ``proxy_class`` makes a ``SandboxedService``
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

from compoworld.domains import DOMAINS
from compoworld.envelope import NotFound, ToolError
from compoworld.jsonschema_args import schema_tool
from compoworld.ports import check_ports
from compoworld.sandbox import Limits, Sandbox, SandboxError
from compoworld.service import Service
from compoworld.specs import McpTool, ServiceSpec
from compoworld.world_model import FallbackSimulator, simulate

#: What a sandboxed service may use at use time: one child per service, replaced when it dies.
USE_LIMITS = Limits(memory_mb=1024, cpu_seconds=600)
CALL_TIMEOUT = 10.0  # seconds one request may take at use time


def _digest(payload: Any) -> str:
  text = json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str)
  return hashlib.sha256(text.encode()).hexdigest()[:32]


class DataTable:
  """One collection as JSON records (id → record), never changed in place: what rubric checks,
  facets and diffs read. Records are plain dicts."""

  __slots__ = ("_digest", "_rows")
  record_type = dict

  def __init__(self, rows: dict[str, dict[str, Any]]):
    self._rows = rows
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
    """Record-level changes from ``self`` to ``other``, as ``compoworld.state.Table.diff``."""
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
  changed in place; ``key`` names the copy the child already holds (None: send it whole)."""

  def __init__(self, scalars: dict[str, Any], tables: dict[str, DataTable], key: str | None):
    self._scalars, self._tables, self.key = scalars, tables, key
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
    twin = Snapshot(dict(self._scalars), self._tables, self.key)
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
      tables[name] = DataTable(rows)
    return Snapshot(data["scalars"], tables, key)


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
      _check(_strings(answer.get("tables")) and _strings(answer.get("tests")), "load")
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
      return Snapshot(scalars, {n: DataTable(sent[n]) for n in tables}, key)
    return base.updated(data, key)

  def generate(self, seed: int, size: int | None) -> Snapshot:
    key = f"s{next(self._keys)}"
    answer = self._ask("generate", seed=seed, size=size, key=key)
    return self._state(answer.get("state"), None, key)

  def call(self, state: Snapshot, tool: str, arguments: dict[str, Any]):
    """Runs one call on ``state``: its envelope, and the new state after a successful write."""
    message = {"tool": tool, "arguments": arguments, "new_key": f"s{next(self._keys)}"}
    if state.key is None:
      state.key = f"s{next(self._keys)}"
      message["state"] = state.to_json()
    answer = self._ask("call", key=state.key, **message)
    if answer.get("need_state") and "state" not in message:  # the child dropped or lost it
      answer = self._ask("call", key=state.key, state=state.to_json(), **message)
    try:
      out = _checked_envelope(answer.get("envelope"))
    except SandboxError as err:
      raise self._violation(err) from None
    if not out["ok"] or "state" not in answer:
      return out, None
    return out, self._state(answer["state"], state, message["new_key"])

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
  if quarantined and world_model is not None and not isinstance(world_model, FallbackSimulator):
    raise ValueError(
      f"{spec.name}: an LLM world model cannot serve a sandboxed service's quarantined tools "
      "yet (it edits typed state, which only the sandbox has); load it without one"
    )
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
