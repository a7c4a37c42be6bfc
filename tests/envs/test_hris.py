from collections import Counter

import pytest

from envs._world import world
from envs.hris import HrisService
from tests.contract import call_fails, call_ok

SEED = 3


@pytest.fixture
def hr():
  return HrisService.create(seed=SEED)


def pick(hr, **attrs):
  """The first employee (in id order) whose fields equal ``attrs``."""
  return next(
    e
    for e in sorted(hr.state.employees, key=lambda e: e.id)
    if all(getattr(e, k) == v for k, v in attrs.items())
  )


def ceo(hr):
  return pick(hr, manager_id=None)


def head(hr, dept):
  return hr.state.employees.get(hr.state.departments.get(dept).head_id)


def member(hr, dept, **attrs):
  """An active, non-head employee of ``dept`` who manages nobody."""
  return next(
    e
    for e in sorted(hr.state.employees, key=lambda e: e.id)
    if e.department == dept
    and e.status == "active"
    and e.manager_id == hr.state.departments.get(dept).head_id
    and not any(r.manager_id == e.id for r in hr.state.employees)
    and all(getattr(e, k) == v for k, v in attrs.items())
  )


def test_seeded_data_is_sized():
  a = HrisService.create(seed=5)
  w = world(5)
  emps = {e.id: e for e in a.state.employees}
  assert len(emps) == 60 and {p.employee_id for p in w.people} == set(emps)
  assert all(emps[p.employee_id].email == p.email for p in w.people)
  statuses = Counter(e.status for e in emps.values())
  assert statuses["active"] > 40 and statuses["on_leave"] and statuses["terminated"]
  assert sum(1 for e in emps.values() if e.manager_id is None) == 1
  # nobody reports to a terminated or on-leave employee in the seeded org chart
  assert all(emps[e.manager_id].status == "active" for e in emps.values() if e.manager_id)
  assert all(e.termination_date > e.hire_date for e in emps.values() if e.termination_date)
  assert len(a.state.departments) == 7 and len(a.state.job_history) > 60
  assert len(HrisService.create(seed=5, size=200).state.employees) == 200
  small = HrisService.create(seed=5, size=12)
  assert len(small.state.employees) == 12
  assert all(e.manager_id in small.state.employees for e in small.state.employees if e.manager_id)


def test_search_employees_filters_and_pages(hr):
  page = call_ok(hr, "search_employees", {"limit": 5})
  live = [e for e in hr.state.employees if e.status != "terminated"]
  assert page["total"] == len(live) and len(page["items"]) == 5 and page["next_offset"] == 5
  assert [e["id"] for e in page["items"]] == sorted(e["id"] for e in page["items"])
  eng = call_ok(hr, "search_employees", {"department": "Engineering", "limit": 100})["items"]
  assert eng and all(e["department"] == "Engineering" for e in eng)
  gone = call_ok(hr, "search_employees", {"status": "terminated"})["items"]
  assert gone and all(e["status"] == "terminated" for e in gone)
  boss = head(hr, "Sales")
  reports = call_ok(hr, "search_employees", {"manager_id": boss.id, "limit": 100})["items"]
  assert reports and all(e["manager_id"] == boss.id for e in reports)
  heads = call_ok(hr, "search_employees", {"title": "head of", "limit": 100})["items"]
  assert len(heads) == 7
  someone = pick(hr, status="active")
  got = call_ok(hr, "search_employees", {"query": someone.name.upper()})["items"]
  assert someone.id in [e["id"] for e in got]
  city = call_ok(hr, "search_employees", {"location": someone.location.lower()})["items"]
  assert city and all(e["location"] == someone.location for e in city)
  kind = call_ok(hr, "search_employees", {"employment_type": "contractor"})["items"]
  assert kind and all(e["employment_type"] == "contractor" for e in kind)


def test_lookups_and_org_chart(hr):
  emp = member(hr, "Engineering")
  got = call_ok(hr, "get_employee", {"employee_id": emp.id})
  assert got["email"] == emp.email and got["hire_date"] == emp.hire_date.isoformat()
  assert call_ok(hr, "find_employee_by_email", {"email": emp.email.upper()})["id"] == emp.id
  chain = call_ok(hr, "get_reporting_chain", {"employee_id": emp.id})
  assert [e["id"] for e in chain] == [head(hr, "Engineering").id, ceo(hr).id]
  assert call_ok(hr, "get_reporting_chain", {"employee_id": ceo(hr).id}) == []
  reports = call_ok(hr, "get_direct_reports", {"employee_id": ceo(hr).id})
  assert {e["id"] for e in reports} >= {d.head_id for d in hr.state.departments}
  gone = pick(hr, status="terminated")
  boss = gone.manager_id
  assert gone.id not in [e["id"] for e in call_ok(hr, "get_direct_reports", {"employee_id": boss})]
  every = call_ok(hr, "get_direct_reports", {"employee_id": boss, "include_terminated": True})
  assert gone.id in [e["id"] for e in every]
  depts = call_ok(hr, "list_departments")
  assert [d["name"] for d in depts] == sorted(d.id for d in hr.state.departments)
  eng = next(d for d in depts if d["name"] == "Engineering")
  assert eng["head_email"] == head(hr, "Engineering").email
  assert eng["headcount"] == sum(
    1 for e in hr.state.employees if e.department == "Engineering" and e.status != "terminated"
  )
  history = call_ok(hr, "get_job_history", {"employee_id": gone.id})
  assert [c["kind"] for c in history] == ["hire", "termination"]
  assert history[-1]["effective_date"] == gone.termination_date.isoformat()


def test_hire_update_transfer_and_terminate(hr):
  boss = head(hr, "Sales")
  new = call_ok(
    hr,
    "hire_employee",
    {
      "name": "Ada Quinn",
      "email": "Ada.Quinn@example.com",
      "department": "Sales",
      "title": "SDR",
      "manager_id": boss.id,
      "location": "Austin",
    },
  )
  top = max(int(e.id[1:]) for e in hr.state.employees if e.id != new["id"])
  assert new["id"] == f"E{top + 1}" and new["email"] == "ada.quinn@example.com"
  assert new["hire_date"] == hr.state.now.date().isoformat() and new["status"] == "active"
  assert hr.state.employees.get(new["id"]).manager_id == boss.id
  upd = call_ok(
    hr,
    "update_job",
    {"employee_id": new["id"], "title": "Account Executive", "note": "Promotion"},
  )
  assert upd["title"] == "Account Executive" and upd["department"] == "Sales"
  moved = call_ok(hr, "transfer_department", {"employee_id": new["id"], "department": "Support"})
  assert moved["department"] == "Support" and moved["manager_id"] == head(hr, "Support").id
  kinds = [c["kind"] for c in call_ok(hr, "get_job_history", {"employee_id": new["id"]})]
  assert kinds == ["hire", "job_change", "transfer"]
  away = call_ok(hr, "set_status", {"employee_id": new["id"], "status": "on_leave"})
  assert away["status"] == "on_leave"
  back = call_ok(hr, "set_status", {"employee_id": new["id"], "status": "active"})
  assert hr.state.employees.get(back["id"]).status == "active"
  out = call_ok(
    hr,
    "terminate_employee",
    {"employee_id": new["id"], "termination_date": "2026-03-20", "reason": "Resigned"},
  )
  assert out["status"] == "terminated" and out["termination_date"] == "2026-03-20"
  assert hr.state.job_history.filter(lambda c: c.employee_id == new["id"])[-1].note == "Resigned"


def test_reassign_reports_then_replace_head_then_terminate(hr):
  old = head(hr, "Support")
  heir = member(hr, "Support")
  call_ok(hr, "update_job", {"employee_id": heir.id, "manager_id": ceo(hr).id})
  for r in call_ok(hr, "get_direct_reports", {"employee_id": old.id}):
    call_ok(hr, "update_job", {"employee_id": r["id"], "manager_id": heir.id})
  dept = call_ok(hr, "set_department_head", {"department": "Support", "employee_id": heir.id})
  assert dept == {"id": "Support", "head_id": heir.id}
  assert call_ok(hr, "terminate_employee", {"employee_id": old.id})["status"] == "terminated"
  assert hr.state.employees.get(old.id).termination_date == hr.state.now.date()


def test_transfer_with_explicit_manager_and_dated(hr):
  emp = member(hr, "Finance")
  boss = member(hr, "Marketing")
  moved = call_ok(
    hr,
    "transfer_department",
    {
      "employee_id": emp.id,
      "department": "Marketing",
      "manager_id": boss.id,
      "effective_date": "2026-04-01",
    },
  )
  assert moved["manager_id"] == boss.id
  assert (
    hr.state.job_history.filter(lambda c: c.employee_id == emp.id)[-1].effective_date.month == 4
  )


def test_error_paths_are_atomic(hr):
  emp = member(hr, "Engineering")
  eng_head, sales_head, top = head(hr, "Engineering"), head(hr, "Sales"), ceo(hr)
  away, gone = pick(hr, status="on_leave"), pick(hr, status="terminated")
  # 400: missing, ill-typed and out-of-range arguments
  call_fails(hr, "get_employee", {}, 400, "employee_id")
  call_fails(hr, "get_employee", {"employee_id": 7}, 400, "employee_id", "string")
  call_fails(hr, "search_employees", {"limit": 0}, 400, "limit")
  call_fails(hr, "search_employees", {"status": "fired"}, 400, "status")
  call_fails(hr, "find_employee_by_email", {"email": "nope"}, 400, "email")
  call_fails(hr, "set_status", {"employee_id": emp.id, "status": "terminated"}, 400, "status")
  call_fails(hr, "update_job", {"employee_id": emp.id}, 400, "at least one")
  call_fails(hr, "update_job", {"employee_id": emp.id, "effective_date": "soon"}, 400)
  call_fails(
    hr,
    "terminate_employee",
    {"employee_id": emp.id, "termination_date": "1999-01-01"},
    400,
    "termination_date",
    "hire date",
  )
  hire = {
    "name": "A B",
    "email": "a.b@example.com",
    "department": "Sales",
    "title": "SDR",
    "manager_id": sales_head.id,
    "location": "Oslo",
  }
  call_fails(hr, "hire_employee", {**hire, "email": "bad"}, 400, "email")
  call_fails(hr, "hire_employee", {**hire, "name": ""}, 400, "name")
  # 404: unknown ids and emails, for every tool that takes one
  call_fails(hr, "get_employee", {"employee_id": "E9999"}, 404, "E9999")
  call_fails(hr, "find_employee_by_email", {"email": "zz@example.com"}, 404, "zz@example.com")
  call_fails(hr, "search_employees", {"department": "Legal"}, 404, "Legal")
  call_fails(hr, "search_employees", {"manager_id": "E9999"}, 404, "E9999")
  for tool in ("get_direct_reports", "get_reporting_chain", "get_job_history", "set_status"):
    args = {"employee_id": "E9999", "status": "active"} if tool == "set_status" else {}
    call_fails(hr, tool, {"employee_id": "E9999", **args}, 404, "E9999")
  call_fails(hr, "hire_employee", {**hire, "department": "Legal"}, 404, "Legal")
  call_fails(hr, "hire_employee", {**hire, "manager_id": "E9999"}, 404, "E9999")
  call_fails(hr, "update_job", {"employee_id": "E9999", "title": "x"}, 404, "E9999")
  call_fails(hr, "update_job", {"employee_id": emp.id, "department": "Legal"}, 404, "Legal")
  call_fails(hr, "update_job", {"employee_id": emp.id, "manager_id": "E9999"}, 404, "E9999")
  call_fails(hr, "transfer_department", {"employee_id": "E9999", "department": "Sales"}, 404)
  call_fails(hr, "transfer_department", {"employee_id": emp.id, "department": "Legal"}, 404)
  call_fails(
    hr,
    "transfer_department",
    {"employee_id": emp.id, "department": "Sales", "manager_id": "E9999"},
    404,
    "E9999",
  )
  call_fails(hr, "set_department_head", {"department": "Legal", "employee_id": emp.id}, 404)
  call_fails(hr, "set_department_head", {"department": "Engineering", "employee_id": "E9999"}, 404)
  call_fails(hr, "terminate_employee", {"employee_id": "E9999"}, 404, "E9999")
  # 409: business rules
  call_fails(hr, "hire_employee", {**hire, "email": emp.email.upper()}, 409, emp.id, "unique")
  call_fails(hr, "hire_employee", {**hire, "manager_id": away.id}, 409, "on_leave", "active")
  call_fails(hr, "update_job", {"employee_id": emp.id, "manager_id": gone.id}, 409, "terminated")
  call_fails(hr, "update_job", {"employee_id": eng_head.id, "manager_id": emp.id}, 409, "cycle")
  call_fails(hr, "update_job", {"employee_id": top.id, "manager_id": emp.id}, 409, "cycle")
  call_fails(hr, "update_job", {"employee_id": emp.id, "manager_id": emp.id}, 409, "cycle")
  call_fails(hr, "update_job", {"employee_id": emp.id, "title": emp.title}, 409, "already")
  call_fails(hr, "update_job", {"employee_id": gone.id, "title": "x"}, 409, "rehire")
  call_fails(
    hr,
    "update_job",
    {"employee_id": eng_head.id, "department": "Sales"},
    409,
    "set_department_head",
  )
  call_fails(
    hr, "transfer_department", {"employee_id": eng_head.id, "department": "Sales"}, 409, "heads"
  )
  call_fails(
    hr, "transfer_department", {"employee_id": emp.id, "department": "Engineering"}, 409, "already"
  )
  call_fails(hr, "transfer_department", {"employee_id": gone.id, "department": "Sales"}, 409)
  call_fails(hr, "set_status", {"employee_id": emp.id, "status": "active"}, 409, "already")
  call_fails(hr, "set_status", {"employee_id": gone.id, "status": "active"}, 409, "terminated")
  call_fails(hr, "terminate_employee", {"employee_id": gone.id}, 409, "terminated")
  call_fails(hr, "terminate_employee", {"employee_id": eng_head.id}, 409, "direct report")
  call_fails(
    hr, "set_department_head", {"department": "Sales", "employee_id": emp.id}, 409, "transfer"
  )
  call_fails(
    hr,
    "set_department_head",
    {"department": away.department, "employee_id": away.id},
    409,
    "on_leave",
  )
  call_fails(
    hr,
    "set_department_head",
    {"department": "Engineering", "employee_id": eng_head.id},
    409,
    "already",
  )


def test_headless_department_and_head_with_no_reports(hr):
  emp = member(hr, "Finance")
  hr.state.departments.update("Operations", head_id=None)
  call_fails(
    hr,
    "transfer_department",
    {"employee_id": emp.id, "department": "Operations"},
    409,
    "manager_id",
  )
  # a head whose reports have all moved still cannot leave before a successor is named
  boss = head(hr, "Marketing")
  for r in call_ok(hr, "get_direct_reports", {"employee_id": boss.id}):
    call_ok(hr, "update_job", {"employee_id": r["id"], "manager_id": ceo(hr).id})
  call_fails(hr, "terminate_employee", {"employee_id": boss.id}, 409, "set_department_head")
