"""Helpdesk: the records, state and constants; the service and its tools are in ``tools``."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from compoworld import InvalidArgument, Record, ServiceState, Table

Priority = Literal["low", "normal", "high", "urgent"]
Status = Literal["new", "open", "pending", "solved", "closed"]
Channel = Literal["email", "web", "phone", "chat"]

#: Resolution SLA target per priority, in hours from the ticket's creation.
SLA_HOURS = {"urgent": 8, "high": 24, "normal": 72, "low": 120}
#: Status changes an agent may make (closing is final: closed tickets are immutable).
TRANSITIONS = {
  "new": ("open", "pending", "solved"),
  "open": ("pending", "solved"),
  "pending": ("open", "solved"),
  "solved": ("open", "closed"),
  "closed": (),
}


class Requester(Record):
  id: str  # the end user's email address
  name: str
  organization: str
  title: str
  phone: str


class Agent(Record):
  id: str  # the agent's email address
  name: str
  employee_id: str
  role: Literal["admin", "agent"] = "agent"
  active: bool = True


class Ticket(Record):
  subject: str
  description: str
  requester: str
  organization: str
  priority: Priority = "normal"
  status: Status = "new"
  assignee: str | None = None
  tags: tuple[str, ...] = ()
  channel: Channel = "web"
  created_at: datetime
  updated_at: datetime
  sla_due_at: datetime
  sla_breached: bool = False
  solved_at: datetime | None = None
  merged_into: str | None = None


class Comment(Record):
  ticket_id: str
  author: str
  author_role: Literal["agent", "end_user"]
  body: str
  public: bool = True
  created_at: datetime


class Macro(Record):
  title: str
  description: str
  status: Status | None = None
  priority: Priority | None = None
  add_tags: tuple[str, ...] = ()
  comment: str = ""
  public: bool = True
  assign_to_me: bool = False
  active: bool = True


class HelpdeskState(ServiceState):
  requesters: Table[Requester]
  agents: Table[Agent]
  tickets: Table[Ticket]
  comments: Table[Comment]
  macros: Table[Macro]


#: One issue per "## subject | tags" line, the requester's description below it. Placeholders
#: ({product}, {sku}, {n}, {invoice}, {order}) are filled per ticket.
ISSUES_TEXT = """
## {product} will not power on | hardware, rma
Our {product} ({sku}) stopped powering on this morning. {n} of our units are affected; we already
tried a different outlet and cable.
## Cannot export reports to CSV | export, reports
Since the last release our admins get an error when exporting reports to CSV. This blocks our
month-end reporting.
## Invoice {invoice} shows the wrong amount | billing, invoice
Invoice {invoice} bills us for {n} units but our PO was for fewer. Please send a corrected
invoice.
## Refund request for order {order} | refund, billing
We returned the {product} from order {order} last week, unopened. When will the refund reach us?
## SSO login fails for new users | login, sso
New users in our identity provider get 'account not provisioned' when signing in with SSO.
Existing users are fine.
## Shipment for order {order} is delayed | shipping
The tracking page for order {order} has not moved for four days. We need the {product} units on
site by Friday.
## API returns 429 errors | api
Our nightly sync started failing with HTTP 429 (rate limited) after {n} requests. Did the limits
change?
## Add {n} Analytics seats | licensing, sales
We are onboarding a new team and need {n} more Analytics seats from next month.
## {product} firmware update failed | hardware, firmware
The firmware update on our {product} ({sku}) stopped at 60% and the device now shows a red light.
## Dashboards load very slowly | performance
Dashboards take over 30 seconds to load for everyone in our account since yesterday.
## Password reset email not arriving | login
Several of our users never receive the password reset email, even in spam.
## Schedule our onboarding workshop | services, onboarding
We bought the Onboarding Workshop and would like to schedule it for {n} attendees.
"""
ISSUES = tuple(
  (head.split(" | ")[0], " ".join(body.split()), tuple(head.split(" | ")[1].split(", ")))
  for head, _, body in (chunk.partition("\n") for chunk in ISSUES_TEXT.split("\n## ")[1:])
)
FIRST_REPLIES = (
  "Hi {first}, thanks for reaching out. I'm looking into this now and will update you today.",
  "Hi {first}, thanks for the details. Could you send a screenshot and the time it happened?",
  "Hi {first}, sorry for the trouble. I've reproduced the issue and passed it to our team.",
)
REQUESTER_REPLIES = (
  "Thanks. Any update? This is still blocking us.",
  "Screenshot attached. It happened again this morning around 9am.",
  "We tried that but it did not help, unfortunately.",
)
RESOLUTIONS = (
  "Hi {first}, the fix has been deployed and we confirmed it on your account. Let us know if "
  "anything else comes up.",
  "Hi {first}, the replacement has shipped and the refund was issued. Closing this out.",
  "Hi {first}, your account is updated as requested. Thanks for your patience.",
)
NOTES = (
  "Checked the logs: matches the known issue from this week's release.",
  "Customer is on a renewal this quarter; keep them updated daily.",
  "Asked engineering on-call to take a look.",
)
MACROS = (
  (
    "Close and thank",
    "Sends a thank-you reply, assigns the ticket to you and solves it.",
    dict(status="solved", add_tags=("thanked",), assign_to_me=True),
    "Hi {{requester.first_name}}, glad we could sort this out! I'm marking this ticket as "
    "solved; just reply if anything else comes up.",
  ),
  (
    "Ask for more details",
    "Asks the requester for details and sets the ticket to pending.",
    dict(status="pending", add_tags=("needs_info",)),
    "Hi {{requester.first_name}}, to look into this we need a bit more detail: the device serial "
    "number or account name, the time it happened and a screenshot of any error.",
  ),
  (
    "Escalate to engineering",
    "Raises the priority to high, tags the ticket and leaves an internal note.",
    dict(status="open", priority="high", add_tags=("escalated", "engineering"), public=False),
    "Escalated to engineering on-call; see the linked incident for updates.",
  ),
  (
    "Refund request received",
    "Confirms a refund request under the 30-day refund policy and sets the ticket to pending.",
    dict(status="pending", add_tags=("refund", "billing")),
    "Hi {{requester.first_name}}, we've received your refund request. Refunds for returns within "
    "30 days of delivery are issued within 5-7 business days of us receiving the item.",
  ),
  (
    "Urgent outage",
    "Marks the ticket urgent, assigns it to you and opens it.",
    dict(status="open", priority="urgent", add_tags=("outage",), assign_to_me=True),
    "",
  ),
  (
    "Holiday closure notice (retired)",
    "Old notice about the December support closure; kept for reference.",
    dict(status="pending", active=False),
    "Hi {{requester.first_name}}, our support team is closed over the holidays.",
  ),
)


def _first(name: str) -> str:
  return name.split()[0]


def _tags(values, argument: str = "tags") -> tuple[str, ...]:
  """Zendesk-style tags: lower case, spaces become underscores, no duplicates."""
  out = []
  for value in values:
    tag = "_".join(value.strip().lower().split())
    if not tag:
      raise InvalidArgument(f"{argument}: tags cannot be empty")
    out.append(tag)
  return tuple(dict.fromkeys(out))


def _breached(ticket: Ticket, now: datetime) -> bool:
  end = ticket.solved_at if ticket.status in ("solved", "closed") and ticket.solved_at else now
  return end > ticket.sla_due_at
