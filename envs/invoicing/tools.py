"""Invoicing: a QuickBooks / Stripe Invoicing-like service of customers, invoices and payments.

Customers are the world's customer companies, each billed at the email of one of its contacts,
in the currency of its country and on its own payment terms (net 15-60 days). Products are the
world's catalogue; list prices are kept in the home currency and converted to a customer's
currency with fixed price-list rates when a line names a SKU without a price.

An invoice (reference ``INV-1042``) holds line items (description, optional SKU, quantity, unit
price, tax rate) and stored totals: subtotal, tax, total, amount paid, amount credited and amount
due. Its workflow is draft → sent → partially_paid → paid, or void. An invoice is overdue while
it is sent or partially paid and its due date is before today. Payments (card, ach, wire,
check) and credit notes (``CN-2001``) reduce the amount due; an invoice whose amount due
reaches zero is paid.

Rules an accounts-receivable clerk expects: only drafts can be edited (a sent invoice is changed
with a credit note or voided); a draft needs at least one line before it is sent; payments are
recorded on sent invoices only and never exceed the amount due; a paid or void invoice takes no
more payments or credits; an invoice can be voided only while nothing has been paid or
credited on it; the due date is never before the issue date.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta

from compoworld import Conflict, InvalidArgument, NotFound, Service, registry, tool
from compoworld.runtime.fields import Limit, Offset, Text
from compoworld.runtime.query import page_of, paginate, select, text_matches
from envs.invoicing.data import InvoicingData
from envs.invoicing.state import (
  OPEN,
  PRICE_LIST_RATE,
  Amount,
  CreditNote,
  Invoice,
  InvoiceStatus,
  InvoicingState,
  LineInput,
  LineItem,
  Method,
  Payment,
  Product,
  Quantity,
  TaxRate,
  UnitPrice,
  _r,
  _totals,
)


@registry.register
class InvoicingService(InvoicingData, Service):
  name = "invoicing"
  domain = "finance"
  description = "Customer invoices, line items, payments, credit notes and receivables aging."
  State = InvoicingState

  @staticmethod
  def _pay(state: InvoicingState, invoice_id: str, amount: float, rng, at: datetime) -> None:
    inv = state.invoices.get(invoice_id)
    method = rng.choice(("card", "ach", "ach", "wire", "check"))
    state.payments.insert(
      Payment(
        id=state.new_id("pay"),
        invoice_id=inv.id,
        customer_id=inv.customer_id,
        amount=amount,
        currency=inv.currency,
        method=method,
        reference=f"CHK-{rng.randint(10000, 99999)}" if method == "check" else "",
        received_at=at,
      )
    )
    InvoicingService._apply(state, inv, paid=amount, at=at)

  @staticmethod
  def _credit(state: InvoicingState, invoice_id: str, amount: float, reason: str, at) -> CreditNote:
    inv = state.invoices.get(invoice_id)
    note = state.credit_notes.insert(
      CreditNote(
        id=state.new_id("cn"),
        number=f"CN-{state.next_credit_number}",
        invoice_id=inv.id,
        customer_id=inv.customer_id,
        amount=amount,
        currency=inv.currency,
        reason=reason,
        issued_at=at,
      )
    )
    state.next_credit_number += 1
    InvoicingService._apply(state, inv, credited=amount, at=at)
    return note

  @staticmethod
  def _apply(state, inv: Invoice, at: datetime, paid: float = 0.0, credited: float = 0.0):
    due = _r(inv.amount_due - paid - credited)
    if due == 0:
      status, paid_at = "paid", at
    else:
      status, paid_at = ("partially_paid" if inv.amount_paid + paid > 0 else inv.status), None
    return state.invoices.update(
      inv.id,
      amount_paid=_r(inv.amount_paid + paid),
      amount_credited=_r(inv.amount_credited + credited),
      amount_due=due,
      status=status,
      paid_at=paid_at,
    )

  @staticmethod
  def _line(line_id, product, customer, quantity, unit_price, tax_rate, description) -> LineItem:
    if unit_price is None:
      if product is None:
        raise InvalidArgument(f"line {line_id}: give a unit_price or a sku")
      rate = PRICE_LIST_RATE.get(customer.currency, 1.0)
      unit_price = round(product.unit_price * rate, 0 if customer.currency == "JPY" else 2)
    if not description:
      if product is None:
        raise InvalidArgument(f"line {line_id}: give a description or a sku")
      description = product.name
    return LineItem(
      id=line_id,
      description=description,
      sku=product.id if product else None,
      quantity=quantity,
      unit_price=unit_price,
      tax_rate=customer.tax_rate if tax_rate is None else tax_rate,
      amount=_r(quantity * unit_price),
    )

  # --- helpers -----------------------------------------------------------------------------

  def _invoice(self, key: str) -> Invoice:
    """An invoice by id or by reference (agents often only know the INV- number)."""
    missing = f"invoice '{key}' not found (give an id such as inv_... or an INV- number)"
    return self.state.invoices.find(key) or self.state.invoices.get_by(missing, reference=key)

  def _overdue_days(self, inv: Invoice) -> int:
    days = (self.state.now.date() - inv.due_date).days
    return days if inv.status in OPEN and days > 0 else 0

  def _view(self, inv: Invoice) -> dict:
    return {
      **inv.model_dump(),
      "customer_name": self.state.customers.get(inv.customer_id).name,
      "overdue": self._overdue_days(inv) > 0,
      "days_overdue": self._overdue_days(inv),
    }

  def _draft(self, invoice_id: str) -> Invoice:
    inv = self._invoice(invoice_id)
    if inv.status != "draft":
      raise Conflict(
        f"invoice {inv.reference} is {inv.status}; only draft invoices can be edited "
        "(issue a credit note or void it instead)"
      )
    return inv

  def _set_lines(self, inv: Invoice, lines: tuple[LineItem, ...]) -> dict:
    subtotal, tax, total = _totals(lines)
    new = self.state.invoices.update(
      inv.id, lines=lines, subtotal=subtotal, tax=tax, total=total, amount_due=total
    )
    return self._view(new)

  def _product(self, sku: str | None) -> Product | None:
    return None if sku is None else self.state.products.get(sku)

  # --- reads -------------------------------------------------------------------------------

  @tool(
    mutates=False,
    page="customer",
    produces=("customer.id", "company.name", "person.email", "currency", "duration"),
  )
  def list_customers(self, query: str | None = None) -> list:
    """List customers with their billing contact, currency and payment terms, by name.

    Args:
      query: words that must all appear in the name, domain or billing contact.
    """
    return select(
      self.state.customers,
      text=query,
      fields=("name", "domain", "billing_contact", "billing_email"),
      key=lambda c: (c.name, c.id),
    )

  @tool(mutates=False, produces=("invoice.id", "reference", "money", "date", "status"))
  def list_invoices(
    self,
    status: InvoiceStatus | None = None,
    customer_id: str | None = None,
    overdue: bool | None = None,
    query: str | None = None,
    limit: Limit = 20,
    offset: Offset = 0,
  ) -> dict:
    """List invoices, newest issue date first, with their totals and overdue flag.

    Args:
      status: only invoices in this status.
      customer_id: only this customer's invoices.
      overdue: true for only overdue invoices, false for only those not overdue.
      query: words that must all appear in the reference, memo or customer name.
      limit: page size (1-100).
      offset: index of the first invoice to return.
    """
    self.state.customers.check(customer_id)
    names = {c.id: c.name for c in self.state.customers}
    return page_of(
      self.state.invoices,
      eq={"status": status, "customer_id": customer_id},
      where=lambda i: (
        (overdue is None or (self._overdue_days(i) > 0) == overdue)
        and text_matches(query, i.reference, i.memo, names[i.customer_id])
      ),
      key=lambda i: (i.issue_date, i.reference),
      reverse=True,
      limit=limit,
      offset=offset,
      view=self._view,
    )

  @tool(
    mutates=False,
    consumes=("reference",),
    produces=("invoice.id", "reference", "money", "date", "status", "sku", "person.email"),
  )
  def get_invoice(self, invoice_id: str) -> dict:
    """Get one invoice with its lines, totals, payments and credit notes.

    Args:
      invoice_id: the invoice's id (inv_...) or its reference (INV-1042).
    """
    inv = self._invoice(invoice_id)
    cust = self.state.customers.get(inv.customer_id)
    return {
      **self._view(inv),
      "billing_email": cust.billing_email,
      "payments": sorted(
        self.state.payments.filter(lambda p: p.invoice_id == inv.id), key=lambda p: p.received_at
      ),
      "credit_notes": self.state.credit_notes.filter(lambda n: n.invoice_id == inv.id),
    }

  @tool(mutates=False, page="payment", produces=("payment.id", "money", "datetime", "invoice.id"))
  def list_payments(
    self,
    invoice_id: str | None = None,
    customer_id: str | None = None,
    method: Method | None = None,
  ) -> list:
    """List received payments, newest first.

    Args:
      invoice_id: only payments of this invoice (id or INV- reference).
      customer_id: only payments from this customer.
      method: only payments made this way ("card", "ach", "wire" or "check").
    """
    inv_id = self._invoice(invoice_id).id if invoice_id is not None else None
    self.state.customers.check(customer_id)
    return select(
      self.state.payments,
      eq={"invoice_id": inv_id, "customer_id": customer_id, "method": method},
      key=lambda p: (p.received_at, p.id),
      reverse=True,
    )

  @tool(mutates=False, consumes=("customer.id",), produces=("money", "currency", "date"))
  def customer_balance(self, customer_id: str) -> dict:
    """What a customer owes: the amount due on its open (sent or partially paid) invoices, and
    how much of it is overdue.

    Args:
      customer_id: the customer's id.
    """
    cust = self.state.customers.get(customer_id)
    open_ = [i for i in self.state.invoices if i.customer_id == cust.id and i.status in OPEN]
    late = [i for i in open_ if self._overdue_days(i) > 0]
    return {
      "customer_id": cust.id,
      "customer_name": cust.name,
      "currency": cust.currency,
      "open_invoices": len(open_),
      "balance": _r(sum(i.amount_due for i in open_)),
      "overdue_invoices": len(late),
      "overdue_balance": _r(sum(i.amount_due for i in late)),
      "oldest_due_date": min((i.due_date for i in open_), default=None),
    }

  @tool(
    mutates=False, produces=("invoice.id", "reference", "money", "person.email", "company.name")
  )
  def overdue_report(
    self, customer_id: str | None = None, limit: Limit = 20, offset: Offset = 0
  ) -> dict:
    """Receivables aging: every overdue invoice, most overdue first, with the billing email to
    chase, its aging bucket (1-30, 31-60, 61-90, 90+ days) and totals per currency.

    Args:
      customer_id: only this customer's overdue invoices.
      limit: page size (1-100).
      offset: index of the first invoice to return.
    """
    self.state.customers.check(customer_id)
    rows, totals = [], {}
    for inv in self.state.invoices:
      days = self._overdue_days(inv)
      if not days or (customer_id is not None and inv.customer_id != customer_id):
        continue
      cust = self.state.customers.get(inv.customer_id)
      bucket = "1-30" if days <= 30 else "31-60" if days <= 60 else "61-90" if days <= 90 else "90+"
      rows.append(
        {
          "invoice_id": inv.id,
          "reference": inv.reference,
          "customer_id": cust.id,
          "customer_name": cust.name,
          "billing_email": cust.billing_email,
          "due_date": inv.due_date,
          "days_overdue": days,
          "bucket": bucket,
          "amount_due": inv.amount_due,
          "currency": inv.currency,
        }
      )
      totals[inv.currency] = _r(totals.get(inv.currency, 0.0) + inv.amount_due)
    rows.sort(key=lambda r: (-r["days_overdue"], r["reference"]))
    page = paginate(rows, limit, offset)
    page["totals_by_currency"] = dict(sorted(totals.items()))
    return page

  # --- writes ------------------------------------------------------------------------------

  @tool(
    mutates=True,
    consumes=("customer.id", "sku", "quantity", "money", "date"),
    produces=("invoice.id", "reference"),
  )
  def create_invoice(
    self,
    customer_id: str,
    lines: list[LineInput] = (),
    issue_date: date | None = None,
    due_date: date | None = None,
    memo: str = "",
  ) -> dict:
    """Create a draft invoice for a customer, in the customer's currency.

    Args:
      customer_id: the customer to bill.
      lines: line items, each with a description and/or sku, quantity, unit_price, tax_rate.
      issue_date: the invoice date (YYYY-MM-DD); today if omitted.
      due_date: the payment due date, not before the issue date; issue date plus the customer's
        payment terms if omitted.
      memo: a note printed on the invoice.
    """
    cust = self.state.customers.get(customer_id)
    issue = issue_date or self.state.now.date()
    due = due_date or issue + timedelta(days=cust.payment_terms_days)
    if due < issue:
      raise InvalidArgument(f"due_date ({due}) must not be before issue_date ({issue})")
    items = tuple(
      self._line(
        f"L{k}",
        self._product(li.sku),
        cust,
        li.quantity,
        li.unit_price,
        li.tax_rate,
        li.description,
      )
      for k, li in enumerate(lines, 1)
    )
    subtotal, tax, total = _totals(items)
    inv = self.state.invoices.insert(
      Invoice(
        id=self.state.new_id("inv"),
        reference=f"INV-{self.state.next_invoice_number}",
        customer_id=cust.id,
        currency=cust.currency,
        issue_date=issue,
        due_date=due,
        memo=memo,
        lines=items,
        subtotal=subtotal,
        tax=tax,
        total=total,
        amount_due=total,
        created_at=self.state.now,
      )
    )
    self.state.next_invoice_number += 1
    return self._view(inv)

  @tool(mutates=True, consumes=("invoice.id", "sku", "quantity", "money"))
  def add_line_item(
    self,
    invoice_id: str,
    description: str | None = None,
    sku: str | None = None,
    quantity: Quantity = 1.0,
    unit_price: UnitPrice | None = None,
    tax_rate: TaxRate | None = None,
  ) -> dict:
    """Add a line to a draft invoice; totals are recomputed.

    Args:
      invoice_id: the invoice's id or reference.
      description: what is billed; the product name if a sku is given.
      sku: a product SKU; its list price (in the invoice currency) is the default unit price.
      quantity: number of units.
      unit_price: price per unit; required without a sku.
      tax_rate: tax rate such as 0.08; the customer's rate if omitted.
    """
    inv = self._draft(invoice_id)
    cust = self.state.customers.get(inv.customer_id)
    number = max((int(li.id[1:]) for li in inv.lines), default=0) + 1
    line = self._line(
      f"L{number}", self._product(sku), cust, quantity, unit_price, tax_rate, description
    )
    return self._set_lines(inv, (*inv.lines, line))

  @tool(mutates=True, consumes=("invoice.id",))
  def remove_line_item(self, invoice_id: str, line_id: str) -> dict:
    """Remove a line from a draft invoice; totals are recomputed.

    Args:
      invoice_id: the invoice's id or reference.
      line_id: the line's id (L1, L2, ...).
    """
    inv = self._draft(invoice_id)
    kept = tuple(li for li in inv.lines if li.id != line_id)
    if len(kept) == len(inv.lines):
      raise NotFound(
        f"line '{line_id}' not found on invoice {inv.reference}; its lines are "
        + (", ".join(li.id for li in inv.lines) or "none")
      )
    return self._set_lines(inv, kept)

  @tool(mutates=True, consumes=("invoice.id",), produces=("reference", "person.email", "money"))
  def send_invoice(self, invoice_id: str) -> dict:
    """Send a draft invoice to the customer's billing email; it can no longer be edited.

    Args:
      invoice_id: the invoice's id or reference.
    """
    inv = self._invoice(invoice_id)
    if inv.status != "draft":
      raise Conflict(f"invoice {inv.reference} is already {inv.status}; only drafts are sent")
    if not inv.lines or inv.total <= 0:
      raise Conflict(f"invoice {inv.reference} has no billable lines; add a line item first")
    new = self.state.invoices.update(inv.id, status="sent", sent_at=self.state.now)
    billing = self.state.customers.get(inv.customer_id).billing_email
    return {**self._view(new), "sent_to": billing}

  @tool(mutates=True, consumes=("invoice.id", "money"), produces=("payment.id",))
  def record_payment(
    self, invoice_id: str, amount: Amount, method: Method, reference: str = ""
  ) -> dict:
    """Record a payment received against a sent invoice.

    Args:
      invoice_id: the invoice's id or reference.
      amount: the amount received, in the invoice currency; at most the amount due.
      method: how it was paid: "card", "ach", "wire" or "check".
      reference: the check number or bank reference.
    """
    inv = self._invoice(invoice_id)
    if _r(amount) == 0:
      raise InvalidArgument(f"amount must be at least 0.01, got {amount}")
    if inv.status == "draft":
      raise Conflict(f"invoice {inv.reference} is a draft; send it before recording payments")
    if inv.status in ("paid", "void"):
      raise Conflict(f"invoice {inv.reference} is {inv.status}; it takes no more payments")
    if _r(amount) > inv.amount_due:
      raise Conflict(
        f"payment {_r(amount)} {inv.currency} exceeds the amount due on {inv.reference} "
        f"({inv.amount_due} {inv.currency}); record at most the amount due"
      )
    payment = Payment(
      id=self.state.new_id("pay"),
      invoice_id=inv.id,
      customer_id=inv.customer_id,
      amount=_r(amount),
      currency=inv.currency,
      method=method,
      reference=reference,
      received_at=self.state.now,
    )
    self.state.payments.insert(payment)
    new = self._apply(self.state, inv, paid=payment.amount, at=self.state.now)
    return {"payment": payment, "invoice": self._view(new)}

  @tool(mutates=True, consumes=("invoice.id", "money", "text"), produces=("credit_note.id",))
  def issue_credit_note(self, invoice_id: str, amount: Amount, reason: Text) -> dict:
    """Credit part or all of the amount due on a sent invoice (a discount, a return, an error).

    Args:
      invoice_id: the invoice's id or reference.
      amount: the amount credited, in the invoice currency; at most the amount due.
      reason: why the customer is credited.
    """
    inv = self._invoice(invoice_id)
    if inv.status == "draft":
      raise Conflict(f"invoice {inv.reference} is a draft; edit its lines instead of crediting")
    if inv.status in ("paid", "void"):
      raise Conflict(f"invoice {inv.reference} is {inv.status}; nothing is left to credit")
    if _r(amount) > inv.amount_due:
      raise Conflict(
        f"credit {_r(amount)} {inv.currency} exceeds the amount due on {inv.reference} "
        f"({inv.amount_due} {inv.currency})"
      )
    note = self._credit(self.state, inv.id, _r(amount), reason, self.state.now)
    return {"credit_note": note, "invoice": self._view(self.state.invoices.get(inv.id))}

  @tool(mutates=True, consumes=("invoice.id", "text"))
  def void_invoice(self, invoice_id: str, reason: str = "") -> dict:
    """Void an invoice that nothing has been paid or credited on; it stays listed as void.

    Args:
      invoice_id: the invoice's id or reference.
      reason: why it is voided.
    """
    inv = self._invoice(invoice_id)
    if inv.status == "void":
      raise Conflict(f"invoice {inv.reference} is already void")
    if inv.amount_paid > 0 or inv.amount_credited > 0:
      raise Conflict(
        f"invoice {inv.reference} has {inv.amount_paid} {inv.currency} paid and "
        f"{inv.amount_credited} credited; only invoices with nothing paid or credited can be "
        "voided (issue a credit note for the rest instead)"
      )
    new = self.state.invoices.update(
      inv.id, status="void", voided_at=self.state.now, void_reason=reason, amount_due=0.0
    )
    return self._view(new)
