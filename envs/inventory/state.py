"""Inventory: the records, state and constants; the service and its tools are in ``tools``."""

from __future__ import annotations

import random
from datetime import datetime
from typing import Annotated, Literal

from pydantic import Field

from compoworld import Record, ServiceState, Table

Reason = Literal["receipt", "shipment", "adjustment", "transfer"]
ReservationStatus = Literal["active", "released", "fulfilled"]
Count = Annotated[int, Field(ge=0)]
Quantity = Annotated[int, Field(ge=1, le=100_000, description="A number of units (> 0).")]


class Warehouse(Record):
  id: str  # the warehouse code, e.g. "TOR1"
  name: str
  city: str
  country: str


class Product(Record):
  id: str  # the sku
  name: str
  category: str
  unit_price: float
  weight_kg: float


class StockLevel(Record):
  id: str  # "<sku>@<warehouse code>"
  sku: str
  warehouse: str
  on_hand: Count
  reserved: Count = 0
  reorder_point: Count = 0
  updated_at: datetime


class Movement(Record):
  sku: str
  warehouse: str
  delta: int
  reason: Reason
  reference: str = ""
  note: str = ""
  on_hand_after: Count
  at: datetime


class Reservation(Record):
  sku: str
  warehouse: str
  quantity: Annotated[int, Field(ge=1)]
  order_reference: str
  status: ReservationStatus = "active"
  created_at: datetime
  closed_at: datetime | None = None


class InventoryState(ServiceState):
  warehouses: Table[Warehouse]
  products: Table[Product]
  levels: Table[StockLevel]
  movements: Table[Movement]
  reservations: Table[Reservation]


ADJUSTMENT_NOTES = ("damaged in handling", "cycle count correction", "water damage")


def level_id(sku: str, warehouse: str) -> str:
  return f"{sku}@{warehouse}"


def _order_ref(rng: random.Random) -> str:
  return f"SO-{rng.randint(10000, 99999)}"
