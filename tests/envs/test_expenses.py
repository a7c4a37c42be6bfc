from datetime import date

import pytest

from envs._world import world
from envs.expenses import ExpensesService
from tests.contract import call_fails, call_ok

SEED = 3
TODAY = date(2026, 3, 2)


@pytest.fixture
def exp():
  return ExpensesService.create(seed=SEED)


def one(svc, status):
  return call_ok(svc, "list_reports", {"status": status, "limit": 1})["items"][0]


def item(**over):
  args = {"date": "2026-02-20", "merchant": "Pret", "category": "meals", "amount": 24.5}
  return {**args, **over}


def test_seeded_data_is_sized():
  a = ExpensesService.create(seed=5)
  assert len(a.state.reports) == 25
  assert len(ExpensesService.create(seed=5, size=80).state.reports) == 80
  w = world(5)
  assert set(a.state.members.ids()) == {p.email for p in w.people}
  assert {r.status for r in a.state.reports} == {
    "draft",
    "submitted",
    "approved",
    "rejected",
    "reimbursed",
  }
  for r in a.state.reports:
    person = w.person(r.employee)
    assert r.approver == (person.manager_email or r.approver) != r.employee
    items = [e for e in a.state.expenses if e.report_id == r.id]
    assert items and round(sum(e.amount for e in items), 2) == r.total
    assert all(e.date <= TODAY for e in items)
    if r.status != "draft":  # everything that left draft complied with the policy
      for e in items:
        limit = a.state.policies.get(e.category).limit_per_item
        assert e.amount <= limit or e.justification
        assert e.amount <= 75 or e.receipt_url


def test_list_get_policies_and_spend(exp):
  page = call_ok(exp, "list_reports", {"limit": 5})
  assert page["total"] == 25 and len(page["items"]) == 5
  times = [r["created_at"] for r in page["items"]]
  assert times == sorted(times, reverse=True)
  sub = one(exp, "submitted")
  waiting = call_ok(
    exp, "list_reports", {"status": "submitted", "approver": sub["approver"], "limit": 100}
  )["items"]
  assert sub["id"] in [r["id"] for r in waiting]
  assert all(r["approver"] == sub["approver"] for r in waiting)
  mine = call_ok(exp, "list_reports", {"employee": sub["employee"], "limit": 100})["items"]
  assert mine and all(r["employee"] == sub["employee"] for r in mine)
  word = sub["title"].split()[0]
  assert all(word in r["title"] for r in call_ok(exp, "list_reports", {"query": word})["items"])
  got = call_ok(exp, "get_report", {"report_id": sub["id"]})
  assert got["total"] == round(sum(i["amount"] for i in got["items"]), 2)
  assert all("over_limit" in i and "needs_receipt" in i for i in got["items"])
  policies = call_ok(exp, "list_policies")
  assert {p["id"] for p in policies} == {"meals", "travel", "lodging", "software", "office"}
  spend = call_ok(exp, "spend_by_category", {})
  live = {r.id for r in exp.state.reports if r.status != "rejected"}
  expected = sum(e.amount for e in exp.state.expenses if e.report_id in live)
  assert spend["total"] == round(expected, 2) and set(spend["by_category"]) == {
    p["id"] for p in policies
  }
  rej = call_ok(exp, "spend_by_category", {"status": "rejected"})
  assert rej["reports"] == sum(r.status == "rejected" for r in exp.state.reports)
  window = call_ok(exp, "spend_by_category", {"start_date": "2026-02-01", "end_date": "2026-02-10"})
  assert window["total"] == round(
    sum(
      e.amount
      for e in exp.state.expenses
      if e.report_id in live and date(2026, 2, 1) <= e.date <= date(2026, 2, 10)
    ),
    2,
  )
  dept = exp.state.members.get(sub["employee"]).department
  by_dept = call_ok(exp, "spend_by_category", {"department": dept.lower()})
  assert 0 < by_dept["reports"] <= spend["reports"]
  by_emp = call_ok(exp, "spend_by_category", {"employee": sub["employee"]})
  assert by_emp["reports"] >= 1


def test_report_lifecycle(exp):
  me = world(SEED).people[0]
  rpt = call_ok(exp, "create_report", {"employee": me.email.upper(), "title": "Client visit"})
  assert rpt["status"] == "draft" and rpt["employee"] == me.email
  assert rpt["approver"] == me.manager_email and rpt["currency"] == "USD"
  added = call_ok(exp, "add_expense_item", {"report_id": rpt["id"], **item(currency="USD")})
  assert added["report"]["total"] == 24.5 and added["item"]["currency"] == "USD"
  hotel = call_ok(
    exp,
    "add_expense_item",
    {
      "report_id": rpt["id"],
      **item(category="lodging", amount=340, merchant="Hilton", date="2026-02-19"),
      "receipt_url": "https://r.example.com/1.pdf",
      "justification": "Conference rate sold out",
    },
  )
  assert hotel["report"]["total"] == 364.5
  extra = call_ok(exp, "add_expense_item", {"report_id": rpt["id"], **item(amount=10)})
  after = call_ok(exp, "remove_expense_item", {"expense_id": extra["item"]["id"]})
  assert after["total"] == 364.5 and extra["item"]["id"] not in exp.state.expenses
  view = call_ok(exp, "get_report", {"report_id": rpt["id"]})
  assert [i["over_limit"] for i in view["items"]] == [True, False]  # ordered by date, id
  submitted = call_ok(exp, "submit_report", {"report_id": rpt["id"]})
  assert submitted["status"] == "submitted" and submitted["submitted_at"]
  ok = call_ok(exp, "approve_report", {"report_id": rpt["id"], "approver": me.manager_email})
  assert ok["status"] == "approved" and ok["decided_by"] == me.manager_email
  paid = call_ok(exp, "reimburse_report", {"report_id": rpt["id"]})
  assert paid["status"] == "reimbursed" and paid["payout_reference"].startswith("ACH-")
  assert exp.state.reports.get(rpt["id"]).reimbursed_at is not None


def test_reject(exp):
  sub = one(exp, "submitted")
  out = call_ok(
    exp,
    "reject_report",
    {"report_id": sub["id"], "approver": sub["approver"], "reason": "Duplicate taxi"},
  )
  assert out["status"] == "rejected" and out["rejection_reason"] == "Duplicate taxi"
  assert exp.state.reports.get(sub["id"]).decided_by == sub["approver"]


def test_error_paths_are_atomic(exp):
  draft, sub, appr = one(exp, "draft"), one(exp, "submitted"), one(exp, "approved")
  rej, paid = one(exp, "rejected"), one(exp, "reimbursed")
  me = world(SEED).people[0].email
  # missing, ill-typed and out-of-range arguments
  call_fails(exp, "get_report", {}, 400, "report_id")
  call_fails(exp, "get_report", {"report_id": 3}, 400, "report_id")
  call_fails(exp, "list_reports", {"status": "open"}, 400, "status")
  call_fails(exp, "list_reports", {"employee": "nobody"}, 400, "employee")
  call_fails(exp, "create_report", {"employee": me, "title": ""}, 400, "title")
  rid = draft["id"]
  call_fails(exp, "add_expense_item", {"report_id": rid, **item(amount=0)}, 400, "amount")
  call_fails(exp, "add_expense_item", {"report_id": rid, **item(category="golf")}, 400)
  call_fails(exp, "add_expense_item", {"report_id": rid, **item(date="2026-03-09")}, 400, "future")
  call_fails(exp, "add_expense_item", {"report_id": rid, **item(currency="usd")}, 400, "currency")
  call_fails(
    exp, "add_expense_item", {"report_id": rid, **item(receipt_url="file:///r.pdf")}, 400, "http"
  )
  call_fails(exp, "spend_by_category", {"start_date": "2026-02-10", "end_date": "2026-02-01"}, 400)
  call_fails(exp, "reject_report", {"report_id": sub["id"], "approver": sub["approver"]}, 400)
  # unknown ids
  call_fails(exp, "get_report", {"report_id": "rpt_x"}, 404, "rpt_x")
  call_fails(exp, "create_report", {"employee": "x@nowhere.com", "title": "t"}, 404, "x@nowhere")
  call_fails(exp, "spend_by_category", {"employee": "x@nowhere.com"}, 404, "x@nowhere")
  call_fails(exp, "add_expense_item", {"report_id": "rpt_x", **item()}, 404, "rpt_x")
  call_fails(exp, "remove_expense_item", {"expense_id": "exp_x"}, 404, "exp_x")
  call_fails(exp, "submit_report", {"report_id": "rpt_x"}, 404, "rpt_x")
  call_fails(exp, "approve_report", {"report_id": "rpt_x", "approver": me}, 404, "rpt_x")
  call_fails(exp, "reject_report", {"report_id": "rpt_x", "approver": me, "reason": "r"}, 404)
  call_fails(exp, "reimburse_report", {"report_id": "rpt_x"}, 404, "rpt_x")
  # only drafts are edited or submitted
  sub_item = next(e for e in exp.state.expenses if e.report_id == sub["id"])
  for done in (sub, appr, rej, paid):
    call_fails(exp, "add_expense_item", {"report_id": done["id"], **item()}, 409, "only draft")
    call_fails(exp, "submit_report", {"report_id": done["id"]}, 409, "only draft")
  call_fails(exp, "remove_expense_item", {"expense_id": sub_item.id}, 409, "only draft")
  call_fails(exp, "add_expense_item", {"report_id": rid, **item(currency="EUR")}, 409, "convert")
  # submission rules
  new = call_ok(exp, "create_report", {"employee": me, "title": "Trip"})
  call_fails(exp, "submit_report", {"report_id": new["id"]}, 409, "no expense items")
  big = call_ok(
    exp,
    "add_expense_item",
    {"report_id": new["id"], **item(amount=90, receipt_url="https://r.example.com/a")},
  )
  call_fails(
    exp, "submit_report", {"report_id": new["id"]}, 409, "justification", big["item"]["id"]
  )
  call_ok(exp, "remove_expense_item", {"expense_id": big["item"]["id"]})
  bare = call_ok(
    exp, "add_expense_item", {"report_id": new["id"], **item(amount=80, category="office")}
  )
  call_fails(exp, "submit_report", {"report_id": new["id"]}, 409, "receipt", bare["item"]["id"])
  # decisions
  for verb in ("approve_report", "reject_report"):
    args = {"reason": "r"} if verb == "reject_report" else {}
    for done in (draft, appr, rej, paid):
      call_fails(
        exp, verb, {"report_id": done["id"], "approver": done["approver"], **args}, 409, "only"
      )
    call_fails(
      exp, verb, {"report_id": sub["id"], "approver": sub["employee"], **args}, 409, "own report"
    )
    call_fails(exp, verb, {"report_id": sub["id"], "approver": "z@x.com", **args}, 409, "approver")
  for done in (draft, sub, rej, paid):
    call_fails(exp, "reimburse_report", {"report_id": done["id"]}, 409, "only approved")
