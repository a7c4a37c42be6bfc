"""Docstore: the records, state and constants; the service and its tools are in ``tools``."""

from __future__ import annotations

import random
import re
from datetime import datetime
from typing import Annotated, Literal

from pydantic import Field

from compoworld import Record, ServiceState, Table
from envs._world import CITIES
from envs.helpdesk import SLA_HOURS

Category = Literal["manual", "policy", "contract", "report"]
PageNumber = Annotated[int, Field(ge=1, description="A page number, from 1.")]

PAGE_CHARS = 1200
#: Daily meal and incidentals allowance per city, in the company currency.
PER_DIEM = {
  "Toronto": 85,
  "Oslo": 110,
  "Denver": 75,
  "Lisbon": 65,
  "Austin": 70,
  "Sapporo": 80,
  "Melbourne": 80,
  "Edinburgh": 80,
}
HOTEL_CAP, RECEIPT_OVER, PRE_APPROVAL_OVER = 220, 75, 500
REFUND_WINDOW_DAYS, RESTOCKING_FEE_PCT, REFUND_APPROVAL_OVER = 30, 15, 1000
SNOW_CLOSURE_CM, SNOW_EVENT_ONLINE_CM = 15, 5
FIRST_REPLY_HOURS = {"urgent": 1, "high": 4, "normal": 8, "low": 24}


class Document(Record):
  title: str
  category: Category
  owner: str
  tags: tuple[str, ...] = ()
  page_count: int
  created_at: datetime
  updated_at: datetime


class Page(Record):
  id: str  # "<document_id>/p<number>"
  document_id: str
  number: int
  text: str


class Annotation(Record):
  document_id: str
  page: int
  author: str
  text: str
  highlight: str = ""
  created_at: datetime


class Bookmark(Record):
  document_id: str
  page: int
  owner: str
  label: str = ""
  created_at: datetime


class DocstoreState(ServiceState):
  documents: Table[Document]
  pages: Table[Page]
  annotations: Table[Annotation]
  bookmarks: Table[Bookmark]


_HEADING = re.compile(r"^(#+\s*\S.*|\d+(\.\d+)*\.?\s+[A-Z][^.]{0,70})$")
_WORD = re.compile(r"[a-z0-9]+(?:[-'.][a-z0-9]+)*")
STOPWORDS = frozenset(
  "a an and are as at be by for from has have in is it of on or our the to we what when where "  # noqa: SIM905
  "which who with you your how do does can".split()
)


def split_pages(text: str, size: int = PAGE_CHARS) -> list[str]:
  """Pages of at most about ``size`` characters, cut between paragraphs, else between words; a
  heading never ends a page (it moves to the next one with its section)."""
  paras: list[str] = []
  for para in (p.strip() for p in text.replace("\r\n", "\n").split("\n\n")):
    room = size - 100  # an oversized paragraph is cut in pieces that leave room for a heading
    while len(para) > size:
      cut = para.rfind(" ", 0, room)
      paras.append(para[: cut if cut > 0 else room].strip())
      para = para[cut if cut > 0 else room :].strip()
    if para:
      paras.append(para)
  pages: list[list[str]] = [[]]
  for para in paras:
    page = pages[-1]
    if page and sum(len(p) + 2 for p in page) + len(para) > size:
      carry = [page.pop()] if len(page) > 1 and _HEADING.match(page[-1]) else []
      pages.append(carry)
    pages[-1].append(para)
  return ["\n\n".join(page) for page in pages if page]


def _prose(text: str) -> str:
  """Joins the hard-wrapped lines of each paragraph; list items ("- ...") keep their lines."""
  paras = []
  for para in text.strip().split("\n\n"):
    lines: list[str] = []
    for line in para.splitlines():
      line = line.strip()
      if lines and not line.startswith("- "):
        lines[-1] = f"{lines[-1]} {line}"
      else:
        lines.append(line)
    paras.append("\n".join(lines))
  return "\n\n".join(paras)


def _tag(value: str) -> str:
  """Tags are lower case with hyphens for spaces: "Snow Day" is "snow-day"."""
  return "-".join(value.lower().split())


def headings(text: str) -> list[str]:
  return [line.strip().lstrip("#").strip() for line in text.splitlines() if _HEADING.match(line)]


def snippet(flat: str, at: int, width: int = 200) -> str:
  """About ``width`` characters of ``flat`` around position ``at``, cut at spaces."""
  start = max(0, at - width // 3)
  if start:
    start = flat.find(" ", start) + 1 or start
  end = min(len(flat), start + width)
  if end < len(flat) and flat.rfind(" ", start, end) > at:
    end = flat.rfind(" ", start, end)
  return ("…" if start else "") + flat[start:end].strip() + ("…" if end < len(flat) else "")


def _age(state: DocstoreState, doc: Document) -> int:
  """Days a notes-bearing document has existed, capped: notes are later than the document."""
  return min(60, (state.now - doc.created_at).days - 1)


# --- seeded documents ----------------------------------------------------------------------


def _policies(w, heads: dict[str, str]) -> list[tuple]:
  """(title, category, owner department, tags, text) of the company's core documents."""
  cur = w.currency
  snowy = ", ".join(c[0] for c in CITIES if c[4])
  per_diem = "\n".join(f"- {city}: {cur} {amount} per day" for city, amount in PER_DIEM.items())
  sla = "\n".join(
    f"- {p.capitalize()}: first reply within {FIRST_REPLY_HOURS[p]} "
    f"hour{'s' if FIRST_REPLY_HOURS[p] > 1 else ''}, resolution within {h} hours"
    for p, h in SLA_HOURS.items()
  )
  return [
    (
      "Travel and Expense Policy",
      "policy",
      "Finance",
      ("travel", "expenses", "per-diem"),
      f"""1. Purpose

This policy explains how employees of {w.company} book business travel and claim expenses. It
applies to every employee and contractor travelling on company business. Questions go to the
Finance team ({heads["Finance"]}).

2. Booking travel

Book flights and hotels through the company travel portal. Flights under six hours are booked in
economy; longer flights may be booked in premium economy. Trips with an estimated cost above {cur}
{PRE_APPROVAL_OVER} need your manager's approval before booking. Hotels are capped at {cur}
{HOTEL_CAP} per night; a higher rate needs Finance approval in writing.

3. Per-diem rates

Meals and incidentals are covered by a daily per diem instead of receipts. The per diem is paid
for each full travel day; the first and last day of a trip are paid at 75%. Rates per city:

{per_diem}

For cities not listed, the per diem is {cur} 70 per day.

4. Receipts and claims

Receipts are required for every expense over {cur} {RECEIPT_OVER} (per diems excepted); claims
without them are returned. Submit expense claims within 30 days of the end of the trip. Claims
above {cur} 2,500 are reviewed by Finance before payment.

5. Mileage and ground transport

Use of a personal car is reimbursed at {cur} 0.67 per mile (0.42 per km). Taxis and ride-hailing
are reimbursed for business trips; public transport is preferred where practical.

6. Non-reimbursable expenses

Alcohol outside client entertainment, upgrades, fines, personal entertainment and travel for
partners or family are not reimbursed.""",
    ),
    (
      "Refund and Returns Policy",
      "policy",
      "Support",
      ("refunds", "returns", "customers"),
      f"""1. Scope

This policy covers refunds and returns for products and services sold by {w.company}. Support
agents apply it to refund requests received through the helpdesk.

2. Refund window

Customers can return products within {REFUND_WINDOW_DAYS} days of delivery. Unopened hardware in
its original packaging is refunded in full. Opened hardware that is not defective is refunded less
a {RESTOCKING_FEE_PCT}% restocking fee. Opened supplies (labels, boxes, cables) cannot be
returned.

3. Defective products

Defective hardware is replaced free of charge under the 12-month warranty, whether or not the
refund window has passed. The customer receives a prepaid return label; the replacement ships when
the faulty unit is scanned by the carrier.

4. Software and services

Annual software seats can be refunded pro rata within 14 days of purchase or renewal. Services
such as the Onboarding Workshop and the Support Plan Gold are not refundable once delivered or
started.

5. Approvals and timing

Refunds above {cur} {REFUND_APPROVAL_OVER:,} need approval from Finance before they are issued.
Approved refunds are issued to the original payment method within 5-7 business days of receiving
the returned item. The agent tags the ticket "refund" and records the order number.""",
    ),
    (
      "Security Incident Response Plan",
      "policy",
      "Engineering",
      ("security", "incident"),
      f"""1. Purpose

This plan describes how {w.company} detects, responds to and recovers from security incidents. The
incident commander for every SEV1 and SEV2 incident is the Head of Engineering
({heads["Engineering"]}) or their delegate.

2. Severity levels

- SEV1: confirmed breach of customer data or a full outage. Respond within 15 minutes, around the
clock.
- SEV2: suspected breach or a major feature unavailable. Respond within 1 hour.
- SEV3: a contained vulnerability or a minor feature degraded. Respond within 4 hours.
- SEV4: a low-risk finding. Respond by the next business day.

3. Response steps

Declare the incident in the #incidents channel, assign an incident commander and open an incident
document. Contain the threat first: revoke exposed credentials, isolate affected hosts and block
malicious traffic. Then eradicate the cause, restore service from known-good state and monitor for
recurrence.

4. Notification

Customers affected by a confirmed data breach are notified within 72 hours of confirmation,
together with the relevant regulators. Support prepares the customer message; Legal approves it.

5. Credentials

Personal API keys and service account keys are rotated every 90 days, and immediately after any
incident that may have exposed them.

6. After the incident

A blameless postmortem is written within 5 business days of resolution, with owners and due dates
for every follow-up action.""",
    ),
    (
      "Customer Support SLA Manual",
      "manual",
      "Support",
      ("support", "sla"),
      f"""1. Purpose

This manual defines the service levels the {w.company} support team commits to and how tickets
move through the helpdesk.

2. Priorities and targets

Every ticket gets a priority when it is triaged. Resolution targets count from the ticket's
creation:

{sla}

Changing a ticket's priority moves its resolution target. A ticket that is not solved by its
target has breached its SLA.

3. Ticket workflow

Tickets move from new to open when an agent picks them up, to pending while we wait for the
customer, and to solved once resolved. A ticket is solved only after a public reply that explains
the resolution. Solved tickets close automatically after 4 days; a customer reply before then
reopens the ticket. Closed tickets cannot be changed.

4. Escalation

Urgent tickets that are unassigned after 30 minutes are escalated to the Support Lead. Tickets
from enterprise customers are tagged "vip" and reviewed daily. Engineering escalations use the
"Escalate to engineering" macro.

5. Reporting

The weekly SLA report lists breach rates per priority and every unsolved breached ticket; the Head
of Support ({heads["Support"]}) reviews it every Monday.""",
    ),
    (
      "Severe Weather and Snow Day Policy",
      "policy",
      "Operations",
      ("weather", "snow", "safety", "events"),
      f"""1. Purpose

This policy keeps employees, customers and guests safe during snow storms and other severe
weather. It covers office closures, in-person events and travel.

2. Office closures

An office closes for the day when the forecast for its city shows {SNOW_CLOSURE_CM} cm of snow or
more, or when the authorities issue a red weather warning. The Operations team
({heads["Operations"]}) announces closures by 6:00 local time in the company chat. Employees work
remotely on closure days; nobody is expected to travel to the office.

3. In-person events

An in-person meeting, workshop or community event in a city whose forecast shows
{SNOW_EVENT_ONLINE_CM} cm of snow or more, or sleet, on the day of the event must be moved online.
The organizer moves the calendar event online, keeps its time and notifies every attendee at least
24 hours before the start. Events with external guests also get a short email explaining the
change.

4. Travel

Avoid non-essential travel to a city with a severe weather warning. Trips to snow-prone cities
({snowy}) between December and March need travel insurance that covers weather delays. Extra hotel
nights caused by cancelled flights are reimbursed under the Travel and Expense Policy.

5. Recording snow days

Managers record snow days for their teams; they do not count against paid time off.""",
    ),
    (
      "Employee Handbook",
      "manual",
      "People",
      ("hr", "handbook"),
      f"""1. Welcome

Welcome to {w.company}! This handbook summarises how we work. Detailed policies live in the
document store; the People team ({heads["People"]}) keeps this handbook up to date.

2. Working hours

Core hours are 10:00-16:00 local time; plan meetings inside them. Employees may work remotely up
to two days a week, and every day on snow days.

3. Time off

Full-time employees get 25 days of paid time off a year plus public holidays. Parental leave is 20
weeks of paid leave for all parents. Request time off at least two weeks ahead for absences longer
than three days.

4. Expenses

Expenses over {cur} {RECEIPT_OVER} need a receipt. Travel follows the Travel and Expense Policy,
including its per-diem rates.

5. Security

Rotate personal API keys every 90 days, use the password manager and report suspected incidents in
#incidents right away.""",
    ),
  ]


def _manual(product, rng: random.Random) -> tuple:
  title, tags = f"{product.name} User Manual", ("product", product.sku.lower())
  return (
    title,
    "manual",
    "Engineering",
    tags,
    f"""1. Overview

The {product.name} ({product.sku}) is part of the {product.category.lower()} range. This manual
covers installation, everyday use, troubleshooting and the warranty.

2. Installation

Unpack the device and check the contents against the packing list. Mount it with the Mounting Kit
or place it on a flat surface away from heat sources. Connect power and wait until the status
light turns solid green (about {rng.randint(20, 90)} seconds). Pair it from the admin console
under Devices, then Add device, using the serial number on the label.

3. Everyday use

The device reports its status to the admin console every {rng.choice((1, 5, 15))} minutes.
Firmware updates install automatically overnight; keep the device powered. Clean the housing with
a dry cloth only.

4. Troubleshooting

- No status light: try another outlet and cable; if it stays dark, replace the battery.
- Red light after a firmware update: hold the reset button for 10 seconds to roll back, then retry
the update.
- Not visible in the console: check the network allows outbound HTTPS on port 443.

5. Warranty

The {product.name} is covered by a 12-month warranty against defects. Returns follow the Refund
and Returns Policy. Weight: {product.weight_kg} kg. List price: {product.unit_price:.2f}.""",
  )


def _contract(customer, w, rng: random.Random, start) -> tuple:
  fee = rng.randint(24, 180) * 1000
  plan = rng.choice(("Support Plan Gold", "Standard support"))
  title = f"Master Services Agreement - {customer.name}"
  return (
    title,
    "contract",
    "Finance",
    ("msa", customer.domain),
    f"""Master Services Agreement between {w.company} and {customer.name}

1. Parties and term

This agreement is between {w.company} ("Provider") and {customer.name} of {customer.city},
{customer.country} ("Customer"). It starts on {start:%d-%m-%Y} and runs for 12 months. It renews
automatically for another 12 months unless either party gives written notice at least 60 days
before the end of the term.

2. Fees and payment

The Customer pays an annual fee of {w.currency} {fee:,}, invoiced at the start of each term.
Invoices are payable within 30 days (net 30). Late payments accrue interest of 1% per month.

3. Support and service levels

The Customer is entitled to {plan}. Support tickets are handled under the Customer Support SLA
Manual. If more than 10% of the Customer's tickets in a quarter breach their resolution target,
the Customer receives a service credit of 5% of the quarterly fee.

4. Data protection

The Provider processes Customer data only to deliver the services and notifies the Customer of any
confirmed data breach within 72 hours.

5. Contacts

Customer contact: {customer.contacts[0].name} ({customer.contacts[0].email}),
{customer.contacts[0].title}.""",
  )


def _report(title: str, tags: tuple[str, ...], rng: random.Random) -> tuple:
  opened = rng.randint(900, 1600)
  return (
    title,
    "report",
    "Support",
    tags,
    f"""{title}

1. Summary

The support team handled {opened} tickets this period, {rng.randint(-12, 18)}% compared with the
previous one. The SLA breach rate was {rng.uniform(3, 14):.1f}% and customer satisfaction was
{rng.uniform(82, 96):.1f}%.

2. Volume by topic

Hardware issues made up {rng.randint(25, 40)}% of tickets, billing and refunds
{rng.randint(10, 20)}%, login and SSO {rng.randint(8, 15)}% and exports and reports the rest.

3. Actions

Publish a knowledge base article for the top hardware issue, review urgent ticket staffing on
weekends and follow up on every breached enterprise ticket.""",
  )
