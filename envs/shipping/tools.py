"""Shipping: parcel shipments across carriers, like ShipStation on top of FedEx, UPS and DHL.

Entities: rate cards (one per carrier and service level ``ground``, ``express`` or
``overnight``: a base price, a price per kg and transit days, with a surcharge and extra days
abroad), shipments (an order reference, a recipient with a street address, city and country, a
carrier and service, a weight, a label price, a tracking number, an estimated delivery day and
the carrier's scan events: time, location, description) and pickups (a carrier collecting a set
of labelled shipments on a given day).

A shipment moves ``label_created`` → ``in_transit`` → ``out_for_delivery`` → ``delivered``; a
carrier can flag an ``exception`` (weather, address problem) on the way, after which the parcel
resumes. ``cancelled`` voids a label before pickup. Rules a shipper expects: the address fields
are not blank and the country is one the carriers serve; the weight is positive and at most
70 kg; a status only moves forward (a repeated ``in_transit`` scan is a hub scan); a delivered
or cancelled shipment is final; a label is cancelled only before the carrier picks it up; the
address changes only before the parcel is out for delivery and never to another country; a
pickup is for labelled shipments of its own carrier, on a day that is not past nor a Sunday, and
a shipment is on at most one scheduled pickup.
"""

from __future__ import annotations

import random
from datetime import date, datetime, timedelta
from typing import Annotated

from pydantic import Field

from compoworld import Conflict, InvalidArgument, Service, registry, tool
from compoworld.runtime.fields import Limit, Offset, Text
from compoworld.runtime.query import page_of, select
from envs._world import CITIES, STREETS, seeded, world
from envs.shipping.state import (
  CARRIERS,
  EXCEPTIONS,
  HOME_COUNTRY,
  LEVELS,
  NEXT,
  Carrier,
  Level,
  Pickup,
  Rate,
  Scan,
  Shipment,
  ShippingState,
  Status,
  Weight,
  _add_business_days,
  _country,
  _nonblank,
  tracking_number,
)


@registry.register
class ShippingService(Service):
  name = "shipping"
  domain = "operations"
  description = "Parcel shipping: compare carrier rates, buy labels, track, redirect, pick up."
  State = ShippingState

  @classmethod
  def generate(cls, seed: int, size: int | None) -> ShippingState:
    rng, w, state = seeded(cls, seed)
    for carrier in CARRIERS:
      scale = rng.uniform(0.9, 1.15)
      for level, base, per_kg, days in (
        ("ground", 9.5, 1.1, 5),
        ("express", 19.0, 2.2, 2),
        ("overnight", 34.0, 3.6, 1),
      ):
        state.rates.insert(
          Rate(
            id=f"{carrier}:{level}",
            carrier=carrier,
            service=level,
            base=round(base * scale, 2),
            per_kg=round(per_kg * scale, 2),
            days=days,
          )
        )
    physical = [p for p in w.products if p.weight_kg > 0]
    now = state.now
    for _ in range(size if size is not None else 30):
      customer = rng.choice(w.customers)
      contact = rng.choice(customer.contacts)
      carrier, level = rng.choice(CARRIERS), rng.choice(LEVELS)
      weight = round(sum(rng.choice(physical).weight_kg for _ in range(rng.randint(1, 4))), 1)
      status = rng.choice(
        ("label_created",) * 3
        + ("in_transit",) * 3
        + ("out_for_delivery", "exception", "cancelled")
        + ("delivered",) * 5
      )
      created = now - timedelta(days=rng.randint(0, 3) if status == "label_created" else 0)
      created -= timedelta(hours=rng.randint(1, 10))
      if status in ("delivered", "cancelled"):
        created -= timedelta(days=rng.randint(3, 20))
      elif status != "label_created":
        created -= timedelta(days=rng.randint(1, 3))
      sid = state.new_id("shp")
      rate = state.rates.get(f"{carrier}:{level}")
      quote = cls._quote(rate, HOME_COUNTRY, customer.country, weight, created.date())
      shipment = Shipment(
        id=sid,
        order_reference=f"SO-{rng.randint(10000, 99999)}",
        recipient_name=contact.name,
        address=f"{rng.randint(2, 480)} {rng.choice(STREETS)}",
        city=customer.city,
        postal_code=f"{rng.randint(10000, 99999)}",
        country=customer.country,
        carrier=carrier,
        service=level,
        weight_kg=max(weight, 0.1),
        price=quote["price"],
        currency=w.currency,
        tracking_number=tracking_number(carrier, sid),
        estimated_delivery=quote["estimated_delivery"],
        created_at=created,
        events=(
          Scan(
            time=created,
            status="label_created",
            location="Label printed",
            description="Shipping label created",
          ),
        ),
      )
      state.shipments.insert(cls._replay(rng, shipment, status, now))
    moving = [s for s in state.shipments if s.status == "in_transit"]
    if moving:  # the pickup that collected the parcels now in transit with one carrier
      carrier = moving[0].carrier
      batch = tuple(s.id for s in moving if s.carrier == carrier)
      first = min(state.shipments.get(i).events[1].time for i in batch)
      state.pickups.insert(
        Pickup(
          id=state.new_id("pck"),
          carrier=carrier,
          date=first.date(),
          shipment_ids=batch,
          status="completed",
          created_at=first - timedelta(days=1),
        )
      )
    labelled = [s for s in state.shipments if s.status == "label_created"]
    carrier = rng.choice(CARRIERS)
    batch = tuple(s.id for s in labelled if s.carrier == carrier)[:3]
    if batch:  # tomorrow's pickup for some of the labels printed so far
      day = _add_business_days(now.date(), 1)
      state.pickups.insert(
        Pickup(
          id=state.new_id("pck"), carrier=carrier, date=day, shipment_ids=batch, created_at=now
        )
      )
    return state

  @staticmethod
  def _replay(rng: random.Random, s: Shipment, status: str, now: datetime) -> Shipment:
    """The scan history that brings a fresh label to ``status``, all before ``now``."""
    if status == "label_created":
      return s
    if status == "cancelled":
      scan = Scan(
        time=s.created_at + timedelta(hours=2),
        status="cancelled",
        location="Online",
        description="Label voided by the shipper",
      )
      return s.with_changes(status="cancelled", events=(*s.events, scan))
    path = {
      "in_transit": ("in_transit",),
      "exception": ("in_transit", "exception"),
      "out_for_delivery": ("in_transit", "in_transit", "out_for_delivery"),
      "delivered": ("in_transit", "in_transit", "out_for_delivery", "delivered"),
    }[status]
    hubs = [f"{c[0]} hub, {c[1]}" for c in CITIES]
    events, at = list(s.events), s.created_at
    end = now - timedelta(hours=1)
    if status == "delivered":  # on the promised day, now and then a day late
      late = 1 if rng.random() < 0.15 else 0
      promised = datetime.combine(s.estimated_delivery, datetime.min.time())
      end = min(end, promised + timedelta(days=late, hours=rng.randint(9, 17)))
    # A parcel still on its way has its latest scan some time ago, not right now.
    span = (end - s.created_at) / (len(path) + (status != "delivered"))
    for i, step in enumerate(path):
      at += span
      if step == "in_transit":
        where, text = (
          (HOME_COUNTRY + " origin facility", "Picked up")
          if i == 0
          else (rng.choice(hubs), "Arrived at hub")
        )
      elif step == "exception":
        where, text = rng.choice(hubs), rng.choice(EXCEPTIONS)
      elif step == "out_for_delivery":
        where, text = f"{s.city}, {s.country}", "Out for delivery"
      else:
        where, text = (
          f"{s.city}, {s.country}",
          f"Delivered, signed by {s.recipient_name.split()[0]}",
        )
      events.append(Scan(time=at, status=step, location=where, description=text))
    return s.with_changes(
      status=status, events=tuple(events), delivered_at=at if status == "delivered" else None
    )

  @staticmethod
  def _quote(rate: Rate, origin: str, destination: str, weight: float, day: date) -> dict:
    abroad = origin != destination
    price = (rate.base + rate.per_kg * weight) * (1.6 if abroad else 1.0)
    days = rate.days + ((1 if rate.service == "overnight" else 3) if abroad else 0)
    return {
      "carrier": rate.carrier,
      "service": rate.service,
      "price": round(price, 2),
      "transit_days": days,
      "estimated_delivery": _add_business_days(day, days),
    }

  # --- helpers -----------------------------------------------------------------------------

  @property
  def currency(self) -> str:
    return world(self.state.seed).currency

  def _by_tracking(self, number: str) -> Shipment:
    missing = f"no shipment with tracking number '{number}'"
    return self.state.shipments.get_by(missing, tracking_number=number.strip())

  def _scan(self, s: Shipment, scan: str, location: str, description: str, **changes) -> Shipment:
    """Appends a carrier scan of status ``scan`` and applies ``changes`` to the shipment."""
    event = Scan(time=self.state.now, status=scan, location=location, description=description)
    return self.state.shipments.update(s.id, events=(*s.events, event), **changes)

  # --- reads -------------------------------------------------------------------------------

  @tool(mutates=False, consumes=("number",), produces=("money", "date", "duration"))
  def get_rates(
    self,
    destination_country: str,
    weight_kg: Weight,
    origin_country: str = HOME_COUNTRY,
    service: Level | None = None,
  ) -> list[dict]:
    """Quote every carrier (and service level) for a parcel, cheapest first, with the transit
    days and the estimated delivery day if it ships today.

    Args:
      destination_country: the country it goes to.
      weight_kg: the parcel weight in kg (0-70).
      origin_country: the country it ships from.
      service: only this service level ("ground", "express" or "overnight").
    """
    origin, dest = _country(origin_country), _country(destination_country)
    quotes = [
      {**self._quote(r, origin, dest, weight_kg, self.state.now.date()), "currency": self.currency}
      for r in self.state.rates
      if service is None or r.service == service
    ]
    return sorted(quotes, key=lambda q: (q["price"], q["transit_days"], q["carrier"]))

  @tool(
    mutates=False,
    consumes=("shipment.id",),
    produces=("tracking.number", "address", "date", "status", "money", "reference"),
  )
  def get_shipment(self, shipment_id: str) -> Shipment:
    """Get one shipment with its recipient, label price, status and scan history.

    Args:
      shipment_id: the shipment's id.
    """
    return self.state.shipments.get(shipment_id)

  @tool(
    mutates=False,
    consumes=("tracking.number",),
    produces=("status", "date", "location", "datetime"),
  )
  def track_shipment(self, tracking_number: Text) -> dict:
    """Track a parcel by its tracking number: status, estimated delivery and scans, newest
    first.

    Args:
      tracking_number: the carrier's tracking number.
    """
    s = self._by_tracking(tracking_number)
    return {
      "tracking_number": s.tracking_number,
      "carrier": s.carrier,
      "status": s.status,
      "estimated_delivery": s.estimated_delivery,
      "delivered_at": s.delivered_at,
      "destination": f"{s.city}, {s.country}",
      "events": list(reversed(s.events)),
    }

  @tool(
    mutates=False,
    produces=("shipment.id", "tracking.number", "status", "reference", "person.name"),
  )
  def list_shipments(
    self,
    status: Status | None = None,
    carrier: Carrier | None = None,
    order_reference: str | None = None,
    query: str | None = None,
    limit: Limit = 20,
    offset: Offset = 0,
  ) -> dict:
    """List shipments, newest first, without their scan history.

    Args:
      status: only shipments in this status.
      carrier: only shipments of this carrier ("FedEx", "UPS" or "DHL").
      order_reference: only shipments for this order number.
      query: words that must all appear in the recipient, address, city or country.
      limit: page size (1-100).
      offset: index of the first shipment to return.
    """
    return page_of(
      self.state.shipments,
      eq={"status": status, "carrier": carrier, "order_reference": order_reference},
      text=query,
      fields=("recipient_name", "address", "city", "country"),
      key=lambda s: (s.created_at, s.id),
      reverse=True,
      limit=limit,
      offset=offset,
      view=lambda s: s.model_dump(exclude={"events"}),
    )

  @tool(mutates=False, page="pickup", produces=("pickup.id", "date", "shipment.id"))
  def list_pickups(self, carrier: Carrier | None = None) -> list:
    """List carrier pickups, soonest first.

    Args:
      carrier: only pickups of this carrier.
    """
    return select(self.state.pickups, eq={"carrier": carrier}, key=lambda p: (p.date, p.id))

  # --- writes ------------------------------------------------------------------------------

  @tool(
    mutates=True,
    consumes=("reference", "person.name", "address", "city", "number"),
    produces=("shipment.id", "tracking.number", "money", "date"),
  )
  def create_shipment(
    self,
    order_reference: Text,
    recipient_name: str,
    address: str,
    city: str,
    country: str,
    weight_kg: Weight,
    carrier: Carrier,
    service: Level = "ground",
    postal_code: str = "",
  ) -> Shipment:
    """Buy a shipping label: the shipment starts as "label_created" with a tracking number and
    the carrier's price and estimated delivery day.

    Args:
      order_reference: the order number the parcel fulfils.
      recipient_name: who receives it.
      address: the street address.
      city: the destination city.
      country: the destination country (one the carriers serve).
      weight_kg: the parcel weight in kg (0-70).
      carrier: "FedEx", "UPS" or "DHL".
      service: "ground", "express" or "overnight".
      postal_code: the postal code, if any.
    """
    clean = _nonblank(recipient_name=recipient_name, address=address, city=city)
    dest = _country(country)
    quote = self._quote(
      self.state.rates.get(f"{carrier}:{service}"),
      HOME_COUNTRY,
      dest,
      weight_kg,
      self.state.now.date(),
    )
    sid = self.state.new_id("shp")
    return self.state.shipments.insert(
      Shipment(
        id=sid,
        order_reference=order_reference,
        country=dest,
        postal_code=postal_code.strip(),
        carrier=carrier,
        service=service,
        weight_kg=weight_kg,
        price=quote["price"],
        currency=self.currency,
        tracking_number=tracking_number(carrier, sid),
        estimated_delivery=quote["estimated_delivery"],
        created_at=self.state.now,
        events=(
          Scan(
            time=self.state.now,
            status="label_created",
            location="Label printed",
            description="Shipping label created",
          ),
        ),
        **clean,
      )
    )

  @tool(mutates=True, consumes=("shipment.id",))
  def cancel_shipment(self, shipment_id: str) -> Shipment:
    """Void a shipment's label before the carrier picks it up (it is refunded and taken off
    any scheduled pickup).

    Args:
      shipment_id: the shipment's id.
    """
    s = self.state.shipments.get(shipment_id)
    if s.status != "label_created":
      raise Conflict(
        f"shipment '{shipment_id}' is {s.status}; only a shipment still at label_created "
        "(not yet picked up) can be cancelled"
      )
    for p in self.state.pickups.filter(lambda p: shipment_id in p.shipment_ids):
      self.state.pickups.update(
        p.id, shipment_ids=tuple(i for i in p.shipment_ids if i != shipment_id)
      )
    return self._scan(s, "cancelled", "Online", "Label voided by the shipper", status="cancelled")

  @tool(mutates=True, consumes=("tracking.number", "status", "location"))
  def update_shipment_status(
    self, tracking_number: Text, status: Status, location: Text, description: str = ""
  ) -> Shipment:
    """Record a carrier scan: the shipment moves to ``status`` and the scan is added to its
    history. Statuses only move forward; a repeated "in_transit" scan is a hub scan.

    Args:
      tracking_number: the carrier's tracking number.
      status: the new status ("in_transit", "out_for_delivery", "delivered" or "exception").
      location: where the scan happened.
      description: what happened; a standard text if empty.
    """
    s = self._by_tracking(tracking_number)
    if status == "cancelled":
      raise InvalidArgument("status: a carrier scan cannot cancel a shipment; use cancel_shipment")
    if status not in NEXT[s.status]:
      allowed = ", ".join(NEXT[s.status]) or "nothing (it is final)"
      raise Conflict(
        f"shipment {s.tracking_number} is {s.status} and cannot move to {status}; allowed next: "
        f"{allowed}"
      )
    text = description or status.replace("_", " ").capitalize()
    extra = {"delivered_at": self.state.now} if status == "delivered" else {}
    return self._scan(s, status, location, text, status=status, **extra)

  @tool(mutates=True, consumes=("shipment.id", "address", "city", "person.name"))
  def change_delivery_address(
    self,
    shipment_id: str,
    address: str,
    city: str,
    country: str,
    postal_code: str = "",
    recipient_name: str | None = None,
  ) -> Shipment:
    """Redirect a parcel to another address in the same country, before it is out for
    delivery.

    Args:
      shipment_id: the shipment's id.
      address: the new street address.
      city: the new city.
      country: the destination country (must stay the same).
      postal_code: the new postal code, if any.
      recipient_name: a new recipient; unchanged if null.
    """
    s = self.state.shipments.get(shipment_id)
    clean = _nonblank(address=address, city=city)
    if recipient_name is not None:
      clean.update(_nonblank(recipient_name=recipient_name))
    dest = _country(country)
    if s.status not in ("label_created", "in_transit"):
      raise Conflict(
        f"shipment '{shipment_id}' is {s.status}; the address can only change while it is "
        "label_created or in_transit"
      )
    if dest != s.country:
      raise Conflict(
        f"shipment '{shipment_id}' goes to {s.country}; a parcel cannot be redirected to "
        f"another country ({dest}); cancel it and create a new shipment"
      )
    return self._scan(
      s,
      s.status,
      f"{clean['city']}, {dest}",
      f"Delivery address changed to {clean['address']}, {clean['city']}",
      postal_code=postal_code.strip(),
      **clean,
    )

  @tool(mutates=True, consumes=("shipment.id", "date"), produces=("pickup.id",))
  def schedule_pickup(
    self, carrier: Carrier, date: date, shipment_ids: Annotated[list[str], Field(min_length=1)]
  ) -> Pickup:
    """Book a carrier to collect labelled parcels on a day (Monday to Saturday).

    Args:
      carrier: the carrier that collects ("FedEx", "UPS" or "DHL").
      date: the pickup day (today or later, not a Sunday; ISO 8601).
      shipment_ids: the shipments to collect (at least one), all labelled with this carrier.
    """
    if date < self.state.now.date():
      raise InvalidArgument(f"date {date.isoformat()} is in the past")
    if date.weekday() == 6:
      raise InvalidArgument(
        f"date {date.isoformat()} is a Sunday; carriers pick up Monday-Saturday"
      )
    ids = tuple(dict.fromkeys(shipment_ids))
    booked = {i for p in self.state.pickups if p.status == "scheduled" for i in p.shipment_ids}
    for sid in ids:
      s = self.state.shipments.get(sid)
      if s.carrier != carrier:
        raise Conflict(f"shipment '{sid}' ships with {s.carrier}, not {carrier}")
      if s.status != "label_created":
        raise Conflict(f"shipment '{sid}' is {s.status}; only labelled parcels can be picked up")
      if sid in booked:
        raise Conflict(f"shipment '{sid}' is already on a scheduled pickup")
    return self.state.pickups.insert(
      Pickup(
        id=self.state.new_id("pck"),
        carrier=carrier,
        date=date,
        shipment_ids=ids,
        created_at=self.state.now,
      )
    )
