"""Port tags: the kinds of values tools produce when read and consume when written.

Walks connect services along producer → consumer edges: a step that reads a ``person.email``
from the CRM can feed a step that writes mail to it. Cross-service kinds are listed here;
``<entity>.id`` tags (``ticket.id``) name a service's own record ids and link only its own tools.
"""

from __future__ import annotations

import re

PORTS: dict[str, str] = {
  "person.email": "an email address of a person",
  "person.name": "a person's full name",
  "person.handle": "a user handle on a chat or social service",
  "person.phone": "a phone number",
  "employee.id": "a company employee id such as E1042",
  "company.name": "an organisation's name (customer, vendor, account)",
  "company.domain": "an organisation's web domain",
  "datetime": "a point in time (ISO 8601)",
  "date": "a calendar day (ISO 8601)",
  "duration": "a length of time",
  "money": "an amount of money",
  "currency": "an ISO 4217 currency code",
  "number": "a count or measurement",
  "percentage": "a ratio or rate",
  "location": "a place description or venue",
  "address": "a postal address",
  "city": "a city name",
  "coordinates": "a latitude/longitude pair",
  "url": "a web link (meeting link, file link, tracking page)",
  "text": "free text: a message, a note, a comment",
  "document.text": "the content of a document, page or article",
  "title": "a subject line, title or name of an item",
  "sku": "a product stock-keeping unit",
  "product.name": "a product's name",
  "quantity": "a number of units",
  "status": "a workflow status",
  "priority": "a priority level",
  "department": "a company department",
  "job.title": "a job title or role",
  "weather.condition": "a weather condition (snow, rain, ...)",
  "tracking.number": "a shipment tracking number",
  "reference": "an external reference number (invoice number, PO number, order number)",
  "sql.result": "rows returned by a query",
}

_ID_PORT = re.compile(r"^[a-z][a-z_]*\.id$")


def is_port(tag: str) -> bool:
  return tag in PORTS or bool(_ID_PORT.match(tag))


def is_shared(tag: str) -> bool:
  """Whether a tag can link two different services (ids of a service's own records cannot)."""
  return tag in PORTS


def check_ports(owner: str, tags: tuple[str, ...]) -> None:
  bad = [t for t in tags if not is_port(t)]
  if bad:
    raise TypeError(
      f"{owner}: unknown port tag(s) {bad}; use '<entity>.id' or one of: {', '.join(PORTS)}"
    )
