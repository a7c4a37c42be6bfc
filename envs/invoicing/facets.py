"""Invoicing facets: invoices as sources of amounts, invoice numbers and billing contacts;
billing, payments and credit notes as sinks; the amount due before and after a payment as the
revisit."""

from __future__ import annotations

import math
from datetime import datetime, time, timedelta
from typing import Any

from compoworld.tasks.authoring import AuthorContext, AuthoringError
from compoworld.tasks.facets import Found, Value, facets
from compoworld.tasks.rubric import all_of, exists, record_is, where
from envs._facets_common import (
  amount_is,
  currency_of,
  found_money,
  found_one,
  found_people,
  fresh_number,
  iso,
  money,
  since,
  topic,
)
from envs.invoicing.state import PRICE_LIST_RATE, _totals
from envs.invoicing.tools import InvoicingService

S = "invoicing"


def _customers(ctx: AuthorContext) -> list:
  return sorted(ctx.state(S).customers, key=lambda c: c.name)


def _reference(ctx: AuthorContext) -> str:
  """An invoice number outside the generated sequence, so no new invoice can take it."""
  used = {i.reference for i in ctx.state(S).invoices}
  if "ledger" in ctx.env.services:  # one number, one invoice across the books
    used |= {e.reference for e in ctx.state("ledger").entries}
  return fresh_number(ctx, "INV-{}", (5000, 8999), used, "invoice_numbers_exhausted", tries=100)


def _at(day, hour: int) -> str:
  return iso(datetime.combine(day, time(hour)))


def _scenario_invoice(
  ctx: AuthorContext,
  cust,
  memo: str,
  kind: str = "open",
  at_least: float = 0.0,
  late: int = 40,
  record_id: str | None = None,
  reference: str | None = None,
  exact: float | None = None,
) -> dict:
  """Puts one of the scenario's invoices to ``cust`` into s0 and returns it.

  ``kind`` is draft, open (sent, not yet due), overdue (by up to ``late`` days), partial (partly
  paid) or paid; a professional-services line brings the total to ``at_least``, so the invoice
  can take a payment of that size. An ``exact`` total is billed as one untaxed services line."""
  state, rng = ctx.state(S), ctx.rng
  today, terms = state.now.date(), cust.payment_terms_days
  back = {
    "draft": rng.randint(0, 3),
    "open": rng.randint(1, max(1, terms - 1)),
    "overdue": terms + rng.randint(max(5, late - 35), late),
    "partial": rng.randint(3, max(3, terms - 1)),
    "paid": rng.randint(terms + 5, terms + 50),
  }[kind]
  issue = today - timedelta(days=back)
  products = sorted(state.products, key=lambda p: p.id)
  picks = [(p, rng.randint(2, 12)) for p in rng.sample(products, rng.randint(1, 2))]
  lines = [
    InvoicingService._line(f"L{k}", p, cust, qty, None, None, None)
    for k, (p, qty) in enumerate(picks, 1)
  ]
  if exact is not None:
    lines = [InvoicingService._line("L1", None, cust, 1, exact, 0.0, "Professional services")]
  short = at_least - sum(li.amount * (1 + li.tax_rate) for li in lines)
  if short > 0:
    fee = math.ceil(short / (1 + cust.tax_rate) / 100) * 100.0
    lines.append(
      InvoicingService._line(
        f"L{len(lines) + 1}", None, cust, 1, fee, None, "Professional services"
      )
    )
  subtotal, tax, total = _totals(tuple(lines))
  paid = {"partial": float(round(total * rng.uniform(0.3, 0.5))), "paid": total}.get(kind, 0.0)
  received = issue + timedelta(days=rng.randint(2, max(2, min(back - 1, 20))))
  record = ctx.put(
    S,
    "invoices",
    {
      "id": record_id or ctx.fresh_id("inv"),
      "reference": reference or _reference(ctx),
      "customer_id": cust.id,
      "currency": cust.currency,
      "status": {"draft": "draft", "partial": "partially_paid", "paid": "paid"}.get(kind, "sent"),
      "issue_date": issue.isoformat(),
      "due_date": (issue + timedelta(days=terms)).isoformat(),
      "memo": memo,
      "lines": [li.model_dump(mode="json") for li in lines],
      "subtotal": subtotal,
      "tax": tax,
      "total": total,
      "amount_paid": paid,
      "amount_due": round(total - paid, 2),
      "created_at": _at(issue, 9),
      "sent_at": None if kind == "draft" else _at(issue, 10),
      "paid_at": _at(received, 14) if kind == "paid" else None,
    },
  )
  if paid:
    ctx.put(
      S,
      "payments",
      {
        "id": ctx.fresh_id("pay"),
        "invoice_id": record["id"],
        "customer_id": cust.id,
        "amount": paid,
        "currency": cust.currency,
        "method": rng.choice(("ach", "wire")),
        "received_at": _at(received, 14),
      },
    )
  return record


def _find(ctx: AuthorContext, memo: str) -> dict:
  """The agent's way to an invoice: search by its memo, then open it."""
  hits = ctx.call(S, "list_invoices", query=memo)["items"]
  hit = next(i for i in hits if i["memo"] == memo)
  return ctx.call(S, "get_invoice", invoice_id=hit["id"])


def _due(inv: dict) -> Value:
  return money(inv["amount_due"], inv["currency"])


def _invoice_found(ctx: AuthorContext, kinds: tuple[str, ...]) -> tuple[str, Any, dict]:
  """A scenario invoice of one of ``kinds`` to a customer, found by its memo as an agent would:
  (memo, customer, invoice)."""
  memo, cust = topic(ctx), ctx.choice(_customers(ctx))
  _scenario_invoice(ctx, cust, memo, ctx.choice(kinds))
  return memo, cust, _find(ctx, memo)


# --- sources -----------------------------------------------------------------------------


@facets.source(S, "money")
def amount_due(ctx: AuthorContext) -> Found:
  memo, cust, inv = _invoice_found(ctx, ("open", "partial", "overdue"))
  return found_money(
    f'the amount still due on the "{memo}" invoice to {cust.name}', [_due(inv)], inv["currency"]
  )


@facets.source(S, "reference")
def invoice_number(ctx: AuthorContext) -> Found:
  memo, cust, inv = _invoice_found(ctx, ("open", "overdue", "paid"))
  return found_one(
    "reference", f'the invoice number of the "{memo}" invoice we sent {cust.name}', inv["reference"]
  )


@facets.source(S, "person.email")
def billing_contact(ctx: AuthorContext) -> Found:
  memo, _, inv = _invoice_found(ctx, ("open", "overdue"))
  return found_one(
    "person.email", f'the billing email on the "{memo}" invoice', inv["billing_email"]
  )


@facets.source(S, "person.email")
def unpaid_billing_contacts(ctx: AuthorContext) -> Found:
  """Several customers were billed for one project; those who already paid are left out."""
  memo = topic(ctx)
  customers = ctx.rng.sample(_customers(ctx), 5)
  kinds = ["overdue", "overdue", "open", "paid", "paid"]
  ctx.rng.shuffle(kinds)
  for cust, kind in zip(customers, kinds, strict=True):
    _scenario_invoice(ctx, cust, memo, kind)
  hits = [i for i in ctx.call(S, "list_invoices", query=memo)["items"] if i["memo"] == memo]
  invoices = [ctx.call(S, "get_invoice", invoice_id=i["id"]) for i in hits]
  unpaid = [i["billing_email"] for i in invoices if i["status"] != "paid"]
  paid = [i["billing_email"] for i in invoices if i["status"] == "paid"]
  noun = f'the billing contacts on our "{memo}" invoices'
  return found_people(noun, unpaid, paid, "whose invoice is already paid")


@facets.source(S, "money")
def milestone_amounts(ctx: AuthorContext) -> Found:
  """A project billed in milestones: several open amounts in one currency, to add up."""
  name, cust = topic(ctx), ctx.choice(_customers(ctx))
  count = ctx.rng.randint(2, 4)
  for k in range(1, count + 1):
    _scenario_invoice(ctx, cust, f"{name} milestone {k}", ctx.choice(("open", "overdue")))
  hits = ctx.call(S, "list_invoices", query=f"{name} milestone")["items"]
  hits = sorted((i for i in hits if i["memo"].startswith(name)), key=lambda i: i["memo"])
  return found_money(
    f'the amounts due on the {count} "{name}" milestone invoices to {cust.name}',
    [_due(i) for i in hits],
    cust.currency,
  )


@facets.source(S, "company.name")
def most_overdue_customer(ctx: AuthorContext) -> Found:
  """A long-forgotten invoice tops the aging report; its customer is handed on."""
  _scenario_invoice(ctx, ctx.choice(_customers(ctx)), topic(ctx), "overdue", late=200)
  top = ctx.call(S, "overdue_report", limit=5)["items"][0]
  return found_one(
    "company.name", "the customer whose invoice is the most overdue", top["customer_name"]
  )


# --- lookups -----------------------------------------------------------------------------


def _customer_named(ctx: AuthorContext, name: str) -> dict | None:
  hits = ctx.call(S, "list_customers", query=name)["items"]
  return next((c for c in hits if c["name"].lower() == str(name).lower()), None)


@facets.lookup(S, "company.name", "person.email")
def billing_email_of(ctx: AuthorContext, found: Found) -> Found | None:
  if found.stale is not None:
    return None  # a revisit's fresh reading fed to a read alone: a stale one would pass unseen
  name = found.values[0].value
  if not any(c.name.lower() == str(name).lower() for c in ctx.state(S).customers):
    return None  # not one of our customers: nothing to look up
  cust = _customer_named(ctx, name)
  return found_one(
    "person.email", "the billing email we have on file for that customer", cust["billing_email"]
  )


@facets.lookup(S, "company.name", "money")
def open_balance_of(ctx: AuthorContext, found: Found) -> Found | None:
  if found.stale is not None:
    return None  # a revisit's fresh reading fed to a read alone: a stale one would pass unseen
  name = found.values[0].value
  cust = next((c for c in _customers(ctx) if c.name.lower() == str(name).lower()), None)
  if cust is None:
    return None
  _scenario_invoice(ctx, cust, topic(ctx), "open")  # so they owe something
  hit = _customer_named(ctx, name)
  balance = ctx.call(S, "customer_balance", customer_id=hit["id"])
  owed, currency = balance["balance"], balance["currency"]
  return found_money(
    "how much that customer still owes us on open invoices", [money(owed, currency)], currency
  )


def _booked_sale(ctx: AuthorContext, ref: str) -> tuple[Any, str, float | None]:
  """The customer, project and amount the ledger booked invoice ``ref`` with, so that both
  books tell one story (a customer of our own choosing if the ledger is not in the task)."""
  if "ledger" in ctx.env.services:
    for e in ctx.state("ledger").entries:
      head, _, memo = e.memo.partition(" - ")
      for cust in _customers(ctx):
        if e.reference == ref and head == f"Invoice {ref} to {cust.name}":
          return cust, memo, e.total
  return ctx.choice(_customers(ctx)), "", None


@facets.lookup(S, "reference", "money")
def invoice_total(ctx: AuthorContext, found: Found) -> Found | None:
  """The total of an invoice by its number. An INV- number the books mention but invoicing
  does not hold yet is put into s0 as an earlier invoice (never one a new invoice would take)."""
  if found.stale is not None:
    return None  # a revisit's fresh reading fed to a read alone: a stale one would pass unseen
  ref = str(found.values[0].value)
  state = ctx.state(S)
  if not any(i.reference == ref for i in state.invoices):
    number = ref.removeprefix("INV-")
    if not number.isdigit() or 0 <= int(number) - state.next_invoice_number < 20:
      return None
    cust, memo, total = _booked_sale(ctx, ref)
    kind = ctx.choice(("open", "paid"))
    _scenario_invoice(ctx, cust, memo, kind, reference=ref, exact=total)
  inv = ctx.call(S, "get_invoice", invoice_id=ref)
  return found_money(
    "the total billed on that invoice", [money(inv["total"], inv["currency"])], inv["currency"]
  )


# --- sinks -------------------------------------------------------------------------------


def _bill_target(ctx: AuthorContext) -> dict:
  cust = ctx.choice(_customers(ctx))
  hit = _customer_named(ctx, cust.name)
  return {"customer_id": hit["id"], "customer": cust.name, "memo": f"{topic(ctx)} order"}


def _bill(ctx: AuthorContext, t: dict, v: Value) -> None:
  if v.value not in ctx.state(S).products:
    raise AuthoringError("unknown_sku", str(v.value))
  ctx.call(
    S, "create_invoice", customer_id=t["customer_id"], lines=[{"sku": v.value}], memo=t["memo"]
  )


facets.sink(
  S,
  "sku",
  "bill_product",
  prepare=_bill_target,
  act=_bill,
  check=lambda ctx, t, v: exists(
    S,
    "invoices",
    where("customer_id", t["customer_id"]),
    where("memo", t["memo"]),
    where("lines.sku", v.value),
    since(ctx, S, "created_at"),
  ),
  phrase=lambda ctx, t, obj: (
    f"create a draft invoice to {t['customer']} for one unit of {obj} at list price, with "
    f'the memo "{t["memo"]}"'
  ),
  text=lambda ctx, t, v: f'A draft invoice to {t["customer"]} ("{t["memo"]}") bills {v.label}.',
)


def _draft_target(ctx: AuthorContext) -> dict:
  """A draft the user started for a customer, and the product to add to it."""
  cust, memo = ctx.choice(_customers(ctx)), topic(ctx)
  _scenario_invoice(ctx, cust, memo, "draft")
  inv = _find(ctx, memo)
  have = {li["sku"] for li in inv["lines"]}
  products = sorted(ctx.state(S).products, key=lambda p: p.id)
  product = ctx.choice([p for p in products if p.id not in have])
  return {
    "invoice": inv,
    "customer": cust.name,
    "memo": memo,
    "sku": product.id,
    "product": product.name,
  }


def _add_units(ctx: AuthorContext, t: dict, v: Value) -> None:
  if not 0 < float(v.value) <= 100000:
    raise AuthoringError("quantity_out_of_range", str(v.value))
  ctx.call(S, "add_line_item", invoice_id=t["invoice"]["id"], sku=t["sku"], quantity=v.value)


def _units_check(ctx: AuthorContext, t: dict, v: Value) -> dict:
  """The draft now has a line of the product and its subtotal grew by that many units."""
  cust = ctx.state(S).customers.get(t["invoice"]["customer_id"])
  product = ctx.state(S).products.get(t["sku"])
  line = InvoicingService._line("L0", product, cust, float(v.value), None, None, None)
  inv_id = t["invoice"]["id"]
  return all_of(
    record_is(S, "invoices", inv_id, "lines.sku", t["sku"], "contains"),
    {
      **record_is(S, "invoices", inv_id, "subtotal", t["invoice"]["subtotal"] + line.amount),
      "cmp": "approx",
      "tolerance": 0.005,
    },
  )


facets.sink(
  S,
  "quantity",
  "add_units_to_draft",
  prepare=_draft_target,
  act=_add_units,
  check=_units_check,
  phrase=lambda ctx, t, obj: (
    f'add {obj} of {t["product"]} ({t["sku"]}) at list price to the draft "{t["memo"]}" '
    f"invoice for {t['customer']}"
  ),
  text=lambda ctx, t, v: f'The "{t["memo"]}" draft bills {v.label} x {t["product"]}.',
  single=True,
)


def _open_target(ctx: AuthorContext) -> dict:
  """An open invoice to be paid or credited. It is put into s0 once the amount is known (in
  ``act``): billed to a customer in the amount's currency and sized so that the amount is a
  part of it, as a real payment is."""
  return {"id": ctx.fresh_id("inv"), "memo": topic(ctx), "kind": ctx.choice(("open", "overdue"))}


def _open_invoice(ctx: AuthorContext, t: dict, v: Value) -> str:
  """The target invoice's id, after finding it as the agent would (putting it the first time)."""
  amount, code = float(v.value), currency_of(v)
  if "invoice" not in t:
    customers = [c for c in _customers(ctx) if code in (None, c.currency)]
    if not customers:
      raise AuthoringError("no_customer_billed_in", str(code))
    t["cust"] = ctx.choice(customers)
    t["customer"] = t["cust"].name
    at_least = amount * ctx.rng.uniform(4.0, 6.0)  # room for a few such payments
    _scenario_invoice(ctx, t["cust"], t["memo"], t["kind"], at_least, record_id=t["id"])
    t["invoice"] = _find(ctx, t["memo"])
  if code not in (None, t["invoice"]["currency"]):
    raise AuthoringError("currency_mismatch", f"{code} on a {t['invoice']['currency']} invoice")
  if not 0.01 <= amount <= ctx.state(S).invoices.get(t["id"]).amount_due:
    raise AuthoringError("amount_exceeds_due", f"{amount}")
  return t["id"]


def _pay(ctx: AuthorContext, t: dict, v: Value) -> None:
  invoice_id = _open_invoice(ctx, t, v)
  ctx.call(S, "record_payment", invoice_id=invoice_id, amount=float(v.value), method="wire")


def _payment_check(ctx: AuthorContext, t: dict, v: Value) -> dict:
  return exists(
    S,
    "payments",
    where("invoice_id", t["id"]),
    amount_is("amount", float(v.value)),
    since(ctx, S, "received_at"),
  )


def _payment_phrase(t: dict, what: str) -> str:
  return f'record {what} against the "{t["memo"]}" invoice to {t["customer"]}'


facets.sink(
  S,
  "money",
  "record_payment",
  total="record_total_payment",
  prepare=_open_target,
  act=_pay,
  check=_payment_check,
  phrase=lambda ctx, t, obj: _payment_phrase(t, f"a wire payment of {obj}"),
  total_phrase=lambda ctx, t, obj: _payment_phrase(t, f"one wire payment for {obj}"),
  text=lambda ctx, t, v: f'A {v.label} payment is recorded on the "{t["memo"]}" invoice.',
)


def _credit(ctx: AuthorContext, t: dict, v: Value) -> None:
  invoice_id = _open_invoice(ctx, t, v)
  ctx.call(S, "issue_credit_note", invoice_id=invoice_id, amount=float(v.value), reason=t["reason"])


def _credit_target(ctx: AuthorContext) -> dict:
  return {**_open_target(ctx), "reason": ctx.choice(("Goodwill discount", "Service credit"))}


facets.sink(
  S,
  "money",
  "issue_credit",
  prepare=_credit_target,
  act=_credit,
  check=lambda ctx, t, v: exists(
    S,
    "credit_notes",
    where("invoice_id", t["id"]),
    amount_is("amount", float(v.value)),
    since(ctx, S, "issued_at"),
  ),
  phrase=lambda ctx, t, obj: (
    f'issue a credit note for {obj} on the "{t["memo"]}" invoice to {t["customer"]}, with '
    f'the reason "{t["reason"]}"'
  ),
  text=lambda ctx, t, v: f'A {v.label} credit note is issued on the "{t["memo"]}" invoice.',
)


# --- revisit: the amount due before and after a payment is recorded -----------------------


def _due_first(ctx: AuthorContext) -> tuple[Found, dict]:
  """A large invoice the customer is paying off (a payment of some thousands fits in it)."""
  t = _open_target(ctx)
  t["cust"] = ctx.choice(_customers(ctx))
  t["customer"] = t["cust"].name
  size = ctx.rng.uniform(2e4, 6e4) * PRICE_LIST_RATE.get(t["cust"].currency, 1.0)
  kind = ctx.choice(("open", "partial", "overdue"))
  _scenario_invoice(ctx, t["cust"], t["memo"], kind, size, record_id=t["id"])
  inv = t["invoice"] = _find(ctx, t["memo"])
  found = found_money(
    f'the amount still due on the "{t["memo"]}" invoice to {t["customer"]}',
    [_due(inv)],
    inv["currency"],
  )
  return found, t


def _due_second(ctx: AuthorContext, t: dict) -> Found:
  inv = ctx.call(S, "get_invoice", invoice_id=t["invoice"]["id"])
  return found_money(
    f'the amount now due on the "{t["memo"]}" invoice',
    [_due(inv)],
    stale=t["invoice"]["amount_due"],
    currency=inv["currency"],
  )


facets.revisit(
  S,
  kind="money",
  kind_in="money",
  kind_after="money",
  name="amount_due_after_payment",
  first=_due_first,
  second=_due_second,
  change="pay_toward_invoice",
  act=_pay,
  check=_payment_check,
  phrase=lambda ctx, t, obj: f"record a wire payment of {obj} against that invoice",
  text=lambda ctx, t, v: f'A {v.label} payment is recorded on the "{t["memo"]}" invoice.',
)
