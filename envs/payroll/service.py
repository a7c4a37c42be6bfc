"""Payroll: a Gusto-like payroll of compensation, pay runs, payslips and adjustments.

Every employee of the home company (the shared world's people, keyed by employee id) has a
compensation record: a yearly salary in the company currency, a pay frequency ("monthly" or
"semi_monthly"), a tax withholding rate and a benefits deduction taken each pay period. A pay
run pays one frequency's employees for one period on a pay date. Creating it computes one
payslip per employee hired by the end of the period: base pay (salary / periods per year) plus
bonuses is the gross; tax is withheld on the gross; benefits and deduction adjustments are
deducted; reimbursements are added untaxed; what is left is the net. A run moves draft →
approved → paid.

Rules a payroll admin expects: a period ends on or after its start and is paid on or after its
end; two runs of the same frequency never cover the same day; only a draft run takes
adjustments, skips or a recalculation (compensation changes reach a draft run when it is
recalculated); an adjustment may not make a net pay negative; a run without payslips cannot be
approved; only an approved run is marked paid, and a paid run never changes; salaries are not
negative.
"""

from __future__ import annotations

import random
from datetime import date, datetime, timedelta
from typing import Annotated, Literal

from pydantic import Field

from compoworld import Conflict, InvalidArgument, Service, registry, tool
from compoworld.runtime.fields import Limit, Money, Offset, Text
from compoworld.runtime.query import page_of, select
from compoworld.runtime.state import Record, ServiceState, Table, supplied
from envs._world import world

Frequency = Literal["monthly", "semi_monthly"]
RunStatus = Literal["draft", "approved", "paid"]
AdjustmentKind = Literal["bonus", "reimbursement", "deduction"]
PERIODS = {"monthly": 12, "semi_monthly": 24}
TOTALS = ("gross", "tax", "deductions", "reimbursements", "net")
TaxRate = Annotated[float, Field(ge=0, le=0.6, description="Withholding rate, e.g. 0.24.")]


class Compensation(Record):
  id: str  # the employee id, e.g. E1042
  name: str
  email: str
  department: str
  hire_date: date
  annual_salary: float = Field(ge=0)
  currency: str
  pay_frequency: Frequency = "monthly"
  tax_rate: float = Field(ge=0, le=0.6)
  benefits: float = 0.0  # deducted every pay period
  updated_at: datetime


class PayRun(Record):
  pay_frequency: Frequency
  period_start: date
  period_end: date
  pay_date: date
  status: RunStatus = "draft"
  created_at: datetime
  approved_at: datetime | None = None
  paid_at: datetime | None = None


class Payslip(Record):
  pay_run_id: str
  employee_id: str
  pay_date: date
  currency: str
  base_pay: float
  bonus: float = 0.0
  gross: float
  tax: float
  deductions: float
  reimbursements: float = 0.0
  net: float


class Adjustment(Record):
  pay_run_id: str
  employee_id: str
  kind: AdjustmentKind
  amount: float
  description: str = ""
  created_at: datetime


class PayrollState(ServiceState):
  compensation: Table[Compensation]
  pay_runs: Table[PayRun]
  payslips: Table[Payslip]
  adjustments: Table[Adjustment]


#: Salary bands in thousands by department; heads and the CEO are paid above them.
BANDS = {
  "Engineering": (110, 190),
  "Sales": (70, 140),
  "Marketing": (75, 135),
  "Finance": (80, 150),
  "Support": (55, 90),
  "Operations": (60, 110),
  "People": (65, 120),
}
EXTRAS = (
  ("bonus", "Spot bonus", 500, 2500),
  ("reimbursement", "Home office equipment", 80, 600),
  ("reimbursement", "Travel expenses", 120, 900),
  ("deduction", "Salary advance repayment", 100, 400),
)


def _money(x: float) -> float:
  return round(x + 0.0, 2)


def _payslip(state: PayrollState, run: PayRun, comp: Compensation, slip_id: str) -> Payslip:
  """The payslip of ``comp`` in ``run`` from the compensation and the run's adjustments."""
  sums = {"bonus": 0.0, "reimbursement": 0.0, "deduction": 0.0}
  for a in state.adjustments:
    if a.pay_run_id == run.id and a.employee_id == comp.id:
      sums[a.kind] += a.amount
  base = _money(comp.annual_salary / PERIODS[run.pay_frequency])
  gross = _money(base + sums["bonus"])
  tax = _money(gross * comp.tax_rate)
  # Benefits come out of pay only when there is pay: an unpaid period owes nothing.
  deductions = _money((comp.benefits if base else 0.0) + sums["deduction"])
  return Payslip(
    id=slip_id,
    pay_run_id=run.id,
    employee_id=comp.id,
    pay_date=run.pay_date,
    currency=comp.currency,
    base_pay=base,
    bonus=_money(sums["bonus"]),
    gross=gross,
    tax=tax,
    deductions=deductions,
    reimbursements=_money(sums["reimbursement"]),
    net=_money(gross + sums["reimbursement"] - tax - deductions),
  )


def _totals(slips) -> dict[str, float]:
  return {k: _money(sum(getattr(s, k) for s in slips)) for k in TOTALS}


def _pay_day(day: date) -> date:
  """The first business day on or after ``day``."""
  while day.weekday() >= 5:
    day += timedelta(days=1)
  return day


@registry.register
class PayrollService(Service):
  name = "payroll"
  domain = "hr"
  description = "Payroll: compensation, pay runs with payslips, adjustments, approval and payment."
  State = PayrollState

  @classmethod
  def generate(cls, seed: int, size: int | None) -> PayrollState:
    rng = random.Random(f"{cls.name}:{seed}")
    count = max(size if size is not None else 60, 2)
    w = world(seed) if count <= 60 else world(seed, population=min(count, 1200))
    state = PayrollState.empty(seed)
    for p in w.people[:count]:
      low, high = BANDS[p.department]
      if p.title == "CEO":
        salary = rng.randint(240, 320) * 1000
      elif p.title.startswith("Head of"):
        salary = (high + rng.randint(10, 40)) * 1000
      else:
        salary = rng.randint(low, high) * 1000 + rng.choice((0, 500))
      part_time = rng.random() < 0.07 and "Head" not in p.title and p.title != "CEO"
      state.compensation.insert(
        Compensation(
          id=p.employee_id,
          name=p.name,
          email=p.email,
          department=p.department,
          hire_date=date.fromisoformat(p.hired),
          annual_salary=float(salary // 2 if part_time else salary),
          currency=w.currency,
          pay_frequency="semi_monthly" if rng.random() < 0.15 else "monthly",
          tax_rate=0.18 if salary < 80000 else 0.24 if salary < 150000 else 0.32,
          benefits=float(rng.choice((0, 95, 145, 185, 240))),
          updated_at=state.now - timedelta(days=rng.randint(20, 200)),
        )
      )
    # Monthly: December and January paid, February approved, March a draft.
    # Semi-monthly: January and the first half of February paid, then approved, then a draft.
    periods = [
      ("monthly", date(2025, 12, 1), date(2025, 12, 31), "paid"),
      ("monthly", date(2026, 1, 1), date(2026, 1, 31), "paid"),
      ("monthly", date(2026, 2, 1), date(2026, 2, 28), "approved"),
      ("monthly", date(2026, 3, 1), date(2026, 3, 31), "draft"),
      ("semi_monthly", date(2026, 1, 1), date(2026, 1, 15), "paid"),
      ("semi_monthly", date(2026, 1, 16), date(2026, 1, 31), "paid"),
      ("semi_monthly", date(2026, 2, 1), date(2026, 2, 15), "paid"),
      ("semi_monthly", date(2026, 2, 16), date(2026, 2, 28), "approved"),
      ("semi_monthly", date(2026, 3, 1), date(2026, 3, 15), "draft"),
    ]
    for freq, start, end, status in periods:
      made = datetime.combine(end, state.now.time()) - timedelta(days=6)
      run = PayRun(
        id=state.new_id("run"),
        pay_frequency=freq,
        period_start=start,
        period_end=end,
        pay_date=_pay_day(end),
        status=status,
        created_at=min(made, state.now - timedelta(days=1)),
        approved_at=None if status == "draft" else made + timedelta(days=2),
        paid_at=made + timedelta(days=6) if status == "paid" else None,
      )
      state.pay_runs.insert(run)
      staff = [c for c in state.compensation if c.pay_frequency == freq and c.hire_date <= end]
      if status == "draft" or start.month == 12:  # year-end bonuses and this month's extras
        for comp in rng.sample(staff, min(len(staff), rng.randint(3, 5))):
          kind, text, low, high = EXTRAS[0] if start.month == 12 else rng.choice(EXTRAS)
          state.adjustments.insert(
            Adjustment(
              id=state.new_id("adj"),
              pay_run_id=run.id,
              employee_id=comp.id,
              kind=kind,
              amount=float(rng.randint(low // 10, high // 10) * 10),
              description="Year-end bonus" if start.month == 12 else text,
              created_at=run.created_at,
            )
          )
      for comp in staff:
        state.payslips.insert(_payslip(state, run, comp, state.new_id("slip")))
    return state

  # --- helpers -----------------------------------------------------------------------------

  def _draft(self, pay_run_id: str, action: str) -> PayRun:
    run = self.state.pay_runs.get(pay_run_id)
    if run.status != "draft":
      raise Conflict(f"pay run '{pay_run_id}' is {run.status}; only a draft run can {action}")
    return run

  def _slips(self, pay_run_id: str) -> list[Payslip]:
    return sorted(
      self.state.payslips.filter(lambda s: s.pay_run_id == pay_run_id),
      key=lambda s: s.employee_id,
    )

  def _slip_of(self, run: PayRun, employee_id: str) -> Payslip:
    comp = self.state.compensation.get(employee_id)
    slip = next((s for s in self._slips(run.id) if s.employee_id == employee_id), None)
    if slip is None:
      raise Conflict(f"employee '{employee_id}' ({comp.name}) is not paid in pay run '{run.id}'")
    return slip

  def _refresh(self, run: PayRun, slip: Payslip) -> Payslip:
    comp = self.state.compensation.get(slip.employee_id)
    new = _payslip(self.state, run, comp, slip.id)
    if new.net < 0:
      raise Conflict(
        f"net pay of {comp.name} in pay run '{run.id}' would be {new.net:.2f}; net pay cannot "
        "be negative"
      )
    return self.state.payslips.update(slip.id, **new.model_dump(exclude={"id"}))

  def _view(self, run: PayRun) -> dict:
    slips = self._slips(run.id)
    return {**dict(run), "employees": len(slips), **_totals(slips)}

  # --- reads -------------------------------------------------------------------------------

  @tool(mutates=False, produces=("pay_run.id", "date", "money", "status"))
  def list_pay_runs(
    self,
    status: RunStatus | None = None,
    pay_frequency: Frequency | None = None,
    limit: Limit = 20,
    offset: Offset = 0,
  ) -> dict:
    """List pay runs with their totals, latest period first.

    Args:
      status: only "draft", "approved" or "paid" runs.
      pay_frequency: only "monthly" or "semi_monthly" runs.
      limit: page size (1-100).
      offset: index of the first run to return.
    """
    return page_of(
      self.state.pay_runs,
      eq={"status": status, "pay_frequency": pay_frequency},
      key=lambda r: (r.period_start, r.id),
      reverse=True,
      limit=limit,
      offset=offset,
      view=self._view,
    )

  @tool(mutates=False, produces=("payslip.id", "employee.id", "money", "date", "status"))
  def get_pay_run(self, pay_run_id: str) -> dict:
    """Get one pay run with its totals, its payslips and its adjustments.

    Args:
      pay_run_id: the pay run's id.
    """
    view = self._view(self.state.pay_runs.get(pay_run_id))
    view["payslips"] = self._slips(pay_run_id)
    view["adjustments"] = self.state.adjustments.filter(lambda a: a.pay_run_id == pay_run_id)
    return view

  @tool(mutates=False, produces=("money", "date", "currency"))
  def get_payslip(self, payslip_id: str) -> Payslip:
    """Get one payslip: base pay, bonus, gross, tax, deductions, reimbursements and net.

    Args:
      payslip_id: the payslip's id.
    """
    return self.state.payslips.get(payslip_id)

  @tool(
    mutates=False,
    page="payslip",
    consumes=("employee.id",),
    produces=("payslip.id", "employee.id", "money", "date"),
  )
  def list_payslips(self, employee_id: str | None = None, pay_run_id: str | None = None) -> list:
    """List payslips, latest pay date first.

    Args:
      employee_id: only this employee's payslips.
      pay_run_id: only the payslips of this pay run.
    """
    self.state.compensation.check(employee_id)
    self.state.pay_runs.check(pay_run_id)
    return select(
      self.state.payslips,
      eq={"employee_id": employee_id, "pay_run_id": pay_run_id},
      key=lambda s: (s.pay_date, s.employee_id, s.id),
      reverse=True,
    )

  @tool(
    mutates=False,
    consumes=("employee.id",),
    produces=("person.name", "person.email", "department", "money", "currency", "percentage"),
  )
  def get_compensation(self, employee_id: str) -> Compensation:
    """Get an employee's compensation: salary, currency, pay frequency, tax rate and benefits.

    Args:
      employee_id: the employee id, e.g. "E1042".
    """
    return self.state.compensation.get(employee_id)

  @tool(mutates=False, consumes=("date",), produces=("money", "number", "department"))
  def payroll_summary(self, start_date: date, end_date: date, include_unpaid: bool = False) -> dict:
    """Total payroll cost of the pay runs paid between two dates (by pay date, both included),
    overall and per department.

    Args:
      start_date: first pay date (ISO date).
      end_date: last pay date (ISO date), on or after the first.
      include_unpaid: also count draft and approved runs.
    """
    if end_date < start_date:
      raise InvalidArgument(f"end_date ({end_date}) must not be before start_date ({start_date})")
    runs = {
      r.id
      for r in self.state.pay_runs
      if start_date <= r.pay_date <= end_date and (include_unpaid or r.status == "paid")
    }
    slips = [s for s in self.state.payslips if s.pay_run_id in runs]
    by_dept: dict[str, list[Payslip]] = {}
    for s in slips:
      by_dept.setdefault(self.state.compensation.get(s.employee_id).department, []).append(s)
    return {
      "pay_runs": len(runs),
      "payslips": len(slips),
      "currency": world(self.state.seed).currency,
      **_totals(slips),
      "by_department": {d: _totals(v) for d, v in sorted(by_dept.items())},
    }

  # --- writes ------------------------------------------------------------------------------

  @tool(mutates=True, consumes=("date",), produces=("pay_run.id",))
  def create_pay_run(
    self,
    period_start: date,
    period_end: date,
    pay_date: date,
    pay_frequency: Frequency = "monthly",
  ) -> dict:
    """Create a draft pay run with a payslip for every employee on this pay frequency who was
    hired by the end of the period.

    Args:
      period_start: first day of the pay period (ISO date).
      period_end: last day of the pay period (ISO date), on or after the first.
      pay_date: when employees are paid (ISO date), on or after the period end.
      pay_frequency: "monthly" or "semi_monthly".
    """
    if period_end < period_start:
      raise InvalidArgument(
        f"period_end ({period_end}) must not be before period_start ({period_start})"
      )
    if pay_date < period_end:
      raise InvalidArgument(f"pay_date ({pay_date}) must not precede period_end ({period_end})")
    for r in self.state.pay_runs:
      overlaps = r.period_start <= period_end and period_start <= r.period_end
      if r.pay_frequency == pay_frequency and overlaps:
        raise Conflict(
          f"{pay_frequency} pay run '{r.id}' ({r.status}) already covers "
          f"{r.period_start}..{r.period_end}; one pay run per period"
        )
    run = self.state.pay_runs.insert(
      PayRun(
        id=self.state.new_id("run"),
        pay_frequency=pay_frequency,
        period_start=period_start,
        period_end=period_end,
        pay_date=pay_date,
        created_at=self.state.now,
      )
    )
    for comp in sorted(self.state.compensation, key=lambda c: c.id):
      if comp.pay_frequency == pay_frequency and comp.hire_date <= period_end:
        self.state.payslips.insert(_payslip(self.state, run, comp, self.state.new_id("slip")))
    return self._view(run)

  @tool(mutates=True, consumes=("pay_run.id",))
  def recalculate_pay_run(self, pay_run_id: str) -> dict:
    """Recompute every payslip of a draft run from the current compensation and adjustments.

    Args:
      pay_run_id: the pay run's id.
    """
    run = self._draft(pay_run_id, "be recalculated")
    for slip in self._slips(pay_run_id):
      self._refresh(run, slip)
    return self._view(run)

  @tool(mutates=True, consumes=("pay_run.id", "employee.id", "money", "text"))
  def add_adjustment(
    self,
    pay_run_id: str,
    employee_id: str,
    kind: AdjustmentKind,
    amount: Annotated[float, Field(gt=0, le=1_000_000, description="An amount of money.")],
    description: Text,
  ) -> dict:
    """Add a bonus (taxed), a reimbursement (untaxed) or a deduction to an employee's payslip
    in a draft run; the payslip is recomputed.

    Args:
      pay_run_id: the pay run's id.
      employee_id: the employee id; they must have a payslip in the run.
      kind: "bonus", "reimbursement" or "deduction".
      amount: the amount, above zero, in the company currency.
      description: what it is for, e.g. "Conference travel".
    """
    run = self._draft(pay_run_id, "take adjustments")
    slip = self._slip_of(run, employee_id)
    adj = self.state.adjustments.insert(
      Adjustment(
        id=self.state.new_id("adj"),
        pay_run_id=pay_run_id,
        employee_id=employee_id,
        kind=kind,
        amount=amount,
        description=description,
        created_at=self.state.now,
      )
    )
    return {"adjustment": adj, "payslip": self._refresh(run, slip)}

  @tool(mutates=True, consumes=("adjustment.id",))
  def remove_adjustment(self, adjustment_id: str) -> Payslip:
    """Remove an adjustment from a draft run; the payslip is recomputed and returned.

    Args:
      adjustment_id: the adjustment's id.
    """
    adj = self.state.adjustments.get(adjustment_id)
    run = self._draft(adj.pay_run_id, "change adjustments")
    self.state.adjustments.delete(adjustment_id)
    return self._refresh(run, self._slip_of(run, adj.employee_id))

  @tool(mutates=True, consumes=("pay_run.id", "employee.id"))
  def skip_employee(self, pay_run_id: str, employee_id: str) -> dict:
    """Leave an employee out of a draft run: their payslip and adjustments in it are removed.

    Args:
      pay_run_id: the pay run's id.
      employee_id: the employee id.
    """
    run = self._draft(pay_run_id, "skip employees")
    slip = self._slip_of(run, employee_id)
    self.state.payslips.delete(slip.id)
    for a in self.state.adjustments.filter(
      lambda a: a.pay_run_id == pay_run_id and a.employee_id == employee_id
    ):
      self.state.adjustments.delete(a.id)
    return self._view(run)

  @tool(mutates=True, consumes=("pay_run.id",))
  def approve_pay_run(self, pay_run_id: str) -> dict:
    """Approve a draft run; its payslips are then final.

    Args:
      pay_run_id: the pay run's id.
    """
    self._draft(pay_run_id, "be approved")
    if not self._slips(pay_run_id):
      raise Conflict(f"pay run '{pay_run_id}' has no payslips; there is nothing to approve")
    run = self.state.pay_runs.update(pay_run_id, status="approved", approved_at=self.state.now)
    return self._view(run)

  @tool(mutates=True, consumes=("pay_run.id",))
  def mark_paid(self, pay_run_id: str) -> dict:
    """Mark an approved run as paid.

    Args:
      pay_run_id: the pay run's id.
    """
    run = self.state.pay_runs.get(pay_run_id)
    if run.status != "approved":
      hint = "approve it first" if run.status == "draft" else "it is already paid"
      raise Conflict(f"pay run '{pay_run_id}' is {run.status}; {hint}")
    run = self.state.pay_runs.update(pay_run_id, status="paid", paid_at=self.state.now)
    return self._view(run)

  @tool(mutates=True, consumes=("employee.id", "money", "percentage"))
  def update_compensation(
    self,
    employee_id: str,
    annual_salary: Money | None = None,
    pay_frequency: Frequency | None = None,
    tax_rate: TaxRate | None = None,
    benefits: Money | None = None,
  ) -> Compensation:
    """Change an employee's compensation; only supplied fields change. New pay runs use it at
    once; a draft run picks it up when it is recalculated.

    Args:
      employee_id: the employee id.
      annual_salary: new yearly salary (0 or more), in the company currency.
      pay_frequency: "monthly" or "semi_monthly".
      tax_rate: withholding rate between 0 and 0.6.
      benefits: benefits deduction per pay period.
    """
    comp = self.state.compensation.get(employee_id)
    changes = supplied(
      "update_compensation",
      dict(
        annual_salary=annual_salary,
        pay_frequency=pay_frequency,
        tax_rate=tax_rate,
        benefits=benefits,
      ),
      name_fields=True,
    )
    if all(getattr(comp, k) == v for k, v in changes.items()):
      raise Conflict(f"employee '{employee_id}' already has that compensation")
    return self.state.compensation.update(employee_id, updated_at=self.state.now, **changes)
