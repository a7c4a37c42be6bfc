"""Meetings facets: video meetings as sources of join links, start times, registrants and
transcript action items; registering people and scheduling as sinks; the reschedule revisit."""

from __future__ import annotations

from datetime import datetime, timedelta

from compoworld.tasks.authoring import AuthorContext, AuthoringError
from compoworld.tasks.facets import Found, Value, facets
from compoworld.tasks.rubric import exists, record_is, where
from envs._facets_common import (
  colleague,
  day_label,
  found_one,
  found_people,
  found_time,
  future_slot,
  future_time,
  iso,
  mentions,
  name_of,
  time_label,
  topic,
  user,
  user_email,
)
from envs._world import world
from envs.meetings.state import _join

S = "meetings"


def _put_meeting(
  ctx: AuthorContext, title: str, start: datetime, host: str | None = None, **fields
) -> dict:
  mid = ctx.fresh_id("mtg")
  url, code = _join(mid)
  return ctx.put(
    S,
    "meetings",
    {
      "id": mid,
      "topic": title,
      "agenda": fields.pop("agenda", f"Discuss {title}."),
      "start": iso(start),
      "duration_minutes": fields.pop("duration_minutes", ctx.choice((30, 45, 60))),
      "host": host or user_email(ctx),
      "join_url": url,
      "passcode": code,
      "created_at": iso(min(start, ctx.state(S).now) - timedelta(days=ctx.rng.randint(3, 10))),
      **fields,
    },
  )


def _register(ctx: AuthorContext, meeting: dict, email: str, status: str = "approved") -> None:
  ctx.put(
    S,
    "registrants",
    {
      "id": ctx.fresh_id("reg"),
      "meeting_id": meeting["id"],
      "email": email,
      "name": name_of(ctx, email),
      "status": status,
      "registered_at": iso(
        datetime.fromisoformat(meeting["created_at"]) + timedelta(hours=ctx.rng.randint(1, 40))
      ),
    },
  )


def _find(ctx: AuthorContext, title: str, **filters) -> dict:
  """The agent's way to a meeting: search by topic, then open it."""
  hits = ctx.call(S, "list_meetings", query=title, **filters)["items"]
  hit = next(m for m in hits if m["topic"] == title)
  return ctx.call(S, "get_meeting", meeting_id=hit["id"])


def _upcoming(ctx: AuthorContext, suffix: str = "call", **fields) -> dict:
  """A distinctive scheduled meeting a few days ahead, hosted by the user."""
  title = f"{topic(ctx)} {suffix}"
  _put_meeting(ctx, title, future_slot(ctx, S), **fields)
  return _find(ctx, title, status="scheduled")


# --- sources ---------------------------------------------------------------------------------


@facets.source(S, "url")
def join_link(ctx: AuthorContext) -> Found:
  meeting = _upcoming(ctx)
  return found_one(
    "url", f'the join link of the "{meeting["topic"]}" video meeting', meeting["join_url"]
  )


@facets.source(S, "datetime")
def meeting_start(ctx: AuthorContext) -> Found:
  meeting = _upcoming(ctx, suffix="review")
  return found_time(f'when the "{meeting["topic"]}" video meeting starts', meeting["start"])


@facets.source(S, "person.email")
def approved_registrants(ctx: AuthorContext) -> Found:
  """A meeting with manual approval: approved registrants are handed on, declined ones not."""
  w = world(ctx.env.seed)
  meeting = _put_meeting(
    ctx, f"{topic(ctx)} workshop", future_slot(ctx, S), approval="manual", duration_minutes=90
  )
  statuses = ["approved"] * 3 + ["declined"] * 2
  ctx.rng.shuffle(statuses)
  for p, status in zip(ctx.rng.sample(w.people[2:], 5), statuses, strict=True):
    _register(ctx, meeting, p.email, status)
  found = _find(ctx, meeting["topic"], status="scheduled")
  regs = ctx.call(S, "list_registrants", meeting_id=found["id"], limit=100)["items"]
  return found_people(
    f'the approved registrants of the "{found["topic"]}" video meeting',
    [r["email"] for r in regs if r["status"] == "approved"],
    [r["email"] for r in regs if r["status"] == "declined"],
    "whose registration for it was declined",
  )


def _past_meeting(ctx: AuthorContext, title: str) -> dict:
  """An ended, recorded meeting of a few days ago."""
  now = ctx.state(S).now
  start = now.replace(hour=ctx.choice((10, 11, 14, 15)), minute=0) - timedelta(
    days=ctx.rng.randint(1, 6)
  )
  minutes = ctx.choice((30, 45, 60))
  return _put_meeting(
    ctx,
    title,
    start,
    duration_minutes=minutes,
    auto_record=True,
    status="ended",
    started_at=iso(start + timedelta(minutes=1)),
    ended_at=iso(start + timedelta(minutes=minutes)),
  )


def _put_recording(ctx: AuthorContext, meeting: dict, shared: bool) -> dict:
  rid = ctx.fresh_id("rec")
  return ctx.put(
    S,
    "recordings",
    {
      "id": rid,
      "meeting_id": meeting["id"],
      "topic": meeting["topic"],
      "recorded_at": meeting["started_at"],
      "duration_minutes": meeting["duration_minutes"] - 1,
      "file_size_mb": round(meeting["duration_minutes"] * 10.5, 1),
      "share_url": f"https://zoom.example.com/rec/share/{rid[4:]}" if shared else None,
      "shared_at": meeting["ended_at"] if shared else None,
    },
  )


@facets.source(S, "text")
def transcript_action_item(ctx: AuthorContext) -> Found:
  """The one action item agreed in a recorded meeting, read from its transcript."""
  about = topic(ctx)
  meeting = _past_meeting(ctx, f"{about} retro")
  rec = _put_recording(ctx, meeting, shared=False)
  me, who, owner = user(ctx), colleague(ctx), colleague(ctx)
  task = ctx.choice(
    (
      f"{owner.name} shares the revised {about} timeline by Friday",
      f"{owner.name} books the {about} kickoff with the vendor next week",
      f"{owner.name} sends the {about} cost estimate to finance by Thursday",
    )
  )
  lines = [
    f"[00:00:04] {me.name}: Thanks for joining, everyone. Today: {meeting['topic']}.",
    f"[00:04:37] {who.name}: The first phase went better than planned.",
    f"[00:11:52] {me.name}: Action item: {task}.",
    f"[00:14:20] {who.name}: Sounds good, talk next week.",
  ]
  ctx.put(
    S,
    "transcripts",
    {
      "id": ctx.fresh_id("trn"),
      "meeting_id": meeting["id"],
      "recording_id": rec["id"],
      "text": "\n".join(lines),
    },
  )
  found = _find(ctx, meeting["topic"], status="ended")
  text = ctx.call(S, "get_transcript", meeting_id=found["id"])["text"]
  item = next(x for x in text.splitlines() if "Action item: " in x).split("Action item: ")[1]
  item = item.rstrip(".")
  return found_one(
    "text", f'the action item agreed in the "{found["topic"]}" meeting (see its transcript)', item
  )


@facets.source(S, "url")
def recording_link(ctx: AuthorContext) -> Found:
  meeting = _past_meeting(ctx, f"{topic(ctx)} demo")
  _put_recording(ctx, meeting, shared=True)
  rec = next(
    r
    for r in ctx.call(S, "list_recordings", query=meeting["topic"])["items"]
    if r["topic"] == meeting["topic"]
  )
  return found_one(
    "url", f'the shared recording link of the "{meeting["topic"]}" meeting', rec["share_url"]
  )


# --- lookups ---------------------------------------------------------------------------------


@facets.lookup(S, "person.email", "datetime")
def their_office_hours(ctx: AuthorContext, found: Found) -> Found:
  """Several sessions of one series; the incoming person registered for exactly one."""
  email = str(found.values[0].value).lower()
  if email == user_email(ctx):
    raise AuthoringError("registrant_is_host", email)
  w = world(ctx.env.seed)
  title = f"{topic(ctx)} office hours"
  others = ctx.rng.sample([p.email for p in w.people[2:] if p.email != email], 4)
  # Three sessions on different days; the incoming person is on one of them only.
  groups = [[email, others[0]], [others[1], others[2]], [others[3]]]
  for d, group in zip(ctx.rng.sample(range(1, 10), 3), groups, strict=True):
    meeting = _put_meeting(ctx, title, future_slot(ctx, S, (d, d)), duration_minutes=30)
    for person in group:
      _register(ctx, meeting, person)
  sessions = ctx.call(S, "list_meetings", query=title, status="scheduled")["items"]
  for session in sessions:
    regs = ctx.call(S, "list_registrants", meeting_id=session["id"], limit=100)["items"]
    if any(r["email"] == email for r in regs):
      return found_time(f'when the "{title}" session they registered for starts', session["start"])
  return None


def _company_demo(ctx: AuthorContext, company: str) -> tuple[dict, str]:
  """An upcoming demo for ``company`` on a day no other meeting about it takes place."""
  busy = {
    m.start.date()
    for m in ctx.state(S).meetings
    if company.lower() in f"{m.topic} {m.agenda}".lower()
  }
  days = [d for d in range(1, 12) if (ctx.state(S).now + timedelta(days=d)).date() not in busy]
  d = ctx.choice(days)
  start = future_slot(ctx, S, (d, d))
  _put_meeting(ctx, f"Product demo for {company}", start, duration_minutes=45)
  day = start.date()
  hits = ctx.call(
    S,
    "list_meetings",
    query=company,
    start_after=iso(datetime.combine(day, datetime.min.time())),
    start_before=iso(datetime.combine(day + timedelta(days=1), datetime.min.time())),
  )["items"]
  hit = next(m for m in hits if m["topic"] == f"Product demo for {company}")
  meeting = ctx.call(S, "get_meeting", meeting_id=hit["id"])
  return meeting, day_label(day)


@facets.lookup(S, "company.name", "url")
def company_demo_link(ctx: AuthorContext, found: Found) -> Found:
  meeting, day = _company_demo(ctx, str(found.values[0].value))
  return found_one(
    "url", f"the join link of the product demo for that company on {day}", meeting["join_url"]
  )


@facets.lookup(S, "company.name", "datetime")
def company_demo_time(ctx: AuthorContext, found: Found) -> Found:
  meeting, day = _company_demo(ctx, str(found.values[0].value))
  return found_time(
    f"the start time of the product demo for that company on {day}", meeting["start"]
  )


# --- sinks -----------------------------------------------------------------------------------


def _register_person(ctx: AuthorContext, meeting: dict, v: Value) -> None:
  email = str(v.value).lower()
  if email == meeting["host"]:
    raise AuthoringError("registrant_is_host", email)
  ctx.call(S, "add_registrant", meeting_id=meeting["id"], email=email, name=name_of(ctx, email))


facets.sink(
  S,
  "person.email",
  "register_for_meeting",
  prepare=lambda ctx: _upcoming(ctx, suffix="briefing"),
  act=_register_person,
  check=lambda ctx, m, v: exists(
    S, "registrants", where("meeting_id", m["id"]), where("email", str(v.value).lower())
  ),
  phrase=lambda ctx, m, obj: f'register {obj} for the "{m["topic"]}" video meeting',
  text=lambda ctx, m, v: f'{v.label} is registered for "{m["topic"]}".',
)


def _meeting_at(t: dict, start: str, condition: dict) -> dict:
  """A rubric condition: a meeting on ``t``'s topic starts at ``start`` and meets
  ``condition``."""
  return exists(S, "meetings", where("topic", t["topic"]), where("start", start), condition)


def _start_of(ctx: AuthorContext, v: Value) -> str:
  """The incoming time as the service prints it; it must lie ahead to be scheduled."""
  return future_time(ctx, S, v, "start_in_past").isoformat()


facets.sink(
  S,
  "datetime",
  "schedule_video_meeting",
  prepare=lambda ctx: {"topic": f"{topic(ctx)} check-in"},
  act=lambda ctx, t, v: ctx.call(
    S, "schedule_meeting", topic=t["topic"], start=_start_of(ctx, v), duration_minutes=30
  ),
  check=lambda ctx, t, v: _meeting_at(
    t, datetime.fromisoformat(str(v.value)).isoformat(), where("status", "scheduled")
  ),
  phrase=lambda ctx, t, obj: f'schedule a 30-minute video meeting "{t["topic"]}" at {obj}',
  text=lambda ctx, t, v: f'The video meeting "{t["topic"]}" is scheduled at {v.label}.',
)


def _agenda_target(ctx: AuthorContext) -> dict:
  start = future_slot(ctx, S)
  return {"topic": f"{topic(ctx)} sync", "start": iso(start), "when": time_label(iso(start))}


for kind in ("text", "url"):
  facets.sink(
    S,
    kind,
    f"meeting_agenda_{kind}",
    prepare=_agenda_target,
    act=lambda ctx, t, v: ctx.call(
      S,
      "schedule_meeting",
      topic=t["topic"],
      start=t["start"],
      duration_minutes=30,
      agenda=f"Agenda: {v.value}",
    ),
    check=lambda ctx, t, v: _meeting_at(t, t["start"], mentions("agenda", v)),
    phrase=lambda ctx, t, obj: (
      f'schedule a 30-minute video meeting "{t["topic"]}" for {t["when"]} and put {obj} in '
      "its agenda"
    ),
    text=lambda ctx, t, v: f'The agenda of "{t["topic"]}" ({t["when"]}) includes {v.label}.',
  )


# --- revisit: read a meeting's start, reschedule it, read the new start ----------------------


def _start_first(ctx: AuthorContext) -> tuple[Found, dict]:
  meeting = _upcoming(ctx, suffix="planning session")
  found = found_time(f'when the "{meeting["topic"]}" video meeting starts', meeting["start"])
  return found, meeting


def _reschedule(ctx: AuthorContext, meeting: dict, v: Value) -> None:
  start = _start_of(ctx, v)
  if start == meeting["start"]:
    raise AuthoringError("same_start", start)
  ctx.call(S, "reschedule_meeting", meeting_id=meeting["id"], start=start)


def _start_second(ctx: AuthorContext, meeting: dict) -> Found:
  now = ctx.call(S, "get_meeting", meeting_id=meeting["id"])
  return found_time(
    f'the new start time of "{meeting["topic"]}"', now["start"], stale=meeting["start"]
  )


facets.revisit(
  S,
  kind="datetime",
  kind_in="datetime",
  kind_after="datetime",
  name="reschedule_meeting",
  first=_start_first,
  second=_start_second,
  change="move_meeting",
  act=_reschedule,
  check=lambda ctx, m, v: record_is(
    S, "meetings", m["id"], "start", datetime.fromisoformat(str(v.value)).isoformat()
  ),
  phrase=lambda ctx, m, obj: f'move the "{m["topic"]}" video meeting to start at {obj}',
  text=lambda ctx, m, v: f'"{m["topic"]}" now starts at {v.label}.',
  single=True,  # a meeting moves to one new start
)
