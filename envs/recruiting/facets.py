"""Recruiting facets: candidates, interview panels and offers as sources; screens, interviews,
offers and rejections as sinks; the counter-offer revisit (the offered salary changes)."""

from __future__ import annotations

from datetime import timedelta

from compoworld.tasks.authoring import AuthorContext, AuthoringError
from compoworld.tasks.facets import Found, Value, facets
from compoworld.tasks.rubric import all_of, exists, record_is, where
from envs._facets_common import (
  amount_is,
  amount_of,
  colleague_email,
  currency_of,
  day_of,
  found_day,
  found_money,
  found_one,
  found_people,
  future_slot,
  future_time,
  iso,
  mentions,
  money,
  money_label,
  moved_to,
  time_label,
  today,
)
from envs._world import COMPANIES, CUSTOMER_NAMES, FIRST, LAST, world
from envs.recruiting.state import MAILBOXES, NOTES, ROUNDS, SALARY

S = "recruiting"


def _offer_value(offer: dict) -> Value:
  return money(offer["salary"], offer["currency"])


def _salary_amount(v: Value) -> float:
  amount = v.number if v.number is not None else v.value
  if not isinstance(amount, (int, float)) or amount <= 0:
    raise AuthoringError("salary_not_positive", str(v.value))
  return round(float(amount), 2)


def _salary(ctx: AuthorContext, department: str) -> float:
  return float(SALARY.get(department, 85) * 1000 + ctx.rng.randint(0, 30) * 500)


def _new_name(ctx: AuthorContext) -> str:
  """A candidate name that is nobody else's: not an employee, not a candidate already."""
  taken = {p.name for p in world(ctx.env.seed).people}
  taken |= {c.name for c in ctx.state(S).candidates}
  for _ in range(200):
    name = f"{ctx.choice(FIRST)} {ctx.choice(LAST)}"
    if name not in taken:
      return name
  raise AuthoringError("names_exhausted")


def _staff(ctx: AuthorContext, job: dict, n: int) -> list[str]:
  """``n`` distinct employees to interview for ``job`` (its department first), never the user."""
  w = world(ctx.env.seed)
  pool = [p.email for p in w.people[2:] if p.email != job["hiring_manager"]]
  same = [e for e in pool if w.person(e).department == job["department"]]
  ctx.rng.shuffle(same)
  rest = [e for e in pool if e not in same]
  ctx.rng.shuffle(rest)
  return (same + rest)[:n]


def _candidate(
  ctx: AuthorContext,
  stage: str,
  ratings: tuple[int, ...] = (),
  offer: str | None = None,
  job: dict | None = None,
) -> dict:
  """Puts a candidate with one application at ``stage`` in s0: completed interviews with
  ``ratings`` (one distinct interviewer each) and, if ``offer`` is given, an offer in that
  status. Returns the names the instruction uses."""
  state = ctx.state(S)
  now = state.now
  if job is None:
    open_jobs = sorted((j for j in state.jobs if j.status == "open"), key=lambda j: j.id)
    job = ctx.choice(open_jobs).model_dump(mode="json")
  name = _new_name(ctx)
  first, last = name.lower().split()
  email = f"{first}.{last}{ctx.rng.randint(1, 99)}@{ctx.choice(MAILBOXES)}"
  if any(c.email == email for c in state.candidates):
    raise AuthoringError("email_taken", email)
  created = now - timedelta(days=ctx.rng.randint(20, 40), hours=ctx.rng.randint(0, 8))
  cid, aid = ctx.fresh_id("cand"), ctx.fresh_id("app")
  ctx.put(
    S,
    "candidates",
    {
      "id": cid,
      "name": name,
      "email": email,
      "phone": f"+1-555-{ctx.rng.randint(100, 999)}-{ctx.rng.randint(1000, 9999)}",
      "source": ctx.choice(("careers_site", "referral", "linkedin", "agency", "event")),
      "current_company": ctx.choice((*CUSTOMER_NAMES, *(c for c, _ in COMPANIES))),
      "created_at": iso(created),
    },
  )
  when = created
  for n, (rating, who) in enumerate(zip(ratings, _staff(ctx, job, len(ratings)), strict=True)):
    when = (when + timedelta(days=3)).replace(hour=ctx.choice((10, 11, 14, 15)), minute=0)
    ctx.put(
      S,
      "interviews",
      {
        "id": ctx.fresh_id("int"),
        "application_id": aid,
        "title": ROUNDS[min(n, len(ROUNDS) - 1)],
        "scheduled_at": iso(when),
        "duration_minutes": 30 if n == 0 else 60,
        "interviewers": [who],
        "status": "completed",
        "rating": rating,
        "notes": NOTES[rating],
      },
    )
  if offer is not None:
    ctx.put(
      S,
      "offers",
      {
        "id": ctx.fresh_id("off"),
        "application_id": aid,
        "salary": _salary(ctx, job["department"]),
        "currency": world(ctx.env.seed).currency,
        "start_date": (now.date() + timedelta(days=ctx.rng.randint(14, 45))).isoformat(),
        "status": offer,
        "created_at": iso(now - timedelta(days=2)),
      },
    )
  ctx.put(
    S,
    "applications",
    {
      "id": aid,
      "candidate_id": cid,
      "job_id": job["id"],
      "stage": stage,
      "applied_at": iso(created),
      "updated_at": iso(min(when + timedelta(days=1), now - timedelta(hours=3))),
    },
  )
  return {"name": name, "first": name.split()[0], "title": job["title"], "job": job}


def _application(ctx: AuthorContext, c: dict) -> dict:
  """The agent's way to a candidate's application: search by name, list, open."""
  hits = ctx.call(S, "search_candidates", query=c["name"])["items"]
  cand = next(h for h in hits if h["name"] == c["name"])
  apps = ctx.call(S, "list_applications", candidate_id=cand["id"])["items"]
  return ctx.call(S, "get_application", application_id=apps[0]["id"])


def _open_offer(app: dict) -> dict:
  return next(o for o in app["offers"] if o["status"] in ("extended", "accepted"))


# --- sources -------------------------------------------------------------------------------


@facets.source(S, "person.email")
def candidate_email(ctx: AuthorContext) -> Found:
  c = _candidate(ctx, ctx.choice(("applied", "screen")))
  hits = ctx.call(S, "search_candidates", query=c["name"])["items"]
  cand = next(h for h in hits if h["name"] == c["name"])
  return found_one(
    "person.email",
    f"the email address of {c['name']}, who applied for the {c['title']} role",
    cand["email"],
  )


@facets.source(S, "person.email")
def interview_panel(ctx: AuthorContext) -> Found:
  """The employees who interviewed a candidate; whoever scored them a no is left out."""
  yes = [ctx.choice((3, 4)) for _ in range(ctx.rng.randint(2, 3))]
  no = [ctx.choice((1, 2)) for _ in range(ctx.rng.randint(1, 2))]
  ratings = yes + no
  ctx.rng.shuffle(ratings)
  c = _candidate(ctx, "interview", tuple(ratings))
  app = _application(ctx, c)
  done = [i for i in app["interviews"] if i["status"] == "completed"]
  return found_people(
    f"the people who interviewed {c['name']} for the {c['title']} role",
    [e for i in done if i["rating"] >= 3 for e in i["interviewers"]],
    [e for i in done if i["rating"] <= 2 for e in i["interviewers"]],
    f"who scored {c['first']} a no on their scorecard",
  )


@facets.source(S, "money")
def offered_salary(ctx: AuthorContext) -> Found:
  c = _candidate(ctx, "offer", (3, 4), offer="extended")
  offer = _open_offer(_application(ctx, c))
  return found_money(
    f"the yearly salary in {c['name']}'s offer for the {c['title']} role",
    [_offer_value(offer)],
    offer["currency"],
  )


@facets.source(S, "date")
def accepted_start_date(ctx: AuthorContext) -> Found:
  c = _candidate(ctx, "offer", (3, 4, 3), offer="accepted")
  offer = _open_offer(_application(ctx, c))
  return found_day(
    f"the start date in the offer {c['name']} accepted for the {c['title']} role",
    offer["start_date"],
  )


@facets.source(S, "money")
def open_offer_salaries(ctx: AuthorContext) -> Found:
  """Every open offer for one role (two or three of them): each salary is a value, so their
  total feeds an aggregate."""
  state = ctx.state(S)
  job = ctx.choice(sorted((j for j in state.jobs if j.status == "open"), key=lambda j: j.id))
  job = job.model_dump(mode="json")
  for _ in range(ctx.rng.randint(2, 3)):
    _candidate(ctx, "offer", (4, 3), offer="extended", job=job)
  # The agent's way to the role's id: search the open jobs by the title the instruction gives.
  hits = ctx.call(S, "list_jobs", status="open", query=job["title"])["items"]
  if [j["id"] for j in hits if j["title"] == job["title"]] != [job["id"]]:
    raise AuthoringError("job_title_not_unique", job["title"])
  apps = ctx.call(S, "list_applications", job_id=job["id"], stage="offer", limit=100)["items"]
  offers = []
  for a in apps:
    full = ctx.call(S, "get_application", application_id=a["id"])
    offers += [o for o in full["offers"] if o["status"] in ("extended", "accepted")]
  if len({o["currency"] for o in offers}) != 1:
    raise AuthoringError("mixed_currencies", job["id"])
  return found_money(
    f"the salaries in the open offers for the {job['title']} role",
    [_offer_value(o) for o in offers],
    offers[0]["currency"],
  )


# --- lookups -------------------------------------------------------------------------------


@facets.lookup(S, "company.name", "person.email")
def newest_candidate_from(ctx: AuthorContext, found: Found) -> Found:
  """Someone from that company joined the talent pool this morning."""
  company = str(found.values[0].value)
  name = _new_name(ctx)
  first, last = name.lower().split()
  email = f"{first}.{last}{ctx.rng.randint(1, 99)}@{ctx.choice(MAILBOXES)}"
  ctx.put(
    S,
    "candidates",
    {
      "id": ctx.fresh_id("cand"),
      "name": name,
      "email": email,
      "source": ctx.choice(("referral", "linkedin", "event")),
      "current_company": company,
      "created_at": iso(ctx.state(S).now - timedelta(hours=ctx.rng.randint(1, 3))),
    },
  )
  hits = ctx.call(S, "search_candidates", query=company)["items"]
  hit = next(h for h in hits if h["current_company"].lower() == company.lower())
  return found_one(
    "person.email",
    "the email address of the newest candidate in our pipeline who works there",
    hit["email"],
  )


# --- sinks ---------------------------------------------------------------------------------


def _hm(ctx: AuthorContext, c: dict) -> str:
  boss = world(ctx.env.seed).person(c["job"]["hiring_manager"])
  return f"{boss.name} ({boss.email})" if boss else c["job"]["hiring_manager"]


def _screen_target(ctx: AuthorContext) -> dict:
  c = _candidate(ctx, "screen")
  app = _application(ctx, c)
  return {**c, "app": app["id"], "hm": c["job"]["hiring_manager"], "hm_label": _hm(ctx, c)}


def _interview(ctx: AuthorContext, t: dict, at: str, who: str, title: str, minutes: int) -> None:
  """Schedules an interview of ``t``'s application: ``title``, ``minutes`` long, with ``who``."""
  ctx.call(
    S,
    "schedule_interview",
    application_id=t["app"],
    scheduled_at=at,
    interviewers=[who],
    title=title,
    duration_minutes=minutes,
  )


def _interview_booked(t: dict, *conds: dict) -> dict:
  """A rubric condition: an interview of ``t``'s application meeting ``conds`` is scheduled."""
  return exists(
    S, "interviews", where("application_id", t["app"]), *conds, where("status", "scheduled")
  )


def _candidate_phrase(t: dict) -> str:
  return f"{t['name']}, our candidate for the {t['title']} role"


def _schedule_screen(ctx: AuthorContext, t: dict, v: Value) -> None:
  future_time(ctx, S, v, "datetime_not_ahead")  # the service takes it as it was handed on
  _interview(ctx, t, str(v.value), t["hm"], "Phone screen", 30)


facets.sink(
  S,
  "datetime",
  "schedule_phone_screen",
  prepare=_screen_target,
  act=_schedule_screen,
  check=lambda ctx, t, v: _interview_booked(
    t, where("title", "Phone screen"), where("scheduled_at", str(v.value)[:16], "startswith")
  ),
  phrase=lambda ctx, t, obj: (
    f"schedule a 30-minute phone screen with {_candidate_phrase(t)}, at {obj}, with "
    f"{t['hm_label']} as the interviewer"
  ),
  text=lambda ctx, t, v: f"{t['name']} has a phone screen at {v.label}.",
)


def _panel_target(ctx: AuthorContext) -> dict:
  c = _candidate(ctx, "interview", (ctx.choice((3, 4)),))
  app = _application(ctx, c)
  return {**c, "app": app["id"], "at": iso(future_slot(ctx, S))}


def _add_interviewer(ctx: AuthorContext, t: dict, v: Value) -> None:
  _interview(ctx, t, t["at"], colleague_email(ctx, v), "Team interview", 60)


facets.sink(
  S,
  "person.email",
  "schedule_team_interview",
  prepare=_panel_target,
  act=_add_interviewer,
  check=lambda ctx, t, v: _interview_booked(
    t, where("interviewers", str(v.value).lower(), "icontains"), where("scheduled_at", t["at"])
  ),
  phrase=lambda ctx, t, obj: (
    f"schedule a one-hour team interview for {_candidate_phrase(t)}, at "
    f"{time_label(t['at'])} with {obj} as the interviewer"
  ),
  text=lambda ctx, t, v: f"{v.label} interviews {t['name']} at {t['at']}.",
)


def _offer_target(ctx: AuthorContext) -> dict:
  c = _candidate(ctx, "interview", (3, 4))
  app = _application(ctx, c)
  start = ctx.state(S).now.date() + timedelta(days=ctx.rng.randint(21, 45))
  return {
    **c,
    "app": app["id"],
    "start": start.isoformat(),
    "salary": _salary(ctx, c["job"]["department"]),
  }


def _salary_is(amount: float) -> dict:
  return amount_is("salary", amount, 0.01)


def _offer_start(ctx: AuthorContext, t: dict, v: Value) -> None:
  start = day_of(v)
  if start <= today(ctx, S):
    raise AuthoringError("date_not_ahead", str(v.value))
  ctx.call(
    S, "make_offer", application_id=t["app"], salary=t["salary"], start_date=start.isoformat()
  )


facets.sink(
  S,
  "date",
  "offer_start_date",
  prepare=_offer_target,
  act=_offer_start,
  check=lambda ctx, t, v: exists(
    S,
    "offers",
    where("application_id", t["app"]),
    where("start_date", str(v.value)),
    where("salary", t["salary"]),
    where("status", "extended"),
  ),
  phrase=lambda ctx, t, obj: (
    f"extend {t['name']} an offer for the {t['title']} role at "
    f"{money_label(t['salary'], world(ctx.env.seed).currency)} a year, with {obj} as the start "
    "date"
  ),
  text=lambda ctx, t, v: f"{t['name']} has an offer starting {v.label}.",
  single=True,
)


def _reject_target(ctx: AuthorContext) -> dict:
  c = _candidate(ctx, ctx.choice(("applied", "screen")))
  return {**c, "app": _application(ctx, c)["id"]}


def _reject(ctx: AuthorContext, t: dict, v: Value) -> None:
  ctx.call(S, "reject_application", application_id=t["app"], reason=str(v.value))


facets.sink(
  S,
  "text",
  "reject_with_reason",
  prepare=_reject_target,
  act=_reject,
  check=lambda ctx, t, v: moved_to(
    S, "applications", t["app"], "rejected", mentions("rejection_reason", v), key="stage"
  ),
  phrase=lambda ctx, t, obj: (
    f"reject {t['name']}'s application for the {t['title']} role, giving {obj} as the reason"
  ),
  text=lambda ctx, t, v: f"{t['name']} is rejected with the reason {v.label!r}.",
  single=True,
)


# --- revisit: read an offer's salary, counter with a new offer, read the new salary --------


def _offer_first(ctx: AuthorContext) -> tuple[Found, dict]:
  c = _candidate(ctx, "offer", (3, 4), offer="extended")
  app = _application(ctx, c)
  offer = _open_offer(app)
  found = found_money(
    f"the yearly salary in {c['name']}'s offer for the {c['title']} role",
    [_offer_value(offer)],
    offer["currency"],
  )
  return found, {
    **c,
    "app": app["id"],
    "offer": offer["id"],
    "salary": offer["salary"],
    "start": offer["start_date"],
    "currency": offer["currency"],
  }


def _raise(ctx: AuthorContext, t: dict, v: Value) -> float:
  """The new salary: the old one raised by ``v``, a raise a hiring team would consider (in
  the offer's currency, at most a third of the salary)."""
  amount = _salary_amount(v)
  if (currency_of(v) or world(ctx.env.seed).currency) != t["currency"]:
    raise AuthoringError("currency_mismatch", v.label)
  if amount > t["salary"] / 3:
    raise AuthoringError("raise_too_large", v.label)
  return round(t["salary"] + amount, 2)


def _counter(ctx: AuthorContext, t: dict, v: Value) -> None:
  salary = _raise(ctx, t, v)
  ctx.call(S, "respond_to_offer", offer_id=t["offer"], accepted=False)
  ctx.call(S, "make_offer", application_id=t["app"], salary=salary, start_date=t["start"])


def _counter_check(ctx: AuthorContext, t: dict, v: Value) -> dict:
  amount = amount_of(v)
  return all_of(
    record_is(S, "offers", t["offer"], "status", "declined"),
    exists(
      S,
      "offers",
      where("application_id", t["app"]),
      _salary_is(round(t["salary"] + amount, 2)),
      where("start_date", t["start"]),
      where("status", "extended"),
    ),
  )


def _offer_second(ctx: AuthorContext, t: dict) -> Found:
  offer = _open_offer(ctx.call(S, "get_application", application_id=t["app"]))
  return found_money(
    f"the yearly salary in {t['name']}'s new offer",
    [_offer_value(offer)],
    stale=t["salary"],
    currency=offer["currency"],
  )


facets.revisit(
  S,
  kind="money",
  kind_in="money",
  kind_after="money",
  name="counter_offer",
  first=_offer_first,
  second=_offer_second,
  act=_counter,
  check=_counter_check,
  phrase=lambda ctx, t, obj: (
    f"record that {t['first']} declined that offer and extend a new one with the yearly "
    f"salary raised by {obj}, keeping the same start date"
  ),
  text=lambda ctx, t, v: f"{t['name']} has a new offer raised by {v.label}.",
  single=True,
)
