import itertools
from datetime import timedelta

import pytest

from envs._world import world
from envs.oncall import OncallService, shift_owner
from tests.contract import call_fails, call_ok

SEED = 3


@pytest.fixture
def oc():
  return OncallService.create(seed=SEED)


def iso(moment):
  return moment.isoformat()


def incidents(oc, **attrs):
  return sorted(
    (i for i in oc.state.incidents if all(getattr(i, k) == v for k, v in attrs.items())),
    key=lambda i: i.number,
  )


def service_of(oc, team, status=None):
  """The first service of a team (in id order), optionally with a status."""
  return next(
    s
    for s in sorted(oc.state.services, key=lambda s: s.id)
    if s.team == team and status in (None, s.status)
  )


def schedule(oc, team):
  return next(s for s in oc.state.schedules if s.name == f"{team} Primary")


def maintenance(oc):
  return next(s for s in oc.state.services if s.status == "maintenance")


def team_with_active_service(oc, *exclude):
  return next(
    t
    for t in ("Platform", "Payments", "Data")
    if t not in exclude and any(s.team == t and s.status == "active" for s in oc.state.services)
  )


def test_seeded_data_is_sized():
  a = OncallService.create(seed=5)
  st = a.state
  assert len(st.services) == 11 and len(st.policies) == 4 and len(st.schedules) == 4
  assert len(st.incidents) == 30 and len(st.overrides) == 3
  assert {i.status for i in st.incidents} == {"triggered", "acknowledged", "resolved"}
  assert sum(s.status == "maintenance" for s in st.services) == 1
  emails = {p.email for p in world(5).people}
  assert all(set(s.rotation) <= emails for s in st.schedules)
  for i in st.incidents:
    assert i.notes[0].kind == "triggered" and i.created_at <= st.now
    assert (i.resolved_at is not None) == (i.status == "resolved")
    assert [n.id for n in i.notes] == [f"n{k + 1}" for k in range(len(i.notes))]
  opened = [(i.service_id, i.title) for i in st.incidents if i.status != "resolved"]
  assert len(opened) == len(set(opened))  # the dedup rule holds in seeded data
  assert len(OncallService.create(seed=5, size=120).state.incidents) == 120
  assert len(OncallService.create(seed=5, size=4).state.incidents) == 4


def test_list_services_and_policy(oc):
  page = call_ok(oc, "list_services", {"limit": 4})
  assert page["total"] == 11 and len(page["items"]) == 4 and page["next_offset"] == 4
  pay = call_ok(oc, "list_services", {"team": "payments"})["items"]
  assert [s["team"] for s in pay] == ["Payments"] * 3
  down = call_ok(oc, "list_services", {"status": "maintenance"})["items"]
  assert [s["id"] for s in down] == [maintenance(oc).id]
  assert call_ok(oc, "list_services", {"query": "checkout"})["items"][0]["name"] == "checkout-api"
  svc = service_of(oc, "Platform")
  pol = call_ok(oc, "get_escalation_policy", {"policy_id": svc.policy_id})
  assert [lv["id"] for lv in pol["levels"]] == ["1", "2", "3"] and svc.id in pol["services"]
  sched = schedule(oc, "Platform")
  assert pol["levels"][0]["schedule_id"] == sched.id
  assert pol["levels"][0]["responders_now"][0] in sched.rotation


def test_get_oncall_follows_rotation_and_overrides(oc):
  sched = schedule(oc, "Payments")
  svc = service_of(oc, "Payments")
  now = oc.state.now
  got = call_ok(oc, "get_oncall", {"service_id": svc.id})
  assert got["email"] == shift_owner(sched, now) and got["at"] == iso(now)
  assert [lv["level"] for lv in got["levels"]] == [1, 2, 3]
  later = now + timedelta(days=9)
  got = call_ok(oc, "get_oncall", {"service_id": svc.id, "at": iso(later)})
  assert got["email"] == shift_owner(sched, later)
  ovr = next(o for o in oc.state.overrides if o.end > now)
  owner = next(
    s
    for s in oc.state.services
    if oc.state.policies.get(s.policy_id).levels[0].schedule_id == ovr.schedule_id
  )
  got = call_ok(
    oc, "get_oncall", {"service_id": owner.id, "at": iso(ovr.start + timedelta(hours=1))}
  )
  assert got["email"] == ovr.email and got["levels"][0]["override_id"] == ovr.id


def test_schedules_and_shifts(oc):
  page = call_ok(oc, "list_schedules")
  assert page["total"] == 4
  for s in page["items"]:
    assert s["on_call_now"] in s["rotation"] or any(
      o["email"] == s["on_call_now"] for o in s["overrides"]
    )
  who = schedule(oc, "Data").rotation[0]
  mine = call_ok(oc, "list_schedules", {"member": who})["items"]
  assert mine and all(who in s["rotation"] for s in mine)
  ovr = next(o for o in oc.state.overrides if o.end > oc.state.now)
  sched = oc.state.schedules.get(ovr.schedule_id)
  start, end = ovr.start - timedelta(days=2), ovr.end + timedelta(days=2)
  shifts = call_ok(
    oc, "list_shifts", {"schedule_id": sched.id, "start": iso(start), "end": iso(end)}
  )
  assert shifts[0]["start"] == iso(start) and shifts[-1]["end"] == iso(end)
  assert all(a["end"] == b["start"] for a, b in itertools.pairwise(shifts))
  covered = [s for s in shifts if s["override_id"] == ovr.id]
  assert covered == [
    {"start": iso(ovr.start), "end": iso(ovr.end), "email": ovr.email, "override_id": ovr.id}
  ]


def test_incident_lifecycle(oc):
  team = team_with_active_service(oc)
  svc = service_of(oc, team, "active")
  oncall = call_ok(oc, "get_oncall", {"service_id": svc.id})["email"]
  number = oc.state.last_incident_number
  inc = call_ok(
    oc,
    "trigger_incident",
    {"service_id": svc.id, "title": "Login page returns 502", "urgency": "low"},
  )
  assert inc["status"] == "triggered" and inc["assignee"] == oncall and inc["level"] == 1
  assert inc["number"] == number + 1 and inc["urgency"] == "low"
  assert oc.state.incidents.get(inc["id"]).notes[0].kind == "triggered"
  iid = inc["id"]
  acked = call_ok(oc, "acknowledge_incident", {"incident_id": iid})
  assert acked["status"] == "acknowledged" and acked["acknowledged_at"]
  assert acked["notes"][-1]["author"] == oncall
  policy = oc.state.policies.get(svc.policy_id)
  up = call_ok(oc, "escalate_incident", {"incident_id": iid})
  assert up["level"] == 2 and up["status"] == "triggered" and up["acknowledged_at"] is None
  assert up["assignee"] == policy.levels[1].emails[0]
  assert oc.state.incidents.get(iid).notes[-1].kind == "escalated"
  rotation = oc.state.schedules.get(policy.levels[0].schedule_id).rotation
  new = next(e for e in rotation if e != up["assignee"])
  moved = call_ok(oc, "reassign_incident", {"incident_id": iid, "email": new.upper()})
  assert moved["assignee"] == new and moved["notes"][-1]["kind"] == "reassigned"
  noted = call_ok(oc, "add_note", {"incident_id": iid, "text": "Rolling back."})
  assert noted["notes"][-1]["text"] == "Rolling back."
  done = call_ok(oc, "resolve_incident", {"incident_id": iid, "resolution": "Rolled back."})
  assert done["status"] == "resolved" and done["resolved_at"] == iso(
    oc.state.now - timedelta(minutes=1)
  )
  assert oc.state.incidents.get(iid).status == "resolved"
  assert [n["kind"] for n in call_ok(oc, "get_incident", {"incident_id": iid})["notes"]] == [
    "triggered",
    "acknowledged",
    "escalated",
    "reassigned",
    "note",
    "resolved",
  ]
  # a resolved title can be triggered again
  call_ok(oc, "trigger_incident", {"service_id": svc.id, "title": "Login page returns 502"})


def test_list_incidents_filters(oc):
  page = call_ok(oc, "list_incidents", {"limit": 5})
  assert page["total"] == 30 and page["next_offset"] == 5
  created = [i["created_at"] for i in page["items"]]
  assert created == sorted(created, reverse=True)
  opened = call_ok(oc, "list_incidents", {"open_only": True, "limit": 100})["items"]
  assert len(opened) == len([i for i in oc.state.incidents if i.status != "resolved"])
  acked = call_ok(oc, "list_incidents", {"status": "acknowledged"})["items"]
  assert acked and all(i["status"] == "acknowledged" for i in acked)
  one = incidents(oc)[0]
  by_svc = call_ok(oc, "list_incidents", {"service_id": one.service_id, "limit": 100})["items"]
  assert len(by_svc) == len(incidents(oc, service_id=one.service_id))
  mine = call_ok(oc, "list_incidents", {"assignee": one.assignee, "limit": 100})["items"]
  assert mine and all(i["assignee"] == one.assignee for i in mine)
  low = call_ok(oc, "list_incidents", {"urgency": "low", "limit": 100})["items"]
  assert all(i["urgency"] == "low" for i in low)
  since = iso(oc.state.now - timedelta(days=1))
  recent = call_ok(oc, "list_incidents", {"created_after": since, "limit": 100})["items"]
  assert all(i["created_at"] >= since for i in recent)
  assert call_ok(oc, "list_incidents", {"query": one.title})["items"]


def test_overrides(oc):
  sched = schedule(oc, "Platform")
  who = next(p.email for p in world(SEED).people if p.email not in sched.rotation)
  start = oc.state.now + timedelta(days=20)
  ovr = call_ok(
    oc,
    "create_override",
    {
      "schedule_id": sched.id,
      "email": who,
      "start": iso(start),
      "end": iso(start + timedelta(hours=12)),
    },
  )
  assert ovr["email"] == who and ovr["id"] in oc.state.overrides
  svc = service_of(oc, "Platform")
  at = iso(start + timedelta(hours=1))
  assert call_ok(oc, "get_oncall", {"service_id": svc.id, "at": at})["email"] == who
  call_ok(oc, "delete_override", {"override_id": ovr["id"]})
  assert ovr["id"] not in oc.state.overrides
  assert call_ok(oc, "get_oncall", {"service_id": svc.id, "at": at})["email"] == shift_owner(
    sched, start + timedelta(hours=1)
  )


def test_error_paths_are_atomic(oc):
  now = oc.state.now
  open_inc = incidents(oc, status="triggered")[0]
  acked = incidents(oc, status="acknowledged")[0]
  closed = incidents(oc, status="resolved")[0]
  # missing / ill-typed arguments
  call_fails(oc, "get_incident", {}, 400, "incident_id")
  call_fails(oc, "get_incident", {"incident_id": 5}, 400, "incident_id", "string")
  call_fails(oc, "trigger_incident", {"service_id": open_inc.service_id}, 400, "title")
  call_fails(
    oc,
    "trigger_incident",
    {"service_id": open_inc.service_id, "title": "x", "urgency": "p1"},
    400,
    "urgency",
  )
  call_fails(oc, "trigger_incident", {"service_id": open_inc.service_id, "title": ""}, 400, "title")
  call_fails(oc, "get_oncall", {"service_id": open_inc.service_id, "at": "soon"}, 400, "at")
  call_fails(oc, "list_incidents", {"limit": 500}, 400, "limit")
  call_fails(oc, "reassign_incident", {"incident_id": open_inc.id, "email": "nope"}, 400, "email")
  call_fails(oc, "add_note", {"incident_id": open_inc.id, "text": ""}, 400, "text")
  # unknown ids
  call_fails(oc, "get_oncall", {"service_id": "svc_x"}, 404, "svc_x")
  call_fails(oc, "list_incidents", {"service_id": "svc_x"}, 404, "svc_x")
  call_fails(oc, "get_escalation_policy", {"policy_id": "pol_x"}, 404, "pol_x")
  call_fails(oc, "get_incident", {"incident_id": "inc_x"}, 404, "inc_x")
  call_fails(oc, "trigger_incident", {"service_id": "svc_x", "title": "x"}, 404, "svc_x")
  for tool in ("acknowledge_incident", "escalate_incident", "resolve_incident"):
    call_fails(oc, tool, {"incident_id": "inc_x"}, 404, "inc_x")
  call_fails(oc, "add_note", {"incident_id": "inc_x", "text": "x"}, 404, "inc_x")
  call_fails(oc, "reassign_incident", {"incident_id": "inc_x", "email": "a@b.com"}, 404, "inc_x")
  window = {"start": iso(now + timedelta(days=1)), "end": iso(now + timedelta(days=2))}
  call_fails(oc, "list_shifts", {"schedule_id": "sch_x", **window}, 404, "sch_x")
  sched = schedule(oc, "Platform")
  call_fails(
    oc,
    "create_override",
    {"schedule_id": "sch_x", "email": sched.rotation[0], **window},
    404,
    "sch_x",
  )
  call_fails(
    oc, "create_override", {"schedule_id": sched.id, "email": "z@x.com", **window}, 404, "z@x.com"
  )
  call_fails(oc, "delete_override", {"override_id": "ovr_x"}, 404, "ovr_x")
  # 400 value rules
  back = {"start": window["end"], "end": window["start"]}
  call_fails(oc, "list_shifts", {"schedule_id": sched.id, **back}, 400, "after")
  call_fails(
    oc,
    "list_shifts",
    {"schedule_id": sched.id, "start": iso(now), "end": iso(now + timedelta(days=40))},
    400,
    "31 days",
  )
  who = sched.rotation[0]
  call_fails(oc, "create_override", {"schedule_id": sched.id, "email": who, **back}, 400, "after")
  early = sched.rotation_start - timedelta(days=1)
  call_fails(
    oc,
    "create_override",
    {
      "schedule_id": sched.id,
      "email": who,
      "start": iso(early),
      "end": iso(now + timedelta(days=1)),
    },
    400,
    "within",
  )
  mobile = schedule(oc, "Mobile")
  past_end = mobile.ends_at + timedelta(days=1)
  call_fails(
    oc,
    "create_override",
    {
      "schedule_id": mobile.id,
      "email": who,
      "start": iso(mobile.ends_at - timedelta(days=1)),
      "end": iso(past_end),
    },
    400,
    "within",
  )
  call_fails(
    oc,
    "create_override",
    {
      "schedule_id": sched.id,
      "email": who,
      "start": iso(now - timedelta(days=2)),
      "end": iso(now - timedelta(days=1)),
    },
    400,
    "past",
  )
  # 409 business rules
  live = next(o for o in oc.state.overrides if o.end > now)
  clash = {"start": iso(live.start + timedelta(hours=1)), "end": iso(live.end + timedelta(hours=1))}
  call_fails(
    oc, "create_override", {"schedule_id": live.schedule_id, "email": who, **clash}, 409, live.id
  )
  ended = next(o for o in oc.state.overrides if o.end <= now)
  call_fails(oc, "delete_override", {"override_id": ended.id}, 409, "ended")
  mobile_svc = next(s for s in oc.state.services if s.team == "Mobile")
  call_fails(
    oc, "get_oncall", {"service_id": mobile_svc.id, "at": iso(past_end)}, 409, "nobody is on call"
  )
  call_fails(
    oc, "trigger_incident", {"service_id": maintenance(oc).id, "title": "x"}, 409, "maintenance"
  )
  call_fails(
    oc,
    "trigger_incident",
    {"service_id": open_inc.service_id, "title": open_inc.title.upper()},
    409,
    open_inc.id,
  )
  call_fails(oc, "acknowledge_incident", {"incident_id": acked.id}, 409, "already acknowledged")
  for tool in ("acknowledge_incident", "escalate_incident", "resolve_incident"):
    call_fails(oc, tool, {"incident_id": closed.id}, 409, "resolved")
  call_fails(oc, "add_note", {"incident_id": closed.id, "text": "late"}, 409, "resolved")
  call_fails(
    oc, "reassign_incident", {"incident_id": closed.id, "email": closed.assignee}, 409, "resolved"
  )
  stranger = next(
    p.email
    for p in world(SEED).people
    if all(p.email not in s.rotation for s in oc.state.schedules)
    and all(p.email not in lv.emails for pol in oc.state.policies for lv in pol.levels)
  )
  call_fails(
    oc, "reassign_incident", {"incident_id": open_inc.id, "email": stranger}, 409, "not on"
  )
  call_fails(
    oc,
    "reassign_incident",
    {"incident_id": open_inc.id, "email": open_inc.assignee},
    409,
    "already",
  )
  levels = len(oc._policy_of(open_inc).levels)
  for _ in range(levels - open_inc.level):
    call_ok(oc, "escalate_incident", {"incident_id": open_inc.id})
  call_fails(oc, "escalate_incident", {"incident_id": open_inc.id}, 409, "last level")
