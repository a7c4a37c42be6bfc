"""Storefront: the seeded data generator, a base of the service class in ``tools``."""

from __future__ import annotations

import random
from datetime import timedelta

from envs._world import FIRST, LAST, STREETS, seeded, world
from envs.storefront.state import (
  MAIL_DOMAINS,
  REFUND_REASONS,
  STATUS_MIX,
  Customer,
  DiscountCode,
  Order,
  Product,
  Refund,
  ShippingAddress,
  StorefrontState,
  _line,
  _priced,
)


class StorefrontData:
  """Draws the initial state from a seed: ``generate`` and the helpers only it uses."""

  @classmethod
  def generate(cls, seed: int, size: int | None) -> StorefrontState:
    rng, w, state = seeded(cls, seed)
    now = state.now
    for p in w.products:
      state.products.insert(Product(id=p.sku, name=p.name, category=p.category, price=p.unit_price))
    for sku in rng.sample(state.products.ids(), 2):  # discontinued lines
      state.products.update(sku, active=False)
    for code, percent, minimum, expires, active in (
      ("WELCOME10", 10, 0.0, now + timedelta(days=180), True),
      ("SPRING20", 20, 200.0, now + timedelta(days=rng.randint(10, 40)), True),
      ("BULK15", 15, 1000.0, None, True),
      ("BLACKFRIDAY25", 25, 0.0, now - timedelta(days=rng.randint(90, 100)), True),
      ("VIP30", 30, 0.0, None, False),
    ):
      state.discount_codes.insert(
        DiscountCode(
          id=code, percent=percent, min_subtotal=minimum, expires_at=expires, active=active
        )
      )
    n = size if size is not None else 30
    cls._generate_customers(state, rng, w, max(4, (2 * n) // 3))
    customers = list(state.customers)
    statuses = [s for s, k in STATUS_MIX for _ in range(k)]
    picked = (statuses * (n // len(statuses) + 1))[:n]
    rng.shuffle(picked)
    age = {"pending": 2, "paid": 4, "fulfilled": 45, "cancelled": 30, "refunded": 40}
    specs = [
      (now - timedelta(days=rng.randint(0, age[s]), hours=rng.randint(1, 12)), s) for s in picked
    ]
    sellable = [p for p in state.products if p.active]
    for i, (created, status) in enumerate(sorted(specs)):
      cls._generate_order(state, rng, f"#{1001 + i}", created, status, customers, sellable)
    return state

  @staticmethod
  def _generate_customers(state: StorefrontState, rng: random.Random, w, count: int) -> None:
    """About a third are contacts at the world's customer companies, the rest private buyers."""
    contacts = [(c, cu) for cu in w.customers for c in cu.contacts]
    people = [
      (c.name, c.email, c.phone, cu.name, cu.city, cu.country)
      for c, cu in rng.sample(contacts, min(len(contacts), count // 3))
    ]
    while len(people) < 2 * count:  # plenty of candidates; duplicates are dropped below
      first, last = rng.choice(FIRST), rng.choice(LAST)
      email = f"{first}.{last}{rng.randint(1, 99)}@{rng.choice(MAIL_DOMAINS)}".lower()
      phone = f"+1-555-{rng.randint(100, 999)}-{rng.randint(1000, 9999)}"
      venue = rng.choice(w.venues)
      people.append((f"{first} {last}", email, phone, "", venue.city, venue.country))
    seen = set()
    for name, email, phone, company, city, country in people:
      if email in seen or len(seen) == count:
        continue
      seen.add(email)
      state.customers.insert(
        Customer(
          id=state.new_id("cus"),
          name=name,
          email=email,
          phone=phone,
          company=company,
          address=f"{rng.randint(2, 480)} {rng.choice(STREETS)}",
          city=city,
          country=country,
          accepts_marketing=rng.random() < 0.5,
          created_at=state.now - timedelta(days=rng.randint(60, 700)),
        )
      )

  @staticmethod
  def _generate_order(state, rng, reference, created, status, customers, sellable) -> None:
    cus = rng.choice(customers)
    lines = tuple(
      _line(p, rng.randint(1, 6) if p.price < 100 else rng.randint(1, 2))
      for p in rng.sample(sellable, rng.randint(1, 3))
    )
    code = None
    if rng.random() < 0.3:
      usable = [
        c
        for c in state.discount_codes
        if c.active
        and (c.expires_at is None or c.expires_at > created)
        and sum(ln.line_total for ln in lines) >= c.min_subtotal
      ]
      code = rng.choice(usable) if usable else None
    price = _priced(lines, code.percent if code else 0, cus.country)
    if code:
      state.discount_codes.update(code.id, times_used=code.times_used + 1)
    paid = status in ("paid", "fulfilled", "refunded") or (
      status == "cancelled" and rng.random() < 0.5
    )
    paid_at = created + timedelta(minutes=rng.randint(2, 90)) if paid else None
    order = Order(
      id=state.new_id("ord"),
      reference=reference,
      customer_id=cus.id,
      email=cus.email,
      lines=lines,
      discount_code=code.id if code else None,
      currency=world(state.seed).currency,
      status=status,
      shipping_address=ShippingAddress(
        name=cus.name, address=cus.address, city=cus.city, country=cus.country
      ),
      payment_method=rng.choice(("card", "card", "paypal", "bank_transfer")) if paid else None,
      paid_amount=price["total"] if paid else 0.0,
      created_at=created,
      paid_at=paid_at,
      **price,
    )
    refund = 0.0
    if status in ("fulfilled", "refunded"):
      order = order.with_changes(
        fulfilled_at=paid_at + timedelta(hours=rng.randint(4, 48)),
        tracking_number="1Z" + f"{rng.getrandbits(64):016X}",
      )
      if status == "refunded":
        refund = order.total
      elif rng.random() < 0.15:  # a partial refund: one unit of one line came back damaged
        refund = min(order.lines[0].unit_price, order.total)
    if status == "cancelled":
      order = order.with_changes(
        cancelled_at=created + timedelta(hours=rng.randint(1, 30)),
        cancel_reason="Customer asked to cancel",
      )
      refund = order.paid_amount
    if refund:
      state.refunds.insert(
        Refund(
          id=state.new_id("ref"),
          order_id=order.id,
          reference=reference,
          amount=refund,
          reason="Order cancelled" if status == "cancelled" else rng.choice(REFUND_REASONS),
          created_at=order.cancelled_at
          or min(state.now, created + timedelta(days=rng.randint(2, 9))),
        )
      )
      order = order.with_changes(refunded_amount=refund)
    state.orders.insert(order)
