"""Geo facets: addresses and forecasts. The forecast lookup is what turns a meeting's venue
into a condition ("if it snows there...") that later steps act on."""

from __future__ import annotations

from datetime import date, timedelta

from compoworld.tasks.authoring import AuthorContext
from compoworld.tasks.facets import Found, Value, facets
from compoworld.tasks.rubric import exists, where
from envs._facets_common import found_one, since
from envs.geo.service import forecast_id

S = "geo"

BAD_WEATHER = {
  "snow": {"snow_cm": 9.0, "precip_mm": 12.0, "temp_high_c": -1.0, "temp_low_c": -6.0},
  "rain": {"snow_cm": 0.0, "precip_mm": 18.0, "temp_high_c": 9.0, "temp_low_c": 4.0},
  "windy": {"snow_cm": 0.0, "precip_mm": 0.0, "temp_high_c": 7.0, "temp_low_c": 1.0},
}


@facets.lookup(S, "location", "weather.condition")
def forecast_at(ctx: AuthorContext, found: Found) -> Found:
  """The forecast at an address on the day the previous step mentions (default: tomorrow)."""
  address = found.values[0].value
  place = ctx.call(S, "geocode", address=address)
  default = (ctx.state(S).now + timedelta(days=1)).date().isoformat()
  day = found.context.get("date", default)
  condition = ctx.choice([c for c in BAD_WEATHER if c != "snow" or _snowy(ctx, place)])
  fid = forecast_id(place["id"], date.fromisoformat(day))
  if fid not in ctx.state(S).forecasts:
    return None
  ctx.update(
    S, "forecasts", fid, condition=condition, precip_probability=0.9, **BAD_WEATHER[condition]
  )
  forecast = ctx.call(S, "get_forecast", place_id=place["id"], date=day)
  return found_one(
    "weather.condition",
    f"the weather forecast there for {day}",
    forecast["condition"],
    condition=f"the forecast there says {forecast['condition']}",
    answer=f"The forecast at {address} for {day} is {forecast['condition']}.",
  )


def _snowy(ctx: AuthorContext, place: dict) -> bool:
  return place["city"] in {"Toronto", "Oslo", "Denver", "Sapporo", "Edinburgh"}


@facets.source(S, "location")
def place_address(ctx: AuthorContext) -> Found:
  place = ctx.choice([p for p in ctx.state(S).places if p.kind != "station"])
  hits = ctx.call(S, "search_places", query=place.name, city=place.city)["items"]
  hit = next(h for h in hits if h["id"] == place.id)
  return found_one(
    "location", f"the street address of {place.name} in {place.city}", hit["address"]
  )


def _save_place(ctx: AuthorContext, target: dict, value: Value) -> None:
  place = ctx.call(S, "geocode", address=value.value)
  ctx.call(S, "save_place", place_id=place["id"], label=target["label"])


def _place_at(ctx: AuthorContext, address: str) -> str:
  """The id of the place at ``address`` (the rubric names the record the agent must save)."""
  return next((p.id for p in ctx.state(S).places if p.address == address), "")


facets.sink(
  S,
  "location",
  "save_place",
  prepare=lambda ctx: {"label": ctx.choice(("Client site", "Offsite venue", "Meetup spot"))},
  act=_save_place,
  check=lambda ctx, t, v: exists(
    S, "saved_places", where("place_id", _place_at(ctx, v.value)), where("label", t["label"])
  ),
  phrase=lambda ctx, t, obj: f'save {obj} in my maps under the label "{t["label"]}"',
  text=lambda ctx, t, v: f'{v.label} is saved as "{t["label"]}".',
)


def _alert_target(ctx: AuthorContext) -> dict:
  place = ctx.choice([p for p in ctx.state(S).places if p.kind == "station"])
  hits = ctx.call(S, "search_places", query=place.name, city=place.city)["items"]
  return next(h for h in hits if h["id"] == place.id)


facets.sink(
  S,
  "weather.condition",
  "weather_alert",
  prepare=_alert_target,
  act=lambda ctx, p, v: ctx.call(S, "create_weather_alert", place_id=p["id"], condition=v.value),
  check=lambda ctx, p, v: exists(
    S,
    "alerts",
    where("place_id", p["id"]),
    where("condition", v.value),
    where("active", True),
    since(ctx, S, "created_at"),
  ),
  phrase=lambda ctx, p, obj: f"set up a weather alert for {obj} at {p['name']} in {p['city']}",
  text=lambda ctx, p, v: f"An active {v.label} alert watches {p['name']}.",
)
