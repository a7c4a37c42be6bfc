"""The contract every registered service keeps, checked generically over ``registry.names()``."""

from __future__ import annotations

import json
import re
import sys
from datetime import timedelta
from typing import Any

import jsonschema
import mcp.types
import pytest

from compoworld import DOMAINS, Service, registry
from compoworld.compose.env import SEP
from tests.contract import call_fails

NAMES = registry.names()
OPENAI_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
ENVELOPE_KEYS = ({"ok", "status", "data"}, {"ok", "status", "error"})

pytestmark = pytest.mark.parametrize("name", NAMES)


def service(name: str, seed: int = 0) -> Service:
  return registry.get(name).create(seed=seed)


def read_tools(cls: type[Service]) -> list[str]:
  return [t for t, spec in cls.tools.items() if not spec.mutates]


def sample(schema: dict[str, Any]) -> Any:
  """Some value of roughly the right type (it need not pass the schema's constraints)."""
  if "default" in schema:
    return schema["default"]
  if "enum" in schema:
    return schema["enum"][0]
  if "const" in schema:
    return schema["const"]
  kind = schema.get("type")
  if schema.get("format") == "date-time":
    return "2026-03-02T10:00:00"
  return {
    "string": "x",
    "integer": 1,
    "number": 1.0,
    "boolean": False,
    "array": [],
    "object": {},
  }.get(kind, "x")


def assert_envelope(env: Any) -> None:
  assert isinstance(env, dict) and set(env) in ENVELOPE_KEYS, env
  assert isinstance(env["ok"], bool) and isinstance(env["status"], int)
  if env["ok"]:
    assert env["status"] == 200
  else:
    assert env["status"] in (400, 404, 409, 422, 500)
    assert set(env["error"]) == {"type", "message"} and env["error"]["message"]
  json.dumps(env)  # the whole envelope is JSON


def test_metadata(name):
  cls = registry.get(name)
  assert cls.name == name
  assert cls.domain in DOMAINS
  assert isinstance(cls.description, str) and cls.description.strip()
  doc = sys.modules[cls.__module__].__doc__
  assert doc and len(doc.strip()) > 20, f"module {cls.__module__} needs a docstring"
  assert len(cls.tools) >= 6, sorted(cls.tools)
  assert read_tools(cls), "needs at least one read-only tool"
  assert any(spec.mutates for spec in cls.tools.values()), "needs at least one write tool"


def test_seeded_generation_is_deterministic(name):
  cls = registry.get(name)
  a, b = service(name), service(name)
  assert isinstance(a.state, cls.State)
  assert a.state_hash() == b.state_hash()
  assert a.state.model_dump_json() == b.state.model_dump_json()
  assert cls(cls.generate(0, None)).state_hash() == a.state_hash()
  assert service(name, seed=1).state_hash() != a.state_hash()
  assert any(len(t) for t in a.state.tables().values()), "the seeded state has data"


def test_state_round_trips_through_json(name):
  svc = service(name)
  cls = registry.get(name)
  again = cls.State.model_validate_json(svc.state.model_dump_json())
  assert again.content_hash() == svc.state_hash() and svc.state.diff(again) == {}


def test_tool_schemas(name):
  cls = registry.get(name)
  for tool_name, spec in cls.tools.items():
    assert spec.name == tool_name
    assert OPENAI_NAME.match(f"{name}{SEP}{tool_name}"), f"{name}{SEP}{tool_name} is too long"
    assert spec.description.strip() and spec.summary.strip()
    schema = spec.input_schema
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["type"] == "object" and schema["additionalProperties"] is False
    assert set(schema.get("required", [])) <= set(schema["properties"])
    for arg, prop in schema["properties"].items():
      assert prop.get("description"), f"{tool_name}.{arg} needs a description"
    assert "$ref" not in json.dumps(schema)
    tool = mcp.types.Tool(name=tool_name, description=spec.description, inputSchema=schema)
    assert tool.input_schema == schema


def test_read_only_tools_never_raise_and_never_write(name):
  svc = service(name)
  h0, dump0 = svc.state_hash(), svc.state.model_dump_json()
  for tool_name in read_tools(type(svc)):
    schema = svc.spec(tool_name).input_schema
    required = schema.get("required", [])
    env = svc.call(tool_name, {})
    assert_envelope(env)
    if required:
      assert env["status"] == 400, env
      for arg in required:
        assert f"'{arg}'" in env["error"]["message"], env
    else:
      assert env["status"] != 500, env
    for missing in required:
      args = {a: sample(schema["properties"][a]) for a in required if a != missing}
      env = svc.call(tool_name, args)
      assert_envelope(env)
      assert env["status"] == 400 and f"'{missing}'" in env["error"]["message"], env
    assert svc.state_hash() == h0, f"read-only {tool_name} changed the state"
  assert svc.state.model_dump_json() == dump0


def test_unknown_argument_is_400_for_every_tool(name):
  svc = service(name)
  for tool_name in svc.tools:
    call_fails(svc, tool_name, {"zz_bogus_argument": 1}, 400, "zz_bogus_argument")


def test_unknown_tool_is_404(name):
  svc = service(name)
  call_fails(svc, "zz_no_such_tool", {}, 404, "zz_no_such_tool", *svc.tools)


def test_fork_is_independent(name):
  svc = service(name)
  twin = svc.fork()
  assert twin.state is not svc.state and twin.state_hash() == svc.state_hash()
  assert svc.diff(twin) == {}
  table_name, table = next((n, t) for n, t in svc.state.tables().items() if len(t))
  victim = table.ids()[0]
  h0, dump0 = svc.state_hash(), svc.state.model_dump_json()

  twin.state.table(table_name).delete(victim)
  twin.state.advance(timedelta(days=1))
  assert victim in svc.state.table(table_name)
  assert svc.state_hash() == h0 and svc.state.model_dump_json() == dump0
  assert svc.diff(twin)[table_name]["removed"] == [victim]

  h_twin = twin.state_hash()
  other = svc.fork()
  svc.state.table(table_name).delete(victim)
  svc.state.new_id("zz")
  assert twin.state_hash() == h_twin and victim in other.state.table(table_name)
