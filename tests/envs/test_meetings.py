from datetime import datetime, timedelta

import pytest

from envs._world import world
from envs.meetings import MeetingsService
from tests.contract import call_fails, call_ok

SEED = 3
ME = world(SEED).people[0].email
LATER = "2026-03-10T15:00:00"


@pytest.fixture
def zoom():
  return MeetingsService.create(seed=SEED)


def meeting(zoom, status, mine=True):
  return next(
    m
    for m in sorted(zoom.state.meetings, key=lambda m: m.id)
    if m.status == status and (m.host == ME) == mine
  )


def schedule(zoom, **extra):
  return call_ok(zoom, "schedule_meeting", {"topic": "Roadmap", "start": LATER, **extra})


def test_seeded_data_is_sized():
  a = MeetingsService.create(seed=5)
  assert len(a.state.meetings) == 30
  assert len(MeetingsService.create(seed=5, size=80).state.meetings) == 80
  now, me = a.state.now, world(5).people[0].email
  running = [m for m in a.state.meetings if m.status == "started"]
  assert len(running) == 1 and running[0].host == me
  statuses = {m.status for m in a.state.meetings}
  assert statuses == {"scheduled", "started", "ended", "cancelled"}
  for m in a.state.meetings:
    assert m.join_url.startswith("https://zoom.example.com/j/") and len(m.passcode) == 6
    if m.status == "scheduled":
      assert m.start > now and m.started_at is None
    if m.status == "ended":
      assert m.start < now and m.started_at < m.ended_at < now
  assert {r.meeting_id for r in a.state.recordings} <= {
    m.id for m in a.state.meetings if m.status == "ended"
  }
  assert all(t.recording_id in a.state.recordings for t in a.state.transcripts)
  assert {"approved", "pending", "declined"} == {r.status for r in a.state.registrants}


def test_list_meetings_filters_and_pages(zoom):
  page = call_ok(zoom, "list_meetings", {"limit": 5})
  assert page["total"] == 30 and len(page["items"]) == 5 and page["next_offset"] == 5
  every = call_ok(zoom, "list_meetings", {"limit": 100})["items"]
  assert [m["start"] for m in every] == sorted(m["start"] for m in every)
  ended = call_ok(zoom, "list_meetings", {"status": "ended", "limit": 100})["items"]
  assert ended and all(m["status"] == "ended" for m in ended)
  mine = call_ok(zoom, "list_meetings", {"host": ME.upper(), "limit": 100})["items"]
  assert mine and all(m["host"] == ME for m in mine) and len(mine) < 30
  window = {"start_after": "2026-03-02T00:00:00", "start_before": "2026-03-09T00:00:00"}
  week = call_ok(zoom, "list_meetings", {**window, "limit": 100})["items"]
  assert week and all("2026-03-02" <= m["start"] < "2026-03-09" for m in week)
  topic = every[3]["topic"]
  hits = call_ok(zoom, "list_meetings", {"query": topic.upper(), "limit": 100})["items"]
  assert every[3]["id"] in [m["id"] for m in hits]
  assert all(topic.lower().split()[0] in (m["topic"] + m["agenda"]).lower() for m in hits)


def test_get_meeting_and_registrants(zoom):
  m = max(
    zoom.state.meetings, key=lambda m: sum(r.meeting_id == m.id for r in zoom.state.registrants)
  )
  got = call_ok(zoom, "get_meeting", {"meeting_id": m.id})
  assert got["join_url"] == m.join_url and got["passcode"] == m.passcode
  assert got["end"] == (m.start + timedelta(minutes=m.duration_minutes)).isoformat()
  regs = [r for r in zoom.state.registrants if r.meeting_id == m.id]
  assert sum(got["registrants"].values()) == len(regs) > 1
  listed = call_ok(zoom, "list_registrants", {"meeting_id": m.id, "limit": 100})["items"]
  assert {r["email"] for r in listed} == {r.email for r in regs}
  assert [r["registered_at"] for r in listed] == sorted(r["registered_at"] for r in listed)
  some = listed[0]["status"]
  only = call_ok(zoom, "list_registrants", {"meeting_id": m.id, "status": some})["items"]
  assert only and all(r["status"] == some for r in only)


def test_recordings_and_transcripts(zoom):
  recs = call_ok(zoom, "list_recordings", {"limit": 100})["items"]
  assert len(recs) == len(zoom.state.recordings) > 1
  assert [r["recorded_at"] for r in recs] == sorted((r["recorded_at"] for r in recs), reverse=True)
  one = recs[0]
  by_meeting = call_ok(zoom, "list_recordings", {"meeting_id": one["meeting_id"]})["items"]
  assert [r["id"] for r in by_meeting] == [one["id"]]
  by_topic = call_ok(zoom, "list_recordings", {"query": one["topic"], "limit": 100})["items"]
  assert one["id"] in [r["id"] for r in by_topic]
  t = next(iter(zoom.state.transcripts))
  got = call_ok(zoom, "get_transcript", {"meeting_id": t.meeting_id})
  assert got["text"] == t.text and got["recording_id"] == t.recording_id
  word = t.text.split("\n")[1].split()[-1].strip(".")
  hits = call_ok(zoom, "search_transcripts", {"query": word})
  mine = [h for h in hits["items"] if h["transcript_id"] == t.id]
  assert mine and mine[0]["lines"] and all(word.lower() in x.lower() for x in mine[0]["lines"])
  assert call_ok(zoom, "search_transcripts", {"query": "zebra quantum"})["total"] == 0


def test_schedule_reschedule_cancel(zoom):
  m = schedule(zoom, duration_minutes=45, approval="manual", agenda="Plan Q3")
  assert m["host"] == ME and m["status"] == "scheduled" and m["duration_minutes"] == 45
  assert m["join_url"].startswith("https://zoom.example.com/j/") and m["passcode"]
  assert zoom.state.meetings.get(m["id"]).approval == "manual"
  moved = call_ok(zoom, "reschedule_meeting", {"meeting_id": m["id"], "start": "2026-03-11T09:00"})
  assert moved["start"] == "2026-03-11T09:00:00" and moved["duration_minutes"] == 45
  longer = call_ok(zoom, "reschedule_meeting", {"meeting_id": m["id"], "duration_minutes": 90})
  assert longer["duration_minutes"] == 90 and longer["start"] == moved["start"]
  assert zoom.state.meetings.get(m["id"]).duration_minutes == 90
  assert call_ok(zoom, "cancel_meeting", {"meeting_id": m["id"]})["status"] == "cancelled"
  assert zoom.state.meetings.get(m["id"]).status == "cancelled"


def test_start_and_end_make_recordings(zoom):
  running = meeting(zoom, "started")
  done = call_ok(zoom, "end_meeting", {"meeting_id": running.id})
  assert done["meeting"]["status"] == "ended" and done["meeting"]["ended_at"]
  assert (done["recording"] is not None) == running.auto_record
  m = schedule(zoom, auto_record=True)
  started = call_ok(zoom, "start_meeting", {"meeting_id": m["id"]})
  assert started["status"] == "started"
  # The call ran at the clock's previous tick: every write advances it by one minute.
  assert started["started_at"] == (zoom.state.now - timedelta(minutes=1)).isoformat()
  assert zoom.state.meetings.get(m["id"]).status == "started"
  ended = call_ok(zoom, "end_meeting", {"meeting_id": m["id"]})
  rec = ended["recording"]
  assert rec["meeting_id"] == m["id"] and rec["duration_minutes"] >= 1 and rec["share_url"] is None
  assert zoom.state.recordings.get(rec["id"]).topic == "Roadmap"
  plain = schedule(zoom)
  call_ok(zoom, "start_meeting", {"meeting_id": plain["id"]})
  assert call_ok(zoom, "end_meeting", {"meeting_id": plain["id"]})["recording"] is None
  shared = call_ok(zoom, "share_recording", {"recording_id": rec["id"]})
  assert shared["share_url"].startswith("https://zoom.example.com/rec/share/")
  assert zoom.state.recordings.get(rec["id"]).shared_at is not None


def test_registrants_lifecycle(zoom):
  auto = schedule(zoom)
  reg = call_ok(
    zoom, "add_registrant", {"meeting_id": auto["id"], "email": "Kim@Acme.com", "name": "Kim Li"}
  )
  assert reg["status"] == "approved" and reg["email"] == "kim@acme.com"
  manual = schedule(zoom, approval="manual")
  args = {"meeting_id": manual["id"], "email": "kim@acme.com"}
  pending = call_ok(zoom, "add_registrant", {**args, "name": "Kim Li"})
  assert pending["status"] == "pending"
  ok = call_ok(zoom, "update_registrant_status", {**args, "status": "approved"})
  assert (
    ok["status"] == "approved" and zoom.state.registrants.get(pending["id"]).status == "approved"
  )
  no = call_ok(zoom, "update_registrant_status", {**args, "status": "declined"})
  assert no["status"] == "declined"
  gone = call_ok(zoom, "remove_registrant", args)
  assert gone["id"] == pending["id"] and pending["id"] not in zoom.state.registrants
  got = call_ok(zoom, "get_meeting", {"meeting_id": manual["id"]})
  assert got["registrants"] == {"approved": 0, "pending": 0, "declined": 0}
  # Anyone may register for a colleague's meeting.
  theirs = meeting(zoom, "scheduled", mine=False)
  call_ok(zoom, "add_registrant", {"meeting_id": theirs.id, "email": "zz@x.com", "name": "Z"})


def test_state_machine_and_host_conflicts(zoom):
  running, ended = meeting(zoom, "started"), meeting(zoom, "ended")
  cancelled = next(m for m in zoom.state.meetings if m.status == "cancelled")
  theirs = meeting(zoom, "scheduled", mine=False)
  for tool, args in (
    ("reschedule_meeting", {"meeting_id": theirs.id, "start": LATER}),
    ("cancel_meeting", {"meeting_id": theirs.id}),
    ("start_meeting", {"meeting_id": theirs.id}),
    ("end_meeting", {"meeting_id": theirs.id}),
  ):
    call_fails(zoom, tool, args, 409, "only the host", theirs.host)
  reg = next(r for r in zoom.state.registrants if r.meeting_id == theirs.id)
  who = {"meeting_id": theirs.id, "email": reg.email}
  call_fails(zoom, "remove_registrant", who, 409, "only the host")
  call_fails(zoom, "update_registrant_status", {**who, "status": "declined"}, 409, "only the host")
  call_fails(zoom, "reschedule_meeting", {"meeting_id": ended.id, "start": LATER}, 409, "ended")
  call_fails(zoom, "cancel_meeting", {"meeting_id": running.id}, 409, "in progress")
  call_fails(zoom, "cancel_meeting", {"meeting_id": ended.id}, 409, "only a scheduled")
  call_fails(zoom, "start_meeting", {"meeting_id": running.id}, 409, "started")
  call_fails(zoom, "start_meeting", {"meeting_id": ended.id}, 409, "ended")
  fresh = schedule(zoom)
  call_fails(zoom, "start_meeting", {"meeting_id": fresh["id"]}, 409, "already hosting", running.id)
  call_fails(zoom, "end_meeting", {"meeting_id": fresh["id"]}, 409, "scheduled", "started")
  dropped = schedule(zoom)
  call_ok(zoom, "cancel_meeting", {"meeting_id": dropped["id"]})
  again = {"meeting_id": dropped["id"], "start": LATER}
  call_fails(zoom, "reschedule_meeting", again, 409, "cancelled")
  call_fails(zoom, "cancel_meeting", {"meeting_id": dropped["id"]}, 409, "cancelled")
  for closed in (ended, cancelled):
    add = {"meeting_id": closed.id, "email": "new@x.com", "name": "New"}
    call_fails(zoom, "add_registrant", add, 409, closed.status)
  reg = next(
    r
    for r in zoom.state.registrants
    if zoom.state.meetings.get(r.meeting_id).status == "ended"
    and zoom.state.meetings.get(r.meeting_id).host == ME
  )
  args = {"meeting_id": reg.meeting_id, "email": reg.email}
  call_fails(zoom, "remove_registrant", args, 409, "ended")
  call_fails(zoom, "update_registrant_status", {**args, "status": "declined"}, 409, "ended")
  add = {"meeting_id": fresh["id"], "email": "kim@x.com", "name": "Kim"}
  call_ok(zoom, "add_registrant", add)
  call_fails(zoom, "add_registrant", {**add, "email": "KIM@x.com"}, 409, "already registered")
  call_fails(zoom, "add_registrant", {**add, "email": ME}, 409, "hosts")
  status = {"meeting_id": fresh["id"], "email": "kim@x.com", "status": "approved"}
  call_fails(zoom, "update_registrant_status", status, 409, "already approved")
  shared = next(r for r in zoom.state.recordings if r.share_url)
  call_fails(zoom, "share_recording", {"recording_id": shared.id}, 409, shared.share_url)


def test_argument_errors_and_unknown_ids(zoom):
  mid = meeting(zoom, "scheduled").id
  past = (zoom.state.now - timedelta(hours=1)).isoformat()
  call_fails(zoom, "get_meeting", {}, 400, "meeting_id")
  call_fails(zoom, "get_meeting", {"meeting_id": 5}, 400, "meeting_id", "string")
  call_fails(zoom, "list_meetings", {"status": "live"}, 400, "status")
  call_fails(zoom, "list_meetings", {"host": "nobody"}, 400, "host")
  call_fails(
    zoom, "list_meetings", {"start_after": LATER, "start_before": "2026-03-01T00:00"}, 400, "after"
  )
  call_fails(zoom, "list_registrants", {"meeting_id": mid, "limit": 101}, 400, "limit")
  call_fails(zoom, "search_transcripts", {"query": ""}, 400, "query")
  call_fails(zoom, "schedule_meeting", {"topic": "x", "start": past}, 400, "current time")
  call_fails(zoom, "schedule_meeting", {"topic": "x", "start": "tomorrow"}, 400, "start")
  call_fails(zoom, "schedule_meeting", {"topic": "", "start": LATER}, 400, "topic")
  call_fails(
    zoom, "schedule_meeting", {"topic": "x", "start": LATER, "duration_minutes": 2}, 400, "duration"
  )
  call_fails(zoom, "schedule_meeting", {"topic": "x", "start": LATER, "approval": "x"}, 400)
  call_fails(zoom, "reschedule_meeting", {"meeting_id": mid}, 400, "supply")
  call_fails(zoom, "reschedule_meeting", {"meeting_id": mid, "start": past}, 400, "current time")
  call_fails(zoom, "reschedule_meeting", {"meeting_id": mid, "duration_minutes": 0}, 400)
  call_fails(zoom, "add_registrant", {"meeting_id": mid, "email": "bad", "name": "x"}, 400, "email")
  call_fails(zoom, "add_registrant", {"meeting_id": mid, "email": "a@b.com"}, 400, "name")
  args = {"meeting_id": mid, "email": "a@b.com", "status": "pending"}
  call_fails(zoom, "update_registrant_status", args, 400, "status")
  for tool, args in (
    ("get_meeting", {"meeting_id": "mtg_nope"}),
    ("list_registrants", {"meeting_id": "mtg_nope"}),
    ("list_recordings", {"meeting_id": "mtg_nope"}),
    ("get_transcript", {"meeting_id": "mtg_nope"}),
    ("reschedule_meeting", {"meeting_id": "mtg_nope", "start": LATER}),
    ("cancel_meeting", {"meeting_id": "mtg_nope"}),
    ("start_meeting", {"meeting_id": "mtg_nope"}),
    ("end_meeting", {"meeting_id": "mtg_nope"}),
    ("add_registrant", {"meeting_id": "mtg_nope", "email": "a@b.com", "name": "A"}),
    ("remove_registrant", {"meeting_id": "mtg_nope", "email": "a@b.com"}),
    (
      "update_registrant_status",
      {"meeting_id": "mtg_nope", "email": "a@b.com", "status": "approved"},
    ),
    ("share_recording", {"recording_id": "mtg_nope"}),
  ):
    call_fails(zoom, tool, args, 404, "mtg_nope")
  call_fails(zoom, "remove_registrant", {"meeting_id": mid, "email": "zz@x.com"}, 404, "zz@x.com")
  args = {"meeting_id": mid, "email": "zz@x.com", "status": "approved"}
  call_fails(zoom, "update_registrant_status", args, 404, "zz@x.com")
  bare = schedule(zoom)
  call_fails(zoom, "get_transcript", {"meeting_id": bare["id"]}, 404, "no transcript")
  call_fails(zoom, "no_such_tool", {}, 404, "list_meetings")
  assert datetime.fromisoformat(bare["created_at"]) == zoom.state.now - timedelta(minutes=1)
