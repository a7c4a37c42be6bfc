from datetime import timedelta

import pytest

from envs._world import world
from envs.storefront import TAX_RATES, StorefrontService
from tests.contract import call_fails, call_ok

SEED = 3


@pytest.fixture
def shop():
  return StorefrontService.create(seed=SEED)


def in_status(shop, status, **where):
  return next(
    o
    for o in shop.state.orders
    if o.status == status and all(getattr(o, k) == v for k, v in where.items())
  )


def product(shop, active=True, cheap=True):
  items = sorted((p for p in shop.state.products if p.active == active), key=lambda p: p.price)
  return items[0] if cheap else items[-1]


def us_customer(shop):
  return next(c for c in shop.state.customers if c.country == "USA")


def new_order(shop, qty=2, **extra):
  cus, p = us_customer(shop), product(shop)
  args = {"customer_id": cus.id, "lines": [{"sku": p.id, "quantity": qty}], **extra}
  return call_ok(shop, "create_order", args)


def test_seeded_data_is_sized():
  a = StorefrontService.create(seed=5)
  assert len(a.state.orders) == 30 and len(a.state.products) == len(world(5).products)
  assert len(StorefrontService.create(seed=5, size=150).state.orders) == 150


def test_seeded_orders_are_consistent():
  state = StorefrontService.create(seed=7, size=60).state
  contacts = {c.email for cu in world(7).customers for c in cu.contacts}
  assert any(c.email in contacts for c in state.customers)
  assert len({c.email for c in state.customers}) == len(state.customers)
  assert {o.status for o in state.orders} == {
    "pending",
    "paid",
    "fulfilled",
    "cancelled",
    "refunded",
  }
  for o in state.orders:
    assert o.subtotal == round(sum(ln.line_total for ln in o.lines), 2)
    assert o.total == round(o.subtotal - o.discount + o.tax, 2)
    refunded = sum(r.amount for r in state.refunds if r.order_id == o.id)
    assert round(refunded, 2) == o.refunded_amount <= o.paid_amount
    assert (o.paid_amount > 0) == (o.paid_at is not None)
    if o.status == "refunded":
      assert o.refunded_amount == o.paid_amount
    if o.status in ("pending",):
      assert o.paid_amount == 0
  used = {c.id: c.times_used for c in state.discount_codes}
  for code, n in used.items():
    assert n == sum(1 for o in state.orders if o.discount_code == code)


def test_reads(shop):
  page = call_ok(shop, "list_products", {"limit": 100})
  assert page["total"] == len(shop.state.products) - 2 and all(p["active"] for p in page["items"])
  every = call_ok(shop, "list_products", {"include_inactive": True, "limit": 100})
  assert every["total"] == len(shop.state.products)
  hw = call_ok(
    shop, "list_products", {"category": "hardware", "query": "kit", "include_inactive": True}
  )
  assert [p["name"] for p in hw["items"]] == ["Mounting Kit"]
  cus = us_customer(shop)
  found = call_ok(shop, "search_customers", {"email": cus.email.upper()})["items"]
  assert [c["id"] for c in found] == [cus.id]
  by_name = call_ok(shop, "search_customers", {"query": cus.name, "limit": 100})["items"]
  assert cus.id in {c["id"] for c in by_name}
  usa = call_ok(shop, "search_customers", {"country": "usa", "limit": 100})["items"]
  assert usa and all(c["country"] == "USA" for c in usa)
  someone = in_status(shop, "fulfilled").customer_id
  hist = call_ok(shop, "get_customer_orders", {"customer_id": someone, "limit": 100})
  assert hist["customer"]["id"] == someone and hist["items"]
  assert all(o["customer_id"] == someone for o in hist["items"])
  spent = sum(o["paid_amount"] - o["refunded_amount"] for o in hist["items"])
  assert hist["total_spent"] == round(spent, 2)
  orders = call_ok(shop, "list_orders", {"limit": 5})
  assert orders["total"] == 30 and "lines" not in orders["items"][0]
  paid = call_ok(shop, "list_orders", {"status": "paid", "limit": 100})["items"]
  assert paid and all(o["status"] == "paid" for o in paid)
  mine = call_ok(shop, "list_orders", {"customer_id": someone, "limit": 100})["items"]
  assert {o["id"] for o in mine} == {o["id"] for o in hist["items"]}
  recent = call_ok(
    shop,
    "list_orders",
    {"since": "2026-02-25T00:00:00", "until": "2026-03-03T00:00:00", "limit": 100},
  )
  assert all("2026-02-25" <= o["created_at"] < "2026-03-03" for o in recent["items"])
  refunded = in_status(shop, "refunded")
  got = call_ok(shop, "get_order", {"order": refunded.reference})
  assert got["id"] == refunded.id and got["refunds"] and got["lines"]
  assert call_ok(shop, "get_order", {"order": refunded.reference.lstrip("#")})["id"] == refunded.id
  assert call_ok(shop, "get_order", {"order": refunded.id})["reference"] == refunded.reference
  codes = call_ok(shop, "list_discount_codes")
  assert "VIP30" not in {c["id"] for c in codes}
  assert {c["id"]: c["usable"] for c in codes}["BLACKFRIDAY25"] is False
  assert len(call_ok(shop, "list_discount_codes", {"include_inactive": True})) == 5
  report = call_ok(shop, "sales_report")
  assert report["orders"] == 30 and sum(report["by_status"].values()) == 30
  assert report["net_sales"] == round(report["gross_sales"] - report["refunds"], 2)
  assert report["top_products"] and report["average_order_value"] > 0
  empty = call_ok(shop, "sales_report", {"since": "2030-01-01"})
  assert empty["orders"] == 0 and empty["gross_sales"] == 0


def test_order_lifecycle_with_discount_and_refunds(shop):
  cus, p = us_customer(shop), product(shop)
  order = new_order(shop, qty=10)
  assert order["status"] == "pending" and order["reference"] == "#1031"
  assert order["subtotal"] == round(10 * p.price, 2) and order["discount"] == 0
  assert order["tax"] == round(order["subtotal"] * TAX_RATES["USA"], 2)
  assert order["shipping_address"]["city"] == cus.city
  used = shop.state.discount_codes.get("WELCOME10").times_used
  order = call_ok(shop, "apply_discount", {"order": order["reference"], "code": "welcome10"})
  assert order["discount_code"] == "WELCOME10" and order["discount"] == round(
    order["subtotal"] * 0.1, 2
  )
  assert order["total"] == round(order["subtotal"] - order["discount"] + order["tax"], 2)
  assert shop.state.discount_codes.get("WELCOME10").times_used == used + 1
  order = call_ok(shop, "mark_paid", {"order": order["id"], "payment_method": "paypal"})
  assert order["status"] == "paid" and order["paid_amount"] == order["total"]
  order = call_ok(shop, "fulfill_order", {"order": order["id"], "tracking_number": " 1ZABC "})
  assert order["status"] == "fulfilled" and order["tracking_number"] == "1ZABC"
  part = call_ok(shop, "refund_order", {"order": order["id"], "amount": 5, "reason": "damaged box"})
  assert part["order"]["status"] == "fulfilled" and part["order"]["refunded_amount"] == 5
  rest = round(order["total"] - 5, 2)
  full = call_ok(shop, "refund_order", {"order": order["id"], "amount": rest, "reason": "returned"})
  assert full["order"]["status"] == "refunded" and full["refund"]["amount"] == rest
  assert len(shop.state.refunds.filter(lambda r: r.order_id == order["id"])) == 2


def test_create_with_code_and_address_then_cancel(shop):
  expensive = product(shop, cheap=False)
  cus = us_customer(shop)
  order = call_ok(
    shop,
    "create_order",
    {
      "customer_id": cus.id,
      "lines": [{"sku": expensive.id, "quantity": 1}],
      "discount_code": "SPRING20",
      "address": "1 Harbour Rd",
      "city": "Oslo",
      "country": "Norway",
    },
  )
  assert order["discount_code"] == "SPRING20" and order["shipping_address"]["country"] == "Norway"
  assert order["tax"] == round((order["subtotal"] - order["discount"]) * TAX_RATES["Norway"], 2)
  out = call_ok(shop, "cancel_order", {"order": order["id"], "reason": "duplicate"})
  assert out["order"]["status"] == "cancelled" and out["refund"] is None
  paid = new_order(shop)
  call_ok(shop, "mark_paid", {"order": paid["id"]})
  out = call_ok(shop, "cancel_order", {"order": paid["id"], "reason": "changed mind"})
  assert out["refund"]["amount"] == paid["total"]
  assert shop.state.orders.get(paid["id"]).refunded_amount == paid["total"]
  assert shop.state.orders.get(paid["id"]).cancelled_at == shop.state.now - timedelta(minutes=1)


def test_error_paths_are_atomic(shop):
  cus, p = us_customer(shop), product(shop)
  pending, paid = in_status(shop, "pending", discount_code=None), in_status(shop, "paid")
  fulfilled, cancelled = in_status(shop, "fulfilled"), in_status(shop, "cancelled")
  refunded = in_status(shop, "refunded")
  line = {"sku": p.id, "quantity": 1}
  base = {"customer_id": cus.id, "lines": [line]}
  # 400: missing, ill-typed and invalid arguments
  call_fails(shop, "get_order", {}, 400, "order")
  call_fails(shop, "get_customer_orders", {"customer_id": 1}, 400, "customer_id")
  call_fails(shop, "search_customers", {"email": "nope"}, 400, "email")
  call_fails(shop, "list_orders", {"status": "lost"}, 400, "status")
  call_fails(
    shop, "list_orders", {"since": "2026-03-01T00:00", "until": "2026-02-01T00:00"}, 400, "after"
  )
  call_fails(shop, "sales_report", {"since": "2026-03-01", "until": "2026-03-01"}, 400, "after")
  call_fails(shop, "create_order", {"customer_id": cus.id}, 400, "lines")
  call_fails(shop, "create_order", {**base, "lines": []}, 400, "lines")
  call_fails(shop, "create_order", {**base, "lines": [{**line, "quantity": 0}]}, 400, "quantity")
  call_fails(shop, "create_order", {**base, "lines": [line, line]}, 400, "once")
  call_fails(shop, "create_order", {**base, "city": ""}, 400, "city")
  call_fails(
    shop, "mark_paid", {"order": pending.id, "payment_method": "cash"}, 400, "payment_method"
  )
  call_fails(shop, "refund_order", {"order": paid.id, "amount": 0, "reason": "x"}, 400, "amount")
  call_fails(shop, "refund_order", {"order": paid.id, "amount": 1, "reason": ""}, 400, "reason")
  call_fails(shop, "cancel_order", {"order": pending.id}, 400, "reason")
  # 404: unknown customers, skus, orders and codes
  call_fails(shop, "get_customer_orders", {"customer_id": "cus_nope"}, 404, "cus_nope")
  call_fails(shop, "list_orders", {"customer_id": "cus_nope"}, 404, "cus_nope")
  call_fails(shop, "create_order", {**base, "customer_id": "cus_nope"}, 404, "cus_nope")
  call_fails(shop, "create_order", {**base, "lines": [{"sku": "NO-1", "quantity": 1}]}, 404, "NO-1")
  call_fails(shop, "create_order", {**base, "discount_code": "FREE99"}, 404, "FREE99")
  for name, extra in (
    ("get_order", {}),
    ("apply_discount", {"code": "WELCOME10"}),
    ("mark_paid", {}),
    ("fulfill_order", {}),
    ("cancel_order", {"reason": "x"}),
    ("refund_order", {"amount": 1, "reason": "x"}),
  ):
    call_fails(shop, name, {"order": "#9999", **extra}, 404, "#9999")
  call_fails(shop, "apply_discount", {"order": pending.id, "code": "FREE99"}, 404, "FREE99")
  # 409: business rules
  gone = product(shop, active=False)
  call_fails(
    shop, "create_order", {**base, "lines": [{"sku": gone.id, "quantity": 1}]}, 409, "discontinued"
  )
  call_fails(shop, "create_order", {**base, "discount_code": "VIP30"}, 409, "inactive")
  call_fails(shop, "create_order", {**base, "discount_code": "BLACKFRIDAY25"}, 409, "expired")
  call_fails(shop, "create_order", {**base, "discount_code": "BULK15"}, 409, "at least")
  call_fails(shop, "apply_discount", {"order": pending.id, "code": "VIP30"}, 409, "inactive")
  call_fails(shop, "apply_discount", {"order": pending.id, "code": "blackfriday25"}, 409, "expired")
  for o in (paid, fulfilled, cancelled):
    call_fails(shop, "apply_discount", {"order": o.id, "code": "WELCOME10"}, 409, "pending")
  coded = new_order(shop, discount_code="WELCOME10")
  call_fails(shop, "apply_discount", {"order": coded["id"], "code": "SPRING20"}, 409, "already")
  for o in (paid, fulfilled, cancelled, refunded):
    call_fails(shop, "mark_paid", {"order": o.id}, 409, "only a pending")
  for o in (pending, fulfilled, cancelled, refunded):
    call_fails(shop, "fulfill_order", {"order": o.id}, 409, "only a paid")
  call_fails(shop, "cancel_order", {"order": fulfilled.id, "reason": "x"}, 409, "refund it instead")
  for o in (cancelled, refunded):
    call_fails(shop, "cancel_order", {"order": o.id, "reason": "x"}, 409, o.status)
  call_fails(
    shop, "refund_order", {"order": pending.id, "amount": 1, "reason": "x"}, 409, "never paid"
  )
  over = round(paid.paid_amount - paid.refunded_amount + 0.01, 2)
  call_fails(
    shop, "refund_order", {"order": paid.id, "amount": over, "reason": "x"}, 409, "cannot exceed"
  )
  call_fails(
    shop, "refund_order", {"order": refunded.id, "amount": 1, "reason": "x"}, 409, "cannot exceed"
  )
  call_fails(shop, "no_such_tool", {}, 404, "create_order")
