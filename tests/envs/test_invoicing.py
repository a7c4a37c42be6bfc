from datetime import date

import pytest

from envs._world import world
from envs.invoicing import InvoicingService
from tests.contract import call_fails, call_ok

TODAY = date(2026, 3, 2)


@pytest.fixture
def inv():
  return InvoicingService.create(seed=3)


def one(svc, status, overdue=None):
  args = {"status": status, "limit": 1}
  if overdue is not None:
    args["overdue"] = overdue
  return call_ok(svc, "list_invoices", args)["items"][0]


def test_seeded_data_is_sized():
  a = InvoicingService.create(seed=5)
  assert len(a.state.invoices) == 30
  assert len(InvoicingService.create(seed=5, size=120).state.invoices) == 120
  w = world(5)
  assert {c.name for c in a.state.customers} == {c.name for c in w.customers}
  assert set(a.state.products.ids()) == {p.sku for p in w.products}
  contacts = {k.email for c in w.customers for k in c.contacts}
  assert all(c.billing_email in contacts for c in a.state.customers)
  assert {i.status for i in a.state.invoices} == {"draft", "sent", "partially_paid", "paid", "void"}
  for i in a.state.invoices:
    assert i.due_date >= i.issue_date
    assert round(i.subtotal + i.tax, 2) == i.total
    paid = sum(p.amount for p in a.state.payments if p.invoice_id == i.id)
    assert round(paid, 2) == i.amount_paid
    if i.status != "void":
      assert round(i.total - i.amount_paid - i.amount_credited, 2) == i.amount_due
    assert (i.status == "paid") == (i.amount_due == 0 and i.status != "void")


def test_list_and_get_invoices(inv):
  page = call_ok(inv, "list_invoices", {"limit": 5})
  assert page["total"] == 30 and len(page["items"]) == 5 and page["next_offset"] == 5
  dates = [i["issue_date"] for i in page["items"]]
  assert dates == sorted(dates, reverse=True)
  late = call_ok(inv, "list_invoices", {"overdue": True, "limit": 100})["items"]
  assert late and all(i["overdue"] and i["due_date"] < TODAY.isoformat() for i in late)
  assert all(i["status"] in ("sent", "partially_paid") for i in late)
  cust = late[0]["customer_id"]
  mine = call_ok(inv, "list_invoices", {"customer_id": cust, "limit": 100})["items"]
  assert mine and all(i["customer_id"] == cust for i in mine)
  drafts = call_ok(inv, "list_invoices", {"status": "draft", "limit": 100})["items"]
  assert drafts and all(i["status"] == "draft" for i in drafts)
  hit = call_ok(inv, "list_invoices", {"query": late[0]["reference"]})["items"]
  assert [i["id"] for i in hit] == [late[0]["id"]]
  got = call_ok(inv, "get_invoice", {"invoice_id": late[0]["reference"]})
  assert got["id"] == late[0]["id"] and got["billing_email"].endswith(".com")
  assert call_ok(inv, "get_invoice", {"invoice_id": late[0]["id"]})["reference"] == got["reference"]
  paid = one(inv, "paid")
  full = call_ok(inv, "get_invoice", {"invoice_id": paid["id"]})
  assert round(sum(p["amount"] for p in full["payments"]), 2) == full["amount_paid"]


def test_customers_balance_and_overdue_report(inv):
  page = call_ok(inv, "list_customers", {"limit": 100})
  assert page["total"] == 10
  name = page["items"][0]["name"]
  assert call_ok(inv, "list_customers", {"query": name})["items"][0]["name"] == name
  report = call_ok(inv, "overdue_report", {"limit": 100})
  rows = report["items"]
  assert rows and [r["days_overdue"] for r in rows] == sorted(
    (r["days_overdue"] for r in rows), reverse=True
  )
  assert all(r["bucket"] in ("1-30", "31-60", "61-90", "90+") for r in rows)
  cust = rows[0]["customer_id"]
  bal = call_ok(inv, "customer_balance", {"customer_id": cust})
  open_ = [
    i
    for i in inv.state.invoices
    if i.customer_id == cust and i.status in ("sent", "partially_paid")
  ]
  assert bal["balance"] == round(sum(i.amount_due for i in open_), 2)
  mine = [r for r in rows if r["customer_id"] == cust]
  assert bal["overdue_balance"] == round(sum(r["amount_due"] for r in mine), 2) > 0
  only = call_ok(inv, "overdue_report", {"customer_id": cust, "limit": 100})["items"]
  assert [r["invoice_id"] for r in only] == [r["invoice_id"] for r in mine]
  cur = rows[0]["currency"]
  assert report["totals_by_currency"][cur] == round(
    sum(r["amount_due"] for r in rows if r["currency"] == cur), 2
  )


def test_invoice_lifecycle(inv):
  cust = next(iter(inv.state.customers))
  sku = inv.state.products.ids()[0]
  made = call_ok(
    inv,
    "create_invoice",
    {
      "customer_id": cust.id,
      "lines": [{"description": "Setup", "quantity": 2, "unit_price": 100, "tax_rate": 0.1}],
      "memo": "Spring order",
    },
  )
  assert made["status"] == "draft" and made["currency"] == cust.currency
  assert made["issue_date"] == TODAY.isoformat()
  assert (made["subtotal"], made["tax"], made["total"]) == (200.0, 20.0, 220.0)
  assert made["reference"] == f"INV-{inv.state.next_invoice_number - 1}"
  added = call_ok(inv, "add_line_item", {"invoice_id": made["reference"], "sku": sku})
  line = added["lines"][-1]
  assert line["id"] == "L2" and line["sku"] == sku and line["tax_rate"] == cust.tax_rate
  assert added["total"] == round(220 + line["amount"] + round(line["amount"] * cust.tax_rate, 2), 2)
  removed = call_ok(inv, "remove_line_item", {"invoice_id": made["id"], "line_id": "L2"})
  assert [li["id"] for li in removed["lines"]] == ["L1"] and removed["total"] == 220.0
  at = inv.state.now
  sent = call_ok(inv, "send_invoice", {"invoice_id": made["id"]})
  assert sent["status"] == "sent" and sent["sent_to"] == cust.billing_email
  assert inv.state.invoices.get(made["id"]).sent_at == at
  credit = call_ok(
    inv, "issue_credit_note", {"invoice_id": made["id"], "amount": 20, "reason": "Late delivery"}
  )
  assert credit["credit_note"]["number"].startswith("CN-")
  assert credit["invoice"]["amount_due"] == 200.0 and credit["invoice"]["status"] == "sent"
  paid = call_ok(
    inv, "record_payment", {"invoice_id": made["id"], "amount": 50.5, "method": "card"}
  )
  assert paid["invoice"]["status"] == "partially_paid" and paid["invoice"]["amount_due"] == 149.5
  pid = paid["payment"]["id"]
  assert inv.state.payments.get(pid).amount == 50.5
  done = call_ok(
    inv,
    "record_payment",
    {"invoice_id": made["id"], "amount": 149.5, "method": "check", "reference": "CHK-1"},
  )
  assert done["invoice"]["status"] == "paid" and done["invoice"]["amount_due"] == 0
  stored = inv.state.invoices.get(made["id"])
  assert stored.status == "paid" and stored.amount_paid == 200.0 and stored.amount_credited == 20
  pays = call_ok(inv, "list_payments", {"invoice_id": made["id"]})["items"]
  assert {p["id"] for p in pays} == {pid, done["payment"]["id"]}
  checks = call_ok(inv, "list_payments", {"method": "check", "limit": 100})["items"]
  assert checks and all(p["method"] == "check" for p in checks)
  by_cust = call_ok(inv, "list_payments", {"customer_id": cust.id, "limit": 100})["items"]
  assert all(p["customer_id"] == cust.id for p in by_cust)


def test_create_defaults_and_void(inv):
  cust = next(iter(inv.state.customers))
  made = call_ok(
    inv, "create_invoice", {"customer_id": cust.id, "issue_date": "2026-02-01", "lines": []}
  )
  assert (
    made["due_date"]
    == date.fromordinal(date(2026, 2, 1).toordinal() + cust.payment_terms_days).isoformat()
  )
  assert made["total"] == 0 and made["lines"] == []
  voided = call_ok(inv, "void_invoice", {"invoice_id": made["id"], "reason": "Duplicate"})
  assert voided["status"] == "void" and voided["void_reason"] == "Duplicate"
  assert inv.state.invoices.get(made["id"]).status == "void"
  sent = one(inv, "sent")
  assert call_ok(inv, "void_invoice", {"invoice_id": sent["id"]})["amount_due"] == 0


def test_error_paths_are_atomic(inv):
  draft, sent = one(inv, "draft"), one(inv, "sent")
  partial, paid, void = one(inv, "partially_paid"), one(inv, "paid"), one(inv, "void")
  cust = next(iter(inv.state.customers)).id
  # missing, ill-typed and out-of-range arguments
  call_fails(inv, "get_invoice", {}, 400, "invoice_id")
  call_fails(inv, "get_invoice", {"invoice_id": 7}, 400, "invoice_id")
  call_fails(inv, "list_invoices", {"limit": 0}, 400, "limit")
  call_fails(inv, "list_invoices", {"status": "late"}, 400, "status")
  call_fails(inv, "customer_balance", {}, 400, "customer_id")
  call_fails(inv, "record_payment", {"invoice_id": sent["id"], "amount": 0, "method": "ach"}, 400)
  call_fails(inv, "record_payment", {"invoice_id": sent["id"], "amount": 1, "method": "cash"}, 400)
  call_fails(
    inv, "record_payment", {"invoice_id": sent["id"], "amount": 0.001, "method": "ach"}, 400
  )
  call_fails(inv, "add_line_item", {"invoice_id": draft["id"], "description": "x"}, 400, "price")
  call_fails(inv, "add_line_item", {"invoice_id": draft["id"], "unit_price": 5}, 400, "description")
  call_fails(inv, "add_line_item", {"invoice_id": draft["id"], "sku": "HAR-1", "quantity": -1}, 400)
  call_fails(inv, "add_line_item", {"invoice_id": draft["id"], "unit_price": 5, "tax_rate": 2}, 400)
  call_fails(
    inv,
    "create_invoice",
    {"customer_id": cust, "issue_date": "2026-03-10", "due_date": "2026-03-01"},
    400,
    "due_date",
  )
  call_fails(inv, "create_invoice", {"customer_id": cust, "lines": [{"bogus": 1}]}, 400)
  call_fails(inv, "issue_credit_note", {"invoice_id": sent["id"], "amount": 5, "reason": ""}, 400)
  # unknown ids
  call_fails(inv, "get_invoice", {"invoice_id": "INV-0"}, 404, "INV-0")
  call_fails(inv, "list_invoices", {"customer_id": "cus_x"}, 404, "cus_x")
  call_fails(inv, "list_payments", {"invoice_id": "inv_x"}, 404, "inv_x")
  call_fails(inv, "list_payments", {"customer_id": "cus_x"}, 404, "cus_x")
  call_fails(inv, "customer_balance", {"customer_id": "cus_x"}, 404, "cus_x")
  call_fails(inv, "overdue_report", {"customer_id": "cus_x"}, 404, "cus_x")
  call_fails(inv, "create_invoice", {"customer_id": "cus_x"}, 404, "cus_x")
  call_fails(inv, "create_invoice", {"customer_id": cust, "lines": [{"sku": "ZZ-9"}]}, 404, "ZZ-9")
  call_fails(inv, "add_line_item", {"invoice_id": "inv_x", "unit_price": 1}, 404, "inv_x")
  call_fails(inv, "add_line_item", {"invoice_id": draft["id"], "sku": "ZZ-9"}, 404, "ZZ-9")
  call_fails(inv, "remove_line_item", {"invoice_id": "inv_x", "line_id": "L1"}, 404, "inv_x")
  call_fails(inv, "remove_line_item", {"invoice_id": draft["id"], "line_id": "L99"}, 404, "L99")
  call_fails(inv, "send_invoice", {"invoice_id": "inv_x"}, 404, "inv_x")
  call_fails(inv, "record_payment", {"invoice_id": "inv_x", "amount": 1, "method": "ach"}, 404)
  call_fails(inv, "issue_credit_note", {"invoice_id": "inv_x", "amount": 1, "reason": "r"}, 404)
  call_fails(inv, "void_invoice", {"invoice_id": "inv_x"}, 404, "inv_x")
  # business rules
  for done in (sent, partial, paid, void):
    call_fails(
      inv, "add_line_item", {"invoice_id": done["id"], "unit_price": 1, "description": "x"}, 409
    )
    call_fails(
      inv, "remove_line_item", {"invoice_id": done["id"], "line_id": "L1"}, 409, "only draft"
    )
    call_fails(inv, "send_invoice", {"invoice_id": done["id"]}, 409, "already")
  empty = call_ok(inv, "create_invoice", {"customer_id": cust})
  call_fails(inv, "send_invoice", {"invoice_id": empty["id"]}, 409, "no billable lines")
  pay = {"amount": 1, "method": "ach"}
  call_fails(inv, "record_payment", {"invoice_id": draft["id"], **pay}, 409, "draft")
  call_fails(inv, "record_payment", {"invoice_id": paid["id"], **pay}, 409, "paid")
  call_fails(inv, "record_payment", {"invoice_id": void["id"], **pay}, 409, "void")
  too_much = {"amount": partial["amount_due"] + 1, "method": "wire"}
  call_fails(inv, "record_payment", {"invoice_id": partial["id"], **too_much}, 409, "exceeds")
  credit = {"amount": 1, "reason": "r"}
  call_fails(inv, "issue_credit_note", {"invoice_id": draft["id"], **credit}, 409, "draft")
  call_fails(inv, "issue_credit_note", {"invoice_id": paid["id"], **credit}, 409, "paid")
  call_fails(inv, "issue_credit_note", {"invoice_id": void["id"], **credit}, 409, "void")
  big = {"amount": sent["amount_due"] + 1, "reason": "r"}
  call_fails(inv, "issue_credit_note", {"invoice_id": sent["id"], **big}, 409, "exceeds")
  call_fails(inv, "void_invoice", {"invoice_id": void["id"]}, 409, "already void")
  call_fails(inv, "void_invoice", {"invoice_id": partial["id"]}, 409, "nothing paid")
  call_fails(inv, "void_invoice", {"invoice_id": paid["id"]}, 409, "nothing paid")
