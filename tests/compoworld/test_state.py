"""Typed state: frozen records, copy-on-write tables, fork, content hash, diff and ids."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Literal

import pydantic
import pytest

from compoworld import Conflict, NotFound, Record, ServiceState, Table, Unprocessable
from compoworld.runtime.envelope import InvalidArgument
from compoworld.runtime.state import supplied


class Note(Record):
  title: str
  words: int = 0
  tags: tuple[str, ...] = ()
  due: datetime | None = None


class Label(Record):
  color: Literal["red", "green", "blue"] = "red"


class NotesState(ServiceState):
  notes: Table[Note]
  labels: Table[Label]
  owner: str = "ava@example.com"


def make_state(seed: int = 0, n: int = 3) -> NotesState:
  s = NotesState(seed=seed, notes={}, labels={})
  for i in range(n):
    s.notes.insert(Note(id=s.new_id("note"), title=f"Note {i}", words=10 * i))
  s.labels.insert(Label(id="urgent"))
  return s


def note_ids(s: NotesState) -> list[str]:
  return s.notes.ids()


# --- records -------------------------------------------------------------------------------


def test_record_is_frozen():
  n = Note(id="n1", title="a")
  with pytest.raises(pydantic.ValidationError) as err:
    n.title = "b"
  assert err.value.errors()[0]["type"] == "frozen_instance"
  assert n.title == "a"


def test_record_forbids_extra_fields():
  with pytest.raises(pydantic.ValidationError) as err:
    Note(id="n1", title="a", colour="red")
  assert [e["type"] for e in err.value.errors()] == ["extra_forbidden"]
  assert err.value.errors()[0]["loc"] == ("colour",)


def test_record_validates_field_types():
  with pytest.raises(pydantic.ValidationError):
    Note(id="n1", title="a", words="many")
  with pytest.raises(pydantic.ValidationError):
    Label(id="l", color="purple")


@pytest.mark.parametrize(
  "annotation",
  [list[str], dict[str, int], set[str], frozenset[str], list[str] | None, tuple[list[int], ...]],
  ids=["list", "dict", "set", "frozenset", "optional-list", "tuple-of-list"],
)
def test_record_with_mutable_container_is_rejected_at_class_creation(annotation):
  with pytest.raises(TypeError, match=r"BadRecord\.xs: records are immutable; use tuple"):
    pydantic.create_model("BadRecord", __base__=Record, xs=(annotation, ...))


def test_record_with_tuples_and_nested_records_is_accepted():
  Ok = pydantic.create_model(
    "OkRecord", __base__=Record, xs=(tuple[str, ...], ()), labels=(tuple[Label, ...], ())
  )
  rec = Ok(id="o", xs=["a", "b"], labels=[{"id": "l1"}])
  assert rec.xs == ("a", "b") and rec.labels == (Label(id="l1"),)


def test_with_changes_returns_a_validated_copy():
  n = Note(id="n1", title="a", words=3)
  m = n.with_changes(words="7")
  assert m.words == 7 and m.title == "a" and m.id == "n1"
  assert n.words == 3, "the original record must not change"
  with pytest.raises(pydantic.ValidationError):
    n.with_changes(words="lots")
  with pytest.raises(Unprocessable, match="colour"):
    n.with_changes(colour="red")


# --- service state -------------------------------------------------------------------------


class MutableModel(pydantic.BaseModel):
  x: int = 0


@pytest.mark.parametrize(
  "annotation",
  [list[str], dict[str, str], set[int], list[int] | None, Table[Label] | None, MutableModel],
  ids=str,
)
def test_state_with_mutable_non_table_field_is_rejected(annotation):
  with pytest.raises(TypeError, match=r"BadState\.extra: state fields must be tables"):
    pydantic.create_model("BadState", __base__=ServiceState, extra=(annotation, None))


def test_table_of_a_non_record_is_rejected():
  with pytest.raises(TypeError, match="Table"):
    pydantic.create_model("BadTableState", __base__=ServiceState, xs=(Table[int], ...))


def test_state_knows_its_tables():
  s = make_state()
  assert NotesState._table_fields == ("notes", "labels")
  assert set(s.tables()) == {"notes", "labels"}
  assert s.table("notes") is s.notes
  with pytest.raises(NotFound) as err:
    s.table("todos")
  assert "todos" in err.value.message and "notes, labels" in err.value.message
  assert s.scalars() == {
    "seed": 0,
    "now": "2026-03-02T09:00:00",
    "id_seq": 3,
    "owner": "ava@example.com",
  }


def test_empty_state_has_every_table_empty_and_takes_other_fields():
  s = NotesState.empty(7, owner="ben@example.com")
  twin = NotesState(seed=7, notes={}, labels={}, owner="ben@example.com")
  assert s.content_hash() == twin.content_hash()
  assert [len(t) for t in s.tables().values()] == [0, 0]


def test_state_scalars_are_validated_on_assignment():
  s = make_state()
  with pytest.raises(pydantic.ValidationError):
    s.id_seq = "many"
  assert s.id_seq == 3


# --- table reads and writes ----------------------------------------------------------------


def test_table_insert_get_update_delete():
  t = Table(Note)
  assert len(t) == 0 and t.ids() == []
  a = t.insert(Note(id="a", title="Alpha", words=1))
  t.insert(Note(id="b", title="Beta", words=2))
  assert t.get("a") is a and t.find("a") is a and t.find("zz") is None
  assert "a" in t and "zz" not in t and len(t) == 2
  assert t.ids() == ["a", "b"] and [r.id for r in t] == ["a", "b"]
  assert [r.id for r in t.filter(lambda r: r.words > 1)] == ["b"]

  new = t.update("a", title="Alpha 2", words="5")
  assert new == Note(id="a", title="Alpha 2", words=5)
  assert t.get("a") is new and a.title == "Alpha", "update must replace, not mutate"

  gone = t.delete("b")
  assert gone.id == "b" and t.ids() == ["a"]


def test_table_get_missing_is_not_found_naming_the_id():
  t = Table(Note)
  with pytest.raises(NotFound, match="note 'note_404' not found") as err:
    t.get("note_404")
  assert err.value.status == 404 and err.value.envelope()["error"]["type"] == "not_found"
  with pytest.raises(NotFound):
    t.get(["unhashable"])
  with pytest.raises(NotFound, match="note_404"):
    t.update("note_404", title="x")
  with pytest.raises(NotFound, match="note_404"):
    t.delete("note_404")


def test_table_check_passes_none_and_known_ids_and_refuses_unknown_ones():
  t = Table(Note)
  t.insert(Note(id="note_1", title="a"))
  t.check(None)
  t.check("note_1")
  with pytest.raises(NotFound, match="note 'note_404' not found"):
    t.check("note_404")


def test_table_find_by_and_get_by_take_the_first_record_with_those_fields():
  t = Table(Note)
  t.insert(Note(id="a", title="Alpha", words=3))
  t.insert(Note(id="b", title="Beta", words=3))
  assert t.find_by(words=3).id == "a"
  assert t.find_by(title="Beta", words=3).id == "b"
  assert t.find_by(title="Gamma") is None
  assert t.get_by("no such note", title="Beta").id == "b"
  with pytest.raises(NotFound, match="no such note"):
    t.get_by("no such note", title="Gamma")


def test_supplied_keeps_the_given_fields_and_refuses_none_given():
  assert supplied("update_note", {"title": "x", "words": None}) == {"title": "x"}
  with pytest.raises(InvalidArgument, match="update_note: supply at least one field to change"):
    supplied("update_note", {"title": None, "words": None})
  with pytest.raises(InvalidArgument, match="update_note: supply at least one of a, b or c"):
    supplied("update_note", {"a": None, "b": None, "c": None}, name_fields=True)


def test_table_duplicate_insert_is_conflict_and_changes_nothing():
  t = Table(Note)
  first = t.insert(Note(id="a", title="Alpha"))
  with pytest.raises(Conflict, match="note 'a' already exists") as err:
    t.insert(Note(id="a", title="Other"))
  assert err.value.status == 409
  assert t.get("a") is first and len(t) == 1


def test_table_insert_of_the_wrong_record_type_is_type_error():
  t = Table(Note)
  with pytest.raises(TypeError, match="expected Note, got Label"):
    t.insert(Label(id="a"))
  assert len(t) == 0


def test_table_update_validates_types_and_keeps_the_old_record():
  t = Table(Note)
  old = t.insert(Note(id="a", title="Alpha", words=1))
  with pytest.raises(pydantic.ValidationError) as err:
    t.update("a", words="plenty")
  assert err.value.errors()[0]["loc"] == ("words",)
  with pytest.raises(pydantic.ValidationError):
    t.update("a", tags=5)
  with pytest.raises(Unprocessable, match="colour"):
    t.update("a", colour="red")
  assert t.get("a") is old


def test_table_update_cannot_change_the_id():
  t = Table(Note)
  t.insert(Note(id="a", title="Alpha"))
  with pytest.raises(Unprocessable, match="id cannot be changed") as err:
    t.update("a", id="b")
  assert err.value.status == 422
  assert t.ids() == ["a"]
  assert t.update("a", id="a", title="same id is fine").title == "same id is fine"


# --- fork ----------------------------------------------------------------------------------


def test_fork_shares_rows_until_a_write():
  s = make_state()
  f = s.fork()
  assert f is not s
  for name in ("notes", "labels"):
    assert f.table(name) is not s.table(name)
    assert f.table(name)._rows is s.table(name)._rows
  assert f.content_hash() == s.content_hash()
  f.notes.update(note_ids(s)[0], title="changed")
  assert f.notes._rows is not s.notes._rows
  assert f.labels._rows is s.labels._rows, "an untouched table stays shared"


def test_write_to_fork_does_not_show_in_parent():
  s = make_state()
  before_json, before_hash = s.model_dump_json(), s.content_hash()
  first, second = note_ids(s)[:2]
  f = s.fork()
  f.notes.update(first, title="fork title")
  f.notes.delete(second)
  f.notes.insert(Note(id=f.new_id("note"), title="fork only"))
  f.labels.update("urgent", color="blue")
  f.advance(timedelta(hours=1))
  f.owner = "someone@else.com"
  assert s.model_dump_json() == before_json and s.content_hash() == before_hash
  assert s.notes.get(first).title == "Note 0" and second in s.notes
  assert s.labels.get("urgent").color == "red"
  assert s.id_seq == 3 and s.now == datetime(2026, 3, 2, 9, 0) and s.owner == "ava@example.com"
  assert len(f.notes) == 3 and f.id_seq == 4 and f.notes.get(first).title == "fork title"


def test_write_to_parent_does_not_show_in_fork():
  s = make_state()
  f = s.fork()
  fork_json, fork_hash = f.model_dump_json(), f.content_hash()
  first = note_ids(s)[0]
  s.notes.update(first, words=999)
  s.notes.insert(Note(id="late", title="parent only"))
  s.labels.delete("urgent")
  s.new_id("note")
  assert f.model_dump_json() == fork_json and f.content_hash() == fork_hash
  assert f.notes.get(first).words == 0 and "late" not in f.notes and "urgent" in f.labels


def test_sibling_forks_and_forks_of_forks_are_independent():
  s = make_state()
  a, b = s.fork(), s.fork()
  aa = a.fork()
  first = note_ids(s)[0]
  a.notes.update(first, title="A")
  b.notes.update(first, title="B")
  aa.notes.delete(first)
  assert [x.notes.find(first) and x.notes.get(first).title for x in (s, a, b, aa)] == [
    "Note 0",
    "A",
    "B",
    None,
  ]
  assert len({x.content_hash() for x in (s, a, b, aa)}) == 4


def test_table_fork_keeps_the_digest_cache():
  t = Table(Note)
  t.insert(Note(id="a", title="A"))
  d = t.digest()
  f = t.fork()
  assert f._digest == d and f.digest() == d
  f.insert(Note(id="b", title="B"))
  assert f.digest() != d and t.digest() == d and t._digest == d


# --- content hash --------------------------------------------------------------------------


def test_hash_ignores_insertion_order():
  rows = [Note(id=f"n{i}", title=f"t{i}", words=i) for i in range(5)]
  a = NotesState(notes={}, labels={})
  b = NotesState(notes={}, labels={})
  for r in rows:
    a.notes.insert(r)
  for r in reversed(rows):
    b.notes.insert(r)
  assert a.notes.ids() != b.notes.ids()
  assert a.content_hash() == b.content_hash()
  assert a.diff(b) == {}


def test_equal_content_in_different_state_objects_hashes_equal():
  assert make_state(seed=4).content_hash() == make_state(seed=4).content_hash()
  assert make_state(seed=4).content_hash() != make_state(seed=5).content_hash()


CHANGES = {
  "title": lambda s: s.notes.update(note_ids(s)[0], title="Other"),
  "words": lambda s: s.notes.update(note_ids(s)[0], words=1),
  "tags": lambda s: s.notes.update(note_ids(s)[0], tags=("x",)),
  "due": lambda s: s.notes.update(note_ids(s)[0], due=datetime(2026, 4, 1)),
  "label color": lambda s: s.labels.update("urgent", color="green"),
  "insert": lambda s: s.notes.insert(Note(id="extra", title="Extra")),
  "delete": lambda s: s.notes.delete(note_ids(s)[-1]),
  "empty table": lambda s: s.labels.delete("urgent"),
  "now": lambda s: s.advance(timedelta(seconds=1)),
  "id_seq": lambda s: s.new_id("x"),
  "seed": lambda s: setattr(s, "seed", 9),
  "owner": lambda s: setattr(s, "owner", "b@example.com"),
}


@pytest.mark.parametrize("change", list(CHANGES), ids=list(CHANGES))
def test_hash_changes_after_any_change(change):
  s = make_state()
  h0 = s.content_hash()
  # Warm the caches: the write must invalidate them.
  s.notes.digest()
  s.labels.digest()
  CHANGES[change](s)
  assert s.content_hash() != h0
  assert s.content_hash() != make_state().content_hash()


def test_hash_returns_when_the_content_returns():
  s = make_state()
  h0, first = s.content_hash(), note_ids(s)[0]
  s.notes.update(first, title="Other")
  assert s.content_hash() != h0
  s.notes.update(first, title="Note 0")
  assert s.content_hash() == h0


def test_digest_cache_is_invalidated_on_every_write():
  t = Table(Note)
  t.insert(Note(id="a", title="A"))
  digests = [t.digest()]
  assert t._digest == digests[0]
  for write in (
    lambda: t.insert(Note(id="b", title="B")),
    lambda: t.update("b", words=3),
    lambda: t.delete("a"),
  ):
    write()
    assert t._digest is None
    digests.append(t.digest())
  assert len(set(digests)) == 4
  assert re.fullmatch(r"[0-9a-f]{32}", digests[0])


def test_hash_depends_on_the_state_class():
  Other = pydantic.create_model("OtherNotesState", __base__=NotesState)
  a = NotesState(notes={}, labels={})
  b = Other(notes={}, labels={})
  assert a.content_hash() != b.content_hash()


# --- diff ----------------------------------------------------------------------------------


def test_diff_of_equal_states_is_empty():
  s = make_state()
  assert s.diff(s) == {}
  assert s.diff(s.fork()) == {}
  assert s.diff(make_state()) == {}
  assert Table(Note).diff(Table(Note)) == {}


def test_diff_reports_added_updated_removed_and_scalars():
  s = make_state()
  first, second, third = note_ids(s)
  f = s.fork()
  f.notes.update(first, title="New title", words=11, due=datetime(2026, 4, 1, 12, 0))
  f.notes.delete(second)
  new = f.notes.insert(Note(id=f.new_id("note"), title="Added"))
  f.advance(timedelta(minutes=5))
  assert s.diff(f) == {
    "notes": {
      "added": [new.id],
      "updated": [
        {
          "id": first,
          "fields": {
            "title": ["Note 0", "New title"],
            "words": [0, 11],
            "due": [None, "2026-04-01T12:00:00"],
          },
        }
      ],
      "removed": [second],
    },
    "_scalars": {"now": ["2026-03-02T09:00:00", "2026-03-02T09:05:00"], "id_seq": [3, 4]},
  }
  back = f.diff(s)
  assert back["notes"]["added"] == [second] and back["notes"]["removed"] == [new.id]
  assert back["notes"]["updated"][0]["fields"]["title"] == ["New title", "Note 0"]
  assert third not in str(s.diff(f)), "an untouched record must not appear"


def test_diff_of_tuple_of_records_is_json():
  Holder = pydantic.create_model("Holder", __base__=Record, labels=(tuple[Label, ...], ()))
  a = Table(Holder, {"h": Holder(id="h", labels=(Label(id="x"),))})
  b = a.fork()
  b.update("h", labels=(Label(id="x", color="blue"),))
  assert a.diff(b) == {
    "updated": [
      {
        "id": "h",
        "fields": {"labels": [[{"id": "x", "color": "red"}], [{"id": "x", "color": "blue"}]]},
      }
    ]
  }


def test_diff_ignores_a_rewrite_with_equal_content():
  s = make_state()
  f = s.fork()
  first = note_ids(s)[0]
  f.notes.update(first, title="Note 0")  # same value: a new object, equal content
  assert f.notes._rows is not s.notes._rows
  assert s.diff(f) == {}


# --- serialization -------------------------------------------------------------------------


def test_model_dump_validate_round_trip_keeps_the_hash():
  s = make_state(seed=7)
  s.notes.update(note_ids(s)[0], tags=("a", "b"), due=datetime(2026, 5, 1))
  s.advance(timedelta(minutes=3))
  again = NotesState.model_validate(s.model_dump())
  assert again.content_hash() == s.content_hash() and s.diff(again) == {}
  assert isinstance(again.notes, Table) and again.notes is not s.notes
  from_json = NotesState.model_validate_json(s.model_dump_json())
  assert from_json.content_hash() == s.content_hash()
  assert from_json.notes.get(note_ids(s)[0]).tags == ("a", "b")
  dumped = s.model_dump(mode="json")
  assert set(dumped["notes"]) == set(note_ids(s)) and dumped["labels"]["urgent"]["color"] == "red"


def test_tables_validate_from_a_list_and_check_row_keys():
  s = NotesState(notes=[{"id": "a", "title": "A"}, Note(id="b", title="B")], labels={})
  assert s.notes.ids() == ["a", "b"] and s.notes.get("a") == Note(id="a", title="A")
  with pytest.raises(pydantic.ValidationError, match="differs from its record id"):
    NotesState(notes={"a": {"id": "b", "title": "B"}}, labels={})
  with pytest.raises(pydantic.ValidationError):
    NotesState(notes={"a": {"id": "a"}}, labels={})  # title missing
  with pytest.raises(pydantic.ValidationError, match="table of Note"):
    NotesState(notes=Table(Label), labels={})


# --- ids -----------------------------------------------------------------------------------


def test_new_id_is_deterministic_per_seed_and_unique():
  def ids(seed: int, n: int = 500) -> list[str]:
    s = NotesState(seed=seed, notes={}, labels={})
    return [s.new_id("evt") for _ in range(n)]

  a = ids(1)
  assert a == ids(1)
  assert len(set(a)) == len(a)
  assert all(re.fullmatch(r"evt_[0-9a-f]{8}", i) for i in a)
  assert set(a).isdisjoint(ids(2))
  s = NotesState(notes={}, labels={})
  assert s.new_id("a") != s.new_id("a") and s.id_seq == 2
  assert NotesState(notes={}, labels={}).new_id("a").startswith("a_")
