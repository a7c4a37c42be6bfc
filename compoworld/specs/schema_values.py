"""Values drawn from a JSON Schema: valid examples (seeded, name-aware) and deliberate misfits.

Used to seed compiled services with plausible records and, independently of any implementation,
by the adversarial validator to build its test cases.
"""

from __future__ import annotations

import random
import re
from datetime import datetime, timedelta
from typing import Any

import jsonschema

from compoworld.specs.naming import tokens

_FIRST = (
  "Ava",
  "Noah",
  "Mia",
  "Liam",
  "Zoe",
  "Omar",
  "Lena",
  "Ravi",
  "Iris",
  "Kofi",
  "Sara",
  "Tom",
)
_LAST = ("Okafor", "Lindqvist", "Tanaka", "Moreau", "Silva", "Novak", "Haddad", "Brennan", "Kim")
_COMPANIES = ("Northwind", "Acme Labs", "Globex", "Initech", "Umbrella Foods", "Blue Harbor")
_CITIES = ("Lisbon", "Denver", "Osaka", "Nairobi", "Toronto", "Berlin", "Austin", "Lyon")
_WORDS = ("alpha", "budget", "cobalt", "delta", "ember", "falcon", "granite", "harbor", "juniper")
_TOPICS = ("Quarterly budget review", "Vendor onboarding", "Launch readiness", "Security audit")
_BASE_TIME = datetime(2026, 3, 2, 9, 0)


def _string_for(key: str, rng: random.Random, fmt: str | None) -> str:
  words = set(tokens(key))
  when = _BASE_TIME + timedelta(days=rng.randint(-30, 30), hours=rng.randint(0, 8))
  if fmt == "date-time" or words & {"datetime", "timestamp", "at"}:
    return when.isoformat()
  if fmt == "date" or words & {"date", "day", "birthday", "since", "until"}:
    return when.date().isoformat()
  if fmt == "time":
    return when.time().isoformat()
  if fmt == "email" or words & {"email", "mail"}:
    return f"{rng.choice(_FIRST).lower()}.{rng.choice(_LAST).lower()}@example.com"
  if fmt in ("uri", "url", "uri-reference") or words & {"url", "uri", "link", "website", "href"}:
    return f"https://example.com/{rng.choice(_WORDS)}/{rng.randint(1, 999)}"
  if fmt == "uuid" or "uuid" in words:
    return f"{rng.getrandbits(32):08x}-0000-4000-8000-{rng.getrandbits(48):012x}"
  if fmt in ("ipv4", "ip") or "ip" in words:
    return f"10.0.{rng.randint(0, 255)}.{rng.randint(1, 254)}"
  if fmt == "hostname" or words & {"domain", "host", "hostname"}:
    return f"{rng.choice(_WORDS)}.example.com"
  if words & {"phone", "mobile"}:
    return f"+1-555-{rng.randint(100, 999)}-{rng.randint(1000, 9999)}"
  if words & {"currency"}:
    return rng.choice(("USD", "EUR", "GBP", "JPY"))
  if words & {"country"}:
    return rng.choice(("US", "DE", "JP", "KE", "CA"))
  if words & {"language", "lang", "locale"}:
    return rng.choice(("en", "de", "ja", "fr"))
  if words & {"city", "location", "place", "venue", "region"}:
    return rng.choice(_CITIES)
  if words & {"address", "street"}:
    return f"{rng.randint(1, 999)} {rng.choice(_LAST)} Street, {rng.choice(_CITIES)}"
  if words & {"company", "organization", "org", "account", "vendor", "customer"}:
    return rng.choice(_COMPANIES)
  if words & {"first"}:
    return rng.choice(_FIRST)
  if words & {"last", "surname"}:
    return rng.choice(_LAST)
  if words & {"name", "username", "user", "owner", "author", "assignee"}:
    return f"{rng.choice(_FIRST)} {rng.choice(_LAST)}"
  if words & {"title", "subject", "summary", "headline"}:
    return f"{rng.choice(_TOPICS)} {rng.randint(1, 99)}"
  if words & {"path", "file", "filename", "dir", "directory", "folder"}:
    return f"/docs/{rng.choice(_WORDS)}_{rng.randint(1, 99)}.txt"
  if words & {"color", "colour"}:
    return rng.choice(("red", "green", "blue", "#336699"))
  if words & {"symbol", "ticker", "code", "sku"}:
    return f"{rng.choice(_WORDS)[:3].upper()}{rng.randint(10, 99)}"
  if words & {"status", "state"}:
    return rng.choice(("open", "active", "pending"))
  if words & {"body", "content", "text", "message", "description", "note", "comment", "prompt"}:
    return (
      f"{rng.choice(_TOPICS)}: notes on the {rng.choice(_WORDS)} item, version {rng.randint(1, 9)}."
    )
  return f"{rng.choice(_WORDS)}-{rng.randint(10, 999)}"


def _fit_string(value: str, schema: dict[str, Any], rng: random.Random) -> str:
  lo, hi = schema.get("minLength", 0), schema.get("maxLength")
  if hi is not None and len(value) > hi:
    value = value[: max(hi, 0)]
  if len(value) < lo:
    value = value + "x" * (lo - len(value))
  pattern = schema.get("pattern")
  if pattern and not re.search(pattern, value):
    for candidate in ("abc", "ABC", "abc123", "a", "1", "123", "2026-03-02", "a@b.co", "x-1"):
      if re.search(pattern, candidate) and lo <= len(candidate) <= (hi or 10**9):
        return candidate
  return value


def example(
  schema: Any, rng: random.Random, key: str = "", depth: int = 0, full: bool = False
) -> Any:
  """A value valid under ``schema`` (best effort: patterns may defeat it), named by ``key``.

  ``full`` includes every optional property of objects, not just the required ones.
  """
  if not isinstance(schema, dict):
    return "value"
  if "const" in schema:
    return schema["const"]
  if "enum" in schema:
    return schema["enum"][rng.randrange(len(schema["enum"]))] if depth else schema["enum"][0]
  default = schema.get("default")
  if (
    default is not None
    and schema.get("type") not in ("object", "array")
    and _valid(default, schema)
  ):
    return default
  for key_ in ("anyOf", "oneOf"):
    if key_ in schema:
      options = [o for o in schema[key_] if o.get("type") != "null"] or schema[key_]
      return example(
        {**options[0], **{k: v for k, v in schema.items() if k != key_}}, rng, key, depth, full
      )
  kind = schema.get("type")
  if isinstance(kind, list):
    kind = next((k for k in kind if k != "null"), "null")
  if kind is None:
    kind = "object" if "properties" in schema else "string"
  if kind == "string":
    return _fit_string(_string_for(key, rng, schema.get("format")), schema, rng)
  if kind in ("integer", "number"):
    lo = schema.get("minimum", schema.get("exclusiveMinimum", 1))
    hi = schema.get("maximum", schema.get("exclusiveMaximum", max(lo, 0) + 100))
    lo = lo if isinstance(lo, (int, float)) and not isinstance(lo, bool) else 1
    hi = hi if isinstance(hi, (int, float)) and not isinstance(hi, bool) else lo + 100
    if "exclusiveMinimum" in schema and not isinstance(schema["exclusiveMinimum"], bool):
      lo = lo + 1
    if "exclusiveMaximum" in schema and not isinstance(schema["exclusiveMaximum"], bool):
      hi = hi - 1
    if hi < lo:
      hi = lo
    span = min(hi - lo, 50)
    value = lo + rng.randint(0, int(span)) if span >= 1 else lo
    step = schema.get("multipleOf")
    if isinstance(step, (int, float)) and step > 0:
      value = (value // step) * step or step
    if kind == "integer":
      return int(value)
    return (
      float(value)
      if span < 1
      else round(float(value) + rng.randint(0, 99) / 100, 2)
      if hi > value + 1
      else float(value)
    )
  if kind == "boolean":
    return True
  if kind == "null":
    return None
  if kind == "array":
    n = max(schema.get("minItems", 1), 1)
    n = min(n, schema.get("maxItems", n))
    items = [
      example(schema.get("items", {"type": "string"}), rng, key, depth + 1, full) for _ in range(n)
    ]
    if schema.get("uniqueItems"):
      items = [x for i, x in enumerate(items) if x not in items[:i]]
    return items
  if kind == "object":
    if depth > 6:
      return {}
    required = set(schema.get("required", []))
    out = {}
    for name, sub in schema.get("properties", {}).items():
      if name in required or full:
        out[name] = example(sub, rng, name, depth + 1, full)
    return out
  return "value"


def _valid(value: Any, schema: dict[str, Any]) -> bool:
  try:
    return jsonschema.Draft7Validator(schema).is_valid(value)
  except Exception:
    return False


def is_valid(value: Any, schema: dict[str, Any]) -> bool:
  """Whether ``value`` satisfies ``schema`` (formats are annotations, as in draft-07)."""
  return _valid(value, schema)


def declared_type(schema: dict[str, Any]) -> str | None:
  """The single JSON type a schema demands, or None when it admits several (or any)."""
  kind = schema.get("type")
  if isinstance(kind, str) and not any(k in schema for k in ("anyOf", "oneOf")):
    return kind
  return None


#: A value of the wrong JSON type for each declared type.
WRONG_TYPE = {
  "string": {"not": "a string"},  # a number could pass as a timestamp in a lax parser
  "integer": "not-a-number",
  "number": "not-a-number",
  "boolean": "maybe",
  "array": "not-a-list",
  "object": "not-an-object",
  "null": "not-null",
}


def boundary_values(kind: str) -> list[Any]:
  """Edge values worth throwing at an argument of a JSON type or string format (``date-time``:
  time zones, which naive and aware datetimes trip over), fresh objects every call."""
  return {
    "string": ["", "x" * 10_000, "Ünïcødé ✓ 日本語 🚀", "'; DROP TABLE users; --"],
    "date-time": ["2026-03-05T10:00:00Z", "2026-03-05T10:00:00+09:00", "not a time"],
    "integer": [-1, 0, 10**12],
    "number": [-1.5, 0, 1e15],
    "array": [[]],
  }.get(kind, [])
