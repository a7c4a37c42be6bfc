"""The deterministic compiler: a ``ServiceSpec`` in, an executable ``Service`` subclass out.

No LLM. From tool names, annotations and schemas it infers the entities the service manages and
their fields (``compoworld.specs.naming.role_of``), builds a typed state model (one ``Table`` of frozen
records per entity), and gives each tool a plan over that state (``compoworld.specs.compiled``):

  create/add/send...     insert a record built from the arguments; return it
  get/read...            the record the id argument names, else 404
  list/search/find...    records filtered on the given fields (equal, or within a range bound
                         such as ``max_start_datetime``) and free text, sorted and paged as
                         the sort and page arguments ask
  get without an id      a lookup: the first record matching the arguments (else a seeded one)
  update/edit/set...     change the named record's fields
  delete/remove...       remove it (a later get is a 404)
  close/approve/cancel.. move the record's ``status``
  add_X_to_Y, remove_X   add items to, or take them off, a list field of the parent record Y

An argument acts on the field its name reads as (``compoworld.specs.naming.targets``), checked against
the fields the entity's creating tools name: ``updated_summary`` and ``new_summary`` set
``summary``, ``attendees_to_add`` adds to ``attendees``, ``created_after`` bounds ``created_at``.
Every id argument (``contact_id``, ``listId``) must name an existing record of its entity (404).
What no formula in the spec computes (``convert_currency``, ``get_current_time``), tools whose
effect lives outside local state and tools the validator quarantined are *simulated*: served by
the world model (``compoworld.specs.world_model``), an LLM or its offline stand-in.
"""

from __future__ import annotations

import re
from collections import defaultdict
from datetime import datetime
from typing import Annotated, Any

from pydantic import BeforeValidator, Field, create_model

from compoworld.runtime.ports import PORTS
from compoworld.runtime.state import Record, ServiceState, Table
from compoworld.specs.compiled import CompiledService, EntityPlan, Path, ToolPlan, freeze, run_tool
from compoworld.specs.ingest import McpTool, ServiceSpec
from compoworld.specs.jsonschema_args import schema_tool
from compoworld.specs.naming import (
  Arg,
  Role,
  common_prefix,
  field_name,
  id_entity,
  is_paging,
  is_query,
  leaf_args,
  norm,
  parent_ref,
  past,
  role_of,
  singular,
  targets,
  tokens,
)

#: Version of the compiled semantics; a library built by another version is rebuilt.
COMPILER_VERSION = "compiler-2"

_CONTROL = {
  "sort", "order", "include", "expand", "fields", "format", "verbose", "api", "apikey", "token",
  "timeout", "response", "select", "raw", "pretty", "dry", "debug", "output", "direction",
  "password", "secret", "headers", "header", "cursor",
}  # fmt: skip
_LIMIT = {"limit", "size", "results", "count", "top"}
_PAGE = {"page", "page_number", "pagenumber", "page_no"}
_SORT = {"sort", "sort_by", "sortby", "order_by", "orderby", "sort_field", "sort_key", "order"}
_DIRECTION = {"direction", "sort_order", "sort_direction", "order_direction", "dir", "order"}
_JSON = Annotated[Any, BeforeValidator(freeze)]
_PY_TYPES = {"string": str, "integer": int, "number": float, "boolean": bool}


def _is_control(key: str) -> bool:
  words = tokens(key)
  return bool(words) and (words[0] in _CONTROL or words[-1] in {"token", "key", "secret"})


def plural(word: str) -> str:
  if word.endswith("y") and len(word) > 1 and word[-2] not in "aeiou":
    return word[:-1] + "ies"
  if word.endswith(("s", "x", "ch", "sh", "z")):
    return word + "es"
  return word + "s"


def _entity_slug(entity: str) -> str:
  """An entity name usable in a port tag (``<entity>.id``: letters and underscores)."""
  out = re.sub(r"[^a-z_]", "", entity.lower()).strip("_")
  return out or "record"


# --- ports -----------------------------------------------------------------------------------

_PORT_WORDS: tuple[tuple[frozenset[str], str], ...] = tuple(
  (frozenset(words.split()), port)
  for words, port in (
    ("email mail", "person.email"),
    ("phone mobile", "person.phone"),
    ("handle username screen", "person.handle"),
    ("amount price cost total balance salary budget fee revenue subtotal", "money"),
    ("currency", "currency"),
    ("percent percentage rate ratio", "percentage"),
    ("quantity qty", "quantity"),
    ("duration minutes hours", "duration"),
    ("sku", "sku"),
    ("tracking", "tracking.number"),
    ("department", "department"),
    ("priority", "priority"),
    ("status state", "status"),
    ("address street", "address"),
    ("city", "city"),
    ("latitude longitude lat lng lon coordinates", "coordinates"),
    ("location venue place", "location"),
    ("url uri link website href", "url"),
    ("domain", "company.domain"),
    ("company organization org vendor", "company.name"),
    ("title subject headline", "title"),
    ("body content html markdown", "document.text"),
    ("text message note comment description", "text"),
  )
)


def port_of(key: str, schema: dict[str, Any], entity: str = "") -> str | None:
  """The port tag of a field or argument, inferred from its name and type."""
  words = set(tokens(key))
  fmt, kind = schema.get("format"), schema.get("type")
  if fmt == "email":
    return "person.email"
  if fmt == "date-time" or (words & {"datetime", "timestamp", "at"} and kind == "string"):
    return "datetime"
  if fmt == "date" or words & {"date", "day", "birthday", "deadline", "due"}:
    return "date"
  if id_entity(key) is not None:
    target = id_entity(key) or entity
    return "employee.id" if target == "employee" else f"{_entity_slug(target)}.id"
  if words & {"job", "role", "position"} and "title" in words:
    return "job.title"
  if words & {"name", "first", "last", "fullname"}:
    if words & {"company", "organization", "org", "account", "vendor", "customer"}:
      return "company.name"
    if words & {"product", "item"} or entity in ("product", "item"):
      return "product.name"
    if entity in (
      "user",
      "person",
      "contact",
      "employee",
      "member",
      "customer",
      "lead",
      "candidate",
    ):
      return "person.name"
    return "title" if "name" in words else "person.name"
  for keys, port in _PORT_WORDS:
    if words & keys:
      return port
  if kind in ("integer", "number") and words & {"count", "number", "size", "score"}:
    return "number"
  return None


def _ports(pairs: list[tuple[str, dict[str, Any]]], entity: str) -> tuple[str, ...]:
  found = [port_of(k, s, entity) for k, s in pairs]
  return tuple(dict.fromkeys(p for p in found if p and (p in PORTS or p.endswith(".id"))))


# --- inference ----------------------------------------------------------------------------


def _data_args(role: Role, args: list[Arg]) -> list[Arg]:
  """Arguments that carry record data: not paging, control flags, the own id, nor (for reads)
  free-text queries. A control-looking name that is the entity itself (``secret`` of
  ``create_secret``) is data."""
  own = role.id_arg.path if role.id_arg else None
  reads = role.kind in ("list", "search", "get")
  return [
    a
    for a in args
    if a.path != own
    and not is_paging(a.key)
    and not (reads and is_query(a.key))
    and (not _is_control(a.key) or field_name(a.key) == role.entity)
  ]


def _field_names(args: list[Arg]) -> dict[tuple[str, ...], str]:
  """Record field of each argument: its own name, qualified by its parent where two arguments
  of one tool share a name (``start.dateTime`` and ``end.dateTime``)."""
  plain = [field_name(a.key) for a in args]
  out = {}
  for arg, name in zip(args, plain, strict=True):
    if plain.count(name) > 1 and len(arg.path) > 1:
      name = field_name("_".join(arg.path[-2:]))
    out[arg.path] = name
  return out


def _merge_type(old: dict[str, Any] | None, new: dict[str, Any]) -> dict[str, Any]:
  if old is None or old == new:
    return new
  if old.get("type") == new.get("type") and old.get("type") in _PY_TYPES:
    return {"type": old["type"]}  # same type, different constraints: keep the looser
  if {old.get("type"), new.get("type")} == {"integer", "number"}:
    return {"type": "number"}
  return {}  # conflicting types: any JSON value


#: Words that make a reading of an argument name certain even when no record field matches it
#: yet (``updated_summary`` is never a field of its own); "from", "to", "start", "end" are not.
_CERTAIN = {
  "updated", "new", "update", "add", "remove", "min", "max", "after", "before", "since", "until",
}  # fmt: skip
_STAMPS = ("created_at", "updated_at")
_UNDERIVABLE = "no formula in the spec computes its result from the state and the arguments"
_UNDESCRIBED = "it reads records whose fields the spec never names"
_UNNAMED = "it changes a record without naming it (no id argument)"
#: Verbs of a relation tool that takes items off its parent's list rather than adding them.
_REMOVING = {"remove", "unassign", "detach", "unlink", "delete", "unlabel", "untag", "revoke"}


def _is_limit(key: str) -> bool:
  return is_paging(key) and (tokens(key)[-1] in _LIMIT or norm(key) in ("per_page", "perpage"))


def _known(base: str, known: dict[str, str]) -> str | None:
  """The entity field ``base`` names, allowing the usual suffixes (``created`` → ``created_at``)."""
  for suffix in ("", "_at", "_date", "_time", "_datetime", "s"):
    hit = known.get(norm(base + suffix))
    if hit is not None:
      return hit
  return None


def _reading(key: str, plain: str, known: dict[str, str], reads: bool) -> tuple[str, str]:
  """The record field an argument acts on and how (set, add, remove, min, max): its own name
  when the entity has that field, else the first reading of its name that the entity has, else
  a reading whose words leave no doubt, else its own name."""
  if norm(plain) in known:
    return known[norm(plain)], "set"
  readings = targets(key, reads)[1:]
  for reading in readings:
    hit = _known(reading.field, known)
    if hit is not None:
      return hit, reading.op
  for reading in readings:
    if set(tokens(key)) - set(tokens(reading.field)) & _CERTAIN:
      return field_name(reading.field), reading.op
  return plain, "set"


def _relation(role: Role, args: list, tool_name: str):
  """A tool that adds items to, or takes them off, a list of a parent record
  (``add_attendees_to_event(event_id, attendees)``, ``remove_label(issue_id, label)``): the parent
  ref, the argument holding the items, and "add" or "remove"; else None."""
  if role.id_arg is not None or not role.refs or role.kind not in ("create", "delete", "update"):
    return None
  names = {norm(n) for n in (role.entity, plural(role.entity), f"{role.entity}_ids")}
  ref_paths = {a.path for a, _ in role.refs}
  item = next((a for a in args if a.path not in ref_paths and norm(a.key) in names), None)
  if item is None:
    return None
  parent = parent_ref(tool_name, role.refs)
  removing = role.kind == "delete" or role.verb in _REMOVING
  return parent, item, "remove" if removing else "add"


def _list_schema(arg_schema: dict[str, Any]) -> dict[str, Any]:
  if arg_schema.get("type") == "array":
    return {"type": "array", "items": arg_schema.get("items", {})}
  return {"type": "array", "items": {k: v for k, v in arg_schema.items() if k == "type"}}


def infer(
  spec: ServiceSpec, simulated: set[str]
) -> tuple[dict[str, EntityPlan], dict[str, ToolPlan]]:
  """The entities of a service and the plan of each tool (``simulated`` tools run elsewhere)."""
  strip = common_prefix([t.name for t in spec.tools])
  roles = {t.name: role_of(t.name, t.input_schema, t.annotations, strip) for t in spec.tools}
  leaves = {t.name: list(leaf_args(t.input_schema)) for t in spec.tools}
  relations = {
    t.name: rel
    for t in spec.tools
    if t.name not in simulated and (rel := _relation(roles[t.name], leaves[t.name], t.name))
  }
  entity_names = {
    r.entity
    for n, r in roles.items()
    if n not in simulated
    and n not in relations
    and r.kind != "compute"
    and not (r.kind in ("update", "delete") and r.id_arg is None)
  }

  def resolve(ref: str) -> str:
    if ref in entity_names:
      return ref
    tails = sorted(e for e in entity_names if e.endswith(f"_{ref}") or e.split("_")[-1] == ref)
    return tails[0] if tails else ref

  # The fields an entity's creating tools name plainly: other tools' arguments are read
  # against them (``updated_summary`` sets ``summary``, ``max_start_datetime`` bounds
  # ``start_datetime``).
  known: dict[str, dict[str, str]] = defaultdict(dict)
  for tool in spec.tools:
    role = roles[tool.name]
    if tool.name in simulated or tool.name in relations or role.kind not in ("create", "send"):
      continue
    for name in _field_names(_data_args(role, leaves[tool.name])).values():
      known[role.entity][norm(name)] = name

  fields: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
  refs: dict[str, dict[str, str]] = defaultdict(dict)
  integer_ids: dict[str, bool] = defaultdict(bool)
  status: dict[str, bool] = defaultdict(bool)
  plans: dict[str, ToolPlan] = {}

  def add_ref(entity: str, arg: Arg, target: str) -> tuple[Path, str] | None:
    target = resolve(target)
    if target == entity:
      return None
    entity_names.add(target)
    refs[entity][field_name(arg.key)] = target
    if arg.schema.get("type") in ("integer", "number"):
      integer_ids[target] = True
    return arg.path, target

  for tool in spec.tools:
    role, args = roles[tool.name], leaves[tool.name]
    if tool.name in simulated:
      plans[tool.name] = ToolPlan("simulate", role.entity, None, (), ())
      continue
    if role.kind == "compute":
      plans[tool.name] = ToolPlan("compute", role.entity, None, (), (), why=_UNDERIVABLE)
      continue
    if tool.name in relations:
      (parent_arg, parent), item, op = relations[tool.name]
      parent = resolve(parent)
      entity_names.add(parent)
      if parent_arg.schema.get("type") in ("integer", "number"):
        integer_ids[parent] = True
      others = [(a, t) for a, t in role.refs if a is not parent_arg]
      ref_paths = tuple(r for a, t in others if (r := add_ref(parent, a, t)))
      name = _known(role.entity, known[parent]) or field_name(plural(singular(role.entity)))
      fields[parent][name] = _merge_type(fields[parent].get(name), _list_schema(item.schema))
      plans[tool.name] = ToolPlan(
        "relate", parent, parent_arg.path, (), ref_paths, items=((item.path, name, op),)
      )
      continue
    if role.kind in ("update", "delete") and role.id_arg is None:
      plans[tool.name] = ToolPlan("compute", role.entity, None, (), (), why=_UNNAMED)
      continue
    entity = role.entity
    if role.id_arg is not None and role.id_arg.schema.get("type") in ("integer", "number"):
      integer_ids[entity] = True
    ref_paths = [r for arg, target in role.refs if (r := add_ref(entity, arg, target))]
    kind = role.kind
    if kind == "search" and role.verb in ("get", "fetch", "retrieve", "read", "show", "lookup"):
      kind = "lookup"
    reads = kind in ("list", "search", "lookup")
    data = [] if role.kind in ("get", "delete") else _data_args(role, args)
    names = _field_names(data)
    entity_known = {**known[entity], **{norm(s): s for s in _STAMPS if reads}}
    field_paths, items, ranges = [], [], []
    for arg in data:
      name, op = _reading(arg.key, names[arg.path], entity_known, reads)
      if name == "id":
        continue
      if op in ("add", "remove"):
        fields[entity][name] = _merge_type(fields[entity].get(name), _list_schema(arg.schema))
        items.append((arg.path, name, op))
        continue
      if op in ("min", "max"):
        ranges.append((arg.path, name, op))
        if name in _STAMPS and name not in fields[entity]:
          continue  # the logical-time stamp the compiler adds
      else:
        field_paths.append((arg.path, name))
      fields[entity][name] = _merge_type(fields[entity].get(name), arg.schema)
    if role.kind == "action" or "status" in fields[entity]:
      status[entity] = True
    query = tuple(a.path for a in args if is_query(a.key)) if reads else ()
    limit = next((a.path for a in args if _is_limit(a.key)), None)
    offset = next((a.path for a in args if tokens(a.key)[-1:] in (["offset"], ["skip"])), None)
    page = next((a.path for a in args if norm(a.key) in _PAGE), None) if reads else None
    sort = tuple(a.path for a in args if norm(a.key) in _SORT) if reads else ()
    direction = tuple(a.path for a in args if norm(a.key) in _DIRECTION) if reads else ()
    plans[tool.name] = ToolPlan(
      kind,
      entity,
      role.id_arg.path if role.id_arg else None,
      tuple(field_paths),
      tuple(ref_paths),
      query,
      limit,
      offset,
      past(role.verb) if kind == "action" else "",
      tuple(items),
      tuple(ranges),
      page=page,
      sort=sort,
      direction=direction,
    )
  entities = {}
  used_tables: set[str] = set()
  bare: set[str] = set()  # entities the spec says nothing about: no field, no way to make one
  for name in sorted(entity_names):
    table = plural(field_name(name))
    while table in used_tables or hasattr(ServiceState, table):
      table = f"{table}_"
    used_tables.add(table)
    entity_fields = dict(fields.get(name, {}))
    for field, target in refs.get(name, {}).items():
      entity_fields.setdefault(field, {"type": "integer" if integer_ids[target] else "string"})
    if not entity_fields:
      entity_fields["name"] = {"type": "string"}
      if not any(name in r.values() for r in refs.values()):
        bare.add(name)  # not even other records name it
    if status[name]:
      entity_fields.pop("status", None)  # the workflow status is a field of its own
    prefix = "".join(w[0] for w in name.split("_")[:3]) if "_" in name else name[:4]
    entities[name] = EntityPlan(
      name=name,
      table=table,
      prefix=re.sub(r"[^a-z0-9]", "", prefix.lower()) or "rec",
      integer_ids=integer_ids[name],
      fields=entity_fields,
      refs={f: t for f, t in refs.get(name, {}).items() if f in entity_fields},
      status=status[name],
      stamps=tuple(s for s in ("created_at", "updated_at") if s not in entity_fields),
    )
  for name, plan in plans.items():
    # reading records whose contents the spec never names (``get_current_time``) is no lookup
    # in the state: its answer is made up, so it is simulated
    reads = plan.kind in ("get", "list", "search", "lookup")
    if plan.entity in bare and (reads or plan.why == _UNDERIVABLE):
      plans[name] = ToolPlan("compute", plan.entity, None, (), (), why=_UNDESCRIBED)
  return entities, plans


# --- building the class ------------------------------------------------------------------------


def _record_type(service: str, plan: EntityPlan) -> type[Record]:
  fields: dict[str, Any] = {}
  for name, schema in plan.fields.items():
    kind = schema.get("type")
    py = _PY_TYPES.get(kind) if isinstance(kind, str) and "enum" not in schema else None
    if py is None and "enum" in schema and all(isinstance(v, str) for v in schema["enum"]):
      py = str
    fields[name] = ((py or _JSON) | None, None)
  if plan.status:
    fields["status"] = (str | None, None)
  for stamp in plan.stamps:
    fields[stamp] = (datetime | None, None)
  cls_name = "".join(w.capitalize() for w in f"{service}_{plan.name}".split("_"))
  return create_model(cls_name, __base__=Record, **fields)


def _tool_spec(service: str, tool: McpTool, role: Role, mutates: bool, ports):
  fallback = f"{role.kind.capitalize()} {role.entity.replace('_', ' ')}."
  return schema_tool(
    service, tool, lambda svc, args: run_tool(svc, tool, args), mutates, ports, fallback
  )


def compile_service(
  spec: ServiceSpec, quarantined: dict[str, str] | None = None
) -> type[CompiledService]:
  """The executable service of ``spec``. ``quarantined`` maps tools that failed validation to
  the reason; they, and tools with external effects, are served by the world model."""
  quarantined = dict(quarantined or {})
  simulated = {t.name for t in spec.tools if t.external} | set(quarantined)
  entities, plans = infer(spec, simulated)
  records = {e.name: _record_type(spec.name, e) for e in entities.values()}
  state_fields = {
    e.table: (Table[records[e.name]], Field(default_factory=lambda t=records[e.name]: Table(t)))
    for e in entities.values()
  }
  class_name = "".join(w.capitalize() for w in spec.name.split("_")) or "Compiled"
  state_cls = create_model(f"{class_name}State", __base__=ServiceState, **state_fields)
  strip = common_prefix([t.name for t in spec.tools])
  tools, statuses = {}, {}
  for tool in spec.tools:
    plan, role = plans[tool.name], role_of(tool.name, tool.input_schema, tool.annotations, strip)
    if tool.name in quarantined:
      statuses[tool.name] = {"status": "quarantined", "reason": quarantined[tool.name]}
    elif tool.external:
      statuses[tool.name] = {"status": "simulated", "reason": f"external effect: {tool.external}"}
    elif plan.kind == "compute":
      statuses[tool.name] = {"status": "simulated", "reason": plan.why}
    else:
      statuses[tool.name] = {"status": "deterministic", "reason": ""}
    if plan.kind == "simulate":
      mutates = tool.annotations.get("readOnlyHint") is not True and role.kind not in (
        "get",
        "list",
        "search",
      )
    else:
      # a write that names no record is simulated, and still a write
      mutates = plan.kind in ("create", "send", "update", "delete", "action", "relate")
      mutates = mutates or (plan.kind == "compute" and role.kind in ("update", "delete"))
    entity = entities.get(plan.entity)
    read_pairs = [*entity.fields.items(), ("id", {})] if entity else []
    arg_pairs = [(a.key, a.schema) for a in leaf_args(tool.input_schema)]
    ports = (
      () if mutates else _ports(read_pairs, plan.entity),
      _ports(arg_pairs, plan.entity) if mutates else (),
    )
    tools[tool.name] = _tool_spec(spec.name, tool, role, mutates, ports)
  cls = type(
    class_name,
    (CompiledService,),
    {
      "name": spec.name,
      "domain": spec.domain,
      "description": spec.description,
      "State": state_cls,
      "service_spec": spec,
      "entities": entities,
      "plans": plans,
      "statuses": statuses,
      "__module__": "compoworld.compiled_library",
    },
  )
  cls.tools = tools
  return cls
