"""Docstore: a document store of manuals, policies, contracts and reports read as PDF-like pages.

Each document has a title, a category (manual, policy, contract, report), an owner, tags and
its text split into pages of about ``PAGE_CHARS`` characters (at paragraph, else word,
boundaries). Lines such as "3. Per-diem rates" or "# Setup" are headings: they make the
document's outline. Readers search the full text (hits are pages, ranked by how many query
words they contain), read a page, annotate a page (optionally highlighting a passage of it)
and bookmark pages.

The seeded policies are the company's source of truth that other services' tasks rely on:
travel per diems per city (``PER_DIEM``) and the receipt threshold, the refund window, the
security incident severities, the support SLA targets (the helpdesk's ``SLA_HOURS``) and the
severe weather rules (offices close at ``SNOW_CLOSURE_CM`` of forecast snow; in-person events
move online at ``SNOW_EVENT_ONLINE_CM``). Rules a document-store user expects: a page outside a
document's range does not exist (the error names the range), a highlight must be text on that
page, only an annotation's author can delete it, a tag is added once, a title is unique within
its category, and a page is bookmarked once per person.
"""

from __future__ import annotations

import random
import re
from datetime import datetime, timedelta
from typing import Annotated, Literal

from pydantic import Field

from compoworld import (
  Conflict,
  InvalidArgument,
  NotFound,
  Record,
  Service,
  ServiceState,
  Table,
  registry,
  tool,
)
from compoworld.fields import Email, Limit, Offset, Text
from compoworld.query import paginate, text_matches
from envs._world import CITIES, DEPARTMENTS, world
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


@registry.register
class DocstoreService(Service):
  name = "docstore"
  domain = "knowledge_search"
  description = "Paged manuals, policies, contracts and reports: search, read, annotate."
  State = DocstoreState

  @classmethod
  def generate(cls, seed: int, size: int | None) -> DocstoreState:
    rng, w = random.Random(f"{cls.name}:{seed}"), world(seed)
    state = DocstoreState(seed=seed, documents={}, pages={}, annotations={}, bookmarks={})
    found = {p.department: p.email for p in w.people if p.title == f"Head of {p.department}"}
    heads = {d: found.get(d, w.people[1].email) for d in DEPARTMENTS}  # else the CEO owns it
    docs = _policies(w, heads)
    docs += [_manual(p, rng) for p in w.products if p.category == "Hardware"]
    docs.append(_report("Support Quarterly Report Q4 2025", ("support", "quarterly"), rng))
    for c in w.customers:
      docs.append(_contract(c, w, rng, state.now.date() - timedelta(days=rng.randint(30, 330))))
    total = size if size is not None else 20
    for k in range(1, total - len(docs) + 1):  # larger stores: one report per past month
      y, m = divmod(state.now.year * 12 + state.now.month - 1 - k, 12)
      title = f"Monthly Support Report - {datetime(y, m + 1, 1):%B %Y}"
      docs.append(_report(title, ("support", "monthly"), rng))
    for title, category, department, tags, text in docs[:total]:
      created = state.now - timedelta(days=rng.randint(20, 700), hours=rng.randint(0, 9))
      cls._add(state, title, category, heads[department], tags, _prose(text), created)
    cls._generate_notes(state, rng, w)
    return state

  @staticmethod
  def _add(state, title, category, owner, tags, text, created, updated=None) -> Document:
    did = state.new_id("doc")
    pages = split_pages(text)
    for n, body in enumerate(pages, 1):
      state.pages.insert(Page(id=f"{did}/p{n}", document_id=did, number=n, text=body))
    return state.documents.insert(
      Document(
        id=did,
        title=title,
        category=category,
        owner=owner,
        tags=tags,
        page_count=len(pages),
        created_at=created,
        updated_at=updated or created,
      )
    )

  @staticmethod
  def _generate_notes(state: DocstoreState, rng: random.Random, w) -> None:
    me, others = w.people[0].email, [p.email for p in w.people[1:8]]
    docs = sorted(state.documents, key=lambda d: d.id)
    notes = ("Check this with Finance.", "Important for the Q2 review.", "Outdated? Ask the owner.")
    for i in range(min(8, len(docs) * 2)):
      doc = rng.choice(docs)
      page = state.pages.get(f"{doc.id}/p{rng.randint(1, doc.page_count)}")
      words = page.text.split()
      at = rng.randrange(max(1, len(words) - 5))
      state.annotations.insert(
        Annotation(
          id=state.new_id("ann"),
          document_id=doc.id,
          page=page.number,
          author=me if i % 3 == 0 else rng.choice(others),
          text=rng.choice(notes),
          highlight=" ".join(words[at : at + 4]) if i % 2 == 0 else "",
          created_at=state.now - timedelta(days=rng.randint(1, _age(state, doc))),
        )
      )
    for doc in rng.sample(docs, min(3, len(docs))):
      state.bookmarks.insert(
        Bookmark(
          id=state.new_id("bm"),
          document_id=doc.id,
          page=1,
          owner=me,
          label=doc.title,
          created_at=state.now - timedelta(days=rng.randint(1, _age(state, doc))),
        )
      )

  # --- helpers -----------------------------------------------------------------------------

  @property
  def user(self) -> str:
    """The email of the reader the agent works for."""
    return world(self.state.seed).people[0].email

  def _page(self, document_id: str, number: int) -> Page:
    doc = self.state.documents.get(document_id)
    if not 1 <= number <= doc.page_count:
      raise NotFound(
        f"page {number} not found: document '{document_id}' has pages 1-{doc.page_count}"
      )
    return self.state.pages.get(f"{document_id}/p{number}")

  def _describe(self, document_id: str) -> dict:
    doc = self.state.documents.get(document_id)
    outline = [
      {"page": n, "heading": h}
      for n in range(1, doc.page_count + 1)
      for h in headings(self.state.pages.get(f"{document_id}/p{n}").text)
    ]
    notes = sum(1 for a in self.state.annotations if a.document_id == document_id)
    return {**dict(doc), "outline": outline, "annotations": notes}

  # --- reads -------------------------------------------------------------------------------

  @tool(mutates=False, produces=("document.id", "title", "person.email"))
  def list_documents(
    self,
    query: str | None = None,
    category: Category | None = None,
    tag: str | None = None,
    owner: Email | None = None,
    limit: Limit = 20,
    offset: Offset = 0,
  ) -> dict:
    """List documents by title (metadata only; use read_page for the text).

    Args:
      query: words that must all appear in the title or tags.
      category: only this category: manual, policy, contract or report.
      tag: only documents with this tag.
      owner: only documents owned by this email address.
      limit: page size (1-100).
      offset: index of the first document to return.
    """
    found = sorted(
      (
        d
        for d in self.state.documents
        if (category is None or d.category == category)
        and (tag is None or _tag(tag) in d.tags)
        and (owner is None or d.owner == owner.lower())
        and text_matches(query, d.title, " ".join(d.tags))
      ),
      key=lambda d: (d.title.lower(), d.id),
    )
    return paginate(found, limit, offset)

  @tool(mutates=False, produces=("document.id", "document.text", "number"))
  def search_documents(
    self,
    query: Text,
    category: Category | None = None,
    tag: str | None = None,
    limit: Limit = 10,
    offset: Offset = 0,
  ) -> dict:
    """Full-text search over every page; hits are pages ranked by how many of the query's
    words they contain (then by how often), each with a snippet around its rarest word.

    Args:
      query: the words to look for (common words such as "the" are ignored).
      category: only documents of this category.
      tag: only documents with this tag.
      limit: page size (1-100).
      offset: index of the first hit to return.
    """
    words = [t for t in _WORD.findall(query.lower()) if t not in STOPWORDS]
    if not words:
      raise InvalidArgument(f"query: {query!r} has no searchable words")
    docs = {
      d.id: d
      for d in self.state.documents
      if (category is None or d.category == category) and (tag is None or _tag(tag) in d.tags)
    }
    # Words match at word starts ("snow" finds "snowfall", "cm" does not find "acme").
    patterns = [re.compile(rf"\b{re.escape(word)}") for word in words]
    hits = []
    for page in self.state.pages:
      doc = docs.get(page.document_id)
      if doc is None:
        continue
      flat = " ".join(page.text.split())
      found = [[m.start() for m in p.finditer(flat.lower())] for p in patterns]
      found = [f for f in found if f]
      if found:
        rarest = min(found, key=len)  # the most specific word anchors the snippet
        rank = (-len(found), -sum(map(len, found)), doc.title, page.number)
        hits.append((rank, doc, page, len(found), snippet(flat, rarest[0])))
    hits.sort(key=lambda h: h[0])
    items = [
      {
        "document_id": doc.id,
        "title": doc.title,
        "category": doc.category,
        "page": page.number,
        "words_matched": matched,
        "snippet": text,
      }
      for _, doc, page, matched, text in hits
    ]
    return paginate(items, limit, offset)

  @tool(
    mutates=False,
    consumes=("document.id",),
    produces=("document.id", "title", "person.email", "number"),
  )
  def get_document(self, document_id: str) -> dict:
    """Get a document's metadata and outline: the headings found on each page.

    Args:
      document_id: the document's id.
    """
    return self._describe(document_id)

  @tool(mutates=False, consumes=("document.id",), produces=("document.text",))
  def read_page(self, document_id: str, page: PageNumber = 1) -> dict:
    """Read the text of one page of a document.

    Args:
      document_id: the document's id.
      page: the page number (1 to the document's page_count).
    """
    p = self._page(document_id, page)
    doc = self.state.documents.get(document_id)
    return {
      "document_id": doc.id,
      "title": doc.title,
      "page": p.number,
      "page_count": doc.page_count,
      "text": p.text,
    }

  @tool(mutates=False, consumes=("document.id",), produces=("annotation.id", "text"))
  def list_annotations(
    self,
    document_id: str | None = None,
    author: Email | None = None,
    limit: Limit = 20,
    offset: Offset = 0,
  ) -> dict:
    """List annotations in document and page order.

    Args:
      document_id: only annotations of this document.
      author: only annotations written by this email address.
      limit: page size (1-100).
      offset: index of the first annotation to return.
    """
    if document_id is not None:
      self.state.documents.get(document_id)
    found = sorted(
      (
        a
        for a in self.state.annotations
        if (document_id is None or a.document_id == document_id)
        and (author is None or a.author == author.lower())
      ),
      key=lambda a: (a.document_id, a.page, a.created_at, a.id),
    )
    return paginate(found, limit, offset)

  @tool(mutates=False, produces=("bookmark.id", "document.id"))
  def list_bookmarks(self) -> list[dict]:
    """List your bookmarks with the titles of their documents, newest first."""
    mine = sorted(
      (b for b in self.state.bookmarks if b.owner == self.user),
      key=lambda b: (b.created_at, b.id),
      reverse=True,
    )
    return [{**dict(b), "title": self.state.documents.get(b.document_id).title} for b in mine]

  # --- writes ------------------------------------------------------------------------------

  @tool(mutates=True, consumes=("document.id", "text"), produces=("annotation.id",))
  def add_annotation(
    self, document_id: str, page: PageNumber, text: Text, highlight: str = ""
  ) -> Annotation:
    """Annotate a page of a document, optionally highlighting a passage of that page.

    Args:
      document_id: the document's id.
      page: the page number.
      text: the note.
      highlight: a passage copied from the page to highlight (matched ignoring case and
        spacing); empty for none.
    """
    p = self._page(document_id, page)
    passage = " ".join(highlight.split())
    if passage and passage.lower() not in " ".join(p.text.split()).lower():
      raise Conflict(
        f"highlight {passage[:60]!r} does not occur on page {page} of '{document_id}'; "
        "copy a passage from that page"
      )
    return self.state.annotations.insert(
      Annotation(
        id=self.state.new_id("ann"),
        document_id=document_id,
        page=page,
        author=self.user,
        text=text,
        highlight=passage,
        created_at=self.state.now,
      )
    )

  @tool(mutates=True, consumes=("annotation.id",))
  def delete_annotation(self, annotation_id: str) -> dict:
    """Delete one of your annotations.

    Args:
      annotation_id: the annotation's id.
    """
    note = self.state.annotations.get(annotation_id)
    if note.author != self.user:
      raise Conflict(
        f"annotation '{annotation_id}' was written by {note.author}; you can only delete your own"
      )
    self.state.annotations.delete(annotation_id)
    return {"deleted": annotation_id}

  @tool(mutates=True, consumes=("document.id",))
  def add_tag(self, document_id: str, tag: Text) -> Document:
    """Add a tag to a document (lower-cased; spaces become hyphens).

    Args:
      document_id: the document's id.
      tag: the tag.
    """
    doc = self.state.documents.get(document_id)
    value = _tag(tag)
    if not value:
      raise InvalidArgument("tag: give a non-blank tag")
    if value in doc.tags:
      raise Conflict(f"document '{document_id}' is already tagged '{value}'")
    return self.state.documents.update(
      document_id, tags=(*doc.tags, value), updated_at=self.state.now
    )

  @tool(mutates=True, consumes=("title", "document.text"), produces=("document.id",))
  def upload_document(
    self, title: Text, category: Category, text: Text, tags: list[str] = ()
  ) -> dict:
    """Upload a document you own; its text is split into pages of about 1200 characters
    (blank lines separate paragraphs; lines like "2. Scope" or "# Scope" are headings).

    Args:
      title: the title, unique within its category.
      category: manual, policy, contract or report.
      text: the full text.
      tags: tags to set (lower-cased; spaces become hyphens).
    """
    title = title.strip()
    if not title:
      raise InvalidArgument("title: the title is blank")
    clash = next(
      (
        d
        for d in self.state.documents
        if d.category == category and d.title.lower() == title.lower()
      ),
      None,
    )
    if clash is not None:
      raise Conflict(f"a {category} titled '{clash.title}' already exists ({clash.id})")
    if not text.strip():
      raise InvalidArgument("text: the document is blank")
    clean = tuple(dict.fromkeys(v for v in map(_tag, tags) if v))
    doc = self._add(self.state, title, category, self.user, clean, text, self.state.now)
    return self._describe(doc.id)

  @tool(mutates=True, consumes=("document.id",), produces=("bookmark.id",))
  def bookmark_page(self, document_id: str, page: PageNumber, label: str = "") -> Bookmark:
    """Bookmark a page of a document for yourself.

    Args:
      document_id: the document's id.
      page: the page number.
      label: a short label (default: the document title and page).
    """
    self._page(document_id, page)
    if any(
      b.document_id == document_id and b.page == page and b.owner == self.user
      for b in self.state.bookmarks
    ):
      raise Conflict(f"page {page} of '{document_id}' is already bookmarked")
    title = self.state.documents.get(document_id).title
    return self.state.bookmarks.insert(
      Bookmark(
        id=self.state.new_id("bm"),
        document_id=document_id,
        page=page,
        owner=self.user,
        label=label or f"{title}, page {page}",
        created_at=self.state.now,
      )
    )
