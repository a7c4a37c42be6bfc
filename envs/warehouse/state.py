"""Warehouse: the records, state and constants; the service and its tools are in ``tools``."""

from __future__ import annotations

import re
import sqlite3
import threading
import typing
from collections import OrderedDict
from datetime import date, datetime
from typing import Any, Literal

from pydantic import Field

from compoworld import InvalidArgument, NotFound, Record, ServiceState, Table

OrderStatus = Literal["processing", "shipped", "completed", "cancelled", "refunded"]


class CustomerRow(Record):
  id: str = Field(description="Customer id, e.g. CUST-001.")
  name: str = Field(description="Company name.")
  domain: str = Field(description="Web domain of the company.")
  industry: str = Field(description="Industry.")
  city: str = Field(description="Head-office city.")
  country: str = Field(description="Head-office country.")
  tier: str = Field(description="enterprise, mid-market or smb.")
  account_manager: str = Field(description="Email of the account manager.")
  signup_date: date = Field(description="Date the account was opened.")


class ProductRow(Record):
  id: str = Field(description="Stock-keeping unit.")
  name: str = Field(description="Product name.")
  category: str = Field(description="Hardware, Supplies, Software or Services.")
  unit_price: float = Field(description="List price per unit.")


class OrderRow(Record):
  id: str = Field(description="Order number, e.g. SO-10001.")
  customer_id: str = Field(description="customers.customer_id of the buyer.")
  customer: str = Field(description="Customer name.")
  sku: str = Field(description="products.sku of the item ordered.")
  quantity: int = Field(description="Units ordered.")
  unit_price: float = Field(description="List price per unit.")
  discount_pct: float = Field(description="Discount in percent.")
  amount: float = Field(description="Order total after discount.")
  currency: str = Field(description="ISO 4217 currency code.")
  status: OrderStatus = Field(description="processing, shipped, completed, cancelled or refunded.")
  order_date: date = Field(description="Date the order was placed.")
  sales_rep: str = Field(description="Email of the sales rep.")


class TicketDayRow(Record):
  id: str = Field(description="The day (ISO date).")
  tickets_opened: int = Field(description="Tickets created that day.")
  tickets_solved: int = Field(description="Tickets solved that day.")
  backlog: int = Field(description="Unsolved tickets at the end of the day.")
  avg_first_response_hours: float = Field(description="Mean hours to the first agent reply.")
  sla_breaches: int = Field(description="Tickets that breached their SLA target that day.")
  csat_pct: float = Field(description="Share of satisfied survey answers, in percent.")


class RevenueMonthRow(Record):
  id: str = Field(description="The month, YYYY-MM.")
  revenue: float = Field(description="Amount of completed and shipped orders.")
  orders: int = Field(description="Orders placed, cancelled ones excluded.")
  refunds: float = Field(description="Amount of refunded orders.")
  active_customers: int = Field(description="Customers with at least one order.")


class SavedQuery(Record):
  name: str
  sql: str
  description: str = ""
  owner: str
  created_at: datetime


class Export(Record):
  sql: str
  saved_query_id: str | None = None
  format: Literal["csv", "json"]
  columns: tuple[str, ...]
  row_count: int
  url: str
  created_by: str
  created_at: datetime
  expires_at: datetime


class WarehouseState(ServiceState):
  customers: Table[CustomerRow]
  products: Table[ProductRow]
  orders: Table[OrderRow]
  support_tickets_daily: Table[TicketDayRow]
  revenue_by_month: Table[RevenueMonthRow]
  saved_queries: Table[SavedQuery]
  exports: Table[Export]


#: SQL table name → (primary-key column standing for the record id, description).
SQL_TABLES = {
  "customers": ("customer_id", "One row per customer account."),
  "products": ("sku", "The product catalogue."),
  "orders": ("order_id", "One row per sales order (one product line per order)."),
  "support_tickets_daily": ("date", "Support desk volume and SLA per day, last 60 days."),
  "revenue_by_month": ("month", "Revenue, orders and refunds per month, from orders."),
}
_SQL_TYPES = {str: "TEXT", int: "INTEGER", float: "REAL", date: "DATE", bool: "INTEGER"}
#: Rows fetched at most to count a result; queries are also stopped after this many VM steps.
MAX_ROWS, MAX_STEPS = 50_000, 20_000_000
#: Database connections kept, keyed by the content of the data tables.
_CACHE: OrderedDict[str, sqlite3.Connection] = OrderedDict()
_CACHE_SIZE = 8
_LOCK = threading.Lock()  # one query at a time: the progress budget is per connection
_READ_ONLY = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_RECURSIVE}
_NONDETERMINISTIC = {"random", "randomblob"}
_WALL_CLOCK = re.compile(r"'now'|\bcurrent_(date|time|timestamp)\b", re.IGNORECASE)
_COMMENTS = re.compile(r"--[^\n]*|/\*.*?\*/", re.DOTALL)


def _columns(table: str, record_type: type[Record]) -> list[dict[str, str]]:
  pk = SQL_TABLES[table][0]
  out = []
  for name, field in record_type.model_fields.items():
    kind = field.annotation
    base = str if typing.get_origin(kind) is Literal else kind
    out.append(
      {
        "name": pk if name == "id" else name,
        "type": _SQL_TYPES[base],
        "description": field.description or "",
      }
    )
  return out


def _authorize(action: int, arg1: Any, arg2: Any, db: Any, trigger: Any) -> int:
  """SQLite authorizer: reads only, and no functions whose results change from run to run."""
  if action == sqlite3.SQLITE_FUNCTION:
    return sqlite3.SQLITE_DENY if str(arg2).lower() in _NONDETERMINISTIC else sqlite3.SQLITE_OK
  return sqlite3.SQLITE_OK if action in _READ_ONLY else sqlite3.SQLITE_DENY


def _build(state: WarehouseState) -> sqlite3.Connection:
  conn = sqlite3.connect(":memory:", check_same_thread=False)
  for table in SQL_TABLES:
    rows = state.table(table)
    cols = _columns(table, rows.record_type)
    defs = ", ".join(f"{c['name']} {c['type']}" for c in cols)
    conn.execute(f"CREATE TABLE {table} ({defs}, PRIMARY KEY ({cols[0]['name']}))")
    marks = ", ".join("?" for _ in cols)
    conn.executemany(
      f"INSERT INTO {table} VALUES ({marks})",
      (
        tuple(v.isoformat() if isinstance(v, date) else v for v in dict(r).values())
        for r in sorted(rows, key=lambda r: r.id)
      ),
    )
  conn.commit()
  conn.execute("PRAGMA query_only = ON")  # a second lock behind the authorizer
  conn.set_authorizer(_authorize)
  return conn


def _connection(state: WarehouseState) -> sqlite3.Connection:
  """The database of the state's data tables, built once per content (call under _LOCK)."""
  key = "".join(state.table(t).digest() for t in SQL_TABLES)
  conn = _CACHE.get(key)
  if conn is None:
    conn = _CACHE[key] = _build(state)
    if len(_CACHE) > _CACHE_SIZE:
      _CACHE.popitem(last=False)[1].close()
  _CACHE.move_to_end(key)
  return conn


def _clean(value: Any) -> Any:
  # Sums of REAL columns carry float noise (0.1 + 0.2); four decimals is plenty for money.
  return round(value, 4) if isinstance(value, float) else value


def execute(state: WarehouseState, sql: str, limit: int = 100) -> dict[str, Any]:
  """Runs one read-only statement; returns columns, the first ``limit`` rows and the count."""
  body = _COMMENTS.sub(" ", sql).strip().rstrip(";").strip()
  if not body:
    raise InvalidArgument("sql: the query is empty")
  keyword = re.match(r"[\s(]*(\w*)", body).group(1).upper()
  if keyword not in ("SELECT", "WITH"):
    raise InvalidArgument(
      f"sql: the warehouse is read-only; only a single SELECT or WITH statement is allowed, "
      f"got {keyword or body[:20]!r}"
    )
  if _WALL_CLOCK.search(body):
    raise InvalidArgument(
      f"sql: 'now' and CURRENT_DATE/TIME are not available; today is "
      f"{state.now.date().isoformat()}, write it as a date literal"
    )
  steps = [0]

  def budget() -> int:
    steps[0] += 1
    return 1 if steps[0] * 1000 > MAX_STEPS else 0

  with _LOCK:
    conn = _connection(state)
    conn.set_progress_handler(budget, 1000)
    try:
      cur = conn.execute(sql.strip())
      columns = [d[0] for d in cur.description or ()]
      rows = cur.fetchmany(MAX_ROWS)
    except (sqlite3.Error, sqlite3.Warning) as err:
      if "one statement at a time" in str(err):
        raise InvalidArgument("sql: only a single statement is allowed") from None
      if "not authorized" in str(err):
        raise InvalidArgument(
          f"sql: {err}; the warehouse is read-only (no writes, PRAGMA or random())"
        ) from None
      if steps[0] * 1000 > MAX_STEPS:
        raise InvalidArgument("sql: the query ran too long and was stopped; simplify it") from None
      raise InvalidArgument(f"sql: {err}") from None
    finally:
      conn.set_progress_handler(None, 0)
  return {
    "columns": columns,
    "rows": [[_clean(v) for v in row] for row in rows[:limit]],
    "row_count": len(rows),
    "truncated": len(rows) > limit,
  }


def _table_name(table: str) -> str:
  name = table.strip().lower()
  if name not in SQL_TABLES:
    raise NotFound(f"table '{table}' not found; tables: {', '.join(SQL_TABLES)}")
  return name
