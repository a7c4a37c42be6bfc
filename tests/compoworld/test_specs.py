"""Ingestion: schema normalization and repair, reading both spellings, duplicates, domains."""

import json
from pathlib import Path

import pytest

from compoworld.runtime.domains import DOMAINS
from compoworld.specs.ingest import (
  SchemaError,
  external_reason,
  map_domain,
  normalize_schema,
  read_specs,
)

DATA = Path(__file__).parent / "data"
CORPUS = Path(__file__).resolve().parents[2].parent / "shared" / "mcp_specs" / "tools.jsonl"


def test_ref_into_defs_is_inlined_and_defs_dropped():
  schema = {
    "type": "object",
    "$defs": {"P": {"type": "object", "properties": {"x": {"type": "number"}}}},
    "properties": {"p": {"$ref": "#/$defs/P", "description": "a point"}},
  }
  out, repairs = normalize_schema(schema)
  assert out["properties"]["p"] == {
    "type": "object",
    "properties": {"x": {"type": "number"}},
    "description": "a point",
  }
  assert "$defs" not in out and repairs == []


def test_ref_by_json_pointer_to_a_sibling_property():
  item = {"type": "object", "properties": {"name": {"type": "string"}}}
  schema = {
    "type": "object",
    "properties": {
      "components": {"type": "array", "items": item},
      "charts": {"type": "array", "items": {"$ref": "#/properties/components/items"}},
    },
  }
  out, _ = normalize_schema(schema)
  assert out["properties"]["charts"]["items"] == item


def test_recursive_ref_is_cut_with_a_stated_repair():
  schema = {
    "type": "object",
    "properties": {"node": {"$ref": "#/$defs/N"}},
    "$defs": {"N": {"type": "object", "properties": {"child": {"$ref": "#/$defs/N"}}}},
  }
  out, repairs = normalize_schema(schema)
  assert out["properties"]["node"]["properties"]["child"] == {}
  assert repairs == ["recursive $ref #/$defs/N replaced by any value"]


def test_anyof_kept_allof_merged_and_zod_never_dropped():
  schema = {
    "type": "object",
    "properties": {
      "a": {"anyOf": [{"not": {}}, {"type": "string"}]},
      "b": {
        "allOf": [{"properties": {"x": {"type": "string"}}, "required": ["x"]}, {"type": "object"}]
      },
    },
  }
  out, repairs = normalize_schema(schema)
  assert out["properties"]["a"] == {"anyOf": [{"type": "string"}]}
  assert out["properties"]["b"] == {
    "properties": {"x": {"type": "string"}},
    "required": ["x"],
    "type": "object",
  }
  assert "allOf merged into one schema" in repairs


@pytest.mark.parametrize(
  ("schema", "expected", "repair"),
  [
    ({"properties": {"n": {"type": "int"}}}, {"type": "integer"}, "type 'int' read as 'integer'"),
    (
      {"properties": {"n": {"type": "number", "minimum": 0, "exclusiveMinimum": True}}},
      {"type": "number", "exclusiveMinimum": 0},
      "draft-04 boolean exclusiveMinimum rewritten for draft-07",
    ),
    (
      {"properties": {"n": {"type": "string", "pattern": "(?<=x"}}},
      {"type": "string"},
      "pattern '(?<=x' is not a valid regular expression: dropped",
    ),
  ],
)
def test_repairs(schema, expected, repair):
  out, repairs = normalize_schema(schema)
  assert out["type"] == "object"  # a missing top-level type reads as object
  assert out["properties"]["n"] == expected
  assert repair in repairs


def test_required_naming_no_property_is_dropped():
  out, repairs = normalize_schema(
    {"type": "object", "properties": {"a": {}}, "required": ["a", "b"]}
  )
  assert out["required"] == ["a"]
  assert repairs == ["'required' names no such property: ['b']"]


def test_a_schema_nested_under_properties_is_unwrapped():
  inner = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
  out, repairs = normalize_schema({"type": "object", "properties": inner})
  assert out["properties"] == {"q": {"type": "string"}} and out["required"] == ["q"]
  assert repairs == ["a whole schema was nested under 'properties': unwrapped"]


@pytest.mark.parametrize(
  ("schema", "reason"),
  [
    ({"type": "string"}, "the arguments must be an object"),
    ([1, 2], "the input schema is a list"),
    ({"type": "object", "properties": {"a": "text"}}, "a subschema is a str"),
    ({"type": "object", "properties": {"a": {"minLength": "two"}}}, "not a valid draft-07 schema"),
  ],
)
def test_unrepairable_schemas_are_rejected_with_a_reason(schema, reason):
  with pytest.raises(SchemaError, match=reason):
    normalize_schema(schema)


def test_read_specs_collapses_duplicates_rejects_and_reads_both_spellings():
  specs, stats = read_specs(DATA / "specs.jsonl", reserved=["refs"])
  by_name = {s.name: s for s in specs}
  assert stats == {
    "tool_lines": 24,
    "servers": 5,
    "duplicate_servers": 1,
    "rejected_tools": 1,
    "services": 4,
    "tools": 15,
  }
  assert by_name["notes_server"].aliases == ("toucan:notes-clone",)
  assert by_name["acme_crm"].rejected == (
    {
      "tool": "ACME_CRM__BROKEN",
      "reason": "the arguments must be an object, the schema says 'string'",
    },
  )
  # "refs" is reserved (a hand-written name): the compiled one is suffixed with its source
  chart = by_name["refs_toucan"].tools[0]  # its line spells the schema "input_schema"
  assert chart.input_schema["properties"]["points"]["items"]["required"] == ["x", "y"]
  assert by_name["acme_crm"].tools[0].http == {"method": "POST", "path": "/contacts"}


def test_read_tools_list_json(tmp_path):
  answer = {"tools": [{"name": "ping", "description": "Ping.", "inputSchema": {"type": "object"}}]}
  path = tmp_path / "my-server.json"
  path.write_text(json.dumps(answer))
  (spec,), stats = read_specs(path)
  assert (spec.name, spec.server, stats["tools"]) == ("my_server", "my-server", 1)
  assert spec.tools[0].input_schema == {"type": "object", "properties": {}}


def test_bad_spec_files_say_what_is_wrong(tmp_path):
  with pytest.raises(FileNotFoundError, match="no spec file"):
    read_specs(tmp_path / "nope.jsonl")
  bad = tmp_path / "bad.jsonl"
  bad.write_text('{"name": "x", "inputSchema": {}}\n')
  with pytest.raises(ValueError, match="has no 'server'"):
    read_specs(bad)
  bad.write_text("not json\n")
  with pytest.raises(ValueError, match=r"bad.jsonl:1: not JSON"):
    read_specs(bad)


@pytest.mark.parametrize(
  ("category", "server", "domain"),
  [
    ("CRM", "x", "sales_crm"),
    ("Weather", "x", "location_travel"),
    ("Cryptocurrency & Blockchain", "x", "finance"),
    ("Database Operations", "x", "data_analytics"),
    ("finance", "x", "finance"),  # the project's own names map to themselves
    (None, "zendesk-tickets", "support"),
    (None, "zzz", "productivity"),
  ],
)
def test_domains(category, server, domain):
  assert map_domain(category, server) == domain
  assert domain in DOMAINS


def test_external_effects_need_the_tools_own_words():
  assert (
    external_reason("navigate", "Navigate the browser to a URL.", "Browser Automation") == "browser"
  )
  assert (
    external_reason("run_command", "Execute a command in the shell.", None) == "operating system"
  )
  assert external_reason("get_weather", "Weather for a city.", "Web Search & Research") == ""
  # "search the web" outside a web-search category is a lookup over local state
  assert external_reason("search", "Search the web for pages.", "Productivity") == ""
  assert (
    external_reason("search", "Search the web for pages.", "Web Search & Research") == "web search"
  )


@pytest.mark.shared
@pytest.mark.slow
@pytest.mark.skipif(not CORPUS.exists(), reason="../shared/mcp_specs is absent")
def test_corpus_ingests_with_few_rejections():
  specs, stats = read_specs(CORPUS)
  assert stats["tool_lines"] == 7480 and stats["servers"] == 953
  assert stats["services"] >= 448 and stats["rejected_tools"] <= 20
  assert len({s.name for s in specs}) == len(specs)
  assert all(s.name.isidentifier() and "__" not in s.name for s in specs)
