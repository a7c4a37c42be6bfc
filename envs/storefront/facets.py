"""Storefront facets: shop orders and customers as sources of emails, amounts, skus, tracking
and order numbers (and a marketing audience with opted-out customers to leave out); refunds,
orders and fulfilment as sinks; the refund revisit (what a customer has spent drops)."""

from __future__ import annotations

import math
from datetime import timedelta

from compoworld.tasks.authoring import AuthorContext, AuthoringError
from compoworld.tasks.facets import Found, Value, facets
from compoworld.tasks.rubric import exists, where
from envs._facets_common import (
  amount_is,
  found_one,
  found_people,
  iso,
  money,
  moved_to,
  s0_now,
  since,
)
from envs._world import FIRST, LAST, STREETS, world
from envs.storefront.state import _line, _priced

S = "storefront"
REFUND_REASONS = ("Goodwill credit for a late delivery", "Item arrived damaged", "Price match")


def _slot(ctx: AuthorContext) -> tuple[str, str]:
  """The id and order number a scenario order takes.

  The shop numbers new orders by count, and s0's patches are replayed before the walk's
  writes: so once the walk has placed an order, adding one more to s0 would renumber it. Then
  the scenario order takes over an untouched generated one (no refunds or discount code, not
  changed by the walk, not already the scenario's), which keeps the count; otherwise it is the
  next one.
  """
  state, s0 = ctx.state(S), s0_now(ctx, S)
  if not any(o.created_at >= s0 for o in state.orders):
    return ctx.fresh_id("ord"), f"#{1001 + len(state.orders)}"
  taken = {p.id or (p.record or {}).get("id") for p in ctx.patches if p.service == S}
  taken |= {r.order_id for r in state.refunds}
  free = [
    o
    for o in sorted(state.orders, key=lambda o: o.id)
    if o.id not in taken
    and o.discount_code is None
    and all(t is None or t < s0 for t in (o.created_at, o.paid_at, o.fulfilled_at, o.cancelled_at))
  ]
  if not free:
    raise AuthoringError("no_order_slot")
  order = ctx.choice(free)
  return order.id, order.reference


def _goods(ctx: AuthorContext, n: int, min_price: float = 0.0):
  """``n`` distinct physical products the shop still sells (so warehouses and carriers know
  them too)."""
  weight = {p.sku: p.weight_kg for p in world(ctx.env.seed).products}
  sellable = sorted(
    (p for p in ctx.state(S).products if p.active and weight.get(p.id, 0) > 0), key=lambda p: p.id
  )
  pricey = [p for p in sellable if p.price >= min_price]
  return ctx.rng.sample(pricey if len(pricey) >= n else sellable, n)


def _customer(ctx: AuthorContext, business: bool = False):
  """A customer whose name no other customer shares, so the instruction can name them (for a
  big order, one buying for a company), and who has placed no order during the walk (so their
  latest order and what they have spent are the scenario's doing)."""
  s0, state = s0_now(ctx, S), ctx.state(S)
  busy = {o.customer_id for o in state.orders if o.created_at >= s0}
  customers = list(state.customers)
  names = [c.name for c in customers]
  unique = sorted(
    (c for c in customers if names.count(c.name) == 1 and c.id not in busy), key=lambda c: c.id
  )
  buyers = [c for c in unique if c.company] if business else []
  return ctx.choice(buyers or unique)


def _put_order(
  ctx: AuthorContext, status: str, lines, customer=None, age_minutes=(180, 3600), slot=None
) -> dict:
  """Puts one of the scenario's orders, priced as the shop prices them, and returns it."""
  customer = customer or _customer(ctx)
  built = [_line(p, q) for p, q in lines]
  price = _priced(built, 0, customer.country)
  created = s0_now(ctx, S) - timedelta(minutes=ctx.rng.randint(*age_minutes))
  paid = status in ("paid", "fulfilled")
  oid, reference = slot or _slot(ctx)
  record = {
    "id": oid,
    "reference": reference,
    "customer_id": customer.id,
    "email": customer.email,
    "lines": [ln.model_dump() for ln in built],
    "currency": world(ctx.env.seed).currency,
    "status": status,
    "shipping_address": {
      "name": customer.name,
      "address": customer.address,
      "city": customer.city,
      "country": customer.country,
    },
    "payment_method": "card" if paid else None,
    "paid_amount": price["total"] if paid else 0.0,
    "created_at": iso(created),
    "paid_at": iso(created + timedelta(minutes=10)) if paid else None,
    **price,
  }
  if status == "fulfilled":
    record["fulfilled_at"] = iso(created + timedelta(hours=2))
    record["tracking_number"] = f"1Z{ctx.rng.getrandbits(64):016X}"
  return ctx.put(S, "orders", record)


def _big_order(ctx: AuthorContext, customer=None, at_least: float = 0.0, slot=None) -> dict:
  """A company's fulfilled bulk order (at least about 50,000), so a refund fits in it."""
  half = max(25_000.0, at_least)
  lines = [(p, max(1, math.ceil(half / p.price))) for p in _goods(ctx, 2, min_price=100)]
  customer = customer or _customer(ctx, business=True)
  return _put_order(ctx, "fulfilled", lines, customer, slot=slot)


def _small_lines(ctx: AuthorContext, n: int):
  return [(p, ctx.rng.randint(1, 3)) for p in _goods(ctx, n)]


def _get(ctx: AuthorContext, reference: str) -> dict:
  return ctx.call(S, "get_order", order=reference)


# --- sources -------------------------------------------------------------------------------


@facets.source(S, "person.email")
def order_customer_email(ctx: AuthorContext) -> Found:
  order = _get(
    ctx, _put_order(ctx, ctx.choice(("paid", "fulfilled")), _small_lines(ctx, 2))["reference"]
  )
  return found_one(
    "person.email",
    f"the email address of the customer who placed order {order['reference']}",
    order["email"],
  )


@facets.source(S, "person.email")
def company_buyers(ctx: AuthorContext) -> Found:
  """The shop's customers from one company; those who opted out of marketing are left out."""
  state = ctx.state(S)
  company = ctx.choice(world(ctx.env.seed).customers)
  emails = {c.email for c in state.customers}
  opted_in = [True, True, True, False]
  ctx.rng.shuffle(opted_in)
  for accepts in opted_in:
    first, last = ctx.choice(FIRST), ctx.choice(LAST)
    email = f"{first}.{last}@{company.domain}".lower()
    if email in emails:
      continue
    emails.add(email)
    ctx.put(
      S,
      "customers",
      {
        "id": ctx.fresh_id("cus"),
        "name": f"{first} {last}",
        "email": email,
        "phone": f"+1-555-{ctx.rng.randint(100, 999)}-{ctx.rng.randint(1000, 9999)}",
        "company": company.name,
        "address": f"{ctx.rng.randint(2, 480)} {ctx.choice(STREETS)}",
        "city": company.city,
        "country": company.country,
        "accepts_marketing": accepts,
        "created_at": iso(s0_now(ctx, S) - timedelta(days=ctx.rng.randint(20, 300))),
      },
    )
  hits = ctx.call(S, "search_customers", query=company.name, limit=100)["items"]
  hits = [c for c in hits if c["company"] == company.name]
  found = found_people(
    f"our shop customers from {company.name}",
    [c["email"] for c in hits if c["accepts_marketing"]],
    [c["email"] for c in hits if not c["accepts_marketing"]],
    "who has opted out of marketing email",
  )
  if not found.values or not found.excluded:
    raise AuthoringError("no_audience", company.name)
  return found


@facets.source(S, "money")
def order_total(ctx: AuthorContext) -> Found:
  order = _get(
    ctx, _put_order(ctx, ctx.choice(("pending", "paid")), _small_lines(ctx, 2))["reference"]
  )
  return Found(
    "money", f"the total of order {order['reference']}", [money(order["total"], order["currency"])]
  )


@facets.source(S, "sku")
def order_skus(ctx: AuthorContext) -> Found:
  order = _get(ctx, _put_order(ctx, "paid", _small_lines(ctx, ctx.choice((2, 3))))["reference"])
  return Found(
    "sku",
    f"the skus of the products in order {order['reference']}",
    [Value(ln["id"], ln["id"]) for ln in order["lines"]],
  )


@facets.source(S, "tracking.number")
def order_tracking(ctx: AuthorContext) -> Found:
  order = _get(ctx, _put_order(ctx, "fulfilled", _small_lines(ctx, 1))["reference"])
  number = order["tracking_number"]
  return found_one("tracking.number", f"the tracking number of order {order['reference']}", number)


@facets.source(S, "reference")
def latest_order_number(ctx: AuthorContext) -> Found:
  """A customer just placed an order; the step hands on its number."""
  customer = _customer(ctx)
  _put_order(ctx, "paid", _small_lines(ctx, 1), customer, age_minutes=(10, 30))
  hits = ctx.call(S, "search_customers", query=customer.name)["items"]
  hit = next(c for c in hits if c["name"] == customer.name)
  latest = ctx.call(S, "get_customer_orders", customer_id=hit["id"], limit=1)["items"][0]
  return found_one(
    "reference",
    f"the number of the most recent order {customer.name} placed in our shop",
    latest["reference"],
  )


# --- lookups -------------------------------------------------------------------------------


@facets.lookup(S, "sku", "money")
def shop_price(ctx: AuthorContext, found: Found) -> Found | None:
  sku = found.values[0].value
  hits = ctx.call(S, "list_products", query=sku, include_inactive=True)["items"]
  product = next((p for p in hits if p["id"] == sku), None)
  if product is None:
    return None
  currency = world(ctx.env.seed).currency
  return Found(
    "money",
    "the price our shop sells that product for",
    [money(product["price"], currency)],
    answer=f"The {product['name']} ({sku}) sells for {product['price']:,.2f} {currency}.",
  )


# --- sinks ---------------------------------------------------------------------------------


def _refund_target(ctx: AuthorContext) -> dict:
  """The order number a bulk order will have; the order itself is put on the first refund,
  sized so that what the walk brings fits in it (the order is in s0 all the same)."""
  oid, ref = _slot(ctx)
  return {"id": oid, "ref": ref, "reason": ctx.choice(REFUND_REASONS), "placed": False}


def _refund(ctx: AuthorContext, t: dict, v: Value) -> None:
  try:
    amount = round(float(v.value), 2)
  except (TypeError, ValueError) as err:
    raise AuthoringError("not_an_amount", str(v.value)) from err
  if not t.get("placed", True):
    t["placed"] = True
    _big_order(ctx, at_least=2 * amount, slot=(t["id"], t["ref"]))
  order = ctx.state(S).orders.get(t["id"])
  if not 0 < amount <= round(order.paid_amount - order.refunded_amount, 2):
    raise AuthoringError("refund_exceeds_paid", f"{amount} on {t['ref']}")
  ctx.call(S, "refund_order", order=t["ref"], amount=amount, reason=t["reason"])


def _refund_check(ctx: AuthorContext, t: dict, v: Value) -> dict:
  return exists(
    S,
    "refunds",
    where("reference", t["ref"]),
    amount_is("amount", v.value),
    since(ctx, S, "created_at"),
  )


facets.sink(
  S,
  "money",
  "refund_amount",
  total="refund_total",
  prepare=_refund_target,
  act=_refund,
  check=_refund_check,
  phrase=lambda ctx, t, obj: (
    f'refund {obj} on order {t["ref"]}, giving "{t["reason"]}" as the reason'
  ),
  text=lambda ctx, t, v: f"{v.label} was refunded on order {t['ref']}.",
)


def _buyer_target(ctx: AuthorContext) -> dict:
  customer = _customer(ctx)
  hit = ctx.call(S, "search_customers", email=customer.email)["items"][0]
  return {"customer": hit, "qty": ctx.choice((1, 2, 3))}


def _order_sku(ctx: AuthorContext, t: dict, v: Value) -> None:
  product = ctx.state(S).products.find(v.value)
  if product is None or not product.active:
    raise AuthoringError("product_not_sold", str(v.value))
  ctx.call(
    S,
    "create_order",
    customer_id=t["customer"]["id"],
    lines=[{"sku": v.value, "quantity": t["qty"]}],
  )


facets.sink(
  S,
  "sku",
  "order_for_customer",
  prepare=_buyer_target,
  act=_order_sku,
  check=lambda ctx, t, v: exists(
    S,
    "orders",
    where("customer_id", t["customer"]["id"]),
    where("lines.id", v.value, "contains"),
    since(ctx, S, "created_at"),
  ),
  phrase=lambda ctx, t, obj: (
    f"place an order for {t['qty']} units of {obj} for our customer {t['customer']['name']} "
    f"({t['customer']['email']})"
  ),
  text=lambda ctx, t, v: f"{t['customer']['name']} has a new order for {v.label}.",
)


def _fulfil_target(ctx: AuthorContext) -> dict:
  order = _put_order(ctx, "paid", _small_lines(ctx, 2))
  return {"id": order["id"], "ref": order["reference"]}


facets.sink(
  S,
  "tracking.number",
  "fulfil_with_tracking",
  prepare=_fulfil_target,
  act=lambda ctx, t, v: ctx.call(S, "fulfill_order", order=t["ref"], tracking_number=v.value),
  check=lambda ctx, t, v: moved_to(
    S, "orders", t["id"], "fulfilled", where("tracking_number", str(v.value).strip())
  ),
  phrase=lambda ctx, t, obj: f"mark order {t['ref']} as shipped with {obj} as its tracking number",
  text=lambda ctx, t, v: f"Order {t['ref']} is fulfilled with tracking number {v.label}.",
  single=True,
)


# --- the revisit: what a customer has spent, a refund, what they have spent now -------------


def _spent_first(ctx: AuthorContext) -> tuple[Found, dict]:
  customer = _customer(ctx, business=True)
  order = _big_order(ctx, customer, at_least=60_000)  # read before the refund: sized ahead
  hits = ctx.call(S, "search_customers", query=customer.name)["items"]
  hit = next(c for c in hits if c["name"] == customer.name)
  spent = ctx.call(S, "get_customer_orders", customer_id=hit["id"])["total_spent"]
  currency = world(ctx.env.seed).currency
  target = {
    "id": order["id"],
    "ref": order["reference"],
    "customer_id": hit["id"],
    "name": customer.name,
    "spent": spent,
    "currency": currency,
    "reason": ctx.choice(REFUND_REASONS),
  }
  found = Found(
    "money", f"the total {customer.name} has spent in our shop", [money(spent, currency)]
  )
  return found, target


def _spent_second(ctx: AuthorContext, t: dict) -> Found:
  spent = ctx.call(S, "get_customer_orders", customer_id=t["customer_id"])["total_spent"]
  value = money(spent, t["currency"])
  return Found(
    "money",
    f"the total {t['name']} has spent in our shop after that refund",
    [value],
    stale=t["spent"],
    answer=f"{t['name']} has now spent {value.label} in our shop.",
  )


facets.revisit(
  S,
  kind="money",
  kind_in="money",
  kind_after="money",
  name="spent_after_refund",
  first=_spent_first,
  second=_spent_second,
  change="refund_customer",
  act=_refund,
  check=_refund_check,
  phrase=lambda ctx, t, obj: (
    f'refund {obj} on their order {t["ref"]}, giving "{t["reason"]}" as the reason'
  ),
  text=lambda ctx, t, v: f"{v.label} was refunded on order {t['ref']}.",
)
