"""Purchasing facets: purchase orders as sources of vendor contacts, amounts, PO numbers and
dates; drafting, adding lines and approving as sinks; the goods-receipt revisit (what is still
outstanding on an order drops once a delivery is recorded)."""

from __future__ import annotations

from datetime import timedelta

from compoworld.tasks.authoring import AuthorContext, AuthoringError
from compoworld.tasks.facets import Found, Value, facets
from compoworld.tasks.rubric import exists, where
from envs._facets_common import (
  colleague,
  colleague_email,
  day_of,
  found_day,
  found_one,
  iso,
  mentions,
  money,
  moved_to,
  s0_now,
  since,
  today,
  topic,
  units,
  user_email,
)
from envs._world import world

S = "purchasing"


def _slot(ctx: AuthorContext) -> tuple[str, str]:
  """The id and PO number a scenario order takes.

  The service numbers new orders by count, and s0's patches are replayed before the walk's
  writes: so once the walk has created an order, adding one more to s0 would renumber it. Then
  the scenario order takes over an untouched generated one (no goods received, not changed by
  the walk, not already the scenario's), which keeps the count; otherwise it is the next one.
  """
  state, s0 = ctx.state(S), s0_now(ctx, S)
  if not any(o.created_at >= s0 for o in state.orders):
    return ctx.fresh_id("po"), f"PO-{10001 + len(state.orders)}"
  taken = {p.id or (p.record or {}).get("id") for p in ctx.patches if p.service == S}
  taken |= {r.po_id for r in state.receipts}
  free = [
    o
    for o in sorted(state.orders, key=lambda o: o.id)
    if o.id not in taken
    and o.status in ("draft", "submitted", "approved", "cancelled")
    and all(t is None or t < s0 for t in (o.created_at, o.submitted_at, o.approved_at, o.closed_at))
  ]
  if not free:
    raise AuthoringError("no_order_slot")
  order = ctx.choice(free)
  return order.id, order.reference


def _vendor(ctx: AuthorContext) -> dict:
  """A goods vendor (hardware or supplies), found by listing, with the items of its category."""
  vendors = [
    v for v in ctx.call(S, "list_vendors")["items"] if v["category"] in ("Hardware", "Supplies")
  ]
  vendor = ctx.choice(vendors)
  return {**vendor, "items": _items(ctx, vendor["category"])}


def _items(ctx: AuthorContext, category: str | None = None) -> list[dict]:
  """The goods the company buys (hardware and supplies), as the catalogue lists them."""
  return [
    i.model_dump()
    for i in sorted(ctx.state(S).items, key=lambda i: i.id)
    if i.category in ("Hardware", "Supplies") and category in (None, i.category)
  ]


def _free_requester(ctx: AuthorContext):
  """A colleague with no purchase orders yet, so "the orders X requested" are the scenario's."""
  taken = {o.requester for o in ctx.state(S).orders}
  people = [p for p in world(ctx.env.seed).people[2:] if p.email not in taken]
  return ctx.choice(people)


def _put_order(
  ctx: AuthorContext,
  status: str,
  lines: list[tuple[dict, int]],
  requester: str | None = None,
  vendor_id: str | None = None,
) -> dict:
  """Puts a purchase order (lines of (item, quantity), nothing received) and returns it."""
  state = ctx.state(S)
  if vendor_id is None:  # who sells that kind of goods
    category = lines[0][0]["category"]
    vendor_id = ctx.choice(sorted(v.id for v in state.vendors if v.category == category))
  vendor = state.vendors.get(vendor_id)
  rows = [
    {"id": i["id"], "description": i["name"], "quantity": q, "unit_cost": i["standard_cost"]}
    for i, q in lines
  ]
  total = round(sum(r["quantity"] * r["unit_cost"] for r in rows), 2)
  created = s0_now(ctx, S) - timedelta(days=ctx.rng.randint(1, 6), hours=ctx.rng.randint(0, 8))
  submitted = created + timedelta(hours=2) if status != "draft" else None
  approver = None
  if status in ("approved", "cancelled") and total > 10_000:
    approver = colleague(ctx).email
  oid, reference = _slot(ctx)
  record = {
    "id": oid,
    "reference": reference,
    "vendor_id": vendor.id,
    "requester": requester or user_email(ctx),
    "approver": approver,
    "lines": rows,
    "currency": vendor.currency,
    "total": total,
    "status": status,
    "expected_date": (s0_now(ctx, S) + timedelta(days=ctx.rng.randint(7, 20))).date().isoformat(),
    "notes": f"For {topic(ctx)}",
    "created_at": iso(created),
    "submitted_at": iso(submitted) if submitted else None,
    "approved_at": iso(submitted + timedelta(hours=3)) if status == "approved" else None,
    "closed_at": iso(created + timedelta(days=1)) if status == "cancelled" else None,
    "cancel_reason": "Vendor could not meet the delivery date" if status == "cancelled" else "",
  }
  return ctx.put(S, "orders", record)


def _goods(ctx: AuthorContext, n: int) -> list[dict]:
  """``n`` distinct goods of one category, so one vendor sells them all."""
  category = ctx.choice(("Hardware", "Supplies"))
  return ctx.rng.sample(_items(ctx, category), n)


def _find(ctx: AuthorContext, reference: str) -> dict:
  return ctx.call(S, "get_purchase_order", po=reference)


# --- sources -------------------------------------------------------------------------------


@facets.source(S, "person.email")
def vendor_contact(ctx: AuthorContext) -> Found:
  """The contact person at the vendor of a purchase order."""
  (item,) = _goods(ctx, 1)
  po = _find(ctx, _put_order(ctx, "approved", [(item, ctx.choice((20, 40, 60)))])["reference"])
  vendor = ctx.call(S, "get_vendor", vendor_id=po["vendor_id"])
  email = vendor["contact_email"].lower()
  return found_one(
    "person.email",
    f"the email address of our contact at the vendor of purchase order {po['reference']}",
    email,
  )


@facets.source(S, "money")
def order_total(ctx: AuthorContext) -> Found:
  items = _goods(ctx, 2)
  lines = [(i, ctx.choice((10, 20, 30, 40))) for i in items]
  po = _find(ctx, _put_order(ctx, "approved", lines)["reference"])
  return Found(
    "money",
    f"the total of purchase order {po['reference']}",
    [money(po["total"], po["currency"])],
  )


@facets.source(S, "money")
def approved_order_totals(ctx: AuthorContext) -> Found:
  """One colleague's approved orders (and a cancelled one that does not count): one total
  per order, to be summed or used one by one."""
  who = _free_requester(ctx)
  quantities = ctx.rng.sample((10, 15, 20, 25, 30, 35), 4)  # distinct totals, one write each
  for status, qty in zip(
    ("approved", "approved", "approved", "cancelled"), quantities, strict=True
  ):
    (item,) = _goods(ctx, 1)
    _put_order(ctx, status, [(item, qty)], requester=who.email)
  orders = ctx.call(S, "list_purchase_orders", requester=who.email, status="approved")["items"]
  return Found(
    "money",
    f"the totals of the approved purchase orders requested by {who.name} ({who.email})",
    [money(o["total"], o["currency"]) for o in orders],
  )


@facets.source(S, "reference")
def requested_order_number(ctx: AuthorContext) -> Found:
  """The PO number of the one order a colleague raised."""
  who = _free_requester(ctx)
  (item,) = _goods(ctx, 1)
  _put_order(ctx, "approved", [(item, ctx.choice((20, 40, 60)))], requester=who.email)
  (order,) = ctx.call(S, "list_purchase_orders", requester=who.email)["items"]
  return found_one(
    "reference",
    f"the number of the purchase order {who.name} ({who.email}) raised for {item['name']} units",
    order["reference"],
  )


@facets.source(S, "date")
def expected_delivery(ctx: AuthorContext) -> Found:
  (item,) = _goods(ctx, 1)
  po = _find(ctx, _put_order(ctx, "approved", [(item, ctx.choice((20, 40, 60)))])["reference"])
  return found_day(
    f"the day the goods on purchase order {po['reference']} are expected to arrive",
    po["expected_date"],
  )


# --- lookups -------------------------------------------------------------------------------


@facets.lookup(S, "sku", "money")
def standard_cost(ctx: AuthorContext, found: Found) -> Found | None:
  """What the company pays a vendor for one unit of an item."""
  sku = found.values[0].value
  hits = ctx.call(S, "search_items", query=sku)["items"]
  item = next((i for i in hits if i["id"] == sku), None)
  if item is None:
    return None
  cost = item["standard_cost"]
  currency = world(ctx.env.seed).currency
  return Found(
    "money",
    "the standard unit cost we pay for that item",
    [money(cost, currency)],
    answer=f"The standard unit cost of the {item['name']} ({sku}) is {cost:,.2f} {currency}.",
  )


# --- sinks ---------------------------------------------------------------------------------


def _draft_target(ctx: AuthorContext) -> dict:
  vendor = _vendor(ctx)
  due = (s0_now(ctx, S) + timedelta(days=ctx.rng.randint(10, 21))).date().isoformat()
  return {
    "vendor": vendor,
    "item": ctx.choice(vendor["items"]),
    "qty": ctx.choice((20, 40, 60, 80)),
    "due": due,
  }


def _purchasable(ctx: AuthorContext, sku: str) -> None:
  if ctx.state(S).items.find(sku) is None:
    raise AuthoringError("sku_not_purchasable", str(sku))


def _draft(ctx: AuthorContext, t: dict, sku: str | None = None, due: str | None = None, **more):
  """Drafts the target's purchase order: ``t["qty"]`` units of ``sku`` (the target's item by
  default) from its vendor, expected on ``due`` (the target's date by default), with ``more``
  fields (its notes)."""
  ctx.call(
    S,
    "create_purchase_order",
    vendor_id=t["vendor"]["id"],
    expected_date=t["due"] if due is None else due,
    lines=[{"sku": t["item"]["id"] if sku is None else sku, "quantity": t["qty"]}],
    **more,
  )


def _drafted(ctx: AuthorContext, t: dict, *conds: dict) -> dict:
  """The check that a purchase order to the target's vendor with ``conds`` was drafted."""
  return exists(
    S,
    "orders",
    where("vendor_id", t["vendor"]["id"]),
    *conds,
    since(ctx, S, "created_at"),
  )


def _order_phrase(t: dict, what: str) -> str:
  return f"draft a purchase order to {t['vendor']['name']} for {t['qty']} units of {what}"


def _draft_for_sku(ctx: AuthorContext, t: dict, v: Value) -> None:
  _purchasable(ctx, v.value)
  _draft(ctx, t, sku=v.value)


facets.sink(
  S,
  "sku",
  "draft_order_for_item",
  prepare=_draft_target,
  act=_draft_for_sku,
  check=lambda ctx, t, v: _drafted(
    ctx, t, where("lines.id", v.value, "contains"), where("expected_date", t["due"])
  ),
  phrase=lambda ctx, t, obj: _order_phrase(t, f"{obj}, expected on {t['due']}"),
  text=lambda ctx, t, v: (
    f"A purchase order to {t['vendor']['name']} for {v.label}, due {t['due']}, exists."
  ),
)


def _draft_due(ctx: AuthorContext, t: dict, v: Value) -> None:
  if day_of(v) < today(ctx, S):
    raise AuthoringError("date_in_past", str(v.value))
  _draft(ctx, t, due=v.value)


facets.sink(
  S,
  "date",
  "draft_order_due_on",
  prepare=_draft_target,
  act=_draft_due,
  check=lambda ctx, t, v: _drafted(
    ctx, t, where("lines.id", t["item"]["id"], "contains"), where("expected_date", v.value)
  ),
  phrase=lambda ctx, t, obj: _order_phrase(
    t, f"the {t['item']['name']} ({t['item']['id']}) to arrive on {obj}"
  ),
  text=lambda ctx, t, v: (
    f"A purchase order to {t['vendor']['name']} for {t['item']['id']} is due {v.label}."
  ),
)


def _draft_with_contact(ctx: AuthorContext, t: dict, v: Value) -> None:
  _draft(ctx, t, notes=f"Please send the delivery confirmation to {v.value}")


facets.sink(
  S,
  "person.email",
  "draft_order_with_delivery_contact",
  prepare=_draft_target,
  act=_draft_with_contact,
  check=lambda ctx, t, v: _drafted(
    ctx, t, where("lines.id", t["item"]["id"], "contains"), mentions("notes", v)
  ),
  phrase=lambda ctx, t, obj: _order_phrase(
    t,
    f"the {t['item']['name']} ({t['item']['id']}), expected on {t['due']}, with a note asking "
    f"the vendor to send the delivery confirmation to {obj}",
  ),
  text=lambda ctx, t, v: (
    f"A purchase order to {t['vendor']['name']} for {t['item']['id']} names {v.label} for "
    "the delivery confirmation."
  ),
)


def _approval_target(ctx: AuthorContext) -> dict:
  """An order of mine above the approval limit, waiting for someone to sign it off."""
  lines = [(i, max(20, int(6000 / i["standard_cost"]) // 10 * 10 + 10)) for i in _goods(ctx, 2)]
  po = _put_order(ctx, "submitted", lines)
  return {"id": po["id"], "reference": po["reference"], "requester": po["requester"]}


def _approve(ctx: AuthorContext, t: dict, v: Value) -> None:
  email = colleague_email(ctx, v, "approver_not_eligible")
  if email == t["requester"]:
    raise AuthoringError("approver_not_eligible", email)
  ctx.call(S, "approve_purchase_order", po=t["reference"], approver=email)


facets.sink(
  S,
  "person.email",
  "approve_order",
  prepare=_approval_target,
  act=_approve,
  check=lambda ctx, t, v: moved_to(
    S, "orders", t["id"], "approved", where("approver", str(v.value).lower())
  ),
  phrase=lambda ctx, t, obj: (
    f"approve purchase order {t['reference']}, recording {obj} as the approver"
  ),
  text=lambda ctx, t, v: f"{t['reference']} is approved by {v.label}.",
  single=True,
)


def _add_line_target(ctx: AuthorContext) -> dict:
  """A draft order with one line; the walk's quantity goes on a second item."""
  first, second = _goods(ctx, 2)
  po = _put_order(ctx, "draft", [(first, ctx.choice((35, 45, 55)))])
  return {"id": po["id"], "reference": po["reference"], "item": second}


def _add_line(ctx: AuthorContext, t: dict, v: Value) -> None:
  qty = units(v, most=1_000_000)
  ctx.call(S, "add_po_line", po=t["reference"], sku=t["item"]["id"], quantity=qty)


def _add_line_phrase(ctx: AuthorContext, t: dict, obj: str) -> str:
  return (
    f"add the {t['item']['name']} ({t['item']['id']}) to draft purchase order {t['reference']}, "
    f"ordering {obj}"
  )


facets.sink(
  S,
  "quantity",
  "order_quantity",
  total="order_total_quantity",
  prepare=_add_line_target,
  act=_add_line,
  check=lambda ctx, t, v: exists(
    S,
    "orders",
    where("id", t["id"]),
    where("lines.id", t["item"]["id"], "contains"),
    where("lines.quantity", v.value),
  ),
  phrase=_add_line_phrase,
  text=lambda ctx, t, v: f"{t['reference']} has a line of {v.label} units of {t['item']['id']}.",
  single=True,
)


# --- the revisit: what is outstanding, record a delivery, what is outstanding now ----------


def _outstanding_first(ctx: AuthorContext) -> tuple[Found, dict]:
  """An approved order for large quantities, nothing delivered yet."""
  first, second = _goods(ctx, 2)
  qty = ctx.choice((600, 800, 1000))
  po = _put_order(ctx, "approved", [(first, qty), (second, ctx.choice((100, 200)))])
  got = _find(ctx, po["reference"])
  left = got["outstanding"][first["id"]]
  target = {"reference": po["reference"], "id": po["id"], "item": first, "outstanding": left}
  found = Found(
    "quantity",
    f"the number of units of the {first['name']} still to be delivered on purchase order "
    f"{po['reference']}",
    [Value(left, str(left), float(left))],
  )
  return found, target


def _receive(ctx: AuthorContext, t: dict, v: Value) -> None:
  qty = units(v, most=1_000_000)
  left = ctx.state(S).orders.get(t["id"]).lines[0]
  if qty > left.quantity - left.received:
    raise AuthoringError("more_than_outstanding", str(qty))
  ctx.call(S, "receive_items", po=t["reference"], lines=[{"sku": t["item"]["id"], "quantity": qty}])


def _outstanding_second(ctx: AuthorContext, t: dict) -> Found:
  got = _find(ctx, t["reference"])
  left = got["outstanding"][t["item"]["id"]]
  return Found(
    "quantity",
    f"the number of units of the {t['item']['name']} still to be delivered on {t['reference']}",
    [Value(left, str(left), float(left))],
    stale=t["outstanding"],
    answer=f"{left} units of the {t['item']['name']} are still outstanding.",
  )


facets.revisit(
  S,
  kind="quantity",
  kind_in="quantity",
  kind_after="quantity",
  name="outstanding_after_receipt",
  first=_outstanding_first,
  second=_outstanding_second,
  change="record_delivery",
  act=_receive,
  check=lambda ctx, t, v: exists(
    S,
    "receipts",
    where("po_id", t["id"]),
    where("lines.id", t["item"]["id"], "contains"),
    where("lines.quantity", v.value),
    since(ctx, S, "received_at"),
  ),
  phrase=lambda ctx, t, obj: (
    f"record a delivery of the {t['item']['name']} against {t['reference']}: "
    + ("one receipt for each of those quantities" if obj == "each of them" else obj)
  ),
  text=lambda ctx, t, v: (
    f"A receipt of {v.label} units of {t['item']['id']} is recorded on {t['reference']}."
  ),
)
