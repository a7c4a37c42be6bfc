"""The adversarial validator: test cases derived from a service's spec alone, run on its service.

It never reads the implementation: cases come from the tools' names, annotations and JSON
Schemas (``compoworld.specs.naming``, ``compoworld.specs.schema_values``), and the service is driven only
through ``Service.call``. Checks, each on a fresh fork of the seeded state:

  valid_call         schema-valid arguments are not refused as ill-formed (400) and never crash
  missing_required   dropping each required argument is a 400
  wrong_type         a value of the wrong JSON type for each typed argument is a 400
  boundary           empty, huge, unicode and injection strings; negative, zero, huge numbers;
                     empty arrays: a 400 when the schema forbids them, never a 500
  unknown_id         an id that does not exist is a 404
  create_writes      a create that succeeds changes the state
  create_get         a created record reads back with the values it was given
  list_after_create  a list of the entity includes the new record
  update_get         an update reads back
  update_fields      it reads back under the field its argument names (``updated_title`` sets
                     ``title``), adds no field and changes none that no argument names
  list_filter        a list argument named as a field of the record lists the record by its
                     value and nothing whose field differs
  list_page          a list asked for one record (``limit=1``) answers at most one
  relation_add       a tool that adds an item to a parent's list (``add_attendees_to_event``)
                     shows it in the parent read back
  delete_get         a deleted record reads back as a 404
  read_only          a tool the spec marks read-only leaves the state hash unchanged
  atomic             a failed call leaves the state hash unchanged
  no_raise           no call raises, and none answers 500

A tool that fails any check is quarantined with the first failing case.
"""

from __future__ import annotations

import dataclasses
import random
import re
from collections.abc import Iterable
from typing import Any

from compoworld.runtime.service import Service
from compoworld.specs.answers import (
  _brief,
  _clock,
  _find_id,
  _fresh_item,
  _fresh_value,
  _ids_in,
  _listed,
  _matches,
  _names,
  _record_in,
  _set,
  _truncated,
  _typed,
  _values,
  _without,
)
from compoworld.specs.ingest import McpTool
from compoworld.specs.naming import (
  Role,
  common_prefix,
  is_paging,
  is_query,
  leaf_args,
  norm,
  parent_ref,
  role_of,
  schema_at,
  singular,
  targets,
  tokens,
)
from compoworld.specs.schema_values import (
  WRONG_TYPE,
  boundary_values,
  declared_type,
  example,
  is_valid,
)

_MISSING_STR, _MISSING_INT = "zz_missing_9f3e", 987_654_321
#: Words of arguments that carry credentials, not record data: never the field an update checks.
_CREDENTIALS = {"token", "secret", "password", "apikey", "auth", "credential", "credentials"}
#: Arguments that bound how many records a list answers.
_PAGE_SIZE = {"limit", "page_size", "pagesize", "per_page", "perpage", "max_results", "maxresults"}
#: How the runtime words a refusal of the arguments themselves (a business rule's 400 is not one).
_ARGS_REFUSED = re.compile(r"missing required argument|unknown argument|argument '[^']*' expected")


@dataclasses.dataclass(frozen=True)
class Failure:
  """The first case a tool failed: enough to replay it by hand."""

  tool: str
  check: str
  arguments: Any
  expected: str
  got: Any

  def reason(self) -> str:
    return f"{self.check}: expected {self.expected}, got {self.got}"

  def to_json(self) -> dict[str, Any]:
    return dataclasses.asdict(self)


class _Failed(Exception):
  def __init__(self, failure: Failure):
    super().__init__(failure.reason())
    self.failure = failure


class Validator:
  """Runs the adversarial suite for one service class over the tools of its spec."""

  def __init__(self, service: type[Service], tools: Iterable[McpTool], seed: int = 0):
    self.cls, self.seed = service, seed
    self.tools = {t.name: t for t in tools if t.name in service.tools}
    strip = common_prefix(list(self.tools))
    self.roles: dict[str, Role] = {
      n: role_of(n, t.input_schema, t.annotations, strip) for n, t in self.tools.items()
    }
    self.base = service.create(seed=seed)
    self.rng = random.Random(f"validator:{service.name}:{seed}")
    self._ids: dict[str, list[Any]] = {}
    self.ran: dict[str, set[str]] = {n: set() for n in self.tools}  # tool → checks it was put to

  # --- calling -----------------------------------------------------------------------------

  def _read_only(self, name: str) -> bool:
    hint = self.tools[name].annotations.get("readOnlyHint")
    return hint is True or (hint is None and not self.roles[name].mutates)

  def call(self, svc: Service, name: str, args: Any) -> dict[str, Any]:
    self.ran[name].update(("no_raise", "atomic", "read_only" if self._read_only(name) else ""))
    before = svc.state_hash()
    try:
      out = svc.call(name, args)
    except Exception as err:  # the runtime promises never to raise
      raise _Failed(Failure(name, "no_raise", args, "an envelope", repr(err))) from None
    if out.get("status") == 500:
      raise _Failed(Failure(name, "no_raise", args, "no 500", out.get("error")))
    changed = svc.state_hash() != before
    if not out["ok"] and changed:
      raise _Failed(Failure(name, "atomic", args, "failed call leaves state unchanged", out))
    if out["ok"] and changed and self._read_only(name):
      raise _Failed(Failure(name, "read_only", args, "state unchanged", "state changed"))
    return out

  def expect(self, name: str, args: Any, check: str, status: int) -> dict[str, Any]:
    self.ran[name].add(check)
    out = self.call(self.base.fork(), name, args)
    if out["status"] != status:
      raise _Failed(Failure(name, check, args, f"status {status}", _brief(out)))
    return out

  # --- arguments ---------------------------------------------------------------------------

  def ids(self, entity: str) -> list[Any]:
    """Ids of existing records of ``entity``, found through its own list tools."""
    if entity not in self._ids:
      found: list[Any] = []
      for name, role in self.roles.items():
        if role.entity != entity or role.kind not in ("list", "search") or found:
          continue
        args = example(self.tools[name].input_schema, self.rng)
        out = self.base.fork().call(name, args)
        if out["ok"]:
          found = _ids_in(out["data"])
      self._ids[entity] = found
    return self._ids[entity]

  def valid_args(self, name: str) -> dict[str, Any] | None:
    """Schema-valid arguments, with id arguments naming existing records where any are known."""
    tool, role = self.tools[name], self.roles[name]
    args = example(tool.input_schema, self.rng)
    if role.id_arg is not None and role.kind not in ("create", "send"):
      known = self.ids(role.entity)
      if known:
        args = _set(args, role.id_arg.path, _typed(known[0], role.id_arg.schema))
    for arg, entity in role.refs:
      known = self.ids(entity)
      if known and (arg.required or arg.path[0] in args):
        args = _set(args, arg.path, _typed(known[0], arg.schema))
    return args if is_valid(args, tool.input_schema) else None

  # --- the checks --------------------------------------------------------------------------

  def check_tool(self, name: str) -> None:
    tool, role = self.tools[name], self.roles[name]
    schema = tool.input_schema
    valid = self.valid_args(name)
    if valid is not None:
      self.ran[name].add("valid_call")
      out = self.call(self.base.fork(), name, valid)
      if out["status"] == 400 and _ARGS_REFUSED.search(out["error"]["message"]):
        raise _Failed(Failure(name, "valid_call", valid, "arguments accepted", _brief(out)))
    base = valid if valid is not None else example(schema, self.rng)
    for prop in schema.get("required", []):
      self.expect(name, {k: v for k, v in base.items() if k != prop}, "missing_required", 400)
    for prop, sub in schema.get("properties", {}).items():
      kind = declared_type(sub)
      if kind is None:
        continue
      wrong = _set(base, (prop,), WRONG_TYPE[kind])
      if not is_valid(wrong, schema):
        self.expect(name, wrong, "wrong_type", 400)
      edges = boundary_values(kind) + (boundary_values(sub["format"]) if "format" in sub else [])
      for edge in edges:
        args = _set(base, (prop,), edge)
        if not is_valid(args, schema):
          self.expect(name, args, "boundary", 400)
        else:
          self.call(self.base.fork(), name, args)
    limit = next((p for p in schema.get("properties", {}) if norm(p) in _PAGE_SIZE), None)
    if limit is not None and role.kind in ("list", "search") and valid is not None:
      args = _set(valid, (limit,), 1)
      if is_valid(args, schema):
        self.ran[name].add("list_page")
        out = self.call(self.base.fork(), name, args)
        if out["ok"] and len(_listed(out["data"])) > 1:
          raise _Failed(Failure(name, "list_page", args, "at most 1 record", out["data"]))
    own = role.id_arg
    if own is not None and role.kind in ("get", "update", "delete", "action") and valid is not None:
      missing = _MISSING_INT if own.schema.get("type") in ("integer", "number") else _MISSING_STR
      args = _set(valid, own.path, missing)
      if is_valid(args, schema):
        self.expect(name, args, "unknown_id", 404)

  def round_trips(self, suspect: Iterable[str] = ()) -> dict[str, Failure]:
    """create → get / list / update → get / delete → get, per entity with a create tool.
    ``suspect`` tools already failed a check: no round trip reads through them."""
    failures: dict[str, Failure] = {}
    by_kind: dict[tuple[str, str], list[str]] = {}
    for name, role in self.roles.items():
      if name not in set(suspect) or role.kind in ("create", "update", "delete"):
        by_kind.setdefault((role.entity, role.kind), []).append(name)
    for (entity, kind), creates in by_kind.items():
      if kind != "create":
        continue
      gets = self._readers(entity, suspect)
      for create in creates:
        try:
          self._round_trip(entity, create, gets, by_kind)
        except _Failed as failed:
          failures.setdefault(failed.failure.tool, failed.failure)
    for (entity, kind), updates in by_kind.items():
      known, gets = self.ids(entity), self._readers(entity, suspect)
      if kind != "update" or (entity, "create") in by_kind or not known or not gets:
        continue
      for update in updates:  # no create to start from: update a seeded record
        try:
          self._update_get(self.base.fork(), entity, update, known[0], gets)
        except _Failed as failed:
          failures.setdefault(failed.failure.tool, failed.failure)
    return failures

  def _round_trip(self, entity: str, create: str, gets: list[str], by_kind) -> None:
    args = self.valid_args(create)
    if args is None:
      return
    svc = self.base.fork()
    self.ran[create].update(("create_writes", "create_get"))
    out = self.call(svc, create, args)
    if out["ok"] and svc.state_hash() == self.base.state_hash():
      raise _Failed(Failure(create, "create_writes", args, "a new record", "the state unchanged"))
    new_id = _find_id(out.get("data"), entity) if out["ok"] else None
    if new_id is None:
      return  # refused by a business rule, or nothing to read back by
    role = self.roles[create]
    links = {a.path for a, _ in role.refs} | ({role.id_arg.path} if role.id_arg else set())
    given = [v for v in _values(_without(args, links)) if isinstance(v, str) and len(v) > 2]
    shown = None  # the new record as a read shows it, for the list filters
    for get in gets:
      before = self._read(self.base.fork(), get, new_id)
      if before is not None and before["ok"]:
        raise _Failed(Failure(create, "create_get", args, f"a new id, not {new_id!r}", out["data"]))
      got = self._read(svc, get, new_id)
      if got is None:
        continue
      if not got["ok"]:
        raise _Failed(
          Failure(create, "create_get", args, f"{get} finds the new record", _brief(got))
        )
      shown = shown or _record_in(got["data"], new_id)
      seen = {str(v) for v in _values(got["data"])}
      # a read that shows the record (its id) must show what it was created with; one that
      # shows something else about it (its messages, its history) is not held to that
      if str(new_id) in seen and given and not any(v in seen for v in given):
        raise _Failed(Failure(create, "create_get", args, f"{get} shows {given[0]!r}", got["data"]))
    for lister in by_kind.get((entity, "list"), []):
      largs = self.valid_args(lister)
      if largs is None or set(largs) - {"limit"}:
        continue
      self.ran[lister].add("list_after_create")
      got = self.call(svc, lister, largs)
      if got["ok"] and str(new_id) not in {str(v) for v in _values(got["data"])}:
        raise _Failed(Failure(lister, "list_after_create", largs, f"lists {new_id!r}", got["data"]))
    shown = shown or _record_in(out["data"], new_id)
    for lister in by_kind.get((entity, "list"), []) + by_kind.get((entity, "search"), []):
      self._list_filter(svc, lister, new_id, shown)
    for update in by_kind.get((entity, "update"), []):
      self._update_get(svc.fork(), entity, update, new_id, gets)
    for delete in by_kind.get((entity, "delete"), []):
      twin = svc.fork()
      role = self.roles[delete]
      dargs = self.valid_args(delete)
      if dargs is None or role.id_arg is None:
        continue
      dargs = _set(dargs, role.id_arg.path, _typed(new_id, role.id_arg.schema))
      self.ran[delete].add("delete_get")
      out = self.call(twin, delete, dargs)
      for get in gets if out["ok"] else []:
        got = self._read(twin, get, new_id)
        if got is not None and got["status"] != 404:
          raise _Failed(Failure(delete, "delete_get", dargs, f"{get} is a 404", _brief(got)))

  def _update_get(self, svc: Service, entity: str, update: str, new_id: Any, gets) -> None:
    role, tool = self.roles[update], self.tools[update]
    uargs = self.valid_args(update)
    if uargs is None or role.id_arg is None:
      return
    uargs = _set(uargs, role.id_arg.path, _typed(new_id, role.id_arg.schema))
    # the argument to change (nested ones too: ``properties.name``): a plain string if there is
    # one, else a number
    chosen = [
      (arg.path, fresh)
      for arg in leaf_args(tool.input_schema)
      if arg.path != role.id_arg.path
      and not set(tokens(arg.key)) & _CREDENTIALS
      and (fresh := _fresh_value(arg.schema)) is not None
    ]
    chosen.sort(key=lambda pair: not isinstance(pair[1], str))
    if not chosen:
      return
    path, fresh = chosen[0]
    target = path[-1]
    uargs = _set(uargs, path, fresh)
    if not is_valid(uargs, tool.input_schema):
      return
    before = {get: self._read(svc, get, new_id) for get in gets}
    self.ran[update].update(("update_get", "update_fields"))
    out = self.call(svc, update, uargs)
    if not out["ok"]:
      return
    named = {norm(t.field) for key in _names(uargs) for t in targets(key, reads=False)}
    readings = {norm(t.field) for key in _names(_set({}, path, 0)) for t in targets(key, False)}
    for get in gets:
      got = self._read(svc, get, new_id)
      if got is None or not got["ok"]:
        continue
      old, new = _record_in(before[get]["data"], new_id), _record_in(got["data"], new_id)
      shown = isinstance(fresh, str) or any(norm(k) in readings for k in old or {})
      if not shown:
        continue  # a number the record keeps in another form (minutes as an end time)
      if str(fresh) not in {str(v) for v in _values(got["data"])}:
        raise _Failed(Failure(update, "update_get", uargs, f"{get} shows {fresh!r}", got["data"]))
      if old is None or new is None:
        continue  # the read shows something else about the record
      if not any(norm(k) in readings and v == fresh for k, v in new.items()):
        raise _Failed(
          Failure(update, "update_fields", uargs, f"{target!r} sets a field it names", new)
        )
      added = sorted(set(new) - set(old))
      changed = [k for k in old if k in new and new[k] != old[k] and not _clock(k)]
      stray = [k for k in changed if norm(k) not in named]
      if added or stray:
        got_fields = {"new fields": added, "changed fields no argument names": stray}
        raise _Failed(
          Failure(update, "update_fields", uargs, "only named fields change", got_fields)
        )

  def _list_filter(self, svc: Service, lister: str, new_id: Any, shown: Any) -> None:
    """A list argument named as a field of the record lists the record by that field's value,
    and nothing whose field differs."""
    schema = self.tools[lister].input_schema
    base = self.valid_args(lister)
    if base is None or not isinstance(shown, dict):
      return
    required = set(schema.get("required", []))
    if any(is_query(k) for k in required):
      return  # a required free-text query of its own narrows the list further
    # the required arguments the record shows take its values, so they narrow to it
    base = {k: shown.get(k, v) for k, v in base.items() if k in required}
    for key, sub in schema.get("properties", {}).items():
      value = shown.get(key)
      if key in required or sub.get("type") != "string" or is_paging(key) or is_query(key):
        continue
      args = {**base, key: value}
      if not isinstance(value, str) or not value or not is_valid(args, schema):
        continue
      self.ran[lister].add("list_filter")
      out = self.call(svc.fork(), lister, args)
      if not out["ok"]:
        continue
      listed = [r for r in _listed(out["data"]) if "id" in r]
      if not _truncated(out["data"], listed) and str(new_id) not in {str(r["id"]) for r in listed}:
        raise _Failed(Failure(lister, "list_filter", args, f"lists {new_id!r}", out["data"]))
      wrong = [r["id"] for r in listed if key in r and not _matches(r[key], value)]
      if wrong:
        raise _Failed(
          Failure(lister, "list_filter", args, f"only records whose {key} matches", wrong)
        )

  def relations(self, suspect: Iterable[str] = ()) -> dict[str, Failure]:
    """Tools that add items to a parent record's list (``add_attendees_to_event``): the parent
    read back shows the item."""
    failures: dict[str, Failure] = {}
    for name, role in self.roles.items():
      if name in set(suspect) or role.id_arg is not None or role.kind not in ("create", "update"):
        continue
      try:
        self._relation(name, role)
      except _Failed as failed:
        failures[name] = failed.failure
    return failures

  def _relation(self, name: str, role: Role) -> None:
    refs = {a.path: e for a, e in role.refs}
    items = [
      a
      for a in leaf_args(self.tools[name].input_schema)
      if a.path not in refs and singular(norm(a.key)) in (role.entity, f"{role.entity}_id")
    ]
    parent = parent_ref(name, role.refs)
    if not items or parent is None:
      return
    path, entity = parent[0].path, parent[1]
    gets, known, args = self._readers(entity), self.ids(entity), self.valid_args(name)
    if not known or not gets or args is None:
      return
    item = items[0]
    fresh = _fresh_item(item.schema)
    schema = self.tools[name].input_schema
    args = _set(_set(args, item.path, fresh), path, _typed(known[0], schema_at(schema, path)))
    if not is_valid(args, self.tools[name].input_schema):
      return
    svc = self.base.fork()
    self.ran[name].add("relation_add")
    if not self.call(svc, name, args)["ok"]:
      return
    added = {str(v) for v in _values(fresh)}
    for get in gets:
      got = self._read(svc, get, known[0])
      if got is not None and got["ok"] and not added <= {str(v) for v in _values(got["data"])}:
        raise _Failed(Failure(name, "relation_add", args, f"{get} shows {fresh!r}", got["data"]))

  def _readers(self, entity: str, suspect: Iterable[str] = ()) -> list[str]:
    """The tools a record of ``entity`` reads back through: its get tools, else its lists
    (``suspect`` ones, which failed a check, left out)."""
    for kind in ("get", "list"):
      found = [
        n
        for n, r in self.roles.items()
        if r.entity == entity and r.kind == kind and n not in suspect
      ]
      if found:
        return found
    return []

  def _read(self, svc: Service, get: str, record_id: Any) -> dict[str, Any] | None:
    """The record read back: a get's answer, or the record as a list shows it (a 404 when the
    whole list lacks it; None when it cannot tell)."""
    role = self.roles[get]
    if role.kind == "list":
      schema = self.tools[get].input_schema
      args = {
        k: v for k, v in (self.valid_args(get) or {}).items() if k in schema.get("required", [])
      }
      if not is_valid(args, schema):
        return None
      out = self.call(svc, get, args)
      listed = _listed(out["data"]) if out["ok"] else []
      if not out["ok"] or _truncated(out["data"], listed) or not listed:
        return None
      record = _record_in(listed, record_id)
      return {"ok": True, "status": 200, "data": record} if record else {"ok": False, "status": 404}
    args = self.valid_args(get)
    if args is None or role.id_arg is None:
      return None
    args = _set(args, role.id_arg.path, _typed(record_id, role.id_arg.schema))
    return self.call(svc, get, args)

  def run(self, only: Iterable[str] | None = None) -> dict[str, Failure]:
    """The first failure of each failing tool (empty when every tool passes)."""
    names = [n for n in self.tools if only is None or n in set(only)]
    failures: dict[str, Failure] = {}
    for name in names:
      try:
        self.check_tool(name)
      except _Failed as failed:
        failures[name] = failed.failure
    for name, failure in self.round_trips(suspect=failures).items():
      if name in names:
        failures.setdefault(name, failure)
    for name, failure in self.relations(suspect=failures).items():
      if name in names:
        failures.setdefault(name, failure)
    return failures


def validate(
  service: type[Service], tools: Iterable[McpTool], seed: int = 0, only=None, ran=None
) -> dict[str, Failure]:
  """Runs the suite; returns ``{tool: Failure}`` for the tools that failed. ``ran``, a dict,
  receives the sorted names of the checks each tool was put to."""
  validator = Validator(service, tools, seed)
  failures = validator.run(only)
  if ran is not None:
    ran.update({n: sorted(c - {""}) for n, c in validator.ran.items() if c - {""}})
  return failures
