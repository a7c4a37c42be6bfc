"""Storefront: an online shop's back office, like the Shopify admin.

Entities: customers (shoppers with a name, email, phone and address; some are contacts at the
shared world's customer companies), products (the world's catalogue by sku, with a price and an
``active`` flag: inactive products stay on old orders but cannot be ordered), orders (an order
number such as ``#1042`` as ``reference``, a customer, lines of sku, quantity and unit price, a
subtotal, a discount, tax by destination country, a total, a shipping address and a status),
refunds (money given back on an order, with a reason) and discount codes (a code, a percentage
off, an optional minimum subtotal, an expiry time and an ``active`` flag).

Workflow: ``pending`` → ``paid`` → ``fulfilled``; ``pending`` or ``paid`` → ``cancelled`` (a
paid order is refunded in full when cancelled); a paid or fulfilled order whose refunds reach
the paid amount becomes ``refunded``. Rules a merchant expects: quantities are at least 1 and a
sku appears once per order; only active products are sold; a discount code must exist, be
active, not be expired and the subtotal must reach its minimum; one code per order, applied only
while the order is pending; only a pending order is paid; only a paid order is fulfilled; a
fulfilled order cannot be cancelled (refund it instead); refunds never exceed what was paid.
"""

from __future__ import annotations

import typing
from datetime import date, datetime, time
from typing import Annotated

from pydantic import Field

from compoworld import Conflict, InvalidArgument, Service, registry, tool
from compoworld.runtime.fields import Email, Limit, Offset, Text
from compoworld.runtime.query import paginate, select
from envs._world import world
from envs.storefront.data import StorefrontData
from envs.storefront.state import (
  DiscountCode,
  LineInput,
  Order,
  OrderStatus,
  PaymentMethod,
  Refund,
  ShippingAddress,
  StorefrontState,
  _line,
  _money,
  _priced,
)


@registry.register
class StorefrontService(StorefrontData, Service):
  name = "storefront"
  domain = "sales_crm"
  description = "An online shop: products, customers, orders, payments, discounts and refunds."
  State = StorefrontState

  # --- helpers -----------------------------------------------------------------------------

  def _order(self, order: str) -> Order:
    """An order by id or by order number (with or without the leading "#")."""
    number = order if order.startswith("#") else f"#{order}"
    missing = f"order '{order}' not found (give its id or its number, e.g. #1001)"
    return self.state.orders.find(order) or self.state.orders.get_by(missing, reference=number)

  def _code(self, code: str, subtotal: float) -> DiscountCode:
    """A discount code that can be used now on an order of ``subtotal`` (404 or 409 if not)."""
    found = self.state.discount_codes.get(code.strip().upper())
    if not found.active:
      raise Conflict(f"discount code {found.id} is inactive and cannot be used")
    if found.expires_at is not None and found.expires_at <= self.state.now:
      raise Conflict(
        f"discount code {found.id} expired on {found.expires_at.isoformat()} and cannot be used"
      )
    if subtotal < found.min_subtotal:
      raise Conflict(
        f"discount code {found.id} needs a subtotal of at least {found.min_subtotal:.2f}; "
        f"this order's is {subtotal:.2f}"
      )
    return found

  def _refund(self, order: Order, amount: float, reason: str) -> Refund:
    amount = _money(amount)
    refund = self.state.refunds.insert(
      Refund(
        id=self.state.new_id("ref"),
        order_id=order.id,
        reference=order.reference,
        amount=amount,
        reason=reason,
        created_at=self.state.now,
      )
    )
    self.state.orders.update(order.id, refunded_amount=_money(order.refunded_amount + amount))
    return refund

  # --- reads -------------------------------------------------------------------------------

  @tool(mutates=False, page="product", produces=("sku", "product.name", "money"))
  def list_products(
    self, query: str | None = None, category: str | None = None, include_inactive: bool = False
  ) -> list:
    """List the shop's products by sku with their prices.

    Args:
      query: words that must all appear in the sku, name or category.
      category: only products of this category (e.g. "Hardware").
      include_inactive: also list discontinued products, which cannot be ordered.
    """
    return select(
      self.state.products,
      same={"category": category},
      text=query,
      fields=("id", "name", "category"),
      where=lambda p: include_inactive or p.active,
      key=lambda p: p.id,
    )

  @tool(
    mutates=False,
    page="customer",
    produces=("customer.id", "person.name", "person.email", "person.phone", "company.name"),
  )
  def search_customers(
    self, query: str | None = None, email: Email | None = None, country: str | None = None
  ) -> list:
    """Search customers by name, email or company, sorted by name.

    Args:
      query: words that must all appear in the name, email, company or city.
      email: only the customer with this exact email address.
      country: only customers in this country.
    """
    return select(
      self.state.customers,
      eq={"email": email and email.lower()},
      same={"country": country},
      text=query,
      fields=("name", "email", "company", "city"),
      key=lambda c: (c.name, c.id),
    )

  @tool(mutates=False, consumes=("customer.id",), produces=("order.id", "reference", "money"))
  def get_customer_orders(self, customer_id: str, limit: Limit = 20, offset: Offset = 0) -> dict:
    """A customer's orders, newest first, with how much they have spent in all.

    Args:
      customer_id: the customer's id.
      limit: page size (1-100).
      offset: index of the first order to return.
    """
    customer = self.state.customers.get(customer_id)
    orders = sorted(
      self.state.orders.filter(lambda o: o.customer_id == customer_id),
      key=lambda o: (o.created_at, o.id),
      reverse=True,
    )
    page = paginate(orders, limit, offset)
    page["customer"] = customer
    page["total_spent"] = _money(sum(o.paid_amount - o.refunded_amount for o in orders))
    return page

  @tool(
    mutates=False,
    page="order",
    page_view=lambda o: o.model_dump(exclude={"lines"}),
    produces=("order.id", "reference", "money", "status", "person.email"),
  )
  def list_orders(
    self,
    status: OrderStatus | None = None,
    customer_id: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
  ) -> list:
    """List orders, newest first, without their lines.

    Args:
      status: only orders in this status.
      customer_id: only this customer's orders.
      since: only orders placed at or after this time (ISO 8601).
      until: only orders placed before this time (ISO 8601).
    """
    self.state.customers.check(customer_id)
    if since is not None and until is not None and until <= since:
      raise InvalidArgument(
        f"until ({until.isoformat()}) must be after since ({since.isoformat()})"
      )
    return select(
      self.state.orders,
      eq={"status": status, "customer_id": customer_id},
      ge={"created_at": since},
      lt={"created_at": until},
      key=lambda o: (o.created_at, o.id),
      reverse=True,
    )

  @tool(
    mutates=False,
    consumes=("reference",),
    produces=("reference", "money", "status", "address", "tracking.number", "sku"),
  )
  def get_order(self, order: str) -> dict:
    """Get one order with its lines, amounts, shipping address and refunds.

    Args:
      order: the order's id or its number (e.g. "#1001").
    """
    found = self._order(order)
    refunds = sorted(
      self.state.refunds.filter(lambda r: r.order_id == found.id), key=lambda r: r.created_at
    )
    return {**found.model_dump(), "refunds": refunds}

  @tool(mutates=False, produces=("percentage", "datetime"))
  def list_discount_codes(self, include_inactive: bool = False) -> list[dict]:
    """List discount codes with their percentage, minimum subtotal, expiry and whether they can
    be used now.

    Args:
      include_inactive: also list deactivated codes.
    """
    now = self.state.now
    return [
      {**dict(c), "usable": c.active and (c.expires_at is None or c.expires_at > now)}
      for c in sorted(self.state.discount_codes, key=lambda c: c.id)
      if include_inactive or c.active
    ]

  @tool(mutates=False, consumes=("date",), produces=("money", "number", "sku"))
  def sales_report(self, since: date | None = None, until: date | None = None) -> dict:
    """Sales of orders placed in a period: order counts by status, gross sales, discounts,
    tax, refunds, net sales, the average order value and the best-selling products.

    Args:
      since: first day of the period (ISO 8601); the beginning of time if null.
      until: day after the period (ISO 8601, exclusive); up to now if null.
    """
    if since is not None and until is not None and until <= since:
      raise InvalidArgument(
        f"until ({until.isoformat()}) must be after since ({since.isoformat()})"
      )
    start = datetime.combine(since, time()) if since else None
    end = datetime.combine(until, time()) if until else None
    orders = [
      o
      for o in self.state.orders
      if (start is None or o.created_at >= start) and (end is None or o.created_at < end)
    ]
    sold = [o for o in orders if o.paid_amount > 0]
    by_status = dict.fromkeys(typing.get_args(OrderStatus), 0)
    revenue: dict[str, float] = {}
    for o in orders:
      by_status[o.status] += 1
    for o in sold:
      for ln in o.lines:
        revenue[ln.id] = revenue.get(ln.id, 0.0) + ln.line_total
    gross = _money(sum(o.paid_amount for o in sold))
    refunds = _money(sum(o.refunded_amount for o in sold))
    top = sorted(revenue.items(), key=lambda kv: (-kv[1], kv[0]))[:5]
    return {
      "orders": len(orders),
      "by_status": by_status,
      "paid_orders": len(sold),
      "gross_sales": gross,
      "discounts": _money(sum(o.discount for o in sold)),
      "tax": _money(sum(o.tax for o in sold)),
      "refunds": refunds,
      "net_sales": _money(gross - refunds),
      "average_order_value": _money(gross / len(sold)) if sold else 0.0,
      "top_products": [{"sku": k, "revenue": _money(v)} for k, v in top],
      "currency": world(self.state.seed).currency,
    }

  # --- writes ------------------------------------------------------------------------------

  @tool(
    mutates=True,
    consumes=("customer.id", "sku", "quantity", "address", "city"),
    produces=("order.id", "reference", "money"),
  )
  def create_order(
    self,
    customer_id: str,
    lines: Annotated[list[LineInput], Field(min_length=1)],
    discount_code: str | None = None,
    address: Text | None = None,
    city: Text | None = None,
    country: Text | None = None,
  ) -> Order:
    """Place a pending order for a customer; it ships to the customer's address unless another
    is given, and tax follows the shipping country.

    Args:
      customer_id: the customer's id.
      lines: what is ordered, each {sku, quantity}; one entry per sku.
      discount_code: a discount code to apply (e.g. "WELCOME10").
      address: shipping street address; the customer's if null.
      city: shipping city; the customer's if null.
      country: shipping country; the customer's if null.
    """
    cus = self.state.customers.get(customer_id)
    skus = [ln.sku for ln in lines]
    if len(set(skus)) != len(skus):
      raise InvalidArgument("lines: each sku may appear only once")
    built = []
    for ln in lines:
      product = self.state.products.get(ln.sku)
      if not product.active:
        raise Conflict(f"product {product.id} ({product.name}) is discontinued and cannot be sold")
      built.append(_line(product, ln.quantity))
    ship = ShippingAddress(
      name=cus.name,
      address=address or cus.address,
      city=city or cus.city,
      country=country or cus.country,
    )
    subtotal = _money(sum(ln.line_total for ln in built))
    code = self._code(discount_code, subtotal) if discount_code else None
    if code:
      self.state.discount_codes.update(code.id, times_used=code.times_used + 1)
    return self.state.orders.insert(
      Order(
        id=self.state.new_id("ord"),
        reference=f"#{1001 + len(self.state.orders)}",
        customer_id=cus.id,
        email=cus.email,
        lines=tuple(built),
        discount_code=code.id if code else None,
        currency=world(self.state.seed).currency,
        shipping_address=ship,
        created_at=self.state.now,
        **_priced(built, code.percent if code else 0, ship.country),
      )
    )

  @tool(mutates=True, consumes=("order.id",), produces=("money",))
  def apply_discount(self, order: str, code: Text) -> Order:
    """Apply a discount code to a pending order; the discount and tax are recomputed.

    Args:
      order: the order's id or number.
      code: the discount code (any letter case).
    """
    found = self._order(order)
    if found.status != "pending":
      raise Conflict(
        f"order {found.reference} is {found.status}; a discount applies only to a pending order"
      )
    if found.discount_code:
      raise Conflict(
        f"order {found.reference} already uses code {found.discount_code}; one per order"
      )
    dc = self._code(code, found.subtotal)
    self.state.discount_codes.update(dc.id, times_used=dc.times_used + 1)
    price = _priced(found.lines, dc.percent, found.shipping_address.country)
    return self.state.orders.update(found.id, discount_code=dc.id, **price)

  @tool(mutates=True, consumes=("order.id",))
  def mark_paid(self, order: str, payment_method: PaymentMethod = "card") -> Order:
    """Record the payment of a pending order's total.

    Args:
      order: the order's id or number.
      payment_method: "card", "paypal", "bank_transfer" or "gift_card".
    """
    found = self._order(order)
    if found.status != "pending":
      raise Conflict(f"order {found.reference} is {found.status}; only a pending order can be paid")
    return self.state.orders.update(
      found.id,
      status="paid",
      payment_method=payment_method,
      paid_amount=found.total,
      paid_at=self.state.now,
    )

  @tool(mutates=True, consumes=("order.id", "tracking.number"))
  def fulfill_order(self, order: str, tracking_number: str | None = None) -> Order:
    """Mark a paid order as shipped, optionally with the parcel's tracking number.

    Args:
      order: the order's id or number.
      tracking_number: the carrier's tracking number.
    """
    found = self._order(order)
    if found.status != "paid":
      raise Conflict(
        f"order {found.reference} is {found.status}; only a paid order can be fulfilled"
      )
    return self.state.orders.update(
      found.id,
      status="fulfilled",
      fulfilled_at=self.state.now,
      tracking_number=tracking_number.strip() if tracking_number else None,
    )

  @tool(mutates=True, consumes=("order.id", "text"))
  def cancel_order(self, order: str, reason: Text) -> dict:
    """Cancel a pending or paid order; a paid order is refunded in full.

    Args:
      order: the order's id or number.
      reason: why it is cancelled.
    """
    found = self._order(order)
    if found.status not in ("pending", "paid"):
      hint = "; refund it instead" if found.status == "fulfilled" else ""
      raise Conflict(
        f"order {found.reference} is {found.status}; only a pending or paid order can be "
        f"cancelled{hint}"
      )
    refund = None
    if found.paid_amount > found.refunded_amount:
      refund = self._refund(found, found.paid_amount - found.refunded_amount, "Order cancelled")
    cancelled = self.state.orders.update(
      found.id, status="cancelled", cancel_reason=reason, cancelled_at=self.state.now
    )
    return {"order": cancelled, "refund": refund}

  @tool(mutates=True, consumes=("order.id", "money", "text"), produces=("refund.id",))
  def refund_order(
    self, order: str, amount: Annotated[float, Field(gt=0, le=10_000_000)], reason: Text
  ) -> dict:
    """Refund part or all of a paid or fulfilled order; when refunds reach the paid amount the
    order becomes "refunded".

    Args:
      order: the order's id or number.
      amount: the amount to give back (> 0).
      reason: why the money is returned.
    """
    found = self._order(order)
    if found.paid_amount == 0:
      raise Conflict(
        f"order {found.reference} is {found.status} and was never paid; nothing to refund"
      )
    left = _money(found.paid_amount - found.refunded_amount)
    if _money(amount) > left:
      raise Conflict(
        f"refunds cannot exceed the paid amount: order {found.reference} was paid "
        f"{found.paid_amount:.2f} and {found.refunded_amount:.2f} is already refunded, so at "
        f"most {left:.2f} can be refunded"
      )
    refund = self._refund(found, amount, reason)
    if _money(amount) == left and found.status in ("paid", "fulfilled"):
      self.state.orders.update(found.id, status="refunded")
    return {"refund": refund, "order": self.state.orders.get(found.id)}
