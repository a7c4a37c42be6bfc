from collections import Counter

import pytest

from envs._world import world
from envs.payroll import PayrollService
from tests.contract import call_fails, call_ok

SEED = 3
APRIL = {"period_start": "2026-04-01", "period_end": "2026-04-30", "pay_date": "2026-04-30"}


@pytest.fixture
def pay():
  return PayrollService.create(seed=SEED)


def run_of(pay, status, freq="monthly"):
  return next(
    r
    for r in sorted(pay.state.pay_runs, key=lambda r: r.period_start)
    if r.status == status and r.pay_frequency == freq
  )


def slip(pay, run_id, employee_id):
  return next(
    s for s in pay.state.payslips if s.pay_run_id == run_id and s.employee_id == employee_id
  )


def monthly(pay):
  return sorted(c.id for c in pay.state.compensation if c.pay_frequency == "monthly")


def test_seeded_data_is_sized():
  a = PayrollService.create(seed=5)
  st = a.state
  assert len(st.compensation) == 60 and len(st.pay_runs) == 9
  assert {c.email for c in st.compensation} == {p.email for p in world(5).people}
  assert Counter(r.status for r in st.pay_runs) == {"paid": 5, "approved": 2, "draft": 2}
  assert Counter(c.pay_frequency for c in st.compensation)["semi_monthly"] > 0
  for s in st.payslips:
    run, comp = st.pay_runs.get(s.pay_run_id), st.compensation.get(s.employee_id)
    assert run.pay_frequency == comp.pay_frequency and s.pay_date == run.pay_date
    assert s.net == round(s.gross + s.reimbursements - s.tax - s.deductions, 2) and s.net > 0
  drafts = {r.id for r in st.pay_runs if r.status == "draft"}
  assert any(x.pay_run_id in drafts for x in st.adjustments)
  assert all(r.pay_date >= r.period_end for r in st.pay_runs)
  big = PayrollService.create(seed=5, size=150)
  assert len(big.state.compensation) == 150


def test_reads(pay):
  page = call_ok(pay, "list_pay_runs", {"limit": 4})
  assert page["total"] == 9 and page["next_offset"] == 4
  starts = [r["period_start"] for r in call_ok(pay, "list_pay_runs", {"limit": 100})["items"]]
  assert starts == sorted(starts, reverse=True)
  paid = call_ok(pay, "list_pay_runs", {"status": "paid", "pay_frequency": "monthly"})["items"]
  assert [r["period_start"] for r in paid] == ["2026-01-01", "2025-12-01"]
  run = call_ok(pay, "get_pay_run", {"pay_run_id": paid[1]["id"]})
  assert run["employees"] == len(run["payslips"]) == len(monthly(pay))
  assert run["gross"] == round(sum(s["gross"] for s in run["payslips"]), 2)
  assert run["adjustments"] and all(a["kind"] == "bonus" for a in run["adjustments"])
  first = run["payslips"][0]
  assert call_ok(pay, "get_payslip", {"payslip_id": first["id"]}) == first
  mine = call_ok(pay, "list_payslips", {"employee_id": first["employee_id"]})
  dates = [s["pay_date"] for s in mine["items"]]
  assert mine["total"] == 4 and dates == sorted(dates, reverse=True)
  assert (
    call_ok(pay, "list_payslips", {"pay_run_id": run["id"], "limit": 100})["total"]
    == (run["employees"])
  )
  comp = call_ok(pay, "get_compensation", {"employee_id": first["employee_id"]})
  assert first["base_pay"] == round(comp["annual_salary"] / 12, 2)
  assert first["tax"] == round(first["gross"] * comp["tax_rate"], 2)
  summary = call_ok(pay, "payroll_summary", {"start_date": "2026-01-01", "end_date": "2026-02-28"})
  jan = [r for r in pay.state.pay_runs if r.status == "paid" and r.pay_date.year == 2026]
  assert summary["pay_runs"] == len(jan) and summary["currency"] == world(SEED).currency
  assert summary["net"] == round(sum(d["net"] for d in summary["by_department"].values()), 2)
  wider = {"start_date": "2026-01-01", "end_date": "2026-12-31", "include_unpaid": True}
  assert call_ok(pay, "payroll_summary", wider)["pay_runs"] == 8  # every run paid in 2026


def test_create_adjust_approve_pay(pay):
  run = call_ok(pay, "create_pay_run", APRIL)
  assert run["status"] == "draft" and run["employees"] == len(monthly(pay))
  assert run["pay_date"] == "2026-04-30"
  who = monthly(pay)[0]
  before = slip(pay, run["id"], who)
  bonus = call_ok(
    pay,
    "add_adjustment",
    {
      "pay_run_id": run["id"],
      "employee_id": who,
      "kind": "bonus",
      "amount": 1000,
      "description": "Launch bonus",
    },
  )
  rate = pay.state.compensation.get(who).tax_rate
  assert bonus["payslip"]["gross"] == before.gross + 1000
  assert bonus["payslip"]["tax"] == round((before.gross + 1000) * rate, 2)
  refund = call_ok(
    pay,
    "add_adjustment",
    {
      "pay_run_id": run["id"],
      "employee_id": who,
      "kind": "reimbursement",
      "amount": 250.5,
      "description": "Travel",
    },
  )["payslip"]
  assert refund["reimbursements"] == 250.5 and refund["tax"] == bonus["payslip"]["tax"]
  assert refund["net"] == round(bonus["payslip"]["net"] + 250.5, 2)
  back = call_ok(pay, "remove_adjustment", {"adjustment_id": bonus["adjustment"]["id"]})
  assert back["gross"] == before.gross and back["reimbursements"] == 250.5
  assert bonus["adjustment"]["id"] not in pay.state.adjustments
  # a raise reaches the draft run when it is recalculated
  call_ok(pay, "update_compensation", {"employee_id": who, "annual_salary": 240000})
  assert slip(pay, run["id"], who).base_pay == before.base_pay
  call_ok(pay, "recalculate_pay_run", {"pay_run_id": run["id"]})
  assert slip(pay, run["id"], who).base_pay == 20000.0
  skipped = call_ok(pay, "skip_employee", {"pay_run_id": run["id"], "employee_id": who})
  assert skipped["employees"] == run["employees"] - 1
  assert not [a for a in pay.state.adjustments if a.pay_run_id == run["id"]]
  approved = call_ok(pay, "approve_pay_run", {"pay_run_id": run["id"]})
  assert approved["status"] == "approved" and approved["approved_at"]
  now = pay.state.now
  done = call_ok(pay, "mark_paid", {"pay_run_id": run["id"]})
  assert done["status"] == "paid" and pay.state.pay_runs.get(run["id"]).paid_at == now


def test_update_compensation_and_empty_run(pay):
  semi = [c.id for c in pay.state.compensation if c.pay_frequency == "semi_monthly"]
  for emp in semi:
    upd = call_ok(pay, "update_compensation", {"employee_id": emp, "pay_frequency": "monthly"})
    assert upd["pay_frequency"] == "monthly"
  upd = call_ok(
    pay, "update_compensation", {"employee_id": semi[0], "tax_rate": 0.3, "benefits": 0}
  )
  assert (upd["tax_rate"], upd["benefits"]) == (0.3, 0.0)
  empty = call_ok(
    pay,
    "create_pay_run",
    {
      "period_start": "2026-03-16",
      "period_end": "2026-03-31",
      "pay_date": "2026-04-01",
      "pay_frequency": "semi_monthly",
    },
  )
  assert empty["employees"] == 0
  call_fails(pay, "approve_pay_run", {"pay_run_id": empty["id"]}, 409, "no payslips")


def test_error_paths_are_atomic(pay):
  draft, approved, paid = run_of(pay, "draft"), run_of(pay, "approved"), run_of(pay, "paid")
  who = slip(pay, draft.id, monthly(pay)[0]).employee_id
  semi = next(c.id for c in pay.state.compensation if c.pay_frequency == "semi_monthly")
  old_adj = next(a for a in pay.state.adjustments if a.pay_run_id == paid.id)
  adj = {"pay_run_id": draft.id, "employee_id": who, "kind": "bonus", "amount": 10}
  adj["description"] = "x"
  # 400
  call_fails(pay, "get_pay_run", {}, 400, "pay_run_id")
  call_fails(pay, "get_payslip", {"payslip_id": 1}, 400, "payslip_id", "string")
  call_fails(pay, "list_pay_runs", {"status": "void"}, 400, "status")
  call_fails(pay, "create_pay_run", {**APRIL, "period_end": "2026-03-31"}, 400, "period_end")
  call_fails(pay, "create_pay_run", {**APRIL, "pay_date": "2026-04-29"}, 400, "pay_date")
  call_fails(pay, "create_pay_run", {**APRIL, "pay_frequency": "weekly"}, 400, "pay_frequency")
  call_fails(pay, "add_adjustment", {**adj, "amount": 0}, 400, "amount")
  call_fails(pay, "add_adjustment", {**adj, "kind": "gift"}, 400, "kind")
  call_fails(pay, "add_adjustment", {**adj, "description": ""}, 400, "description")
  call_fails(pay, "update_compensation", {"employee_id": who, "annual_salary": -1}, 400, "annual")
  call_fails(pay, "update_compensation", {"employee_id": who, "tax_rate": 0.9}, 400, "tax_rate")
  call_fails(pay, "update_compensation", {"employee_id": who}, 400, "at least one")
  call_fails(
    pay, "payroll_summary", {"start_date": "2026-02-01", "end_date": "2026-01-01"}, 400, "end_date"
  )
  # 404
  for tool in ("get_pay_run", "recalculate_pay_run", "approve_pay_run", "mark_paid"):
    call_fails(pay, tool, {"pay_run_id": "run_nope"}, 404, "run_nope")
  call_fails(pay, "get_payslip", {"payslip_id": "slip_nope"}, 404, "slip_nope")
  call_fails(pay, "list_payslips", {"employee_id": "E9999"}, 404, "E9999")
  call_fails(pay, "list_payslips", {"pay_run_id": "run_nope"}, 404, "run_nope")
  call_fails(pay, "get_compensation", {"employee_id": "E9999"}, 404, "E9999")
  call_fails(pay, "add_adjustment", {**adj, "pay_run_id": "run_nope"}, 404, "run_nope")
  call_fails(pay, "add_adjustment", {**adj, "employee_id": "E9999"}, 404, "E9999")
  call_fails(pay, "remove_adjustment", {"adjustment_id": "adj_nope"}, 404, "adj_nope")
  call_fails(pay, "skip_employee", {"pay_run_id": "run_nope", "employee_id": who}, 404)
  call_fails(pay, "skip_employee", {"pay_run_id": draft.id, "employee_id": "E9999"}, 404)
  call_fails(pay, "update_compensation", {"employee_id": "E9999", "tax_rate": 0.2}, 404)
  # 409
  call_fails(
    pay, "create_pay_run", {**APRIL, "period_start": "2026-03-20"}, 409, draft.id, "one pay run"
  )
  call_fails(pay, "add_adjustment", {**adj, "pay_run_id": approved.id}, 409, "only a draft")
  call_fails(pay, "add_adjustment", {**adj, "pay_run_id": paid.id}, 409, "paid")
  call_fails(pay, "add_adjustment", {**adj, "employee_id": semi}, 409, "not paid in pay run")
  call_fails(pay, "add_adjustment", {**adj, "kind": "deduction", "amount": 999999}, 409, "negative")
  call_fails(pay, "remove_adjustment", {"adjustment_id": old_adj.id}, 409, "paid")
  call_fails(pay, "recalculate_pay_run", {"pay_run_id": paid.id}, 409, "paid")
  call_fails(pay, "skip_employee", {"pay_run_id": approved.id, "employee_id": who}, 409)
  call_fails(pay, "approve_pay_run", {"pay_run_id": approved.id}, 409, "approved")
  call_fails(pay, "mark_paid", {"pay_run_id": draft.id}, 409, "approve it first")
  call_fails(pay, "mark_paid", {"pay_run_id": paid.id}, 409, "already paid")
  comp = pay.state.compensation.get(who)
  call_fails(
    pay, "update_compensation", {"employee_id": who, "annual_salary": comp.annual_salary}, 409
  )
  # the paid run is untouched by all of the above
  assert pay.state.pay_runs.get(paid.id).status == "paid"
