import pytest

from envs._world import world
from envs.quotes import QuotesService
from tests.contract import call_fails, call_ok


@pytest.fixture
def cpq():
  return QuotesService.create(seed=3)


def quote_in(cpq, status):
  return next(q for q in cpq.state.quotes if q.status == status and q.lines)


def skus(cpq):
  return [p.id for p in cpq.state.products]


def new_quote(cpq, **extra):
  customer = world(3).customers[0]
  args = {"account": customer.name, "contact_email": customer.contacts[0].email, **extra}
  return call_ok(cpq, "create_quote", args)


def test_seeded_data_is_sized():
  a = QuotesService.create(seed=5)
  assert len(a.state.quotes) == 25
  big = QuotesService.create(seed=5, size=70).state
  assert len(big.quotes) == 70 and len({q.status for q in big.quotes}) == 7
  assert {p.id for p in a.state.products} == {p.sku for p in world(5).products}
  customers = {c.name for c in world(5).customers}
  for q in big.quotes:
    assert q.account in customers and q.lines
    assert q.total == pytest.approx(q.subtotal + q.tax)
    assert q.subtotal == pytest.approx(sum(li.amount for li in q.lines))
    if q.status in ("pending_approval", "approved"):
      assert any(li.discount_pct > 30 for li in q.lines)
    if q.status == "approved":
      assert q.approved_by and q.approved_by != q.owner
    if q.status == "expired":
      assert q.valid_until < big.now.date()
    if q.status == "sent":
      assert q.valid_until >= big.now.date()


def test_price_book_reads(cpq):
  page = call_ok(cpq, "list_products", {"limit": 5})
  assert page["total"] == 12 and len(page["items"]) == 5
  assert [p["id"] for p in page["items"]] == sorted(skus(cpq))[:5]
  hw = call_ok(cpq, "list_products", {"category": "hardware", "limit": 100})["items"]
  assert hw and all(p["category"] == "Hardware" for p in hw)
  named = call_ok(cpq, "list_products", {"query": "label printer"})["items"]
  assert [p["name"] for p in named] == ["Label Printer"]
  price = call_ok(cpq, "get_price", {"sku": named[0]["id"], "quantity": 4, "discount_pct": 10})
  assert price["amount"] == pytest.approx(4 * named[0]["list_price"] * 0.9)
  assert price["needs_approval"] is False
  assert call_ok(cpq, "get_price", {"sku": named[0]["id"], "discount_pct": 31})["needs_approval"]


def test_quote_reads(cpq):
  page = call_ok(cpq, "list_quotes", {"limit": 100})
  assert page["total"] == 25 and "lines" not in page["items"][0]
  times = [q["created_at"] for q in page["items"]]
  assert times == sorted(times, reverse=True)
  sent = call_ok(cpq, "list_quotes", {"status": "sent", "limit": 100})["items"]
  assert sent and all(q["status"] == "sent" for q in sent)
  q = page["items"][0]
  by_acc = call_ok(cpq, "list_quotes", {"account": q["account"], "limit": 100})["items"]
  assert q["id"] in [x["id"] for x in by_acc] and all(x["account"] == q["account"] for x in by_acc)
  by_contact = call_ok(cpq, "list_quotes", {"contact_email": q["contact_email"]})["items"]
  assert all(x["contact_email"] == q["contact_email"] for x in by_contact)
  full = call_ok(cpq, "get_quote", {"quote_id": q["id"]})
  assert full["lines"] and full["total"] == q["total"]


def test_build_and_send_quote(cpq):
  q = new_quote(cpq, tax_rate=0.1)
  assert q["status"] == "draft" and q["lines"] == [] and q["owner"] == world(3).people[0].email
  assert q["valid_until"] == "2026-04-01" and q["currency"] == world(3).currency
  a, b = skus(cpq)[:2]
  price_a = cpq.state.products.get(a).list_price
  q = call_ok(cpq, "add_line_item", {"quote_id": q["id"], "sku": a, "quantity": 2})
  q = call_ok(cpq, "add_line_item", {"quote_id": q["id"], "sku": b, "discount_pct": 10})
  assert [li["sku"] for li in q["lines"]] == [a, b]
  line_a = q["lines"][0]["id"]
  q = call_ok(cpq, "update_line_item", {"quote_id": q["id"], "line_id": line_a, "quantity": 3})
  assert q["lines"][0]["amount"] == pytest.approx(3 * price_a)
  q = call_ok(cpq, "remove_line_item", {"quote_id": q["id"], "line_id": q["lines"][1]["id"]})
  assert q["subtotal"] == pytest.approx(3 * price_a)
  assert q["tax"] == pytest.approx(round(0.3 * price_a, 2))
  assert q["total"] == pytest.approx(q["subtotal"] + q["tax"])
  q = call_ok(
    cpq, "update_quote", {"quote_id": q["id"], "tax_rate": 0.0, "valid_until": "2026-03-20"}
  )
  assert q["tax"] == 0 and q["total"] == q["subtotal"] and q["valid_until"] == "2026-03-20"
  sent = call_ok(cpq, "send_quote", {"quote_id": q["id"]})
  assert sent["status"] == "sent" and sent["sent_at"]
  assert call_ok(cpq, "accept_quote", {"quote_id": q["id"]})["status"] == "accepted"
  assert cpq.state.quotes.get(q["id"]).status == "accepted"


def test_discount_approval_flow(cpq):
  q = new_quote(cpq)
  sku = skus(cpq)[0]
  q = call_ok(cpq, "add_line_item", {"quote_id": q["id"], "sku": sku, "discount_pct": 40})
  call_fails(cpq, "send_quote", {"quote_id": q["id"]}, 409, "request_approval")
  assert call_ok(cpq, "request_approval", {"quote_id": q["id"]})["status"] == "pending_approval"
  call_fails(cpq, "send_quote", {"quote_id": q["id"]}, 409, "pending_approval")
  me = world(3).people[0].email
  call_fails(cpq, "approve_quote", {"quote_id": q["id"], "approver": me}, 409, "own")
  boss = world(3).people[1].email
  ok = call_ok(cpq, "approve_quote", {"quote_id": q["id"], "approver": boss})
  assert ok["status"] == "approved" and ok["approved_by"] == boss
  # Raising the discount after approval voids the approval.
  line = ok["lines"][0]["id"]
  redo = call_ok(
    cpq, "update_line_item", {"quote_id": q["id"], "line_id": line, "discount_pct": 45}
  )
  assert redo["status"] == "draft" and redo["approved_by"] is None
  call_ok(cpq, "request_approval", {"quote_id": q["id"]})
  call_ok(cpq, "approve_quote", {"quote_id": q["id"], "approver": boss})
  assert call_ok(cpq, "send_quote", {"quote_id": q["id"]})["status"] == "sent"
  out = call_ok(cpq, "reject_quote", {"quote_id": q["id"], "reason": "Budget cut"})
  assert out["status"] == "rejected" and out["rejection_reason"] == "Budget cut"
  assert cpq.state.quotes.get(q["id"]).status == "rejected"


def test_error_paths_are_atomic(cpq):
  sent, draft = quote_in(cpq, "sent"), quote_in(cpq, "draft")
  line = draft.lines[0].id
  call_fails(cpq, "get_quote", {}, 400, "quote_id")
  call_fails(cpq, "get_quote", {"quote_id": "quo_x"}, 404, "quo_x")
  call_fails(cpq, "get_price", {"sku": "NOPE-1"}, 404, "NOPE-1")
  call_fails(cpq, "get_price", {"sku": skus(cpq)[0], "quantity": 0}, 400, "quantity")
  call_fails(cpq, "list_quotes", {"status": "lost"}, 400, "status")
  base = {"account": "Acme", "contact_email": "a@acme.com"}
  call_fails(cpq, "create_quote", {**base, "contact_email": "acme"}, 400, "contact_email")
  call_fails(cpq, "create_quote", {**base, "valid_until": "2026-01-01"}, 400, "valid_until")
  call_fails(cpq, "create_quote", {**base, "tax_rate": 0.9}, 400, "tax_rate")
  call_fails(cpq, "create_quote", {**base, "currency": "usd"}, 400, "currency")
  call_fails(cpq, "update_quote", {"quote_id": "quo_x", "tax_rate": 0.1}, 404, "quo_x")
  call_fails(cpq, "update_quote", {"quote_id": draft.id}, 400, "at least one")
  call_fails(cpq, "update_quote", {"quote_id": draft.id, "valid_until": "2025-12-31"}, 400)
  call_fails(cpq, "update_quote", {"quote_id": sent.id, "tax_rate": 0.1}, 409, "cannot be edited")
  add = {"quote_id": draft.id, "sku": skus(cpq)[0]}
  call_fails(cpq, "add_line_item", {**add, "quote_id": "quo_x"}, 404, "quo_x")
  call_fails(cpq, "add_line_item", {**add, "sku": "ZZZ-9"}, 404, "ZZZ-9")
  call_fails(cpq, "add_line_item", {**add, "quantity": 0}, 400, "quantity")
  call_fails(cpq, "add_line_item", {**add, "discount_pct": 120}, 400, "discount_pct")
  call_fails(cpq, "add_line_item", {**add, "sku": draft.lines[0].sku}, 409, "already on quote")
  call_fails(cpq, "add_line_item", {**add, "quote_id": sent.id}, 409, "sent")
  upd = {"quote_id": draft.id, "line_id": line}
  call_fails(cpq, "update_line_item", upd, 400, "quantity")
  call_fails(cpq, "update_line_item", {**upd, "line_id": "li_x", "quantity": 2}, 404, "li_x")
  call_fails(cpq, "update_line_item", {**upd, "quote_id": "quo_x", "quantity": 2}, 404, "quo_x")
  call_fails(cpq, "update_line_item", {**upd, "quantity": -1}, 400, "quantity")
  sent_line = {"quote_id": sent.id, "line_id": sent.lines[0].id}
  call_fails(cpq, "update_line_item", {**sent_line, "quantity": 2}, 409, "cannot be edited")
  call_fails(cpq, "remove_line_item", sent_line, 409, "cannot be edited")
  call_fails(cpq, "remove_line_item", {**upd, "line_id": "li_x"}, 404, "li_x")
  call_fails(cpq, "remove_line_item", {**upd, "quote_id": "quo_x"}, 404, "quo_x")
  call_fails(cpq, "request_approval", {"quote_id": "quo_x"}, 404, "quo_x")
  call_fails(cpq, "request_approval", {"quote_id": sent.id}, 409, "only a draft")
  small = next(
    q
    for q in cpq.state.quotes
    if q.status == "draft" and all(li.discount_pct <= 30 for li in q.lines)
  )
  call_fails(cpq, "request_approval", {"quote_id": small.id}, 409, "needs no approval")
  boss = world(3).people[1].email
  call_fails(cpq, "approve_quote", {"quote_id": "quo_x", "approver": boss}, 404, "quo_x")
  call_fails(cpq, "approve_quote", {"quote_id": draft.id, "approver": "x@y.com"}, 404, "x@y.com")
  call_fails(cpq, "approve_quote", {"quote_id": draft.id, "approver": boss}, 409, "pending")
  call_fails(cpq, "send_quote", {"quote_id": "quo_x"}, 404, "quo_x")
  call_fails(cpq, "send_quote", {"quote_id": sent.id}, 409, "only a draft or approved")
  empty = new_quote(cpq)["id"]
  call_fails(cpq, "send_quote", {"quote_id": empty}, 409, "no line items")
  call_fails(cpq, "accept_quote", {"quote_id": "quo_x"}, 404, "quo_x")
  call_fails(cpq, "accept_quote", {"quote_id": draft.id}, 409, "only a sent")
  call_fails(cpq, "reject_quote", {"quote_id": sent.id}, 400, "reason")
  call_fails(cpq, "reject_quote", {"quote_id": "quo_x", "reason": "r"}, 404, "quo_x")
  call_fails(cpq, "reject_quote", {"quote_id": draft.id, "reason": "r"}, 409, "only a sent")


def test_expiry_blocks_accept_and_send(cpq):
  sent = quote_in(cpq, "sent")
  draft = next(
    q
    for q in cpq.state.quotes
    if q.status == "draft" and q.lines and all(li.discount_pct <= 30 for li in q.lines)
  )
  # Jump the logical clock past both validity dates.
  cpq.state.now = cpq.state.now.replace(year=2027)
  call_fails(cpq, "accept_quote", {"quote_id": sent.id}, 409, "expired")
  call_fails(cpq, "send_quote", {"quote_id": draft.id}, 409, "valid_until")
