"""Payroll facets: salaries, net pay, bonuses and pay dates as sources; reimbursements and
bonuses as sinks; the reimbursement revisit (the net pay on a draft payslip goes up)."""

from __future__ import annotations

from datetime import date

from compoworld.tasks.authoring import AuthorContext, AuthoringError
from compoworld.tasks.facets import Found, Value, facets
from compoworld.tasks.rubric import exists, where
from envs._facets_common import (
  amount_is,
  amount_of,
  currency_of,
  found_day,
  found_home_money,
  home_money,
  in_use,
  iso,
  pick_free,
  since,
  topic,
)
from envs._world import world
from envs.payroll.service import Compensation, _payslip

S = "payroll"
MAX_REIMBURSEMENT = 25_000.0  # more than this is not an expense claim paid through payroll


def _employee_phrase(obj: str) -> str:
  """How a sink names the employee whose id it was handed: "it" reads badly for a person."""
  return "that employee" if obj == "it" else obj


def _who(comp: Compensation) -> str:
  return f"{comp.name} (employee {comp.id})"


def _run_name(run: dict) -> str:
  start, end = date.fromisoformat(run["period_start"]), date.fromisoformat(run["period_end"])
  if run["pay_frequency"] == "monthly":
    return f"the {start:%B %Y} monthly payroll"
  return f"the semi-monthly payroll for {start:%B} {start.day}–{end.day}, {start.year}"


def _draft_run(ctx: AuthorContext, frequency: str) -> dict:
  """The draft run of a pay frequency, found the way an agent would."""
  runs = ctx.call(S, "list_pay_runs", status="draft", pay_frequency=frequency)["items"]
  if not runs:
    raise AuthoringError("no_draft_run", frequency)
  return runs[0]


def _paid_in(ctx: AuthorContext, run_id: str) -> set[str]:
  return {s.employee_id for s in ctx.state(S).payslips if s.pay_run_id == run_id}


def _pick(ctx: AuthorContext, ok=lambda c: True, reserve: bool = True) -> Compensation:
  """A colleague (not the user, not the CEO) on the payroll, not yet used by this task."""
  w = world(ctx.env.seed)
  options = (
    c
    for c in ctx.state(S).compensation
    if c.email not in (w.people[0].email, w.people[1].email) and ok(c)
  )
  return pick_free(ctx, S, options, reserve)


def _in_draft(ctx: AuthorContext, comp: Compensation) -> bool:
  """Whether ``comp`` has a payslip in the draft run of their pay frequency."""
  return any(
    r.status == "draft" and r.pay_frequency == comp.pay_frequency and comp.id in _paid_in(ctx, r.id)
    for r in ctx.state(S).pay_runs
  )


def _payout(ctx: AuthorContext, v: Value) -> float:
  """What payroll pays out: a positive amount in the company currency (the label of a money
  value names its currency last, "1,250.00 EUR"; another currency would need converting)."""
  code = currency_of(v)
  if code not in (None, world(ctx.env.seed).currency):
    raise AuthoringError("currency_mismatch", code)
  amount = v.number if v.number is not None else v.value
  if not isinstance(amount, (int, float)) or not 0 < amount <= MAX_REIMBURSEMENT:
    raise AuthoringError("amount_out_of_range", str(v.value))
  return round(float(amount), 2)


# --- sources -------------------------------------------------------------------------------


@facets.source(S, "money")
def annual_salary(ctx: AuthorContext) -> Found:
  comp = _pick(ctx, reserve=False)
  rec = ctx.call(S, "get_compensation", employee_id=comp.id)
  return found_home_money(ctx, f"the annual salary of {_who(comp)}", [rec["annual_salary"]])


@facets.source(S, "money")
def last_net_pay(ctx: AuthorContext) -> Found:
  """The net pay on someone's latest paid payslip."""
  state = ctx.state(S)
  paid = {r.id for r in state.pay_runs if r.status == "paid"}
  was_paid = {s.employee_id for s in state.payslips if s.pay_run_id in paid}
  comp = _pick(ctx, lambda c: c.id in was_paid, reserve=False)
  rec = ctx.call(S, "get_compensation", employee_id=comp.id)
  runs = ctx.call(S, "list_pay_runs", status="paid", pay_frequency=rec["pay_frequency"])["items"]
  run = next(r for r in runs if comp.id in _paid_in(ctx, r["id"]))
  slip = ctx.call(S, "list_payslips", employee_id=comp.id, pay_run_id=run["id"])["items"][0]
  return found_home_money(
    ctx, f"the net pay on the most recent paid payslip of {_who(comp)}", [slip["net"]]
  )


@facets.source(S, "money")
def spot_bonuses(ctx: AuthorContext) -> Found:
  """A few spot bonuses for one project sit in this month's draft payroll; each amount is a
  value (their total feeds an aggregate)."""
  state, about = ctx.state(S), topic(ctx)
  run = next(r for r in state.pay_runs if r.status == "draft" and r.pay_frequency == "monthly")
  comps = ctx.rng.sample(
    [c for c in state.compensation if c.id in _paid_in(ctx, run.id) and c.id not in in_use(ctx, S)],
    ctx.rng.randint(2, 4),
  )
  amounts = ctx.rng.sample(range(300, 2050, 50), len(comps))
  description = f"Spot bonus: {about}"
  for comp, amount in zip(comps, amounts, strict=True):
    in_use(ctx, S).add(comp.id)
    ctx.put(
      S,
      "adjustments",
      {
        "id": ctx.fresh_id("adj"),
        "pay_run_id": run.id,
        "employee_id": comp.id,
        "kind": "bonus",
        "amount": float(amount),
        "description": description,
        "created_at": iso(run.created_at),
      },
    )
    # The payslip of a draft run always reflects its adjustments.
    slip = next(s for s in state.payslips if s.pay_run_id == run.id and s.employee_id == comp.id)
    fresh = _payslip(ctx.state(S), run, comp, slip.id)
    ctx.update(S, "payslips", slip.id, **fresh.model_dump(mode="json", exclude={"id"}))
  listed = _draft_run(ctx, "monthly")
  view = ctx.call(S, "get_pay_run", pay_run_id=listed["id"])
  found = [a for a in view["adjustments"] if a["description"] == description]
  return found_home_money(
    ctx, f'the "{description}" bonuses in {_run_name(listed)}', [a["amount"] for a in found]
  )


@facets.source(S, "date")
def draft_pay_date(ctx: AuthorContext) -> Found:
  run = _draft_run(ctx, ctx.choice(("monthly", "semi_monthly")))
  return found_day(f"the pay date of {_run_name(run)}", run["pay_date"])


# --- lookups -------------------------------------------------------------------------------


def _employee(ctx: AuthorContext, found: Found) -> str:
  employee_id = str(found.values[0].value)
  if employee_id not in ctx.state(S).compensation:
    raise AuthoringError("not_on_payroll", employee_id)
  return employee_id


@facets.lookup(S, "employee.id", "money")
def salary_of(ctx: AuthorContext, found: Found) -> Found:
  rec = ctx.call(S, "get_compensation", employee_id=_employee(ctx, found))
  return found_home_money(ctx, "their annual salary", [rec["annual_salary"]])


@facets.lookup(S, "employee.id", "money")
def draft_net_pay_of(ctx: AuthorContext, found: Found) -> Found:
  rec = ctx.call(S, "get_compensation", employee_id=_employee(ctx, found))
  run = _draft_run(ctx, rec["pay_frequency"])
  slips = ctx.call(S, "list_payslips", employee_id=rec["id"], pay_run_id=run["id"])["items"]
  if not slips:
    raise AuthoringError("not_in_run", rec["id"])
  return found_home_money(ctx, f"their net pay in {_run_name(run)}", [slips[0]["net"]])


# --- sinks ---------------------------------------------------------------------------------


def _payslip_target(ctx: AuthorContext) -> dict:
  """A colleague on this month's draft run, and what the reimbursement is for."""
  comp = _pick(ctx, lambda c: _in_draft(ctx, c))
  rec = ctx.call(S, "get_compensation", employee_id=comp.id)
  run = _draft_run(ctx, rec["pay_frequency"])
  return {
    "id": comp.id,
    "who": _who(comp),
    "run": run["id"],
    "run_name": _run_name(run),
    "for": f"{topic(ctx)} travel",
  }


def _reimburse(ctx: AuthorContext, t: dict, v: Value) -> None:
  ctx.call(
    S,
    "add_adjustment",
    pay_run_id=t["run"],
    employee_id=t["id"],
    kind="reimbursement",
    amount=_payout(ctx, v),
    description=t["for"],
  )


def _reimbursed(ctx: AuthorContext, t: dict, v: Value) -> dict:
  return exists(
    S,
    "adjustments",
    where("pay_run_id", t["run"]),
    where("employee_id", t["id"]),
    where("kind", "reimbursement"),
    where("description", t["for"]),
    amount_is("amount", amount_of(v), 0.01),
    since(ctx, S, "created_at"),
  )


def _reimburse_phrase(t: dict, what: str) -> str:
  return f'add {what} for "{t["for"]}" to the pay of {t["who"]} in {t["run_name"]}'


facets.sink(
  S,
  "money",
  "reimburse",
  total="reimburse_total",
  prepare=_payslip_target,
  act=_reimburse,
  check=_reimbursed,
  phrase=lambda ctx, t, obj: _reimburse_phrase(t, f"a reimbursement of {obj}"),
  total_phrase=lambda ctx, t, obj: _reimburse_phrase(t, f"one reimbursement of {obj}"),
  text=lambda ctx, t, v: f"{t['who']} is reimbursed {v.label} in {t['run_name']}.",
)


def _bonus(ctx: AuthorContext, t: dict, v: Value) -> None:
  comp = ctx.state(S).compensation.find(str(v.value))
  if comp is None or not _in_draft(ctx, comp):
    raise AuthoringError("not_in_draft_run", str(v.value))
  in_use(ctx, S).add(comp.id)  # their draft payslip changes: no later scenario edit may touch it
  rec = ctx.call(S, "get_compensation", employee_id=comp.id)
  run = _draft_run(ctx, rec["pay_frequency"])
  ctx.call(
    S,
    "add_adjustment",
    pay_run_id=run["id"],
    employee_id=comp.id,
    kind="bonus",
    amount=t["amount"],
    description=t["for"],
  )


facets.sink(
  S,
  "employee.id",
  "give_bonus",
  prepare=lambda ctx: {
    "amount": float(ctx.choice((250, 500, 750, 1000, 1500))),
    "for": f"Spot bonus: {topic(ctx)}",
  },
  act=_bonus,
  check=lambda ctx, t, v: exists(
    S,
    "adjustments",
    where("employee_id", str(v.value)),
    where("kind", "bonus"),
    where("description", t["for"]),
    where("amount", t["amount"]),
    since(ctx, S, "created_at"),
  ),
  phrase=lambda ctx, t, obj: (
    f"give {_employee_phrase(obj)} a {home_money(ctx, t['amount']).label} bonus described as "
    f'"{t["for"]}" in their current draft payroll'
  ),
  text=lambda ctx, t, v: f"Employee {v.label} gets a {home_money(ctx, t['amount']).label} bonus.",
)


# --- revisit: read a draft net pay, add a reimbursement, read the higher net pay -----------


def _net_first(ctx: AuthorContext) -> tuple[Found, dict]:
  t = _payslip_target(ctx)
  slip = ctx.call(S, "list_payslips", employee_id=t["id"], pay_run_id=t["run"])["items"][0]
  found = found_home_money(ctx, f"the net pay of {t['who']} in {t['run_name']}", [slip["net"]])
  return found, {**t, "slip": slip["id"], "net": slip["net"]}


def _net_second(ctx: AuthorContext, t: dict) -> Found:
  slip = ctx.call(S, "list_payslips", employee_id=t["id"], pay_run_id=t["run"])["items"][0]
  return found_home_money(
    ctx, f"the net pay of {t['who']} in {t['run_name']} now", [slip["net"]], stale=t["net"]
  )


facets.revisit(
  S,
  kind="money",
  kind_in="money",
  kind_after="money",
  name="reimbursement_raises_net_pay",
  first=_net_first,
  second=_net_second,
  change="reimburse_on_payslip",
  act=_reimburse,
  check=_reimbursed,
  phrase=lambda ctx, t, obj: f'add a reimbursement of {obj} for "{t["for"]}" to that payslip',
  text=lambda ctx, t, v: f"{t['who']} is reimbursed {v.label} in {t['run_name']}.",
  single=True,
)
