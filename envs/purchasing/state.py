"""Purchasing: the records, state and constants; the service and its tools are in ``tools``."""

from __future__ import annotations

from datetime import date, datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from compoworld import Record, ServiceState, Table
from compoworld.runtime.fields import Text

POStatus = Literal["draft", "submitted", "approved", "partially_received", "received", "cancelled"]
Quantity = Annotated[int, Field(ge=1, le=1_000_000, description="A number of units (> 0).")]
Cost = Annotated[float, Field(ge=0, le=10_000_000, description="A unit cost.")]

#: Orders above this total (in the order's currency) need an approver's sign-off.
APPROVAL_LIMIT = 10_000.0
#: States in which an order commits money to its vendor.
COMMITTED = ("approved", "partially_received", "received")


class Vendor(Record):
  name: str
  domain: str
  category: str
  contact_name: str
  contact_email: str
  contact_phone: str
  payment_terms: str
  currency: str


class Item(Record):
  id: str  # the sku
  name: str
  category: str
  standard_cost: float


class POLine(Record):
  id: str  # the sku: an order has at most one line per sku
  description: str
  quantity: Annotated[int, Field(ge=1)]
  unit_cost: Annotated[float, Field(ge=0)]
  received: Annotated[int, Field(ge=0)] = 0


class PurchaseOrder(Record):
  reference: str  # the PO number, e.g. "PO-10007"
  vendor_id: str
  requester: str
  approver: str | None = None
  lines: tuple[POLine, ...] = ()
  currency: str
  total: float
  status: POStatus = "draft"
  expected_date: date
  notes: str = ""
  created_at: datetime
  submitted_at: datetime | None = None
  approved_at: datetime | None = None
  closed_at: datetime | None = None
  cancel_reason: str = ""


class ReceiptLine(Record):
  id: str  # the sku
  quantity: Annotated[int, Field(ge=1)]


class Receipt(Record):
  po_id: str
  reference: str
  lines: tuple[ReceiptLine, ...]
  received_at: datetime
  note: str = ""


class PurchasingState(ServiceState):
  vendors: Table[Vendor]
  items: Table[Item]
  orders: Table[PurchaseOrder]
  receipts: Table[Receipt]


class LineInput(BaseModel):
  """One line of an order or a receipt, as an argument."""

  model_config = ConfigDict(extra="forbid")

  sku: Text
  quantity: Quantity
  unit_cost: Cost | None = Field(None, description="Unit cost; the item's standard cost if null.")


class ReceiveInput(BaseModel):
  model_config = ConfigDict(extra="forbid")

  sku: Text
  quantity: Quantity


TERMS = ("Net 30", "Net 45", "Net 60", "Net 15")
NOTES = ("Restock ahead of Q2 demand", "Replace damaged stock", "New customer rollout", "")
#: (status, share of orders); every status is drawn at least once for everyday sizes.
STATUS_MIX = (
  ("draft", 3),
  ("submitted", 3),
  ("approved", 5),
  ("partially_received", 3),
  ("received", 8),
  ("cancelled", 2),
)


def _total(lines) -> float:
  return round(sum(ln.quantity * ln.unit_cost for ln in lines), 2)
