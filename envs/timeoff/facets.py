"""Time-off facets: who is away on a day, requested vacations and balances as sources; leave
requests and denials as sinks; the approve-vacation revisit (the balance drops)."""

from __future__ import annotations

from datetime import date, timedelta

from compoworld.tasks.authoring import AuthorContext, AuthoringError
from compoworld.tasks.facets import Found, Value, facets
from compoworld.tasks.rubric import exists, where
from envs._facets_common import (
  day_label,
  day_of,
  found_day,
  found_people,
  in_use,
  iso,
  mentions,
  moved_to,
  pick_free,
  since,
  today,
  user_email,
)
from envs.timeoff.service import NOTES, Employee, _business_days, _overlapping

S = "timeoff"


def _who(emp: Employee) -> str:
  return f"{emp.name} (employee {emp.id})"


def _workday(ctx: AuthorContext, lo: int, hi: int) -> date:
  """A business day (no weekend, no company holiday) ``lo``..``hi`` days from today."""
  state = ctx.state(S)
  day = today(ctx, S) + timedelta(days=ctx.rng.randint(lo, hi))
  while day.weekday() >= 5 or day.isoformat() in state.holidays:
    day += timedelta(days=1)
  return day


def _available(ctx: AuthorContext, emp: Employee, policy: str) -> float:
  return ctx.state(S).balances.get(f"{emp.id}:{policy}").available


def _free(ctx: AuthorContext, emp: Employee, start: date, end: date) -> bool:
  return not _overlapping(ctx.state(S).requests, emp.id, start, end)


def _no_plans(ctx: AuthorContext, emp: Employee) -> bool:
  """Nothing pending or approved from today on: any later dates are free."""
  return not any(
    r.employee_id == emp.id and r.status in ("pending", "approved") and r.end_date >= today(ctx, S)
    for r in ctx.state(S).requests
  )


def _colleagues(ctx: AuthorContext, ok=lambda e: True) -> list[Employee]:
  """Employees other than the user and the CEO that no time-off facet of this task used yet."""
  me, busy = user_email(ctx), in_use(ctx, S)
  return sorted(
    (
      e
      for e in ctx.state(S).employees
      if e.email != me and e.manager_email is not None and e.id not in busy and ok(e)
    ),
    key=lambda e: e.id,
  )


def _pick(ctx: AuthorContext, ok=lambda e: True, reserve: bool = True) -> Employee:
  return pick_free(ctx, S, _colleagues(ctx, ok), reserve)


def _put_request(
  ctx: AuthorContext, emp: Employee, policy: str, start: date, end: date, status: str
) -> dict:
  """Adds a request of the scenario; an approved one has its days taken from the balance."""
  state = ctx.state(S)
  days = _business_days(start, end, state.holidays)
  balance = state.balances.get(f"{emp.id}:{policy}")
  if days == 0 or days > balance.available or not _free(ctx, emp, start, end):
    raise AuthoringError("request_not_possible", emp.id)
  created = state.now - timedelta(days=ctx.rng.randint(2, 12), hours=ctx.rng.randint(0, 6))
  record = ctx.put(
    S,
    "requests",
    {
      "id": ctx.fresh_id("tor"),
      "employee_id": emp.id,
      "policy_id": policy,
      "start_date": start.isoformat(),
      "end_date": end.isoformat(),
      "days": days,
      "status": status,
      "approver": emp.manager_email or emp.email,
      "note": ctx.choice([n for n in NOTES[policy] if n] or [""]),
      "created_at": iso(created),
      "decided_at": iso(created + timedelta(hours=5)) if status != "pending" else None,
    },
  )
  if status == "approved":
    ctx.update(
      S,
      "balances",
      balance.id,
      available=balance.available - days,
      used=balance.used + days,
    )
  return record


def _pending_vacation(ctx: AuthorContext) -> tuple[Employee, dict]:
  """Someone with no plans yet asks for a few days of vacation in the coming weeks; the agent
  finds the request by listing the employee's pending vacation requests."""
  emp = _pick(ctx, lambda e: _no_plans(ctx, e) and _available(ctx, e, "vacation") >= 6)
  start = _workday(ctx, 8, 30)
  end = start + timedelta(days=ctx.rng.randint(1, 6))
  _put_request(ctx, emp, "vacation", start, end, "pending")
  hits = ctx.call(S, "list_requests", employee_id=emp.id, status="pending", policy_id="vacation")[
    "items"
  ]
  return emp, ctx.call(S, "get_request", request_id=hits[0]["id"])


# --- sources -------------------------------------------------------------------------------


@facets.source(S, "person.email")
def off_on_day(ctx: AuthorContext) -> Found:
  """A team's people who are away on a coming workday; those out sick are to be left alone."""
  state, day = ctx.state(S), _workday(ctx, 3, 12)
  teams: dict[str, list[Employee]] = {}
  for e in _colleagues(ctx, lambda e: _free(ctx, e, day, day)):
    teams.setdefault(e.department, []).append(e)
  dept = ctx.choice(sorted(d for d, members in teams.items() if len(members) >= 4))
  members = ctx.rng.sample(teams[dept], 3)
  in_use(ctx, S).update(m.id for m in members)
  for i, emp in enumerate(members):
    policy = "sick" if i == 0 else ctx.choice(("vacation", "vacation", "personal"))
    start, end = day, day
    if policy == "vacation":
      start = day - timedelta(days=ctx.rng.randint(0, 2))
      end = day + timedelta(days=ctx.rng.randint(0, 3))
      if start <= today(ctx, S) or not _free(ctx, emp, start, end):
        start, end = day, day
    if _business_days(start, end, state.holidays) > _available(ctx, emp, policy):
      raise AuthoringError("balance_too_low", emp.id)
    _put_request(ctx, emp, policy, start, end, "approved")
  out = ctx.call(S, "who_is_out", day=day.isoformat(), department=dept)
  away = list(dict.fromkeys(o["email"] for o in out if o["policy_id"] != "sick"))
  sick = list(dict.fromkeys(o["email"] for o in out if o["policy_id"] == "sick"))
  return found_people(
    f"the people in {dept} who are off on {day_label(day)}",
    [e for e in away if e not in sick],
    sick,
    "who is out sick that day",
    context={"date": day.isoformat()},
  )


@facets.source(S, "date")
def vacation_start(ctx: AuthorContext) -> Found:
  emp, req = _pending_vacation(ctx)
  return found_day(f"the first day of the vacation {_who(emp)} has requested", req["start_date"])


@facets.source(S, "number")
def vacation_left(ctx: AuthorContext) -> Found:
  emp = _pick(ctx, reserve=False)
  balance = ctx.call(S, "get_balance", employee_id=emp.id, policy_id="vacation")[0]
  days = balance["available"]
  return Found(
    "number",
    f"how many vacation days {_who(emp)} has left",
    [Value(days, f"{days:g} days", float(days))],
  )


# --- lookups -------------------------------------------------------------------------------


@facets.lookup(S, "employee.id", "number")
def vacation_left_of(ctx: AuthorContext, found: Found) -> Found:
  employee_id = str(found.values[0].value)
  if employee_id not in ctx.state(S).employees:
    raise AuthoringError("not_an_employee", employee_id)
  days = ctx.call(S, "get_balance", employee_id=employee_id, policy_id="vacation")[0]["available"]
  return Found(
    "number", "how many vacation days they have left", [Value(days, f"{days:g} days", days)]
  )


@facets.lookup(S, "date", "number")
def out_count(ctx: AuthorContext, found: Found) -> Found:
  try:
    day = date.fromisoformat(str(found.values[0].value)[:10])
  except ValueError as err:
    raise AuthoringError("not_a_date", str(found.values[0].value)) from err
  out = ctx.call(S, "who_is_out", day=day.isoformat())
  count = len({o["employee_id"] for o in out})
  return Found(
    "number",
    "how many people are on approved time off that day",
    [Value(count, f"{count} {'person' if count == 1 else 'people'}", float(count))],
  )


# --- sinks ---------------------------------------------------------------------------------


def _week_target(ctx: AuthorContext) -> dict:
  """Someone with no plans and a full week of vacation left, so any coming week is free."""
  emp = _pick(ctx, lambda e: _no_plans(ctx, e) and _available(ctx, e, "vacation") >= 5)
  return {"id": emp.id, "who": _who(emp)}


def _book_week(ctx: AuthorContext, t: dict, v: Value) -> None:
  start = day_of(v)
  if start <= today(ctx, S):
    raise AuthoringError("date_not_ahead", str(v.value))
  ctx.call(
    S,
    "request_time_off",
    employee_id=t["id"],
    policy_id="vacation",
    start_date=start.isoformat(),
    end_date=(start + timedelta(days=4)).isoformat(),
    note="Week off",
  )


def _requested(ctx: AuthorContext, employee_id: str, policy: str, *conds: dict) -> dict:
  """A rubric condition: the agent requested ``policy`` time off for ``employee_id``, as
  ``conds`` say."""
  return exists(
    S,
    "requests",
    where("employee_id", employee_id),
    where("policy_id", policy),
    *conds,
    since(ctx, S, "created_at"),
  )


def _end_of_week(v: Value) -> str:
  try:
    return (date.fromisoformat(str(v.value)) + timedelta(days=4)).isoformat()
  except ValueError:
    return ""


facets.sink(
  S,
  "date",
  "request_week_off",
  prepare=_week_target,
  act=_book_week,
  check=lambda ctx, t, v: _requested(
    ctx, t["id"], "vacation", where("start_date", str(v.value)), where("end_date", _end_of_week(v))
  ),
  phrase=lambda ctx, t, obj: (
    f"put in a vacation request for {t['who']} covering the five days that start on {obj}"
  ),
  text=lambda ctx, t, v: f"{t['who']} has a vacation request starting {v.label}.",
  single=True,
)


def _personal_day(ctx: AuthorContext, t: dict, v: Value) -> None:
  state, day = ctx.state(S), date.fromisoformat(t["day"])
  emp = state.employees.find(str(v.value))
  if emp is None:
    raise AuthoringError("not_an_employee", str(v.value))
  if _available(ctx, emp, "personal") < 1 or not _free(ctx, emp, day, day):
    raise AuthoringError("personal_day_not_possible", emp.id)
  in_use(ctx, S).add(emp.id)  # no later scenario request may be put on a day this one takes
  ctx.call(
    S,
    "request_time_off",
    employee_id=emp.id,
    policy_id="personal",
    start_date=t["day"],
    end_date=t["day"],
    note=t["note"],
  )


facets.sink(
  S,
  "employee.id",
  "request_personal_day",
  prepare=lambda ctx: {
    "day": _workday(ctx, 4, 20).isoformat(),
    "note": ctx.choice(("Team volunteering day", "Moving house", "Family event")),
  },
  act=_personal_day,
  check=lambda ctx, t, v: _requested(ctx, str(v.value), "personal", where("start_date", t["day"])),
  phrase=lambda ctx, t, obj: (
    f"request a personal day for {'that employee' if obj == 'it' else obj} on "
    f'{day_label(t["day"])} with the note "{t["note"]}"'
  ),
  text=lambda ctx, t, v: f"Employee {v.label} has a personal day requested for {t['day']}.",
)


def _deny_target(ctx: AuthorContext) -> dict:
  emp, req = _pending_vacation(ctx)
  return {"id": req["id"], "who": _who(emp), "start": req["start_date"], "end": req["end_date"]}


facets.sink(
  S,
  "text",
  "deny_with_reason",
  prepare=_deny_target,
  act=lambda ctx, t, v: ctx.call(S, "deny_request", request_id=t["id"], note=str(v.value)),
  check=lambda ctx, t, v: moved_to(S, "requests", t["id"], "denied", mentions("decision_note", v)),
  phrase=lambda ctx, t, obj: (
    f"deny the vacation request {t['who']} made for {day_label(t['start'])} to "
    f"{day_label(t['end'])}, giving {obj} as the reason"
  ),
  text=lambda ctx, t, v: f"{t['who']}'s vacation request is denied with the note {v.label!r}.",
  single=True,
)


# --- revisit: read a pending vacation, approve it, read the balance that dropped ----------


def _vacation_first(ctx: AuthorContext) -> tuple[Found, dict]:
  emp, req = _pending_vacation(ctx)
  balance = ctx.call(S, "get_balance", employee_id=emp.id, policy_id="vacation")[0]
  found = found_day(f"the first day of the vacation {_who(emp)} has requested", req["start_date"])
  return found, {
    "id": req["id"],
    "employee": emp.id,
    "who": _who(emp),
    "left": balance["available"],
  }


def _balance_second(ctx: AuthorContext, t: dict) -> Found:
  days = ctx.call(S, "get_balance", employee_id=t["employee"], policy_id="vacation")[0]["available"]
  return Found(
    "number",
    f"how many vacation days {t['who']} has left now",
    [Value(days, f"{days:g} days", days)],
    stale=t["left"],
  )


facets.revisit(
  S,
  kind="date",
  kind_in="text",
  kind_after="number",
  name="approve_vacation",
  first=_vacation_first,
  second=_balance_second,
  change="approve_with_note",
  act=lambda ctx, t, v: ctx.call(S, "approve_request", request_id=t["id"], note=str(v.value)),
  check=lambda ctx, t, v: moved_to(
    S, "requests", t["id"], "approved", mentions("decision_note", v)
  ),
  phrase=lambda ctx, t, obj: f"approve that vacation request with {obj} as the note",
  text=lambda ctx, t, v: f"{t['who']}'s vacation is approved with the note {v.label!r}.",
  single=True,
)
