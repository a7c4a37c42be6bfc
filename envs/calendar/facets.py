"""Calendar facets: meetings as sources of people, times and places; invitations as sinks; the
move-online revisit of the paper's Appendix D."""

from __future__ import annotations

from datetime import datetime, timedelta

from compoworld.tasks.authoring import AuthorContext
from compoworld.tasks.facets import Found, Value, facets
from compoworld.tasks.rubric import all_of, exists, record_is, where
from envs._facets_common import (
  found_one,
  found_people,
  found_time,
  future_slot,
  iso,
  topic,
  user_email,
)
from envs._world import world

S = "calendar"


def _scenario_event(ctx: AuthorContext, guests: int = 5) -> dict:
  """Puts a distinctive upcoming in-person meeting on the Work calendar and returns it."""
  w = world(ctx.env.seed)
  state = ctx.state(S)
  cal = next(c for c in state.calendars if c.name == "Work")
  start = future_slot(ctx, S)
  me, people = w.people[0], ctx.rng.sample(w.people[2:], guests)
  venue = ctx.choice(w.venues)
  responses = ["accepted", "accepted", "accepted", "declined", "tentative"][:guests]
  ctx.rng.shuffle(responses)
  record = {
    "id": ctx.fresh_id("evt"),
    "calendar_id": cal.id,
    "title": f"{topic(ctx)}",
    "start": iso(start),
    "end": iso(start + timedelta(minutes=ctx.choice((30, 60, 90)))),
    "location": f"{venue.name}, {venue.address}",
    "organizer": people[0].email if guests else me.email,
    "attendees": [{"id": me.email, "response": "accepted"}]
    + [{"id": p.email, "response": r} for p, r in zip(people, responses, strict=True)],
    "updated_at": iso(state.now),
  }
  return ctx.put(S, "events", record)


def _find(ctx: AuthorContext, event: dict) -> dict:
  """The agent's way to the event: search by title, then open it."""
  hits = ctx.call(S, "list_events", query=event["title"])["items"]
  hit = next(e for e in hits if e["title"] == event["title"])
  return ctx.call(S, "get_event", event_id=hit["id"])


@facets.source(S, "person.email")
def organizer(ctx: AuthorContext) -> Found:
  event = _find(ctx, _scenario_event(ctx))
  return found_one(
    "person.email", f'the organizer of the "{event["title"]}" meeting', event["organizer"]
  )


@facets.source(S, "person.email")
def accepted_attendees(ctx: AuthorContext) -> Found:
  event = _find(ctx, _scenario_event(ctx))
  me = user_email(ctx)
  going = [a["id"] for a in event["attendees"] if a["response"] == "accepted" and a["id"] != me]
  declined = [a["id"] for a in event["attendees"] if a["response"] == "declined"]
  noun = f'the people who accepted the "{event["title"]}" invite'
  return found_people(noun, going, declined, "who declined it")


@facets.source(S, "datetime")
def meeting_start(ctx: AuthorContext) -> Found:
  event = _find(ctx, _scenario_event(ctx))
  return found_time(f'the start time of the "{event["title"]}" meeting', event["start"])


@facets.source(S, "location")
def meeting_place(ctx: AuthorContext) -> Found:
  event = _find(ctx, _scenario_event(ctx))
  address = event["location"].split(", ", 1)[1]
  return found_one(
    "location",
    f'the address where the "{event["title"]}" meeting takes place',
    address,
    context={"date": event["start"][:10]},
  )


def _meeting(ctx: AuthorContext) -> dict:
  return _find(ctx, _scenario_event(ctx))


def _small_meeting(ctx: AuthorContext) -> dict:
  """A meeting with the user alone on it, so whoever the walk brings is a new attendee."""
  return _find(ctx, _scenario_event(ctx, guests=0))


facets.sink(
  S,
  "person.email",
  "invite_to_meeting",
  prepare=_small_meeting,
  act=lambda ctx, ev, v: ctx.call(S, "add_attendees", event_id=ev["id"], emails=[v.value]),
  check=lambda ctx, ev, v: record_is(S, "events", ev["id"], "attendees.id", v.value, "contains"),
  phrase=lambda ctx, ev, obj: f'add {obj} to the attendees of the "{ev["title"]}" meeting',
  text=lambda ctx, ev, v: f'{v.label} is invited to "{ev["title"]}".',
)


def _new_meeting(ctx: AuthorContext) -> dict:
  # The agent's way to "my Work calendar": list the calendars (their ids are not told).
  cal = next(c for c in ctx.call(S, "list_calendars") if c["name"] == "Work")
  return {"title": f"{topic(ctx)} follow-up", "calendar_id": cal["id"]}


def _schedule(ctx: AuthorContext, target: dict, value: Value) -> None:
  end = datetime.fromisoformat(value.value) + timedelta(minutes=30)
  ctx.call(
    S,
    "create_event",
    calendar_id=target["calendar_id"],
    title=target["title"],
    start=value.value,
    end=iso(end),
  )


facets.sink(
  S,
  "datetime",
  "schedule_meeting",
  prepare=_new_meeting,
  act=_schedule,
  check=lambda ctx, t, v: exists(
    S, "events", where("title", t["title"]), where("start", v.value), where("status", "confirmed")
  ),
  phrase=lambda ctx, t, obj: f'put a 30-minute "{t["title"]}" on my Work calendar at {obj}',
  text=lambda ctx, t, v: f'"{t["title"]}" is scheduled at {v.label}.',
)


# --- the Appendix D revisit: read the venue, move the meeting online, read the new link ----


def _venue_first(ctx: AuthorContext) -> tuple[Found, dict]:
  event = _meeting(ctx)
  address = event["location"].split(", ", 1)[1]
  found = found_one(
    "location",
    f'where the "{event["title"]}" meeting is being held',
    address,
    context={"date": event["start"][:10]},
  )
  return found, event


def _online_check(ctx: AuthorContext, event: dict, value: Value) -> dict:
  return all_of(
    record_is(S, "events", event["id"], "is_online", True),
    record_is(S, "events", event["id"], "start", event["start"]),
    record_is(S, "events", event["id"], "end", event["end"]),
  )


def _link_second(ctx: AuthorContext, event: dict) -> Found:
  now = ctx.call(S, "get_event", event_id=event["id"])
  return found_one(
    "url",
    f'the new meeting link of "{event["title"]}"',
    now["meeting_link"],
    stale=event["meeting_link"],  # the first read saw no link: it was an in-person meeting
  )


facets.revisit(
  S,
  kind="location",
  kind_in="weather.condition",
  kind_after="url",
  name="move_online_if_bad_weather",
  first=_venue_first,
  second=_link_second,
  change="move_online",
  act=lambda ctx, ev, v: ctx.call(S, "move_event_online", event_id=ev["id"]),
  check=_online_check,
  phrase=lambda ctx, ev, obj: "move that meeting online without changing its time",
  text=lambda ctx, ev, v: f'"{ev["title"]}" is online with its start and end unchanged.',
)
