"""Recruiting: the records, state and constants; the service and its tools are in ``tools``."""

from __future__ import annotations

from datetime import date, datetime
from typing import Annotated, Literal

from pydantic import Field

from compoworld import Record, ServiceState, Table

Stage = Literal["applied", "screen", "interview", "offer", "hired", "rejected"]
Source = Literal["careers_site", "referral", "linkedin", "agency", "event"]
PIPELINE = ("applied", "screen", "interview", "offer", "hired")
FINAL = ("hired", "rejected")
SOURCES = ("careers_site", "referral", "linkedin", "agency", "event")
Rating = Annotated[int, Field(ge=1, le=4, description="1 strong no, 2 no, 3 yes, 4 strong yes.")]


class Job(Record):
  title: str
  department: str
  hiring_manager: str  # an employee's email
  location: str
  openings: int = Field(ge=0)  # positions still to fill
  status: Literal["open", "closed"] = "open"
  opened_on: date
  closed_on: date | None = None


class Candidate(Record):
  name: str
  email: str
  phone: str = ""
  source: Source = "careers_site"
  current_company: str = ""
  created_at: datetime


class Application(Record):
  candidate_id: str
  job_id: str
  stage: Stage = "applied"
  rejection_reason: str | None = None
  applied_at: datetime
  updated_at: datetime


class Interview(Record):
  application_id: str
  title: str
  scheduled_at: datetime
  duration_minutes: int
  interviewers: tuple[str, ...]
  status: Literal["scheduled", "completed", "cancelled"] = "scheduled"
  rating: int | None = None
  notes: str = ""


class Offer(Record):
  application_id: str
  salary: float
  currency: str
  start_date: date
  status: Literal["extended", "accepted", "declined", "withdrawn"] = "extended"
  created_at: datetime


class RecruitingState(ServiceState):
  jobs: Table[Job]
  candidates: Table[Candidate]
  applications: Table[Application]
  interviews: Table[Interview]
  offers: Table[Offer]


MAILBOXES = ("gmail.com", "outlook.com", "proton.me", "fastmail.com", "yahoo.com")
REASONS = ("Not enough experience", "Salary expectations", "Withdrew", "Position filled")
ROUNDS = ("Phone screen", "Technical interview", "Hiring manager interview", "Team interview")
NOTES = {
  1: "Could not explain past work in depth.",
  2: "Some gaps in the core skills for the role.",
  3: "Solid answers and good collaboration signals.",
  4: "Exceptional; raised the bar for the team.",
}
SALARY = {"Engineering": 145, "Sales": 95, "Marketing": 100, "Finance": 110}
