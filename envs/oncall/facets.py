"""Oncall facets: rotations and incidents as sources of people and shift times; overrides and
new incidents as sinks; the cover-a-shift revisit (who is on call, before and after an
override)."""

from __future__ import annotations

from datetime import datetime, timedelta

from compoworld.tasks.authoring import AuthorContext, AuthoringError
from compoworld.tasks.facets import Found, Value, facets
from compoworld.tasks.rubric import exists, where
from compoworld.tasks.task import Patch
from envs._facets_common import (
  colleague,
  employee,
  found_one,
  found_people,
  found_time,
  iso,
  mentions,
  since,
  time_label,
)
from envs._world import world
from envs.oncall.state import ALERTS

S = "oncall"
#: How far ahead list_shifts may look in one call.
WINDOW = timedelta(days=31)


def _services(ctx: AuthorContext, active: bool = False, lasting: bool = False) -> list:
  """Technical services, sorted; ``active``: not in maintenance; ``lasting``: their first
  level's schedule has no end, so every future time is covered."""
  state, out = ctx.state(S), []
  for svc in sorted(state.services, key=lambda s: s.id):
    sched = _schedule_of(ctx, svc)
    if (active and svc.status != "active") or (lasting and sched.ends_at is not None):
      continue
    out.append(svc)
  return out


def _schedule_of(ctx: AuthorContext, svc):
  """The schedule the service's first escalation level pages."""
  state = ctx.state(S)
  return state.schedules.get(state.policies.get(svc.policy_id).levels[0].schedule_id)


def _find_service(ctx: AuthorContext, name: str) -> dict:
  return next(s for s in ctx.call(S, "list_services", query=name)["items"] if s["name"] == name)


def _find_schedule(ctx: AuthorContext, name: str) -> dict:
  return next(s for s in ctx.call(S, "list_schedules", limit=100)["items"] if s["name"] == name)


def _free(ctx: AuthorContext, sched, start: datetime, end: datetime) -> bool:
  """Whether an override of ``sched`` from ``start`` to ``end`` would be accepted."""
  if start < sched.rotation_start or end <= ctx.state(S).now:
    return False
  if sched.ends_at is not None and end > sched.ends_at:
    return False
  return not any(
    o.schedule_id == sched.id and o.start < end and start < o.end for o in ctx.state(S).overrides
  )


def _window(ctx: AuthorContext, sched, hours: int = 9) -> tuple[datetime, datetime] | None:
  """A free working-day window on ``sched`` a few days ahead."""
  today = ctx.state(S).now.replace(hour=0, minute=0, second=0, microsecond=0)
  days = list(range(2, 10))
  ctx.rng.shuffle(days)
  for d in days:
    start = today + timedelta(days=d, hours=9)
    if _free(ctx, sched, start, start + timedelta(hours=hours)):
      return start, start + timedelta(hours=hours)
  return None


# --- sources -------------------------------------------------------------------------------


@facets.source(S, "person.email")
def on_call_now(ctx: AuthorContext) -> Found:
  svc = ctx.choice(_services(ctx))
  found = _find_service(ctx, svc.name)
  who = ctx.call(S, "get_oncall", service_id=found["id"])["email"]
  return found_one("person.email", f"who is on call for {svc.name} right now", who)


def _note(n: int, at: datetime, author: str, kind: str, text: str) -> dict:
  return {"id": f"n{n}", "at": iso(at), "author": author, "kind": kind, "text": text}


@facets.source(S, "person.email")
def incident_responder(ctx: AuthorContext) -> Found:
  """An incident paged a while ago; the step hands on the responder now holding it."""
  state = ctx.state(S)
  if ctx.scratch.get("oncall_triggered"):
    # Its number would follow the tool-opened incidents here but precede them in s0.
    raise AuthoringError("incident_after_trigger")
  svc = ctx.choice(_services(ctx, active=True))
  taken = {i.title for i in state.incidents if i.service_id == svc.id and i.status != "resolved"}
  title = ctx.choice([a.format(s=svc.name) for a in ALERTS if a.format(s=svc.name) not in taken])
  created = state.now - timedelta(minutes=ctx.rng.randint(20, 90))
  level = state.policies.get(svc.policy_id).levels[0]
  who = ctx.env.services[S]._responders(level, created)[0]
  acked = created + timedelta(minutes=ctx.rng.randint(3, 12))
  number = state.last_incident_number + 1
  # The incident takes the next number, as if it had been triggered through the tool.
  ctx._patch(Patch(service=S, op="set", fields={"last_incident_number": number}))
  ctx.put(
    S,
    "incidents",
    {
      "id": ctx.fresh_id("inc"),
      "number": number,
      "title": title,
      "service_id": svc.id,
      "urgency": "high",
      "status": "acknowledged",
      "assignee": who,
      "created_at": iso(created),
      "acknowledged_at": iso(acked),
      "notes": [
        _note(1, created, "monitoring", "triggered", f"Alert fired: {title}; paged {who}"),
        _note(2, acked, who, "acknowledged", "Acknowledged"),
      ],
    },
  )
  hit = next(
    i for i in ctx.call(S, "list_incidents", query=title, open_only=True)["items"]
    if i["title"] == title
  )  # fmt: skip
  incident = ctx.call(S, "get_incident", incident_id=hit["id"])
  return found_one(
    "person.email", f'the responder handling the open "{title}" incident', incident["assignee"]
  )


@facets.source(S, "person.email")
def rotation_off_duty(ctx: AuthorContext) -> Found:
  """A schedule's rotation, less whoever is carrying the pager right now."""
  sched = ctx.choice(sorted(ctx.state(S).schedules, key=lambda s: s.id))
  listed = _find_schedule(ctx, sched.name)
  now = listed["on_call_now"]
  rotation = listed["rotation"]
  return found_people(
    f"the people on the {sched.name} on-call rotation",
    [e for e in rotation if e != now],
    [now] if now in rotation else [],
    "who is on call right now",
  )


def _next_shift(ctx: AuthorContext, email: str, schedules: list[dict]) -> dict | None:
  """The first shift ``email`` starts after now on any of ``schedules``, read as the agent
  would: one list_shifts call per schedule."""
  now = ctx.state(S).now
  best = None
  for sched in schedules:
    shifts = ctx.call(
      S, "list_shifts", schedule_id=sched["id"], start=iso(now), end=iso(now + WINDOW)
    )
    mine = [s for s in shifts if s["email"] == email and s["start"] > iso(now)]
    if mine and (best is None or mine[0]["start"] < best["start"]):
      best = {**mine[0], "schedule": sched["name"]}
  return best


@facets.source(S, "datetime")
def next_shift_start(ctx: AuthorContext) -> Found:
  sched = ctx.choice(sorted(ctx.state(S).schedules, key=lambda s: s.id))
  listed = _find_schedule(ctx, sched.name)
  options = sorted(e for e in listed["rotation"] if e != listed["on_call_now"])
  email = ctx.choice(options)
  shift = _next_shift(ctx, email, [listed])
  if shift is None:
    raise AuthoringError("no_shift_ahead", email)
  name = world(ctx.env.seed).person(email).name
  return found_time(f"when {name}'s next shift on the {sched.name} schedule starts", shift["start"])


# --- lookups -------------------------------------------------------------------------------


@facets.lookup(S, "datetime", "person.email")
def on_call_at(ctx: AuthorContext, found: Found) -> Found | None:
  try:
    at = datetime.fromisoformat(str(found.values[0].value)).replace(tzinfo=None)
  except ValueError:
    return None
  svcs = [s for s in _services(ctx, lasting=True) if _schedule_of(ctx, s).rotation_start <= at]
  if not svcs:
    return None
  svc = ctx.choice(svcs)
  hit = _find_service(ctx, svc.name)
  who = ctx.call(S, "get_oncall", service_id=hit["id"], at=iso(at))["email"]
  return found_one(
    "person.email",
    f"who is on call for {svc.name} at that time",
    who,
    answer=f"{who} is on call for {svc.name} at {time_label(iso(at))}.",
  )


@facets.lookup(S, "person.email", "datetime")
def next_shift_of(ctx: AuthorContext, found: Found) -> Found | None:
  """When the person next takes the pager; someone outside every rotation gets a cover
  shift in s0 (an override), so there is one to find."""
  email = found.values[0].value
  if employee(ctx, str(email).lower()) is None:
    return None
  state = ctx.state(S)
  email = email.lower()
  rostered = any(email in s.rotation for s in state.schedules)
  covering = any(o.email == email and o.end > state.now for o in state.overrides)
  if not rostered and not covering:
    sched = ctx.choice(_lasting_schedules(ctx))
    window = _window(ctx, sched, hours=12)
    if window is None:
      return None
    ctx.put(
      S,
      "overrides",
      {
        "id": ctx.fresh_id("ovr"),
        "schedule_id": sched.id,
        "email": email,
        "start": iso(window[0]),
        "end": iso(window[1]),
        "created_at": iso(state.now - timedelta(days=ctx.rng.randint(1, 6))),
      },
    )
  listed = ctx.call(S, "list_schedules", limit=100)["items"]
  mine = [
    s for s in listed if email in s["rotation"] or any(o["email"] == email for o in s["overrides"])
  ]
  shift = _next_shift(ctx, email, mine)
  if shift is None:
    return None
  return found_time(
    "when their next on-call shift starts",
    shift["start"],
    answer=f"Their next on-call shift starts at {time_label(shift['start'])}.",
  )


def _lasting_schedules(ctx: AuthorContext) -> list:
  return sorted((s for s in ctx.state(S).schedules if s.ends_at is None), key=lambda s: s.id)


# --- sinks ---------------------------------------------------------------------------------


def _override_target(ctx: AuthorContext) -> dict:
  """A free working-day window on a schedule: whoever the walk brings covers it (several
  people take the following days, one each)."""
  schedules = _lasting_schedules(ctx)
  for sched in ctx.rng.sample(schedules, len(schedules)):
    window = _window(ctx, sched)
    if window is not None:
      listed = _find_schedule(ctx, sched.name)
      return {"schedule_id": listed["id"], "schedule": sched.name, "window": window}
  raise AuthoringError("no_free_window")


def _override(ctx: AuthorContext, t: dict, v: Value) -> None:
  if employee(ctx, str(v.value).lower()) is None:
    raise AuthoringError("not_an_employee", str(v.value))
  people = t.setdefault("people", [])
  start, end = (x + timedelta(days=len(people)) for x in t["window"])
  if not _free(ctx, ctx.state(S).schedules.get(t["schedule_id"]), start, end):
    raise AuthoringError("override_window_taken", iso(start))
  people.append(v.value)
  ctx.call(
    S,
    "create_override",
    schedule_id=t["schedule_id"],
    email=v.value,
    start=iso(start),
    end=iso(end),
  )


def _created(ctx: AuthorContext, collection: str, *conds: dict) -> dict:
  """A rubric condition: the agent made a record in ``collection`` that meets ``conds``."""
  return exists(S, collection, *conds, since(ctx, S, "created_at"))


def _override_check(ctx: AuthorContext, t: dict, v: Value) -> dict:
  """One cover shift for the person in the window (of consecutive days, one per person: any
  order will do)."""
  days = max(1, len(t.get("people", ())))
  start, end = t["window"]
  return _created(
    ctx,
    "overrides",
    where("schedule_id", t["schedule_id"]),
    where("email", str(v.value).lower()),
    where("start", iso(start), "ge"),
    where("start", iso(start + timedelta(days=days - 1)), "le"),
    where("end", iso(end), "ge"),
  )


def _window_phrase(ctx: AuthorContext, t: dict, obj: str) -> str:
  start, end = t["window"]
  if len(t.get("people", ())) > 1:
    return (
      f"put {obj} on call on the {t['schedule']} schedule, one each on consecutive days "
      f"starting {start.date().isoformat()}, from {start.strftime('%H:%M')} to "
      f"{end.strftime('%H:%M')}"
    )
  return (
    f"put {obj} on call on the {t['schedule']} schedule from {time_label(iso(start))} to "
    f"{end.strftime('%H:%M')} that day"
  )


facets.sink(
  S,
  "person.email",
  "cover_window",
  prepare=_override_target,
  act=_override,
  check=_override_check,
  phrase=_window_phrase,
  text=lambda ctx, t, v: f"{v.label} has a cover shift on {t['schedule']} (override).",
)


def _cover_target(ctx: AuthorContext) -> dict:
  who, now = colleague(ctx), ctx.state(S).now
  # A schedule with no cover ahead, so any future start time the walk brings is free.
  clear = [
    s
    for s in _lasting_schedules(ctx)
    if not any(o.schedule_id == s.id and o.end > now for o in ctx.state(S).overrides)
  ]
  sched = ctx.choice(clear or _lasting_schedules(ctx))
  listed = _find_schedule(ctx, sched.name)
  return {"schedule_id": listed["id"], "schedule": sched.name, "name": who.name, "email": who.email}


def _start(value) -> datetime:
  return datetime.fromisoformat(str(value)).replace(tzinfo=None)


def _cover_from(ctx: AuthorContext, t: dict, v: Value) -> None:
  try:
    start = _start(v.value)
  except ValueError as err:
    raise AuthoringError("not_a_datetime", str(v.value)) from err
  sched = ctx.state(S).schedules.get(t["schedule_id"])
  if not _free(ctx, sched, start, start + timedelta(hours=4)):
    raise AuthoringError("override_window_taken", str(v.value))
  ctx.call(
    S,
    "create_override",
    schedule_id=t["schedule_id"],
    email=t["email"],
    start=iso(start),
    end=iso(start + timedelta(hours=4)),
  )


facets.sink(
  S,
  "datetime",
  "cover_from_time",
  prepare=_cover_target,
  act=_cover_from,
  check=lambda ctx, t, v: _created(
    ctx,
    "overrides",
    where("schedule_id", t["schedule_id"]),
    where("email", t["email"]),
    where("start", iso(_start(v.value))),
  ),
  phrase=lambda ctx, t, obj: (
    f"put {t['name']} ({t['email']}) on call on the {t['schedule']} schedule for four hours "
    f"starting at {obj}"
  ),
  text=lambda ctx, t, v: f"{t['name']} covers {t['schedule']} for four hours from {v.label}.",
)


def _incident_target(ctx: AuthorContext) -> dict:
  svc = ctx.choice(_services(ctx, active=True))
  taken = {
    i.title for i in ctx.state(S).incidents if i.service_id == svc.id and i.status != "resolved"
  }
  title = ctx.choice([a.format(s=svc.name) for a in ALERTS if a.format(s=svc.name) not in taken])
  found = _find_service(ctx, svc.name)
  return {"service_id": found["id"], "service": svc.name, "title": title}


def _open_described(ctx: AuthorContext, t: dict, v: Value) -> None:
  ctx.scratch["oncall_triggered"] = True
  ctx.call(
    S,
    "trigger_incident",
    service_id=t["service_id"],
    title=t["title"],
    urgency="low",
    description=str(v.value),
  )


facets.sink(
  S,
  "text",
  "open_incident_with_details",
  prepare=_incident_target,
  act=_open_described,
  check=lambda ctx, t, v: _created(
    ctx,
    "incidents",
    where("service_id", t["service_id"]),
    where("title", t["title"]),
    mentions("description", v),
  ),
  phrase=lambda ctx, t, obj: (
    f'open a low-urgency "{t["title"]}" incident on {t["service"]} with {obj} as its description'
  ),
  text=lambda ctx, t, v: f'A "{t["title"]}" incident is open, describing {v.label}.',
  single=True,  # one incident per title
)


def _open_titled(ctx: AuthorContext, t: dict, v: Value) -> None:
  title = str(v.value).strip()
  if any(
    i.service_id == t["service_id"] and i.status != "resolved" and i.title.lower() == title.lower()
    for i in ctx.state(S).incidents
  ):
    raise AuthoringError("incident_already_open", title)
  ctx.scratch["oncall_triggered"] = True
  ctx.call(S, "trigger_incident", service_id=t["service_id"], title=title, urgency="high")


facets.sink(
  S,
  "title",
  "open_incident_titled",
  prepare=_incident_target,
  act=_open_titled,
  check=lambda ctx, t, v: _created(
    ctx, "incidents", where("service_id", t["service_id"]), where("title", str(v.value).strip())
  ),
  phrase=lambda ctx, t, obj: (
    f"open a high-urgency incident on {t['service']} with {obj} as its title"
  ),
  text=lambda ctx, t, v: f'An incident titled "{v.label}" is open on {t["service"]}.',
)


# --- the cover revisit: who is on call then, an override for someone else, who is now -----


def _cover_first(ctx: AuthorContext) -> tuple[Found, dict]:
  for svc in ctx.rng.sample(_services(ctx, lasting=True), len(_services(ctx, lasting=True))):
    window = _window(ctx, _schedule_of(ctx, svc))
    if window is not None:
      break
  else:
    raise AuthoringError("no_free_window")
  at = window[0] + timedelta(hours=ctx.choice((1, 2, 5)))
  hit = _find_service(ctx, svc.name)
  now = ctx.call(S, "get_oncall", service_id=hit["id"], at=iso(at))
  target = {
    "service_id": hit["id"],
    "service": svc.name,
    "schedule_id": now["levels"][0]["schedule_id"],
    "window": window,
    "at": at,
    "email": now["email"],
  }
  found = found_one(
    "person.email",
    f"who is on call for {svc.name} at {time_label(iso(at))}",
    now["email"],
    context={"date": iso(at)[:10]},
  )
  return found, target


def _cover(ctx: AuthorContext, t: dict, v: Value) -> None:
  if str(v.value).lower() == t["email"]:
    raise AuthoringError("same_person_on_call", str(v.value))
  _override(ctx, t, v)


def _cover_second(ctx: AuthorContext, t: dict) -> Found:
  now = ctx.call(S, "get_oncall", service_id=t["service_id"], at=iso(t["at"]))
  return found_one(
    "person.email",
    f"who is now on call for {t['service']} at {time_label(iso(t['at']))}",
    now["email"],
    stale=t["email"],
  )


facets.revisit(
  S,
  kind="person.email",
  kind_in="person.email",
  kind_after="person.email",
  name="cover_shift",
  first=_cover_first,
  second=_cover_second,
  act=_cover,
  check=_override_check,
  phrase=lambda ctx, t, obj: (
    f"have {obj} cover {t['service']}'s on-call from {time_label(iso(t['window'][0]))} to "
    f"{t['window'][1].strftime('%H:%M')} that day with an override"
  ),
  text=lambda ctx, t, v: (
    f"{v.label} covers {t['service']} from {time_label(iso(t['window'][0]))} (override)."
  ),
  single=True,  # one person covers the window
)
