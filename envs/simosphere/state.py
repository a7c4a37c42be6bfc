"""Simosphere: the records, state and constants; the service and its tools are in ``tools``."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Literal

from compoworld import InvalidArgument, Record, ServiceState, Table
from envs._world import world

Folder = Literal["inbox", "sent", "archive", "drafts"]
DocKind = Literal["doc", "sheet"]


class Message(Record):
  thread_id: str
  folder: Folder
  sender: str
  to: tuple[str, ...]
  cc: tuple[str, ...] = ()
  subject: str
  body: str
  sent_at: datetime
  read: bool = False
  labels: tuple[str, ...] = ()


class Document(Record):
  title: str
  kind: DocKind = "doc"
  content: str = ""
  owner: str
  shared_with: tuple[str, ...] = ()
  updated_at: datetime


class Invitation(Record):
  subject: str
  start: datetime
  end: datetime
  location: str = ""
  meeting_link: str | None = None
  invitees: tuple[str, ...]
  message: str = ""
  sent_at: datetime
  status: Literal["sent", "cancelled"] = "sent"


class SimosphereState(ServiceState):
  messages: Table[Message]
  documents: Table[Document]
  invitations: Table[Invitation]


VENDORS = (
  "Atlas Cloud",
  "Brightdesk Furniture",
  "Kettle & Co Catering",
  "Lumen Print",
  "Papertrail Supplies",
)
ROLES = ("Senior Backend Engineer", "Account Executive", "Data Analyst", "Support Lead")

#: (label, subject, opening message, follow-ups in order). Placeholders are filled per thread.
THREADS = (
  (
    "finance",
    "Invoice {invoice} from {vendor} is overdue",
    "Accounts payable flagged invoice {invoice} from {vendor} (${amount}) as two weeks "
    "overdue. Can you confirm the PO and approve it so we can pay it this week?",
    (
      "Checked it against the PO and the amounts match. Approved on my side.",
      "Thanks. Payment is scheduled for {day}.",
      "Great, I've let {vendor} know it's on the way.",
    ),
  ),
  (
    "hiring",
    "Interview feedback: {candidate} for {role}",
    "Please add your scorecard for {candidate} ({role}) before the debrief on {day}. So far "
    "we have two strong yes votes.",
    (
      "Scorecard is in: strong on system design, a little light on testing.",
      "Thanks. I'll draft the offer recommendation after the debrief.",
      "The debrief moved to 3pm, same room.",
    ),
  ),
  (
    "planning",
    "Q2 planning: draft priorities",
    "I've put the first cut of our Q2 priorities in the Q2 planning notes doc. The top three "
    "are the onboarding revamp, the billing migration and the EU launch. Comments by {day} "
    "please.",
    (
      "Looks right to me. I'd move the billing migration first, it blocks finance.",
      "Fair point, I've reordered the list in the doc.",
      "Signed off. Let's present it at the kickoff.",
    ),
  ),
  (
    "escalation",
    "Escalation: {customer} cannot export reports",
    "{customer} escalated ticket #{ticket}: their admins have not been able to export reports "
    "since Tuesday's release. They renew next month, so this needs an owner today.",
    (
      "Engineering reproduced it, it's the new CSV encoder. A fix is in review.",
      "Thanks. I've told their admin to expect the fix by {day}.",
      "Fix is deployed; {customer} confirmed exports work again.",
    ),
  ),
  (
    "sales",
    "Renewal quote for {customer}",
    "{customer} asked for a renewal quote for {seats} seats at ${amount}. Can you review the "
    "discount before I send it?",
    (
      "The discount is above what I can approve alone; let's keep it at 12%.",
      "Updated the quote to 12% and sent it over.",
      "They signed this morning. Nice work.",
    ),
  ),
  (
    "operations",
    "Office move: desk assignments",
    "We're moving to the third floor on {day}. Please confirm your desk preference in the "
    "office inventory sheet by Friday.",
    (
      "Done, I picked a desk near the window.",
      "Could we keep the team together near the meeting rooms?",
      "Noted, I've grouped the team in the east corner.",
    ),
  ),
  (
    "marketing",
    "Webinar on {day}: speaker lineup",
    "We have two speakers confirmed for the customer webinar on {day}. Could you present the "
    "product roadmap for ten minutes?",
    (
      "Happy to. Can you share the slide template?",
      "Template attached. Dry run the day before at 4pm.",
      "See you at the dry run.",
    ),
  ),
  (
    "people",
    "Updated parental leave policy",
    "The updated parental leave policy is now in the Team handbook. The main change is 20 "
    "weeks of paid leave for all parents from {day}.",
    (
      "Thanks for the update. Does it apply to leave that has already started?",
      "Yes, anyone on leave on that date moves to the new policy.",
    ),
  ),
  (
    "engineering",
    "Incident review: checkout latency spike",
    "Checkout p95 latency went from 300ms to 4s for 40 minutes yesterday. I'd like to run the "
    "incident review on {day}; the timeline is in the incident doc.",
    (
      "Root cause looks like the connection pool limit after the config change.",
      "Agreed. I'll add an alert on pool saturation as a follow-up.",
      "Review is booked, invite sent.",
    ),
  ),
  (
    "finance",
    "March expense reports due {day}",
    "A reminder that March expense reports are due on {day}. Receipts over $75 need to be "
    "attached or the claim will be returned.",
    (
      "Submitted mine. The hotel receipt is attached.",
      "Thanks, approved.",
    ),
  ),
  (
    "finance",
    "Contract renewal with {vendor}",
    "Our contract with {vendor} renews on {day}. Their new price is ${amount} a year, up 8%. "
    "Should we renew or run a quick tender?",
    (
      "Let's ask two other vendors for quotes before we decide.",
      "I'll reach out today and share the comparison.",
      "Comparison is ready; {vendor} is still the best value.",
    ),
  ),
  (
    "security",
    "Action required: rotate your API keys",
    "As part of the quarterly security review, please rotate any personal API keys older than "
    "90 days by {day}.",
    (
      "Rotated mine. Do service accounts fall under this too?",
      "Yes, the owners of service accounts should rotate them as well.",
    ),
  ),
  (
    "customer",
    "Feedback from the {customer} pilot",
    "The {customer} pilot wrapped up. They loved the dashboards but found the permission "
    "settings confusing. Full notes are in the pilot doc.",
    (
      "Useful, thanks. I'll bring the permissions feedback to the design review.",
      "They also asked for SSO, that could unlock a larger deal.",
      "Added SSO to the Q2 planning notes as a candidate.",
    ),
  ),
  (
    "planning",
    "Team offsite agenda for {day}",
    "Here is the draft agenda for the offsite on {day}: roadmap in the morning, a customer "
    "panel after lunch and a team dinner. Anything missing?",
    (
      "Could we add 30 minutes for the hiring plan?",
      "Added it after the customer panel.",
      "Dinner is booked for 7pm.",
    ),
  ),
  (
    "hiring",
    "Referral: {candidate} for {role}",
    "I'd like to refer {candidate} for the {role} opening. We worked together for three years "
    "and they led our data platform migration.",
    (
      "Thanks for the referral! I've added them to the pipeline.",
      "The recruiter screen is booked for {day}.",
    ),
  ),
  (
    "finance",
    "Q2 budget reforecast",
    "Finance needs each team's Q2 reforecast by {day}. We're currently ${amount} under plan, "
    "mostly from delayed hiring.",
    (
      "I'll update the numbers assuming the two open roles start in May.",
      "Sounds good, send me the sheet when it's ready.",
      "Sheet updated, ready for review.",
    ),
  ),
)
DRAFTS = (
  "Thanks for the note. I'll look into this and get back to you by end of day.",
  "Quick question before I confirm: can we push this to next week?",
  "Following up on this, do you have an update?",
)


def _day(moment: datetime) -> str:
  """A working day's name, e.g. "Thursday 5 March" (a weekend moves to the Monday after)."""
  while moment.weekday() >= 5:
    moment += timedelta(days=1)
  return f"{moment:%A} {moment.day} {moment:%B}"


def _user(seed: int) -> str:
  return world(seed).people[0].email


def _first_name(email: str) -> str:
  return email.split("@")[0].split(".")[0].capitalize()


def _letter(to: str, text: str, sender: str) -> str:
  return f"Hi {_first_name(to)},\n\n{text}\n\nThanks,\n{_first_name(sender)}"


def _emails(values, argument: str) -> tuple[str, ...]:
  """Lower-cased, de-duplicated addresses in their given order; at least one."""
  out = tuple(dict.fromkeys(v.lower() for v in values))
  if not out:
    raise InvalidArgument(f"{argument}: give at least one email address")
  return out
