"""Warehouse: a Snowflake/BigQuery-like SQL data warehouse over the company's business data.

The warehouse holds five read-only tables, kept in the state as typed records and queried with
real SQL (SQLite dialect) in an in-memory database built from them:

* ``customers``: one row per customer account of the shared world, with its account manager;
* ``products``: the product catalogue (sku, price);
* ``orders``: sales orders (customer, sku, quantity, amount after discount, status, date);
* ``support_tickets_daily``: support volume, backlog, first-response time and SLA breaches;
* ``revenue_by_month``: revenue (completed and shipped orders), refunds and active customers
  per month, aggregated from ``orders`` so the two always agree.

Analysts save named queries, run them again and export results as CSV or JSON files with a
download link. Rules a warehouse user expects: queries are read-only (a single SELECT or WITH
statement; anything else, or a write smuggled into one, is refused), SQL errors come back with
the engine's message, results are capped at ``limit`` rows with the full row count, a query
that runs too long is stopped, saved query names are unique, only a query's owner can delete
it, and an empty result cannot be exported. The warehouse's clock is the service's logical
time: SQL's 'now' and CURRENT_DATE are refused so results never depend on the wall clock.
"""

from __future__ import annotations

import random
from datetime import date, timedelta
from typing import Literal

from compoworld import Conflict, InvalidArgument, Service, registry, tool
from compoworld.runtime.fields import Email, Limit, Text
from compoworld.runtime.query import select
from envs._world import WorldUser, seeded, world
from envs.warehouse.state import (
  SQL_TABLES,
  CustomerRow,
  Export,
  OrderRow,
  ProductRow,
  RevenueMonthRow,
  SavedQuery,
  TicketDayRow,
  WarehouseState,
  _columns,
  _table_name,
  execute,
)


@registry.register
class WarehouseService(WorldUser, Service):
  name = "warehouse"
  domain = "data_analytics"
  description = "A SQL data warehouse of customers, orders, revenue and support metrics."
  State = WarehouseState

  @classmethod
  def generate(cls, seed: int, size: int | None) -> WarehouseState:
    rng, w, state = seeded(cls, seed)
    today = state.now.date()
    reps = [p for p in w.people if p.department == "Sales"] or list(w.people[1:])
    for i, c in enumerate(w.customers, 1):
      state.customers.insert(
        CustomerRow(
          id=f"CUST-{i:03d}",
          name=c.name,
          domain=c.domain,
          industry=c.industry,
          city=c.city,
          country=c.country,
          tier=c.tier,
          account_manager=rng.choice(reps).email,
          signup_date=today - timedelta(days=rng.randint(400, 1500)),
        )
      )
    for p in w.products:
      state.products.insert(
        ProductRow(id=p.sku, name=p.name, category=p.category, unit_price=p.unit_price)
      )
    customers, products = list(state.customers), list(w.products)
    weights = [{"enterprise": 5, "mid-market": 3, "smb": 1}[c.tier] for c in customers]
    discount = {"enterprise": (10, 15), "mid-market": (0, 5, 8), "smb": (0,)}
    quantity = {"Hardware": (1, 40), "Supplies": (10, 200), "Software": (5, 80), "Services": (1, 3)}
    # Orders span the 12 months that revenue_by_month reports: this one and the 11 before.
    y, m = divmod(today.year * 12 + today.month - 12, 12)
    span = (today - date(y, m + 1, 1)).days
    dates = sorted(today - timedelta(days=rng.randint(1, span)) for _ in range(size or 150))
    for i, day in enumerate(dates):
      c = rng.choices(customers, weights)[0]
      p = rng.choice(products)
      qty = rng.randint(*quantity[p.category])
      pct = rng.choice(discount[c.tier])
      age = (today - day).days
      if age <= 3:
        status = "processing"
      elif age <= 10:
        status = rng.choice(("shipped", "completed"))
      else:
        status = rng.choices(("completed", "cancelled", "refunded"), (90, 5, 5))[0]
      state.orders.insert(
        OrderRow(
          id=f"SO-{10001 + i}",
          customer_id=c.id,
          customer=c.name,
          sku=p.sku,
          quantity=qty,
          unit_price=p.unit_price,
          discount_pct=pct,
          amount=round(qty * p.unit_price * (100 - pct) / 100, 2),
          currency=w.currency,
          status=status,
          order_date=day,
          sales_rep=c.account_manager,
        )
      )
    cls._aggregate_months(state, today)
    backlog = rng.randint(30, 60)
    for ago in range(60, 0, -1):
      day = today - timedelta(days=ago)
      weekend = day.weekday() >= 5
      opened = rng.randint(2, 8) if weekend else rng.randint(12, 34)
      solved = max(0, min(backlog + opened, opened + rng.randint(-6, 5)))
      backlog += opened - solved
      state.support_tickets_daily.insert(
        TicketDayRow(
          id=day.isoformat(),
          tickets_opened=opened,
          tickets_solved=solved,
          backlog=backlog,
          avg_first_response_hours=round(rng.uniform(0.8, 9.5), 1),
          sla_breaches=rng.randint(0, max(1, opened // 5)),
          csat_pct=round(rng.uniform(78, 97), 1),
        )
      )
    cls._generate_queries(state, rng, w)
    return state

  @staticmethod
  def _aggregate_months(state: WarehouseState, today: date) -> None:
    months: dict[str, list[OrderRow]] = {}
    for m in range(11, -1, -1):
      y, mo = divmod(today.year * 12 + today.month - 1 - m, 12)
      months[f"{y}-{mo + 1:02d}"] = []
    for o in state.orders:
      months.setdefault(o.order_date.isoformat()[:7], []).append(o)
    for month in sorted(months):
      live = [o for o in months[month] if o.status != "cancelled"]
      state.revenue_by_month.insert(
        RevenueMonthRow(
          id=month,
          revenue=round(sum(o.amount for o in live if o.status in ("completed", "shipped")), 2),
          orders=len(live),
          refunds=round(sum(o.amount for o in live if o.status == "refunded"), 2),
          active_customers=len({o.customer_id for o in live}),
        )
      )

  @staticmethod
  def _generate_queries(state: WarehouseState, rng: random.Random, w) -> None:
    me = w.people[0].email
    analyst = rng.choice([p for p in w.people[1:] if p.department in ("Finance", "Engineering")])
    for name, sql, desc, owner in (
      (
        "Monthly revenue",
        "SELECT month, revenue, orders, refunds FROM revenue_by_month ORDER BY month",
        "Revenue trend for the last 12 months.",
        me,
      ),
      (
        "Top customers by revenue",
        "SELECT customer, ROUND(SUM(amount), 2) AS revenue, COUNT(*) AS orders FROM orders "
        "WHERE status IN ('completed', 'shipped') GROUP BY customer ORDER BY revenue DESC",
        "Customers ranked by recognised revenue.",
        analyst.email,
      ),
      (
        "Refunded orders",
        "SELECT order_id, customer, sku, amount, order_date FROM orders "
        "WHERE status = 'refunded' ORDER BY order_date DESC",
        "Every refunded order, newest first.",
        analyst.email,
      ),
      (
        "Units sold by product",
        "SELECT p.name, o.sku, SUM(o.quantity) AS units FROM orders o JOIN products p "
        "ON p.sku = o.sku WHERE o.status != 'cancelled' GROUP BY o.sku ORDER BY units DESC",
        "Units per product, cancelled orders excluded.",
        me,
      ),
      (
        "SLA breaches last 14 days",
        "SELECT date, tickets_opened, sla_breaches FROM support_tickets_daily "
        f"WHERE date >= '{(state.now.date() - timedelta(days=14)).isoformat()}' ORDER BY date",
        "Daily SLA breaches over the last two weeks.",
        analyst.email,
      ),
    ):
      state.saved_queries.insert(
        SavedQuery(
          id=state.new_id("sq"),
          name=name,
          sql=sql,
          description=desc,
          owner=owner,
          created_at=state.now - timedelta(days=rng.randint(5, 120)),
        )
      )
    first = next(iter(state.saved_queries))
    result = execute(state, first.sql)
    eid = state.new_id("exp")
    made = state.now - timedelta(days=2, hours=3)
    state.exports.insert(
      Export(
        id=eid,
        sql=first.sql,
        saved_query_id=first.id,
        format="csv",
        columns=tuple(result["columns"]),
        row_count=result["row_count"],
        url=f"https://data.{w.domain}/exports/{eid}.csv",
        created_by=me,
        created_at=made,
        expires_at=made + timedelta(days=7),
      )
    )

  # --- helpers -----------------------------------------------------------------------------

  # --- reads: catalogue --------------------------------------------------------------------

  @tool(mutates=False, produces=("number",))
  def list_tables(self) -> list[dict]:
    """List the warehouse tables with their description, columns and row count."""
    return [
      {
        "name": t,
        "description": desc,
        "columns": [c["name"] for c in _columns(t, self.state.table(t).record_type)],
        "row_count": len(self.state.table(t)),
      }
      for t, (_, desc) in SQL_TABLES.items()
    ]

  @tool(mutates=False, produces=("number",))
  def describe_table(self, table: Text) -> dict:
    """Describe one table: its columns (name, SQL type, meaning), primary key and row count.

    Args:
      table: the table name, e.g. "orders".
    """
    name = _table_name(table)
    rows = self.state.table(name)
    return {
      "name": name,
      "description": SQL_TABLES[name][1],
      "primary_key": SQL_TABLES[name][0],
      "row_count": len(rows),
      "columns": _columns(name, rows.record_type),
    }

  @tool(mutates=False, produces=("sql.result", "money", "number", "sku", "company.name"))
  def preview_table(self, table: Text, limit: Limit = 10) -> dict:
    """Show the first rows of a table in primary-key order.

    Args:
      table: the table name, e.g. "orders".
      limit: number of rows (1-100).
    """
    name = _table_name(table)
    return execute(self.state, f"SELECT * FROM {name} ORDER BY {SQL_TABLES[name][0]}", limit)

  # --- reads: queries ----------------------------------------------------------------------

  @tool(mutates=False, produces=("sql.result", "money", "number", "sku", "company.name"))
  def run_query(self, sql: Text, limit: Limit = 100) -> dict:
    """Run a read-only SQL query (SQLite dialect: a single SELECT or WITH statement).

    Returns the column names, at most ``limit`` rows (as lists, in column order), the full row
    count and whether rows were left out. Dates are ISO strings: compare them as text, e.g.
    ``order_date >= '2026-01-01'``.

    Args:
      sql: the query, e.g. "SELECT status, COUNT(*) FROM orders GROUP BY status".
      limit: most rows to return (1-100).
    """
    return execute(self.state, sql, limit)

  @tool(mutates=False, page="query", produces=("saved_query.id", "title", "person.email"))
  def list_saved_queries(self, query: str | None = None, owner: Email | None = None) -> list:
    """List saved queries by name.

    Args:
      query: words that must all appear in the name, description or SQL.
      owner: only queries saved by this email address.
    """
    return select(
      self.state.saved_queries,
      eq={"owner": owner and owner.lower()},
      text=query,
      fields=("name", "description", "sql"),
      key=lambda q: (q.name.lower(), q.id),
    )

  @tool(
    mutates=False,
    consumes=("saved_query.id",),
    produces=("sql.result", "money", "number", "sku", "company.name"),
  )
  def run_saved_query(self, saved_query_id: str, limit: Limit = 100) -> dict:
    """Run a saved query; the result has the same shape as run_query's.

    Args:
      saved_query_id: the saved query's id.
      limit: most rows to return (1-100).
    """
    saved = self.state.saved_queries.get(saved_query_id)
    return {"saved_query": saved.name, **execute(self.state, saved.sql, limit)}

  @tool(mutates=False, page="export", produces=("export.id", "url", "datetime"))
  def list_exports(self) -> list:
    """List exported query results, newest first, with their download links.

    Args:
    """
    return sorted(self.state.exports, key=lambda e: (e.created_at, e.id), reverse=True)

  # --- writes ------------------------------------------------------------------------------

  @tool(mutates=True, consumes=("title",), produces=("saved_query.id",))
  def save_query(self, name: Text, sql: Text, description: str = "") -> SavedQuery:
    """Save a named query for later runs; the query is checked by running it.

    Args:
      name: a unique name (any letter case).
      sql: the read-only query to save.
      description: what the query answers.
    """
    name = name.strip()
    if not name:
      raise InvalidArgument("name: the name is blank")
    clash = next((q for q in self.state.saved_queries if q.name.lower() == name.lower()), None)
    if clash is not None:
      raise Conflict(f"a saved query named '{clash.name}' already exists ({clash.id})")
    execute(self.state, sql, 1)
    return self.state.saved_queries.insert(
      SavedQuery(
        id=self.state.new_id("sq"),
        name=name,
        sql=sql.strip(),
        description=description,
        owner=self.user,
        created_at=self.state.now,
      )
    )

  @tool(mutates=True, consumes=("saved_query.id",))
  def delete_saved_query(self, saved_query_id: str) -> dict:
    """Delete a saved query; only its owner can.

    Args:
      saved_query_id: the saved query's id.
    """
    saved = self.state.saved_queries.get(saved_query_id)
    if saved.owner != self.user:
      raise Conflict(
        f"saved query '{saved.name}' belongs to {saved.owner}; only its owner can delete it"
      )
    self.state.saved_queries.delete(saved_query_id)
    return {"deleted": saved_query_id, "name": saved.name}

  @tool(mutates=True, consumes=("saved_query.id",), produces=("export.id", "url", "number"))
  def export_query_result(
    self,
    sql: str | None = None,
    saved_query_id: str | None = None,
    format: Literal["csv", "json"] = "csv",
  ) -> Export:
    """Export the full result of a query (or of a saved query) to a file with a download link
    valid for 7 days.

    Args:
      sql: the read-only query to export (give this or saved_query_id).
      saved_query_id: a saved query to export instead.
      format: "csv" or "json".
    """
    if (sql is None) == (saved_query_id is None):
      raise InvalidArgument("export_query_result: give exactly one of sql or saved_query_id")
    if saved_query_id is not None:
      sql = self.state.saved_queries.get(saved_query_id).sql
    result = execute(self.state, sql, 1)
    if result["row_count"] == 0:
      raise Conflict("the query returned no rows; there is nothing to export")
    eid = self.state.new_id("exp")
    now = self.state.now
    return self.state.exports.insert(
      Export(
        id=eid,
        sql=sql,
        saved_query_id=saved_query_id,
        format=format,
        columns=tuple(result["columns"]),
        row_count=result["row_count"],
        url=f"https://data.{world(self.state.seed).domain}/exports/{eid}.{format}",
        created_by=self.user,
        created_at=now,
        expires_at=now + timedelta(days=7),
      )
    )
