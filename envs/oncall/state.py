"""Oncall: the records, state and constants; the service and its tools are in ``tools``."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Literal

from compoworld import Record, ServiceState, Table

Urgency = Literal["high", "low"]
IncidentStatus = Literal["triggered", "acknowledged", "resolved"]
NoteKind = Literal["triggered", "acknowledged", "escalated", "reassigned", "note", "resolved"]
#: The longest window list_shifts shows at once.
MAX_SHIFT_WINDOW = timedelta(days=31)


class Level(Record):
  id: str  # the level number, "1" first
  schedule_id: str | None = None
  emails: tuple[str, ...] = ()
  escalate_after_minutes: int = 30


class Policy(Record):
  name: str
  levels: tuple[Level, ...]


class Schedule(Record):
  name: str
  rotation: tuple[str, ...]
  rotation_start: datetime
  shift_hours: int
  ends_at: datetime | None = None


class Override(Record):
  schedule_id: str
  email: str
  start: datetime
  end: datetime
  created_at: datetime


class Service(Record):
  name: str
  description: str
  team: str
  policy_id: str
  status: Literal["active", "maintenance"] = "active"


class Note(Record):
  id: str  # "n1", "n2"... in timeline order
  at: datetime
  author: str
  kind: NoteKind
  text: str


class Incident(Record):
  number: int
  title: str
  description: str = ""
  service_id: str
  urgency: Urgency = "high"
  status: IncidentStatus = "triggered"
  assignee: str
  level: int = 1
  created_at: datetime
  acknowledged_at: datetime | None = None
  resolved_at: datetime | None = None
  notes: tuple[Note, ...] = ()


class OncallState(ServiceState):
  services: Table[Service]
  policies: Table[Policy]
  schedules: Table[Schedule]
  overrides: Table[Override]
  incidents: Table[Incident]
  last_incident_number: int = 1000


#: (team, shift hours, [(service, description)])
TEAMS = (
  (
    "Platform",
    168,
    (
      ("auth-service", "Login, SSO and session tokens"),
      ("api-gateway", "Public API edge and rate limiting"),
      ("web-frontend", "Customer web app"),
    ),
  ),
  (
    "Payments",
    168,
    (
      ("checkout-api", "Cart and checkout"),
      ("payments-gateway", "Card processing and refunds"),
      ("billing-worker", "Invoice generation jobs"),
    ),
  ),
  (
    "Data",
    24,
    (
      ("data-pipeline", "Nightly warehouse loads"),
      ("search-indexer", "Product search index"),
      ("reporting-db", "Reporting database replicas"),
    ),
  ),
  (
    "Mobile",
    12,
    (
      ("mobile-backend", "API for the iOS and Android apps"),
      ("notifications", "Push, email and SMS delivery"),
    ),
  ),
)
ALERTS = (
  "High error rate on {s}",
  "p95 latency above 2s on {s}",
  "Disk usage above 90% on {s}",
  "Health check failing for {s}",
  "Queue backlog growing on {s}",
  "TLS certificate expires in 3 days for {s}",
  "5xx spike after deploy on {s}",
  "Memory usage climbing on {s}",
)
NOTES = (
  "Looking into it now.",
  "Rolled back the last deploy, watching the graphs.",
  "Looks related to the database failover earlier.",
  "Customer-facing impact confirmed; status page updated.",
  "Scaled out two more instances.",
)
RESOLUTIONS = (
  "Rolled back to the previous release.",
  "Cleared the stuck queue consumer and restarted it.",
  "Freed disk space and added a cleanup cron job.",
  "Renewed the certificate.",
  "Upstream provider outage ended.",
)


def shift_owner(schedule: Schedule, at: datetime) -> str | None:
  """Who the rotation puts on call at ``at`` (None outside the schedule's coverage)."""
  if at < schedule.rotation_start or (schedule.ends_at is not None and at >= schedule.ends_at):
    return None
  shift = int((at - schedule.rotation_start) // timedelta(hours=schedule.shift_hours))
  return schedule.rotation[shift % len(schedule.rotation)]


def _note(incident_notes: tuple[Note, ...], at, author, kind, text) -> tuple[Note, ...]:
  n = Note(id=f"n{len(incident_notes) + 1}", at=at, author=author, kind=kind, text=text)
  return (*incident_notes, n)
