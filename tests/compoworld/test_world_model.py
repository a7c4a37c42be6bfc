"""The world model through the real ``openai`` client, with recorded answers on the transport."""

import json
from pathlib import Path

import pytest

from compoworld.specs.compiler import compile_service
from compoworld.specs.ingest import read_specs
from compoworld.specs.world_model import (
  FALLBACK,
  LLMWorldModel,
  PatchError,
  check_patch,
  make_world_model,
)
from tests.compoworld.recorded import Recorded, client_for

DATA = Path(__file__).parent / "data"


@pytest.fixture
def Notes():
  """Notes with create_note quarantined: it is served by the world model."""
  specs, _ = read_specs(DATA / "specs.jsonl")
  spec = next(s for s in specs if s.name == "notes_server")
  return compile_service(spec, {"create_note": "create_get: expected ..."})


def test_quarantined_tools_are_simulated_offline_by_default(Notes):
  assert Notes.statuses["create_note"] == {
    "status": "quarantined",
    "reason": "create_get: expected ...",
  }
  svc = Notes.create(seed=0)
  before = svc.fork()
  folder = next(iter(svc.state.folders)).id
  out = svc.call("create_note", {"title": "T", "folder_id": folder})
  assert out["ok"] and out["data"]["simulated"] is True
  # the offline simulator stores the typed record the arguments describe
  note = out["data"]["result"]
  assert note["title"] == "T" and note["folder_id"] == folder
  assert list(before.diff(svc)) == ["notes", "_scalars"]
  assert svc.call("get_note", {"note_id": note["id"]})["data"]["title"] == "T"
  # the same call on the same state gets the same answer
  assert before.fork().call("create_note", {"title": "T", "folder_id": folder}) == out


def _insert(note_id="note_new", title="From the model", **extra):
  record = {"id": note_id, "title": title, "folder_id": "fold_x", "status": "open", **extra}
  return json.dumps({"patch": {"notes": {"insert": [record]}}, "observation": {"id": note_id}})


def test_a_valid_patch_is_applied_and_cached(Notes, tmp_path):
  recorded = Recorded([_insert()])
  Notes.world_model = LLMWorldModel(client_for(recorded), "m", tmp_path)
  svc = Notes.create(seed=0)
  twin = svc.fork()
  out = svc.call("create_note", {"title": "From the model", "folder_id": "fold_x"})
  assert out == {"ok": True, "status": 200, "data": {"id": "note_new"}}
  assert svc.state.notes.get("note_new").title == "From the model"
  prompt = json.loads(recorded.requests[0]["messages"][1]["content"])
  assert prompt["call"] == {"title": "From the model", "folder_id": "fold_x"}
  assert prompt["state"]["notes"]["count"] == 4 and not prompt["tool"]["read_only"]
  # the same call on the same state replays from the disk cache: no second request
  assert twin.call("create_note", {"title": "From the model", "folder_id": "fold_x"}) == out
  assert len(recorded.requests) == 1 and twin.state_hash() == svc.state_hash()


def test_an_invalid_patch_is_retried_then_answered_with_an_error(Notes, tmp_path):
  bad_field = _insert(colour="red")  # no such field on a note
  bad_json = "I think the note was created."
  recorded = Recorded([bad_field, bad_json, bad_field])
  Notes.world_model = LLMWorldModel(client_for(recorded), "m", tmp_path, max_attempts=3)
  svc = Notes.create(seed=0)
  before = svc.state_hash()
  out = svc.call("create_note", {"title": "T", "folder_id": "f"})
  assert out["status"] == 500 and out["error"]["type"] == "world_model_error"
  assert "no valid answer in 3 attempts" in out["error"]["message"]
  assert svc.state_hash() == before  # the typed state is untouched
  feedback = recorded.requests[1]["messages"][-1]["content"]
  assert "colour" in feedback and "Extra inputs are not permitted" in feedback


def test_a_retry_that_fixes_the_patch_is_accepted(Notes, tmp_path):
  recorded = Recorded([_insert(colour="red"), _insert()])
  Notes.world_model = LLMWorldModel(client_for(recorded), "m", tmp_path)
  svc = Notes.create(seed=0)
  assert svc.call("create_note", {"title": "T", "folder_id": "f"})["ok"]
  assert "note_new" in svc.state.notes and len(recorded.requests) == 2


def test_the_model_can_answer_an_error(Notes, tmp_path):
  answer = json.dumps({"patch": {}, "error": {"status": 404, "message": "folder 'f' not found"}})
  Notes.world_model = LLMWorldModel(client_for(Recorded([answer])), "m", tmp_path)
  out = Notes.create(seed=0).call("create_note", {"title": "T", "folder_id": "f"})
  assert (out["status"], out["error"]["message"]) == (404, "folder 'f' not found")


def test_check_patch_validates_before_writing(Notes):
  state = Notes.generate(0, None)
  note = next(iter(state.notes)).id
  ops = check_patch(
    state, {"notes": {"update": [{"id": note, "fields": {"title": "X"}}], "delete": [note]}}, True
  )
  assert [op for op, _, _ in ops] == ["update", "delete"]
  for patch, message in [
    ({"tasks": {}}, "no collection 'tasks'"),
    ({"notes": {"update": [{"id": "nope", "fields": {}}]}}, "no record 'nope'"),
    ({"notes": {"update": [{"id": note, "fields": {"id": "x"}}]}}, "cannot change the id"),
    ({"notes": {"delete": ["nope"]}}, "no record 'nope'"),
    ({"notes": {"insert": [{"id": note, "title": "dup"}]}}, "already exists"),
  ]:
    with pytest.raises(PatchError, match=message):
      check_patch(state, patch, True)
  with pytest.raises(PatchError, match="read-only"):
    check_patch(state, {"notes": {"delete": [note]}}, False)


def test_make_world_model_needs_an_endpoint(monkeypatch, tmp_path):
  monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
  assert make_world_model() is FALLBACK
  with pytest.raises(ValueError, match="no model"):
    monkeypatch.delenv("COMPOWORLD_WORLD_MODEL", raising=False)
    make_world_model(base_url="http://x.test/v1")
  wm = make_world_model(base_url="http://x.test/v1", model="m", cache_dir=tmp_path)
  assert isinstance(wm, LLMWorldModel) and wm.model == "m"
