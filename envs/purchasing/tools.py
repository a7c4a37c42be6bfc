"""Purchasing: purchase orders to vendors, like the procurement module of NetSuite or Coupa.

Entities: vendors (the shared world's suppliers, with a contact, payment terms and currency),
catalogue items (the world's products the company buys, keyed by sku, with a standard cost),
purchase orders (a PO number as ``reference``, a vendor, a requester, lines of sku, quantity,
unit cost and quantity received so far, a currency, a total, an expected delivery date and an
approver) and receipts (goods received against a PO: which lines, how many units, when).

Workflow: ``draft`` → ``submitted`` → ``approved`` → ``partially_received`` → ``received``, or
``cancelled``. Rules a buyer expects: lines can be added or removed only while the order is a
draft; an order is submitted only with at least one line; an order of at most 10,000 (in its
currency) is approved on submission, a larger one waits in ``submitted`` for an approver, who
must be an employee other than the requester; only approved orders are received, and never more
units than were ordered minus those already received; an order with goods received cannot be
cancelled; the expected date cannot be in the past.
"""

from __future__ import annotations

import random
from datetime import date, datetime, timedelta

from compoworld import Conflict, InvalidArgument, NotFound, Service, registry, tool
from compoworld.runtime.fields import Email, Text
from compoworld.runtime.query import select
from envs._world import WorldUser, employee_email, seeded
from envs.purchasing.state import (
  APPROVAL_LIMIT,
  COMMITTED,
  NOTES,
  STATUS_MIX,
  TERMS,
  Cost,
  Item,
  LineInput,
  POLine,
  POStatus,
  PurchaseOrder,
  PurchasingState,
  Quantity,
  Receipt,
  ReceiptLine,
  ReceiveInput,
  Vendor,
  _total,
)


@registry.register
class PurchasingService(WorldUser, Service):
  name = "purchasing"
  domain = "operations"
  description = "Purchase orders to vendors: draft, submit, approve, receive goods, track spend."
  State = PurchasingState

  @classmethod
  def generate(cls, seed: int, size: int | None) -> PurchasingState:
    rng, w, state = seeded(cls, seed)
    now = state.now
    for v in w.vendors:
      state.vendors.insert(
        Vendor(
          id=state.new_id("ven"),
          name=v.name,
          domain=v.domain,
          category=v.category,
          contact_name=v.contact.name,
          contact_email=v.contact.email,
          contact_phone=v.contact.phone,
          payment_terms=rng.choice(TERMS),
          currency=w.currency,
        )
      )
    # Services (support plans, workshops) are sold, not bought.
    for p in w.products:
      if p.category != "Services":
        cost = round(p.unit_price * rng.uniform(0.5, 0.7), 2)
        state.items.insert(Item(id=p.sku, name=p.name, category=p.category, standard_cost=cost))
    suppliers = [(v, [i for i in state.items if i.category == v.category]) for v in state.vendors]
    suppliers = [(v, items) for v, items in suppliers if items]
    requesters = [p for p in w.people if p.department in ("Operations", "Engineering")]
    requesters = [w.people[0], *requesters]
    statuses = [s for s, n in STATUS_MIX for _ in range(n)]
    n = size if size is not None else 24
    picked = (statuses * (n // len(statuses) + 1))[:n]
    rng.shuffle(picked)
    for i, status in enumerate(picked):
      vendor, items = rng.choice(suppliers)
      requester = rng.choice(requesters)
      lines = []
      for item in rng.sample(items, rng.randint(1, min(3, len(items)))):
        if item.standard_cost > 300:
          qty = rng.randint(2, 20) * 5
        elif item.standard_cost > 30:
          qty = rng.randint(2, 30) * 10
        else:
          qty = rng.randint(5, 60) * 10
        lines.append(
          POLine(id=item.id, description=item.name, quantity=qty, unit_cost=item.standard_cost)
        )
      if status == "submitted":  # only orders above the limit wait for an approver
        while _total(lines) <= APPROVAL_LIMIT:
          lines[0] = lines[0].with_changes(quantity=lines[0].quantity * 2)
      age = {"draft": 4, "submitted": 6, "approved": 15, "cancelled": 30}.get(status, 60)
      created = now - timedelta(days=rng.randint(1, age), hours=rng.randint(0, 8))
      if status in ("received", "partially_received"):
        created -= timedelta(days=10)
      expected = (created + timedelta(days=rng.randint(7, 21))).date()
      if status in ("draft", "submitted", "approved"):
        expected = max(expected, now.date() + timedelta(days=rng.randint(3, 10)))
      total = _total(lines)
      approver = None
      if total > APPROVAL_LIMIT and status not in ("draft", "submitted"):
        approver = requester.manager_email or w.people[2].email
      submitted = created + timedelta(hours=rng.randint(1, 30)) if status != "draft" else None
      if status == "cancelled" and rng.random() < 0.5:
        submitted = None
      approved_at = None
      if submitted and status in COMMITTED:  # small orders are approved on submission
        approved_at = submitted + timedelta(hours=rng.randint(1, 48) if approver else 0)
      po = PurchaseOrder(
        id=state.new_id("po"),
        reference=f"PO-{10001 + i}",
        vendor_id=vendor.id,
        requester=requester.email,
        approver=approver,
        lines=tuple(lines),
        currency=vendor.currency,
        total=total,
        status=status,
        expected_date=expected,
        notes=rng.choice(NOTES),
        created_at=created,
        submitted_at=submitted,
        approved_at=approved_at,
        cancel_reason="Vendor could not meet the delivery date" if status == "cancelled" else "",
      )
      if status in ("received", "partially_received"):
        po = cls._generate_receipts(state, rng, po)
      if status == "cancelled":
        po = po.with_changes(closed_at=created + timedelta(days=rng.randint(1, 5)))
      state.orders.insert(po)
    return state

  @staticmethod
  def _generate_receipts(state: PurchasingState, rng: random.Random, po: PurchaseOrder):
    """One or two deliveries: everything for a received order, part of it otherwise."""
    full = po.status == "received"
    at = datetime.combine(po.expected_date, datetime.min.time()) + timedelta(hours=10)
    at = min(at, state.now - timedelta(days=1))
    got = {ln.id: (ln.quantity if full else rng.randint(0, ln.quantity - 1)) for ln in po.lines}
    if not full and not any(got.values()):
      first = po.lines[0]
      got[first.id] = max(1, first.quantity // 2)
    parts = [got]
    if full and rng.random() < 0.4:  # delivered in two drops
      early = {k: q // 2 for k, q in got.items()}
      parts = [early, {k: q - early[k] for k, q in got.items()}]
    for j, part in enumerate(parts):
      lines = tuple(ReceiptLine(id=k, quantity=q) for k, q in part.items() if q)
      if lines:
        state.receipts.insert(
          Receipt(
            id=state.new_id("rcv"),
            po_id=po.id,
            reference=po.reference,
            lines=lines,
            received_at=at - timedelta(days=3 * (len(parts) - 1 - j)),
          )
        )
    return po.with_changes(
      lines=tuple(ln.with_changes(received=got[ln.id]) for ln in po.lines),
      closed_at=at if full else None,
    )

  # --- helpers -----------------------------------------------------------------------------

  def _order(self, po: str) -> PurchaseOrder:
    """An order by id or by PO number."""
    missing = f"purchase order '{po}' not found (give its id or its PO number)"
    return self.state.orders.find(po) or self.state.orders.get_by(missing, reference=po)

  def _draft(self, po: str) -> PurchaseOrder:
    order = self._order(po)
    if order.status != "draft":
      raise Conflict(
        f"purchase order {order.reference} is {order.status}; lines can only be changed "
        "while it is a draft"
      )
    return order

  def _line(self, sku: str, quantity: int, unit_cost: float | None) -> POLine:
    item = self.state.items.get(sku)
    cost = item.standard_cost if unit_cost is None else round(unit_cost, 2)
    return POLine(id=item.id, description=item.name, quantity=quantity, unit_cost=cost)

  def _set_lines(self, order: PurchaseOrder, lines: tuple[POLine, ...]) -> PurchaseOrder:
    return self.state.orders.update(order.id, lines=lines, total=_total(lines))

  # --- reads -------------------------------------------------------------------------------

  @tool(mutates=False, page="vendor", produces=("vendor.id", "company.name", "person.email"))
  def list_vendors(self, query: str | None = None, category: str | None = None) -> list:
    """List vendors by name.

    Args:
      query: words that must all appear in the name, domain or contact.
      category: only vendors of this category (e.g. "Hardware", "Supplies").
    """
    return select(
      self.state.vendors,
      same={"category": category},
      text=query,
      fields=("name", "domain", "contact_name", "contact_email"),
      key=lambda v: v.name,
    )

  @tool(
    mutates=False,
    consumes=("vendor.id",),
    produces=("company.name", "company.domain", "person.name", "person.email", "person.phone"),
  )
  def get_vendor(self, vendor_id: str) -> dict:
    """Get one vendor with its contact, payment terms and count of open purchase orders.

    Args:
      vendor_id: the vendor's id.
    """
    vendor = self.state.vendors.get(vendor_id)
    open_orders = self.state.orders.filter(
      lambda o: o.vendor_id == vendor_id and o.status not in ("received", "cancelled")
    )
    return {**dict(vendor), "open_orders": len(open_orders)}

  @tool(mutates=False, page="item", produces=("sku", "product.name", "money"))
  def search_items(self, query: str | None = None, category: str | None = None) -> list:
    """Search the catalogue of items the company buys, with their standard unit cost.

    Args:
      query: words that must all appear in the sku, name or category.
      category: only items of this category.
    """
    return select(
      self.state.items,
      same={"category": category},
      text=query,
      fields=("id", "name", "category"),
      key=lambda i: i.id,
    )

  @tool(
    mutates=False,
    page="order",
    page_view=lambda o: o.model_dump(exclude={"lines"}),
    produces=("purchase_order.id", "reference", "money", "date", "status", "person.email"),
  )
  def list_purchase_orders(
    self,
    status: POStatus | None = None,
    vendor_id: str | None = None,
    sku: str | None = None,
    requester: Email | None = None,
  ) -> list:
    """List purchase orders, newest first, without their lines.

    Args:
      status: only orders in this status.
      vendor_id: only orders to this vendor.
      sku: only orders with a line for this sku.
      requester: only orders requested by this email address.
    """
    self.state.vendors.check(vendor_id)
    return select(
      self.state.orders,
      eq={"status": status, "vendor_id": vendor_id, "requester": requester and requester.lower()},
      where=lambda o: sku is None or any(ln.id == sku for ln in o.lines),
      key=lambda o: (o.created_at, o.id),
      reverse=True,
    )

  @tool(
    mutates=False,
    consumes=("reference",),
    produces=("reference", "sku", "quantity", "money", "date", "status"),
  )
  def get_purchase_order(self, po: str) -> dict:
    """Get one purchase order with its lines, what is still to be received and its receipts.

    Args:
      po: the order's id or its PO number (e.g. "PO-10007").
    """
    order = self._order(po)
    receipts = sorted(
      self.state.receipts.filter(lambda r: r.po_id == order.id), key=lambda r: r.received_at
    )
    return {
      **order.model_dump(),
      "outstanding": {ln.id: ln.quantity - ln.received for ln in order.lines},
      "receipts": receipts,
    }

  @tool(mutates=False, consumes=("vendor.id", "date"), produces=("money", "company.name"))
  def vendor_spend(self, vendor_id: str | None = None, since: date | None = None) -> list[dict]:
    """Money committed to each vendor (approved and received orders) and the value of the
    goods received so far, largest commitment first.

    Args:
      vendor_id: only this vendor.
      since: only orders created on or after this day (ISO 8601).
    """
    vendors = [self.state.vendors.get(vendor_id)] if vendor_id else list(self.state.vendors)
    out = []
    for v in vendors:
      orders = [
        o
        for o in self.state.orders
        if o.vendor_id == v.id
        and o.status in COMMITTED
        and (since is None or o.created_at.date() >= since)
      ]
      received = sum((ln.received * ln.unit_cost for o in orders for ln in o.lines), 0.0)
      committed = sum((o.total for o in orders), 0.0)
      out.append(
        {
          "vendor_id": v.id,
          "vendor": v.name,
          "currency": v.currency,
          "orders": len(orders),
          "committed": round(committed, 2),
          "received_value": round(received, 2),
          "open_value": round(committed - received, 2),
        }
      )
    return sorted(out, key=lambda r: (-r["committed"], r["vendor"]))

  # --- writes ------------------------------------------------------------------------------

  @tool(
    mutates=True,
    consumes=("vendor.id", "sku", "quantity", "date", "person.email"),
    produces=("purchase_order.id", "reference", "money"),
  )
  def create_purchase_order(
    self,
    vendor_id: str,
    expected_date: date,
    lines: list[LineInput] = (),
    requester: Email | None = None,
    notes: str = "",
  ) -> PurchaseOrder:
    """Create a draft purchase order to a vendor, in the vendor's currency.

    Args:
      vendor_id: the vendor's id.
      expected_date: the day the goods should arrive (today or later, ISO 8601).
      lines: order lines, each {sku, quantity, unit_cost?}; one line per sku.
      requester: the employee asking for the goods; the user if null.
      notes: free text for the vendor or the approver.
    """
    vendor = self.state.vendors.get(vendor_id)
    if expected_date < self.state.now.date():
      raise InvalidArgument(
        f"expected_date {expected_date.isoformat()} is in the past; give "
        f"{self.state.now.date().isoformat()} or later"
      )
    skus = [ln.sku for ln in lines]
    if len(set(skus)) != len(skus):
      raise InvalidArgument("lines: each sku may appear only once")
    built = tuple(self._line(ln.sku, ln.quantity, ln.unit_cost) for ln in lines)
    who = employee_email(self.state.seed, requester, "requester") if requester else self.user
    return self.state.orders.insert(
      PurchaseOrder(
        id=self.state.new_id("po"),
        reference=f"PO-{10001 + len(self.state.orders)}",
        vendor_id=vendor.id,
        requester=who,
        lines=built,
        currency=vendor.currency,
        total=_total(built),
        expected_date=expected_date,
        notes=notes,
        created_at=self.state.now,
      )
    )

  @tool(mutates=True, consumes=("purchase_order.id", "sku", "quantity", "money"))
  def add_po_line(
    self, po: str, sku: str, quantity: Quantity, unit_cost: Cost | None = None
  ) -> PurchaseOrder:
    """Add a line to a draft purchase order.

    Args:
      po: the order's id or PO number.
      sku: the item's sku (not yet on the order).
      quantity: units to order (> 0).
      unit_cost: the unit cost; the item's standard cost if null.
    """
    order = self._draft(po)
    line = self._line(sku, quantity, unit_cost)
    if any(ln.id == sku for ln in order.lines):
      raise Conflict(
        f"{order.reference} already has a line for {sku}; remove it with remove_po_line "
        "before adding it again"
      )
    return self._set_lines(order, (*order.lines, line))

  @tool(mutates=True, consumes=("purchase_order.id", "sku"))
  def remove_po_line(self, po: str, sku: str) -> PurchaseOrder:
    """Remove the line of one sku from a draft purchase order.

    Args:
      po: the order's id or PO number.
      sku: the sku of the line to remove.
    """
    order = self._draft(po)
    kept = tuple(ln for ln in order.lines if ln.id != sku)
    if len(kept) == len(order.lines):
      raise NotFound(f"{order.reference} has no line for sku '{sku}'")
    return self._set_lines(order, kept)

  @tool(mutates=True, consumes=("purchase_order.id",), produces=("status",))
  def submit_purchase_order(self, po: str) -> PurchaseOrder:
    """Submit a draft order. An order of at most 10,000 is approved at once; a larger one
    waits for an approver.

    Args:
      po: the order's id or PO number.
    """
    order = self._order(po)
    if order.status != "draft":
      raise Conflict(
        f"purchase order {order.reference} is {order.status}; only a draft is submitted"
      )
    if not order.lines:
      raise Conflict(f"purchase order {order.reference} has no lines; add a line before submitting")
    now = self.state.now
    if order.total <= APPROVAL_LIMIT:
      return self.state.orders.update(
        order.id, status="approved", submitted_at=now, approved_at=now
      )
    return self.state.orders.update(order.id, status="submitted", submitted_at=now)

  @tool(mutates=True, consumes=("purchase_order.id", "person.email"))
  def approve_purchase_order(self, po: str, approver: Email) -> PurchaseOrder:
    """Approve a submitted order; the approver must be an employee other than the requester.

    Args:
      po: the order's id or PO number.
      approver: the approving employee's email address.
    """
    order = self._order(po)
    who = employee_email(self.state.seed, approver, "approver")
    if order.status != "submitted":
      raise Conflict(
        f"purchase order {order.reference} is {order.status}; only a submitted order is approved"
      )
    if who == order.requester:
      raise Conflict(
        f"{who} requested {order.reference} and cannot approve it; ask another employee"
      )
    return self.state.orders.update(
      order.id, status="approved", approver=who, approved_at=self.state.now
    )

  @tool(
    mutates=True,
    consumes=("purchase_order.id", "sku", "quantity"),
    produces=("receipt.id", "status"),
  )
  def receive_items(self, po: str, lines: list[ReceiveInput] = (), note: str = "") -> dict:
    """Record goods received against an approved order; with no lines, everything still
    outstanding is received.

    Args:
      po: the order's id or PO number.
      lines: what arrived, each {sku, quantity}; one entry per sku.
      note: e.g. the delivery note number or damage seen.
    """
    order = self._order(po)
    if order.status not in ("approved", "partially_received"):
      raise Conflict(
        f"purchase order {order.reference} is {order.status}; goods can only be received "
        "against an approved or partially received order"
      )
    outstanding = {ln.id: ln.quantity - ln.received for ln in order.lines}
    if lines:
      skus = [ln.sku for ln in lines]
      if len(set(skus)) != len(skus):
        raise InvalidArgument("lines: each sku may appear only once")
      got = {ln.sku: ln.quantity for ln in lines}
    else:
      got = {k: q for k, q in outstanding.items() if q}
    for sku, qty in got.items():
      if sku not in outstanding:
        raise Conflict(
          f"{order.reference} has no line for {sku}; its lines are: {', '.join(outstanding)}"
        )
      if qty > outstanding[sku]:
        raise Conflict(
          f"cannot receive {qty} of {sku} on {order.reference}: only {outstanding[sku]} "
          "still outstanding (ordered minus received)"
        )
    new_lines = tuple(
      ln.with_changes(received=ln.received + got.get(ln.id, 0)) for ln in order.lines
    )
    done = all(ln.received == ln.quantity for ln in new_lines)
    receipt = self.state.receipts.insert(
      Receipt(
        id=self.state.new_id("rcv"),
        po_id=order.id,
        reference=order.reference,
        lines=tuple(ReceiptLine(id=k, quantity=q) for k, q in got.items()),
        received_at=self.state.now,
        note=note,
      )
    )
    updated = self.state.orders.update(
      order.id,
      lines=new_lines,
      status="received" if done else "partially_received",
      closed_at=self.state.now if done else None,
    )
    return {"receipt": receipt, "order": updated}

  @tool(mutates=True, consumes=("purchase_order.id", "text"))
  def cancel_purchase_order(self, po: str, reason: Text) -> PurchaseOrder:
    """Cancel an order before any goods are received.

    Args:
      po: the order's id or PO number.
      reason: why it is cancelled (told to the vendor).
    """
    order = self._order(po)
    if order.status in ("received", "partially_received", "cancelled"):
      raise Conflict(
        f"purchase order {order.reference} is {order.status} and cannot be cancelled; only "
        "orders with no goods received can be"
      )
    return self.state.orders.update(
      order.id, status="cancelled", cancel_reason=reason, closed_at=self.state.now
    )
