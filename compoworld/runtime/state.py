"""Typed service state: immutable records in copy-on-write tables.

A service's state is a Pydantic model (``ServiceState``) whose fields are ``Table``s of
``Record``s plus a few immutable scalars (a logical clock, a seeded id counter). Records are
frozen: a change is a new, validated record put in the table. That one rule buys three
properties the rest of the system relies on:

* fork is O(number of tables): a forked table shares its row dict until either side writes;
* atomic calls are free: a tool runs on a fork that is kept only if the call succeeds;
* hashing is incremental: a table caches its digest until it is written to.
"""

from __future__ import annotations

import hashlib
import json
import typing
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from typing import Any, ClassVar, Generic, Self, TypeVar

import pydantic
from pydantic import BaseModel, ConfigDict, TypeAdapter
from pydantic_core import core_schema, to_jsonable_python

from compoworld.runtime.envelope import Conflict, InvalidArgument, NotFound, Unprocessable

_MUTABLE_CONTAINERS = (list, dict, set, frozenset, bytearray)


def _mutable_in(annotation: Any) -> bool:
  """Whether a value of this type could change in place (and so leak between forks)."""
  origin = typing.get_origin(annotation)
  if annotation in _MUTABLE_CONTAINERS or origin in _MUTABLE_CONTAINERS:
    return True
  if origin is Table or annotation is Table:
    return True  # a table nested in another type would not be forked
  if (
    isinstance(annotation, type)
    and issubclass(annotation, BaseModel)
    and not annotation.model_config.get("frozen", False)
  ):
    return True
  return any(_mutable_in(a) for a in typing.get_args(annotation) if not isinstance(a, (str, int)))


class Record(BaseModel):
  """One immutable row of a table, keyed by ``id``.

  Sequences are tuples, never lists: a frozen model holding a list could still be changed in
  place, which would leak writes between forks.
  """

  model_config = ConfigDict(frozen=True, extra="forbid")

  id: str

  @classmethod
  def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
    super().__pydantic_init_subclass__(**kwargs)
    for name, field in cls.model_fields.items():
      if _mutable_in(field.annotation):
        raise TypeError(
          f"{cls.__name__}.{name}: records are immutable; use tuple[...] or a nested "
          f"Record-like frozen model instead of {field.annotation!r}"
        )

  def with_changes(self, **changes: Any):
    """A validated copy with ``changes`` applied (raises ``pydantic.ValidationError``)."""
    unknown = set(changes) - set(type(self).model_fields)
    if unknown:
      raise Unprocessable(f"{type(self).__name__} has no field(s) {sorted(unknown)}")
    values = dict(self)
    values.update(changes)
    return type(self).model_validate(values)


def supplied(tool_name: str, values: dict[str, Any], name_fields: bool = False) -> dict[str, Any]:
  """The ``values`` an update tool was given (those not None), the changes it makes.

  None given is an ``InvalidArgument``: "<tool_name>: supply at least one field to change", or
  with ``name_fields`` "<tool_name>: supply at least one of a, b or c" (the keys of ``values``).
  """
  changes = {k: v for k, v in values.items() if v is not None}
  if not changes:
    wanted = "field to change"
    if name_fields:
      *first, last = values
      wanted = f"of {', '.join(first)} or {last}"
    raise InvalidArgument(f"{tool_name}: supply at least one {wanted}")
  return changes


R = TypeVar("R", bound=Record)

_ADAPTERS: dict[type, TypeAdapter] = {}


def _list_adapter(record_type: type) -> TypeAdapter:
  adapter = _ADAPTERS.get(record_type)
  if adapter is None:
    adapter = _ADAPTERS[record_type] = TypeAdapter(list[record_type])
  return adapter


def _entity(record_type: type) -> str:
  return record_type.__name__.lower()


class Table(Generic[R]):
  """A collection of records keyed by id, copy-on-write under ``fork``."""

  __slots__ = ("_digest", "_rows", "_shared", "record_type")

  def __init__(self, record_type: type[R], rows: dict[str, R] | None = None):
    self.record_type = record_type
    self._rows: dict[str, R] = rows if rows is not None else {}
    self._shared = False
    self._digest: str | None = None

  # --- reads -------------------------------------------------------------------------------

  def get(self, record_id: str) -> R:
    """The record with this id, or a 404 ``NotFound`` naming the id."""
    try:
      return self._rows[record_id]
    except (KeyError, TypeError):
      raise NotFound(f"{_entity(self.record_type)} '{record_id}' not found") from None

  def check(self, record_id: str | None) -> None:
    """A 404 ``NotFound`` unless ``record_id`` is None or the id of a record: how a list tool
    checks an id it filters by, so that an unknown one is an error, not an empty page."""
    if record_id is not None:
      self.get(record_id)

  def find(self, record_id: str) -> R | None:
    return self._rows.get(record_id)

  def find_by(self, **values: Any) -> R | None:
    """The first record (in insertion order) whose fields equal ``values``, or None."""
    return next(
      (r for r in self._rows.values() if all(getattr(r, f) == v for f, v in values.items())), None
    )

  def get_by(self, missing: str, /, **values: Any) -> R:
    """The first record whose fields equal ``values``, or a 404 ``NotFound`` saying ``missing``."""
    found = self.find_by(**values)
    if found is None:
      raise NotFound(missing)
    return found

  def __contains__(self, record_id: object) -> bool:
    return record_id in self._rows

  def __len__(self) -> int:
    return len(self._rows)

  def __iter__(self) -> Iterator[R]:
    return iter(self._rows.values())

  def ids(self) -> list[str]:
    return list(self._rows)

  def filter(self, predicate: Callable[[R], bool]) -> list[R]:
    return [r for r in self._rows.values() if predicate(r)]

  # --- writes ------------------------------------------------------------------------------

  def _own(self) -> dict[str, R]:
    if self._shared:
      self._rows = dict(self._rows)
      self._shared = False
    self._digest = None
    return self._rows

  def insert(self, record: R) -> R:
    if not isinstance(record, self.record_type):
      raise TypeError(f"expected {self.record_type.__name__}, got {type(record).__name__}")
    if record.id in self._rows:
      raise Conflict(f"{_entity(self.record_type)} '{record.id}' already exists")
    self._own()[record.id] = record
    return record

  def update(self, record_id: str, **changes: Any) -> R:
    """Replace the record by a validated copy with ``changes``; the id cannot change."""
    if "id" in changes and changes["id"] != record_id:
      raise Unprocessable("a record's id cannot be changed")
    new = self.get(record_id).with_changes(**changes)
    self._own()[record_id] = new
    return new

  def delete(self, record_id: str) -> R:
    record = self.get(record_id)
    del self._own()[record_id]
    return record

  # --- fork, hash, diff --------------------------------------------------------------------

  def fork(self) -> Table[R]:
    """An independent table sharing rows until either side writes."""
    self._shared = True
    twin = Table(self.record_type, self._rows)
    twin._shared = True
    twin._digest = self._digest
    return twin

  def digest(self) -> str:
    """Content hash of the rows in id order (cached until the next write)."""
    if self._digest is None:
      rows = [self._rows[k] for k in sorted(self._rows)]
      payload = _list_adapter(self.record_type).dump_json(rows)
      # sha256 runs on SHA-NI hardware: about twice blake2b's speed on these machines.
      self._digest = hashlib.sha256(payload).hexdigest()[:32]
    return self._digest

  def diff(self, other: Table[R]) -> dict[str, Any]:
    """Record-level changes from ``self`` to ``other``: added / updated / removed ids."""
    mine, theirs = self._rows, other._rows
    if mine is theirs:
      return {}
    added = [k for k in theirs if k not in mine]
    removed = [k for k in mine if k not in theirs]
    updated = []
    for k, old in mine.items():
      new = theirs.get(k)
      if new is None or new is old or new == old:
        continue
      fields = {
        f: [to_jsonable_python(getattr(old, f)), to_jsonable_python(getattr(new, f))]
        for f in type(old).model_fields
        if getattr(old, f) != getattr(new, f)
      }
      updated.append({"id": k, "fields": fields})
    out: dict[str, Any] = {}
    if added:
      out["added"] = added
    if updated:
      out["updated"] = updated
    if removed:
      out["removed"] = removed
    return out

  # --- pydantic integration ----------------------------------------------------------------

  @classmethod
  def __get_pydantic_core_schema__(cls, source: Any, handler: pydantic.GetCoreSchemaHandler):
    args = typing.get_args(source)
    if len(args) != 1 or not (isinstance(args[0], type) and issubclass(args[0], Record)):
      raise TypeError(f"use Table[SomeRecord], got {source!r}")
    record_type = args[0]
    rows_schema = handler.generate_schema(dict[str, record_type])

    def validate(value: Any, inner: Callable[[Any], dict]) -> Table:
      if isinstance(value, Table):
        if value.record_type is not record_type:
          raise ValueError(f"expected a table of {record_type.__name__}")
        return value
      if isinstance(value, (list, tuple)):
        value = {r["id"] if isinstance(r, dict) else r.id: r for r in value}
      rows = inner(value)
      for key, rec in rows.items():
        if key != rec.id:
          raise ValueError(f"row key '{key}' differs from its record id '{rec.id}'")
      return Table(record_type, rows)

    return core_schema.no_info_wrap_validator_function(
      validate,
      rows_schema,
      serialization=core_schema.wrap_serializer_function_ser_schema(
        lambda table, ser: ser(table._rows), schema=rows_schema
      ),
    )


def _is_table_annotation(annotation: Any) -> bool:
  return typing.get_origin(annotation) is Table


class ServiceState(BaseModel):
  """Base of every service's state: tables plus a logical clock and a seeded id counter.

  Top-level fields must be ``Table[...]`` or immutable values, so that a shallow copy with
  forked tables is a full, independent copy.
  """

  model_config = ConfigDict(extra="forbid", validate_assignment=True)

  #: Seed of the service's data generator; also salts generated ids.
  seed: int = 0
  #: The service's current logical time; advanced by the runtime after each write.
  now: datetime = datetime(2026, 3, 2, 9, 0)
  #: Number of ids handed out so far.
  id_seq: int = 0

  _table_fields: ClassVar[tuple[str, ...]] = ()

  @classmethod
  def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
    super().__pydantic_init_subclass__(**kwargs)
    tables = []
    for name, field in cls.model_fields.items():
      if _is_table_annotation(field.annotation):
        tables.append(name)
      elif _mutable_in(field.annotation):
        raise TypeError(f"{cls.__name__}.{name}: state fields must be tables or immutable values")
    cls._table_fields = tuple(tables)

  @classmethod
  def empty(cls, seed: int, **scalars: Any) -> Self:
    """A state with every table empty, where a data generator starts (``scalars`` sets any
    other field, such as the user the service acts for)."""
    return cls(seed=seed, **{name: {} for name in cls._table_fields}, **scalars)

  def tables(self) -> dict[str, Table]:
    return {name: self.__dict__[name] for name in self._table_fields}

  def table(self, name: str) -> Table:
    if name not in self._table_fields:
      raise NotFound(f"no collection '{name}'; collections: {', '.join(self._table_fields)}")
    return self.__dict__[name]

  def new_id(self, prefix: str) -> str:
    """A fresh, deterministic, hard-to-guess id such as ``evt_3f9a0c21``."""
    seq = self.id_seq + 1
    self.id_seq = seq
    token = hashlib.blake2b(f"{self.seed}:{prefix}:{seq}".encode(), digest_size=4).hexdigest()
    return f"{prefix}_{token}"

  def advance(self, delta: timedelta) -> None:
    self.now = self.now + delta

  def fork(self):
    twin = self.model_copy()
    for name in self._table_fields:
      twin.__dict__[name] = self.__dict__[name].fork()
    return twin

  def scalars(self) -> dict[str, Any]:
    return {
      name: to_jsonable_python(value)
      for name, value in self.__dict__.items()
      if name not in self._table_fields
    }

  def content_hash(self) -> str:
    h = hashlib.blake2b(digest_size=16)
    h.update(type(self).__qualname__.encode())
    h.update(json.dumps(self.scalars(), sort_keys=True).encode())
    for name in self._table_fields:
      h.update(name.encode())
      h.update(self.__dict__[name].digest().encode())
    return h.hexdigest()

  def diff(self, other: ServiceState) -> dict[str, Any]:
    """Per-collection record diff plus changed scalars; empty when the states are equal."""
    out: dict[str, Any] = {}
    for name in self._table_fields:
      d = self.__dict__[name].diff(other.__dict__[name])
      if d:
        out[name] = d
    mine, theirs = self.scalars(), other.scalars()
    changed = {k: [mine[k], theirs[k]] for k in mine if mine[k] != theirs[k]}
    if changed:
      out["_scalars"] = changed
    return out
