"""Quotes facets: quotes as sources of totals, numbers, contacts, SKUs and quantities; building,
approving, sending and extending quotes as sinks; the requote revisit (its total goes stale)."""

from __future__ import annotations

from datetime import timedelta

from compoworld.tasks.authoring import AuthorContext, AuthoringError
from compoworld.tasks.facets import Found, Value, facets
from compoworld.tasks.rubric import all_of, exists, record_is, where
from envs._facets_common import (
  code_money_label,
  colleague_email,
  day_of,
  found_one,
  fresh_number,
  iso,
  moved_to,
  today,
  units,
  user_email,
)
from envs._world import world
from envs.quotes.service import _line, _totals

S = "quotes"


def _customer(ctx: AuthorContext):
  """A customer not yet quoted in this task, so "the latest quote for X" means one quote."""
  used = ctx.scratch.setdefault("quote_customers", set())
  customers = [c for c in world(ctx.env.seed).customers if c.name not in used]
  customer = ctx.choice(customers)
  used.add(customer.name)
  return customer


def _number(ctx: AuthorContext) -> str:
  """A quote number outside the range the service and its generator hand out."""
  state = ctx.state(S)
  taken = {q.number for q in state.quotes}
  return fresh_number(
    ctx, f"Q-{state.now.year}-{{}}", (2000, 2999), taken, "quote_numbers_exhausted"
  )


def _put_quote(
  ctx: AuthorContext,
  status: str = "draft",
  lines: int = 1,
  big_discount: bool = False,
  customer=None,
  hours_ago: int | None = None,
) -> dict:
  """Adds one of the scenario's quotes, owned by the user, to s0."""
  state, rng, w = ctx.state(S), ctx.rng, world(ctx.env.seed)
  customer = customer or _customer(ctx)
  products = rng.sample(sorted(state.products, key=lambda p: p.id), lines)
  items, used = [], set()
  for j, product in enumerate(products):
    # Distinct quantities, so a step handed "each quantity" never gets the same one twice.
    big = product.list_price >= 1000
    qty = rng.choice([q for q in ((2, 4, 6) if big else (5, 10, 20, 40)) if q not in used])
    used.add(qty)
    discount = rng.choice((35, 40)) if big_discount and j == 0 else rng.choice((0, 5, 10, 15))
    items.append(_line(ctx.fresh_id("li"), product, qty, discount))
  created = state.now - timedelta(hours=hours_ago or rng.randint(3, 30))
  sent = status in ("sent", "accepted", "rejected")
  totals = _totals(tuple(items), rng.choice((0.0, 0.07, 0.08)))
  record = {
    "id": ctx.fresh_id("quo"),
    "number": _number(ctx),
    "account": customer.name,
    "contact_email": ctx.choice(customer.contacts).email,
    "owner": user_email(ctx),
    "currency": w.currency,
    "status": status,
    "valid_until": (state.now.date() + timedelta(days=rng.randint(10, 30))).isoformat(),
    "rejection_reason": "Price too high" if status == "rejected" else None,
    "created_at": iso(created),
    "updated_at": iso(created + timedelta(hours=1)),
    "sent_at": iso(created + timedelta(hours=2)) if sent else None,
    **totals,
    "lines": [li.model_dump(mode="json") for li in totals["lines"]],
  }
  return ctx.put(S, "quotes", record)


def _find(ctx: AuthorContext, quote: dict) -> dict:
  """The agent's way to a quote: list the customer's quotes, open the one with that number."""
  hits = ctx.call(S, "list_quotes", account=quote["account"], limit=100)["items"]
  hit = next(q for q in hits if q["number"] == quote["number"])
  return ctx.call(S, "get_quote", quote_id=hit["id"])


def _scenario_quote(ctx: AuthorContext, **kwargs) -> dict:
  return _find(ctx, _put_quote(ctx, **kwargs))


def _named(q: dict) -> str:
  return f"quote {q['number']} for {q['account']}"


# --- sources ---------------------------------------------------------------------------------


@facets.source(S, "money")
def quote_total(ctx: AuthorContext) -> Found:
  q = _scenario_quote(ctx, status=ctx.choice(("draft", "sent")), lines=ctx.rng.randint(1, 3))
  label = code_money_label(q["total"], q["currency"])
  return Found(
    "money",
    f"the total of {_named(q)}",
    [Value(q["total"], label, q["total"])],
    answer=f"The total of {_named(q)} is {label}.",
  )


@facets.source(S, "money")
def accepted_quote_totals(ctx: AuthorContext) -> Found:
  """Several quotes a customer accepted (and one they turned down): the totals to add up."""
  state = ctx.state(S)
  accepted = {q.account for q in state.quotes if q.status == "accepted"}
  used = ctx.scratch.setdefault("quote_customers", set())
  options = [c for c in world(ctx.env.seed).customers if c.name not in accepted | used]
  customer = ctx.choice(options)
  used.add(customer.name)
  for status in ("accepted", "accepted", ctx.choice(("accepted", "rejected")), "rejected"):
    _put_quote(ctx, status=status, lines=ctx.rng.randint(1, 2), customer=customer)
  hits = ctx.call(S, "list_quotes", account=customer.name, status="accepted", limit=100)["items"]
  if len({q["total"] for q in hits}) < len(hits):
    raise AuthoringError("repeated_value")  # "each of them" must mean distinct totals
  return Found(
    "money",
    f"the totals of the quotes {customer.name} has accepted",
    [Value(q["total"], code_money_label(q["total"], q["currency"]), q["total"]) for q in hits],
  )


@facets.source(S, "reference")
def latest_quote_number(ctx: AuthorContext) -> Found:
  quote = _put_quote(ctx, status=ctx.choice(("sent", "accepted")), hours_ago=1)
  latest = ctx.call(S, "list_quotes", account=quote["account"], limit=1)["items"][0]
  return found_one(
    "reference",
    f"the number of the most recent quote for {quote['account']}",
    latest["number"],
    answer=f"The most recent quote for {quote['account']} is {latest['number']}.",
  )


@facets.source(S, "person.email")
def quote_contact(ctx: AuthorContext) -> Found:
  q = _scenario_quote(ctx, status=ctx.choice(("draft", "sent")))
  return found_one(
    "person.email", f"the customer contact {_named(q)} is addressed to", q["contact_email"]
  )


@facets.source(S, "sku")
def quote_skus(ctx: AuthorContext) -> Found:
  q = _scenario_quote(ctx, status="sent", lines=ctx.rng.randint(2, 3))
  return Found(
    "sku",
    f"the SKUs of the products on {_named(q)}",
    [Value(li["sku"], f"{li['name']} ({li['sku']})") for li in q["lines"]],
  )


@facets.source(S, "quantity")
def quote_quantities(ctx: AuthorContext) -> Found:
  q = _scenario_quote(ctx, status="accepted", lines=ctx.rng.randint(2, 3))
  return Found(
    "quantity",
    f"the quantities of the products on {_named(q)}",
    [Value(li["quantity"], str(li["quantity"]), li["quantity"]) for li in q["lines"]],
  )


# --- lookups ---------------------------------------------------------------------------------


@facets.lookup(S, "sku", "money")
def list_price(ctx: AuthorContext, found: Found) -> Found | None:
  sku = str(found.values[0].value)
  hits = ctx.call(S, "list_products", query=sku)["items"]
  product = next((p for p in hits if p["id"] == sku), None)
  if product is None:
    return None
  label = code_money_label(product["list_price"], world(ctx.env.seed).currency)
  return Found(
    "money",
    f"the list price of {product['name']} in our price book",
    [Value(product["list_price"], label, product["list_price"])],
    answer=f"{product['name']} lists at {label}.",
  )


@facets.lookup(S, "company.name", "money")
def latest_quote_total(ctx: AuthorContext, found: Found) -> Found | None:
  name = str(found.values[0].value)
  hits = ctx.call(S, "list_quotes", account=name, limit=100)["items"]
  hits = [q for q in hits if q["account"].lower() == name.lower()]
  if not hits:
    return None
  q = hits[0]  # newest first
  label = code_money_label(q["total"], q["currency"])
  return Found(
    "money",
    f"the total of the most recent quote for {q['account']}",
    [Value(q["total"], label, q["total"])],
    answer=f"The most recent quote for {q['account']} ({q['number']}) totals {label}.",
  )


# --- sinks -----------------------------------------------------------------------------------


def _add_target(ctx: AuthorContext) -> dict:
  # An empty draft: whatever product the walk brings is new on it.
  q = _scenario_quote(ctx, lines=0)
  return {**q, "units": ctx.choice((2, 3, 6, 12))}


def _add_line(ctx: AuthorContext, q: dict, value: Value) -> None:
  sku = str(value.value)
  if sku not in ctx.state(S).products:
    raise AuthoringError("sku_not_in_price_book", sku)
  if sku in {li["sku"] for li in q["lines"]}:
    raise AuthoringError("sku_already_quoted", sku)
  ctx.call(S, "add_line_item", quote_id=q["id"], sku=sku, quantity=q["units"])


facets.sink(
  S,
  "sku",
  "add_to_quote",
  prepare=_add_target,
  act=_add_line,
  check=lambda ctx, q, v: exists(
    S,
    "quotes",
    where("id", q["id"]),
    where("lines.sku", str(v.value), "contains"),
    where("lines.quantity", q["units"]),
  ),
  phrase=lambda ctx, q, obj: f"add {q['units']} units of {obj} to draft {_named(q)}",
  text=lambda ctx, q, v: f"Draft quote {q['number']} has a line for {v.label}.",
)


def _set_quantity(ctx: AuthorContext, q: dict, value: Value) -> None:
  count, line = units(value, reason="quantity_not_quotable"), q["lines"][0]
  if count == line["quantity"]:
    raise AuthoringError("quantity_unchanged", str(count))
  ctx.call(S, "update_line_item", quote_id=q["id"], line_id=line["id"], quantity=count)


def _quantity_check(ctx: AuthorContext, q: dict, value: Value) -> dict:
  return all_of(
    record_is(S, "quotes", q["id"], "lines.quantity", units(value, reason="quantity_not_quotable")),
    record_is(S, "quotes", q["id"], "lines.sku", q["lines"][0]["sku"], "contains"),
  )


facets.sink(
  S,
  "quantity",
  "set_quoted_quantity",
  total="set_quoted_quantity_to_total",
  prepare=_scenario_quote,  # one line, so "the quantity on the quote" is that line's
  act=_set_quantity,
  check=_quantity_check,
  phrase=lambda ctx, q, obj: (
    f"change the quantity of {q['lines'][0]['name']} on draft {_named(q)} to {obj}"
  ),
  text=lambda ctx, q, v: f"Quote {q['number']} is for {v.label} x {q['lines'][0]['name']}.",
  single=True,
)


def _approval_target(ctx: AuthorContext) -> dict:
  return _scenario_quote(ctx, status="pending_approval", lines=2, big_discount=True)


def _approve(ctx: AuthorContext, q: dict, value: Value) -> None:
  email = colleague_email(ctx, value, "approver_not_employee")  # approvers are managers here
  if email == q["owner"]:
    raise AuthoringError("approver_owns_quote", email)
  ctx.call(S, "approve_quote", quote_id=q["id"], approver=email)


facets.sink(
  S,
  "person.email",
  "record_approval",
  prepare=_approval_target,
  act=_approve,
  check=lambda ctx, q, v: moved_to(
    S, "quotes", q["id"], "approved", where("approved_by", str(v.value).lower())
  ),
  phrase=lambda ctx, q, obj: (
    f"mark the discount on {_named(q)}, which is waiting for approval, as approved by {obj}"
  ),
  text=lambda ctx, q, v: f"Quote {q['number']} is approved by {v.label}.",
  single=True,
)


def _send_target(ctx: AuthorContext) -> dict:
  return _scenario_quote(ctx, lines=ctx.rng.randint(1, 3))


def _send_to(ctx: AuthorContext, q: dict, value: Value) -> None:
  email = str(value.value).lower()
  if email == q["contact_email"]:
    raise AuthoringError("contact_unchanged", email)
  ctx.call(S, "update_quote", quote_id=q["id"], contact_email=email)
  ctx.call(S, "send_quote", quote_id=q["id"])


facets.sink(
  S,
  "person.email",
  "send_quote_to",
  prepare=_send_target,
  act=_send_to,
  check=lambda ctx, q, v: all_of(
    record_is(S, "quotes", q["id"], "contact_email", str(v.value).lower()),
    record_is(S, "quotes", q["id"], "status", "sent"),
  ),
  phrase=lambda ctx, q, obj: f"make {obj} the contact on draft {_named(q)} and send it",
  text=lambda ctx, q, v: f"Quote {q['number']} was sent with {v.label} as its contact.",
  single=True,
)


def _extend(ctx: AuthorContext, q: dict, value: Value) -> None:
  day = day_of(value)
  if day < today(ctx, S) or day.isoformat() == q["valid_until"]:
    raise AuthoringError("validity_not_extendable", day.isoformat())
  ctx.call(S, "update_quote", quote_id=q["id"], valid_until=day.isoformat())


facets.sink(
  S,
  "date",
  "set_quote_validity",
  prepare=_scenario_quote,
  act=_extend,
  check=lambda ctx, q, v: record_is(S, "quotes", q["id"], "valid_until", str(v.value)),
  phrase=lambda ctx, q, obj: f"make draft {_named(q)} valid until {obj}",
  text=lambda ctx, q, v: f"Quote {q['number']} is valid until {v.label}.",
  single=True,
)


# --- the requote revisit: read the quoted product, change its quantity, read the new total --


def _product_first(ctx: AuthorContext) -> tuple[Found, dict]:
  q = _scenario_quote(ctx)
  line = q["lines"][0]
  found = found_one("sku", f"the SKU of the product on draft {_named(q)}", line["sku"])
  return found, q


def _total_second(ctx: AuthorContext, q: dict) -> Found:
  now = ctx.call(S, "get_quote", quote_id=q["id"])
  label = code_money_label(now["total"], now["currency"])
  return Found(
    "money",
    f"the new total of {_named(q)}",
    [Value(now["total"], label, now["total"])],
    stale=q["total"],  # the total before the quantity changed
    answer=f"Quote {q['number']} now totals {label}.",
  )


facets.revisit(
  S,
  kind="sku",
  kind_in="quantity",
  kind_after="money",
  name="requote_quantity",
  first=_product_first,
  second=_total_second,
  act=_set_quantity,
  check=_quantity_check,
  phrase=lambda ctx, q, obj: f"change the quantity on draft {_named(q)} to {obj}",
  text=lambda ctx, q, v: f"Quote {q['number']} is for {v.label} units.",
  single=True,
)
