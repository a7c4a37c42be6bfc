"""CRM: the records, state and constants; the service and its tools are in ``tools``."""

from __future__ import annotations

from datetime import date, datetime
from typing import Annotated, Literal

from pydantic import Field

from compoworld import Record, ServiceState, Table
from envs._world import world

Stage = Literal[
  "prospecting", "qualification", "proposal", "negotiation", "closed_won", "closed_lost"
]
OpenStage = Literal["prospecting", "qualification", "proposal", "negotiation"]
ActivityKind = Literal["call", "email", "meeting", "note", "task"]
Tier = Literal["enterprise", "mid-market", "smb"]
Currency = Annotated[str, Field(pattern=r"^[A-Z]{3}$", description="ISO 4217 code, e.g. USD.")]

STAGES: tuple[str, ...] = Stage.__args__
CLOSED = ("closed_won", "closed_lost")
#: Win probability per stage, used for the weighted forecast.
PROBABILITY = dict(zip(STAGES, (0.1, 0.2, 0.5, 0.8, 1.0, 0.0), strict=True))


class Account(Record):
  name: str
  domain: str
  industry: str
  tier: Tier
  city: str
  country: str
  owner: str  # employee email
  created_at: datetime


class Contact(Record):
  account_id: str
  name: str
  email: str
  title: str = ""
  phone: str = ""
  created_at: datetime


class Deal(Record):
  account_id: str
  name: str
  amount: float = Field(ge=0)
  currency: str
  stage: Stage
  close_date: date
  owner: str
  contact_id: str | None = None
  lost_reason: str | None = None
  created_at: datetime
  updated_at: datetime
  closed_at: datetime | None = None


class Activity(Record):
  kind: ActivityKind
  subject: str
  notes: str = ""
  contact_id: str | None = None
  deal_id: str | None = None
  owner: str
  due: datetime | None = None
  done: bool = False
  completed_at: datetime | None = None
  created_at: datetime


class CrmState(ServiceState):
  accounts: Table[Account]
  contacts: Table[Contact]
  deals: Table[Deal]
  activities: Table[Activity]


DEAL_KINDS = ("rollout", "expansion", "renewal", "pilot", "upgrade")
LOST_REASONS = ("Chose a competitor", "No budget this year", "Project cancelled", "Went silent")
ACTIVITY_SUBJECTS = {
  "call": ("Discovery call", "Pricing call", "Check-in call"),
  "email": ("Sent proposal", "Shared case study", "Follow-up email"),
  "meeting": ("Product demo", "Executive briefing", "Security review"),
  "note": ("Budget approved in Q2", "Champion changed roles", "Competitor in the deal"),
  "task": ("Send revised quote", "Book technical review", "Confirm decision maker"),
}


def _sales_team(seed: int):
  w = world(seed)
  team = [p for p in w.people if p.department == "Sales"]
  return team or list(w.people[:5])
