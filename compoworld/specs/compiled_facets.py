"""Facets for compiled services, so the procedural author composes them into tasks.

Hand-written services carry hand-written facets (``envs/<service>/facets.py``). A compiled
service gets generic ones, read off its plans: for each entity field whose port kind is shared,

  Source   a record of the scenario's own (put into s0) read back with the entity's get tool
  Sink     a record created with the value in that field (create tool); the check finds it
  Revisit  the field read, changed with the incoming value (update tool), and read again

Records are named by id in the instruction, which is how an agent would find them through the
get tool. Besides deterministic tools, a simulated read of the world outside whose output schema
has a field of a shared kind (``get_exchange_rate`` → ``rate``) is a Source too: the instruction
states its arguments, and the offline world model answers a read the same way all episode.
"""

from __future__ import annotations

import copy
import random
import re
from collections.abc import Iterable
from datetime import timedelta
from typing import Any

from compoworld.runtime.ports import is_shared
from compoworld.specs.compiled import CompiledService, EntityPlan, Path, ToolPlan
from compoworld.specs.compiler import port_of
from compoworld.specs.ingest import McpTool
from compoworld.specs.naming import tokens
from compoworld.specs.schema_values import example, is_valid
from compoworld.tasks.authoring import AuthorContext, AuthoringError
from compoworld.tasks.facets import FacetRegistry, Found, Revisit, Sink, Value, facets
from compoworld.tasks.rubric import exists, record_is, where
from compoworld.tasks.task import name_words

#: Kinds whose values a compiled field can take from, and hand to, other services.
_KINDS = (
  "person.email", "person.name", "person.phone", "company.name", "title", "text", "url",
  "date", "datetime", "city", "location", "address", "money", "quantity", "currency",
)  # fmt: skip


def _set(args: dict[str, Any], path: Path, value: Any) -> dict[str, Any]:
  node = args
  for part in path[:-1]:
    node = node.setdefault(part, {})
  node[path[-1]] = value
  return args


#: Words of a server's title that name the software, not the service (``HubSpot MCP Server``).
_TITLE_NOISE = {"mcp", "server", "api", "klavis", "compoworld", "integration", "tools", "tool"}
#: Short first words of a field that are words of their own, not a vendor's prefix (``hs_``).
_SHORT_WORDS = {"id", "is", "to", "no", "on", "in", "at", "by", "of", "or", "new", "max", "min"}


def display_name(title: str, name: str) -> str:
  """How an instruction names a service: its title without the software words
  (``HubSpot MCP`` → ``HubSpot``, ``google_calendar`` → ``Google Calendar``)."""
  words = [w for w in tokens_of(title or name) if w.lower() not in _TITLE_NOISE]
  words = words or [w for w in tokens_of(name) if w.lower() not in _TITLE_NOISE] or [name]
  return " ".join(w if any(c.isupper() for c in w) else w.capitalize() for w in words)


def tokens_of(text: str) -> list[str]:
  return [w for w in re.split(r"[\s_\-/]+", text) if w]


def _prefix_of(word: str, service: str) -> bool:
  """``hs`` of HubSpot, ``gh`` of GitHub: a short word whose letters the service's name spells,
  in order, from its first."""
  letters = iter(service.lower())
  return (
    len(word) <= 3
    and word not in _SHORT_WORDS
    and word[0] == service[:1].lower()
    and all(c in letters for c in word)
  )


#: Starts of words whose sound, not their first letter, picks the article.
_A_SOUNDS = ("use", "usu", "uni", "uri", "url", "eu", "one", "once")
_AN_SOUNDS = ("hour", "honest", "honor", "honour", "heir", "sms", "html", "http", "xml", "mri")


def field_words(name: str, service: str) -> str:
  """A field or entity name as words of a sentence: ``hs_email`` of HubSpot → ``email``,
  ``firstName`` → ``first name``."""
  words = tokens(name)
  if len(words) > 1 and _prefix_of(words[0], service):
    words = words[1:]
  return " ".join(words) or name


def _article(noun: str) -> str:
  """``a`` or ``an`` before ``noun``, by its sound (an email, a user, an hour)."""
  low = noun.lower()
  vowel = low[:1] in "aeiou" and not low.startswith(_A_SOUNDS)
  return f"an {noun}" if vowel or low.startswith(_AN_SOUNDS) else f"a {noun}"


class _Entity:
  """What the facets of one entity of one compiled service need to know."""

  def __init__(self, cls: type[CompiledService], plan: EntityPlan):
    self.cls, self.plan, self.service = cls, plan, cls.name
    spec = getattr(cls, "service_spec", None)
    self.display = display_name(spec.title if spec else "", cls.name)
    self.thing = self.words(plan.name)
    deterministic = {t for t, s in cls.statuses.items() if s["status"] == "deterministic"}
    mine = [(n, p) for n, p in cls.plans.items() if p.entity == plan.name and n in deterministic]
    self.get = next((n for n, p in mine if p.kind == "get" and self._only_id(n, p)), None)
    self.creates = [(n, p) for n, p in mine if p.kind in ("create", "send")]
    self.updates = [(n, p) for n, p in mine if p.kind == "update" and p.id_path]

  def _only_id(self, name: str, plan: ToolPlan) -> bool:
    """A get whose only required argument is the record's id (possibly nested)."""
    schema = self.cls.tools[name].input_schema
    required = schema.get("required", [])
    return bool(plan.id_path) and required in ([], [plan.id_path[0]])

  def kinds(self) -> dict[str, str]:
    """Field → shared port kind, for plain scalar fields."""
    out = {}
    for field, schema in self.plan.fields.items():
      kind = port_of(field, schema, self.plan.name)
      scalar = schema.get("type") in ("string", "number", "integer") and "enum" not in schema
      if kind in _KINDS and is_shared(kind) and field not in self.plan.refs and scalar:
        out[field] = kind
    return out

  def words(self, name: str) -> str:
    return field_words(name, self.service)

  def noun(self, record_id: Any) -> str:
    return f"{self.thing} {record_id} in {self.display}"

  def shown_id(self, record_id: str) -> Any:
    return int(record_id) if self.plan.integer_ids else record_id

  def put_record(self, ctx: AuthorContext, overrides: dict[str, Any]) -> dict[str, Any]:
    """One of the scenario's own records, consistent with the schemas, added to s0."""
    rng = random.Random(ctx.rng.getrandbits(64))
    state = ctx.state(self.service)
    if self.plan.integer_ids:
      record_id = str(rng.randrange(20_000, 99_999))
    else:
      record_id = ctx.fresh_id(self.plan.prefix)
    record: dict[str, Any] = {"id": record_id}
    for field, schema in self.plan.fields.items():
      target = self.plan.refs.get(field)
      if target is not None:
        ids = state.table(self.cls.entities[target].table).ids()
        if not ids:
          raise AuthoringError("no_record_to_link", f"{self.service}.{target}")
        value: Any = ids[0]
        record[field] = int(value) if schema.get("type") in ("integer", "number") else value
      else:
        record[field] = example(schema, rng, field, depth=1)
    if self.plan.status:
      record["status"] = "open"
    stamp = (state.now - timedelta(days=1)).isoformat()
    record.update({s: stamp for s in self.plan.stamps})
    record.update(overrides)
    return ctx.put(self.service, self.plan.table, record)

  def read(self, ctx: AuthorContext, record_id: str) -> dict[str, Any]:
    plan = self.cls.plans[self.get]
    args = _set({}, plan.id_path, self.shown_id(record_id))
    return ctx.call(self.service, self.get, **args)

  def fresh_value(self, ctx: AuthorContext, field: str) -> Any:
    return example(self.plan.fields[field], random.Random(ctx.rng.getrandbits(64)), field, depth=1)

  def fits(self, field: str, value: Any) -> bool:
    return is_valid(value, self.plan.fields[field])


def _label(value: Any) -> str:
  return f"{value:,.2f}" if isinstance(value, float) else str(value)


def _value(value: Any) -> Value:
  number = float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
  return Value(value, _label(value), number)


def _source(e: _Entity, field: str, kind: str):
  def fn(ctx: AuthorContext) -> Found:
    record = e.put_record(ctx, {})
    got = e.read(ctx, record["id"])
    value = got.get(field)
    if value in (None, ""):
      raise AuthoringError("source_value_missing", f"{e.service}.{field}")
    return Found(kind, f"the {e.words(field)} of {e.noun(got['id'])}", [_value(value)])

  fn.__name__ = f"{e.plan.name}_{field}"
  return fn


def _create_args(e: _Entity, ctx: AuthorContext, tool: str) -> dict:
  """A create tool's arguments besides the sink's value: an example of its schema, with each
  reference to another record set to an existing one."""
  plan = e.cls.plans[tool]
  args = example(e.cls.tools[tool].input_schema, random.Random(ctx.rng.getrandbits(64)))
  for ref_path, target in plan.refs:
    ids = ctx.state(e.service).table(e.cls.entities[target].table).ids()
    if ids and (ref_path[0] in args):
      typed = int(ids[0]) if e.cls.entities[target].integer_ids else ids[0]
      _set(args, ref_path, typed)
  return args


def _told(args: Any, skip: Path, at: tuple = ()) -> list[tuple[str, Any]]:
  """The arguments besides the one at ``skip`` that an agent could only copy (ids, keys, email
  addresses: ``name_words``), so the instruction states them."""
  if isinstance(args, dict):
    return [kv for k, v in args.items() for kv in _told(v, skip, (*at, k))]
  if isinstance(args, list):
    return [kv for v in args for kv in _told(v, skip, at)]
  return [(at[-1], args)] if at and at != tuple(skip) and name_words(at[-1], args) else []


def _sink(e: _Entity, tool: str, path: Path, field: str, kind: str) -> Sink:
  since = "created_at" in e.plan.stamps
  schema = e.cls.tools[tool].input_schema

  def act(ctx: AuthorContext, target: dict[str, Any], v: Value) -> None:
    args = _set(copy.deepcopy(target), path, v.value)
    if not is_valid(args, schema):
      raise AuthoringError("value_does_not_fit", f"{e.service}.{tool}")
    ctx.call(e.service, tool, **args)

  def phrase(ctx: AuthorContext, target: dict[str, Any], obj: str) -> str:
    told = ", ".join(f"{e.words(k)} {_label(v)}" for k, v in _told(target, path))
    return f"create {_article(e.thing)} in {e.display} with {obj} as its {e.words(field)}" + (
      f" ({told})" if told else ""
    )

  def check(ctx: AuthorContext, target: Any, v: Value) -> dict[str, Any]:
    conds = [where(field, v.value)]
    if since:
      conds.append(where("created_at", ctx.since(e.service), "ge"))
    return exists(e.service, e.plan.table, *conds)

  return Sink(
    e.service,
    kind,
    f"{tool}_{field}",
    prepare=lambda ctx: _create_args(e, ctx, tool),
    act=act,
    check=check,
    phrase=phrase,
    text=lambda ctx, t, v: f"A new {e.thing} in {e.display} has {e.words(field)} {v.label}.",
    single=True,
  )


def _revisit(e: _Entity, tool: str, path: Path, field: str, kind: str) -> Revisit:
  update = e.cls.plans[tool]

  def first(ctx: AuthorContext) -> tuple[Found, dict[str, Any]]:
    record = e.put_record(ctx, {})
    got = e.read(ctx, record["id"])
    old = got.get(field)
    if old in (None, ""):
      raise AuthoringError("source_value_missing", f"{e.service}.{field}")
    found = Found(kind, f"the {e.words(field)} of {e.noun(got['id'])}", [_value(old)])
    return found, {"id": record["id"], "old": old}

  def act(ctx: AuthorContext, t: dict[str, Any], v: Value) -> None:
    if not e.fits(field, v.value):
      raise AuthoringError("value_does_not_fit", f"{e.service}.{field}")
    args = _set({}, update.id_path, e.shown_id(t["id"]))
    ctx.call(e.service, tool, **_set(args, path, v.value))

  def second(ctx: AuthorContext, t: dict[str, Any]) -> Found:
    got = e.read(ctx, t["id"])
    return Found(
      kind,
      f"the {e.words(field)} of {e.noun(got['id'])} now",
      [_value(got.get(field))],
      stale=t["old"],
    )

  change = Sink(
    e.service,
    kind,
    f"{tool}_{field}",
    prepare=lambda ctx: None,
    act=act,
    check=lambda ctx, t, v: record_is(e.service, e.plan.table, t["id"], field, v.value),
    phrase=lambda ctx, t, obj: f"set the {e.words(field)} of that {e.thing} to {obj}",
    text=lambda ctx, t, v: f"The {e.words(field)} of {e.thing} {t['id']} is {v.label}.",
    single=True,
  )
  return Revisit(e.service, kind, kind, kind, f"revisit_{tool}_{field}", first, change, second)


def _render(args: dict[str, Any], words) -> str:
  """Scalar arguments as a person would say them: "amount 100, base USD and quote EUR"."""
  said = [f"{words(k)} {_label(v)}" for k, v in args.items()]
  return ", ".join(said[:-1]) + f" and {said[-1]}" if len(said) > 1 else "".join(said)


def _outside(cls: type[CompiledService], tool: McpTool, field: str, kind: str):
  """A Source from a simulated read of the world outside (``get_exchange_rate``): the author
  calls it with arguments the instruction states, and the agent, calling it the same way, gets
  the same answer (``world_model.OfflineSimulator`` answers reads by seed and call)."""
  display = display_name(cls.service_spec.title, cls.name)
  thing = " ".join(tokens(tool.name))

  def words(name: str) -> str:
    return field_words(name, cls.name)

  def fn(ctx: AuthorContext) -> Found:
    args = example(tool.input_schema, random.Random(ctx.rng.getrandbits(64)))
    scalar = all(
      isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in args.values()
    )
    if not args or not scalar or not is_valid(args, tool.input_schema):
      raise AuthoringError("value_does_not_fit", f"{cls.name}.{tool.name}")
    got = ctx.call(cls.name, tool.name, **args)
    value = got.get(field) if isinstance(got, dict) else None
    if value in (None, "") or isinstance(value, (dict, list, bool)):
      raise AuthoringError("source_value_missing", f"{cls.name}.{tool.name}")
    said = _render(args, words)
    return Found(
      kind, f"the {words(field)} that {thing} in {display} gives for {said}", [_value(value)]
    )

  fn.__name__ = f"{tool.name}_{field}"
  return fn


def _outside_reads(cls: type[CompiledService]) -> list[tuple[McpTool, str, str]]:
  """(tool, output field, kind) of each simulated read whose output schema has a scalar field
  of a shared kind."""
  found = []
  for tool in cls.service_spec.tools:
    plan, runtime = cls.plans.get(tool.name), cls.tools.get(tool.name)
    if plan is None or plan.kind != "compute" or runtime is None or runtime.mutates:
      continue
    if cls.statuses[tool.name]["status"] != "simulated" or not tool.output_schema:
      continue
    for field, schema in tool.output_schema.get("properties", {}).items():
      kind = port_of(field, schema)
      scalar = schema.get("type") in ("string", "number", "integer") and "enum" not in schema
      if kind in _KINDS and is_shared(kind) and scalar:
        found.append((tool, field, kind))
  return found


def register_facets(services: Iterable[type[CompiledService]], reg: FacetRegistry = facets) -> dict:
  """Adds the generic facets of compiled ``services`` to ``reg``; returns what was added."""
  added = {"sources": 0, "sinks": 0, "revisits": 0}
  for cls in services:
    for tool, field, kind in _outside_reads(cls):
      reg.source(cls.name, kind)(_outside(cls, tool, field, kind))
      added["sources"] += 1
    for plan in cls.entities.values():
      e = _Entity(cls, plan)
      for field, kind in e.kinds().items():
        if e.get is not None:
          reg.source(cls.name, kind)(_source(e, field, kind))
          added["sources"] += 1
        for tool, tool_plan in e.creates:
          path = next((p for p, f in tool_plan.fields if f == field), None)
          if path is not None:
            reg.add_sink(_sink(e, tool, path, field, kind))
            added["sinks"] += 1
            break
        for tool, tool_plan in e.updates if e.get is not None else []:
          path = next((p for p, f in tool_plan.fields if f == field), None)
          if path is not None:
            reg.add_revisit(_revisit(e, tool, path, field, kind))
            added["revisits"] += 1
            break
  return added
