"""Expenses: an Expensify-like service of expense reports, their items and spending policies.

Members are the home company's employees, each with a designated approver: their manager in the
org chart (the CEO, who has none, is approved by the head of Finance). An employee collects
expense items (date, merchant, category, amount, receipt link, justification) in a report in the
company currency, then submits it; the approver approves or rejects it; finance reimburses an
approved report.

A policy per category (meals, travel, lodging, software, office) sets the most one item may cost
without a written justification, and the amount above which a receipt is required (75, as the
team handbook says).

Rules an Expensify user expects: only draft reports can be edited (items added or removed); an
item is in the report's currency and its date is not in the future; an empty report cannot be
submitted, nor one whose over-limit items lack a justification or whose items above the receipt
threshold lack a receipt; only submitted reports are approved or rejected, only by their
designated approver, and nobody approves or rejects their own report; only approved reports are
reimbursed.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta
from typing import Annotated, Literal

from pydantic import Field

from compoworld import Conflict, InvalidArgument, Service, registry, tool
from compoworld.runtime.fields import Email, Text
from compoworld.runtime.query import select
from compoworld.runtime.state import Record, ServiceState, Table
from envs._world import seeded, world

ReportStatus = Literal["draft", "submitted", "approved", "rejected", "reimbursed"]
Category = Literal["meals", "travel", "lodging", "software", "office"]
Amount = Annotated[float, Field(gt=0, le=100000, description="An amount of money, above zero.")]
Currency = Annotated[str, Field(pattern=r"^[A-Z]{3}$", description="An ISO 4217 code.")]

#: (category, per-item limit, description, typical merchants, typical amount range)
POLICIES = (
  (
    "meals",
    75.0,
    "Client and travel meals, per person",
    ("Pret", "Nando's", "Blue Bottle"),
    9,
    140,
  ),
  ("travel", 800.0, "Flights, trains, taxis", ("Delta", "Amtrak", "Uber", "Lyft"), 18, 950),
  ("lodging", 300.0, "Hotel, per night", ("Marriott", "Hilton", "Hyatt"), 120, 420),
  ("software", 200.0, "Tools and subscriptions", ("Figma", "GitHub", "Notion", "Zoom"), 8, 280),
  ("office", 150.0, "Supplies and equipment", ("Staples", "Amazon", "IKEA"), 6, 240),
)
RECEIPT_OVER = 75.0
#: How often each status appears in the generated reports, past the first five.
WORKFLOW_MIX = (
  "draft",
  "submitted",
  "submitted",
  "approved",
  "reimbursed",
  "reimbursed",
  "rejected",
)
TRIPS = ("Client visit", "Sales kickoff", "Conference", "Offsite", "Customer workshop")


class Member(Record):
  id: str  # the employee's email
  name: str
  employee_id: str
  department: str
  approver: str  # email of whoever approves this member's reports


class Policy(Record):
  id: Category  # one policy per category
  limit_per_item: float
  receipt_required_over: float
  description: str


class Report(Record):
  title: str
  employee: str
  approver: str
  currency: str
  status: ReportStatus = "draft"
  total: float = 0.0
  created_at: datetime
  submitted_at: datetime | None = None
  decided_at: datetime | None = None
  decided_by: str | None = None
  rejection_reason: str = ""
  reimbursed_at: datetime | None = None
  payout_reference: str = ""


class Expense(Record):
  report_id: str
  date: date
  merchant: str
  category: Category
  amount: float
  currency: str
  receipt_url: str | None = None
  justification: str = ""


class ExpensesState(ServiceState):
  members: Table[Member]
  policies: Table[Policy]
  reports: Table[Report]
  expenses: Table[Expense]


def _r(x: float) -> float:
  return round(round(x * 100) / 100, 2)


def _approver_of(w, person) -> str:
  if person.manager_email:
    return person.manager_email
  head = next((p for p in w.people if p.title == "Head of Finance"), None)
  return head.email if head else w.people[0].email


@registry.register
class ExpensesService(Service):
  name = "expenses"
  domain = "finance"
  description = "Expense reports: items, policy limits, submission, approval and reimbursement."
  State = ExpensesState

  @classmethod
  def generate(cls, seed: int, size: int | None) -> ExpensesState:
    rng, w, state = seeded(cls, seed)
    for p in w.people:
      state.members.insert(
        Member(
          id=p.email,
          name=p.name,
          employee_id=p.employee_id,
          department=p.department,
          approver=_approver_of(w, p),
        )
      )
    for cat, limit, desc, *_ in POLICIES:
      state.policies.insert(
        Policy(id=cat, limit_per_item=limit, receipt_required_over=RECEIPT_OVER, description=desc)
      )
    today = state.now.date()
    n = size if size is not None else 25
    # The first five reports cover every status; people[0] (the user) owns the first two.
    forced = ("draft", "submitted", "approved", "rejected", "reimbursed")
    for i in range(n):
      status = forced[i] if i < len(forced) else rng.choice(WORKFLOW_MIX)
      person = w.people[0] if i < 2 else rng.choice(w.people)
      start = today - timedelta(days=rng.randint(3, 60))
      created = datetime.combine(start, datetime.min.time()) + timedelta(hours=rng.randint(8, 18))
      rid = state.new_id("rpt")
      city = rng.choice(w.venues).city
      items = []
      for _ in range(rng.randint(1, 5)):
        cat, limit, _desc, merchants, low, high = rng.choice(POLICIES)
        amount = _r(rng.uniform(low, high))
        over = amount > limit
        # Only drafts may still break the policy; everything submitted once complied.
        explained = not over or status != "draft" or rng.random() < 0.5
        items.append(
          Expense(
            id=state.new_id("exp"),
            report_id=rid,
            date=min(today, start + timedelta(days=rng.randint(0, 4))),
            merchant=rng.choice(merchants) + (f" {city}" if cat in ("meals", "lodging") else ""),
            category=cat,
            amount=amount,
            currency=w.currency,
            receipt_url=f"https://receipts.example.com/{rid[4:]}/{len(items) + 1}.pdf"
            if amount > RECEIPT_OVER or rng.random() < 0.6
            else None,
            justification=(
              rng.choice(("Client dinner for four", "Last-minute booking", "Team of three"))
              if over and explained
              else ""
            ),
          )
        )
      for item in items:
        state.expenses.insert(item)
      report = Report(
        id=rid,
        title=f"{rng.choice(TRIPS)} - {city} ({start:%b %Y})",
        employee=person.email,
        approver=_approver_of(w, person),
        currency=w.currency,
        total=_r(sum(e.amount for e in items)),
        created_at=created,
      )
      # Each step of the workflow a few days after the last one, but never after now.
      step = [
        min(state.now - timedelta(hours=h), created + timedelta(days=d))
        for d, h in ((5, 3), (7, 2), (10, 1))
      ]
      if status != "draft":
        report = report.with_changes(submitted_at=step[0])
      if status in ("approved", "rejected", "reimbursed"):
        report = report.with_changes(decided_at=step[1], decided_by=report.approver)
      if status == "rejected":
        report = report.with_changes(rejection_reason="Missing itemised receipt for the hotel")
      if status == "reimbursed":
        report = report.with_changes(
          reimbursed_at=step[2], payout_reference=f"ACH-{rng.randint(100000, 999999)}"
        )
      state.reports.insert(report.with_changes(status=status))
    return state

  # --- helpers -----------------------------------------------------------------------------

  def _items(self, report_id: str) -> list[Expense]:
    return sorted(
      self.state.expenses.filter(lambda e: e.report_id == report_id), key=lambda e: (e.date, e.id)
    )

  def _draft(self, report_id: str) -> Report:
    report = self.state.reports.get(report_id)
    if report.status != "draft":
      raise Conflict(f"report '{report_id}' is {report.status}; only draft reports can be edited")
    return report

  def _retotal(self, report_id: str) -> Report:
    total = _r(sum(e.amount for e in self._items(report_id)))
    return self.state.reports.update(report_id, total=total)

  def _view(self, report: Report) -> dict:
    items = []
    for e in self._items(report.id):
      policy = self.state.policies.get(e.category)
      items.append(
        {
          **e.model_dump(),
          "over_limit": e.amount > policy.limit_per_item,
          "needs_receipt": e.amount > policy.receipt_required_over and not e.receipt_url,
        }
      )
    return {**report.model_dump(), "items": items}

  def _decide(self, report_id: str, approver: str, verb: str) -> Report:
    report = self.state.reports.get(report_id)
    if report.status != "submitted":
      raise Conflict(
        f"report '{report_id}' is {report.status}; only submitted reports can be {verb}"
      )
    who = approver.lower()
    if who == report.employee:
      raise Conflict(
        f"report '{report_id}' belongs to {who}; nobody approves or rejects their own report"
      )
    if who != report.approver:
      raise Conflict(
        f"report '{report_id}' can only be {verb} by its approver {report.approver}, not {who}"
      )
    return report

  # --- reads -------------------------------------------------------------------------------

  @tool(mutates=False, produces=("money",))
  def list_policies(self) -> list[Policy]:
    """List the expense policy: per category, the most one item may cost without a
    justification and the amount above which a receipt is required."""
    return sorted(self.state.policies, key=lambda p: p.id)

  @tool(mutates=False, page="report", produces=("report.id", "person.email", "money", "status"))
  def list_reports(
    self,
    status: ReportStatus | None = None,
    employee: Email | None = None,
    approver: Email | None = None,
    query: str | None = None,
  ) -> list:
    """List expense reports, newest first, without their items.

    Args:
      status: only reports in this status.
      employee: only reports of this employee (email).
      approver: only reports this person approves (email); with status "submitted", the
        reports waiting for them.
      query: words that must all appear in the title.
    """
    return select(
      self.state.reports,
      eq={
        "status": status,
        "employee": employee and employee.lower(),
        "approver": approver and approver.lower(),
      },
      text=query,
      fields=("title",),
      key=lambda r: (r.created_at, r.id),
      reverse=True,
    )

  @tool(
    mutates=False,
    consumes=("report.id",),
    produces=("expense.id", "person.email", "money", "date", "status", "url"),
  )
  def get_report(self, report_id: str) -> dict:
    """Get one report with its items, each flagged when it is over the category limit or
    lacks a required receipt.

    Args:
      report_id: the report's id.
    """
    return self._view(self.state.reports.get(report_id))

  @tool(mutates=False, consumes=("person.email", "department", "date"), produces=("money",))
  def spend_by_category(
    self,
    employee: Email | None = None,
    department: str | None = None,
    status: ReportStatus | None = None,
    start_date: date | None = None,
    end_date: date | None = None,
  ) -> dict:
    """Total spend per category over the items of matching reports (rejected reports are left
    out unless asked for by status).

    Args:
      employee: only this employee's reports (email).
      department: only reports of employees of this department, e.g. "Sales".
      status: only reports in this status.
      start_date: only items on or after this day (YYYY-MM-DD).
      end_date: only items on or before this day (YYYY-MM-DD).
    """
    if start_date and end_date and end_date < start_date:
      raise InvalidArgument(f"end_date ({end_date}) must not be before start_date ({start_date})")
    if employee is not None:
      self.state.members.get(employee.lower())
    reports = {
      r.id
      for r in self.state.reports
      if (r.status == status if status else r.status != "rejected")
      and (employee is None or r.employee == employee.lower())
      and (
        department is None
        or self.state.members.get(r.employee).department.lower() == department.lower()
      )
    }
    totals = {p.id: 0.0 for p in sorted(self.state.policies, key=lambda p: p.id)}
    count = 0
    for e in self.state.expenses:
      if (
        e.report_id in reports
        and (start_date is None or e.date >= start_date)
        and (end_date is None or e.date <= end_date)
      ):
        totals[e.category] = _r(totals[e.category] + e.amount)
        count += 1
    return {
      "currency": world(self.state.seed).currency,
      "by_category": totals,
      "total": _r(sum(totals.values())),
      "items": count,
      "reports": len(reports),
    }

  # --- writes ------------------------------------------------------------------------------

  @tool(mutates=True, consumes=("person.email", "title"), produces=("report.id",))
  def create_report(self, employee: Email, title: Text) -> Report:
    """Start a draft expense report for an employee; its approver is their manager.

    Args:
      employee: the employee's email.
      title: what the report covers, e.g. "Client visit - Oslo".
    """
    member = self.state.members.get(employee.lower())
    return self.state.reports.insert(
      Report(
        id=self.state.new_id("rpt"),
        title=title,
        employee=member.id,
        approver=member.approver,
        currency=world(self.state.seed).currency,
        created_at=self.state.now,
      )
    )

  @tool(
    mutates=True,
    consumes=("report.id", "date", "money", "currency", "url", "company.name"),
    produces=("expense.id",),
  )
  def add_expense_item(
    self,
    report_id: str,
    date: date,
    merchant: Text,
    category: Category,
    amount: Amount,
    currency: Currency | None = None,
    receipt_url: str | None = None,
    justification: str = "",
  ) -> dict:
    """Add an expense to a draft report.

    Args:
      report_id: the report's id.
      date: the day of the expense (YYYY-MM-DD), not in the future.
      merchant: who was paid.
      category: "meals", "travel", "lodging", "software" or "office".
      amount: the amount spent, in the report's currency.
      currency: the amount's currency; must be the report's (convert it first otherwise).
      receipt_url: an http(s) link to the receipt image.
      justification: why an amount over the category limit was needed.
    """
    report = self._draft(report_id)
    if date > self.state.now.date():
      raise InvalidArgument(f"date ({date}) is in the future; today is {self.state.now.date()}")
    if currency is not None and currency != report.currency:
      raise Conflict(
        f"report '{report_id}' is in {report.currency}, not {currency}; convert the amount "
        f"to {report.currency} first"
      )
    if receipt_url is not None and not receipt_url.startswith(("https://", "http://")):
      raise InvalidArgument(f"receipt_url must be an http(s) URL, got {receipt_url!r}")
    item = self.state.expenses.insert(
      Expense(
        id=self.state.new_id("exp"),
        report_id=report.id,
        date=date,
        merchant=merchant,
        category=category,
        amount=_r(amount),
        currency=report.currency,
        receipt_url=receipt_url,
        justification=justification,
      )
    )
    return {"item": item, "report": self._retotal(report.id)}

  @tool(mutates=True, consumes=("expense.id",))
  def remove_expense_item(self, expense_id: str) -> Report:
    """Remove an expense from its draft report.

    Args:
      expense_id: the expense item's id.
    """
    item = self.state.expenses.get(expense_id)
    self._draft(item.report_id)
    self.state.expenses.delete(expense_id)
    return self._retotal(item.report_id)

  @tool(mutates=True, consumes=("report.id",), produces=("person.email",))
  def submit_report(self, report_id: str) -> Report:
    """Submit a draft report to its approver; it must comply with the policy.

    Args:
      report_id: the report's id.
    """
    self._draft(report_id)
    items = self._items(report_id)
    if not items:
      raise Conflict(f"report '{report_id}' has no expense items; add at least one to submit")
    unjustified, missing = [], []
    for e in items:
      policy = self.state.policies.get(e.category)
      if e.amount > policy.limit_per_item and not e.justification.strip():
        unjustified.append(f"{e.id} ({e.category} {e.amount} > {policy.limit_per_item})")
      if e.amount > policy.receipt_required_over and not e.receipt_url:
        missing.append(f"{e.id} ({e.amount})")
    if unjustified:
      raise Conflict(
        "items over their category limit need a justification: " + ", ".join(unjustified)
      )
    if missing:
      raise Conflict(f"items over {RECEIPT_OVER} need a receipt_url: " + ", ".join(missing))
    return self.state.reports.update(report_id, status="submitted", submitted_at=self.state.now)

  @tool(mutates=True, consumes=("report.id", "person.email"))
  def approve_report(self, report_id: str, approver: Email) -> Report:
    """Approve a submitted report, as its designated approver.

    Args:
      report_id: the report's id.
      approver: the email of the person approving.
    """
    report = self._decide(report_id, approver, "approved")
    return self.state.reports.update(
      report.id, status="approved", decided_at=self.state.now, decided_by=report.approver
    )

  @tool(mutates=True, consumes=("report.id", "person.email", "text"))
  def reject_report(self, report_id: str, approver: Email, reason: Text) -> Report:
    """Reject a submitted report, as its designated approver, saying why.

    Args:
      report_id: the report's id.
      approver: the email of the person rejecting.
      reason: what is wrong with the report.
    """
    report = self._decide(report_id, approver, "rejected")
    return self.state.reports.update(
      report.id,
      status="rejected",
      decided_at=self.state.now,
      decided_by=report.approver,
      rejection_reason=reason,
    )

  @tool(mutates=True, consumes=("report.id",), produces=("money", "reference"))
  def reimburse_report(self, report_id: str) -> Report:
    """Pay an approved report back to the employee (by ACH); it becomes reimbursed.

    Args:
      report_id: the report's id.
    """
    report = self.state.reports.get(report_id)
    if report.status != "approved":
      raise Conflict(
        f"report '{report_id}' is {report.status}; only approved reports can be reimbursed"
      )
    ref = "ACH-" + self.state.new_id("ach").split("_")[1].upper()
    return self.state.reports.update(
      report_id, status="reimbursed", reimbursed_at=self.state.now, payout_reference=ref
    )
