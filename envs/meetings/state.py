"""Meetings: the records, state and constants; the service and its tools are in ``tools``."""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Annotated, Literal

from pydantic import Field

from compoworld import Record, ServiceState, Table

MeetingStatus = Literal["scheduled", "started", "ended", "cancelled"]
RegistrantStatus = Literal["approved", "pending", "declined"]
Approval = Literal["automatic", "manual"]
Minutes = Annotated[int, Field(ge=5, le=1440, description="A duration in minutes (5-1440).")]


class Meeting(Record):
  topic: str
  agenda: str = ""
  start: datetime
  duration_minutes: int
  host: str
  join_url: str
  passcode: str
  approval: Approval = "automatic"
  auto_record: bool = False
  status: MeetingStatus = "scheduled"
  started_at: datetime | None = None
  ended_at: datetime | None = None
  created_at: datetime


class Registrant(Record):
  meeting_id: str
  email: str
  name: str
  status: RegistrantStatus
  registered_at: datetime


class Recording(Record):
  meeting_id: str
  topic: str
  recorded_at: datetime
  duration_minutes: int
  file_size_mb: float
  share_url: str | None = None
  shared_at: datetime | None = None


class Transcript(Record):
  meeting_id: str
  recording_id: str
  language: str = "en-US"
  text: str


class MeetingsState(ServiceState):
  meetings: Table[Meeting]
  registrants: Table[Registrant]
  recordings: Table[Recording]
  transcripts: Table[Transcript]


def _digest(text: str) -> int:
  return int(hashlib.blake2b(text.encode(), digest_size=8).hexdigest(), 16)


def _join(meeting_id: str) -> tuple[str, str]:
  """The join URL and passcode of a meeting, derived from its id."""
  n = _digest(meeting_id)
  code = "".join("abcdefghjkmnpqrstuvwxyz23456789"[(n >> (5 * i)) % 31] for i in range(6))
  return f"https://zoom.example.com/j/{n % 10**11:011d}", code


#: (topic, agenda, whether customers attend). Placeholders are filled per meeting.
TOPICS = (
  ("Weekly team sync", "Status, blockers, and next week's priorities.", False),
  ("Sprint planning", "Groom the backlog and commit to the sprint goal.", False),
  ("Product demo for {customer}", "Walk {customer} through the {product}.", True),
  ("{customer} onboarding kickoff", "Plan the rollout of {qty} {product} units.", True),
  ("Quarterly business review: {customer}", "Usage, renewal and expansion.", True),
  ("Budget review Q{q}", "Department budgets against plan.", False),
  ("Interview: {role}", "Panel interview for the {role} opening.", False),
  ("All-hands", "Company update from leadership, then Q&A.", False),
  ("Incident review", "Timeline, root cause and follow-ups.", False),
  ("Vendor check-in: {vendor}", "Delivery dates and open invoices with {vendor}.", False),
)
ROLES = ("Senior Backend Engineer", "Account Executive", "Data Analyst", "Support Lead")
LINES = (
  "The {product} rollout at {customer} is on track for {date}.",
  "{customer} asked for a quote for {qty} units of {product} at {price} each.",
  "Action item: {person} sends the follow-up to {contact_email} by {date}.",
  "We agreed to hold the budget at {amount} for next quarter.",
  "Blocker: the {product} integration is a week behind plan.",
  "Support tickets from {customer} dropped by {pct} percent since the last release.",
  "Let's book a workshop with {customer} in {month}.",
  "Decision: {person} owns the renewal plan for {customer}.",
  "The hiring panel recommends moving forward with the candidate.",
  "Shipping from {vendor} is delayed; the new delivery date is {date}.",
)
