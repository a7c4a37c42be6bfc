"""The adversarial validator: clean services pass, each kind of broken tool is caught."""

import dataclasses
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from compoworld.runtime.envelope import NotFound
from compoworld.runtime.registry import registry
from compoworld.serve.mcp_export import mcp_tools
from compoworld.specs.compiler import compile_service
from compoworld.specs.ingest import read_specs
from compoworld.specs.jsonschema_args import args_model
from compoworld.specs.schema_values import is_valid
from compoworld.specs.validator import validate

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="module")
def spec():
  specs, _ = read_specs(DATA / "specs.jsonl")
  return next(s for s in specs if s.name == "notes_server")


def broken(spec, tool, **changes):
  """A fresh compiled class with one tool's ToolSpec replaced (the rest stays correct)."""
  cls = compile_service(spec)
  cls.tools = dict(cls.tools)
  cls.tools[tool] = dataclasses.replace(cls.tools[tool], **changes)
  return cls


def test_a_correct_compiled_service_passes(spec):
  compiled = compile_service(spec)
  deterministic = [t for t, s in compiled.statuses.items() if s["status"] == "deterministic"]
  assert validate(compiled, spec.tools, only=deterministic) == {}  # as the library build runs it


class _Anything(BaseModel):
  model_config = ConfigDict(extra="allow")


def _forgetful_create(self, **values):
  record = next(iter(self.state.notes))  # answers with an old record, stores nothing
  return record.model_dump(mode="json")


def _swallowing_delete(self, **values):
  return {"deleted": self.state.notes.get(values["a0"]).id}  # a 404 when missing, but no delete


def _stale_update(self, **values):  # update_note's properties: body (a0), note_id (a1), title
  return self.state.notes.get(values["a1"]).model_dump(mode="json")


def _lenient_get(self, **values):
  record = self.state.notes.find(values["a0"]) or next(iter(self.state.notes))
  return record.model_dump(mode="json")


def _crashing(self, **values):
  return 1 / 0


def _writing_read(self, **values):
  self.state.notes.delete(values["a0"])
  return {}


def _short_list(self, **values):
  return {"items": [r.model_dump(mode="json") for r in list(self.state.notes)[:1]]}


@pytest.mark.parametrize(
  ("tool", "changes", "check"),
  [
    ("create_note", {"method": _forgetful_create}, "create_get"),
    ("delete_note", {"method": _swallowing_delete}, "delete_get"),
    ("update_note", {"method": _stale_update}, "update_get"),
    ("get_note", {"method": _lenient_get}, "unknown_id"),
    ("list_notes", {"method": _short_list}, "list_after_create"),
    ("convert_markdown", {"method": _crashing}, "no_raise"),
    ("get_note", {"method": _writing_read, "mutates": True}, "read_only"),
    ("get_note", {"args_model": _Anything}, "missing_required"),
  ],
)
def test_each_kind_of_broken_tool_is_caught(spec, tool, changes, check):
  cls = broken(spec, tool, **changes)
  failures = validate(cls, spec.tools)
  assert list(failures) == [tool]
  failure = failures[tool]
  assert failure.check == check
  assert failure.reason().startswith(f"{check}: expected ")


def test_a_failure_records_a_case_that_replays(spec):
  cls = broken(spec, "convert_markdown", method=_crashing)
  failure = validate(cls, spec.tools)["convert_markdown"]
  replay = cls.create(seed=0).call("convert_markdown", failure.arguments)
  assert replay["status"] == 500 and "ZeroDivisionError" in replay["error"]["message"]


def test_a_wrong_type_accepted_is_caught():
  specs, _ = read_specs(DATA / "specs.jsonl")
  crm = next(s for s in specs if s.name == "acme_crm")

  class Loose(BaseModel):  # accepts any JSON under "path": the spec says an object of integers
    model_config = ConfigDict(extra="forbid")
    a0: object = Field(alias="path")

  def get(self, **values):
    raise NotFound("nothing here")

  cls = broken(crm, "ACME_CRM__GET_CONTACT", args_model=Loose, method=get)
  failure = validate(cls, crm.tools)["ACME_CRM__GET_CONTACT"]
  assert failure.check in ("wrong_type", "boundary") and "status 400" in failure.expected


@pytest.mark.slow
@pytest.mark.parametrize("name", registry.names())
def test_exported_hand_written_services_compile_back_and_pass(name, tmp_path):
  from compoworld.serve.mcp_export import export_corpus

  original = registry.get(name)
  export_corpus([original], tmp_path / "one.jsonl")
  (spec,), _ = read_specs(tmp_path / "one.jsonl", reserved=[name])
  assert [t.name for t in spec.tools] == list(original.tools)
  compiled = compile_service(spec)
  deterministic = [t for t, s in compiled.statuses.items() if s["status"] == "deterministic"]
  assert validate(compiled, spec.tools, only=deterministic) == {}  # as the library build runs it
  assert validate(original, mcp_tools(original)) == {}  # the hand-written originals pass too


_SCHEMA = {
  "type": "object",
  "properties": {
    "name": {"type": "string", "minLength": 1},
    "count": {"type": "integer", "minimum": 0},
    "tags": {"type": "array", "items": {"type": "string"}},
    "mode": {"enum": ["a", "b"]},
    "opt": {"anyOf": [{"type": "number"}, {"type": "null"}]},
  },
  "required": ["name"],
  "additionalProperties": False,
}
_MODEL, _ = args_model("prop", _SCHEMA)
_json = st.recursive(
  st.none() | st.booleans() | st.integers(-5, 5) | st.floats(allow_nan=False) | st.text(max_size=3),
  lambda inner: (
    st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=2), inner, max_size=2)
  ),
  max_leaves=6,
)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.dictionaries(st.sampled_from([*_SCHEMA["properties"], "other"]), _json, max_size=5))
def test_args_model_accepts_exactly_what_the_schema_accepts(arguments):
  try:
    _MODEL.model_validate(arguments)
    accepted = True
  except ValidationError:
    accepted = False
  assert accepted == is_valid(arguments, _SCHEMA)
