"""Knowledge base: the records, state and constants; the service and its tools are in ``tools``."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Literal

from compoworld import InvalidArgument, Record, ServiceState, Table
from envs.docstore import (
  REFUND_APPROVAL_OVER,
  REFUND_WINDOW_DAYS,
  RESTOCKING_FEE_PCT,
  SNOW_EVENT_ONLINE_CM,
)
from envs.helpdesk import SLA_HOURS

Status = Literal["draft", "published", "archived"]
#: Fewest characters (after trimming) a published article's body may have.
MIN_BODY = 50


class Section(Record):
  name: str
  description: str = ""
  position: int


class Article(Record):
  section_id: str
  title: str
  body: str = ""
  status: Status = "draft"
  author: str
  labels: tuple[str, ...] = ()
  created_at: datetime
  updated_at: datetime
  published_at: datetime | None = None
  helpful: int = 0
  not_helpful: int = 0
  views: int = 0


class Vote(Record):
  id: str  # "<article_id>:<voter email>": one vote per person and article
  article_id: str
  voter: str
  helpful: bool
  created_at: datetime


class KnowledgeBaseState(ServiceState):
  sections: Table[Section]
  articles: Table[Article]
  votes: Table[Vote]


SECTIONS = (
  ("Getting started", "Set up your account, team and support plan."),
  ("Account & security", "Sign-in, SSO, passwords and API keys."),
  ("Billing & refunds", "Invoices, payments and refunds."),
  ("Hardware & devices", "Pairing, firmware and troubleshooting devices."),
  ("Shipping & orders", "Delivery times, tracking and returns."),
  ("Integrations & API", "The REST API, exports and integrations."),
  ("Product updates", "Release notes."),
)
_SLA = ", ".join(f"{p} {h} hours" for p, h in SLA_HOURS.items())
#: One article per "## section | title | labels | status" line, its body on the lines below.
ARTICLES = f"""
## Getting started | Setting up your account | onboarding, admin | published
After signing the order form you receive an invitation email. Follow the link, choose a password
and complete your company profile. Admins can then invite teammates and pair devices from the
admin console.
## Getting started | Inviting teammates | onboarding, users | published
Go to Settings, then Users, then Invite. Enter one email address per line and pick a role (admin,
editor or viewer). Invitations expire after 7 days; resend them from the same page.
## Getting started | Support plans and response times | sla, support | published
Every ticket gets a priority. Resolution targets count from when the ticket is created: {_SLA}.
Support Plan Gold customers get round-the-clock coverage for urgent tickets.
## Getting started | On-site workshops during severe weather | onboarding, weather | published
On-site Onboarding Workshops move online when the forecast shows {SNOW_EVENT_ONLINE_CM} cm of snow
or more, or sleet, on the day. We keep the time and send the meeting link to every attendee at
least 24 hours ahead.
## Getting started | Holiday support hours 2025 | support | archived
Our support team works reduced hours from 24 December to 2 January; urgent tickets are still
answered within the usual targets.
## Account & security | Resetting your password | login, password | published
Click 'Forgot password' on the sign-in page and enter your work email. The reset link is valid for
one hour. If the email does not arrive within 10 minutes, check your spam folder and ask your
admin to confirm your address.
## Account & security | Setting up SSO with your identity provider | sso, login | published
Admins can enable SAML single sign-on under Settings, then Security. Upload your identity
provider's metadata, map the email attribute and test with one user before enforcing SSO for
everyone. New users are provisioned on their first sign-in.
## Account & security | SSO troubleshooting | sso | draft
TODO: add Okta and Azure AD steps.
## Account & security | Rotating API keys | api, security | published
API keys should be rotated every 90 days. Create the new key, update your integrations, then
revoke the old key under Settings, then API. Revoked keys stop working immediately.
## Billing & refunds | Understanding your invoice | billing, invoice | published
Invoices list each order line with its unit price, discount and total. They are payable within 30
days (net 30). Download past invoices as PDF from Billing, then Invoices.
## Billing & refunds | How refunds work | refund, billing | published
You can return products within {REFUND_WINDOW_DAYS} days of delivery. Unopened hardware is
refunded in full; opened hardware carries a {RESTOCKING_FEE_PCT}% restocking fee. Refunds are
issued to the original payment method within 5-7 business days of us receiving the item; refunds
above {REFUND_APPROVAL_OVER:,} need Finance approval first.
## Billing & refunds | Updating payment details | billing | draft
Admins can change the card or bank account on file under Billing, then Payment method. The new
details are used for the next invoice; open invoices keep their original method.
## Hardware & devices | Pairing a device with the admin console | hardware, setup | published
Power the device on and wait for a solid green light. In the admin console open Devices, then Add
device, and enter the serial number from the label. Pairing takes about a minute.
## Hardware & devices | Red light after a firmware update | hardware, firmware | published
A red light after an update means the firmware did not finish installing. Hold the reset button
for 10 seconds to roll back, keep the device powered and retry the update. If the light stays red,
open a ticket and we will replace the device under warranty.
## Shipping & orders | Shipping times and tracking | shipping, tracking | published
Orders placed before 14:00 on a business day ship the same day. Standard delivery takes 3-5
business days. The tracking link is emailed when the order ships and appears on the order.
## Shipping & orders | Returning a product | returns, refund | published
Start a return within {REFUND_WINDOW_DAYS} days of delivery by opening a ticket with your order
number. We email a prepaid label; pack the item in its original box if you can.
## Integrations & API | API rate limits | api | published
Each API key can make 600 requests per minute. Above that the API answers HTTP 429 with a
Retry-After header; wait that many seconds before retrying. Nightly syncs should page through
results instead of requesting everything at once.
## Integrations & API | Exporting reports to CSV | export, reports | published
Open a report and choose Export, then CSV. Exports over 100,000 rows are emailed as a download
link valid for 7 days. Dates are exported in ISO 8601 format.
## Integrations & API | Legacy v1 API | api, deprecated | archived
The v1 API was retired on 1 June 2025. Use the v2 API; see the migration guide for the mapping of
endpoints.
"""


def _articles() -> list[tuple[str, str, tuple[str, ...], str, str]]:
  """The seeded articles as (section, title, labels, status, body)."""
  out = []
  for chunk in ARTICLES.split("\n## ")[1:]:
    head, _, body = chunk.partition("\n")
    section, title, labels, status = (part.strip() for part in head.split("|"))
    out.append((section, title, tuple(labels.split(", ")), status, " ".join(body.split())))
  return out


_LABEL_OK = re.compile(r"^[a-z0-9][a-z0-9_-]*$")


def _labels(values, argument: str = "labels") -> tuple[str, ...]:
  out = []
  for value in values:
    label = "-".join(value.lower().split())
    if not _LABEL_OK.match(label):
      raise InvalidArgument(f"{argument}: label {value!r} must be letters, digits, - or _")
    out.append(label)
  return tuple(dict.fromkeys(out))


def _helpful_pct(a: Article) -> float | None:
  votes = a.helpful + a.not_helpful
  return round(100 * a.helpful / votes, 1) if votes else None
