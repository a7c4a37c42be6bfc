"""Inventory: a multi-warehouse stock ledger, like the inventory module of NetSuite or Shopify.

Entities: warehouses (a code such as ``TOR1``, a name and a city), products (the home company's
physical catalogue from the shared world, keyed by sku), stock levels (one per sku and warehouse:
``on_hand`` units on the shelf, ``reserved`` units promised to open orders and a
``reorder_point``; ``available = on_hand - reserved``), movements (the append-only ledger: every
change of ``on_hand`` is a movement with a signed ``delta``, a reason ``receipt``, ``shipment``,
``adjustment`` or ``transfer``, a reference such as a PO or sales-order number and a time) and
reservations (units of one sku in one warehouse held for a sales order; ``active`` until they
are ``released`` back to stock or ``fulfilled``, which ships them).

Rules a stock controller expects: quantities are positive; an adjustment cannot make ``on_hand``
negative nor drop it below the reserved units; only available units can be reserved or
transferred; a transfer needs two different warehouses; only an active reservation can be
released or fulfilled; an item is low on stock when its available units are at or below its
reorder point.
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta
from typing import Annotated, Any

from pydantic import Field

from compoworld import Conflict, InvalidArgument, Service, registry, tool
from compoworld.runtime.fields import Text
from compoworld.runtime.query import select, text_matches
from envs._world import CITIES, seeded
from envs.inventory.state import (
  ADJUSTMENT_NOTES,
  InventoryState,
  Movement,
  Product,
  Quantity,
  Reason,
  Reservation,
  ReservationStatus,
  StockLevel,
  Warehouse,
  _order_ref,
  level_id,
)


@registry.register
class InventoryService(Service):
  name = "inventory"
  domain = "operations"
  description = "Stock per warehouse: receive, adjust, transfer, reserve and ship products."
  State = InventoryState

  @classmethod
  def generate(cls, seed: int, size: int | None) -> InventoryState:
    rng, w, state = seeded(cls, seed)
    # Only physical goods are stocked: software seats and services weigh nothing.
    stocked = [p for p in w.products if p.weight_kg > 0]
    target = size if size is not None else 3 * len(stocked)
    skus = stocked if target >= len(stocked) else rng.sample(stocked, max(1, target))
    n_sites = max(1, round(target / len(skus)))
    cities = rng.sample(CITIES, len(CITIES))
    for i in range(n_sites):
      city, country, *_ = cities[i % len(cities)]
      code = f"{city[:3].upper()}{i // len(cities) + 1}"
      suffix = "" if i < len(cities) else f" {i // len(cities) + 1}"
      state.warehouses.insert(
        Warehouse(id=code, name=f"{city} Distribution Centre{suffix}", city=city, country=country)
      )
    for p in skus:
      state.products.insert(
        Product(
          id=p.sku, name=p.name, category=p.category, unit_price=p.unit_price, weight_kg=p.weight_kg
        )
      )
    for wh in state.warehouses.ids():
      for p in skus:
        cls._generate_level(state, rng, p, wh)
    return state

  @staticmethod
  def _generate_level(state: InventoryState, rng: random.Random, p, wh: str) -> None:
    """Simulates ~3 months of receipts and shipments so the ledger sums to ``on_hand``."""
    now = state.now
    base = 20 if p.unit_price > 300 else 60 if p.unit_price > 40 else 150
    reorder = base + 5 * rng.randint(-2, 4)
    balance, at = 0, timedelta(0)  # offsets from the first movement, placed in time below
    moves: list[tuple[int, Reason, str, str, timedelta]] = []
    for step in range(rng.randint(3, 6)):
      at += timedelta(days=rng.randint(4, 14), hours=rng.randint(0, 8))
      if step == 0 or balance < reorder:
        delta = reorder * rng.randint(2, 4)
        moves.append((delta, "receipt", f"PO-{rng.randint(10000, 10999)}", "", at))
      elif rng.random() < 0.12:
        delta = -rng.randint(1, min(3, balance))
        moves.append((delta, "adjustment", "", rng.choice(ADJUSTMENT_NOTES), at))
      else:
        delta = -rng.randint(1, max(1, balance // 2))
        moves.append((delta, "shipment", _order_ref(rng), "", at))
      balance += delta
    # About a quarter of the items are left at or below their reorder point (some at zero),
    # so a low-stock report and the "not enough available" rules have data to bite on; the
    # others were replenished when they ran low, as a stock controller would.
    if rng.random() < 0.25:
      low = rng.choice((0, rng.randint(1, reorder)))
      if balance > low:
        at += timedelta(days=rng.randint(1, 3))
        moves.append((low - balance, "shipment", _order_ref(rng), "", at))
        balance = low
    elif balance <= reorder:
      at += timedelta(days=rng.randint(1, 3))
      delta = reorder * rng.randint(2, 3)
      moves.append((delta, "receipt", f"PO-{rng.randint(10000, 10999)}", "", at))
      balance += delta
    start = now - at - timedelta(hours=rng.randint(2, 96))
    moves = [(d, r, ref, note, start + off) for d, r, ref, note, off in moves]
    running = 0
    for delta, reason, ref, note, when in moves:
      running += delta
      mid = state.new_id("mov")
      state.movements.insert(
        Movement(
          id=mid,
          sku=p.sku,
          warehouse=wh,
          delta=delta,
          reason=reason,
          reference=ref,
          note=note,
          on_hand_after=running,
          at=when,
        )
      )
      if reason == "shipment" and rng.random() < 0.4:
        state.reservations.insert(
          Reservation(
            id=state.new_id("res"),
            sku=p.sku,
            warehouse=wh,
            quantity=-delta,
            order_reference=ref,
            status="fulfilled",
            created_at=when - timedelta(days=rng.randint(1, 4)),
            closed_at=when,
          )
        )
    reserved = 0
    if balance > 0 and rng.random() < 0.4:
      reserved = rng.randint(1, max(1, min(balance, reorder // 2)))
      state.reservations.insert(
        Reservation(
          id=state.new_id("res"),
          sku=p.sku,
          warehouse=wh,
          quantity=reserved,
          order_reference=_order_ref(rng),
          created_at=now - timedelta(days=rng.randint(0, 5), hours=rng.randint(0, 8)),
        )
      )
    if rng.random() < 0.1:
      state.reservations.insert(
        Reservation(
          id=state.new_id("res"),
          sku=p.sku,
          warehouse=wh,
          quantity=rng.randint(1, 10),
          order_reference=_order_ref(rng),
          status="released",
          created_at=now - timedelta(days=rng.randint(6, 20)),
          closed_at=now - timedelta(days=rng.randint(1, 5)),
        )
      )
    state.levels.insert(
      StockLevel(
        id=level_id(p.sku, wh),
        sku=p.sku,
        warehouse=wh,
        on_hand=balance,
        reserved=reserved,
        reorder_point=reorder,
        updated_at=moves[-1][4],
      )
    )

  # --- helpers -----------------------------------------------------------------------------

  def _level(self, sku: str, warehouse: str) -> StockLevel:
    """The level of a known sku in a known warehouse (404 naming whichever is unknown)."""
    self.state.products.get(sku)
    self.state.warehouses.get(warehouse)
    found = self.state.levels.find(level_id(sku, warehouse))
    if found is None:  # a product never stocked there yet: an empty shelf
      found = StockLevel(
        id=level_id(sku, warehouse),
        sku=sku,
        warehouse=warehouse,
        on_hand=0,
        updated_at=self.state.now,
      )
    return found

  def _view(self, level: StockLevel) -> dict[str, Any]:
    return {
      **dict(level),
      "name": self.state.products.get(level.sku).name,
      "available": level.on_hand - level.reserved,
    }

  def _save(self, level: StockLevel, **changes: Any) -> StockLevel:
    changes["updated_at"] = self.state.now
    if level.id not in self.state.levels:
      self.state.levels.insert(level)
    return self.state.levels.update(level.id, **changes)

  def _move(
    self, level: StockLevel, delta: int, reason: Reason, reference: str = "", note: str = ""
  ) -> Movement:
    """Applies ``delta`` to ``on_hand`` and appends the movement to the ledger."""
    new = self._save(level, on_hand=level.on_hand + delta)
    return self.state.movements.insert(
      Movement(
        id=self.state.new_id("mov"),
        sku=level.sku,
        warehouse=level.warehouse,
        delta=delta,
        reason=reason,
        reference=reference,
        note=note,
        on_hand_after=new.on_hand,
        at=self.state.now,
      )
    )

  def _active(self, reservation_id: str) -> Reservation:
    res = self.state.reservations.get(reservation_id)
    if res.status != "active":
      raise Conflict(
        f"reservation '{reservation_id}' is {res.status}; only an active reservation can be "
        "released or fulfilled"
      )
    return res

  # --- reads -------------------------------------------------------------------------------

  @tool(mutates=False, produces=("warehouse.id", "city"))
  def list_warehouses(self) -> list[dict]:
    """List the warehouses with the number of units on hand and reserved in each."""
    out = []
    for wh in self.state.warehouses:
      levels = self.state.levels.filter(lambda lv, code=wh.id: lv.warehouse == code)
      out.append(
        {
          **dict(wh),
          "on_hand": sum(lv.on_hand for lv in levels),
          "reserved": sum(lv.reserved for lv in levels),
        }
      )
    return out

  @tool(mutates=False, page="product", produces=("sku", "product.name", "money", "quantity"))
  def search_products(self, query: str | None = None, category: str | None = None) -> list:
    """Search the stocked products by sku or name, with units on hand and available in all
    warehouses together.

    Args:
      query: words that must all appear in the sku, name or category.
      category: only products of this category (e.g. "Hardware", "Supplies").
    """
    found = []
    for p in sorted(self.state.products, key=lambda p: p.id):
      if category is not None and p.category.lower() != category.lower():
        continue
      if not text_matches(query, p.id, p.name, p.category):
        continue
      levels = self.state.levels.filter(lambda lv, sku=p.id: lv.sku == sku)
      on_hand = sum(lv.on_hand for lv in levels)
      found.append(
        {**dict(p), "on_hand": on_hand, "available": on_hand - sum(lv.reserved for lv in levels)}
      )
    return found

  @tool(mutates=False, consumes=("sku",), produces=("sku", "quantity", "warehouse.id"))
  def get_stock(self, sku: str, warehouse: str | None = None) -> dict:
    """Get the stock of one product: totals plus on_hand, reserved, available and reorder
    point per warehouse.

    Args:
      sku: the product's sku.
      warehouse: only this warehouse (its code, e.g. "TOR1").
    """
    product = self.state.products.get(sku)
    codes = [warehouse] if warehouse is not None else self.state.warehouses.ids()
    levels = [self._view(self._level(sku, code)) for code in codes]
    return {
      "sku": sku,
      "name": product.name,
      "on_hand": sum(lv["on_hand"] for lv in levels),
      "reserved": sum(lv["reserved"] for lv in levels),
      "available": sum(lv["available"] for lv in levels),
      "warehouses": levels,
    }

  @tool(mutates=False, page="movement", produces=("sku", "quantity", "reference", "datetime"))
  def list_movements(
    self,
    sku: str | None = None,
    warehouse: str | None = None,
    reason: Reason | None = None,
    reference: str | None = None,
    since: datetime | None = None,
  ) -> list:
    """List stock movements (the ledger), newest first.

    Args:
      sku: only movements of this sku.
      warehouse: only movements in this warehouse (its code).
      reason: only "receipt", "shipment", "adjustment" or "transfer" movements.
      reference: only movements with this reference (PO or order number).
      since: only movements at or after this time (ISO 8601).
    """
    self.state.products.check(sku)
    self.state.warehouses.check(warehouse)
    return select(
      self.state.movements,
      eq={"sku": sku, "warehouse": warehouse, "reason": reason, "reference": reference},
      ge={"at": since},
      key=lambda m: (m.at, m.id),
      reverse=True,
    )

  @tool(
    mutates=False, page="reservation", produces=("reservation.id", "sku", "quantity", "reference")
  )
  def list_reservations(
    self,
    status: ReservationStatus | None = "active",
    sku: str | None = None,
    warehouse: str | None = None,
    order_reference: str | None = None,
  ) -> list:
    """List reservations, newest first (active ones by default).

    Args:
      status: only "active", "released" or "fulfilled" reservations; null for all.
      sku: only reservations of this sku.
      warehouse: only reservations in this warehouse (its code).
      order_reference: only reservations for this order number.
    """
    return select(
      self.state.reservations,
      eq={"status": status, "sku": sku, "warehouse": warehouse, "order_reference": order_reference},
      key=lambda r: (r.created_at, r.id),
      reverse=True,
    )

  @tool(mutates=False, page="item", produces=("sku", "quantity", "warehouse.id"))
  def low_stock_report(self, warehouse: str | None = None) -> list:
    """List the items whose available units are at or below their reorder point, the worst
    first, with a suggested quantity to reorder (enough to reach twice the reorder point).

    Args:
      warehouse: only this warehouse (its code).
    """
    self.state.warehouses.check(warehouse)
    rows = []
    for lv in self.state.levels:
      available = lv.on_hand - lv.reserved
      if (warehouse is None or lv.warehouse == warehouse) and available <= lv.reorder_point:
        row = self._view(lv)
        row["shortfall"] = lv.reorder_point - available
        row["suggested_order"] = max(2 * lv.reorder_point - available, 1)
        rows.append(row)
    rows.sort(key=lambda r: (-r["shortfall"], r["id"]))
    return rows

  # --- writes ------------------------------------------------------------------------------

  @tool(mutates=True, consumes=("sku", "quantity", "reference"), produces=("movement.id",))
  def receive_stock(
    self, sku: str, warehouse: str, quantity: Quantity, reference: str = ""
  ) -> Movement:
    """Receive units into a warehouse (e.g. goods delivered against a purchase order).

    Args:
      sku: the product's sku.
      warehouse: the receiving warehouse's code.
      quantity: units received (> 0).
      reference: the PO or delivery note number.
    """
    return self._move(self._level(sku, warehouse), quantity, "receipt", reference)

  @tool(mutates=True, consumes=("sku", "quantity", "text"), produces=("movement.id",))
  def adjust_stock(self, sku: str, warehouse: str, delta: int, note: Text) -> Movement:
    """Correct the units on hand after a count, damage or loss (a signed change).

    Args:
      sku: the product's sku.
      warehouse: the warehouse's code.
      delta: units to add (positive) or remove (negative); not zero.
      note: why the stock changed (e.g. "damaged in handling").
    """
    if delta == 0:
      raise InvalidArgument("delta must be a non-zero number of units")
    level = self._level(sku, warehouse)
    if level.on_hand + delta < 0:
      raise Conflict(
        f"adjusting {sku} in {warehouse} by {delta} would make on_hand negative: only "
        f"{level.on_hand} on hand, so the largest decrease allowed is {level.on_hand}"
      )
    if level.on_hand + delta < level.reserved:
      raise Conflict(
        f"adjusting {sku} in {warehouse} by {delta} would leave fewer units than the "
        f"{level.reserved} reserved; release a reservation first or decrease by at most "
        f"{level.on_hand - level.reserved}"
      )
    return self._move(level, delta, "adjustment", note=note)

  @tool(mutates=True, consumes=("sku", "quantity", "warehouse.id"))
  def transfer_stock(
    self,
    sku: str,
    from_warehouse: str,
    to_warehouse: str,
    quantity: Quantity,
    reference: str = "",
  ) -> dict:
    """Move available units of a product from one warehouse to another.

    Args:
      sku: the product's sku.
      from_warehouse: the code of the warehouse the units leave.
      to_warehouse: the code of the warehouse the units arrive at (a different one).
      quantity: units to move (> 0).
      reference: a transfer order number; one is made up when empty.
    """
    if from_warehouse == to_warehouse:
      raise InvalidArgument(
        f"from_warehouse and to_warehouse are both '{from_warehouse}'; a transfer needs two "
        "different warehouses"
      )
    source, dest = self._level(sku, from_warehouse), self._level(sku, to_warehouse)
    available = source.on_hand - source.reserved
    if quantity > available:
      raise Conflict(
        f"cannot transfer {quantity} of {sku} from {from_warehouse}: only {available} available "
        f"({source.on_hand} on hand, {source.reserved} reserved)"
      )
    ref = reference or self.state.new_id("tr")
    out = self._move(source, -quantity, "transfer", ref, f"to {to_warehouse}")
    into = self._move(dest, quantity, "transfer", ref, f"from {from_warehouse}")
    return {
      "reference": ref,
      "movements": [out, into],
      "from": self._view(self.state.levels.get(source.id)),
      "to": self._view(self.state.levels.get(dest.id)),
    }

  @tool(mutates=True, consumes=("sku", "quantity", "reference"), produces=("reservation.id",))
  def reserve_stock(
    self, sku: str, warehouse: str, quantity: Quantity, order_reference: Text
  ) -> Reservation:
    """Hold available units of a product in a warehouse for a sales order.

    Args:
      sku: the product's sku.
      warehouse: the warehouse's code.
      quantity: units to hold (> 0).
      order_reference: the sales order number the units are held for.
    """
    level = self._level(sku, warehouse)
    available = level.on_hand - level.reserved
    if quantity > available:
      raise Conflict(
        f"cannot reserve {quantity} of {sku} in {warehouse}: only {available} available "
        f"({level.on_hand} on hand, {level.reserved} reserved)"
      )
    self._save(level, reserved=level.reserved + quantity)
    return self.state.reservations.insert(
      Reservation(
        id=self.state.new_id("res"),
        sku=sku,
        warehouse=warehouse,
        quantity=quantity,
        order_reference=order_reference,
        created_at=self.state.now,
      )
    )

  @tool(mutates=True, consumes=("reservation.id",))
  def release_reservation(self, reservation_id: str) -> Reservation:
    """Release an active reservation: its units become available again.

    Args:
      reservation_id: the reservation's id.
    """
    res = self._active(reservation_id)
    level = self.state.levels.get(level_id(res.sku, res.warehouse))
    self._save(level, reserved=level.reserved - res.quantity)
    return self.state.reservations.update(
      reservation_id, status="released", closed_at=self.state.now
    )

  @tool(mutates=True, consumes=("reservation.id",), produces=("movement.id",))
  def fulfill_reservation(self, reservation_id: str) -> dict:
    """Ship an active reservation: its units leave the warehouse (a shipment movement under
    the order number).

    Args:
      reservation_id: the reservation's id.
    """
    res = self._active(reservation_id)
    level = self.state.levels.get(level_id(res.sku, res.warehouse))
    level = self._save(level, reserved=level.reserved - res.quantity)
    movement = self._move(level, -res.quantity, "shipment", res.order_reference)
    done = self.state.reservations.update(
      reservation_id, status="fulfilled", closed_at=self.state.now
    )
    return {"reservation": done, "movement": movement}

  @tool(mutates=True, consumes=("sku", "quantity"))
  def set_reorder_point(
    self, sku: str, warehouse: str, reorder_point: Annotated[int, Field(ge=0, le=100_000)]
  ) -> dict:
    """Set the level at or below which an item shows on the low-stock report.

    Args:
      sku: the product's sku.
      warehouse: the warehouse's code.
      reorder_point: the new reorder point (0 or more units).
    """
    level = self._level(sku, warehouse)
    return self._view(self._save(level, reorder_point=reorder_point))
