"""What the validator reads out of a tool's answers (ids, records, listed rows, names) and the
arguments it writes for its cases (fresh values, a path set or dropped), all from data alone.
"""

from __future__ import annotations

import copy
from typing import Any

from compoworld.specs.naming import (
  tokens,
)
from compoworld.specs.schema_values import (
  is_valid,
)


def _set(args: dict[str, Any], path: tuple[str, ...], value: Any) -> dict[str, Any]:
  out = copy.deepcopy(args)
  node = out
  for part in path[:-1]:
    node = node.setdefault(part, {})
  node[path[-1]] = value
  return out


def _values(data: Any) -> list[Any]:
  """Every scalar inside a JSON value."""
  if isinstance(data, dict):
    return [v for x in data.values() for v in _values(x)]
  if isinstance(data, list):
    return [v for x in data for v in _values(x)]
  return [data]


def _find_id(data: Any, entity: str) -> Any:
  """The id of the record a create returned: ``id``, ``<entity>_id``, or one level down."""
  if not isinstance(data, dict):
    return None
  for key in ("id", f"{entity}_id", f"{entity}Id"):
    if isinstance(data.get(key), (str, int)) and not isinstance(data.get(key), bool):
      return data[key]
  for value in data.values():
    if isinstance(value, dict) and isinstance(value.get("id"), (str, int)):
      return value["id"]
  return None


def _ids_in(data: Any) -> list[Any]:
  """Ids of records a read returned (any list of objects with an ``id``)."""
  if isinstance(data, list):
    found = [d["id"] for d in data if isinstance(d, dict) and "id" in d]
    return found or [i for d in data for i in _ids_in(d)]
  if isinstance(data, dict):
    return [i for v in data.values() if isinstance(v, (list, dict)) for i in _ids_in(v)]
  return []


def _clock(key: str) -> bool:
  """A field a write may move by itself: a timestamp or a version counter."""
  words = set(tokens(key))
  return bool(words & {"updated", "modified", "version", "etag", "revision"}) or key.endswith("_at")


def _names(data: Any, parent: str = "") -> list[str]:
  """The names a record may keep an argument's value under: every key of a JSON object, nested
  ones also qualified by their parent (``end.dateTime`` → ``end_dateTime``), as the compiler
  names fields whose plain names collide."""
  if not isinstance(data, dict):
    return []
  out = []
  for key, value in data.items():
    out += [key, f"{parent}_{key}"] if parent else [key]
    out += _names(value, key)
  return out


def _record_in(data: Any, record_id: Any) -> dict[str, Any] | None:
  """The object inside a read's answer that is the record ``record_id``."""
  if isinstance(data, dict):
    if "id" in data and str(data["id"]) == str(record_id):
      return data
    data = list(data.values())
  if isinstance(data, list):
    for item in data:
      if isinstance(item, (dict, list)) and (found := _record_in(item, record_id)) is not None:
        return found
  return None


def _matches(value: Any, wanted: Any) -> bool:
  if isinstance(value, str) and isinstance(wanted, str):
    return wanted.lower() in value.lower() or value.lower() in wanted.lower()
  if isinstance(value, list):
    return wanted in value
  return value == wanted


def _listed(data: Any) -> list[dict[str, Any]]:
  """The records a list answer holds: its first list of objects."""
  if isinstance(data, list):
    return [d for d in data if isinstance(d, dict)]
  if isinstance(data, dict):
    for value in data.values():
      if isinstance(value, list) and any(isinstance(d, dict) for d in value):
        return [d for d in value if isinstance(d, dict)]
  return []


def _truncated(data: Any, listed: list[Any]) -> bool:
  """A page of a longer list: a total beyond it, or a pointer to the next page."""
  if not isinstance(data, dict):
    return False
  total = data.get("total")
  more = isinstance(total, int) and total > len(listed)
  return more or any(v for k, v in data.items() if "next" in tokens(k) or k == "has_more")


def _fresh_value(schema: dict[str, Any]) -> Any:
  """A value for an update to write that no seeded record holds: a marked string for a plain
  string argument, an odd number within the bounds of a numeric one; None for anything else."""
  kind = schema.get("type")
  if "enum" in schema or "format" in schema or schema.get("pattern"):
    return None
  if kind == "string":
    return "Updated by the validator 7431"
  if kind in ("integer", "number"):
    value = 7431 if kind == "integer" else 7431.5
    for candidate in (value, schema.get("maximum"), schema.get("minimum")):
      if candidate is not None and not isinstance(candidate, bool) and is_valid(candidate, schema):
        return candidate
  return None


def _fresh_item(schema: dict[str, Any]) -> Any:
  """A value no seeded record holds, of the argument's shape (a list of one, or one)."""
  inner = schema.get("items", {}) if schema.get("type") == "array" else schema
  fmt = inner.get("format")
  value = "added.7431@example.com" if fmt == "email" or "email" in str(inner) else "added-7431"
  return [value] if schema.get("type") == "array" else value


def _without(args: dict[str, Any], paths: set[tuple[str, ...]]) -> dict[str, Any]:
  """``args`` less the values at ``paths`` (ids that link to other records)."""
  out = copy.deepcopy(args)
  for path in paths:
    node = out
    for part in path[:-1]:
      node = node.get(part, {}) if isinstance(node, dict) else {}
    if isinstance(node, dict):
      node.pop(path[-1], None)
  return out


def _typed(value: Any, schema: dict[str, Any]) -> Any:
  if schema.get("type") in ("integer", "number") and str(value).isdigit():
    return int(value)
  if schema.get("type") == "string":
    return str(value)
  return value


def _brief(out: dict[str, Any]) -> Any:
  return {"status": out.get("status"), "error": out.get("error")} if not out.get("ok") else out
