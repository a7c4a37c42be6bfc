"""Storefront: the records, state and constants; the service and its tools are in ``tools``."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from compoworld import Record, ServiceState, Table
from compoworld.runtime.fields import Text

OrderStatus = Literal["pending", "paid", "fulfilled", "cancelled", "refunded"]
PaymentMethod = Literal["card", "paypal", "bank_transfer", "gift_card"]
Quantity = Annotated[int, Field(ge=1, le=1000, description="Units ordered (at least 1).")]

#: Sales tax (VAT, GST) by shipping country; others pay DEFAULT_TAX.
TAX_RATES = {
  "USA": 0.08,
  "Canada": 0.13,
  "UK": 0.20,
  "Norway": 0.25,
  "Portugal": 0.23,
  "Japan": 0.10,
  "Australia": 0.10,
}
DEFAULT_TAX = 0.10


class ShippingAddress(BaseModel):
  model_config = ConfigDict(frozen=True, extra="forbid")

  name: str
  address: str
  city: str
  country: str


class Customer(Record):
  name: str
  email: str
  phone: str = ""
  company: str = ""
  address: str
  city: str
  country: str
  accepts_marketing: bool = False
  created_at: datetime


class Product(Record):
  id: str  # the sku
  name: str
  category: str
  price: float
  active: bool = True


class OrderLine(Record):
  id: str  # the sku: a sku appears once per order
  name: str
  quantity: Annotated[int, Field(ge=1)]
  unit_price: float
  line_total: float


class Order(Record):
  reference: str  # the order number, e.g. "#1042"
  customer_id: str
  email: str
  lines: tuple[OrderLine, ...]
  subtotal: float
  discount_code: str | None = None
  discount: float = 0.0
  tax: float
  total: float
  currency: str
  status: OrderStatus = "pending"
  shipping_address: ShippingAddress
  payment_method: PaymentMethod | None = None
  paid_amount: float = 0.0
  refunded_amount: float = 0.0
  tracking_number: str | None = None
  cancel_reason: str = ""
  created_at: datetime
  paid_at: datetime | None = None
  fulfilled_at: datetime | None = None
  cancelled_at: datetime | None = None


class Refund(Record):
  order_id: str
  reference: str
  amount: float
  reason: str
  created_at: datetime


class DiscountCode(Record):
  id: str  # the code, upper case, e.g. "WELCOME10"
  percent: Annotated[int, Field(ge=1, le=100)]
  min_subtotal: float = 0.0
  expires_at: datetime | None = None
  active: bool = True
  times_used: int = 0


class StorefrontState(ServiceState):
  customers: Table[Customer]
  products: Table[Product]
  orders: Table[Order]
  refunds: Table[Refund]
  discount_codes: Table[DiscountCode]


class LineInput(BaseModel):
  model_config = ConfigDict(extra="forbid")

  sku: Text
  quantity: Quantity


MAIL_DOMAINS = ("gmail.com", "outlook.com", "proton.me", "icloud.com", "fastmail.com")
#: (status, share of orders)
STATUS_MIX = (("pending", 5), ("paid", 6), ("fulfilled", 12), ("cancelled", 3), ("refunded", 2))
REFUND_REASONS = ("Item arrived damaged", "Customer changed their mind", "Wrong item shipped")


def _money(x: float) -> float:
  return round(x + 1e-9, 2)


def _priced(lines, percent: int, country: str) -> dict[str, float]:
  subtotal = _money(sum(ln.line_total for ln in lines))
  discount = _money(subtotal * percent / 100)
  tax = _money((subtotal - discount) * TAX_RATES.get(country, DEFAULT_TAX))
  return {
    "subtotal": subtotal,
    "discount": discount,
    "tax": tax,
    "total": _money(subtotal - discount + tax),
  }


def _line(product: Product, quantity: int) -> OrderLine:
  return OrderLine(
    id=product.id,
    name=product.name,
    quantity=quantity,
    unit_price=product.price,
    line_total=_money(product.price * quantity),
  )
