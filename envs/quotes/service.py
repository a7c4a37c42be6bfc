"""Quotes: a CPQ (configure-price-quote) tool like Salesforce CPQ or HubSpot Quotes.

The price book lists the shared world's products by SKU with their list prices. A quote is made
for a customer account and a contact there, in one currency, with line items (SKU, quantity,
list unit price, discount %), a tax rate and a validity date; its subtotal (after discounts),
discount total, tax and total are recomputed on every change. A quote moves draft →
(pending_approval → approved) → sent → accepted / rejected; a sent quote that outlives its
validity date is expired.

Rules a sales rep expects: quantities are at least 1 and SKUs come from the price book; a
discount over 30% on any line needs a manager's approval before the quote can be sent, and the
approver cannot be the rep who owns the quote; editing a quote awaiting approval or approved
sends it back to draft; sent and decided quotes cannot be edited; only a sent quote still within
its validity date can be accepted; a quote needs at least one line to be sent.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta
from typing import Annotated, Literal

from pydantic import Field

from compoworld import Conflict, InvalidArgument, NotFound, Service, registry, tool
from compoworld.runtime.fields import Email, Limit, Offset, Text
from compoworld.runtime.query import page_of, select
from compoworld.runtime.state import Record, ServiceState, Table
from envs._world import WorldUser, employee_email, seeded, world

Status = Literal["draft", "pending_approval", "approved", "sent", "accepted", "rejected", "expired"]
Quantity = Annotated[int, Field(ge=1, le=100_000, description="Number of units, at least 1.")]
Discount = Annotated[float, Field(ge=0, le=100, description="Discount in percent, 0-100.")]
TaxRate = Annotated[float, Field(ge=0, le=0.5, description="Tax rate as a fraction, e.g. 0.08.")]
Currency = Annotated[str, Field(pattern=r"^[A-Z]{3}$", description="ISO 4217 code, e.g. USD.")]

#: A line discounted more than this (in percent) needs approval before the quote is sent.
APPROVAL_THRESHOLD = 30.0
EDITABLE = ("draft", "pending_approval", "approved")
#: Days a new quote stays valid when no date is given.
DEFAULT_VALIDITY = 30


class Product(Record):
  id: str  # the SKU
  name: str
  category: str
  list_price: float


class LineItem(Record):
  sku: str
  name: str
  quantity: int = Field(ge=1)
  unit_price: float
  discount_pct: float = Field(ge=0, le=100)
  amount: float  # quantity x unit price, less the discount


class Quote(Record):
  number: str
  account: str
  contact_email: str
  owner: str  # the sales rep, an employee email
  currency: str
  lines: tuple[LineItem, ...] = ()
  tax_rate: float = Field(ge=0, le=0.5)
  subtotal: float = 0.0
  discount_total: float = 0.0
  tax: float = 0.0
  total: float = 0.0
  status: Status = "draft"
  valid_until: date
  approved_by: str | None = None
  rejection_reason: str | None = None
  created_at: datetime
  updated_at: datetime
  sent_at: datetime | None = None


class QuotesState(ServiceState):
  products: Table[Product]
  quotes: Table[Quote]


def _line(line_id: str, product: Product, quantity: int, discount: float, price=None) -> LineItem:
  """A priced line; ``price`` keeps a line's quoted unit price (default: the list price)."""
  price = product.list_price if price is None else price
  gross = quantity * price
  return LineItem(
    id=line_id,
    sku=product.id,
    name=product.name,
    quantity=quantity,
    unit_price=price,
    discount_pct=round(discount, 2),
    amount=round(gross * (1 - discount / 100), 2),
  )


def _totals(lines: tuple[LineItem, ...], tax_rate: float) -> dict:
  """The quote's computed money fields for these lines."""
  subtotal = round(sum(li.amount for li in lines), 2)
  gross = sum(li.quantity * li.unit_price for li in lines)
  tax = round(subtotal * tax_rate, 2)
  return {
    "lines": lines,
    "tax_rate": tax_rate,
    "subtotal": subtotal,
    "discount_total": round(gross - subtotal, 2),
    "tax": tax,
    "total": round(subtotal + tax, 2),
  }


def _needs_approval(quote: Quote) -> list[str]:
  return [li.id for li in quote.lines if li.discount_pct > APPROVAL_THRESHOLD]


@registry.register
class QuotesService(WorldUser, Service):
  name = "quotes"
  domain = "sales_crm"
  description = "CPQ quoting: price book, quotes with discounts and tax, approval, send, accept."
  State = QuotesState

  @classmethod
  def generate(cls, seed: int, size: int | None) -> QuotesState:
    rng, w, state = seeded(cls, seed)
    for p in w.products:
      state.products.insert(
        Product(id=p.sku, name=p.name, category=p.category, list_price=p.unit_price)
      )
    products = list(state.products)
    reps = [p for p in w.people if p.department == "Sales"] or list(w.people[:4])
    reps = [w.people[0], *reps]  # the user owns some quotes too
    today = state.now.date()
    for i in range(size if size is not None else 25):
      customer = rng.choice(w.customers)
      status = rng.choices(
        ("draft", "pending_approval", "approved", "sent", "accepted", "rejected", "expired"),
        weights=(5, 2, 2, 5, 4, 2, 2),
      )[0]
      # Quotes in approval carry an over-threshold discount; so do a few drafts, not yet submitted.
      big = status in ("pending_approval", "approved") or (status == "draft" and rng.random() < 0.3)
      age = rng.randint(1, 10) if status in EDITABLE else rng.randint(12, 60)
      created = state.now - timedelta(days=age, hours=rng.randint(0, 8))
      valid = created.date() + timedelta(days=DEFAULT_VALIDITY)
      if status == "expired":
        valid = today - timedelta(days=rng.randint(1, 20))
      elif status == "sent":
        valid = today + timedelta(days=rng.randint(3, 25))
      lines = []
      for j, product in enumerate(rng.sample(products, rng.randint(1, 4))):
        discount = rng.choice((0, 0, 5, 10, 15, 20, 25))
        if big and j == 0:
          discount = rng.choice((35, 40, 45))
        qty = rng.randint(1, 4) if product.list_price >= 1000 else rng.choice((2, 5, 10, 20, 50))
        lines.append(_line(state.new_id("li"), product, qty, discount))
      owner = rng.choice(reps).email
      sent = status in ("sent", "accepted", "rejected", "expired")
      state.quotes.insert(
        Quote(
          id=state.new_id("quo"),
          number=f"Q-{created.year}-{1040 + i:04d}",
          account=customer.name,
          contact_email=rng.choice(customer.contacts).email,
          owner=owner,
          currency=w.currency,
          status=status,
          valid_until=valid,
          approved_by=rng.choice([r for r in reps if r.email != owner]).email
          if status == "approved"
          else None,
          rejection_reason="Price too high" if status == "rejected" else None,
          created_at=created,
          updated_at=created + timedelta(hours=rng.randint(1, 48)),
          sent_at=created + timedelta(days=1) if sent else None,
          **_totals(tuple(lines), rng.choice((0.0, 0.07, 0.08, 0.2))),
        )
      )
    return state

  # --- helpers -----------------------------------------------------------------------------

  def _editable(self, quote_id: str) -> Quote:
    quote = self.state.quotes.get(quote_id)
    if quote.status not in EDITABLE:
      raise Conflict(
        f"quote '{quote_id}' is {quote.status} and cannot be edited; only quotes in "
        f"{', '.join(EDITABLE)} can"
      )
    return quote

  def _save(self, quote: Quote, lines: tuple[LineItem, ...], tax_rate: float, **changes) -> Quote:
    """Stores new lines and totals; any edit voids a pending or granted approval."""
    return self.state.quotes.update(
      quote.id,
      status="draft",
      approved_by=None,
      updated_at=self.state.now,
      **_totals(lines, tax_rate),
      **changes,
    )

  def _line_of(self, quote: Quote, line_id: str) -> LineItem:
    line = next((li for li in quote.lines if li.id == line_id), None)
    if line is None:
      raise NotFound(f"line item '{line_id}' not found on quote '{quote.id}'")
    return line

  def _valid_date(self, value: date) -> date:
    if value < self.state.now.date():
      raise InvalidArgument(f"valid_until ({value.isoformat()}) must be today or later")
    return value

  # --- reads -------------------------------------------------------------------------------

  @tool(mutates=False, page="product", produces=("sku", "product.name", "money"))
  def list_products(self, query: str | None = None, category: str | None = None) -> list:
    """List the price book in SKU order.

    Args:
      query: words that must all appear in the product name, SKU or category.
      category: only this category (e.g. "Hardware").
    """
    return select(
      self.state.products,
      same={"category": category},
      text=query,
      fields=("name", "id", "category"),
      key=lambda p: p.id,
    )

  @tool(mutates=False, consumes=("sku", "quantity"), produces=("money", "product.name"))
  def get_price(self, sku: str, quantity: Quantity = 1, discount_pct: Discount = 0) -> dict:
    """Price a quantity of one product from the price book, with an optional discount.

    Args:
      sku: the product's SKU.
      quantity: number of units.
      discount_pct: discount in percent.
    """
    product = self.state.products.get(sku)
    line = _line("preview", product, quantity, discount_pct)
    return {
      "sku": product.id,
      "name": product.name,
      "unit_price": product.list_price,
      "quantity": quantity,
      "discount_pct": line.discount_pct,
      "amount": line.amount,
      "needs_approval": discount_pct > APPROVAL_THRESHOLD,
    }

  @tool(mutates=False, produces=("quote.id", "money", "sku", "status", "date", "person.email"))
  def get_quote(self, quote_id: str) -> Quote:
    """Get one quote with its lines, totals, status and validity date.

    Args:
      quote_id: the quote's id.
    """
    return self.state.quotes.get(quote_id)

  @tool(mutates=False, produces=("quote.id", "money", "status", "company.name", "reference"))
  def list_quotes(
    self,
    status: Status | None = None,
    account: str | None = None,
    contact_email: Email | None = None,
    limit: Limit = 20,
    offset: Offset = 0,
  ) -> dict:
    """List quotes, newest first, without their lines.

    Args:
      status: only quotes in this status.
      account: words that must all appear in the account name.
      contact_email: only quotes for this contact.
      limit: page size (1-100).
      offset: index of the first quote to return.
    """
    return page_of(
      self.state.quotes,
      eq={"status": status, "contact_email": contact_email and contact_email.lower()},
      text=account,
      fields=("account",),
      key=lambda q: (q.created_at, q.id),
      reverse=True,
      limit=limit,
      offset=offset,
      view=lambda q: q.model_dump(exclude={"lines"}),
    )

  # --- writes: building a quote ------------------------------------------------------------

  @tool(
    mutates=True,
    consumes=("company.name", "person.email", "date", "currency", "percentage"),
    produces=("quote.id", "reference"),
  )
  def create_quote(
    self,
    account: Text,
    contact_email: Email,
    valid_until: date | None = None,
    tax_rate: TaxRate = 0.0,
    currency: Currency | None = None,
  ) -> Quote:
    """Start an empty draft quote owned by the user; add products with add_line_item.

    Args:
      account: the customer's company name.
      contact_email: the customer contact the quote is for.
      valid_until: last day the quote can be accepted (ISO 8601 date; default 30 days on).
      tax_rate: tax rate as a fraction (0-0.5), e.g. 0.08 for 8%.
      currency: ISO 4217 code (default: the company's currency).
    """
    today = self.state.now.date()
    valid = self._valid_date(valid_until) if valid_until else today + timedelta(DEFAULT_VALIDITY)
    return self.state.quotes.insert(
      Quote(
        id=self.state.new_id("quo"),
        number=f"Q-{today.year}-{1040 + len(self.state.quotes):04d}",
        account=account,
        contact_email=contact_email.lower(),
        owner=self.user,
        currency=currency or world(self.state.seed).currency,
        tax_rate=tax_rate,
        valid_until=valid,
        created_at=self.state.now,
        updated_at=self.state.now,
      )
    )

  @tool(mutates=True, consumes=("quote.id", "date", "person.email", "percentage"))
  def update_quote(
    self,
    quote_id: str,
    valid_until: date | None = None,
    tax_rate: TaxRate | None = None,
    contact_email: Email | None = None,
  ) -> Quote:
    """Change a quote's validity date, tax rate or contact; only supplied fields change.
    Editing a quote awaiting approval or approved returns it to draft.

    Args:
      quote_id: the quote's id.
      valid_until: new last day the quote can be accepted (ISO 8601 date), today or later.
      tax_rate: new tax rate as a fraction (0-0.5).
      contact_email: new customer contact.
    """
    quote = self._editable(quote_id)
    changes: dict = {}
    if valid_until is not None:
      changes["valid_until"] = self._valid_date(valid_until)
    if contact_email is not None:
      changes["contact_email"] = contact_email.lower()
    if not changes and tax_rate is None:
      raise InvalidArgument("update_quote: supply at least one field to change")
    rate = quote.tax_rate if tax_rate is None else tax_rate
    return self._save(quote, quote.lines, rate, **changes)

  @tool(mutates=True, consumes=("quote.id", "sku", "quantity", "percentage"), produces=("money",))
  def add_line_item(
    self, quote_id: str, sku: str, quantity: Quantity = 1, discount_pct: Discount = 0
  ) -> Quote:
    """Add a product at its list price to a quote; a SKU appears on at most one line. Editing
    a quote awaiting approval or approved returns it to draft.

    Args:
      quote_id: the quote's id.
      sku: the product's SKU from the price book.
      quantity: number of units (at least 1).
      discount_pct: discount in percent; over 30 needs approval before sending.
    """
    quote = self._editable(quote_id)
    product = self.state.products.get(sku)
    same = next((li for li in quote.lines if li.sku == sku), None)
    if same is not None:
      raise Conflict(
        f"{sku} is already on quote '{quote_id}' as line '{same.id}'; update that line"
      )
    line = _line(self.state.new_id("li"), product, quantity, discount_pct)
    return self._save(quote, (*quote.lines, line), quote.tax_rate)

  @tool(mutates=True, consumes=("quote.id", "quantity", "percentage"), produces=("money",))
  def update_line_item(
    self,
    quote_id: str,
    line_id: str,
    quantity: Quantity | None = None,
    discount_pct: Discount | None = None,
  ) -> Quote:
    """Change a line's quantity or discount; only supplied fields change. Editing a quote
    awaiting approval or approved returns it to draft.

    Args:
      quote_id: the quote's id.
      line_id: the line item's id.
      quantity: new number of units (at least 1).
      discount_pct: new discount in percent.
    """
    quote = self._editable(quote_id)
    old = self._line_of(quote, line_id)
    if quantity is None and discount_pct is None:
      raise InvalidArgument("update_line_item: supply quantity or discount_pct")
    new = _line(
      old.id,
      self.state.products.get(old.sku),
      old.quantity if quantity is None else quantity,
      old.discount_pct if discount_pct is None else discount_pct,
      old.unit_price,  # a price-book change does not reprice a line already quoted
    )
    lines = tuple(new if li.id == line_id else li for li in quote.lines)
    return self._save(quote, lines, quote.tax_rate)

  @tool(mutates=True, consumes=("quote.id",))
  def remove_line_item(self, quote_id: str, line_id: str) -> Quote:
    """Remove a line from a quote. Editing a quote awaiting approval or approved returns it to
    draft.

    Args:
      quote_id: the quote's id.
      line_id: the line item's id.
    """
    quote = self._editable(quote_id)
    self._line_of(quote, line_id)
    lines = tuple(li for li in quote.lines if li.id != line_id)
    return self._save(quote, lines, quote.tax_rate)

  # --- writes: workflow --------------------------------------------------------------------

  @tool(mutates=True, consumes=("quote.id",))
  def request_approval(self, quote_id: str) -> Quote:
    """Submit a draft quote with a discount over 30% for a manager's approval.

    Args:
      quote_id: the quote's id.
    """
    quote = self.state.quotes.get(quote_id)
    if quote.status != "draft":
      raise Conflict(f"quote '{quote_id}' is {quote.status}; only a draft can be submitted")
    if not _needs_approval(quote):
      raise Conflict(
        f"quote '{quote_id}' has no discount over {APPROVAL_THRESHOLD:g}% and needs no "
        "approval; send it directly"
      )
    return self.state.quotes.update(quote_id, status="pending_approval", updated_at=self.state.now)

  @tool(mutates=True, consumes=("quote.id", "person.email"))
  def approve_quote(self, quote_id: str, approver: Email) -> Quote:
    """Approve a quote awaiting approval; the approver is an employee other than its owner.

    Args:
      quote_id: the quote's id.
      approver: the approving manager's employee email.
    """
    quote = self.state.quotes.get(quote_id)
    approver = employee_email(self.state.seed, approver, "approver")
    if quote.status != "pending_approval":
      raise Conflict(f"quote '{quote_id}' is {quote.status}; only pending_approval can be approved")
    if approver == quote.owner:
      raise Conflict(f"{approver} owns quote '{quote_id}' and cannot approve their own discount")
    return self.state.quotes.update(
      quote_id, status="approved", approved_by=approver, updated_at=self.state.now
    )

  @tool(mutates=True, consumes=("quote.id",), produces=("datetime",))
  def send_quote(self, quote_id: str) -> Quote:
    """Send a quote to its contact. A draft can be sent only when no line is discounted over
    30%; otherwise it must be approved first.

    Args:
      quote_id: the quote's id.
    """
    quote = self.state.quotes.get(quote_id)
    if quote.status not in ("draft", "approved"):
      raise Conflict(
        f"quote '{quote_id}' is {quote.status}; only a draft or approved quote can be sent"
      )
    if not quote.lines:
      raise Conflict(f"quote '{quote_id}' has no line items; add products before sending")
    big = _needs_approval(quote)
    if quote.status == "draft" and big:
      raise Conflict(
        f"quote '{quote_id}' has lines discounted over {APPROVAL_THRESHOLD:g}% "
        f"({', '.join(big)}); call request_approval and get it approved before sending"
      )
    if quote.valid_until < self.state.now.date():
      raise Conflict(
        f"quote '{quote_id}' was valid until {quote.valid_until}; extend valid_until first"
      )
    return self.state.quotes.update(
      quote_id, status="sent", sent_at=self.state.now, updated_at=self.state.now
    )

  @tool(mutates=True, consumes=("quote.id",))
  def accept_quote(self, quote_id: str) -> Quote:
    """Record the customer's acceptance of a sent quote that is still valid.

    Args:
      quote_id: the quote's id.
    """
    quote = self.state.quotes.get(quote_id)
    if quote.status != "sent":
      raise Conflict(f"quote '{quote_id}' is {quote.status}; only a sent quote can be accepted")
    if quote.valid_until < self.state.now.date():
      raise Conflict(
        f"quote '{quote_id}' expired on {quote.valid_until} and can no longer be accepted"
      )
    return self.state.quotes.update(quote_id, status="accepted", updated_at=self.state.now)

  @tool(mutates=True, consumes=("quote.id", "text"))
  def reject_quote(self, quote_id: str, reason: Text) -> Quote:
    """Record the customer's rejection of a sent quote.

    Args:
      quote_id: the quote's id.
      reason: why the customer declined.
    """
    quote = self.state.quotes.get(quote_id)
    if quote.status != "sent":
      raise Conflict(f"quote '{quote_id}' is {quote.status}; only a sent quote can be rejected")
    return self.state.quotes.update(
      quote_id, status="rejected", rejection_reason=reason, updated_at=self.state.now
    )
