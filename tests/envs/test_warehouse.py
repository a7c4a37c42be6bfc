import pytest

from envs import warehouse
from envs._world import world
from envs.warehouse import WarehouseService
from tests.contract import call_fails, call_ok

SEED = 3
ME = world(SEED).people[0].email


@pytest.fixture
def wh():
  return WarehouseService.create(seed=SEED)


def query(wh, sql, limit=100):
  return call_ok(wh, "run_query", {"sql": sql, "limit": limit})


def saved(wh, name):
  return next(q for q in wh.state.saved_queries if q.name == name)


def test_seeded_data_is_sized():
  a = WarehouseService.create(seed=5)
  st, w = a.state, world(5)
  assert (
    len(st.orders) == 150 and len(WarehouseService.create(seed=5, size=400).state.orders) == 400
  )
  assert [c.name for c in st.customers] == [c.name for c in w.customers]
  assert {p.id for p in st.products} == {p.sku for p in w.products}
  assert len(st.revenue_by_month) == 12 and len(st.support_tickets_daily) == 60
  assert {o.status for o in st.orders} >= {"completed", "cancelled", "refunded", "processing"}
  for o in st.orders:
    c = st.customers.get(o.customer_id)
    assert o.customer == c.name and o.sales_rep == c.account_manager and o.sku in st.products
    assert o.amount == round(o.quantity * o.unit_price * (100 - o.discount_pct) / 100, 2)
    assert o.order_date < st.now.date() and o.order_date.isoformat()[:7] in st.revenue_by_month
  # the monthly table is the aggregate of the orders table
  months = query(
    a,
    "SELECT r.month, r.revenue, ROUND(COALESCE(SUM(o.amount), 0), 2) FROM revenue_by_month r "
    "LEFT JOIN orders o ON substr(o.order_date, 1, 7) = r.month "
    "AND o.status IN ('completed', 'shipped') GROUP BY r.month ORDER BY r.month",
  )["rows"]
  assert len(months) == 12 and all(stored == summed for _, stored, summed in months)
  assert months[0][1] > 0
  assert len(st.saved_queries) == 5 and len(st.exports) == 1


def test_catalogue(wh):
  tables = call_ok(wh, "list_tables")
  assert [t["name"] for t in tables] == list(warehouse.SQL_TABLES)
  orders = next(t for t in tables if t["name"] == "orders")
  assert orders["row_count"] == 150 and orders["columns"][0] == "order_id"
  desc = call_ok(wh, "describe_table", {"table": " ORDERS "})
  assert desc["primary_key"] == "order_id" and desc["row_count"] == 150
  types = {c["name"]: c["type"] for c in desc["columns"]}
  assert types["amount"] == "REAL" and types["quantity"] == "INTEGER" and types["sku"] == "TEXT"
  assert all(c["description"] for c in desc["columns"])
  prev = call_ok(wh, "preview_table", {"table": "customers", "limit": 3})
  assert prev["columns"][0] == "customer_id" and prev["row_count"] == 10 and prev["truncated"]
  assert [r[0] for r in prev["rows"]] == ["CUST-001", "CUST-002", "CUST-003"]


def test_run_query(wh):
  res = query(wh, "SELECT status, COUNT(*) AS n FROM orders GROUP BY status ORDER BY status")
  counts = {status: n for status, n in res["rows"]}
  assert res["columns"] == ["status", "n"] and sum(counts.values()) == 150
  assert counts["refunded"] == sum(o.status == "refunded" for o in wh.state.orders)
  page = query(wh, "SELECT order_id FROM orders ORDER BY order_id", limit=7)
  assert page["row_count"] == 150 and len(page["rows"]) == 7 and page["truncated"]
  top = query(
    wh,
    "-- top customer\nWITH r AS (SELECT customer, SUM(amount) AS total FROM orders "
    "GROUP BY customer) SELECT customer, total FROM r ORDER BY total DESC LIMIT 1;",
  )
  best = max(
    {o.customer for o in wh.state.orders},
    key=lambda c: sum(o.amount for o in wh.state.orders if o.customer == c),
  )
  assert top["rows"][0][0] == best and not top["truncated"]
  joined = query(
    wh, "SELECT o.order_id, p.name FROM orders o JOIN products p ON p.sku = o.sku LIMIT 1"
  )
  o = wh.state.orders.get(joined["rows"][0][0])
  assert joined["rows"][0][1] == next(p.name for p in world(SEED).products if p.sku == o.sku)
  # repeated queries reuse one database built from the data tables
  assert warehouse._connection(wh.state) is warehouse._connection(wh.fork().state)


def test_sql_is_read_only_and_errors_are_400(wh):
  for sql, needle in (
    ("DELETE FROM orders", "read-only"),
    ("INSERT INTO orders (order_id) VALUES ('x')", "read-only"),
    ("UPDATE orders SET amount = 0", "read-only"),
    ("DROP TABLE orders", "read-only"),
    ("PRAGMA table_info(orders)", "read-only"),
    ("ATTACH DATABASE ':memory:' AS x", "read-only"),
    ("WITH x AS (SELECT 1) DELETE FROM orders", "not authorized"),
    ("SELECT 1; DELETE FROM orders", "single statement"),
    ("SELECT random()", "random"),
    ("SELECT date('now')", "2026-03-02"),
    ("SELECT CURRENT_DATE", "date literal"),
    ("  -- nothing\n ;", "empty"),
    ("SELEC amount FROM orders", "read-only"),
    ("SELECT amount FROM nope", "no such table: nope"),
    ("SELECT nope FROM orders", "no such column: nope"),
    ("SELECT FROM orders", "syntax error"),
    (
      "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT COUNT(*) FROM c",
      "too long",
    ),
  ):
    call_fails(wh, "run_query", {"sql": sql}, 400, "sql", needle)
  assert query(wh, "SELECT COUNT(*) FROM orders")["rows"] == [[150]]
  call_fails(wh, "run_query", {}, 400, "sql")
  call_fails(wh, "run_query", {"sql": ""}, 400, "sql")
  call_fails(wh, "run_query", {"sql": "SELECT 1", "limit": 101}, 400, "limit")
  call_fails(wh, "describe_table", {"table": "nope"}, 404, "nope", "orders")
  call_fails(wh, "preview_table", {"table": "sqlite_master"}, 404, "sqlite_master")
  call_fails(wh, "preview_table", {"table": "orders", "limit": 0}, 400, "limit")


def test_saved_queries(wh):
  mine = call_ok(wh, "list_saved_queries", {"owner": ME})
  assert mine["total"] == 2 and all(q["owner"] == ME for q in mine["items"])
  names = [q["name"] for q in call_ok(wh, "list_saved_queries", {"limit": 100})["items"]]
  assert names == sorted(names, key=str.lower) and len(names) == 5
  hits = call_ok(wh, "list_saved_queries", {"query": "refunded"})["items"]
  assert [q["name"] for q in hits] == ["Refunded orders"]

  q = call_ok(
    wh,
    "save_query",
    {"name": " Big orders ", "sql": "SELECT order_id, amount FROM orders WHERE amount > 5000"},
  )
  assert q["name"] == "Big orders" and q["owner"] == ME and q["id"] in wh.state.saved_queries
  res = call_ok(wh, "run_saved_query", {"saved_query_id": q["id"], "limit": 2})
  assert res["saved_query"] == "Big orders" and res["columns"] == ["order_id", "amount"]
  assert res["row_count"] == sum(o.amount > 5000 for o in wh.state.orders)
  monthly = call_ok(wh, "run_saved_query", {"saved_query_id": saved(wh, "Monthly revenue").id})
  assert monthly["row_count"] == 12
  gone = call_ok(wh, "delete_saved_query", {"saved_query_id": q["id"]})
  assert gone == {"deleted": q["id"], "name": "Big orders"}
  assert q["id"] not in wh.state.saved_queries


def test_exports(wh):
  exp = call_ok(
    wh,
    "export_query_result",
    {"sql": "SELECT * FROM orders WHERE status = 'refunded'", "format": "json"},
  )
  assert exp["row_count"] == sum(o.status == "refunded" for o in wh.state.orders)
  assert exp["url"] == f"https://data.{world(SEED).domain}/exports/{exp['id']}.json"
  assert exp["columns"][0] == "order_id" and exp["id"] in wh.state.exports
  sq = saved(wh, "Units sold by product")
  exp2 = call_ok(wh, "export_query_result", {"saved_query_id": sq.id})
  assert exp2["saved_query_id"] == sq.id and exp2["sql"] == sq.sql and exp2["url"].endswith(".csv")
  listed = call_ok(wh, "list_exports")
  assert listed["total"] == 3 and listed["items"][0]["id"] == exp2["id"]


def test_write_rules(wh):
  call_fails(wh, "save_query", {"name": "x"}, 400, "sql")
  call_fails(wh, "save_query", {"name": "", "sql": "SELECT 1"}, 400, "name")
  call_fails(wh, "save_query", {"name": "   ", "sql": "SELECT 1"}, 400, "name")
  call_fails(wh, "save_query", {"name": "monthly REVENUE", "sql": "SELECT 1"}, 409, "already")
  call_fails(wh, "save_query", {"name": "Wipe", "sql": "DELETE FROM orders"}, 400, "read-only")
  call_fails(wh, "save_query", {"name": "Typo", "sql": "SELECT * FROM ordrs"}, 400, "ordrs")
  call_fails(wh, "run_saved_query", {"saved_query_id": "sq_nope"}, 404, "sq_nope")
  call_fails(wh, "delete_saved_query", {"saved_query_id": "sq_nope"}, 404, "sq_nope")
  theirs = saved(wh, "Refunded orders")
  call_fails(wh, "delete_saved_query", {"saved_query_id": theirs.id}, 409, "owner", theirs.owner)
  call_fails(wh, "export_query_result", {}, 400, "exactly one")
  both = {"sql": "SELECT 1", "saved_query_id": theirs.id}
  call_fails(wh, "export_query_result", both, 400, "exactly one")
  call_fails(wh, "export_query_result", {"saved_query_id": "sq_nope"}, 404, "sq_nope")
  call_fails(wh, "export_query_result", {"sql": "UPDATE orders SET amount = 1"}, 400, "read-only")
  call_fails(wh, "export_query_result", {"sql": "SELECT 1", "format": "xlsx"}, 400, "format")
  empty = {"sql": "SELECT * FROM orders WHERE amount < 0"}
  call_fails(wh, "export_query_result", empty, 409, "no rows")
  call_fails(wh, "list_saved_queries", {"owner": "not-an-email"}, 400, "owner")
  call_fails(wh, "list_exports", {"offset": -1}, 400, "offset")
