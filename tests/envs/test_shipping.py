from datetime import date, timedelta

import pytest

from envs._world import world
from envs.shipping import COUNTRIES, ShippingService
from tests.contract import call_fails, call_ok

SEED = 3


@pytest.fixture
def shp():
  return ShippingService.create(seed=SEED)


def in_status(shp, status):
  return next(s for s in shp.state.shipments if s.status == status)


def new_label(shp, **overrides):
  args = {
    "order_reference": "SO-70001",
    "recipient_name": "Ava Brennan",
    "address": "12 King St",
    "city": "Toronto",
    "country": "Canada",
    "weight_kg": 2.5,
    "carrier": "FedEx",
    **overrides,
  }
  return call_ok(shp, "create_shipment", args)


def next_weekday(shp, weekday):
  day = shp.state.now.date() + timedelta(days=1)
  while day.weekday() != weekday:
    day += timedelta(days=1)
  return day.isoformat()


def test_seeded_data_is_sized():
  a = ShippingService.create(seed=5)
  assert len(a.state.shipments) == 30 and len(a.state.rates) == 9
  assert len(ShippingService.create(seed=5, size=150).state.shipments) == 150


def test_seeded_shipments_are_consistent():
  state = ShippingService.create(seed=7, size=80).state
  recipients = {c.name for cu in world(7).customers for c in cu.contacts}
  statuses = set()
  for s in state.shipments:
    statuses.add(s.status)
    assert s.recipient_name in recipients and s.country in COUNTRIES
    assert s.events[0].status == "label_created" and s.events[-1].status == s.status
    times = [e.time for e in s.events]
    assert times == sorted(times) and times[-1] < state.now
    assert (s.delivered_at is not None) == (s.status == "delivered")
  assert statuses == {
    "label_created",
    "in_transit",
    "out_for_delivery",
    "delivered",
    "exception",
    "cancelled",
  }
  assert {p.status for p in state.pickups} == {"scheduled", "completed"}


def test_rates_and_reads(shp):
  quotes = call_ok(shp, "get_rates", {"destination_country": "usa", "weight_kg": 3})
  assert len(quotes) == 9
  assert [q["price"] for q in quotes] == sorted(q["price"] for q in quotes)
  abroad = call_ok(
    shp, "get_rates", {"destination_country": "Japan", "weight_kg": 3, "service": "ground"}
  )
  assert len(abroad) == 3 and all(q["service"] == "ground" for q in abroad)
  home = {q["carrier"]: q for q in quotes if q["service"] == "ground"}
  for q in abroad:  # abroad costs more and takes longer
    assert q["price"] > home[q["carrier"]]["price"]
    assert q["transit_days"] > home[q["carrier"]]["transit_days"]
    assert date.fromisoformat(q["estimated_delivery"]) > shp.state.now.date()
  page = call_ok(shp, "list_shipments", {"limit": 5})
  assert page["total"] == 30 and "events" not in page["items"][0]
  created = [s["created_at"] for s in page["items"]]
  assert created == sorted(created, reverse=True)
  moving = call_ok(shp, "list_shipments", {"status": "in_transit", "carrier": "UPS"})["items"]
  assert all((s["status"], s["carrier"]) == ("in_transit", "UPS") for s in moving)
  some = in_status(shp, "delivered")
  mine = call_ok(shp, "list_shipments", {"order_reference": some.order_reference})["items"]
  assert some.id in {s["id"] for s in mine}
  found = call_ok(shp, "list_shipments", {"query": some.recipient_name, "limit": 100})["items"]
  assert some.id in {s["id"] for s in found}
  got = call_ok(shp, "get_shipment", {"shipment_id": some.id})
  assert got["tracking_number"] == some.tracking_number and len(got["events"]) == len(some.events)
  tracked = call_ok(shp, "track_shipment", {"tracking_number": some.tracking_number})
  assert tracked["status"] == "delivered" and tracked["delivered_at"]
  assert tracked["events"][0]["status"] == "delivered"  # newest first
  pickups = call_ok(shp, "list_pickups")["items"]
  assert pickups and [p["date"] for p in pickups] == sorted(p["date"] for p in pickups)


def test_label_to_delivery(shp):
  s = new_label(shp, country="canada", service="express", postal_code=" M5V 2T6 ")
  assert s["status"] == "label_created" and s["country"] == "Canada"
  assert s["postal_code"] == "M5V 2T6" and len(s["tracking_number"]) == 12
  quote = next(
    q
    for q in call_ok(shp, "get_rates", {"destination_country": "Canada", "weight_kg": 2.5})
    if (q["carrier"], q["service"]) == ("FedEx", "express")
  )
  assert s["price"] == quote["price"] and s["estimated_delivery"] == quote["estimated_delivery"]
  assert shp.state.shipments.get(s["id"]).tracking_number == s["tracking_number"]
  day = next_weekday(shp, 1)
  pickup = call_ok(
    shp, "schedule_pickup", {"carrier": "FedEx", "date": day, "shipment_ids": [s["id"], s["id"]]}
  )
  assert pickup["shipment_ids"] == [s["id"]] and pickup["status"] == "scheduled"
  assert pickup["id"] in shp.state.pickups
  moved = call_ok(
    shp,
    "change_delivery_address",
    {"shipment_id": s["id"], "address": "40 Bay St", "city": "Ottawa", "country": "Canada"},
  )
  assert (moved["address"], moved["city"]) == ("40 Bay St", "Ottawa")
  assert "40 Bay St" in moved["events"][-1]["description"]
  number = s["tracking_number"]
  for status in ("in_transit", "in_transit", "exception", "out_for_delivery", "delivered"):
    got = call_ok(
      shp,
      "update_shipment_status",
      {"tracking_number": number, "status": status, "location": "Ottawa, Canada"},
    )
    assert got["status"] == status and got["events"][-1]["status"] == status
  done = shp.state.shipments.get(s["id"])
  assert done.delivered_at == shp.state.now - timedelta(minutes=1) and len(done.events) == 7


def test_cancel_takes_the_label_off_its_pickup(shp):
  s = new_label(shp, carrier="DHL")
  day = next_weekday(shp, 5)
  pickup = call_ok(
    shp, "schedule_pickup", {"carrier": "DHL", "date": day, "shipment_ids": [s["id"]]}
  )
  got = call_ok(shp, "cancel_shipment", {"shipment_id": s["id"]})
  assert got["status"] == "cancelled" and got["events"][-1]["status"] == "cancelled"
  assert shp.state.pickups.get(pickup["id"]).shipment_ids == ()


def test_error_paths_are_atomic(shp):
  label = new_label(shp)
  sid, number = label["id"], label["tracking_number"]
  moving, ofd = in_status(shp, "in_transit"), in_status(shp, "out_for_delivery")
  delivered, cancelled = in_status(shp, "delivered"), in_status(shp, "cancelled")
  base = {
    "order_reference": "SO-1",
    "recipient_name": "A B",
    "address": "1 Elm Ave",
    "city": "Oslo",
    "country": "Norway",
    "weight_kg": 1,
    "carrier": "UPS",
  }
  # 400: missing, ill-typed and invalid arguments
  call_fails(shp, "get_rates", {"weight_kg": 1}, 400, "destination_country")
  call_fails(shp, "get_rates", {"destination_country": "Atlantis", "weight_kg": 1}, 400, "Atlantis")
  call_fails(shp, "get_rates", {"destination_country": "UK", "weight_kg": 0}, 400, "weight_kg")
  call_fails(
    shp, "get_rates", {"destination_country": "UK", "weight_kg": 1, "service": "rocket"}, 400
  )
  call_fails(shp, "get_shipment", {"shipment_id": 3}, 400, "shipment_id")
  call_fails(shp, "list_shipments", {"status": "lost"}, 400, "status")
  call_fails(shp, "track_shipment", {"tracking_number": ""}, 400, "tracking_number")
  for field in ("recipient_name", "address", "city"):
    call_fails(shp, "create_shipment", {**base, field: "  "}, 400, field)
  call_fails(shp, "create_shipment", {**base, "country": "Narnia"}, 400, "Narnia")
  call_fails(shp, "create_shipment", {**base, "weight_kg": -2}, 400, "weight_kg")
  call_fails(shp, "create_shipment", {**base, "weight_kg": 500}, 400, "weight_kg")
  call_fails(shp, "create_shipment", {**base, "carrier": "Pigeon"}, 400, "carrier")
  call_fails(shp, "create_shipment", {k: v for k, v in base.items() if k != "city"}, 400, "city")
  scan = {"tracking_number": number, "location": "Denver, USA"}
  call_fails(shp, "update_shipment_status", {**scan, "status": "cancelled"}, 400, "cancel_shipment")
  call_fails(shp, "update_shipment_status", {**scan, "status": "teleported"}, 400, "status")
  addr = {"shipment_id": sid, "address": "9 Lake Dr", "city": "Toronto", "country": "Canada"}
  call_fails(shp, "change_delivery_address", {**addr, "address": ""}, 400, "address")
  call_fails(shp, "change_delivery_address", {**addr, "recipient_name": " "}, 400, "recipient_name")
  call_fails(shp, "change_delivery_address", {**addr, "country": "Mars"}, 400, "Mars")
  pick = {"carrier": "FedEx", "date": next_weekday(shp, 2), "shipment_ids": [sid]}
  call_fails(shp, "schedule_pickup", {**pick, "shipment_ids": []}, 400, "shipment_ids")
  past = (shp.state.now.date() - timedelta(days=1)).isoformat()
  call_fails(shp, "schedule_pickup", {**pick, "date": past}, 400, "past")
  call_fails(shp, "schedule_pickup", {**pick, "date": next_weekday(shp, 6)}, 400, "Sunday")
  # 404: unknown shipment ids and tracking numbers
  call_fails(shp, "get_shipment", {"shipment_id": "shp_nope"}, 404, "shp_nope")
  call_fails(shp, "track_shipment", {"tracking_number": "000"}, 404, "000")
  call_fails(
    shp,
    "update_shipment_status",
    {**scan, "tracking_number": "000", "status": "in_transit"},
    404,
    "000",
  )
  call_fails(shp, "cancel_shipment", {"shipment_id": "shp_nope"}, 404, "shp_nope")
  call_fails(shp, "change_delivery_address", {**addr, "shipment_id": "shp_nope"}, 404, "shp_nope")
  call_fails(shp, "schedule_pickup", {**pick, "shipment_ids": [sid, "shp_nope"]}, 404, "shp_nope")
  # 409: business rules
  for s in (moving, ofd, delivered, cancelled):
    call_fails(shp, "cancel_shipment", {"shipment_id": s.id}, 409, s.status)
  call_fails(shp, "update_shipment_status", {**scan, "status": "label_created"}, 409, "cannot move")
  call_fails(shp, "update_shipment_status", {**scan, "status": "delivered"}, 409, "in_transit")
  for s in (delivered, cancelled):
    bad = {**scan, "tracking_number": s.tracking_number, "status": "in_transit"}
    call_fails(shp, "update_shipment_status", bad, 409, "final")
  bad = {**scan, "tracking_number": ofd.tracking_number, "status": "in_transit"}
  call_fails(shp, "update_shipment_status", bad, 409, "out_for_delivery")
  for s in (ofd, delivered, cancelled):
    call_fails(
      shp,
      "change_delivery_address",
      {**addr, "shipment_id": s.id, "country": s.country},
      409,
      s.status,
    )
  call_fails(shp, "change_delivery_address", {**addr, "country": "USA"}, 409, "another country")
  call_fails(shp, "schedule_pickup", {**pick, "carrier": "UPS"}, 409, "FedEx")
  call_fails(
    shp,
    "schedule_pickup",
    {**pick, "carrier": moving.carrier, "shipment_ids": [moving.id]},
    409,
    "labelled",
  )
  call_ok(shp, "schedule_pickup", pick)
  call_fails(shp, "schedule_pickup", pick, 409, "already")
  call_fails(shp, "no_such_tool", {}, 404, "track_shipment")
