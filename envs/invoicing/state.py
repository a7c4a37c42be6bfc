"""Invoicing: the records, state and constants; the service and its tools are in ``tools``."""

from __future__ import annotations

from datetime import date, datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from compoworld import Record, ServiceState, Table

InvoiceStatus = Literal["draft", "sent", "partially_paid", "paid", "void"]
Method = Literal["card", "ach", "wire", "check"]
# Money arguments are capped: far beyond any invoice, and the cent arithmetic stays finite.
Amount = Annotated[float, Field(gt=0, le=1e9, description="An amount of money, above zero.")]
UnitPrice = Annotated[float, Field(ge=0, le=1e9)]
Quantity = Annotated[float, Field(gt=0, le=100000)]
TaxRate = Annotated[float, Field(ge=0, le=0.5, description="A tax rate such as 0.08 for 8%.")]

#: Per customer country: billing currency, price-list rate from the home currency (USD), and
#: the typical sales-tax / VAT rate charged.
COUNTRY = {
  "USA": ("USD", 1.0, 0.08),
  "Canada": ("CAD", 1.36, 0.13),
  "Norway": ("NOK", 10.6, 0.25),
  "Portugal": ("EUR", 0.92, 0.23),
  "Japan": ("JPY", 150.0, 0.1),
  "Australia": ("AUD", 1.52, 0.1),
  "UK": ("GBP", 0.79, 0.2),
}
PRICE_LIST_RATE = {cur: rate for cur, rate, _ in COUNTRY.values()}
OPEN = ("sent", "partially_paid")


class Customer(Record):
  name: str
  domain: str
  billing_contact: str
  billing_email: str
  currency: str
  payment_terms_days: int
  tax_rate: float


class Product(Record):
  id: str  # the SKU
  name: str
  category: str
  unit_price: float  # list price in the home currency


class LineItem(Record):
  id: str  # "L1", "L2", ... unique within its invoice
  description: str
  sku: str | None = None
  quantity: Quantity
  unit_price: Annotated[float, Field(ge=0)]
  tax_rate: TaxRate = 0.0
  amount: float  # quantity x unit price, before tax


class Invoice(Record):
  reference: str
  customer_id: str
  currency: str
  status: InvoiceStatus = "draft"
  issue_date: date
  due_date: date
  memo: str = ""
  lines: tuple[LineItem, ...] = ()
  subtotal: float = 0.0
  tax: float = 0.0
  total: float = 0.0
  amount_paid: float = 0.0
  amount_credited: float = 0.0
  amount_due: float = 0.0
  created_at: datetime
  sent_at: datetime | None = None
  paid_at: datetime | None = None
  voided_at: datetime | None = None
  void_reason: str = ""


class Payment(Record):
  invoice_id: str
  customer_id: str
  amount: float
  currency: str
  method: Method
  reference: str = ""
  received_at: datetime


class CreditNote(Record):
  number: str
  invoice_id: str
  customer_id: str
  amount: float
  currency: str
  reason: str
  issued_at: datetime


class InvoicingState(ServiceState):
  customers: Table[Customer]
  products: Table[Product]
  invoices: Table[Invoice]
  payments: Table[Payment]
  credit_notes: Table[CreditNote]
  #: Next INV- and CN- numbers: references are sequential, as in every invoicing product.
  next_invoice_number: int = 1001
  next_credit_number: int = 2001


class LineInput(BaseModel):
  """One line of a new invoice."""

  model_config = ConfigDict(extra="forbid")

  description: str | None = Field(None, description="What is billed; the product name if empty.")
  sku: str | None = Field(None, description="A product SKU; its list price is the default.")
  quantity: Quantity = Field(1.0, description="Number of units.")
  unit_price: UnitPrice | None = Field(None, description="Price per unit.")
  tax_rate: TaxRate | None = Field(None, description="Tax rate; the customer's rate if empty.")


def _r(x: float) -> float:
  """Money rounded to cents (sums go through cents so equal amounts compare equal)."""
  return round(round(x * 100) / 100, 2)


def _totals(lines: tuple[LineItem, ...]) -> tuple[float, float, float]:
  subtotal = _r(sum(li.amount for li in lines))
  tax = _r(sum(_r(li.amount * li.tax_rate) for li in lines))
  return subtotal, tax, _r(subtotal + tax)
