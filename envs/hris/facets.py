"""HRIS facets: the employee directory as a source of people, managers, ids and dates; role
changes and resignations as sinks; the transfer revisit (a transfer changes the manager)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from datetime import timedelta

from compoworld.tasks.authoring import AuthorContext, AuthoringError
from compoworld.tasks.facets import Found, Value, facets
from compoworld.tasks.rubric import all_of, exists, record_is, where
from envs._facets_common import (
  day_of,
  found_day,
  found_one,
  found_people,
  in_use,
  iso,
  pick_free,
  since,
  user_email,
)
from envs._world import DEPARTMENTS, TITLES
from envs.hris.service import LEAVE_NOTES, Employee

S = "hris"


def _is_manager(ctx: AuthorContext, emp: Employee) -> bool:
  state = ctx.state(S)
  return any(d.head_id == emp.id for d in state.departments) or any(
    e.manager_id == emp.id and e.status != "terminated" for e in state.employees
  )


def _pick(
  ctx: AuthorContext, ok: Callable[[Employee], bool] = lambda e: True, reserve: bool = True
) -> Employee:
  """An active employee other than the user and the CEO whom nobody reports to."""
  options = (
    e
    for e in ctx.state(S).employees
    if e.status == "active"
    and e.manager_id is not None
    and e.email != user_email(ctx)
    and e.updated_at.isoformat() < ctx.since(S)
    and not _is_manager(ctx, e)
    and ok(e)
  )
  return pick_free(ctx, S, options, reserve)


def _find(ctx: AuthorContext, name: str) -> dict:
  """The agent's way to an employee: search the directory by name, then open the record."""
  hits = ctx.call(S, "search_employees", query=name)["items"]
  hit = next(e for e in hits if e["name"] == name)
  return ctx.call(S, "get_employee", employee_id=hit["id"])


def _by_email(ctx: AuthorContext, email: object) -> Employee | None:
  address = str(email).lower()
  return next((e for e in ctx.state(S).employees if e.email == address), None)


def _history(ctx: AuthorContext, t: dict, v: Value, kind: str, *also: dict) -> dict:
  """A rubric condition: ``t``'s job history has a ``kind`` entry, effective the date ``v``
  names, that the agent recorded and that meets ``also``."""
  return exists(
    S,
    "job_history",
    where("employee_id", t["id"]),
    where("kind", kind),
    *also,
    where("effective_date", str(v.value)),
    since(ctx, S, "recorded_at"),
  )


# --- sources -------------------------------------------------------------------------------


@facets.source(S, "person.email")
def department_head(ctx: AuthorContext) -> Found:
  depts = ctx.call(S, "list_departments")
  dept = ctx.choice([d for d in depts if d["head_email"] and d["head_email"] != user_email(ctx)])
  return found_one(
    "person.email",
    f"the email address of the head of the {dept['name']} department",
    dept["head_email"],
  )


@facets.source(S, "person.email")
def manager_of(ctx: AuthorContext) -> Found:
  emp = _find(ctx, _pick(ctx, reserve=False).name)
  boss = ctx.call(S, "get_employee", employee_id=emp["manager_id"])
  return found_one("person.email", f"the email address of {emp['name']}'s manager", boss["email"])


@facets.source(S, "person.email")
def team_by_title(ctx: AuthorContext) -> Found:
  """Everyone with one job title in a department; whoever is on leave is to be left out (one
  of them is put on leave when nobody is)."""
  state, busy = ctx.state(S), in_use(ctx, S)
  groups: dict[tuple[str, str], list[Employee]] = defaultdict(list)
  for e in sorted(state.employees, key=lambda e: e.id):
    if e.status != "terminated" and e.manager_id is not None and e.email != user_email(ctx):
      groups[(e.department, e.title)].append(e)
  options = [
    key
    for key, members in sorted(groups.items())
    if 2 <= len(members) <= 5
    and not key[1].startswith("Head of")
    and not any(m.id in busy for m in members)
    and any(m.status == "active" for m in members)
  ]
  dept, title = ctx.choice(options)
  members = groups[(dept, title)]
  busy.update(m.id for m in members)
  if not any(m.status == "on_leave" for m in members):
    away = ctx.choice(
      [m for m in members if not _is_manager(ctx, m) and m.updated_at.isoformat() < ctx.since(S)]
    )
    when = state.now - timedelta(days=ctx.rng.randint(3, 30))
    ctx.update(S, "employees", away.id, status="on_leave", updated_at=iso(when))
    ctx.put(
      S,
      "job_history",
      {
        "id": ctx.fresh_id("job"),
        "employee_id": away.id,
        "kind": "status",
        "effective_date": when.date().isoformat(),
        "title": away.title,
        "department": away.department,
        "manager_id": away.manager_id,
        "status": "on_leave",
        "note": ctx.choice(LEAVE_NOTES),
        "recorded_at": iso(when),
      },
    )
  hits = ctx.call(S, "search_employees", department=dept, title=title, limit=100)["items"]
  hits = [h for h in hits if h["title"] == title]
  return found_people(
    f"the {title}s in the {dept} department",
    [h["email"] for h in hits if h["status"] == "active"],
    [h["email"] for h in hits if h["status"] == "on_leave"],
    "who is on leave",
  )


@facets.source(S, "employee.id")
def employee_id_of(ctx: AuthorContext) -> Found:
  name = _pick(ctx, reserve=False).name
  hit = next(e for e in ctx.call(S, "search_employees", query=name)["items"] if e["name"] == name)
  return found_one("employee.id", f"the employee id of {name}", hit["id"])


@facets.source(S, "person.name")
def newest_hire(ctx: AuthorContext) -> Found:
  """The most recent hire of a department (a department whose latest hire date is unique)."""
  state = ctx.state(S)
  options = []
  for dept in DEPARTMENTS:
    dates = sorted(
      (e.hire_date for e in state.employees if e.department == dept and e.status != "terminated"),
      reverse=True,
    )
    if len(dates) >= 2 and dates[0] != dates[1]:
      options.append(dept)
  dept = ctx.choice(options)
  team = ctx.call(S, "search_employees", department=dept, limit=100)["items"]
  newest = max(team, key=lambda e: e["hire_date"])
  return found_one(
    "person.name", f"the name of the most recent hire in the {dept} department", newest["name"]
  )


@facets.source(S, "date")
def role_change_date(ctx: AuthorContext) -> Found:
  """A move to another role was recorded yesterday and takes effect in a few weeks."""
  state = ctx.state(S)
  emp = _pick(ctx, lambda e: len(TITLES.get(e.department, ())) > 1)
  title = ctx.choice([t for t in TITLES[emp.department] if t != emp.title])
  recorded = state.now - timedelta(days=1)
  effective = (state.now + timedelta(days=ctx.rng.randint(7, 30))).date()
  ctx.update(S, "employees", emp.id, title=title, updated_at=iso(recorded))
  ctx.put(
    S,
    "job_history",
    {
      "id": ctx.fresh_id("job"),
      "employee_id": emp.id,
      "kind": "job_change",
      "effective_date": effective.isoformat(),
      "title": title,
      "department": emp.department,
      "manager_id": emp.manager_id,
      "status": "active",
      "note": "Role change",
      "recorded_at": iso(recorded),
    },
  )
  rec = _find(ctx, emp.name)
  history = ctx.call(S, "get_job_history", employee_id=rec["id"])
  change = next(c for c in reversed(history) if c["kind"] == "job_change")
  return found_day(
    f"the date {emp.name}'s move to the {title} role takes effect", change["effective_date"]
  )


@facets.source(S, "date")
def hire_date(ctx: AuthorContext) -> Found:
  emp = _find(ctx, _pick(ctx, reserve=False).name)
  return found_day(f"the date {emp['name']} joined the company", emp["hire_date"])


# --- lookups -------------------------------------------------------------------------------


@facets.lookup(S, "person.email", "employee.id")
def employee_id_for_email(ctx: AuthorContext, found: Found) -> Found:
  if _by_email(ctx, found.values[0].value) is None:
    raise AuthoringError("not_an_employee", str(found.values[0].value))
  emp = ctx.call(S, "find_employee_by_email", email=str(found.values[0].value))
  return found_one("employee.id", "their employee id", emp["id"])


@facets.lookup(S, "person.name", "person.email")
def work_email_of(ctx: AuthorContext, found: Found) -> Found:
  name = str(found.values[0].value)
  hits = ctx.call(S, "search_employees", query=name)["items"]
  hit = next((e for e in hits if e["name"].lower() == name.lower()), None)
  if hit is None:  # a former employee still has their address on file
    hits = ctx.call(S, "search_employees", query=name, status="terminated")["items"]
    hit = next((e for e in hits if e["name"].lower() == name.lower()), None)
  if hit is None:
    raise AuthoringError("not_an_employee", name)
  return found_one("person.email", "their work email address", hit["email"])


@facets.lookup(S, "employee.id", "person.email")
def manager_email_of(ctx: AuthorContext, found: Found) -> Found:
  employee_id = str(found.values[0].value)
  if employee_id not in ctx.state(S).employees:
    raise AuthoringError("not_an_employee", employee_id)
  emp = ctx.call(S, "get_employee", employee_id=employee_id)
  if emp["manager_id"] is None:
    raise AuthoringError("no_manager", employee_id)
  boss = ctx.call(S, "get_employee", employee_id=emp["manager_id"])
  return found_one("person.email", "the email address of their manager", boss["email"])


# --- sinks ---------------------------------------------------------------------------------


def _role_change_target(ctx: AuthorContext) -> dict:
  emp = _pick(ctx, lambda e: len(TITLES.get(e.department, ())) > 1)
  rec = _find(ctx, emp.name)
  title = ctx.choice([t for t in TITLES[emp.department] if t != emp.title])
  return {"id": rec["id"], "name": rec["name"], "title": title}


def _change_role(ctx: AuthorContext, t: dict, v: Value) -> None:
  ctx.call(
    S,
    "update_job",
    employee_id=t["id"],
    title=t["title"],
    effective_date=str(v.value),
    note="Role change",
  )


facets.sink(
  S,
  "date",
  "record_role_change",
  prepare=_role_change_target,
  act=_change_role,
  check=lambda ctx, t, v: _history(ctx, t, v, "job_change", where("title", t["title"])),
  phrase=lambda ctx, t, obj: (
    f"record {t['name']}'s move to the {t['title']} role in the HR directory, effective {obj}"
  ),
  text=lambda ctx, t, v: f"{t['name']} moves to the {t['title']} role effective {v.label}.",
  single=True,
)


def _resignation_target(ctx: AuthorContext) -> dict:
  rec = _find(ctx, _pick(ctx).name)
  return {"id": rec["id"], "name": rec["name"], "hired": rec["hire_date"]}


def _terminate(ctx: AuthorContext, t: dict, v: Value) -> None:
  day = day_of(v)
  if day.isoformat() < t["hired"]:
    raise AuthoringError("before_hire_date", str(v.value))
  ctx.call(
    S,
    "terminate_employee",
    employee_id=t["id"],
    termination_date=day.isoformat(),
    reason="Resigned",
  )


facets.sink(
  S,
  "date",
  "process_resignation",
  prepare=_resignation_target,
  act=_terminate,
  check=lambda ctx, t, v: _history(ctx, t, v, "termination"),
  phrase=lambda ctx, t, obj: (
    f"process {t['name']}'s resignation in the HR directory with {obj} as their last working day"
  ),
  text=lambda ctx, t, v: f"{t['name']} is terminated with last day {v.label}.",
  single=True,
)


# --- revisit: read who someone reports to, transfer them, read their new manager ----------


def _manager_first(ctx: AuthorContext) -> tuple[Found, dict]:
  emp = _find(ctx, _pick(ctx).name)
  boss = ctx.call(S, "get_employee", employee_id=emp["manager_id"])
  found = found_one("person.email", f"the email address of {emp['name']}'s manager", boss["email"])
  # A department with a head other than the current manager: the transfer changes the manager.
  depts = ctx.state(S).departments
  dept = ctx.choice(
    sorted(
      d.id
      for d in depts
      if d.id != emp["department"] and d.head_id and d.head_id != emp["manager_id"]
    )
  )
  return found, {"id": emp["id"], "name": emp["name"], "manager": boss["email"], "to": dept}


def _transfer(ctx: AuthorContext, t: dict, v: Value) -> None:
  ctx.call(
    S, "transfer_department", employee_id=t["id"], department=t["to"], effective_date=str(v.value)
  )


def _manager_second(ctx: AuthorContext, t: dict) -> Found:
  emp = ctx.call(S, "get_employee", employee_id=t["id"])
  boss = ctx.call(S, "get_employee", employee_id=emp["manager_id"])
  return found_one(
    "person.email",
    f"the email address of {t['name']}'s manager now",
    boss["email"],
    stale=t["manager"],
  )


facets.revisit(
  S,
  kind="person.email",
  kind_in="date",
  kind_after="person.email",
  name="transfer_changes_manager",
  first=_manager_first,
  second=_manager_second,
  change="transfer_effective",
  act=_transfer,
  check=lambda ctx, t, v: all_of(
    record_is(S, "employees", t["id"], "department", t["to"]),
    _history(ctx, t, v, "transfer", where("department", t["to"])),
  ),
  phrase=lambda ctx, t, obj: (
    f"record {t['name']}'s transfer to the {t['to']} department, effective {obj}, "
    "reporting to that department's head"
  ),
  text=lambda ctx, t, v: f"{t['name']} is transferred to {t['to']} effective {v.label}.",
  single=True,
)
