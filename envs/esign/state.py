"""E-sign: the records, state and constants; the service and its tools are in ``tools``."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Annotated, Literal

from pydantic import BaseModel, Field

from compoworld import Record, ServiceState, Table
from compoworld.runtime.fields import Email, Text

EnvelopeStatus = Literal["draft", "sent", "completed", "declined", "voided"]
SignerStatus = Literal["pending", "sent", "signed", "declined"]
RoutingOrder = Annotated[int, Field(ge=1, le=20, description="Signing order, 1-20.")]
#: The least time between two reminders for one envelope.
REMINDER_GAP = timedelta(hours=24)


class Signer(Record):
  id: str  # the signer's email, lower case
  name: str
  role: str = "Signer"
  routing_order: int = 1
  status: SignerStatus = "pending"
  signed_at: datetime | None = None
  decline_reason: str | None = None


class TemplateRole(Record):
  id: str  # the role name, e.g. "Customer"
  routing_order: int
  default_email: str | None = None
  default_name: str | None = None


class Template(Record):
  name: str
  description: str
  document: str  # "[[Role]]" marks where a role's signer is named
  roles: tuple[TemplateRole, ...]
  owner: str
  created_at: datetime


class Envelope(Record):
  title: str
  document: str
  template_id: str | None = None
  sender: str
  message: str = ""
  status: EnvelopeStatus = "draft"
  signers: tuple[Signer, ...] = ()
  created_at: datetime
  sent_at: datetime | None = None
  completed_at: datetime | None = None
  voided_at: datetime | None = None
  void_reason: str | None = None
  reminders_sent: int = 0
  last_reminder_at: datetime | None = None


class EsignState(ServiceState):
  templates: Table[Template]
  envelopes: Table[Envelope]


class RoleSigner(BaseModel):
  """Who fills one template role."""

  role: str = Field(description="The template role's name, e.g. 'Customer'.")
  email: Email = Field(description="The signer's email address.")
  name: Text = Field(description="The signer's full name.")


def _fill(document: str, signers: tuple[Signer, ...]) -> str:
  for s in signers:
    document = document.replace(f"[[{s.role}]]", f"{s.name} <{s.id}>")
  return document


def _current(signers: tuple[Signer, ...]) -> list[Signer]:
  """The signers whose turn it is (status "sent")."""
  return [s for s in signers if s.status == "sent"]


def _route(signers: tuple[Signer, ...]) -> tuple[Signer, ...]:
  """Sends the envelope to the lowest routing order not yet fully signed."""
  waiting = [s.routing_order for s in signers if s.status != "signed"]
  if not waiting or any(s.status == "sent" for s in signers):
    return signers
  turn = min(waiting)
  return tuple(
    s.with_changes(status="sent") if s.routing_order == turn and s.status == "pending" else s
    for s in signers
  )


#: (name, description, roles as (role, routing order, department of the default signer or
#: None when the role is filled per envelope)).
TEMPLATES = (
  (
    "Mutual NDA",
    "Two-way non-disclosure agreement for early conversations.",
    (("Counterparty", 1, None), ("Company signer", 2, "Finance")),
  ),
  (
    "Order Form",
    "Order for products under the master agreement.",
    (("Customer", 1, None), ("Sales approver", 2, "Sales")),
  ),
  (
    "Master Services Agreement",
    "Master agreement governing all orders.",
    (("Customer", 1, None), ("Executive", 2, "CEO")),
  ),
  (
    "Statement of Work",
    "Scope, milestones and fees of a services engagement.",
    (("Customer", 1, None), ("Delivery lead", 1, "Operations")),
  ),
  (
    "Vendor Agreement",
    "Terms for a new supplier.",
    (("Vendor", 1, None), ("Finance approver", 2, "Finance")),
  ),
  (
    "Offer Letter",
    "Employment offer for a new hire.",
    (("Hiring manager", 1, "People"), ("Candidate", 2, None)),
  ),
)
TERMS = {
  "Mutual NDA": "Each party keeps the other's confidential information secret for 3 years.",
  "Order Form": "Products and fees as listed below; payment due 30 days from invoice.",
  "Master Services Agreement": "Governs all orders; 12-month term renewing yearly.",
  "Statement of Work": "Onboarding services delivered in three milestones.",
  "Vendor Agreement": "Supplier delivers within 14 days; net-45 payment terms.",
  "Offer Letter": "Base salary, start date and benefits as set out below.",
}


def _template_document(company: str, name: str, roles) -> str:
  party = next(role for role, _, default in roles if default is None)
  signatures = ", ".join(f"[[{role}]]" for role, _, _ in roles)
  return f"{name}\n\nBetween {company} and [[{party}]].\n\n{TERMS[name]}\n\nSigned: {signatures}"
