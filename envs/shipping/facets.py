"""Shipping facets: parcels as sources of tracking numbers, delivery days, recipients, addresses
and label prices; labels and pickups as sinks; the relabel revisit (a parcel sent to a new
address gets a new tracking number, so the first one is stale)."""

from __future__ import annotations

from datetime import date, timedelta

from compoworld.tasks.authoring import AuthorContext, AuthoringError
from compoworld.tasks.facets import Found, Value, facets
from compoworld.tasks.rubric import all_of, exists, record_is, where
from envs._facets_common import (
  colleague,
  day_of,
  found_day,
  found_one,
  fresh_number,
  iso,
  s0_now,
  since,
  today,
)
from envs._world import CITIES, world
from envs.shipping.state import CARRIERS, HOME_COUNTRY, LEVELS, tracking_number
from envs.shipping.tools import ShippingService

S = "shipping"
COUNTRY_OF = {city: country for city, country, *_ in CITIES}


def _order_ref(ctx: AuthorContext) -> str:
  """An order number no parcel is shipped for yet."""
  used = {s.order_reference for s in ctx.state(S).shipments}
  return fresh_number(ctx, "SO-{}", (10000, 99999), used, "no_fresh_reference")


def _carrier_of(number: str) -> str:
  """The carrier a tracking number's shape belongs to (UPS "1Z...", FedEx 12 digits, DHL 10)."""
  if number.startswith("1Z"):
    return "UPS"
  return "FedEx" if len(number) == 12 else "DHL"


def _put_shipment(
  ctx: AuthorContext,
  status: str = "label_created",
  ref: str | None = None,
  carrier: str | None = None,
  number: str | None = None,
  level: str | None = None,
) -> dict:
  """Puts one of the scenario's parcels and returns it: to a contact at a customer company,
  delivered at one of the world's venues (an address other services know too)."""
  state, w = ctx.state(S), world(ctx.env.seed)
  contact = ctx.choice(ctx.choice(w.customers).contacts)
  venue = ctx.choice(w.venues)
  sid = ctx.fresh_id("shp")
  carrier = carrier or ctx.choice(CARRIERS)
  level = level or ctx.choice(LEVELS)
  weight = round(ctx.rng.uniform(0.5, 12.0), 1)
  created = s0_now(ctx, S) - timedelta(hours=ctx.rng.randint(2, 20))
  rate = state.rates.get(f"{carrier}:{level}")
  quote = ShippingService._quote(rate, HOME_COUNTRY, venue.country, weight, created.date())
  events = [
    {
      "time": iso(created),
      "status": "label_created",
      "location": "Label printed",
      "description": "Shipping label created",
    }
  ]
  if status == "in_transit":
    events.append(
      {
        "time": iso(created + timedelta(hours=1)),
        "status": "in_transit",
        "location": f"{HOME_COUNTRY} origin facility",
        "description": "Picked up",
      }
    )
  record = {
    "id": sid,
    "order_reference": ref or _order_ref(ctx),
    "recipient_name": contact.name,
    "address": venue.address.rpartition(", ")[0],
    "city": venue.city,
    "postal_code": f"{ctx.rng.randint(10000, 99999)}",
    "country": venue.country,
    "carrier": carrier,
    "service": level,
    "weight_kg": weight,
    "price": quote["price"],
    "currency": w.currency,
    "tracking_number": number or tracking_number(carrier, sid),
    "status": status,
    "estimated_delivery": quote["estimated_delivery"].isoformat(),
    "created_at": iso(created),
    "events": events,
  }
  return ctx.put(S, "shipments", record)


def _parcel(ctx: AuthorContext, ref: str) -> dict:
  """The agent's way to a parcel: list the shipments of its order number."""
  return ctx.call(S, "list_shipments", order_reference=ref)["items"][0]


def _place(value: Value) -> dict:
  """A street address and city such as "51 Elm Ave, Toronto", with the city's country."""
  street, _, city = str(value.value).rpartition(", ")
  if not street or city not in COUNTRY_OF:
    raise AuthoringError("address_not_shippable", str(value.value))
  return {"address": street, "city": city, "country": COUNTRY_OF[city]}


# --- sources -------------------------------------------------------------------------------


@facets.source(S, "tracking.number")
def parcel_tracking(ctx: AuthorContext) -> Found:
  ref = _put_shipment(ctx, ctx.choice(("label_created", "in_transit")))["order_reference"]
  parcel = _parcel(ctx, ref)
  number = parcel["tracking_number"]
  return found_one("tracking.number", f"the tracking number of the parcel for order {ref}", number)


@facets.source(S, "date")
def parcel_eta(ctx: AuthorContext) -> Found:
  ref = _put_shipment(ctx, "in_transit")["order_reference"]
  parcel = _parcel(ctx, ref)
  tracked = ctx.call(S, "track_shipment", tracking_number=parcel["tracking_number"])
  day = tracked["estimated_delivery"]
  return found_day(f"the day the parcel for order {ref} is expected to be delivered", day)


@facets.source(S, "person.name")
def parcel_recipient(ctx: AuthorContext) -> Found:
  ref = _put_shipment(ctx, ctx.choice(("label_created", "in_transit")))["order_reference"]
  parcel = _parcel(ctx, ref)
  name = parcel["recipient_name"]
  return found_one(
    "person.name", f"the name of the person the parcel for order {ref} is addressed to", name
  )


def _address_of(ctx: AuthorContext) -> tuple[Found, dict]:
  # Ground only: ``ctx.call`` cannot pass create_shipment's ``service`` argument (it names the
  # service called), so a relabel keeps the default level.
  ref = _put_shipment(ctx, level="ground")["order_reference"]
  parcel = _parcel(ctx, ref)
  where_to = f"{parcel['address']}, {parcel['city']}"
  found = found_one("location", f"the delivery address of the parcel for order {ref}", where_to)
  return found, parcel


@facets.source(S, "location")
def parcel_address(ctx: AuthorContext) -> Found:
  return _address_of(ctx)[0]


def _pickup_day(ctx: AuthorContext, carrier: str) -> date:
  """A day in the coming week (not a Sunday) with no pickup of ``carrier`` yet."""
  state = ctx.state(S)
  booked = {p.date for p in state.pickups if p.carrier == carrier}
  days = [s0_now(ctx, S).date() + timedelta(days=d) for d in range(1, 8)]
  return ctx.choice([d for d in days if d.weekday() != 6 and d not in booked])


@facets.source(S, "money")
def pickup_label_prices(ctx: AuthorContext) -> Found:
  """The parcels on one scheduled pickup: one label price each, to be summed or used one by
  one."""
  carrier = ctx.choice(CARRIERS)
  day = _pickup_day(ctx, carrier)
  parcels = [_put_shipment(ctx, carrier=carrier) for _ in range(3)]
  if len({p["price"] for p in parcels}) < 3:  # one write per price downstream
    raise AuthoringError("equal_label_prices")
  ids = [p["id"] for p in parcels]
  ctx.put(
    S,
    "pickups",
    {
      "id": ctx.fresh_id("pck"),
      "carrier": carrier,
      "date": day.isoformat(),
      "shipment_ids": ids,
      "status": "scheduled",
      "created_at": iso(s0_now(ctx, S) - timedelta(hours=1)),
    },
  )
  pickups = ctx.call(S, "list_pickups", carrier=carrier)["items"]
  pickup = next(p for p in pickups if p["date"] == day.isoformat())
  parcels = [ctx.call(S, "get_shipment", shipment_id=i) for i in pickup["shipment_ids"]]
  return Found(
    "money",
    f"the label prices of the parcels on the {carrier} pickup scheduled for {day.isoformat()}",
    [Value(p["price"], f"{p['price']:,.2f} {p['currency']}", float(p["price"])) for p in parcels],
  )


# --- lookups -------------------------------------------------------------------------------


def _ensure_parcel(ctx: AuthorContext, **match: str) -> None:
  """The walk brought a parcel's number: if our account does not hold that parcel yet, the
  scenario ships it (in transit, with that tracking number or order number)."""
  shipments = ctx.state(S).shipments
  if not any(all(getattr(s, k) == v for k, v in match.items()) for s in shipments):
    number = match.get("tracking_number")
    carrier = _carrier_of(number) if number else None
    _put_shipment(
      ctx, "in_transit", ref=match.get("order_reference"), carrier=carrier, number=number
    )


@facets.lookup(S, "tracking.number", "date")
def delivery_day(ctx: AuthorContext, found: Found) -> Found:
  number = str(found.values[0].value).strip()
  _ensure_parcel(ctx, tracking_number=number)
  tracked = ctx.call(S, "track_shipment", tracking_number=number)
  day = tracked["estimated_delivery"]
  return found_day(
    "the day that parcel is expected to be delivered",
    day,
    answer=f"The parcel {number} is expected on {day}.",
  )


@facets.lookup(S, "reference", "tracking.number")
def tracking_for_order(ctx: AuthorContext, found: Found) -> Found:
  ref = str(found.values[0].value)
  _ensure_parcel(ctx, order_reference=ref)
  number = _parcel(ctx, ref)["tracking_number"]
  return found_one(
    "tracking.number",
    "the tracking number of the parcel shipped for that order",
    number,
    answer=f"The parcel for {ref} has tracking number {number}.",
  )


# --- sinks ---------------------------------------------------------------------------------


def _label_target(ctx: AuthorContext) -> dict:
  """A new order's label; always ground, the level ``ctx.call`` can leave to its default."""
  return {
    "ref": _order_ref(ctx),
    "carrier": ctx.choice(CARRIERS),
    "weight": ctx.choice((1.5, 2.5, 4.0, 6.5)),
  }


def _label_to_place(ctx: AuthorContext) -> dict:
  who = colleague(ctx)
  return {**_label_target(ctx), "name": who.name}


def _labelled(ctx: AuthorContext, t: dict, name: str, address: str, *also: dict) -> dict:
  """A rubric condition: the agent bought ``t``'s label, to ``name`` at ``address`` (and
  ``also``)."""
  return exists(
    S,
    "shipments",
    where("order_reference", t["ref"]),
    where("recipient_name", name),
    where("address", address),
    *also,
    where("carrier", t["carrier"]),
    since(ctx, S, "created_at"),
  )


def _label_phrase(t: dict, to: str) -> str:
  return (
    f"buy a {t['carrier']} ground label for order {t['ref']}: a {t['weight']} kg parcel to {to}"
  )


def _ship_to_place(ctx: AuthorContext, t: dict, v: Value) -> None:
  place = _place(v)
  ctx.call(
    S,
    "create_shipment",
    order_reference=t["ref"],
    recipient_name=t["name"],
    weight_kg=t["weight"],
    carrier=t["carrier"],
    **place,
  )


facets.sink(
  S,
  "location",
  "ship_to_address",
  prepare=_label_to_place,
  act=_ship_to_place,
  check=lambda ctx, t, v: _labelled(
    ctx, t, t["name"], _place(v)["address"], where("city", _place(v)["city"])
  ),
  phrase=lambda ctx, t, obj: _label_phrase(t, f"{t['name']} at {obj}"),
  text=lambda ctx, t, v: f"A {t['carrier']} label for {t['ref']} ships to {v.label}.",
)


def _ship_to_person(ctx: AuthorContext, t: dict, v: Value) -> None:
  ctx.call(
    S,
    "create_shipment",
    order_reference=t["ref"],
    recipient_name=v.value,
    address=t["address"],
    city=t["city"],
    country=t["country"],
    weight_kg=t["weight"],
    carrier=t["carrier"],
  )


def _label_to_person(ctx: AuthorContext) -> dict:
  venue = ctx.choice(world(ctx.env.seed).venues)
  street = venue.address.rpartition(", ")[0]
  place = {"address": street, "city": venue.city, "country": venue.country}
  return {**_label_target(ctx), **place}


facets.sink(
  S,
  "person.name",
  "ship_to_person",
  prepare=_label_to_person,
  act=_ship_to_person,
  check=lambda ctx, t, v: _labelled(ctx, t, str(v.value).strip(), t["address"]),
  phrase=lambda ctx, t, obj: _label_phrase(
    t, f"{obj} at {t['address']}, {t['city']}, {t['country']}"
  ),
  text=lambda ctx, t, v: f"A {t['carrier']} label for {t['ref']} is addressed to {v.label}.",
)


def _pickup_target(ctx: AuthorContext) -> dict:
  """Two fresh labels of one carrier, on no pickup yet; the agent finds them by order."""
  carrier = ctx.choice(CARRIERS)
  refs = [_put_shipment(ctx, carrier=carrier)["order_reference"] for _ in range(2)]
  ids = [_parcel(ctx, ref)["id"] for ref in refs]
  return {"carrier": carrier, "refs": refs, "ids": ids}


def _book_pickup(ctx: AuthorContext, t: dict, v: Value) -> None:
  day = day_of(v)
  if day < today(ctx, S) or day.weekday() == 6:
    raise AuthoringError("no_pickup_that_day", str(v.value))
  ctx.call(S, "schedule_pickup", carrier=t["carrier"], date=v.value, shipment_ids=t["ids"])


facets.sink(
  S,
  "date",
  "book_pickup",
  prepare=_pickup_target,
  act=_book_pickup,
  check=lambda ctx, t, v: exists(
    S,
    "pickups",
    where("carrier", t["carrier"]),
    where("date", v.value),
    where("shipment_ids", t["ids"][0], "contains"),
    where("shipment_ids", t["ids"][1], "contains"),
    where("status", "scheduled"),
  ),
  phrase=lambda ctx, t, obj: (
    f"book a {t['carrier']} pickup on {obj} for the parcels of orders {t['refs'][0]} and "
    f"{t['refs'][1]}"
  ),
  text=lambda ctx, t, v: (
    f"A {t['carrier']} pickup on {v.label} collects the parcels of {' and '.join(t['refs'])}."
  ),
  single=True,
)


# --- the revisit: read where a parcel goes, relabel it to a new address, read the new number


def _relabel(ctx: AuthorContext, parcel: dict, v: Value) -> None:
  place = _place(v)
  ctx.call(S, "cancel_shipment", shipment_id=parcel["id"])
  ctx.call(
    S,
    "create_shipment",
    order_reference=parcel["order_reference"],
    recipient_name=parcel["recipient_name"],
    weight_kg=parcel["weight_kg"],
    carrier=parcel["carrier"],
    **place,
  )


def _relabel_check(ctx: AuthorContext, parcel: dict, v: Value) -> dict:
  place = _place(v)
  return all_of(
    record_is(S, "shipments", parcel["id"], "status", "cancelled"),
    exists(
      S,
      "shipments",
      where("order_reference", parcel["order_reference"]),
      where("address", place["address"]),
      where("city", place["city"]),
      where("carrier", parcel["carrier"]),
      where("status", "label_created"),
      since(ctx, S, "created_at"),
    ),
  )


def _new_tracking(ctx: AuthorContext, parcel: dict) -> Found:
  ref = parcel["order_reference"]
  live = ctx.call(S, "list_shipments", order_reference=ref, status="label_created")["items"]
  number = live[0]["tracking_number"]
  return found_one(
    "tracking.number",
    f"the new tracking number of the parcel for order {ref}",
    number,
    stale=parcel["tracking_number"],
    answer=f"The new tracking number is {number}.",
  )


facets.revisit(
  S,
  kind="location",
  kind_in="location",
  kind_after="tracking.number",
  name="relabel_to_new_address",
  first=_address_of,
  second=_new_tracking,
  change="relabel",
  act=_relabel,
  check=_relabel_check,
  phrase=lambda ctx, p, obj: (
    f"void the label of the parcel for order {p['order_reference']} and buy a new one with "
    f"the same carrier, service, recipient and weight, shipping it to {obj} instead"
  ),
  text=lambda ctx, p, v: (
    f"The parcel for {p['order_reference']} was relabelled to {v.label} and the old label voided."
  ),
  single=True,
)
