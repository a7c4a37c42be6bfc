from collections import Counter
from datetime import date

import pytest

from envs._world import world
from envs.timeoff import TimeOffService
from tests.contract import call_fails, call_ok

SEED = 3
TODAY = date(2026, 3, 2)  # the seeded clock's day, a Monday


@pytest.fixture
def to():
  return TimeOffService.create(seed=SEED)


def idle(to):
  """An employee with a manager and no requests at all."""
  busy = {r.employee_id for r in to.state.requests}
  return next(
    e
    for e in sorted(to.state.employees, key=lambda e: e.id)
    if e.id not in busy and e.manager_email
  )


def balance(to, employee_id, policy_id):
  return to.state.balances.get(f"{employee_id}:{policy_id}")


def request(to, employee_id, start="2026-03-16", end="2026-03-20", policy_id="vacation"):
  args = {"employee_id": employee_id, "policy_id": policy_id, "start_date": start}
  return call_ok(to, "request_time_off", {**args, "end_date": end})


def seeded(to, status, future=True):
  return next(
    r
    for r in sorted(to.state.requests, key=lambda r: r.id)
    if r.status == status and (r.start_date > TODAY) == future
  )


def test_seeded_data_is_sized():
  a = TimeOffService.create(seed=5)
  assert len(a.state.requests) == 40 and len(a.state.employees) == 60
  assert len(a.state.balances) == 180 and len(a.state.policies) == 3
  assert {e.email for e in a.state.employees} == {p.email for p in world(5).people}
  statuses = Counter(r.status for r in a.state.requests)
  assert all(statuses[s] for s in ("pending", "approved", "denied", "cancelled"))
  for emp in a.state.employees:  # approved days are exactly what each balance has used
    for pid in ("vacation", "sick", "personal"):
      used = sum(
        r.days
        for r in a.state.requests
        if r.employee_id == emp.id and r.policy_id == pid and r.status == "approved"
      )
      bal = a.state.balances.get(f"{emp.id}:{pid}")
      assert bal.used == used and bal.available >= 0
  assert all(r.start_date <= r.end_date and r.days >= 1 for r in a.state.requests)
  assert len(TimeOffService.create(seed=5, size=150).state.requests) == 150


def test_reads(to):
  pols = call_ok(to, "list_policies")
  assert [(p["id"], p["annual_days"]) for p in pols] == [
    ("personal", 3.0),
    ("sick", 10.0),
    ("vacation", 20.0),
  ]
  emp = idle(to)
  bals = call_ok(to, "get_balance", {"employee_id": emp.id})
  assert [b["policy_id"] for b in bals] == ["personal", "sick", "vacation"]
  one = call_ok(to, "get_balance", {"employee_id": emp.id, "policy_id": "sick"})
  assert one == [{**bals[1]}] and one[0]["available"] == 10.0
  page = call_ok(to, "list_requests", {"limit": 5})
  assert page["total"] == 40 and page["next_offset"] == 5
  starts = [r["start_date"] for r in page["items"]]
  assert starts == sorted(starts)
  pending = call_ok(to, "list_requests", {"status": "pending", "limit": 100})["items"]
  assert pending and all(r["status"] == "pending" for r in pending)
  boss = pending[0]["approver"]
  mine = call_ok(to, "list_requests", {"approver": boss.upper(), "limit": 100})["items"]
  assert mine and all(r["approver"] == boss for r in mine)
  who = pending[0]["employee_id"]
  theirs = call_ok(to, "list_requests", {"employee_id": who, "policy_id": pending[0]["policy_id"]})
  assert pending[0]["id"] in [r["id"] for r in theirs["items"]]
  window = {"start_after": "2026-03-10", "start_before": "2026-04-01", "limit": 100}
  assert all(
    "2026-03-10" <= r["start_date"] < "2026-04-01"
    for r in call_ok(to, "list_requests", window)["items"]
  )
  got = call_ok(to, "get_request", {"request_id": pending[0]["id"]})
  assert got == pending[0]
  # Good Friday (3 April) and the weekend are not business days
  count = call_ok(to, "count_business_days", {"start_date": "2026-03-30", "end_date": "2026-04-05"})
  assert count["business_days"] == 4 and [h["id"] for h in count["holidays"]] == ["2026-04-03"]
  hols = call_ok(to, "list_holidays", {"year": 2026})
  assert len(hols) == 11 and all(h["id"].startswith("2026-") for h in hols)
  assert len(call_ok(to, "list_holidays")) == 12


def test_who_is_out(to):
  out = call_ok(to, "who_is_out")
  assert out and all(o["start_date"] <= TODAY.isoformat() <= o["end_date"] for o in out)
  assert all(to.state.requests.get(o["request_id"]).status == "approved" for o in out)
  dept = out[0]["department"]
  only = call_ok(to, "who_is_out", {"day": TODAY.isoformat(), "department": dept.lower()})
  assert only and all(o["department"] == dept for o in only)
  r = seeded(to, "approved")
  later = call_ok(to, "who_is_out", {"day": r.start_date.isoformat()})
  assert (r.employee_id, r.id) in [(o["employee_id"], o["request_id"]) for o in later]
  assert call_ok(to, "who_is_out", {"day": "2026-01-03"}) == []  # a Saturday in a quiet week


def test_request_approve_and_cancel_restores_balance(to):
  emp = idle(to)
  before = balance(to, emp.id, "vacation")
  req = request(to, emp.id)
  assert req["status"] == "pending" and req["days"] == 5.0
  assert req["approver"] == emp.manager_email
  assert balance(to, emp.id, "vacation") == before  # pending requests do not reserve days
  done = call_ok(to, "approve_request", {"request_id": req["id"], "approver": emp.manager_email})
  assert done["request"]["status"] == "approved" and done["request"]["decided_at"]
  assert done["balance"]["available"] == before.available - 5
  assert balance(to, emp.id, "vacation").used == before.used + 5
  assert emp.id in [o["employee_id"] for o in call_ok(to, "who_is_out", {"day": "2026-03-18"})]
  back = call_ok(to, "cancel_request", {"request_id": req["id"]})
  assert back["request"]["status"] == "cancelled"
  assert balance(to, emp.id, "vacation") == before
  # the freed dates can be requested again, then cancelled while pending
  again = request(to, emp.id, policy_id="personal", start="2026-03-16", end="2026-03-16")
  assert call_ok(to, "cancel_request", {"request_id": again["id"]})["balance"]["used"] == 0


def test_deny_and_adjust(to):
  emp = idle(to)
  req = request(to, emp.id, policy_id="sick", start="2026-03-13", end="2026-03-16")
  assert req["days"] == 2.0  # Friday and Monday
  denied = call_ok(to, "deny_request", {"request_id": req["id"], "note": "Need cover"})
  assert denied["status"] == "denied" and denied["decision_note"] == "Need cover"
  assert to.state.requests.get(req["id"]).status == "denied"
  assert balance(to, emp.id, "sick").available == 10.0
  adj = call_ok(
    to,
    "adjust_balance",
    {"employee_id": emp.id, "policy_id": "personal", "days": 1.5, "reason": "Volunteering"},
  )
  assert adj["available"] == 4.5 and adj["adjustments"][0]["reason"] == "Volunteering"
  assert balance(to, emp.id, "personal").adjustments[0].days == 1.5


def test_error_paths_are_atomic(to):
  emp = idle(to)
  pending, approved = seeded(to, "pending"), seeded(to, "approved")
  started = next(r for r in to.state.requests if r.status == "approved" and r.start_date <= TODAY)
  denied, cancelled = seeded(to, "denied"), seeded(to, "cancelled", future=False)
  args = {"employee_id": emp.id, "policy_id": "vacation"}
  # 400
  call_fails(to, "get_request", {}, 400, "request_id")
  call_fails(to, "get_balance", {"employee_id": 7}, 400, "employee_id", "string")
  call_fails(to, "get_balance", {"employee_id": emp.id, "policy_id": "pto"}, 400, "policy_id")
  call_fails(to, "list_requests", {"status": "open"}, 400, "status")
  call_fails(to, "list_requests", {"limit": 101}, 400, "limit")
  call_fails(to, "list_requests", {"approver": "boss"}, 400, "approver")
  call_fails(
    to,
    "count_business_days",
    {"start_date": "2026-03-10", "end_date": "2026-03-09"},
    400,
    "end_date",
  )
  call_fails(to, "who_is_out", {"day": "tomorrow"}, 400, "day")
  call_fails(to, "request_time_off", {**args, "start_date": "2026-03-10"}, 400, "end_date")
  call_fails(
    to,
    "request_time_off",
    {**args, "start_date": "2026-03-10", "end_date": "2026-03-09"},
    400,
    "before",
  )
  call_fails(
    to,
    "request_time_off",
    {**args, "start_date": "2026-03-07", "end_date": "2026-03-08"},
    400,
    "no business days",
  )
  call_fails(to, "adjust_balance", {**args, "days": 0, "reason": "x"}, 400, "zero")
  call_fails(to, "adjust_balance", {**args, "days": 1000, "reason": "x"}, 400, "days")
  call_fails(to, "adjust_balance", {**args, "days": 1, "reason": ""}, 400, "reason")
  call_fails(to, "approve_request", {"request_id": pending.id, "approver": "x"}, 400, "approver")
  # 404
  call_fails(to, "get_request", {"request_id": "tor_nope"}, 404, "tor_nope")
  call_fails(to, "get_balance", {"employee_id": "E9999"}, 404, "E9999")
  call_fails(to, "list_requests", {"employee_id": "E9999"}, 404, "E9999")
  call_fails(
    to,
    "request_time_off",
    {**args, "employee_id": "E9999", "start_date": "2026-03-10", "end_date": "2026-03-10"},
    404,
    "E9999",
  )
  for tool in ("approve_request", "deny_request", "cancel_request"):
    call_fails(to, tool, {"request_id": "tor_nope"}, 404, "tor_nope")
  call_fails(
    to, "adjust_balance", {**args, "employee_id": "E9999", "days": 1, "reason": "x"}, 404, "E9999"
  )
  # 409
  call_fails(
    to,
    "request_time_off",
    {**args, "policy_id": "personal", "start_date": "2026-03-16", "end_date": "2026-03-20"},
    409,
    "available",
  )
  request(to, emp.id)
  call_fails(
    to,
    "request_time_off",
    {**args, "start_date": "2026-03-20", "end_date": "2026-03-23"},
    409,
    "overlaps",
  )
  for tool in ("approve_request", "deny_request"):
    call_fails(to, tool, {"request_id": approved.id}, 409, "only pending")
    call_fails(
      to, tool, {"request_id": pending.id, "approver": "zz@example.com"}, 409, pending.approver
    )
  call_fails(to, "cancel_request", {"request_id": started.id}, 409, "not started")
  call_fails(to, "cancel_request", {"request_id": denied.id}, 409, "already denied")
  call_fails(to, "cancel_request", {"request_id": cancelled.id}, 409, "already cancelled")
  have = balance(to, emp.id, "sick").available
  call_fails(
    to,
    "adjust_balance",
    {**args, "policy_id": "sick", "days": -(have + 1), "reason": "x"},
    409,
    "negative",
  )


def test_approval_blocked_when_balance_ran_short(to):
  emp = idle(to)
  req = request(to, emp.id, policy_id="personal", start="2026-03-16", end="2026-03-18")
  call_ok(
    to,
    "adjust_balance",
    {"employee_id": emp.id, "policy_id": "personal", "days": -1, "reason": "Correction"},
  )
  call_fails(to, "approve_request", {"request_id": req["id"]}, 409, "only 2")
