"""Warehouse facets: SQL over the business data as sources of top customers, best sellers and
order amounts; lookups by customer and product; saved queries as sinks; the re-export revisit
(the download link a first read saw is stale once a new export is made)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from compoworld.tasks.authoring import AuthorContext, AuthoringError
from compoworld.tasks.facets import Found, Value, facets
from compoworld.tasks.rubric import exists, where
from envs._facets_common import found_one, iso, since, topic, user_email
from envs._world import world
from envs.warehouse.state import execute

S = "warehouse"
RECOGNISED = ("completed", "shipped")  # what revenue_by_month counts as revenue
#: Queries a scenario's saved query may hold (it was exported before s0).
EXPORTED = (
  "SELECT order_id, customer, sku, amount FROM orders WHERE status = 'processing' "
  "ORDER BY order_date",
  "SELECT order_id, customer, amount, status FROM orders WHERE amount > 5000 ORDER BY amount DESC",
  "SELECT customer, COUNT(*) AS orders, ROUND(SUM(amount), 2) AS total FROM orders "
  "GROUP BY customer ORDER BY total DESC",
)


def _q(text: str) -> str:
  """A SQL string literal."""
  return "'" + str(text).replace("'", "''") + "'"


def _month_name(month: str) -> str:
  return datetime.strptime(month, "%Y-%m").strftime("%B %Y")


def _past_months(ctx: AuthorContext) -> list[str]:
  """Whole months of order history (the current month is still running)."""
  current = ctx.state(S).now.strftime("%Y-%m")
  return sorted(m.id for m in ctx.state(S).revenue_by_month if m.id != current)


def _leader(totals: dict[str, float]) -> str | None:
  """The key with the largest total, if no other key ties it."""
  ranked = sorted(totals.items(), key=lambda kv: -kv[1])
  if not ranked or (len(ranked) > 1 and round(ranked[0][1] - ranked[1][1], 2) <= 0):
    return None
  return ranked[0][0]


def _query(ctx: AuthorContext, sql: str) -> list[list]:
  return ctx.call(S, "run_query", sql=sql)["rows"]


def _month_leader(
  ctx: AuthorContext, keep: Callable[[Any], bool], by: str, weight: str, sql: str
) -> tuple[str, str]:
  """A past month in which one ``by`` clearly leads the orders that ``keep`` on summed
  ``weight``, and that leader as the agent's query ``sql`` (for ``{month}``) reads it."""
  leaders = {}
  for month in _past_months(ctx):
    totals: dict[str, float] = defaultdict(float)
    for o in ctx.state(S).orders:
      if keep(o) and o.order_date.isoformat().startswith(month):
        totals[getattr(o, by)] += getattr(o, weight)
    leaders[month] = _leader(totals)
  months = [m for m, who in leaders.items() if who is not None]
  if not months:
    raise AuthoringError("no_clear_leader")
  month = ctx.choice(months)
  rows = _query(ctx, sql.format(month=month))
  if rows[0][0] != leaders[month]:
    raise AuthoringError("warehouse_leader_mismatch")
  return month, rows[0][0]


# --- sources -------------------------------------------------------------------------------


@facets.source(S, "company.name")
def top_customer(ctx: AuthorContext) -> Found:
  """The customer with the most recognised revenue in a month where one clearly leads."""
  month, customer = _month_leader(
    ctx,
    keep=lambda o: o.status in RECOGNISED,
    by="customer",
    weight="amount",
    sql="SELECT customer, ROUND(SUM(amount), 2) AS revenue FROM orders "
    "WHERE status IN ('completed', 'shipped') AND order_date LIKE '{month}-%' "
    "GROUP BY customer ORDER BY revenue DESC LIMIT 3",
  )
  return found_one(
    "company.name",
    f"the customer that brought in the most revenue (completed and shipped orders) in "
    f"{_month_name(month)}",
    customer,
  )


@facets.source(S, "sku")
def best_seller(ctx: AuthorContext) -> Found:
  month, sku = _month_leader(
    ctx,
    keep=lambda o: o.status != "cancelled",
    by="sku",
    weight="quantity",
    sql="SELECT sku, SUM(quantity) AS units FROM orders "
    "WHERE status != 'cancelled' AND order_date LIKE '{month}-%' "
    "GROUP BY sku ORDER BY units DESC LIMIT 3",
  )
  return found_one(
    "sku",
    f"the SKU of the product with the most units ordered in {_month_name(month)} (cancelled "
    "orders aside)",
    sku,
  )


@facets.source(S, "money")
def month_order_amounts(ctx: AuthorContext) -> Found:
  """A customer's few orders of one month: several amounts, for a total or one by one."""
  groups: dict[tuple[str, str], list[float]] = defaultdict(list)
  for o in ctx.state(S).orders:
    if o.status != "cancelled":
      groups[(o.customer, o.order_date.isoformat()[:7])].append(o.amount)
  months = set(_past_months(ctx))
  options = sorted(
    key
    for key, amounts in groups.items()
    if key[1] in months and 2 <= len(amounts) <= 4 and len(set(amounts)) == len(amounts)
  )
  customer, month = ctx.choice(options)
  rows = _query(
    ctx,
    f"SELECT order_id, amount FROM orders WHERE customer = {_q(customer)} "
    f"AND order_date LIKE '{month}-%' AND status != 'cancelled' ORDER BY order_id",
  )
  cur = world(ctx.env.seed).currency
  return Found(
    "money",
    f"the amounts of the orders {customer} placed in {_month_name(month)} (cancelled ones aside)",
    [Value(amount, f"{cur} {amount:,.2f}", float(amount)) for _, amount in rows],
  )


def _export_scenario(ctx: AuthorContext) -> dict:
  """A saved query of the scenario, exported a few days before s0."""
  state, w = ctx.state(S), world(ctx.env.seed)
  name = f"{topic(ctx)} orders"
  options = [sql for sql in EXPORTED if execute(state, sql, 1)["row_count"]]
  sql = ctx.choice(options)  # an empty result is never exported
  made = state.now - timedelta(days=ctx.rng.randint(1, 5), hours=ctx.rng.randint(1, 9))
  saved = ctx.put(
    S,
    "saved_queries",
    {
      "id": ctx.fresh_id("sq"),
      "name": name,
      "sql": sql,
      "description": f"Orders to review for the {name.removesuffix(' orders')}.",
      "owner": user_email(ctx),
      "created_at": iso(made - timedelta(days=ctx.rng.randint(3, 30))),
    },
  )
  result = execute(state, sql, 1)
  eid = ctx.fresh_id("exp")
  ctx.put(
    S,
    "exports",
    {
      "id": eid,
      "sql": sql,
      "saved_query_id": saved["id"],
      "format": "csv",
      "columns": result["columns"],
      "row_count": result["row_count"],
      "url": f"https://data.{w.domain}/exports/{eid}.csv",
      "created_by": user_email(ctx),
      "created_at": iso(made),
      "expires_at": iso(made + timedelta(days=7)),
    },
  )
  hit = next(q for q in ctx.call(S, "list_saved_queries", query=name)["items"] if q["name"] == name)
  exports = ctx.call(S, "list_exports", limit=100)["items"]
  latest = next(e for e in exports if e["saved_query_id"] == hit["id"])
  return {"name": name, "url": latest["url"]}


@facets.source(S, "url")
def latest_export_link(ctx: AuthorContext) -> Found:
  t = _export_scenario(ctx)
  return found_one(
    "url",
    f'the download link of the latest export of the "{t["name"]}" saved query in the warehouse',
    t["url"],
  )


# --- lookups -------------------------------------------------------------------------------


def _customer(ctx: AuthorContext, name: str):
  return next((c for c in ctx.state(S).customers if c.name.lower() == str(name).lower()), None)


@facets.lookup(S, "company.name", "person.email")
def account_manager(ctx: AuthorContext, found: Found) -> Found | None:
  customer = _customer(ctx, found.values[0].value)
  if customer is None:
    return None
  rows = _query(ctx, f"SELECT account_manager FROM customers WHERE name = {_q(customer.name)}")
  email = rows[0][0]
  return found_one(
    "person.email",
    f"the email address of {customer.name}'s account manager (from the warehouse)",
    email,
  )


@facets.lookup(S, "company.name", "money")
def customer_revenue(ctx: AuthorContext, found: Found) -> Found | None:
  customer = _customer(ctx, found.values[0].value)
  if customer is None:
    return None
  rows = _query(
    ctx,
    f"SELECT ROUND(SUM(amount), 2) FROM orders WHERE customer = {_q(customer.name)} "
    "AND status IN ('completed', 'shipped')",
  )
  total = rows[0][0]
  if total is None:
    return None
  cur = world(ctx.env.seed).currency
  return Found(
    "money",
    f"{customer.name}'s recognised revenue in the warehouse (completed and shipped orders)",
    [Value(total, f"{cur} {total:,.2f}", float(total))],
    answer=f"{customer.name}'s recognised revenue is {cur} {total:,.2f}.",
  )


@facets.lookup(S, "sku", "quantity")
def units_ordered(ctx: AuthorContext, found: Found) -> Found | None:
  sku = str(found.values[0].value)
  rows = _query(
    ctx, f"SELECT SUM(quantity) FROM orders WHERE sku = {_q(sku)} AND status != 'cancelled'"
  )
  units = rows[0][0]
  if not units:
    return None
  return Found(
    "quantity",
    "the number of units of that product ordered over the past year (cancelled orders aside)",
    [Value(units, str(units), float(units))],
    answer=f"{units} units of {sku} were ordered.",
  )


@facets.lookup(S, "sku", "company.name")
def top_buyer(ctx: AuthorContext, found: Found) -> Found | None:
  sku = str(found.values[0].value)
  spent: dict[str, float] = defaultdict(float)
  for o in ctx.state(S).orders:
    if o.sku == sku and o.status != "cancelled":
      spent[o.customer] += o.amount
  expected = _leader(spent)
  if expected is None:
    return None
  rows = _query(
    ctx,
    f"SELECT customer, ROUND(SUM(amount), 2) AS spent FROM orders WHERE sku = {_q(sku)} "
    "AND status != 'cancelled' GROUP BY customer ORDER BY spent DESC LIMIT 3",
  )
  if rows[0][0] != expected:
    return None
  return found_one(
    "company.name",
    "the customer that has spent the most on that product (cancelled orders aside)",
    rows[0][0],
  )


# --- sinks ---------------------------------------------------------------------------------


def _saved_name(t: dict, value: object) -> str:
  """Saved query names are unique, so each value gets its own: "Falcon orders (HAR-1037)"."""
  return f"{t['name']} ({value})"


def _saved_check(ctx: AuthorContext, t: dict, v: Value, *needles: str) -> dict:
  """The value's new saved query mentions one of ``needles`` (a name or an id)."""
  checks = [
    exists(
      S,
      "saved_queries",
      where("name", _saved_name(t, v.value)),
      where("sql", needle, "icontains"),
      since(ctx, S, "created_at"),
    )
    for needle in needles
  ]
  return checks[0] if len(checks) == 1 else {"op": "any", "checks": checks}


def _save(ctx: AuthorContext, t: dict, column: str, v: Value) -> None:
  value = v.value
  if column == "customer":
    customer = _customer(ctx, value)
    if customer is None:  # a vendor or a prospect: the warehouse has no orders of theirs
      raise AuthoringError("not_a_customer", str(value))
    value = customer.name
  sql = f"SELECT * FROM orders WHERE {column} = {_q(value)} ORDER BY order_date"
  ctx.call(S, "save_query", name=_saved_name(t, v.value), sql=sql)


def _which(obj: str, one: str) -> str:
  return one if obj in ("it", "them") else obj


facets.sink(
  S,
  "sku",
  "save_product_query",
  prepare=lambda ctx: {"name": f"{topic(ctx)} orders"},
  act=lambda ctx, t, v: _save(ctx, t, "sku", v),
  check=lambda ctx, t, v: _saved_check(ctx, t, v, str(v.value)),
  phrase=lambda ctx, t, obj: (
    f"for {_which(obj, 'that SKU')}, save a warehouse query that lists every order of it "
    f'(filter the orders table on its sku), named "{t["name"]} (<the SKU>)"'
  ),
  text=lambda ctx, t, v: (
    f'The saved query "{_saved_name(t, v.value)}" selects the orders of {v.label}.'
  ),
)


def _customer_needles(ctx: AuthorContext, v: Value) -> tuple[str, ...]:
  customer = _customer(ctx, v.value)
  return (str(v.value),) if customer is None else (customer.name, customer.id)


facets.sink(
  S,
  "company.name",
  "save_customer_query",
  prepare=lambda ctx: {"name": f"{topic(ctx)} account review"},
  act=lambda ctx, t, v: _save(ctx, t, "customer", v),
  check=lambda ctx, t, v: _saved_check(ctx, t, v, *_customer_needles(ctx, v)),
  phrase=lambda ctx, t, obj: (
    f"for {_which(obj, 'that customer')}, save a warehouse query that lists every order "
    f'from them, named "{t["name"]} (<the customer\'s name>)"'
  ),
  text=lambda ctx, t, v: (
    f'The saved query "{_saved_name(t, v.value)}" selects the orders of {v.label}.'
  ),
)


# --- the re-export revisit -----------------------------------------------------------------


def _export_first(ctx: AuthorContext) -> tuple[Found, dict]:
  t = _export_scenario(ctx)
  found = found_one(
    "url",
    f'the download link of the latest warehouse export of the "{t["name"]}" saved query',
    t["url"],
  )
  return found, t


def _orders_of(ctx: AuthorContext, column: str, value: str) -> int:
  return sum(1 for o in ctx.state(S).orders if str(getattr(o, column)).lower() == value.lower())


def _export(column: str):
  def act(ctx: AuthorContext, t: dict, v: Value) -> None:
    if not _orders_of(ctx, column, str(v.value)):
      raise AuthoringError("nothing_to_export", str(v.value))
    value = _customer(ctx, v.value).name if column == "customer" else v.value
    ctx.call(S, "export_query_result", sql=f"SELECT * FROM orders WHERE {column} = {_q(value)}")

  return act


def _export_check(column: str):
  def check(ctx: AuthorContext, t: dict, v: Value) -> dict:
    needles = _customer_needles(ctx, v) if column == "customer" else (str(v.value),)
    n = _orders_of(ctx, column, str(v.value))
    checks = [
      exists(
        S,
        "exports",
        where("sql", needle, "icontains"),
        where("row_count", n),
        since(ctx, S, "created_at"),
      )
      for needle in needles
    ]
    return checks[0] if len(checks) == 1 else {"op": "any", "checks": checks}

  return check


def _export_second(ctx: AuthorContext, t: dict) -> Found:
  latest = ctx.call(S, "list_exports", limit=1)["items"][0]
  return found_one("url", "the download link of that new export", latest["url"], stale=t["url"])


for kind, column, one in (
  ("company.name", "customer", "that customer"),
  ("sku", "sku", "that SKU"),
):
  facets.revisit(
    S,
    kind="url",
    kind_in=kind,
    kind_after="url",
    name=f"re_export_{column}_orders",
    first=_export_first,
    second=_export_second,
    change=f"export_{column}_orders",
    act=_export(column),
    check=_export_check(column),
    phrase=lambda ctx, t, obj, one=one: (
      f"export every order of {_which(obj, one)} from the warehouse's orders table to a new "
      "CSV file"
    ),
    text=lambda ctx, t, v: f"A new CSV export holds every order of {v.label}.",
    single=True,  # one export
  )
