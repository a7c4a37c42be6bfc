"""The deterministic compiler: compiled services keep the runtime contract of hand-written ones."""

from datetime import datetime
from pathlib import Path

import pytest

from compoworld.compose.env import ComposedEnv
from compoworld.runtime.registry import registry
from compoworld.runtime.service import Service
from compoworld.specs.compiled import CompiledService
from compoworld.specs.compiler import compile_service, port_of
from compoworld.specs.ingest import read_specs

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="module")
def specs():
  found, _ = read_specs(DATA / "specs.jsonl", reserved=["refs"])
  return {s.name: s for s in found}


@pytest.fixture(scope="module")
def Notes(specs):
  return compile_service(specs["notes_server"])


def ok(svc, tool, args):
  out = svc.call(tool, args)
  assert out["ok"], out
  return out["data"]


def test_a_compiled_service_is_a_service_with_typed_tables(Notes):
  assert issubclass(Notes, CompiledService) and issubclass(Notes, Service)
  assert (Notes.name, Notes.domain) == ("notes_server", "productivity")
  assert sorted(Notes.State().tables()) == ["folders", "notes"]
  fields = Notes.State.model_fields["notes"].annotation.__args__[0].model_fields
  assert {"title", "body", "folder_id", "author_email", "status", "created_at"} <= set(fields)
  assert Notes.statuses["create_note"] == {"status": "deterministic", "reason": ""}


def test_generation_is_seeded_and_consistent(Notes):
  a, b, c = Notes.generate(0, None), Notes.generate(0, None), Notes.generate(1, None)
  assert a.content_hash() == b.content_hash() != c.content_hash()
  assert len(a.notes) == len(a.folders) == 4
  assert all(n.folder_id in a.folders for n in a.notes)  # references point at real records
  assert all("@" in n.author_email for n in a.notes)  # values fit the field's name and format


def test_create_then_get_round_trip(Notes):
  svc = Notes.create(seed=0)
  folder = next(iter(svc.state.folders)).id
  now = svc.state.now
  made = ok(svc, "create_note", {"title": "Plan", "folder_id": folder, "body": "Q3"})
  assert (made["title"], made["body"], made["folder_id"], made["status"]) == (
    "Plan",
    "Q3",
    folder,
    "open",
  )
  assert made["created_at"] == now.isoformat()
  assert ok(svc, "get_note", {"note_id": made["id"]}) == made
  assert made["id"] in [n["id"] for n in ok(svc, "list_notes", {"limit": 100})["items"]]


def test_bad_arguments_are_400s_naming_the_argument(Notes):
  svc = Notes.create(seed=0)
  before = svc.state_hash()
  out = svc.call("create_note", {"title": "x"})
  assert out["status"] == 400 and "missing required argument 'folder_id'" in out["error"]["message"]
  out = svc.call("create_note", {"title": "", "folder_id": "f"})
  assert out["status"] == 400 and "should be non-empty" in out["error"]["message"]
  out = svc.call("get_note", {"note_id": 7})
  assert out["status"] == 400 and "7 is not of type 'string'" in out["error"]["message"]
  out = svc.call("get_note", {"note_id": "n", "extra": 1})
  assert out["status"] == 400 and "unknown argument 'extra'" in out["error"]["message"]
  assert svc.state_hash() == before


def test_ids_must_exist(Notes):
  svc = Notes.create(seed=0)
  before = svc.state_hash()
  out = svc.call("create_note", {"title": "x", "folder_id": "fold_missing"})
  assert (out["status"], out["error"]["message"]) == (
    404,
    "folder 'fold_missing' not found (argument 'folder_id')",
  )
  out = svc.call("get_note", {"note_id": "note_missing"})
  assert out["status"] == 404 and "some existing ids: " in out["error"]["message"]
  assert svc.state_hash() == before


def test_search_filters_on_given_fields_and_text(Notes):
  svc = Notes.create(seed=3)
  folder = next(iter(svc.state.folders)).id
  expected = sorted(n.id for n in svc.state.notes if n.folder_id == folder)
  got = ok(svc, "list_notes", {"folder_id": folder})
  assert sorted(n["id"] for n in got["items"]) == expected and got["total"] == len(expected)
  ok(svc, "create_note", {"title": "Zanzibar offsite", "folder_id": folder})
  hits = ok(svc, "list_notes", {"query": "zanzibar"})
  assert [n["title"] for n in hits["items"]] == ["Zanzibar offsite"]
  assert len(ok(svc, "list_notes", {"limit": 2})["items"]) == 2


def test_update_delete_and_state_actions(Notes):
  svc = Notes.create(seed=0)
  note = next(iter(svc.state.notes)).id
  updated = ok(svc, "update_note", {"note_id": note, "title": "Renamed"})
  assert updated["title"] == "Renamed"
  assert datetime.fromisoformat(updated["updated_at"]) > svc.state.notes.get(note).created_at
  assert ok(svc, "archive_note", {"note_id": note})["status"] == "archived"
  assert ok(svc, "delete_note", {"note_id": note}) == {"deleted": True, "id": note}
  assert svc.call("get_note", {"note_id": note})["status"] == 404


def test_computed_reads_are_simulated_deterministic_and_read_only(Notes):
  # no formula in the spec computes a conversion: it is labelled simulated, never deterministic
  assert Notes.statuses["convert_markdown"]["status"] == "simulated"
  assert "formula" in Notes.statuses["convert_markdown"]["reason"]
  svc = Notes.create(seed=0)
  before = svc.state_hash()
  a = ok(svc, "convert_markdown", {"text": "# hi"})
  assert (
    a == ok(svc, "convert_markdown", {"text": "# hi"}) != ok(svc, "convert_markdown", {"text": "x"})
  )
  assert a["simulated"] is True and not Notes.tools["convert_markdown"].mutates
  assert svc.state_hash() == before


def test_external_tools_are_simulated_without_changing_state(specs):
  Browser = compile_service(specs["headless_browser"])
  assert Browser.statuses["navigate"] == {
    "status": "simulated",
    "reason": "external effect: browser",
  }
  assert Browser.statuses["get_weather"]["status"] == "deterministic"
  svc = Browser.create(seed=0)
  before = svc.fork()
  data = ok(svc, "navigate", {"url": "https://example.com"})
  assert data["simulated"] is True and "simulated" in data["note"]
  assert list(before.diff(svc)) == ["_scalars"]  # no record changed; the clock ticked (a write)
  assert isinstance(data["result"], str)  # no output schema to conform to: made up, and says so


def test_lookups_find_seeded_records_or_answer_consistently(specs):
  Browser = compile_service(specs["headless_browser"])
  svc = Browser.create(seed=0)
  seeded = next(iter(svc.state.weathers))
  assert ok(svc, "get_weather", {"city": seeded.city})["id"] == seeded.id
  first = ok(svc, "get_weather", {"city": "Atlantis"})
  assert first["city"] == "Atlantis" and first == ok(svc, "get_weather", {"city": "Atlantis"})


def test_integer_ids_and_nested_rest_arguments(specs):
  Crm = compile_service(specs["acme_crm"])
  svc = Crm.create(seed=0)
  made = ok(svc, "ACME_CRM__CREATE_CONTACT", {"body": {"email": "a@b.co", "amount": 12.5}})
  assert isinstance(made["id"], int) and made["email"] == "a@b.co"
  assert ok(svc, "ACME_CRM__GET_CONTACT", {"path": {"contact_id": made["id"]}}) == made
  out = svc.call("ACME_CRM__GET_CONTACT", {"path": {"contact_id": str(made["id"])}})
  assert out["status"] == 400  # the spec says integer
  out = svc.call("ACME_CRM__CREATE_CONTACT", {"body": {"first_name": "A"}})
  assert out["status"] == 400 and "'email' is a required property" in out["error"]["message"]


def test_resolved_refs_validate_nested_values(specs):
  Charts = compile_service(specs["refs_toucan"])
  svc = Charts.create(seed=0)
  assert ok(svc, "make_chart", {"points": [{"x": 1, "y": 2}], "style": None})["points"] == [
    {"x": 1, "y": 2}
  ]
  out = svc.call("make_chart", {"points": [{"x": 1}]})
  assert out["status"] == 400 and "'y' is a required property" in out["error"]["message"]


def test_records_holding_json_cannot_be_changed_in_place(specs):
  Charts = compile_service(specs["refs_toucan"])
  svc = Charts.create(seed=0)
  made = ok(svc, "make_chart", {"points": [{"x": 1, "y": 2}]})
  record = svc.state.charts.get(made["id"])
  with pytest.raises(TypeError, match="immutable"):
    record.points[0]["x"] = 5


@pytest.mark.parametrize(
  ("key", "schema", "port"),
  [
    ("author_email", {"type": "string"}, "person.email"),
    ("amount", {"type": "number"}, "money"),
    ("unit_price", {"type": "number"}, "money"),
    ("due_date", {"type": "string"}, "date"),
    ("created_at", {"type": "string"}, "datetime"),
    ("folder_id", {"type": "string"}, "folder.id"),
    ("first_name", {"type": "string"}, "person.name"),
    ("company_name", {"type": "string"}, "company.name"),
    ("website", {"type": "string"}, "url"),
    ("flag", {"type": "boolean"}, None),
  ],
)
def test_ports_from_names(key, schema, port):
  assert port_of(key, schema, "contact") == port


def test_tools_carry_ports(Notes, specs):
  assert {"person.email", "folder.id", "title"} <= set(Notes.tools["create_note"].consumes)
  assert {"note.id", "title", "person.email"} <= set(Notes.tools["get_note"].produces)
  Crm = compile_service(specs["acme_crm"])
  assert "money" in Crm.tools["ACME_CRM__CREATE_CONTACT"].consumes


def test_compiled_and_hand_written_services_compose(Notes):
  env = ComposedEnv(
    {"notes_server": Notes.create(seed=0), "calendar": registry.get("calendar").create(seed=0)},
    seed=0,
  )
  names = {s["name"] for s in env.list_services()["data"]}
  assert names == {"notes_server", "calendar"}
  described = env.describe_tool("notes_server", "get_note")["data"]
  assert described["input_schema"]["required"] == ["note_id"]
  twin = env.fork()
  folder = next(iter(twin.services["notes_server"].state.folders)).id
  out = twin.call("notes_server__create_note", {"title": "T", "folder_id": folder})
  assert out["ok"]
  assert list(env.diff(twin)) == ["notes_server"] and env.state_hash() != twin.state_hash()
  assert any(t["function"]["name"] == "notes_server__list_notes" for t in env.tool_schemas())
