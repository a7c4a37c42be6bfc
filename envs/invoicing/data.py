"""Invoicing: the seeded data generator, a base of the service class in ``tools``."""

from __future__ import annotations

from datetime import datetime, timedelta

from envs._world import seeded
from envs.invoicing.state import (
  COUNTRY,
  Customer,
  Invoice,
  InvoicingState,
  Product,
  _totals,
)


class InvoicingData:
  """Draws the initial state from a seed: ``generate`` and the helpers only it uses."""

  @classmethod
  def generate(cls, seed: int, size: int | None) -> InvoicingState:
    rng, w, state = seeded(cls, seed)
    for p in w.products:
      state.products.insert(
        Product(id=p.sku, name=p.name, category=p.category, unit_price=p.unit_price)
      )
    for c in w.customers:
      contact = next((k for k in c.contacts if k.title == "Finance Manager"), c.contacts[0])
      state.customers.insert(
        Customer(
          id=state.new_id("cus"),
          name=c.name,
          domain=c.domain,
          billing_contact=contact.name,
          billing_email=contact.email,
          currency=COUNTRY.get(c.country, (w.currency,))[0],
          payment_terms_days=rng.choice((15, 30, 30, 45, 60)),
          tax_rate=COUNTRY.get(c.country, (0, 0, 0.0))[2],
        )
      )
    customers, products, today = list(state.customers), list(state.products), state.now.date()
    n = size if size is not None else 30
    # The first six cover every status (and an overdue invoice), so every rule has a record.
    forced = ["draft", "overdue", "sent", "partially_paid", "paid", "void"]
    plans = []
    for i in range(n):
      kind = (
        forced[i]
        if i < len(forced)
        else rng.choice(
          ("draft", "sent", "overdue", "partially_paid", "paid", "paid", "paid", "void")
        )
      )
      cust = rng.choice(customers)
      terms = cust.payment_terms_days
      back = {
        "draft": rng.randint(0, 4),
        "overdue": terms + rng.randint(3, 40),
        "sent": rng.randint(1, terms - 1),
        "partially_paid": rng.randint(5, 80),
        "paid": rng.randint(10, 120),
        "void": rng.randint(5, 90),
      }[kind]
      plans.append((today - timedelta(days=back), kind, cust))
    plans.sort(key=lambda p: p[0])  # references grow with the issue date
    for issue, kind, cust in plans:
      lines = []
      for k, prod in enumerate(rng.sample(products, rng.randint(1, 4)), 1):
        qty = {"Hardware": (1, 40), "Supplies": (5, 200), "Software": (5, 80)}.get(
          prod.category, (1, 3)
        )
        lines.append(cls._line(f"L{k}", prod, cust, rng.randint(*qty), None, None, None))
      subtotal, tax, total = _totals(tuple(lines))
      inv = Invoice(
        id=state.new_id("inv"),
        reference=f"INV-{state.next_invoice_number}",
        customer_id=cust.id,
        currency=cust.currency,
        status="draft" if kind == "draft" else "sent",
        issue_date=issue,
        due_date=issue + timedelta(days=cust.payment_terms_days),
        memo=rng.choice(("", "", "Thank you for your business.", f"PO {rng.randint(4000, 9999)}")),
        lines=tuple(lines),
        subtotal=subtotal,
        tax=tax,
        total=total,
        amount_due=total,
        created_at=datetime.combine(issue, datetime.min.time()).replace(hour=9),
        sent_at=None
        if kind == "draft"
        else datetime.combine(issue, datetime.min.time()).replace(hour=10),
      )
      state.next_invoice_number += 1
      state.invoices.insert(inv)
      received = min(
        state.now - timedelta(hours=1),
        inv.created_at + timedelta(days=rng.randint(3, max(3, (today - issue).days))),
      )
      if kind == "void":
        state.invoices.update(
          inv.id, status="void", amount_due=0.0, voided_at=received, void_reason="Issued in error"
        )
      elif kind == "partially_paid":
        # Customers pay round amounts on account; whole units suit every currency.
        cls._pay(state, inv.id, float(round(total * rng.uniform(0.3, 0.7))), rng, received)
      elif kind == "paid":
        if rng.random() < 0.2:  # a goodwill credit, then the customer pays the rest
          cls._credit(state, inv.id, float(round(total * 0.05)), "Goodwill discount", received)
        cls._pay(state, inv.id, state.invoices.get(inv.id).amount_due, rng, received)
    return state
