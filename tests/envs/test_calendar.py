import pytest

from envs.calendar import CalendarService
from tests.contract import call_fails, call_ok


@pytest.fixture
def cal():
  return CalendarService.create(seed=3)


def first_event(cal):
  return call_ok(cal, "list_events", {"limit": 1})["items"][0]


def test_seeded_data_is_sized():
  assert len(CalendarService.create(seed=5, size=200).state.events) == 200


def test_list_events_filters_and_pages(cal):
  page = call_ok(cal, "list_events", {"limit": 5})
  assert page["total"] == 30 and len(page["items"]) == 5 and page["next_offset"] == 5
  starts = [e["start"] for e in page["items"]]
  assert starts == sorted(starts)
  who = page["items"][0]["attendees"][0]["id"]
  mine = call_ok(cal, "list_events", {"attendee": who, "limit": 100})["items"]
  assert mine and all(any(a["id"] == who for a in e["attendees"]) for e in mine)
  later = call_ok(cal, "list_events", {"start_after": "2026-03-20T00:00:00", "limit": 100})
  assert all(e["start"] >= "2026-03-20" for e in later["items"])


def test_create_update_move_online_cancel(cal):
  cal_id = call_ok(cal, "list_calendars")[0]["id"]
  ev = call_ok(
    cal,
    "create_event",
    {
      "calendar_id": cal_id,
      "title": "Offsite",
      "start": "2026-04-01T10:00:00",
      "end": "2026-04-01T12:00:00",
      "attendees": ["a.b@example.com", "A.B@example.com"],
    },
  )
  assert [a["id"] for a in ev["attendees"]] == ["a.b@example.com"]
  upd = call_ok(cal, "update_event", {"event_id": ev["id"], "title": "Offsite v2"})
  assert upd["title"] == "Offsite v2" and upd["start"] == ev["start"]
  online = call_ok(cal, "move_event_online", {"event_id": ev["id"]})
  assert online["is_online"] and online["location"] == "Online"
  assert online["meeting_link"].startswith("https://")
  assert (online["start"], online["end"]) == (ev["start"], ev["end"])
  call_ok(cal, "add_attendees", {"event_id": ev["id"], "emails": ["c.d@example.com"]})
  call_ok(cal, "remove_attendee", {"event_id": ev["id"], "email": "a.b@example.com"})
  got = call_ok(cal, "get_event", {"event_id": ev["id"]})
  assert [a["id"] for a in got["attendees"]] == ["c.d@example.com"]
  assert call_ok(cal, "cancel_event", {"event_id": ev["id"]})["status"] == "cancelled"


def test_error_paths_are_atomic(cal):
  ev = first_event(cal)
  eid, who = ev["id"], ev["attendees"][0]["id"]
  call_fails(cal, "get_event", {}, 400, "event_id")
  call_fails(cal, "get_event", {"event_id": 7}, 400, "event_id", "string")
  call_fails(cal, "get_event", {"event_id": "evt_nope"}, 404, "evt_nope")
  call_fails(cal, "list_events", {"limit": 0}, 400, "limit")
  call_fails(cal, "list_events", {"calendar_id": "cal_x"}, 404, "cal_x")
  call_fails(cal, "list_events", {"attendee": "not-an-email"}, 400, "attendee")
  call_fails(
    cal,
    "create_event",
    {"calendar_id": "cal_x", "title": "x", "start": "2026-04-01T10:00", "end": "2026-04-01T11:00"},
    404,
    "cal_x",
  )
  cal_id = ev["calendar_id"]
  call_fails(
    cal,
    "create_event",
    {"calendar_id": cal_id, "title": "x", "start": "2026-04-01T10:00", "end": "2026-04-01T09:00"},
    400,
    "after",
  )
  call_fails(cal, "create_event", {"calendar_id": cal_id, "title": "x", "start": "soon"}, 400)
  call_fails(cal, "update_event", {"event_id": eid}, 400, "at least one")
  call_fails(cal, "update_event", {"event_id": eid, "end": "2000-01-01T00:00"}, 400, "after")
  call_fails(cal, "add_attendees", {"event_id": eid, "emails": [who]}, 409)
  call_fails(cal, "remove_attendee", {"event_id": eid, "email": "zz@example.com"}, 404)
  call_ok(cal, "move_event_online", {"event_id": eid})
  call_fails(cal, "move_event_online", {"event_id": eid}, 409, "already online")
  call_ok(cal, "cancel_event", {"event_id": eid})
  call_fails(cal, "cancel_event", {"event_id": eid}, 409, "cancelled")
  call_fails(cal, "update_event", {"event_id": eid, "title": "x"}, 409, "cancelled")
  call_fails(cal, "no_such_tool", {}, 404, "list_events")
