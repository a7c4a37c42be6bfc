"""Time off: a BambooHR/Workday-like leave tracker of policies, balances, requests and holidays.

Every employee of the home company (the shared world's people, keyed by employee id) has one
balance per time-off policy ("vacation", "sick", "personal"): the days still available and the
days already used this year. An employee requests days off under a policy; the request counts
business days only (weekends and company holidays are free) and waits, "pending", for the
employee's manager, who approves or denies it. The company holiday calendar is listed too.

Rules a leave user expects: a request ends on or after its start and covers at least one
business day; it may not ask for more days than are available, nor overlap another pending or
approved request of the same employee; only the employee's manager decides a request, and only
while it is pending; approving deducts the days from the balance (so a balance that has since
run short blocks the approval); a cancelled request that was approved gives its days back, and
only requests that have not started yet can be cancelled; a manual balance adjustment cannot
make the balance negative.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta
from typing import Annotated, Literal

from pydantic import Field

from compoworld import Conflict, InvalidArgument, Service, registry, tool
from compoworld.runtime.fields import Email, Text
from compoworld.runtime.query import select
from compoworld.runtime.state import Record, ServiceState, Table
from envs._world import seeded

PolicyId = Literal["vacation", "sick", "personal"]
RequestStatus = Literal["pending", "approved", "denied", "cancelled"]
Days = Annotated[float, Field(ge=-365, le=365, description="A number of days (halves allowed).")]


class Employee(Record):
  id: str  # the employee id, e.g. E1042
  name: str
  email: str
  department: str
  manager_email: str | None = None  # who approves their requests; None for the CEO


class Policy(Record):
  id: str  # "vacation", "sick" or "personal"
  name: str
  annual_days: float
  description: str = ""


class Adjustment(Record):
  days: float
  reason: str
  at: datetime


class Balance(Record):
  id: str  # "<employee id>:<policy id>"
  employee_id: str
  policy_id: str
  available: float
  used: float = 0.0
  adjustments: tuple[Adjustment, ...] = ()  # manual changes, for the audit trail


class Request(Record):
  employee_id: str
  policy_id: str
  start_date: date
  end_date: date
  days: float  # business days: weekends and company holidays excluded
  status: RequestStatus = "pending"
  approver: str  # the manager's email (the CEO approves their own)
  note: str = ""
  decision_note: str = ""
  created_at: datetime
  decided_at: datetime | None = None


class Holiday(Record):
  id: str  # the ISO date, e.g. "2026-04-03"
  name: str


class TimeOffState(ServiceState):
  employees: Table[Employee]
  policies: Table[Policy]
  balances: Table[Balance]
  requests: Table[Request]
  holidays: Table[Holiday]


POLICIES = (
  ("vacation", "Vacation", 20.0, "Paid vacation; up to 5 unused days carry over each year."),
  ("sick", "Sick leave", 10.0, "Paid sick days; no carry-over."),
  ("personal", "Personal days", 3.0, "Moving, appointments, family matters."),
)
HOLIDAYS = (
  ("2026-01-01", "New Year's Day"),
  ("2026-01-19", "Martin Luther King Jr. Day"),
  ("2026-02-16", "Presidents' Day"),
  ("2026-04-03", "Good Friday"),
  ("2026-05-25", "Memorial Day"),
  ("2026-07-03", "Independence Day (observed)"),
  ("2026-09-07", "Labor Day"),
  ("2026-11-26", "Thanksgiving"),
  ("2026-11-27", "Day after Thanksgiving"),
  ("2026-12-24", "Christmas Eve"),
  ("2026-12-25", "Christmas Day"),
  ("2027-01-01", "New Year's Day"),
)
NOTES = {
  "vacation": ("Family trip", "Beach week", "Visiting parents", "Wedding", "Ski trip", ""),
  "sick": ("Flu", "Doctor's orders", "Migraine", ""),
  "personal": ("Moving house", "Dentist", "School event", ""),
}


def _business_days(start: date, end: date, holidays) -> float:
  day, count = start, 0
  while day <= end:
    if day.weekday() < 5 and day.isoformat() not in holidays:
      count += 1
    day += timedelta(days=1)
  return float(count)


def _overlapping(requests: Table[Request], employee_id: str, start: date, end: date) -> list:
  """The employee's pending or approved requests that share a day with start..end."""
  return requests.filter(
    lambda r: (
      r.employee_id == employee_id
      and r.status in ("pending", "approved")
      and r.start_date <= end
      and start <= r.end_date
    )
  )


@registry.register
class TimeOffService(Service):
  name = "timeoff"
  domain = "hr"
  description = "Time-off policies, balances and requests: request, approve, deny, cancel leave."
  State = TimeOffState

  @classmethod
  def generate(cls, seed: int, size: int | None) -> TimeOffState:
    rng, w, state = seeded(cls, seed)
    today = state.now.date()
    for pid, name, days, desc in POLICIES:
      state.policies.insert(Policy(id=pid, name=name, annual_days=days, description=desc))
    for day, name in HOLIDAYS:
      state.holidays.insert(Holiday(id=day, name=name))
    for p in w.people:
      state.employees.insert(
        Employee(
          id=p.employee_id,
          name=p.name,
          email=p.email,
          department=p.department,
          manager_email=p.manager_email,
        )
      )
      for pid, _, days, _ in POLICIES:
        carry = rng.randint(0, 5) if pid == "vacation" else 0
        state.balances.insert(
          Balance(
            id=f"{p.employee_id}:{pid}",
            employee_id=p.employee_id,
            policy_id=pid,
            available=days + carry,
          )
        )
    people, target, attempts = list(w.people), size if size is not None else 40, 0
    while len(state.requests) < target and attempts < target * 20:
      attempts += 1
      p = rng.choice(people)
      pid = rng.choices(("vacation", "sick", "personal"), (0.6, 0.25, 0.15))[0]
      # The first two requests span today, so someone is always out.
      offset = -rng.randint(0, 2) if len(state.requests) < 2 else rng.randint(-55, 60)
      start = today + timedelta(days=offset)
      while start.weekday() >= 5 or start.isoformat() in state.holidays:
        start += timedelta(days=1)
      length = {"vacation": rng.randint(1, 10), "sick": rng.randint(1, 3), "personal": 1}[pid]
      end, counted = start, 1
      while counted < length:
        end += timedelta(days=1)
        counted = _business_days(start, end, state.holidays)
      if len(state.requests) < 2 and end < today:
        end = today
      days = _business_days(start, end, state.holidays)
      if end < today:
        status = rng.choices(("approved", "denied", "cancelled"), (0.75, 0.15, 0.1))[0]
      elif start <= today:
        status = "approved"
      else:
        status = rng.choices(("pending", "approved", "denied", "cancelled"), (9, 8, 1.5, 1.5))[0]
      balance = state.balances.get(f"{p.employee_id}:{pid}")
      live = _overlapping(state.requests, p.employee_id, start, end)
      if live or (status in ("approved", "pending") and days > balance.available):
        continue
      created = datetime.combine(start, state.now.time()) - timedelta(days=rng.randint(3, 30))
      created = min(created, state.now - timedelta(hours=rng.randint(2, 72)))
      decided = None
      if status != "pending":
        decided = min(created + timedelta(hours=5), state.now - timedelta(hours=1))
      state.requests.insert(
        Request(
          id=state.new_id("tor"),
          employee_id=p.employee_id,
          policy_id=pid,
          start_date=start,
          end_date=end,
          days=days,
          status=status,
          approver=p.manager_email or p.email,
          note=rng.choice(NOTES[pid]),
          decision_note="Team is short that week" if status == "denied" else "",
          created_at=created,
          decided_at=decided,
        )
      )
      if status == "approved":
        state.balances.update(
          balance.id, available=balance.available - days, used=balance.used + days
        )
    return state

  # --- helpers -----------------------------------------------------------------------------

  def _balance(self, employee_id: str, policy_id: str) -> Balance:
    self.state.employees.get(employee_id)
    self.state.policies.get(policy_id)
    return self.state.balances.get(f"{employee_id}:{policy_id}")

  def _pending(self, request_id: str, approver: str | None) -> Request:
    req = self.state.requests.get(request_id)
    if req.status != "pending":
      raise Conflict(
        f"request '{request_id}' is {req.status}; only pending requests can be approved or denied"
      )
    if approver is not None and approver.lower() != req.approver:
      raise Conflict(
        f"request '{request_id}' can only be decided by {req.approver} (the employee's "
        f"manager), not {approver.lower()}"
      )
    return req

  # --- reads -------------------------------------------------------------------------------

  @tool(mutates=False, produces=("number",))
  def list_policies(self) -> list[Policy]:
    """List the time-off policies with their yearly allowance in days."""
    return sorted(self.state.policies, key=lambda p: p.id)

  @tool(mutates=False, consumes=("employee.id",), produces=("number",))
  def get_balance(self, employee_id: str, policy_id: PolicyId | None = None) -> list[Balance]:
    """Get an employee's time-off balances: days available and used, per policy.

    Args:
      employee_id: the employee id, e.g. "E1042".
      policy_id: only this policy ("vacation", "sick" or "personal"); all by default.
    """
    self.state.employees.get(employee_id)
    return [
      self._balance(employee_id, p.id)
      for p in sorted(self.state.policies, key=lambda p: p.id)
      if policy_id is None or p.id == policy_id
    ]

  @tool(
    mutates=False,
    page="request",
    produces=("request.id", "employee.id", "date", "status", "person.email"),
  )
  def list_requests(
    self,
    employee_id: str | None = None,
    status: RequestStatus | None = None,
    policy_id: PolicyId | None = None,
    approver: Email | None = None,
    start_after: date | None = None,
    start_before: date | None = None,
  ) -> list:
    """List time-off requests in start-date order, optionally filtered.

    Args:
      employee_id: only this employee's requests.
      status: only requests with this status ("pending", "approved", "denied", "cancelled").
      policy_id: only requests under this policy.
      approver: only requests this manager (email) decides.
      start_after: only requests starting on or after this date (ISO date).
      start_before: only requests starting before this date (ISO date).
    """
    self.state.employees.check(employee_id)
    who = approver.lower() if approver else None
    return select(
      self.state.requests,
      eq={"employee_id": employee_id, "status": status, "policy_id": policy_id, "approver": who},
      ge={"start_date": start_after},
      lt={"start_date": start_before},
      key=lambda r: (r.start_date, r.id),
    )

  @tool(mutates=False, produces=("employee.id", "date", "status", "person.email", "number"))
  def get_request(self, request_id: str) -> Request:
    """Get one time-off request with its dates, business days, status and approver.

    Args:
      request_id: the request's id.
    """
    return self.state.requests.get(request_id)

  @tool(mutates=False, consumes=("date",), produces=("number",))
  def count_business_days(self, start_date: date, end_date: date) -> dict:
    """Count the business days between two dates, both included, as a request would: weekends
    and company holidays are not counted.

    Args:
      start_date: first day (ISO date).
      end_date: last day (ISO date), on or after the first.
    """
    if end_date < start_date:
      raise InvalidArgument(f"end_date ({end_date}) must not be before start_date ({start_date})")
    holidays = [h for h in self.state.holidays if start_date.isoformat() <= h.id]
    holidays = [h for h in holidays if h.id <= end_date.isoformat()]
    return {
      "business_days": _business_days(start_date, end_date, self.state.holidays),
      "holidays": sorted(holidays, key=lambda h: h.id),
    }

  @tool(mutates=False, produces=("date", "title"))
  def list_holidays(self, year: int | None = None) -> list[Holiday]:
    """List the company holidays in date order.

    Args:
      year: only holidays of this year, e.g. 2026.
    """
    return sorted(
      (h for h in self.state.holidays if year is None or h.id.startswith(f"{year}-")),
      key=lambda h: h.id,
    )

  @tool(
    mutates=False,
    consumes=("date", "department"),
    produces=("employee.id", "person.email", "person.name", "date"),
  )
  def who_is_out(self, day: date | None = None, department: str | None = None) -> list[dict]:
    """List the employees on approved time off on a day, in employee-id order.

    Args:
      day: the day to check (ISO date); today by default.
      department: only employees of this department.
    """
    when = day or self.state.now.date()
    out = []
    for r in self.state.requests:
      if r.status != "approved" or not r.start_date <= when <= r.end_date:
        continue
      emp = self.state.employees.get(r.employee_id)
      if department is None or emp.department.lower() == department.lower():
        out.append(
          {
            "employee_id": emp.id,
            "name": emp.name,
            "email": emp.email,
            "department": emp.department,
            "policy_id": r.policy_id,
            "start_date": r.start_date,
            "end_date": r.end_date,
            "request_id": r.id,
          }
        )
    return sorted(out, key=lambda o: (o["employee_id"], o["request_id"]))

  # --- writes ------------------------------------------------------------------------------

  @tool(mutates=True, consumes=("employee.id", "date", "text"), produces=("request.id",))
  def request_time_off(
    self,
    employee_id: str,
    policy_id: PolicyId,
    start_date: date,
    end_date: date,
    note: str = "",
  ) -> Request:
    """Request days off for an employee; the request waits for their manager's decision.

    Args:
      employee_id: the employee id.
      policy_id: "vacation", "sick" or "personal".
      start_date: first day off (ISO date).
      end_date: last day off (ISO date), on or after the first.
      note: a note for the approver.
    """
    emp = self.state.employees.get(employee_id)
    balance = self._balance(employee_id, policy_id)
    if end_date < start_date:
      raise InvalidArgument(f"end_date ({end_date}) must not be before start_date ({start_date})")
    days = _business_days(start_date, end_date, self.state.holidays)
    if days == 0:
      raise InvalidArgument(
        f"{start_date}..{end_date} has no business days (only weekends and holidays)"
      )
    if days > balance.available:
      raise Conflict(
        f"{emp.name} has {balance.available:g} {policy_id} day(s) available but the request "
        f"needs {days:g}"
      )
    clash = _overlapping(self.state.requests, employee_id, start_date, end_date)
    if clash:
      c = clash[0]
      raise Conflict(
        f"overlaps {c.status} request '{c.id}' ({c.start_date}..{c.end_date}); cancel it or "
        "pick other dates"
      )
    return self.state.requests.insert(
      Request(
        id=self.state.new_id("tor"),
        employee_id=employee_id,
        policy_id=policy_id,
        start_date=start_date,
        end_date=end_date,
        days=days,
        approver=emp.manager_email or emp.email,
        note=note,
        created_at=self.state.now,
      )
    )

  @tool(mutates=True, consumes=("request.id", "person.email"))
  def approve_request(self, request_id: str, approver: Email | None = None, note: str = "") -> dict:
    """Approve a pending request; its days are deducted from the employee's balance.

    Args:
      request_id: the request's id.
      approver: email of the deciding manager; must be the employee's manager (checked when
        given).
      note: a note to the employee.
    """
    req = self._pending(request_id, approver)
    balance = self._balance(req.employee_id, req.policy_id)
    if req.days > balance.available:
      raise Conflict(
        f"request '{request_id}' needs {req.days:g} day(s) but only {balance.available:g} "
        f"{req.policy_id} day(s) are left; deny it or adjust the balance"
      )
    new = self.state.balances.update(
      balance.id, available=balance.available - req.days, used=balance.used + req.days
    )
    done = self.state.requests.update(
      request_id, status="approved", decision_note=note, decided_at=self.state.now
    )
    return {"request": done, "balance": new}

  @tool(mutates=True, consumes=("request.id", "person.email", "text"))
  def deny_request(self, request_id: str, approver: Email | None = None, note: str = "") -> Request:
    """Deny a pending request; the balance does not change.

    Args:
      request_id: the request's id.
      approver: email of the deciding manager; must be the employee's manager (checked when
        given).
      note: the reason, shown to the employee.
    """
    self._pending(request_id, approver)
    return self.state.requests.update(
      request_id, status="denied", decision_note=note, decided_at=self.state.now
    )

  @tool(mutates=True, consumes=("request.id",))
  def cancel_request(self, request_id: str) -> dict:
    """Cancel a pending or approved request that has not started yet; an approved request's
    days go back to the balance.

    Args:
      request_id: the request's id.
    """
    req = self.state.requests.get(request_id)
    if req.status in ("denied", "cancelled"):
      raise Conflict(f"request '{request_id}' is already {req.status}")
    today = self.state.now.date()
    if req.start_date <= today:
      raise Conflict(
        f"request '{request_id}' started on {req.start_date}; only requests that have not "
        f"started yet (after {today}) can be cancelled"
      )
    balance = self._balance(req.employee_id, req.policy_id)
    if req.status == "approved":
      balance = self.state.balances.update(
        balance.id, available=balance.available + req.days, used=balance.used - req.days
      )
    done = self.state.requests.update(request_id, status="cancelled", decided_at=self.state.now)
    return {"request": done, "balance": balance}

  @tool(mutates=True, consumes=("employee.id", "number", "text"))
  def adjust_balance(
    self, employee_id: str, policy_id: PolicyId, days: Days, reason: Text
  ) -> Balance:
    """Add days to (or, with a negative number, remove days from) an employee's available
    balance, e.g. for carry-over or a correction.

    Args:
      employee_id: the employee id.
      policy_id: "vacation", "sick" or "personal".
      days: days to add; negative to remove; not zero.
      reason: why, for the audit trail.
    """
    balance = self._balance(employee_id, policy_id)
    if days == 0:
      raise InvalidArgument("days must not be zero")
    if balance.available + days < 0:
      raise Conflict(
        f"{employee_id} has {balance.available:g} {policy_id} day(s) available; removing "
        f"{-days:g} would make the balance negative"
      )
    entry = Adjustment(id=self.state.new_id("adj"), days=days, reason=reason, at=self.state.now)
    return self.state.balances.update(
      balance.id, available=balance.available + days, adjustments=(*balance.adjustments, entry)
    )
