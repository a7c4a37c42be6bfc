"""Recruiting: a Greenhouse-like applicant tracking system of jobs, candidates and pipelines.

The home company (the shared world) posts jobs, each with a department, a hiring manager (an
employee's email), a location and a number of openings. Candidates (external people, unique by
email) apply to jobs; each application moves through the stages applied → screen → interview →
offer → hired, or ends "rejected" with a reason. Interviews belong to an application, are held
by employees and end with a scorecard (a 1-4 rating and notes). An offer names a salary and a
start date and is extended, then accepted or declined (or withdrawn when the application is
rejected).

Rules a recruiter expects: a candidate's email is unique; nobody applies twice to the same job,
and nobody applies to a closed job; stages advance one at a time and never go back; hired and
rejected applications are final; interviews are scheduled in the future, during the screen or
interview stage, with employees as interviewers (rejecting an application cancels its upcoming
ones); a scorecard is submitted once, for a scheduled interview; an offer needs at least one
completed interview, and an application has at most one open offer; a hire needs an accepted
offer and an opening: hiring uses one up, and the job closes when none are left.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta
from typing import Annotated, Literal

from pydantic import Field

from compoworld import Conflict, InvalidArgument, Service, registry, tool
from compoworld.runtime.fields import Email, Text
from compoworld.runtime.query import select
from envs._world import COMPANIES, CUSTOMER_NAMES, FIRST, LAST, TITLES, seeded, world
from envs.recruiting.state import (
  FINAL,
  MAILBOXES,
  NOTES,
  PIPELINE,
  REASONS,
  ROUNDS,
  SALARY,
  SOURCES,
  Application,
  Candidate,
  Interview,
  Job,
  Offer,
  Rating,
  RecruitingState,
  Source,
  Stage,
)


@registry.register
class RecruitingService(Service):
  name = "recruiting"
  domain = "hr"
  description = "Applicant tracking: jobs, candidates, pipeline stages, interviews and offers."
  State = RecruitingState

  @classmethod
  def generate(cls, seed: int, size: int | None) -> RecruitingState:
    rng, w, state = seeded(cls, seed)
    now, today = state.now, state.now.date()
    heads = {p.department: p.email for p in w.people if p.title.startswith("Head of")}
    staff: dict[str, list[str]] = {}
    for p in w.people:
      staff.setdefault(p.department, []).append(p.email)
    count = size if size is not None else 30
    roles = [(d, t) for d, titles in TITLES.items() for t in titles if "Manager" not in t]
    for i, (dept, title) in enumerate(rng.sample(roles, min(len(roles), max(8, count // 4)))):
      closed = i % 4 == 3  # every fourth job has been filled
      state.jobs.insert(
        Job(
          id=state.new_id("job"),
          title=title,
          department=dept,
          hiring_manager=heads.get(dept, w.people[1].email),
          location=rng.choice(("Remote", *(p.city for p in w.people[:8]))),
          openings=0 if closed else rng.randint(1, 3),
          status="closed" if closed else "open",
          opened_on=today - timedelta(days=rng.randint(30, 120)),
          closed_on=today - timedelta(days=rng.randint(1, 20)) if closed else None,
        )
      )
    jobs = list(state.jobs)
    employees = {p.name for p in w.people}
    names = [f"{f} {la}" for f in FIRST for la in LAST if f"{f} {la}" not in employees]
    hired_for: set[str] = set()
    for name in rng.sample(names, min(count, len(names))):
      cid = state.new_id("cand")
      first, last = name.lower().split()
      # Applied at least two weeks ago: every past interview round fits before today.
      created = now - timedelta(days=rng.randint(14, 60), hours=rng.randint(0, 8))
      state.candidates.insert(
        Candidate(
          id=cid,
          name=name,
          email=f"{first}.{last}{rng.randint(1, 99)}@{rng.choice(MAILBOXES)}",
          phone=f"+1-555-{rng.randint(100, 999)}-{rng.randint(1000, 9999)}",
          source=rng.choices(SOURCES, (4, 2, 3, 1, 1))[0],
          current_company=rng.choice((*CUSTOMER_NAMES, *(c for c, _ in COMPANIES))),
          created_at=created,
        )
      )
      for job in rng.sample(jobs, 2 if rng.random() < 0.2 else 1):
        if job.status == "closed":
          stage = "hired" if job.id not in hired_for else "rejected"
          hired_for.add(job.id)
        else:
          stage = rng.choices((*PIPELINE[:4], "rejected"), (5, 4, 5, 2, 4))[0]
        cls._seed_application(state, rng, cid, job, stage, created, staff)
    return state

  @staticmethod
  def _seed_application(state, rng, cid: str, job: Job, stage: str, at: datetime, staff) -> None:
    now = state.now
    aid = state.new_id("app")
    reached = PIPELINE.index(stage) if stage != "rejected" else rng.randint(0, 2)
    panel = [e for e in staff.get(job.department, []) if e != job.hiring_manager]
    when = at + timedelta(days=2)
    # Past rounds are completed with a scorecard; the pipeline's newest round may be upcoming.
    for n in range(min(reached, 3)):
      upcoming = stage in ("screen", "interview") and n == reached - 1 and rng.random() < 0.5
      when = (now + timedelta(days=rng.randint(1, 9))) if upcoming else when + timedelta(days=3)
      when = when.replace(hour=rng.choice((10, 11, 14, 15)), minute=0)
      good = stage in ("offer", "hired")
      rating = None if upcoming else (rng.randint(3, 4) if good else rng.randint(1, 4))
      panel_of = (rng.choice(panel),) if panel else ()
      if n or not panel_of:
        panel_of += (job.hiring_manager,)
      state.interviews.insert(
        Interview(
          id=state.new_id("int"),
          application_id=aid,
          title=ROUNDS[n],
          scheduled_at=when,
          duration_minutes=30 if n == 0 else 60,
          interviewers=panel_of,
          status="scheduled" if upcoming else "completed",
          rating=rating,
          notes=NOTES[rating] if rating else "",
        )
      )
    if stage in ("offer", "hired"):
      state.offers.insert(
        Offer(
          id=state.new_id("off"),
          application_id=aid,
          salary=float(SALARY.get(job.department, 85) * 1000 + rng.randint(0, 30) * 500),
          currency=world(state.seed).currency,
          start_date=now.date() + timedelta(days=rng.randint(14, 45)),
          status="accepted" if stage == "hired" else rng.choice(("extended", "accepted")),
          created_at=min(when + timedelta(days=2), now - timedelta(hours=3)),
        )
      )
    state.applications.insert(
      Application(
        id=aid,
        candidate_id=cid,
        job_id=job.id,
        stage=stage,
        rejection_reason=rng.choice(REASONS) if stage == "rejected" else None,
        applied_at=at,
        updated_at=min(when, now - timedelta(hours=1)),
      )
    )

  # --- helpers -----------------------------------------------------------------------------

  def _active(self, application_id: str) -> Application:
    app = self.state.applications.get(application_id)
    if app.stage in FINAL:
      raise Conflict(f"application '{application_id}' is {app.stage}, which is final")
    return app

  def _completed(self, application_id: str) -> list[Interview]:
    return self.state.interviews.filter(
      lambda i: i.application_id == application_id and i.status == "completed"
    )

  def _move(self, application_id: str, **changes) -> Application:
    return self.state.applications.update(application_id, updated_at=self.state.now, **changes)

  # --- reads -------------------------------------------------------------------------------

  @tool(
    mutates=False,
    page="job",
    produces=("job.id", "job.title", "department", "person.email", "status"),
  )
  def list_jobs(
    self,
    status: Literal["open", "closed"] | None = None,
    department: str | None = None,
    query: str | None = None,
  ) -> list:
    """List job postings, most recently opened first.

    Args:
      status: only "open" or only "closed" jobs.
      department: only jobs of this department (e.g. "Engineering").
      query: words that must all appear in the title, department or location.
    """
    return select(
      self.state.jobs,
      eq={"status": status},
      same={"department": department},
      text=query,
      fields=("title", "department", "location"),
      key=lambda j: (j.opened_on, j.id),
      reverse=True,
    )

  @tool(mutates=False, produces=("job.title", "person.email", "number", "location"))
  def get_job(self, job_id: str) -> dict:
    """Get one job with the number of applications at each pipeline stage.

    Args:
      job_id: the job's id.
    """
    job = self.state.jobs.get(job_id)
    stages = [a.stage for a in self.state.applications if a.job_id == job_id]
    return {**dict(job), "pipeline": {s: stages.count(s) for s in (*PIPELINE, "rejected")}}

  @tool(
    mutates=False,
    page="candidate",
    produces=("candidate.id", "person.name", "person.email", "person.phone"),
  )
  def search_candidates(self, query: str | None = None, source: Source | None = None) -> list:
    """Search candidates by name, email or current company, newest first.

    Args:
      query: words that must all appear in the name, email or current company.
      source: only candidates from this source.
    """
    return select(
      self.state.candidates,
      eq={"source": source},
      text=query,
      fields=("name", "email", "current_company"),
      key=lambda c: (c.created_at, c.id),
      reverse=True,
    )

  @tool(
    mutates=False,
    page="application",
    produces=("application.id", "candidate.id", "job.id", "status"),
  )
  def list_applications(
    self, job_id: str | None = None, candidate_id: str | None = None, stage: Stage | None = None
  ) -> list:
    """List applications, most recent first.

    Args:
      job_id: only applications to this job.
      candidate_id: only this candidate's applications.
      stage: only applications at this stage.
    """
    self.state.jobs.check(job_id)
    self.state.candidates.check(candidate_id)
    return select(
      self.state.applications,
      eq={"job_id": job_id, "candidate_id": candidate_id, "stage": stage},
      key=lambda a: (a.applied_at, a.id),
      reverse=True,
    )

  @tool(
    mutates=False,
    produces=(
      "candidate.id",
      "person.name",
      "person.email",
      "person.phone",
      "job.title",
      "department",
      "interview.id",
      "offer.id",
      "datetime",
      "date",
      "money",
    ),
  )
  def get_application(self, application_id: str) -> dict:
    """Get one application with its candidate, job, interviews (oldest first) and offers.

    Args:
      application_id: the application's id.
    """
    app = self.state.applications.get(application_id)
    return {
      **dict(app),
      "candidate": self.state.candidates.get(app.candidate_id),
      "job": self.state.jobs.get(app.job_id),
      "interviews": sorted(
        self.state.interviews.filter(lambda i: i.application_id == application_id),
        key=lambda i: (i.scheduled_at, i.id),
      ),
      "offers": self.state.offers.filter(lambda o: o.application_id == application_id),
    }

  # --- writes ------------------------------------------------------------------------------

  @tool(
    mutates=True,
    consumes=("person.name", "person.email", "person.phone", "company.name"),
    produces=("candidate.id",),
  )
  def add_candidate(
    self,
    name: Text,
    email: Email,
    phone: str = "",
    source: Source = "careers_site",
    current_company: str = "",
  ) -> Candidate:
    """Add a candidate to the talent pool.

    Args:
      name: full name.
      email: email address; no other candidate may have it.
      phone: phone number.
      source: where they came from: "careers_site", "referral", "linkedin", "agency" or "event".
      current_company: their current employer.
    """
    address = email.lower()
    taken = self.state.candidates.find_by(email=address)
    if taken is not None:
      raise Conflict(f"candidate '{taken.id}' ({taken.name}) already has the email '{address}'")
    return self.state.candidates.insert(
      Candidate(
        id=self.state.new_id("cand"),
        name=name,
        email=address,
        phone=phone,
        source=source,
        current_company=current_company,
        created_at=self.state.now,
      )
    )

  @tool(mutates=True, consumes=("candidate.id", "job.id"), produces=("application.id",))
  def apply_to_job(self, candidate_id: str, job_id: str) -> Application:
    """Put a candidate in a job's pipeline at the "applied" stage.

    Args:
      candidate_id: the candidate's id.
      job_id: the job's id; the job must be open.
    """
    self.state.candidates.get(candidate_id)
    job = self.state.jobs.get(job_id)
    if job.status != "open":
      raise Conflict(f"job '{job_id}' ({job.title}) is closed to new applications")
    twin = self.state.applications.filter(
      lambda a: a.candidate_id == candidate_id and a.job_id == job_id
    )
    if twin:
      raise Conflict(
        f"candidate '{candidate_id}' already applied to job '{job_id}' (application "
        f"'{twin[0].id}', stage {twin[0].stage})"
      )
    return self.state.applications.insert(
      Application(
        id=self.state.new_id("app"),
        candidate_id=candidate_id,
        job_id=job_id,
        applied_at=self.state.now,
        updated_at=self.state.now,
      )
    )

  @tool(mutates=True, consumes=("application.id", "status"))
  def advance_stage(
    self, application_id: str, stage: Literal["screen", "interview", "offer"]
  ) -> Application:
    """Move an application to the next stage (applied → screen → interview → offer; use
    mark_hired for the last step).

    Args:
      application_id: the application's id.
      stage: the next stage: "screen", "interview" or "offer".
    """
    app = self._active(application_id)
    expected = PIPELINE[PIPELINE.index(app.stage) + 1]
    if stage != expected:
      raise Conflict(
        f"application '{application_id}' is at stage '{app.stage}'; stages advance one at a "
        f"time and the next one is '{expected}'"
        + (" (use mark_hired)" if expected == "hired" else "")
      )
    if stage == "offer" and not self._completed(application_id):
      raise Conflict(
        f"application '{application_id}' has no completed interview; the offer stage needs one"
      )
    return self._move(application_id, stage=stage)

  @tool(mutates=True, consumes=("application.id", "text"))
  def reject_application(self, application_id: str, reason: Text) -> Application:
    """Reject an application: its scheduled interviews are cancelled and an extended offer is
    withdrawn.

    Args:
      application_id: the application's id.
      reason: why, e.g. "Not enough experience".
    """
    self._active(application_id)
    for i in self.state.interviews.filter(
      lambda i: i.application_id == application_id and i.status == "scheduled"
    ):
      self.state.interviews.update(i.id, status="cancelled")
    for o in self.state.offers.filter(
      lambda o: o.application_id == application_id and o.status in ("extended", "accepted")
    ):
      self.state.offers.update(o.id, status="withdrawn")
    return self._move(application_id, stage="rejected", rejection_reason=reason)

  @tool(
    mutates=True,
    consumes=("application.id", "datetime", "person.email"),
    produces=("interview.id",),
  )
  def schedule_interview(
    self,
    application_id: str,
    scheduled_at: datetime,
    interviewers: list[Email],
    title: Text = "Interview",
    duration_minutes: Annotated[int, Field(ge=15, le=480)] = 60,
  ) -> Interview:
    """Schedule an interview for an application at the screen or interview stage.

    Args:
      application_id: the application's id.
      scheduled_at: start time (ISO 8601), in the future.
      interviewers: emails of the employees who interview (at least one).
      title: the round, e.g. "Technical interview".
      duration_minutes: length in minutes (15-480).
    """
    app = self._active(application_id)
    if app.stage not in ("screen", "interview"):
      raise Conflict(
        f"application '{application_id}' is at stage '{app.stage}'; interviews are scheduled "
        "at the screen or interview stage"
      )
    if scheduled_at <= self.state.now:
      raise InvalidArgument(
        f"scheduled_at ({scheduled_at.isoformat()}) must be in the future (after "
        f"{self.state.now.isoformat()})"
      )
    panel = tuple(dict.fromkeys(e.lower() for e in interviewers))
    if not panel:
      raise InvalidArgument("interviewers: give at least one employee email")
    staff = {p.email for p in world(self.state.seed).people}
    outsiders = [e for e in panel if e not in staff]
    if outsiders:
      raise Conflict(f"interviewers must be employees; not employees: {', '.join(outsiders)}")
    return self.state.interviews.insert(
      Interview(
        id=self.state.new_id("int"),
        application_id=application_id,
        title=title,
        scheduled_at=scheduled_at,
        duration_minutes=duration_minutes,
        interviewers=panel,
      )
    )

  @tool(mutates=True, consumes=("interview.id", "text"))
  def submit_scorecard(self, interview_id: str, rating: Rating, notes: str = "") -> Interview:
    """Submit the scorecard of a scheduled interview, which completes it.

    Args:
      interview_id: the interview's id.
      rating: 1 (strong no) to 4 (strong yes).
      notes: the interviewer's notes.
    """
    interview = self.state.interviews.get(interview_id)
    if interview.status != "scheduled":
      raise Conflict(
        f"interview '{interview_id}' is {interview.status}; only a scheduled interview takes a "
        "scorecard"
      )
    return self.state.interviews.update(
      interview_id, status="completed", rating=rating, notes=notes
    )

  @tool(
    mutates=True, consumes=("application.id", "money", "date", "currency"), produces=("offer.id",)
  )
  def make_offer(
    self,
    application_id: str,
    salary: Annotated[float, Field(gt=0, le=1e9, description="Yearly base salary.")],
    start_date: date,
    currency: Annotated[str, Field(pattern=r"^[A-Z]{3}$")] | None = None,
  ) -> Offer:
    """Extend an offer; the application moves to the offer stage.

    Args:
      application_id: the application's id, at the interview or offer stage.
      salary: yearly base salary, above zero.
      start_date: proposed first day (ISO date), after today.
      currency: ISO 4217 code; the company's currency by default.
    """
    app = self._active(application_id)
    if app.stage not in ("interview", "offer"):
      raise Conflict(
        f"application '{application_id}' is at stage '{app.stage}'; offers are made from the "
        "interview stage"
      )
    if not self._completed(application_id):
      raise Conflict(
        f"application '{application_id}' has no completed interview; an offer needs at least one"
      )
    open_offer = self.state.offers.filter(
      lambda o: o.application_id == application_id and o.status in ("extended", "accepted")
    )
    if open_offer:
      raise Conflict(
        f"application '{application_id}' already has {open_offer[0].status} offer "
        f"'{open_offer[0].id}'"
      )
    if start_date <= self.state.now.date():
      raise InvalidArgument(f"start_date ({start_date}) must be after today")
    self._move(application_id, stage="offer")
    return self.state.offers.insert(
      Offer(
        id=self.state.new_id("off"),
        application_id=application_id,
        salary=salary,
        currency=currency or world(self.state.seed).currency,
        start_date=start_date,
        created_at=self.state.now,
      )
    )

  @tool(mutates=True, consumes=("offer.id",))
  def respond_to_offer(self, offer_id: str, accepted: bool) -> Offer:
    """Record the candidate's answer to an extended offer.

    Args:
      offer_id: the offer's id.
      accepted: true if the candidate accepted, false if they declined.
    """
    offer = self.state.offers.get(offer_id)
    if offer.status != "extended":
      raise Conflict(f"offer '{offer_id}' is {offer.status}; only an extended offer gets answered")
    return self.state.offers.update(offer_id, status="accepted" if accepted else "declined")

  @tool(mutates=True, consumes=("application.id",))
  def mark_hired(self, application_id: str) -> dict:
    """Mark an application hired: it uses one of the job's openings and the job closes when
    none are left.

    Args:
      application_id: the application's id, at the offer stage with an accepted offer.
    """
    app = self._active(application_id)
    if app.stage != "offer":
      raise Conflict(
        f"application '{application_id}' is at stage '{app.stage}'; only the offer stage can "
        "be hired"
      )
    if not any(
      o.status == "accepted" for o in self.state.offers if o.application_id == application_id
    ):
      raise Conflict(f"application '{application_id}' has no accepted offer")
    job = self.state.jobs.get(app.job_id)
    if job.status != "open" or job.openings == 0:
      raise Conflict(f"job '{job.id}' ({job.title}) is closed with no openings left")
    left = job.openings - 1
    job = self.state.jobs.update(
      job.id,
      openings=left,
      status="open" if left else "closed",
      closed_on=None if left else self.state.now.date(),
    )
    return {"application": self._move(application_id, stage="hired"), "job": job}
