"""Shipping: the records, state and constants; the service and its tools are in ``tools``."""

from __future__ import annotations

import hashlib
from datetime import date, datetime, timedelta
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from compoworld import InvalidArgument, Record, ServiceState, Table
from envs._world import CITIES

Carrier = Literal["FedEx", "UPS", "DHL"]
Level = Literal["ground", "express", "overnight"]
Status = Literal[
  "label_created", "in_transit", "out_for_delivery", "delivered", "exception", "cancelled"
]
Weight = Annotated[float, Field(gt=0, le=70, description="Parcel weight in kg (0-70).")]

CARRIERS: tuple[str, ...] = ("FedEx", "UPS", "DHL")
LEVELS: tuple[str, ...] = ("ground", "express", "overnight")
#: Countries the carriers deliver to (the shared world's countries and a few more).
COUNTRIES = tuple(sorted({c[1] for c in CITIES} | {"Germany", "France", "Mexico", "Ireland"}))
#: Forward order of the normal flow; ``exception`` sits beside in_transit/out_for_delivery.
FLOW = ("label_created", "in_transit", "out_for_delivery", "delivered")
#: Which scans may follow which status.
NEXT: dict[str, tuple[str, ...]] = {
  "label_created": ("in_transit", "exception"),
  "in_transit": ("in_transit", "out_for_delivery", "delivered", "exception"),
  "out_for_delivery": ("delivered", "exception"),
  "exception": ("in_transit", "out_for_delivery", "delivered"),
  "delivered": (),
  "cancelled": (),
}
HOME_COUNTRY = "USA"


class Scan(BaseModel):
  """One carrier scan on a shipment's tracking history."""

  model_config = ConfigDict(frozen=True, extra="forbid")

  time: datetime
  status: Status
  location: str
  description: str


class Rate(Record):
  id: str  # "<carrier>:<service>"
  carrier: Carrier
  service: Level
  base: float
  per_kg: float
  days: int


class Shipment(Record):
  order_reference: str
  recipient_name: str
  address: str
  city: str
  postal_code: str = ""
  country: str
  carrier: Carrier
  service: Level
  weight_kg: float
  price: float
  currency: str
  tracking_number: str
  status: Status = "label_created"
  estimated_delivery: date
  delivered_at: datetime | None = None
  created_at: datetime
  events: tuple[Scan, ...] = ()


class Pickup(Record):
  carrier: Carrier
  date: date
  shipment_ids: tuple[str, ...]
  status: Literal["scheduled", "completed"] = "scheduled"
  created_at: datetime


class ShippingState(ServiceState):
  rates: Table[Rate]
  shipments: Table[Shipment]
  pickups: Table[Pickup]


EXCEPTIONS = (
  "Weather delay at the sorting hub",
  "Recipient not available; a second attempt is scheduled",
  "Address incomplete; the carrier is contacting the recipient",
)


def tracking_number(carrier: str, shipment_id: str) -> str:
  """A carrier-shaped tracking number derived from the shipment id (so it is reproducible)."""
  digits = str(int(hashlib.blake2b(shipment_id.encode(), digest_size=8).hexdigest(), 16))
  if carrier == "UPS":
    return "1Z" + hashlib.blake2b(shipment_id.encode(), digest_size=8).hexdigest().upper()
  return digits[:12] if carrier == "FedEx" else digits[:10]


def _country(value: str) -> str:
  for c in COUNTRIES:
    if c.lower() == value.strip().lower():
      return c
  raise InvalidArgument(f"country '{value}' is not served; countries: {', '.join(COUNTRIES)}")


def _nonblank(**fields: str) -> dict[str, str]:
  for name, value in fields.items():
    if not value.strip():
      raise InvalidArgument(f"{name} must not be blank")
  return {k: v.strip() for k, v in fields.items()}


def _add_business_days(start: date, days: int) -> date:
  out = start
  while days > 0:
    out += timedelta(days=1)
    if out.weekday() < 5:
      days -= 1
  return out
