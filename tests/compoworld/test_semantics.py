"""Compiled services do what their specs say, and the validator catches those that do not.

The spec is shaped like a public calendar server's (Klavis's Google Calendar tools): update
arguments named ``updated_<field>``, list arguments added and removed as ``<field>_to_add``, a
relation tool ``add_attendees_to_event`` and range bounds on a list.
"""

import dataclasses

import pytest

from compoworld.specs.compiler import compile_service
from compoworld.specs.ingest import McpTool, ServiceSpec
from compoworld.specs.naming import Target, targets
from compoworld.specs.validator import validate

_S, _EMAILS = {"type": "string"}, {"type": "array", "items": {"type": "string"}}


def _tool(name, properties, required=(), **extra):
  schema = {"type": "object", "properties": properties, "required": list(required)}
  return McpTool(name=name, input_schema=schema, **extra)


SPEC = ServiceSpec(
  name="calendar_like",
  source="test",
  server="calendar-like",
  domain="productivity",
  tools=(
    _tool(
      "create_event",
      {"summary": _S, "start_datetime": _S, "end_datetime": _S, "attendees": _EMAILS},
      ["summary", "start_datetime"],
    ),
    _tool("get_event", {"event_id": _S}, ["event_id"]),
    _tool(
      "list_events",
      {
        "summary": _S,
        "max_start_datetime": _S,
        "min_start_datetime": _S,
        "limit": {"type": "integer"},
      },
    ),
    _tool(
      "update_event",
      {
        "event_id": _S,
        "updated_summary": _S,
        "attendees_to_add": _EMAILS,
        "attendees_to_remove": _EMAILS,
      },
      ["event_id"],
    ),
    _tool(
      "add_attendees_to_event", {"event_id": _S, "attendees": _EMAILS}, ["event_id", "attendees"]
    ),
    _tool("delete_event", {"event_id": _S}, ["event_id"]),
    _tool("convert_currency", {"amount": {"type": "number"}, "to": _S}, ["amount", "to"]),
  ),
)


@pytest.fixture(scope="module")
def Calendar():
  return compile_service(SPEC)


def ok(svc, tool, args):
  out = svc.call(tool, args)
  assert out["ok"], out
  return out["data"]


def test_argument_names_read_as_fields_and_operations():
  assert targets("updated_summary", reads=False)[1] == Target("summary", "set")
  assert targets("newTitle", reads=False)[1] == Target("title", "set")
  assert targets("attendees_to_add", reads=False)[1] == Target("attendees", "add")
  assert targets("remove_labels", reads=False)[1] == Target("labels", "remove")
  assert targets("max_start_datetime", reads=True)[1] == Target("start_datetime", "max")
  assert targets("created_after", reads=True)[1] == Target("created", "min")
  assert targets("title", reads=True) == [Target("title", "set")]


def test_updates_write_the_field_their_argument_names(Calendar):
  event = Calendar.entities["event"]
  assert "updated_summary" not in event.fields and "attendees_to_add" not in event.fields
  svc = Calendar.create(seed=0)
  made = ok(svc, "create_event", {"summary": "Kickoff", "start_datetime": "2026-03-01T10:00:00"})
  ok(svc, "update_event", {"event_id": made["id"], "updated_summary": "Kickoff, moved"})
  got = ok(svc, "get_event", {"event_id": made["id"]})
  assert got["summary"] == "Kickoff, moved" and "updated_summary" not in got


def test_list_fields_gain_and_lose_items(Calendar):
  svc = Calendar.create(seed=0)
  made = ok(
    svc, "create_event", {"summary": "Sync", "start_datetime": "x", "attendees": ["a@x.io"]}
  )
  ok(svc, "add_attendees_to_event", {"event_id": made["id"], "attendees": ["b@x.io", "a@x.io"]})
  assert ok(svc, "get_event", {"event_id": made["id"]})["attendees"] == ["a@x.io", "b@x.io"]
  ok(svc, "update_event", {"event_id": made["id"], "attendees_to_remove": ["a@x.io"]})
  ok(svc, "update_event", {"event_id": made["id"], "attendees_to_add": ["c@x.io"]})
  assert ok(svc, "get_event", {"event_id": made["id"]})["attendees"] == ["b@x.io", "c@x.io"]
  # the relation tool changes the parent: no table of attendee records exists
  assert "attendees" not in svc.state.tables()
  missing = svc.call("add_attendees_to_event", {"event_id": "even_none", "attendees": ["d@x.io"]})
  assert missing["status"] == 404


def test_range_arguments_bound_their_field(Calendar):
  svc = Calendar.create(seed=0)
  for day in ("01", "10", "20"):
    ok(svc, "create_event", {"summary": f"Day {day}", "start_datetime": f"2030-01-{day}T09:00"})
  found = ok(
    svc,
    "list_events",
    {"min_start_datetime": "2030-01-05", "max_start_datetime": "2030-01-15", "summary": "Day"},
  )
  assert [e["summary"] for e in found["items"]] == ["Day 10"]


def test_what_no_formula_computes_is_labelled_simulated(Calendar):
  assert Calendar.statuses["convert_currency"]["status"] == "simulated"
  assert all(
    Calendar.statuses[t]["status"] == "deterministic"
    for t in Calendar.tools
    if t != "convert_currency"
  )
  svc = Calendar.create(seed=0)
  first = ok(svc, "convert_currency", {"amount": 100, "to": "EUR"})
  assert first["simulated"] is True and first == ok(
    svc, "convert_currency", {"amount": 100, "to": "EUR"}
  )


def test_a_correct_compilation_passes_the_property_checks(Calendar):
  deterministic = [t for t, s in Calendar.statuses.items() if s["status"] == "deterministic"]
  assert validate(Calendar, SPEC.tools, only=deterministic) == {}


def _mutant(plans):
  cls = compile_service(SPEC)
  cls.plans = {**cls.plans, **plans}
  return cls


def _check_of(cls, tool):
  failure = validate(cls, SPEC.tools, only=[tool]).get(tool)
  return failure and failure.check


def test_seeded_faults_are_quarantined(Calendar):
  plans = Calendar.plans
  # an update that writes its argument under the wrong field
  update = plans["update_event"]
  wrong_field = dataclasses.replace(update, fields=((("updated_summary",), "end_datetime"),))
  assert _check_of(_mutant({"update_event": wrong_field}), "update_event") == "update_fields"
  # ... or drops it (compiler-1 kept it in a field of its own name, which this record lacks)
  own_field = dataclasses.replace(update, fields=((("updated_summary",), "updated_summary"),))
  assert _check_of(_mutant({"update_event": own_field}), "update_event") == "update_get"
  # a list that ignores its filter
  lister = dataclasses.replace(plans["list_events"], fields=())
  assert _check_of(_mutant({"list_events": lister}), "list_events") == "list_filter"
  # a list that ignores its page size
  unpaged = dataclasses.replace(plans["list_events"], limit=None)
  assert _check_of(_mutant({"list_events": unpaged}), "list_events") == "list_page"
  # a relation tool that records nothing on the parent
  relate = dataclasses.replace(plans["add_attendees_to_event"], items=())
  assert _check_of(_mutant({"add_attendees_to_event": relate}), "add_attendees_to_event") == (
    "relation_add"
  )


def test_a_write_that_names_no_record_is_simulated_and_still_a_write():
  spec = SPEC.model_copy(
    update={"tools": (*SPEC.tools, _tool("update_settings", {"timezone": _S}, ["timezone"]))}
  )
  cls = compile_service(spec)
  assert cls.statuses["update_settings"] == {
    "status": "simulated",
    "reason": "it changes a record without naming it (no id argument)",
  }
  assert cls.tools["update_settings"].mutates
  assert "settings" not in cls.State.model_fields  # no table for a record nothing names


PAGED = ServiceSpec(
  name="paged_notes",
  source="test",
  server="paged-notes",
  domain="productivity",
  tools=(
    _tool("create_note", {"title": _S, "rank": {"type": "integer"}}, ["title"]),
    _tool(
      "list_notes",
      {
        "sort_by": _S,
        "direction": {"type": "string", "enum": ["asc", "desc"]},
        "page": {"type": "integer"},
        "per_page": {"type": "integer", "default": 2},
      },
    ),
  ),
)


def test_lists_honour_sort_and_page_arguments():
  svc = compile_service(PAGED).create(seed=0)
  for seeded in list(svc.state.notes):
    svc.state.notes.delete(seeded.id)
  for title, rank in (("b", 2), ("d", 4), ("a", 1), ("c", 3), ("e", 5)):
    ok(svc, "create_note", {"title": title, "rank": rank})

  def titles(**args):
    return [n["title"] for n in ok(svc, "list_notes", args)["items"]]

  assert titles(sort_by="rank", per_page=10) == ["a", "b", "c", "d", "e"]
  assert titles(sort_by="rank", direction="desc", per_page=10) == ["e", "d", "c", "b", "a"]
  assert titles(sort_by="-title", per_page=10) == ["e", "d", "c", "b", "a"]
  assert titles(sort_by="title:desc", page=2, per_page=2) == ["c", "b"]
  # the page size defaults to the schema's default; an unknown sort field keeps the order
  assert len(ok(svc, "list_notes", {"sort_by": "rank", "page": 1})["items"]) == 2
  assert titles(sort_by="nonsense", per_page=10) == ["b", "d", "a", "c", "e"]
