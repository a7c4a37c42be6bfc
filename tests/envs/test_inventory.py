from datetime import timedelta

import pytest

from envs._world import world
from envs.inventory import InventoryService, level_id
from tests.contract import call_fails, call_ok


@pytest.fixture
def inv():
  return InventoryService.create(seed=3)


def stocked(inv, minimum=10):
  """A level with at least ``minimum`` available units and one other warehouse."""
  return next(lv for lv in inv.state.levels if lv.on_hand - lv.reserved >= minimum)


def other_warehouse(inv, code):
  return next(w for w in inv.state.warehouses.ids() if w != code)


def test_seeded_data_is_sized():
  a = InventoryService.create(seed=5)
  physical = {p.sku for p in world(5).products if p.weight_kg > 0}
  assert set(a.state.products.ids()) == physical
  assert len(a.state.levels) == len(physical) * len(a.state.warehouses)
  big = InventoryService.create(seed=5, size=200).state
  assert abs(len(big.levels) - 200) <= len(physical)
  assert len(InventoryService.create(seed=5, size=4).state.levels) == 4


def test_seeded_ledger_sums_to_stock_and_reservations_match():
  state = InventoryService.create(seed=7).state
  for lv in state.levels:
    moves = state.movements.filter(lambda m, lv=lv: (m.sku, m.warehouse) == (lv.sku, lv.warehouse))
    assert sum(m.delta for m in moves) == lv.on_hand
    active = state.reservations.filter(
      lambda r, lv=lv: (r.sku, r.warehouse, r.status) == (lv.sku, lv.warehouse, "active")
    )
    assert sum(r.quantity for r in active) == lv.reserved <= lv.on_hand
    assert all(m.at < state.now for m in moves)
  statuses = {r.status for r in state.reservations}
  assert statuses == {"active", "released", "fulfilled"}
  assert any(lv.on_hand - lv.reserved <= lv.reorder_point for lv in state.levels)


def test_reads(inv):
  whs = call_ok(inv, "list_warehouses")
  assert len(whs) == len(inv.state.warehouses) and all(w["on_hand"] >= 0 for w in whs)
  page = call_ok(inv, "search_products", {"limit": 3})
  assert page["total"] == len(inv.state.products) and len(page["items"]) == 3
  hub = call_ok(inv, "search_products", {"query": "sensor hub"})["items"]
  assert [p["name"] for p in hub] == ["Sensor Hub"]
  supplies = call_ok(inv, "search_products", {"category": "supplies", "limit": 100})["items"]
  assert supplies and all(p["category"] == "Supplies" for p in supplies)
  sku = hub[0]["id"]
  stock = call_ok(inv, "get_stock", {"sku": sku})
  assert len(stock["warehouses"]) == len(whs)
  assert stock["available"] == stock["on_hand"] - stock["reserved"] == hub[0]["available"]
  code = whs[0]["id"]
  one = call_ok(inv, "get_stock", {"sku": sku, "warehouse": code})
  lv = inv.state.levels.get(level_id(sku, code))
  assert one["warehouses"][0]["available"] == lv.on_hand - lv.reserved
  moves = call_ok(inv, "list_movements", {"sku": sku, "warehouse": code, "limit": 100})["items"]
  assert moves and [m["at"] for m in moves] == sorted((m["at"] for m in moves), reverse=True)
  receipts = call_ok(inv, "list_movements", {"reason": "receipt", "limit": 5})["items"]
  assert receipts and all(m["delta"] > 0 for m in receipts)
  ref = receipts[0]["reference"]
  assert all(
    m["reference"] == ref for m in call_ok(inv, "list_movements", {"reference": ref})["items"]
  )
  assert call_ok(inv, "list_movements", {"since": "2030-01-01T00:00:00"})["total"] == 0
  active = call_ok(inv, "list_reservations", {"limit": 100})["items"]
  assert active and all(r["status"] == "active" for r in active)
  every = call_ok(inv, "list_reservations", {"status": None, "limit": 1})
  assert every["total"] == len(inv.state.reservations)
  low = call_ok(inv, "low_stock_report", {"limit": 100})["items"]
  assert low and all(r["available"] <= r["reorder_point"] for r in low)
  assert [r["shortfall"] for r in low] == sorted((r["shortfall"] for r in low), reverse=True)
  assert all(r["suggested_order"] >= r["shortfall"] for r in low)
  here = call_ok(inv, "low_stock_report", {"warehouse": code, "limit": 100})["items"]
  assert all(r["warehouse"] == code for r in here)


def test_receive_adjust_and_reorder_point(inv):
  lv = stocked(inv)
  args = {"sku": lv.sku, "warehouse": lv.warehouse}
  got = call_ok(inv, "receive_stock", {**args, "quantity": 50, "reference": "PO-20001"})
  assert (
    got["delta"] == 50 and got["reason"] == "receipt" and got["on_hand_after"] == lv.on_hand + 50
  )
  assert inv.state.levels.get(lv.id).on_hand == lv.on_hand + 50
  adj = call_ok(inv, "adjust_stock", {**args, "delta": -3, "note": "damaged in handling"})
  assert adj["reason"] == "adjustment" and adj["note"] == "damaged in handling"
  assert inv.state.levels.get(lv.id).on_hand == lv.on_hand + 47
  # The movement is stamped with the logical clock, which then steps one minute.
  assert inv.state.movements.get(adj["id"]).at == inv.state.now - timedelta(minutes=1)
  view = call_ok(inv, "set_reorder_point", {**args, "reorder_point": 10_000})
  assert view["reorder_point"] == 10_000 and inv.state.levels.get(lv.id).reorder_point == 10_000
  low = call_ok(inv, "low_stock_report", {"warehouse": lv.warehouse, "limit": 100})["items"]
  assert low[0]["id"] == lv.id


def test_transfer_moves_available_units(inv):
  lv = stocked(inv)
  dest = other_warehouse(inv, lv.warehouse)
  before_dest = inv.state.levels.get(level_id(lv.sku, dest)).on_hand
  out = call_ok(
    inv,
    "transfer_stock",
    {"sku": lv.sku, "from_warehouse": lv.warehouse, "to_warehouse": dest, "quantity": 4},
  )
  assert out["from"]["on_hand"] == lv.on_hand - 4 and out["to"]["on_hand"] == before_dest + 4
  assert [m["delta"] for m in out["movements"]] == [-4, 4]
  assert {m["reference"] for m in out["movements"]} == {out["reference"]}
  assert inv.state.levels.get(level_id(lv.sku, dest)).on_hand == before_dest + 4
  assert inv.state.levels.get(lv.id).on_hand == lv.on_hand - 4


def test_reserve_release_fulfil(inv):
  lv = stocked(inv)
  args = {"sku": lv.sku, "warehouse": lv.warehouse}
  res = call_ok(inv, "reserve_stock", {**args, "quantity": 5, "order_reference": "SO-55555"})
  assert res["status"] == "active" and res["quantity"] == 5
  assert inv.state.levels.get(lv.id).reserved == lv.reserved + 5
  stock = call_ok(inv, "get_stock", args)
  assert stock["available"] == lv.on_hand - lv.reserved - 5
  released = call_ok(inv, "release_reservation", {"reservation_id": res["id"]})
  assert released["status"] == "released" and released["closed_at"]
  assert inv.state.levels.get(lv.id).reserved == lv.reserved
  res2 = call_ok(inv, "reserve_stock", {**args, "quantity": 2, "order_reference": "SO-55556"})
  done = call_ok(inv, "fulfill_reservation", {"reservation_id": res2["id"]})
  assert done["reservation"]["status"] == "fulfilled"
  assert done["movement"]["delta"] == -2 and done["movement"]["reason"] == "shipment"
  assert done["movement"]["reference"] == "SO-55556"
  after = inv.state.levels.get(lv.id)
  assert (after.on_hand, after.reserved) == (lv.on_hand - 2, lv.reserved)


def test_error_paths_are_atomic(inv):
  lv = stocked(inv)
  sku, code = lv.sku, lv.warehouse
  dest = other_warehouse(inv, code)
  args = {"sku": sku, "warehouse": code}
  available = lv.on_hand - lv.reserved
  # 400: missing, ill-typed and out-of-range arguments
  call_fails(inv, "get_stock", {}, 400, "sku")
  call_fails(inv, "get_stock", {"sku": 5}, 400, "sku")
  call_fails(inv, "search_products", {"limit": 0}, 400, "limit")
  call_fails(inv, "list_movements", {"reason": "theft"}, 400, "reason")
  call_fails(inv, "receive_stock", {**args, "quantity": 0}, 400, "quantity")
  call_fails(inv, "receive_stock", {**args, "quantity": "many"}, 400, "quantity")
  call_fails(inv, "reserve_stock", {**args, "quantity": -1, "order_reference": "SO-1"}, 400)
  call_fails(inv, "reserve_stock", {**args, "quantity": 1, "order_reference": ""}, 400)
  call_fails(inv, "adjust_stock", {**args, "delta": 0, "note": "x"}, 400, "delta")
  call_fails(inv, "adjust_stock", {**args, "delta": 1}, 400, "note")
  call_fails(inv, "set_reorder_point", {**args, "reorder_point": -5}, 400, "reorder_point")
  transfer = {"sku": sku, "from_warehouse": code, "to_warehouse": code, "quantity": 1}
  call_fails(inv, "transfer_stock", transfer, 400, "different")
  call_fails(inv, "transfer_stock", {**transfer, "to_warehouse": dest, "quantity": 0}, 400)
  # 404: unknown sku, warehouse and reservation ids
  call_fails(inv, "get_stock", {"sku": "NOPE-1"}, 404, "NOPE-1")
  call_fails(inv, "get_stock", {"sku": sku, "warehouse": "ZZZ9"}, 404, "ZZZ9")
  call_fails(inv, "list_movements", {"sku": "NOPE-1"}, 404, "NOPE-1")
  call_fails(inv, "list_movements", {"warehouse": "ZZZ9"}, 404, "ZZZ9")
  call_fails(inv, "low_stock_report", {"warehouse": "ZZZ9"}, 404, "ZZZ9")
  call_fails(inv, "receive_stock", {"sku": "NOPE-1", "warehouse": code, "quantity": 1}, 404)
  call_fails(inv, "receive_stock", {"sku": sku, "warehouse": "ZZZ9", "quantity": 1}, 404, "ZZZ9")
  call_fails(
    inv, "adjust_stock", {"sku": "NOPE-1", "warehouse": code, "delta": 1, "note": "x"}, 404
  )
  call_fails(inv, "transfer_stock", {**transfer, "to_warehouse": "ZZZ9"}, 404, "ZZZ9")
  call_fails(
    inv,
    "reserve_stock",
    {"sku": "NOPE-1", "warehouse": code, "quantity": 1, "order_reference": "S"},
    404,
  )
  call_fails(inv, "set_reorder_point", {"sku": sku, "warehouse": "ZZZ9", "reorder_point": 1}, 404)
  for name in ("release_reservation", "fulfill_reservation"):
    call_fails(inv, name, {"reservation_id": "res_nope"}, 404, "res_nope")
  # 409: business rules
  call_fails(
    inv, "adjust_stock", {**args, "delta": -(lv.on_hand + 1), "note": "x"}, 409, "negative"
  )
  call_fails(
    inv,
    "reserve_stock",
    {**args, "quantity": available + 1, "order_reference": "SO-1"},
    409,
    "available",
  )
  call_fails(
    inv,
    "transfer_stock",
    {**transfer, "to_warehouse": dest, "quantity": available + 1},
    409,
    "available",
  )
  res = call_ok(inv, "reserve_stock", {**args, "quantity": available, "order_reference": "SO-2"})
  # Every unit is now promised: removing one would leave a reservation without stock.
  call_fails(inv, "adjust_stock", {**args, "delta": -1, "note": "x"}, 409, "reserved")
  call_fails(
    inv, "reserve_stock", {**args, "quantity": 1, "order_reference": "SO-3"}, 409, "only 0"
  )
  call_ok(inv, "release_reservation", {"reservation_id": res["id"]})
  call_fails(inv, "release_reservation", {"reservation_id": res["id"]}, 409, "released")
  call_fails(inv, "fulfill_reservation", {"reservation_id": res["id"]}, 409, "released")
  done = next(r for r in inv.state.reservations if r.status == "fulfilled")
  call_fails(inv, "release_reservation", {"reservation_id": done.id}, 409, "fulfilled")
  call_fails(inv, "no_such_tool", {}, 404, "get_stock")
