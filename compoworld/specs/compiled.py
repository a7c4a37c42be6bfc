"""The runtime of compiled services: plans, and the deterministic transitions they select.

A compiled service is an ordinary ``Service`` subclass whose state model and tools were built
from a ``ServiceSpec`` by ``compoworld.specs.compiler``. Each tool carries a ``ToolPlan`` saying what it
does (create, get, list, search, lookup, update, delete, a state action, adding items to a
parent's list, or a world-model simulation) and which argument paths feed which record fields;
the functions here carry it out over the typed state, raising the runtime's errors (404 for unknown ids, 409 for a
taken id) so that calls keep the contract of hand-written services.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import random
from datetime import timedelta
from typing import Any, ClassVar

from pydantic import ValidationError
from pydantic_core import to_jsonable_python

from compoworld.runtime.envelope import Conflict, NotFound
from compoworld.runtime.query import text_matches
from compoworld.runtime.service import Service
from compoworld.runtime.state import Record, ServiceState
from compoworld.specs.ingest import McpTool, ServiceSpec
from compoworld.specs.naming import norm, schema_at
from compoworld.specs.schema_values import example
from compoworld.specs.world_model import simulate

Path = tuple[str, ...]


class FrozenDict(dict):
  """A dict that refuses in-place changes: JSON objects inside immutable records."""

  def _refuse(self, *args: Any, **kwargs: Any) -> None:
    raise TypeError("records are immutable; build a new value instead")

  __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = _refuse  # type: ignore[assignment]

  def __hash__(self) -> int:  # type: ignore[override]
    return hash(json.dumps(self, sort_keys=True, default=str))


def freeze(value: Any) -> Any:
  """Dicts and lists to their immutable forms, recursively (a BeforeValidator of JSON fields)."""
  if isinstance(value, dict):
    return FrozenDict({k: freeze(v) for k, v in value.items()})
  if isinstance(value, (list, tuple)):
    return tuple(freeze(v) for v in value)
  return value


@dataclasses.dataclass(frozen=True)
class EntityPlan:
  """A record kind the service manages."""

  name: str  # "pull_request"
  table: str  # the state collection, "pull_requests"
  prefix: str  # id prefix, "pr"
  integer_ids: bool  # its id arguments are integers (stored as strings, shown as numbers)
  fields: dict[str, dict[str, Any]]  # field name → JSON Schema of its values
  refs: dict[str, str]  # field → entity its values name by id
  status: bool  # has a workflow ``status`` that state actions move
  stamps: tuple[str, ...] = ()  # logical-time fields the compiler added (created_at, updated_at)

  def key(self, value: Any) -> str:
    return str(value)

  def show(self, record: Record) -> dict[str, Any]:
    out = to_jsonable_python(record)
    if self.integer_ids and out["id"].isdigit():
      out["id"] = int(out["id"])
    return out


@dataclasses.dataclass(frozen=True)
class ToolPlan:
  """What one compiled tool does with its arguments."""

  kind: str  # create send get list search lookup update delete action relate compute simulate
  entity: str
  id_path: Path | None  # the argument naming the tool's own record
  fields: tuple[tuple[Path, str], ...]  # argument path → record field it sets or filters on
  refs: tuple[tuple[Path, str], ...]  # argument path → entity whose id it must name
  query: tuple[Path, ...] = ()  # free-text arguments matched against every text field
  limit: Path | None = None
  offset: Path | None = None
  status_value: str = ""  # what a state action sets ``status`` to
  items: tuple[tuple[Path, str, str], ...] = ()  # argument → list field, "add" or "remove"
  ranges: tuple[tuple[Path, str, str], ...] = ()  # argument → field it bounds, "min" or "max"
  why: str = ""  # a compute plan: why nothing in the spec makes it deterministic
  page: Path | None = None  # a 1-based page number (with ``limit`` as the page size)
  sort: tuple[Path, ...] = ()  # arguments naming the field to sort by (``sort_by``, ``order_by``)
  direction: tuple[Path, ...] = ()  # arguments saying asc or desc


_ABSENT = object()


def get_path(args: dict[str, Any], path: Path) -> Any:
  node: Any = args
  for part in path:
    if not isinstance(node, dict) or part not in node:
      return _ABSENT
    node = node[part]
  return node


def _label(path: Path) -> str:
  return ".".join(path)


class CompiledService(Service):
  """Base of services compiled from specs; subclasses are made by ``compiler.compile_service``."""

  service_spec: ClassVar[ServiceSpec]  # what it was compiled from
  entities: ClassVar[dict[str, EntityPlan]] = {}
  plans: ClassVar[dict[str, ToolPlan]] = {}
  statuses: ClassVar[dict[str, dict[str, str]]] = {}  # tool → {"status", "reason"}
  world_model: ClassVar[Any] = None  # set by compoworld.specs.world_model; None = the fallback

  @classmethod
  def generate(cls, seed: int, size: int | None) -> ServiceState:
    """Plausible records for every entity, consistent with the schemas, from ``seed`` alone."""
    rng = random.Random(f"{cls.name}:{seed}")
    n = 4 if size is None else max(1, size)
    state = cls.State(seed=seed)
    ids = {}
    for plan in cls.entities.values():
      ids[plan.name] = [_new_id(state, plan) for _ in range(n)]
    for plan in cls.entities.values():
      table = state.table(plan.table)
      for i, record_id in enumerate(ids[plan.name]):
        values: dict[str, Any] = {"id": record_id}
        for field, schema in plan.fields.items():
          target = plan.refs.get(field)
          if target is not None and ids.get(target):
            values[field] = _typed_id(ids[target][i % len(ids[target])], schema)
          else:
            values[field] = example(schema, rng, field, depth=1)
        if plan.status:
          values["status"] = "open"
        past = state.now - timedelta(days=rng.randint(1, 60), minutes=rng.randint(0, 600))
        values.update({stamp: past for stamp in plan.stamps})  # seeded records predate s0
        table.insert(_valid_record(table.record_type, values))
    return state


def _valid_record(record_type: type[Record], values: dict[str, Any]) -> Record:
  """The record, with fields whose drawn value its type refuses left empty (all are optional:
  a schema the compiler merged across tools can be narrower than one tool's example)."""
  try:
    return record_type.model_validate(values)
  except ValidationError as err:
    bad = {str(e["loc"][0]) for e in err.errors() if e["loc"] and e["loc"][0] != "id"}
    return record_type.model_validate({k: None if k in bad else v for k, v in values.items()})


def _typed_id(record_id: str, schema: dict[str, Any]) -> Any:
  return int(record_id) if schema.get("type") in ("integer", "number") else record_id


def _new_id(state: ServiceState, plan: EntityPlan) -> str:
  if plan.integer_ids:
    state.id_seq = state.id_seq + 1
    return str(1000 + state.id_seq)
  return state.new_id(plan.prefix)


def _stamps(plan: EntityPlan, state: ServiceState, created: bool) -> dict[str, Any]:
  return {s: state.now for s in plan.stamps if created or s == "updated_at"}


# --- the transitions -----------------------------------------------------------------------


def run_tool(svc: CompiledService, tool: McpTool, args: dict[str, Any]):
  """Carries out one validated call of ``tool`` on ``svc.state`` (the runtime's working fork)."""
  plan = svc.plans[tool.name]
  if plan.kind in ("simulate", "compute"):
    return simulate(svc, tool, args)
  entity = svc.entities[plan.entity]
  table = svc.state.table(entity.table)
  _check_refs(svc, plan, args)
  changes = {
    field: get_path(args, path)
    for path, field in plan.fields
    if get_path(args, path) is not _ABSENT
  }
  changes = {k: v for k, v in changes.items() if k in table.record_type.model_fields}
  own = get_path(args, plan.id_path) if plan.id_path else _ABSENT
  if plan.kind in ("create", "send"):
    if own is not _ABSENT:
      record_id = entity.key(own)
      if record_id in table:
        raise Conflict(f"{plan.entity} '{record_id}' already exists")
    else:
      record_id = _new_id(svc.state, entity)
    if entity.status and "status" not in changes:
      changes["status"] = "sent" if plan.kind == "send" else "open"
    changes.update(_stamps(entity, svc.state, created=True))
    record = table.insert(table.record_type.model_validate({"id": record_id, **changes}))
    return entity.show(record)
  if plan.kind in ("list", "search", "lookup"):
    return _search(svc, tool, plan, entity, args, changes)
  if own is _ABSENT:  # a write naming no record: optional id left out
    raise NotFound(f"{tool.name}: name the {plan.entity} with '{_label(plan.id_path or ())}'")
  record = _get(table, entity, own, plan)
  if plan.kind == "get":
    return entity.show(record)
  if plan.kind == "delete":
    table.delete(record.id)
    return {"deleted": True, "id": entity.show(record)["id"]}
  if plan.kind == "action" and entity.status:
    changes["status"] = plan.status_value
  for path, field, op in plan.items:  # relation tools, and updates' ``labels_to_add``
    value = get_path(args, path)
    if value is _ABSENT or value is None:
      continue
    given = list(value) if isinstance(value, (list, tuple)) else [value]
    current = list(changes.get(field, getattr(record, field, None)) or ())
    if op == "add":
      current += [v for v in given if v not in current]
    else:
      current = [v for v in current if v not in given]
    changes[field] = current
  changes.update(_stamps(entity, svc.state, created=False))
  return entity.show(table.update(record.id, **changes))


def _get(table, entity: EntityPlan, value: Any, plan: ToolPlan) -> Record:
  found = table.find(entity.key(value))
  if found is None:
    some = ", ".join(str(entity.show(r)["id"]) for r in list(table)[:5])
    raise NotFound(
      f"{plan.entity} {value!r} not found (argument '{_label(plan.id_path or ())}'); "
      f"some existing ids: {some or 'none'}"
    )
  return found


def _check_refs(svc: CompiledService, plan: ToolPlan, args: dict[str, Any]) -> None:
  for path, target in plan.refs:
    value = get_path(args, path)
    if value is _ABSENT or value is None:
      continue
    other = svc.entities[target]
    if other.key(value) not in svc.state.table(other.table):
      raise NotFound(f"{target} {value!r} not found (argument '{_label(path)}')")


def _matches(record_value: Any, wanted: Any) -> bool:
  if isinstance(wanted, str) and isinstance(record_value, str):
    return wanted.lower() in record_value.lower()
  if isinstance(wanted, list):
    return record_value in wanted or to_jsonable_python(record_value) == wanted
  return to_jsonable_python(record_value) == wanted


def _within(record_value: Any, op: str, bound: Any) -> bool:
  """``record_value`` on the right side of a range bound: numbers by value, dates and other
  strings in ISO order (a record without the value, or of another type, is not in range)."""
  value = to_jsonable_python(record_value)
  numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (value, bound))
  if not numbers and not (isinstance(value, str) and isinstance(bound, str)):
    return False
  return value >= bound if op == "min" else value <= bound


def _search(svc, tool, plan, entity, args, filters):
  table = svc.state.table(entity.table)
  query = " ".join(str(v) for p in plan.query if (v := get_path(args, p)) not in (_ABSENT, None))
  bounds = [
    (field, op, value)
    for path, field, op in plan.ranges
    if (value := get_path(args, path)) not in (_ABSENT, None)
  ]
  hits = []
  for record in table:
    if not all(_matches(getattr(record, f), v) for f, v in filters.items()):
      continue
    if not all(_within(getattr(record, f, None), op, v) for f, op, v in bounds):
      continue
    if query and not text_matches(
      query, *(v for v in record.__dict__.values() if isinstance(v, str))
    ):
      continue
    hits.append(record)
  if plan.kind == "lookup":
    if hits:
      return entity.show(hits[0])
    return _synthesized(svc, tool, entity, args, filters)
  hits = _sorted(hits, entity, plan, args)
  limit = _count(get_path(args, plan.limit)) if plan.limit else None
  offset = _count(get_path(args, plan.offset)) if plan.offset else None
  page = _count(get_path(args, plan.page)) if plan.page else None
  if page and offset is None:  # pages of `limit` records (the limit's default, else 20)
    default = schema_at(tool.input_schema, plan.limit).get("default") if plan.limit else None
    limit = limit or _count(default) or 20
    offset = (page - 1) * limit
  start = offset or 0
  stop = start + limit if limit else None
  return {"items": [entity.show(r) for r in hits[start:stop]], "total": len(hits)}


def _count(value: Any) -> int | None:
  """A positive whole number given for a count, else None (0, absent, or not a number)."""
  if isinstance(value, float) and value.is_integer():
    value = int(value)
  return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _sorted(hits: list[Record], entity: EntityPlan, plan: ToolPlan, args: dict[str, Any]):
  """``hits`` in the order the sort arguments ask for: a field name, ``-field`` or
  ``field:desc`` / ``field desc``, with a separate asc/desc argument; records without the field
  last. An unknown field leaves the order as it was."""
  directions = ("asc", "desc", "ascending", "descending")
  wanted = next(
    (
      v
      for p in plan.sort
      if isinstance(v := get_path(args, p), str) and v and v.lower() not in directions
    ),
    None,
  )
  if wanted is None:
    return hits
  descending = wanted.startswith("-")
  words = wanted.lstrip("-+").replace(":", " ").split()
  if len(words) > 1 and words[-1].lower() in directions:
    descending = words[-1].lower().startswith("desc")
  for path in plan.direction:
    given = get_path(args, path)
    if isinstance(given, str) and given.lower() in directions:
      descending = given.lower().startswith("desc")
  fields = sorted(type(hits[0]).model_fields) if hits else []

  def squashed(name: str) -> str:  # startDateTime, start_datetime and start_date_time alike
    return norm(name).replace("_", "")

  names = {squashed(words[0]), squashed(f"{words[0]}_at")} if words else set()
  key = next((f for f in fields if squashed(f) in names), None)
  if key is None:
    return hits
  present = [r for r in hits if getattr(r, key) is not None]
  try:
    present.sort(key=lambda r: to_jsonable_python(getattr(r, key)), reverse=descending)
  except TypeError:  # values of mixed types have no order
    return hits
  return present + [r for r in hits if getattr(r, key) is None]


def _seeded(svc: CompiledService, tool: McpTool, args: dict[str, Any]) -> random.Random:
  key = json.dumps([svc.name, svc.state.seed, tool.name, args], sort_keys=True, default=str)
  return random.Random(hashlib.sha256(key.encode()).hexdigest())


def _synthesized(svc, tool, entity: EntityPlan, args, filters) -> dict[str, Any]:
  """A lookup with no stored match: a record made from the arguments and the seed (not stored,
  so the same question always gets the same answer)."""
  rng = _seeded(svc, tool, args)
  out = {f: example(s, rng, f, depth=1) for f, s in entity.fields.items()}
  out.update(to_jsonable_python(filters))
  ident = f"{entity.prefix}_{rng.getrandbits(32):08x}"
  return {"id": rng.randint(10**6, 10**7) if entity.integer_ids else ident, **out}
