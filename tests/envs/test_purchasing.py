from datetime import timedelta

import pytest

from envs._world import world
from envs.purchasing import APPROVAL_LIMIT, PurchasingService
from tests.contract import call_fails, call_ok

SEED = 3


@pytest.fixture
def pur():
  return PurchasingService.create(seed=SEED)


def in_status(pur, status):
  return next(o for o in pur.state.orders if o.status == status)


def later(pur, days=14):
  return (pur.state.now.date() + timedelta(days=days)).isoformat()


def an_item(pur, cheap=True):
  items = sorted(pur.state.items, key=lambda i: i.standard_cost)
  return items[0] if cheap else items[-1]


def test_seeded_data_is_sized():
  a = PurchasingService.create(seed=5)
  assert len(a.state.orders) == 24
  assert len(PurchasingService.create(seed=5, size=120).state.orders) == 120
  assert {v.name for v in a.state.vendors} == {v.name for v in world(5).vendors}


def test_seeded_orders_are_consistent():
  state = PurchasingService.create(seed=7).state
  statuses = {o.status for o in state.orders}
  assert statuses == {
    "draft",
    "submitted",
    "approved",
    "partially_received",
    "received",
    "cancelled",
  }
  for o in state.orders:
    assert o.total == round(sum(ln.quantity * ln.unit_cost for ln in o.lines), 2)
    received = {ln.id: ln.received for ln in o.lines}
    got = {}
    for r in state.receipts.filter(lambda r, o=o: r.po_id == o.id):
      for ln in r.lines:
        got[ln.id] = got.get(ln.id, 0) + ln.quantity
    assert all(got.get(k, 0) == q for k, q in received.items())
    if o.status == "submitted":
      assert o.total > APPROVAL_LIMIT and o.approver is None
    if o.status == "received":
      assert all(ln.received == ln.quantity for ln in o.lines)
    if o.status == "partially_received":
      assert 0 < sum(received.values()) < sum(ln.quantity for ln in o.lines)
    if o.status in ("draft", "submitted", "approved"):
      assert o.expected_date >= state.now.date()
    if o.approver:
      assert o.approver != o.requester


def test_reads(pur):
  vendors = call_ok(pur, "list_vendors", {"limit": 100})
  assert vendors["total"] == 5
  names = [v["name"] for v in vendors["items"]]
  assert names == sorted(names)
  apex = call_ok(pur, "list_vendors", {"query": "apex"})["items"]
  assert [v["name"] for v in apex] == ["Apex Components"]
  supplies = call_ok(pur, "list_vendors", {"category": "supplies"})["items"]
  assert supplies and all(v["category"] == "Supplies" for v in supplies)
  vendor = call_ok(pur, "get_vendor", {"vendor_id": apex[0]["id"]})
  assert vendor["contact_email"].endswith("@apexcomponents.com")
  opened = [
    o
    for o in pur.state.orders
    if o.vendor_id == vendor["id"] and o.status not in ("received", "cancelled")
  ]
  assert vendor["open_orders"] == len(opened)
  items = call_ok(pur, "search_items", {"query": "scanner"})["items"]
  assert [i["name"] for i in items] == ["Barcode Scanner"]
  assert call_ok(pur, "search_items", {"category": "Services"})["total"] == 0
  page = call_ok(pur, "list_purchase_orders", {"limit": 5})
  assert page["total"] == 24 and "lines" not in page["items"][0]
  created = [o["created_at"] for o in page["items"]]
  assert created == sorted(created, reverse=True)
  drafts = call_ok(pur, "list_purchase_orders", {"status": "draft"})["items"]
  assert drafts and all(o["status"] == "draft" for o in drafts)
  sku = pur.state.orders.get(drafts[0]["id"]).lines[0].id
  with_sku = call_ok(pur, "list_purchase_orders", {"sku": sku, "limit": 100})["items"]
  assert drafts[0]["id"] in {o["id"] for o in with_sku}
  who = drafts[0]["requester"]
  mine = call_ok(pur, "list_purchase_orders", {"requester": who, "limit": 100})["items"]
  assert mine and all(o["requester"] == who for o in mine)
  part = in_status(pur, "partially_received")
  got = call_ok(pur, "get_purchase_order", {"po": part.reference})
  assert got["id"] == part.id and got["receipts"]
  assert got["outstanding"] == {ln.id: ln.quantity - ln.received for ln in part.lines}
  assert call_ok(pur, "get_purchase_order", {"po": part.id})["reference"] == part.reference
  spend = call_ok(pur, "vendor_spend")
  assert [r["committed"] for r in spend] == sorted((r["committed"] for r in spend), reverse=True)
  committed = sum(
    o.total for o in pur.state.orders if o.status in ("approved", "partially_received", "received")
  )
  assert round(sum(r["committed"] for r in spend), 2) == round(committed, 2)
  one = call_ok(pur, "vendor_spend", {"vendor_id": part.vendor_id})
  assert len(one) == 1 and one[0]["open_value"] > 0
  assert call_ok(pur, "vendor_spend", {"since": "2030-01-01"})[0]["committed"] == 0


def test_small_order_is_approved_on_submission_and_received_in_parts(pur):
  vendor = next(v for v in pur.state.vendors if v.category == "Supplies")
  item = an_item(pur)
  po = call_ok(
    pur,
    "create_purchase_order",
    {"vendor_id": vendor.id, "expected_date": later(pur), "notes": "restock"},
  )
  assert (
    po["status"] == "draft" and po["lines"] == [] and po["requester"] == world(SEED).people[0].email
  )
  assert po["reference"] == "PO-10025" and po["currency"] == vendor.currency
  po = call_ok(pur, "add_po_line", {"po": po["reference"], "sku": item.id, "quantity": 10})
  assert po["lines"][0]["unit_cost"] == item.standard_cost
  assert po["total"] == round(10 * item.standard_cost, 2)
  other = an_item(pur, cheap=False)
  po = call_ok(pur, "add_po_line", {"po": po["id"], "sku": other.id, "quantity": 1, "unit_cost": 5})
  po = call_ok(pur, "remove_po_line", {"po": po["id"], "sku": other.id})
  assert [ln["id"] for ln in po["lines"]] == [item.id]
  po = call_ok(pur, "submit_purchase_order", {"po": po["id"]})
  assert po["status"] == "approved" and po["approved_at"] == po["submitted_at"]
  out = call_ok(pur, "receive_items", {"po": po["id"], "lines": [{"sku": item.id, "quantity": 4}]})
  assert out["order"]["status"] == "partially_received"
  assert out["receipt"]["lines"] == [{"id": item.id, "quantity": 4}]
  assert pur.state.orders.get(po["id"]).lines[0].received == 4
  out = call_ok(pur, "receive_items", {"po": po["id"], "note": "rest of it"})
  assert out["receipt"]["lines"] == [{"id": item.id, "quantity": 6}]
  assert out["order"]["status"] == "received" and out["order"]["closed_at"]
  assert len(pur.state.receipts.filter(lambda r: r.po_id == po["id"])) == 2


def test_large_order_needs_another_employees_approval(pur):
  vendor = next(v for v in pur.state.vendors if v.category == "Hardware")
  item = an_item(pur, cheap=False)
  qty = int(APPROVAL_LIMIT // item.standard_cost) + 1
  requester = world(SEED).people[3].email
  po = call_ok(
    pur,
    "create_purchase_order",
    {
      "vendor_id": vendor.id,
      "expected_date": later(pur),
      "lines": [{"sku": item.id, "quantity": qty}],
      "requester": requester.upper(),
    },
  )
  assert po["requester"] == requester and po["total"] > APPROVAL_LIMIT
  po = call_ok(pur, "submit_purchase_order", {"po": po["id"]})
  assert po["status"] == "submitted" and po["approved_at"] is None
  call_fails(pur, "receive_items", {"po": po["id"]}, 409, "approved")
  call_fails(pur, "approve_purchase_order", {"po": po["id"], "approver": requester}, 409, "another")
  approver = world(SEED).people[1].email
  po = call_ok(pur, "approve_purchase_order", {"po": po["id"], "approver": approver})
  assert po["status"] == "approved" and po["approver"] == approver
  spend = call_ok(pur, "vendor_spend", {"vendor_id": vendor.id})[0]
  assert spend["open_value"] >= po["total"]
  cancelled = call_ok(pur, "cancel_purchase_order", {"po": po["id"], "reason": "budget cut"})
  assert cancelled["status"] == "cancelled" and cancelled["cancel_reason"] == "budget cut"
  assert pur.state.orders.get(po["id"]).closed_at == pur.state.now - timedelta(minutes=1)


def test_error_paths_are_atomic(pur):
  draft, approved = in_status(pur, "draft"), in_status(pur, "approved")
  submitted, received = in_status(pur, "submitted"), in_status(pur, "received")
  part, cancelled = in_status(pur, "partially_received"), in_status(pur, "cancelled")
  vendor_id, item = draft.vendor_id, an_item(pur)
  me = world(SEED).people[0].email
  # 400: missing, ill-typed and out-of-range arguments
  call_fails(pur, "get_vendor", {}, 400, "vendor_id")
  call_fails(pur, "get_purchase_order", {"po": 7}, 400, "po")
  call_fails(pur, "list_purchase_orders", {"status": "shipped"}, 400, "status")
  call_fails(pur, "list_purchase_orders", {"requester": "nobody"}, 400, "requester")
  new = {"vendor_id": vendor_id, "expected_date": later(pur)}
  call_fails(pur, "create_purchase_order", {"vendor_id": vendor_id}, 400, "expected_date")
  call_fails(pur, "create_purchase_order", {**new, "expected_date": "soon"}, 400, "expected_date")
  past = (pur.state.now.date() - timedelta(days=1)).isoformat()
  call_fails(pur, "create_purchase_order", {**new, "expected_date": past}, 400, "in the past")
  line = {"sku": item.id, "quantity": 1}
  call_fails(pur, "create_purchase_order", {**new, "lines": [line, line]}, 400, "once")
  call_fails(
    pur, "create_purchase_order", {**new, "lines": [{**line, "quantity": 0}]}, 400, "quantity"
  )
  call_fails(
    pur, "add_po_line", {"po": draft.id, "sku": item.id, "quantity": 1, "unit_cost": -1}, 400
  )
  call_fails(pur, "receive_items", {"po": approved.id, "lines": [line, line]}, 400, "once")
  call_fails(
    pur, "receive_items", {"po": approved.id, "lines": [{"sku": item.id}]}, 400, "quantity"
  )
  call_fails(pur, "cancel_purchase_order", {"po": draft.id, "reason": ""}, 400, "reason")
  call_fails(pur, "approve_purchase_order", {"po": submitted.id, "approver": "x"}, 400, "approver")
  # 404: unknown vendor, order, sku, line and employee
  call_fails(pur, "get_vendor", {"vendor_id": "ven_nope"}, 404, "ven_nope")
  call_fails(pur, "list_purchase_orders", {"vendor_id": "ven_nope"}, 404, "ven_nope")
  call_fails(pur, "vendor_spend", {"vendor_id": "ven_nope"}, 404, "ven_nope")
  call_fails(pur, "create_purchase_order", {**new, "vendor_id": "ven_nope"}, 404, "ven_nope")
  call_fails(
    pur, "create_purchase_order", {**new, "lines": [{"sku": "NO-1", "quantity": 1}]}, 404, "NO-1"
  )
  call_fails(
    pur, "create_purchase_order", {**new, "requester": "who@nowhere.com"}, 404, "who@nowhere.com"
  )
  for name, extra in (
    ("get_purchase_order", {}),
    ("add_po_line", {"sku": item.id, "quantity": 1}),
    ("remove_po_line", {"sku": item.id}),
    ("submit_purchase_order", {}),
    ("approve_purchase_order", {"approver": me}),
    ("receive_items", {}),
    ("cancel_purchase_order", {"reason": "x"}),
  ):
    call_fails(pur, name, {"po": "PO-99999", **extra}, 404, "PO-99999")
  call_fails(pur, "add_po_line", {"po": draft.id, "sku": "NO-1", "quantity": 1}, 404, "NO-1")
  absent = next(i.id for i in pur.state.items if all(ln.id != i.id for ln in draft.lines))
  call_fails(pur, "remove_po_line", {"po": draft.id, "sku": absent}, 404, absent)
  call_fails(
    pur, "approve_purchase_order", {"po": submitted.id, "approver": "a@b.com"}, 404, "a@b.com"
  )
  # 409: business rules
  call_fails(
    pur, "add_po_line", {"po": draft.id, "sku": draft.lines[0].id, "quantity": 1}, 409, "already"
  )
  for po in (submitted, approved, received):
    call_fails(pur, "add_po_line", {"po": po.id, "sku": absent, "quantity": 1}, 409, "draft")
    call_fails(pur, "remove_po_line", {"po": po.id, "sku": po.lines[0].id}, 409, "draft")
  call_fails(pur, "submit_purchase_order", {"po": approved.id}, 409, "only a draft")
  empty = call_ok(pur, "create_purchase_order", new)
  call_fails(pur, "submit_purchase_order", {"po": empty["id"]}, 409, "no lines")
  call_fails(
    pur, "approve_purchase_order", {"po": draft.id, "approver": me}, 409, "only a submitted"
  )
  call_fails(
    pur, "approve_purchase_order", {"po": approved.id, "approver": me}, 409, "only a submitted"
  )
  call_fails(
    pur,
    "approve_purchase_order",
    {"po": submitted.id, "approver": submitted.requester},
    409,
    "cannot approve",
  )
  for po in (draft, submitted, received, cancelled):
    call_fails(pur, "receive_items", {"po": po.id}, 409, po.status)
  ln = part.lines[0]
  too_many = {"sku": ln.id, "quantity": ln.quantity - ln.received + 1}
  call_fails(pur, "receive_items", {"po": part.id, "lines": [too_many]}, 409, "outstanding")
  stranger = next(i.id for i in pur.state.items if all(x.id != i.id for x in part.lines))
  call_fails(
    pur,
    "receive_items",
    {"po": part.id, "lines": [{"sku": stranger, "quantity": 1}]},
    409,
    "no line",
  )
  for po in (received, part, cancelled):
    call_fails(
      pur, "cancel_purchase_order", {"po": po.id, "reason": "x"}, 409, "cannot be cancelled"
    )
  call_fails(pur, "no_such_tool", {}, 404, "receive_items")
