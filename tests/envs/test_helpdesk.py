from datetime import timedelta

import pytest

from envs._world import world
from envs.helpdesk import SLA_HOURS, HelpdeskService
from tests.contract import call_fails, call_ok

SEED = 3
ME = world(SEED).people[0].email


@pytest.fixture
def desk():
  return HelpdeskService.create(seed=SEED)


def ticket(desk, status, **where):
  """A seeded ticket in this status matching ``where`` (attribute → value)."""
  return next(
    t
    for t in sorted(desk.state.tickets, key=lambda t: t.id)
    if t.status == status and all(getattr(t, k) == v for k, v in where.items())
  )


def last_public_by(desk, t, role):
  public = [c for c in desk.state.comments if c.ticket_id == t.id and c.public]
  return max(public, key=lambda c: c.created_at).author_role == role if public else False


def agents(desk, active=True):
  return [a.id for a in desk.state.agents if a.active == active]


def macro(desk, title):
  return next(m for m in desk.state.macros if m.title == title)


def test_seeded_data_is_sized():
  a = HelpdeskService.create(seed=5)
  st, w = a.state, world(5)
  assert (
    len(st.tickets) == 40 and len(HelpdeskService.create(seed=5, size=120).state.tickets) == 120
  )
  assert {t.status for t in st.tickets} == {"new", "open", "pending", "solved", "closed"}
  assert {t.sla_breached for t in st.tickets} == {True, False}
  contacts = {c.email: cu.name for cu in w.customers for c in cu.contacts}
  assert {r.id: r.organization for r in st.requesters} == contacts
  assert st.agents.get(w.people[0].email).role == "admin" and len(agents(a, False)) == 1
  for t in st.tickets:
    assert (
      t.requester in st.requesters and t.organization == st.requesters.get(t.requester).organization
    )
    assert t.sla_due_at == t.created_at + timedelta(hours=SLA_HOURS[t.priority])
    assert (t.assignee is None) == (t.status == "new") and t.created_at < st.now
    if t.status in ("open", "pending"):
      assert st.agents.get(t.assignee).active
    if t.status in ("solved", "closed"):
      assert t.solved_at is not None and last_public_by(a, t, "agent")
  for c in st.comments:
    t = st.tickets.get(c.ticket_id)
    assert t.created_at < c.created_at < st.now
    assert (c.author_role == "end_user") == (c.author == t.requester)


def test_search_tickets_filters_and_pages(desk):
  page = call_ok(desk, "search_tickets", {"limit": 5})
  assert page["total"] == 40 and len(page["items"]) == 5 and page["next_offset"] == 5
  created = [t["created_at"] for t in page["items"]]
  assert created == sorted(created, reverse=True)

  def search(**args):
    return call_ok(desk, "search_tickets", {"limit": 100, **args})["items"]

  assert all(t["status"] == "open" for t in search(status="open"))
  assert all(t["priority"] == "urgent" for t in search(priority="urgent"))
  who = ticket(desk, "open").assignee
  mine = search(assignee=who.upper())
  assert mine and all(t["assignee"] == who for t in mine)
  assert all(t["assignee"] is None for t in search(unassigned=True))
  req = ticket(desk, "open").requester
  assert all(t["requester"] == req for t in search(requester=req))
  org = ticket(desk, "open").organization
  assert search(organization=org.upper()) and all(
    t["organization"] == org for t in search(organization=org)
  )
  tagged = search(tag="Billing")
  assert tagged and all("billing" in t["tags"] for t in tagged)
  late = search(breached=True)
  assert late and all(t["sla_breached"] for t in late)
  assert len(late) + len(search(breached=False)) == 40
  word = ticket(desk, "open").subject.split()[-1]
  assert all(word.lower() in (t["subject"] + t["description"]).lower() for t in search(query=word))


def test_reads(desk):
  t = ticket(desk, "solved")
  got = call_ok(desk, "get_ticket", {"ticket_id": t.id})
  assert got["id"] == t.id and got["subject"] == t.subject and got["comments"]
  assert all(c["ticket_id"] == t.id for c in got["comments"])
  times = [c["created_at"] for c in got["comments"]]
  assert times == sorted(times)

  reqs = call_ok(desk, "list_requesters", {"limit": 100})
  assert reqs["total"] == len(desk.state.requesters)
  names = [r["name"] for r in reqs["items"]]
  assert names == sorted(names)
  org = reqs["items"][0]["organization"]
  of_org = call_ok(desk, "list_requesters", {"organization": org})["items"]
  assert of_org and all(r["organization"] == org for r in of_org)
  busy = next(r for r in reqs["items"] if r["unsolved_tickets"])
  assert busy["unsolved_tickets"] == sum(
    x.requester == busy["id"] and x.status in ("new", "open", "pending") for x in desk.state.tickets
  )

  active = call_ok(desk, "list_agents")
  assert {a["id"] for a in active} == set(agents(desk))
  assert len(call_ok(desk, "list_agents", {"include_inactive": True})) == len(desk.state.agents)
  assert sum(a["unsolved_tickets"] for a in active) == sum(
    x.status in ("open", "pending") for x in desk.state.tickets
  )
  macros = call_ok(desk, "list_macros")
  assert all(m["active"] for m in macros) and len(macros) == len(desk.state.macros) - 1
  assert len(call_ok(desk, "list_macros", {"include_inactive": True})) == len(desk.state.macros)


def test_sla_report(desk):
  rep = call_ok(desk, "sla_report")
  assert rep["targets_hours"] == SLA_HOURS and rep["tickets"] == 40
  assert sum(r["tickets"] for r in rep["by_priority"]) == 40
  breached = [t for t in desk.state.tickets if t.sla_breached]
  assert rep["breached"] == len(breached) and rep["breach_rate"] == round(
    100 * len(breached) / 40, 1
  )
  assert set(rep["breached_unsolved"]) == {
    t.id for t in breached if t.status in ("new", "open", "pending")
  }
  org = ticket(desk, "open").organization
  per_org = call_ok(desk, "sla_report", {"organization": org})
  assert per_org["tickets"] == sum(t.organization == org for t in desk.state.tickets)
  who = ticket(desk, "open").assignee
  per_agent = call_ok(desk, "sla_report", {"assignee": who})
  assert per_agent["tickets"] == sum(t.assignee == who for t in desk.state.tickets)


def test_create_comment_solve_close(desk):
  req = next(iter(desk.state.requesters))
  t = call_ok(
    desk,
    "create_ticket",
    {
      "subject": "Scanner offline",
      "description": "Our scanner is offline.",
      "requester_email": req.id.upper(),
      "priority": "high",
      "tags": ["Hardware", "on site", "hardware"],
    },
  )
  assert (t["status"], t["assignee"], t["requester"]) == ("new", None, req.id)
  assert t["organization"] == req.organization and t["tags"] == ["hardware", "on_site"]
  assert (
    t["sla_due_at"] == (desk.state.now - timedelta(minutes=1) + timedelta(hours=24)).isoformat()
  )
  note = call_ok(desk, "add_comment", {"ticket_id": t["id"], "body": "Checking", "public": False})
  assert note["author"] == ME and desk.state.tickets.get(t["id"]).status == "new"
  reply = call_ok(desk, "add_comment", {"ticket_id": t["id"], "body": "On it."})
  assert reply["public"] and reply["author_role"] == "agent"
  assert desk.state.tickets.get(t["id"]).status == "open"
  call_ok(desk, "update_ticket", {"ticket_id": t["id"], "assignee": agents(desk)[1]})
  solved = call_ok(desk, "update_ticket", {"ticket_id": t["id"], "status": "solved"})
  assert solved["status"] == "solved" and solved["solved_at"] is not None
  back = call_ok(
    desk, "add_comment", {"ticket_id": t["id"], "body": "Still broken", "author": req.id}
  )
  assert back["author_role"] == "end_user"
  reopened = desk.state.tickets.get(t["id"])
  assert reopened.status == "open" and reopened.solved_at is None
  call_ok(desk, "add_comment", {"ticket_id": t["id"], "body": "Replaced the unit."})
  call_ok(desk, "update_ticket", {"ticket_id": t["id"], "status": "solved"})
  closed = call_ok(desk, "update_ticket", {"ticket_id": t["id"], "status": "closed"})
  assert closed["status"] == "closed"
  assert len(call_ok(desk, "get_ticket", {"ticket_id": t["id"]})["comments"]) == 4
  who = agents(desk)[1]
  direct = call_ok(
    desk,
    "create_ticket",
    {"subject": "x", "description": "y", "requester_email": req.id, "assignee": who.upper()},
  )
  assert (direct["status"], direct["assignee"], direct["priority"]) == ("open", who, "normal")
  assert direct["id"] in desk.state.tickets


def test_update_ticket_fields(desk):
  t = ticket(desk, "new")
  who = agents(desk)[-1]
  up = call_ok(desk, "update_ticket", {"ticket_id": t.id, "assignee": who, "priority": "urgent"})
  assert (up["status"], up["assignee"], up["priority"]) == ("open", who, "urgent")
  assert up["sla_due_at"] == (t.created_at + timedelta(hours=8)).isoformat()
  tags = call_ok(
    desk, "update_ticket", {"ticket_id": t.id, "add_tags": ["VIP call"], "remove_tags": [t.tags[0]]}
  )["tags"]
  assert tags == [*t.tags[1:], "vip_call"]
  assert call_ok(desk, "update_ticket", {"ticket_id": t.id, "tags": ["x"]})["tags"] == ["x"]
  assert call_ok(desk, "update_ticket", {"ticket_id": t.id, "unassign": True})["assignee"] is None
  pend = call_ok(desk, "update_ticket", {"ticket_id": t.id, "status": "pending"})
  assert pend["status"] == "pending" and desk.state.tickets.get(t.id).status == "pending"


def test_apply_macro_and_merge(desk):
  t = ticket(desk, "open")
  out = call_ok(
    desk, "apply_macro", {"ticket_id": t.id, "macro_id": macro(desk, "Close and thank").id}
  )
  first = desk.state.requesters.get(t.requester).name.split()[0]
  assert out["ticket"]["status"] == "solved" and out["ticket"]["assignee"] == ME
  assert "thanked" in out["ticket"]["tags"] and out["comments"][-1]["body"].startswith(
    f"Hi {first},"
  )
  esc = ticket(desk, "pending")
  out = call_ok(
    desk,
    "apply_macro",
    {"ticket_id": esc.id, "macro_id": macro(desk, "Escalate to engineering").id},
  )
  assert (out["ticket"]["status"], out["ticket"]["priority"]) == ("open", "high")
  assert not out["comments"][-1]["public"] and "escalated" in out["ticket"]["tags"]

  src, dst = ticket(desk, "new"), ticket(desk, "open", assignee=ticket(desk, "open").assignee)
  merged = call_ok(desk, "merge_tickets", {"source_id": src.id, "target_id": dst.id})
  assert merged["source"]["status"] == "closed" and merged["source"]["merged_into"] == dst.id
  assert "merged" in merged["source"]["tags"] and desk.state.tickets.get(src.id).status == "closed"
  notes = call_ok(desk, "get_ticket", {"ticket_id": dst.id})["comments"]
  assert src.description in notes[-1]["body"] and not notes[-1]["public"]


def test_error_paths_are_atomic(desk):
  new, op, closed = ticket(desk, "new"), ticket(desk, "open"), ticket(desk, "closed")
  waiting = next(
    t for t in desk.state.tickets if t.status == "open" and last_public_by(desk, t, "end_user")
  )
  req, other_req = op.requester, next(r.id for r in desk.state.requesters if r.id != op.requester)
  inactive = agents(desk, False)[0]
  employee = next(p.email for p in world(SEED).people if p.email not in desk.state.agents)
  mac = macro(desk, "Close and thank").id
  for tool, args in (
    ("get_ticket", {}),
    ("update_ticket", {}),
    ("add_comment", {"ticket_id": op.id}),
    ("apply_macro", {"ticket_id": op.id}),
    ("merge_tickets", {"source_id": op.id}),
    ("create_ticket", {"subject": "x", "description": "y"}),
  ):
    call_fails(desk, tool, args, 400)
  call_fails(desk, "get_ticket", {"ticket_id": 7}, 400, "ticket_id")
  call_fails(desk, "search_tickets", {"status": "done"}, 400, "status")
  call_fails(desk, "search_tickets", {"limit": 0}, 400, "limit")
  call_fails(desk, "search_tickets", {"tag": " "}, 400, "tag")
  call_fails(
    desk, "create_ticket", {"subject": "", "description": "y", "requester_email": req}, 400
  )
  call_fails(
    desk, "create_ticket", {"subject": "x", "description": "y", "requester_email": "nope"}, 400
  )
  call_fails(desk, "update_ticket", {"ticket_id": op.id}, 400, "at least one")
  call_fails(desk, "update_ticket", {"ticket_id": op.id, "assignee": ME, "unassign": True}, 400)
  call_fails(desk, "update_ticket", {"ticket_id": op.id, "priority": "asap"}, 400, "priority")
  call_fails(desk, "update_ticket", {"ticket_id": op.id, "add_tags": [""]}, 400, "add_tags")
  # unknown ids and people
  call_fails(desk, "get_ticket", {"ticket_id": "tkt_nope"}, 404, "tkt_nope")
  call_fails(desk, "update_ticket", {"ticket_id": "tkt_nope", "status": "open"}, 404, "tkt_nope")
  call_fails(desk, "add_comment", {"ticket_id": "tkt_nope", "body": "x"}, 404, "tkt_nope")
  call_fails(desk, "apply_macro", {"ticket_id": "tkt_nope", "macro_id": mac}, 404, "tkt_nope")
  call_fails(desk, "apply_macro", {"ticket_id": op.id, "macro_id": "mac_nope"}, 404, "mac_nope")
  call_fails(desk, "merge_tickets", {"source_id": "tkt_x", "target_id": op.id}, 404, "tkt_x")
  call_fails(desk, "merge_tickets", {"source_id": op.id, "target_id": "tkt_y"}, 404, "tkt_y")
  call_fails(desk, "search_tickets", {"assignee": "zz@x.com"}, 404, "zz@x.com")
  call_fails(desk, "search_tickets", {"requester": "zz@x.com"}, 404, "zz@x.com")
  call_fails(desk, "sla_report", {"organization": "Nowhere Inc"}, 404, "Nowhere Inc")
  call_fails(desk, "sla_report", {"assignee": "zz@x.com"}, 404, "zz@x.com")
  args = {"subject": "x", "description": "y"}
  call_fails(desk, "create_ticket", {**args, "requester_email": "zz@x.com"}, 404, "zz@x.com")
  call_fails(
    desk, "create_ticket", {**args, "requester_email": req, "assignee": "zz@x.com"}, 404, "zz@x"
  )
  call_fails(desk, "add_comment", {"ticket_id": op.id, "body": "x", "author": "zz@x.com"}, 404)
  # assignee must be an active agent
  for who, needle in ((req, "end user"), (employee, "not a helpdesk agent"), (inactive, "deactiv")):
    call_fails(desk, "update_ticket", {"ticket_id": op.id, "assignee": who}, 409, needle)
  call_fails(desk, "create_ticket", {**args, "requester_email": req, "assignee": req}, 409)
  # workflow rules
  call_fails(
    desk, "update_ticket", {"ticket_id": waiting.id, "status": "solved"}, 409, "resolution"
  )
  call_fails(desk, "update_ticket", {"ticket_id": new.id, "status": "solved"}, 409, "resolution")
  call_fails(desk, "update_ticket", {"ticket_id": op.id, "status": "new"}, 409, "allowed")
  call_fails(desk, "update_ticket", {"ticket_id": op.id, "status": "closed"}, 409, "allowed")
  call_ok(desk, "add_comment", {"ticket_id": new.id, "body": "Looking into it."})
  call_fails(desk, "update_ticket", {"ticket_id": new.id, "status": "solved"}, 409, "assignee")
  solved = ticket(desk, "solved")
  call_fails(desk, "update_ticket", {"ticket_id": solved.id, "unassign": True}, 409, "assignee")
  # comments
  note = {"ticket_id": op.id, "body": "x", "public": False, "author": req}
  call_fails(desk, "add_comment", note, 409, "internal notes")
  call_fails(desk, "add_comment", {"ticket_id": op.id, "body": "x", "author": other_req}, 409)
  call_fails(desk, "add_comment", {"ticket_id": op.id, "body": "x", "author": inactive}, 409)
  call_fails(desk, "add_comment", {"ticket_id": op.id, "body": ""}, 400, "body")
  # closed tickets are immutable
  call_fails(desk, "update_ticket", {"ticket_id": closed.id, "priority": "low"}, 409, "closed")
  call_fails(desk, "add_comment", {"ticket_id": closed.id, "body": "x"}, 409, "closed")
  call_fails(desk, "apply_macro", {"ticket_id": closed.id, "macro_id": mac}, 409, "closed")
  # macros
  retired = macro(desk, "Holiday closure notice (retired)").id
  call_fails(desk, "apply_macro", {"ticket_id": op.id, "macro_id": retired}, 409, "retired")
  ask = macro(desk, "Ask for more details").id
  call_fails(desk, "apply_macro", {"ticket_id": solved.id, "macro_id": ask}, 409, "solved")
  # merging
  call_fails(desk, "merge_tickets", {"source_id": op.id, "target_id": op.id}, 409, "itself")
  call_fails(desk, "merge_tickets", {"source_id": op.id, "target_id": closed.id}, 409, "closed")
  call_fails(desk, "merge_tickets", {"source_id": closed.id, "target_id": op.id}, 409, "closed")
