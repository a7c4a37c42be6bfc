from collections import Counter

import pytest

from envs._world import world
from envs.recruiting import RecruitingService
from tests.contract import call_fails, call_ok

SEED = 3
FUTURE = "2026-03-10T10:00:00"


@pytest.fixture
def rec():
  return RecruitingService.create(seed=SEED)


def staff(n=2):
  return [p.email for p in world(SEED).people[2 : 2 + n]]


def open_job(rec):
  return next(j for j in sorted(rec.state.jobs, key=lambda j: j.id) if j.status == "open")


def seeded(rec, stage, **attrs):
  return next(
    a
    for a in sorted(rec.state.applications, key=lambda a: a.id)
    if a.stage == stage and all(getattr(a, k) == v for k, v in attrs.items())
  )


def new_application(rec, job_id, email="ada.quinn@example.com"):
  cand = call_ok(rec, "add_candidate", {"name": "Ada Quinn", "email": email})
  return call_ok(rec, "apply_to_job", {"candidate_id": cand["id"], "job_id": job_id})


def to_offer_stage(rec, job_id, email="ada.quinn@example.com"):
  """A new application taken through screen and a completed interview, with an offer."""
  app = new_application(rec, job_id, email)
  for stage in ("screen", "interview"):
    call_ok(rec, "advance_stage", {"application_id": app["id"], "stage": stage})
  iv = call_ok(
    rec,
    "schedule_interview",
    {"application_id": app["id"], "scheduled_at": FUTURE, "interviewers": staff()},
  )
  call_ok(rec, "submit_scorecard", {"interview_id": iv["id"], "rating": 4, "notes": "Great"})
  offer = call_ok(
    rec,
    "make_offer",
    {"application_id": app["id"], "salary": 120000, "start_date": "2026-04-06"},
  )
  return app, offer


def test_seeded_data_is_sized():
  a = RecruitingService.create(seed=5)
  st = a.state
  assert len(st.candidates) == 30 and len(st.applications) >= 30 and len(st.jobs) == 8
  assert len({c.email for c in st.candidates}) == 30
  stages = Counter(x.stage for x in st.applications)
  assert all(stages[s] for s in ("applied", "screen", "interview", "hired", "rejected"))
  employees = {p.email for p in world(5).people}
  for i in st.interviews:
    assert set(i.interviewers) <= employees
    assert (i.status == "completed") == (i.rating is not None)
    assert (i.scheduled_at < st.now) == (i.status == "completed")
  for app in st.applications:
    if app.stage == "hired":
      assert st.jobs.get(app.job_id).status == "closed"
      assert any(o.status == "accepted" for o in st.offers if o.application_id == app.id)
    if app.stage in ("offer", "hired"):
      assert any(i.status == "completed" for i in st.interviews if i.application_id == app.id)
  assert all((j.openings == 0) == (j.status == "closed") for j in st.jobs)
  assert len(RecruitingService.create(seed=5, size=120).state.candidates) == 120


def test_reads(rec):
  page = call_ok(rec, "list_jobs", {"limit": 3})
  assert page["total"] == 8 and len(page["items"]) == 3
  opened = [j["opened_on"] for j in call_ok(rec, "list_jobs", {"limit": 100})["items"]]
  assert opened == sorted(opened, reverse=True)
  closed = call_ok(rec, "list_jobs", {"status": "closed"})["items"]
  assert closed and all(j["status"] == "closed" and j["openings"] == 0 for j in closed)
  job = open_job(rec)
  dept = call_ok(rec, "list_jobs", {"department": job.department.upper()})["items"]
  assert job.id in [j["id"] for j in dept] and all(j["department"] == job.department for j in dept)
  assert job.id in [j["id"] for j in call_ok(rec, "list_jobs", {"query": job.title})["items"]]
  got = call_ok(rec, "get_job", {"job_id": job.id})
  apps = [a for a in rec.state.applications if a.job_id == job.id]
  assert got["title"] == job.title and sum(got["pipeline"].values()) == len(apps)
  cands = call_ok(rec, "search_candidates", {"limit": 100})
  assert cands["total"] == 30
  one = cands["items"][0]
  hits = call_ok(rec, "search_candidates", {"query": one["email"]})["items"]
  assert [c["id"] for c in hits] == [one["id"]]
  src = call_ok(rec, "search_candidates", {"source": "referral", "limit": 100})["items"]
  assert src and all(c["source"] == "referral" for c in src)
  by_job = call_ok(rec, "list_applications", {"job_id": job.id, "limit": 100})
  assert by_job["total"] == len(apps)
  rejected = call_ok(rec, "list_applications", {"stage": "rejected", "limit": 100})["items"]
  assert rejected and all(a["stage"] == "rejected" and a["rejection_reason"] for a in rejected)
  mine = call_ok(rec, "list_applications", {"candidate_id": one["id"]})["items"]
  assert mine and all(a["candidate_id"] == one["id"] for a in mine)
  app = seeded(rec, "offer")
  full = call_ok(rec, "get_application", {"application_id": app.id})
  assert full["candidate"]["id"] == app.candidate_id and full["job"]["id"] == app.job_id
  assert full["offers"] and all(i["application_id"] == app.id for i in full["interviews"])


def test_pipeline_from_application_to_hire_closes_the_job(rec):
  job = open_job(rec)
  rec.state.jobs.update(job.id, openings=2)
  app, offer = to_offer_stage(rec, job.id)
  assert offer["status"] == "extended" and offer["currency"] == world(SEED).currency
  assert rec.state.applications.get(app["id"]).stage == "offer"
  iv = rec.state.interviews.filter(lambda i: i.application_id == app["id"])[0]
  assert (iv.status, iv.rating, iv.notes, iv.interviewers) == (
    "completed",
    4,
    "Great",
    tuple(staff()),
  )
  assert (
    call_ok(rec, "respond_to_offer", {"offer_id": offer["id"], "accepted": True})["status"]
    == "accepted"
  )
  hired = call_ok(rec, "mark_hired", {"application_id": app["id"]})
  assert hired["application"]["stage"] == "hired"
  assert hired["job"]["openings"] == 1 and hired["job"]["status"] == "open"
  # a second hire uses the last opening: the job closes, and a third offer cannot be hired
  second, offer2 = to_offer_stage(rec, job.id, "bo.chan@example.com")
  third, offer3 = to_offer_stage(rec, job.id, "cy.diaz@example.com")
  for o in (offer2, offer3):
    call_ok(rec, "respond_to_offer", {"offer_id": o["id"], "accepted": True})
  done = call_ok(rec, "mark_hired", {"application_id": second["id"]})
  assert done["job"]["status"] == "closed" and done["job"]["closed_on"] == "2026-03-02"
  assert rec.state.jobs.get(job.id).openings == 0
  call_fails(rec, "mark_hired", {"application_id": third["id"]}, 409, "no openings")
  call_fails(
    rec,
    "apply_to_job",
    {"candidate_id": rec.state.applications.get(third["id"]).candidate_id, "job_id": job.id},
    409,
  )


def test_reject_cancels_interviews_and_withdraws_offer(rec):
  app, offer = to_offer_stage(rec, open_job(rec).id)
  iv = call_ok(rec, "get_application", {"application_id": app["id"]})["interviews"][0]
  out = call_ok(rec, "reject_application", {"application_id": app["id"], "reason": "Withdrew"})
  assert out["stage"] == "rejected" and out["rejection_reason"] == "Withdrew"
  assert rec.state.offers.get(offer["id"]).status == "withdrawn"
  assert rec.state.interviews.get(iv["id"]).status == "completed"  # the past stays as it was
  upcoming = next(i for i in rec.state.interviews if i.status == "scheduled")
  call_ok(rec, "reject_application", {"application_id": upcoming.application_id, "reason": "x"})
  assert rec.state.interviews.get(upcoming.id).status == "cancelled"


def test_declined_offer_allows_a_new_one(rec):
  app, offer = to_offer_stage(rec, open_job(rec).id)
  assert (
    call_ok(rec, "respond_to_offer", {"offer_id": offer["id"], "accepted": False})["status"]
    == "declined"
  )
  call_fails(rec, "mark_hired", {"application_id": app["id"]}, 409, "no accepted offer")
  again = call_ok(
    rec,
    "make_offer",
    {"application_id": app["id"], "salary": 130000, "start_date": "2026-04-13", "currency": "EUR"},
  )
  assert again["salary"] == 130000 and again["currency"] == "EUR"
  assert len(rec.state.offers.filter(lambda o: o.application_id == app["id"])) == 2


def test_error_paths_are_atomic(rec):
  job = open_job(rec)
  closed = next(j for j in rec.state.jobs if j.status == "closed")
  hired, rejected = seeded(rec, "hired"), seeded(rec, "rejected")
  applied, screen = seeded(rec, "applied"), seeded(rec, "screen")
  done = next(i for i in rec.state.interviews if i.status == "completed")
  cand = next(iter(rec.state.candidates))
  sched = {"scheduled_at": FUTURE, "interviewers": staff()}
  # 400
  call_fails(rec, "get_job", {}, 400, "job_id")
  call_fails(rec, "get_application", {"application_id": 3}, 400, "application_id", "string")
  call_fails(rec, "list_jobs", {"status": "paused"}, 400, "status")
  call_fails(rec, "list_applications", {"stage": "onsite"}, 400, "stage")
  call_fails(rec, "search_candidates", {"offset": -1}, 400, "offset")
  call_fails(rec, "add_candidate", {"name": "X", "email": "not-an-email"}, 400, "email")
  call_fails(
    rec, "add_candidate", {"name": "X", "email": "x@example.com", "source": "fax"}, 400, "source"
  )
  call_fails(rec, "advance_stage", {"application_id": applied.id, "stage": "hired"}, 400, "stage")
  call_fails(
    rec,
    "schedule_interview",
    {"application_id": screen.id, **sched, "scheduled_at": "2026-03-01T10:00:00"},
    400,
    "future",
  )
  call_fails(
    rec,
    "schedule_interview",
    {"application_id": screen.id, **sched, "interviewers": []},
    400,
    "interviewers",
  )
  call_fails(
    rec,
    "schedule_interview",
    {"application_id": screen.id, **sched, "duration_minutes": 5},
    400,
    "duration_minutes",
  )
  call_fails(rec, "submit_scorecard", {"interview_id": done.id, "rating": 5}, 400, "rating")
  offer_args = {"application_id": applied.id, "salary": 90000, "start_date": "2026-04-01"}
  call_fails(rec, "make_offer", {**offer_args, "salary": 0}, 400, "salary")
  call_fails(rec, "make_offer", {**offer_args, "currency": "usd"}, 400, "currency")
  call_fails(rec, "respond_to_offer", {"offer_id": "off_x"}, 400, "accepted")
  # 404
  call_fails(rec, "get_job", {"job_id": "job_nope"}, 404, "job_nope")
  call_fails(rec, "get_application", {"application_id": "app_nope"}, 404, "app_nope")
  call_fails(rec, "list_applications", {"job_id": "job_nope"}, 404, "job_nope")
  call_fails(rec, "list_applications", {"candidate_id": "cand_nope"}, 404, "cand_nope")
  call_fails(rec, "apply_to_job", {"candidate_id": "cand_nope", "job_id": job.id}, 404, "cand_nope")
  call_fails(rec, "apply_to_job", {"candidate_id": cand.id, "job_id": "job_nope"}, 404, "job_nope")
  call_fails(
    rec, "advance_stage", {"application_id": "app_nope", "stage": "screen"}, 404, "app_nope"
  )
  call_fails(rec, "reject_application", {"application_id": "app_nope", "reason": "x"}, 404)
  call_fails(rec, "schedule_interview", {"application_id": "app_nope", **sched}, 404, "app_nope")
  call_fails(rec, "submit_scorecard", {"interview_id": "int_nope", "rating": 3}, 404, "int_nope")
  call_fails(rec, "make_offer", {**offer_args, "application_id": "app_nope"}, 404, "app_nope")
  call_fails(rec, "respond_to_offer", {"offer_id": "off_nope", "accepted": True}, 404, "off_nope")
  call_fails(rec, "mark_hired", {"application_id": "app_nope"}, 404, "app_nope")
  # 409
  call_fails(rec, "add_candidate", {"name": "X", "email": cand.email.upper()}, 409, cand.id)
  call_fails(rec, "apply_to_job", {"candidate_id": cand.id, "job_id": closed.id}, 409, "closed")
  mine = seeded(rec, "applied")
  call_fails(
    rec,
    "apply_to_job",
    {"candidate_id": mine.candidate_id, "job_id": mine.job_id},
    409,
    "already applied",
  )
  call_fails(
    rec,
    "advance_stage",
    {"application_id": applied.id, "stage": "interview"},
    409,
    "next one is 'screen'",
  )
  call_fails(
    rec, "advance_stage", {"application_id": screen.id, "stage": "screen"}, 409, "one at a time"
  )
  call_fails(rec, "advance_stage", {"application_id": hired.id, "stage": "offer"}, 409, "final")
  call_fails(
    rec,
    "advance_stage",
    {"application_id": seeded(rec, "offer").id, "stage": "offer"},
    409,
    "mark_hired",
  )
  call_fails(
    rec, "reject_application", {"application_id": rejected.id, "reason": "x"}, 409, "final"
  )
  call_fails(
    rec, "schedule_interview", {"application_id": applied.id, **sched}, 409, "screen or interview"
  )
  call_fails(
    rec,
    "schedule_interview",
    {"application_id": screen.id, **sched, "interviewers": ["zz@example.com"]},
    409,
    "zz@example.com",
  )
  call_fails(rec, "schedule_interview", {"application_id": hired.id, **sched}, 409, "final")
  call_fails(rec, "submit_scorecard", {"interview_id": done.id, "rating": 3}, 409, "completed")
  call_fails(rec, "make_offer", {**offer_args, "application_id": screen.id}, 409, "interview stage")
  extended = next(o for o in rec.state.offers if o.status == "extended")
  call_fails(
    rec,
    "make_offer",
    {**offer_args, "application_id": extended.application_id},
    409,
    "already has extended",
  )
  accepted = next(o for o in rec.state.offers if o.status == "accepted")
  call_fails(rec, "respond_to_offer", {"offer_id": accepted.id, "accepted": False}, 409, "accepted")
  call_fails(rec, "mark_hired", {"application_id": screen.id}, 409, "offer stage")
  # a fresh interview-stage application has no completed interview yet
  app = new_application(rec, job.id)
  for stage in ("screen", "interview"):
    call_ok(rec, "advance_stage", {"application_id": app["id"], "stage": stage})
  call_fails(
    rec,
    "advance_stage",
    {"application_id": app["id"], "stage": "offer"},
    409,
    "no completed interview",
  )
  call_fails(
    rec, "make_offer", {**offer_args, "application_id": app["id"]}, 409, "no completed interview"
  )
  iv = call_ok(rec, "schedule_interview", {"application_id": app["id"], **sched})
  call_ok(rec, "submit_scorecard", {"interview_id": iv["id"], "rating": 3})
  call_fails(
    rec,
    "make_offer",
    {**offer_args, "application_id": app["id"], "start_date": "2026-03-02"},
    400,
    "after today",
  )
  assert (
    call_ok(rec, "advance_stage", {"application_id": app["id"], "stage": "offer"})["stage"]
    == "offer"
  )
