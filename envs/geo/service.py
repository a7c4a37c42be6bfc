"""Geo: a "Thinair Geo"-like service of places, geocoding and daily weather forecasts.

Places are the world's venues plus a few cafes, libraries, parks and stations per city, each
with an address and coordinates. Every place has one stored forecast per day for the 14 days
from the service's start date; a forecast's id is ``"<place_id>@<YYYY-MM-DD>"`` (see
``forecast_id``) so a task can patch a known day. Weather is drawn per city and day, so places
of one city share a day's condition: snow and sleet are possible only in snow-prone cities,
``snow_cm`` is positive only on snow or sleet days. Rules a maps user expects: coordinates stay
in range, a forecast outside the 14-day window does not exist, a place is saved once, and a
place has at most one active alert per weather condition.
"""

from __future__ import annotations

import random
import re
from datetime import date, datetime, timedelta
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from compoworld import Conflict, NotFound, Service, registry, tool
from compoworld.runtime.fields import Text
from compoworld.runtime.query import select
from compoworld.runtime.state import Record, ServiceState, Table
from envs._world import CITIES, LAST, STREETS, haversine_km, seeded, venue_category

PlaceKind = Literal["venue", "cafe", "library", "park", "station"]
Condition = Literal["sunny", "cloudy", "rain", "snow", "sleet", "fog", "windy"]
Latitude = Annotated[float, Field(ge=-90, le=90, description="Latitude in degrees.")]
Longitude = Annotated[float, Field(ge=-180, le=180, description="Longitude in degrees.")]
Amount = Annotated[float, Field(ge=0)]

#: Number of forecast days stored per place, starting at the service's start date.
FORECAST_DAYS = 14


class Place(Record):
  name: str
  kind: PlaceKind
  address: str
  city: str
  country: str
  lat: Latitude
  lon: Longitude


class Forecast(Record):
  id: str  # "<place_id>@<YYYY-MM-DD>"
  place_id: str
  date: date
  condition: Condition
  temp_high_c: float
  temp_low_c: float
  precip_mm: Amount = 0.0
  snow_cm: Amount = 0.0
  precip_probability: Annotated[float, Field(ge=0, le=1)] = 0.0

  @model_validator(mode="after")
  def _consistent(self) -> Forecast:
    if self.temp_low_c > self.temp_high_c:
      raise ValueError(f"temp_low_c {self.temp_low_c} is above temp_high_c {self.temp_high_c}")
    if self.snow_cm > 0 and self.condition not in ("snow", "sleet"):
      raise ValueError(f"snow_cm must be 0 on a '{self.condition}' day")
    return self


class SavedPlace(Record):
  id: str  # the place id: a place is saved at most once
  place_id: str
  label: str


class WeatherAlert(Record):
  place_id: str
  condition: Condition
  created_at: datetime
  active: bool = True


class GeoState(ServiceState):
  places: Table[Place]
  forecasts: Table[Forecast]
  saved_places: Table[SavedPlace]
  alerts: Table[WeatherAlert]


def forecast_id(place_id: str, day: date) -> str:
  """The id of a place's forecast for ``day``."""
  return f"{place_id}@{day.isoformat()}"


CAFES = ("Copper Kettle", "Northern Grind", "Little Fern", "Daily Ritual", "Bean & Byte")
PARKS = ("Riverside Park", "Harbour Gardens", "Hilltop Park", "Old Mill Green", "Lakeshore Park")

#: March climate per city: mean high, mean low (C), and condition weights. Snow and sleet are
#: dropped for cities that are not snow-prone.
CLIMATE: dict[str, tuple[float, float, dict[str, float]]] = {
  "Toronto": (3, -5, dict(sunny=3, cloudy=3, rain=1.5, snow=2, sleet=1, fog=0.5, windy=1)),
  "Oslo": (4, -3, dict(sunny=3, cloudy=3, rain=1, snow=2, sleet=1, fog=1, windy=1)),
  "Denver": (13, -1, dict(sunny=5, cloudy=2, rain=0.5, snow=1.5, sleet=0.5, fog=0.3, windy=1.5)),
  "Lisbon": (19, 11, dict(sunny=4, cloudy=3, rain=2.5, fog=0.5, windy=1)),
  "Austin": (23, 11, dict(sunny=5, cloudy=3, rain=1.5, fog=0.7, windy=1)),
  "Sapporo": (3, -4, dict(sunny=2, cloudy=3, rain=0.7, snow=3, sleet=1, fog=0.3, windy=0.7)),
  "Melbourne": (24, 13, dict(sunny=5, cloudy=3, rain=1.5, fog=0.5, windy=1)),
  "Edinburgh": (9, 2, dict(sunny=2, cloudy=4, rain=3, snow=0.4, sleet=0.6, fog=1, windy=2)),
}
PRECIP_PROBABILITY = {
  "sunny": (0.0, 0.1),
  "cloudy": (0.1, 0.35),
  "fog": (0.05, 0.2),
  "windy": (0.1, 0.3),
  "rain": (0.6, 0.95),
  "snow": (0.6, 0.95),
  "sleet": (0.55, 0.9),
}


def _city_day(rng: random.Random, city: str, snowy: bool) -> dict[str, Any]:
  """One day of a city's weather, drawn from its March climate."""
  mean_high, mean_low, weights = CLIMATE[city]
  options = {k: v for k, v in weights.items() if snowy or k not in ("snow", "sleet")}
  condition = rng.choices(list(options), weights=list(options.values()))[0]
  high = mean_high + rng.gauss(0, 3)
  low = min(mean_low + rng.gauss(0, 2.5), high - 2)
  if condition == "rain" and high < 1 and snowy:
    condition = "snow"
  if condition == "snow":
    high = min(high, 1.5)
    low = min(low, high - 3)
  elif condition == "sleet":
    high = min(max(high, 0.5), 4.0)
    low = min(low, high - 2)
  precip = snow = 0.0
  if condition == "rain":
    precip = rng.uniform(2, 20)
  elif condition == "snow":
    snow = rng.uniform(1, 15)
    precip = snow * rng.uniform(0.6, 1.0)
  elif condition == "sleet":
    precip = rng.uniform(1, 8)
    snow = rng.uniform(0.2, 2)
  lo, hi = PRECIP_PROBABILITY[condition]
  return {
    "condition": condition,
    "high": high,
    "low": low,
    "precip_mm": round(precip, 1),
    "snow_cm": round(snow, 1),
    "precip_probability": round(rng.uniform(lo, hi), 2),
  }


def _extra_place(rng: random.Random, city: tuple, kind: str, used: set[str]) -> dict[str, Any]:
  name_city, country, lat, lon, _ = city
  street = rng.choice(STREETS)
  for _ in range(10):
    if kind == "station":
      name = rng.choice((f"{name_city} Central Station", f"{street.rsplit(' ', 1)[0]} Station"))
    elif kind == "cafe":
      name = f"{rng.choice(CAFES)} Cafe"
    elif kind == "park":
      name = rng.choice(PARKS)
    else:
      name = rng.choice((f"{name_city} Public Library", f"{rng.choice(LAST)} Branch Library"))
    if (name, name_city) not in used:
      break
    street = rng.choice(STREETS)
  else:
    name = f"{rng.choice(LAST)} {kind.title()} {rng.randint(2, 99)}"
  return {
    "name": name,
    "kind": kind,
    "address": f"{rng.randint(2, 480)} {street}, {name_city}",
    "city": name_city,
    "country": country,
    "lat": round(lat + rng.uniform(-0.05, 0.05), 4),
    "lon": round(lon + rng.uniform(-0.05, 0.05), 4),
  }


_WORD = re.compile(r"[a-z0-9]+")
#: Words too common in addresses to identify a place on their own.
_GENERIC = {"st", "rd", "ave", "sq", "dr", "the", "of", "and", "street", "road", "avenue"}


def _words(*texts: str) -> set[str]:
  return {w for t in texts for w in _WORD.findall(t.lower())}


@registry.register
class GeoService(Service):
  name = "geo"
  domain = "location_travel"
  description = "Places, geocoding and 14-day weather forecasts, with saved places and alerts."
  State = GeoState

  @classmethod
  def generate(cls, seed: int, size: int | None) -> GeoState:
    rng, w, state = seeded(cls, seed)
    specs = []
    for v in w.venues:
      specs.append(
        dict(
          name=v.name,
          kind=venue_category(v.name),
          address=v.address,
          city=v.city,
          country=v.country,
          lat=v.lat,
          lon=v.lon,
        )
      )
    wanted = size if size is not None else len(specs) + 3 * len(CITIES)
    used = {(s["name"], s["city"]) for s in specs}
    i = 0
    while len(specs) < wanted:
      kind = "station" if i < len(CITIES) else rng.choice(("cafe", "park", "library"))
      extra = _extra_place(rng, CITIES[i % len(CITIES)], kind, used)
      used.add((extra["name"], extra["city"]))
      specs.append(extra)
      i += 1
    start = state.now.date()
    weather = {
      (city, d): _city_day(rng, city, snowy)
      for city, _, _, _, snowy in CITIES
      for d in range(FORECAST_DAYS)
    }
    for spec in specs[:wanted]:
      place = state.places.insert(Place(id=state.new_id("plc"), **spec))
      for d in range(FORECAST_DAYS):
        day = weather[place.city, d]
        high = round(day["high"] + rng.uniform(-1, 1), 1)
        low = round(min(day["low"] + rng.uniform(-1, 1), high - 1), 1)
        on = start + timedelta(days=d)
        state.forecasts.insert(
          Forecast(
            id=forecast_id(place.id, on),
            place_id=place.id,
            date=on,
            condition=day["condition"],
            temp_high_c=high,
            temp_low_c=low,
            precip_mm=day["precip_mm"],
            snow_cm=day["snow_cm"],
            precip_probability=day["precip_probability"],
          )
        )
    places = list(state.places)
    for place, label in zip(rng.sample(places, min(2, len(places))), ("Work", "Gym"), strict=False):
      state.saved_places.insert(SavedPlace(id=place.id, place_id=place.id, label=label))
    if places:
      for condition, active in (("rain", True), ("snow", False)):
        state.alerts.insert(
          WeatherAlert(
            id=state.new_id("alrt"),
            place_id=rng.choice(places).id,
            condition=condition,
            created_at=state.now - timedelta(days=rng.randint(1, 20)),
            active=active,
          )
        )
    return state

  # --- helpers -----------------------------------------------------------------------------

  def _forecast(self, place_id: str, day: date) -> Forecast:
    found = self.state.forecasts.find(forecast_id(place_id, day))
    if found is None:
      days = sorted(f.date for f in self.state.forecasts if f.place_id == place_id)
      window = f"{days[0].isoformat()} to {days[-1].isoformat()}" if days else "no days"
      raise NotFound(
        f"no forecast for {day.isoformat()} at place '{place_id}'; forecasts cover {window}"
      )
    return found

  def _matching_dates(self, alert: WeatherAlert) -> list[date]:
    return sorted(
      f.date
      for f in self.state.forecasts
      if f.place_id == alert.place_id and f.condition == alert.condition
    )

  def _with_distance(self, place: Place, km: float) -> dict[str, Any]:
    return {**place.model_dump(), "distance_km": round(km, 3)}

  # --- reads -------------------------------------------------------------------------------

  @tool(mutates=False, page="place", produces=("place.id", "location"))
  def search_places(
    self, query: str | None = None, city: str | None = None, kind: PlaceKind | None = None
  ) -> list:
    """Search places by text, city and kind, ordered by city then name.

    Args:
      query: words that must all appear in the name, address, city or kind.
      city: only places in this city (case-insensitive), e.g. "Lisbon".
      kind: only places of this kind: venue, cafe, library, park or station.
    """
    return select(
      self.state.places,
      eq={"kind": kind},
      same={"city": city and city.strip()},
      text=query,
      fields=("name", "address", "city", "kind"),
      key=lambda p: (p.city, p.name, p.id),
    )

  @tool(mutates=False, consumes=("place.id",), produces=("location",))
  def get_place(self, place_id: str) -> Place:
    """Get one place with its address and coordinates.

    Args:
      place_id: the place's id.
    """
    return self.state.places.get(place_id)

  @tool(mutates=False, consumes=("location",), produces=("place.id", "location"))
  def geocode(self, address: Text) -> Place:
    """Find the place that best matches an address or place name, e.g. "51 Elm Ave, Toronto"
    or "Garcia Cafe, 51 Elm Ave, Toronto".

    Args:
      address: a street address, a place name, or both.
    """
    wanted = _words(address)
    key_words = {w for w in wanted if w not in _GENERIC and not w.isdigit()}
    best, best_score = None, (0, 0, 0)
    for p in self.state.places:
      have = _words(p.name, p.address, p.city, p.country)
      score = (
        len(key_words & have),
        len(wanted & have),
        -len(have - wanted),
      )
      if score[0] > 0 and (best is None or score > best_score):
        best, best_score = p, score
    if best is None:
      raise NotFound(f"no place matches the address '{address}'")
    return best

  @tool(mutates=False, consumes=("location",), produces=("place.id", "location"))
  def reverse_geocode(self, lat: Latitude, lon: Longitude) -> dict:
    """Find the place nearest to a coordinate, with its distance in km.

    Args:
      lat: latitude in degrees (-90 to 90).
      lon: longitude in degrees (-180 to 180).
    """
    best = min(
      ((haversine_km(lat, lon, p.lat, p.lon), p.id, p) for p in self.state.places),
      default=None,
    )
    if best is None:
      raise NotFound("there are no places")
    return self._with_distance(best[2], best[0])

  @tool(mutates=False, consumes=("place.id",), produces=("place.id", "location"))
  def nearby_places(
    self,
    place_id: str,
    radius_km: Annotated[float, Field(gt=0, le=100)] = 2.0,
    kind: PlaceKind | None = None,
  ) -> list[dict]:
    """List other places within a radius of a place, nearest first, each with distance_km.

    Args:
      place_id: the place to search around.
      radius_km: search radius in km (above 0, at most 100).
      kind: only places of this kind: venue, cafe, library, park or station.
    """
    center = self.state.places.get(place_id)
    found = sorted(
      (haversine_km(center.lat, center.lon, p.lat, p.lon), p.id, p)
      for p in self.state.places
      if p.id != place_id and (kind is None or p.kind == kind)
    )
    return [self._with_distance(p, km) for km, _, p in found if km <= radius_km]

  @tool(mutates=False, consumes=("place.id", "date"), produces=("weather.condition",))
  def get_forecast(self, place_id: str, date: date) -> Forecast:
    """Get a place's weather forecast for one day of the 14-day forecast window.

    Args:
      place_id: the place's id.
      date: the day (YYYY-MM-DD).
    """
    self.state.places.get(place_id)
    return self._forecast(place_id, date)

  @tool(mutates=False, consumes=("place.id", "date"), produces=("weather.condition", "date"))
  def get_forecast_range(
    self, place_id: str, start_date: date, days: Annotated[int, Field(ge=1, le=14)] = 3
  ) -> list[Forecast]:
    """Get a place's daily forecasts for consecutive days; every day must lie in the 14-day
    forecast window.

    Args:
      place_id: the place's id.
      start_date: the first day (YYYY-MM-DD).
      days: number of days (1-14).
    """
    self.state.places.get(place_id)
    return [self._forecast(place_id, start_date + timedelta(days=d)) for d in range(days)]

  @tool(mutates=False, produces=("place.id",))
  def list_saved_places(self) -> list[dict]:
    """List the user's saved places with their labels and place details."""
    return [
      {**s.model_dump(), "place": self.state.places.get(s.place_id)}
      for s in sorted(self.state.saved_places, key=lambda s: (s.label, s.id))
    ]

  @tool(mutates=False, produces=("place.id", "weather.condition"))
  def list_alerts(self) -> list[dict]:
    """List the user's weather alerts, active and cancelled, oldest first; each active alert
    lists the forecast days (matching_dates) that currently show its condition."""
    return [
      {**a.model_dump(), "matching_dates": self._matching_dates(a) if a.active else []}
      for a in sorted(self.state.alerts, key=lambda a: (a.created_at, a.id))
    ]

  # --- writes ------------------------------------------------------------------------------

  @tool(mutates=True, consumes=("place.id", "text"))
  def save_place(self, place_id: str, label: Text) -> SavedPlace:
    """Save a place under a label such as "Home" or "Office".

    Args:
      place_id: the place's id.
      label: a short name for the saved place.
    """
    self.state.places.get(place_id)
    saved = self.state.saved_places.find(place_id)
    if saved is not None:
      raise Conflict(f"place '{place_id}' is already saved as '{saved.label}'")
    return self.state.saved_places.insert(SavedPlace(id=place_id, place_id=place_id, label=label))

  @tool(mutates=True, consumes=("place.id",))
  def remove_saved_place(self, place_id: str) -> SavedPlace:
    """Remove a place from the saved places.

    Args:
      place_id: the place's id.
    """
    self.state.places.get(place_id)
    if place_id not in self.state.saved_places:
      raise NotFound(f"place '{place_id}' is not among the saved places")
    return self.state.saved_places.delete(place_id)

  @tool(mutates=True, consumes=("place.id", "weather.condition"), produces=("alert.id", "date"))
  def create_weather_alert(self, place_id: str, condition: Condition) -> dict:
    """Get alerted when a place's forecast shows a weather condition; the answer lists the
    forecast days (matching_dates) that show it already.

    Args:
      place_id: the place's id.
      condition: one of sunny, cloudy, rain, snow, sleet, fog, windy.
    """
    self.state.places.get(place_id)
    for a in self.state.alerts:
      if a.active and a.place_id == place_id and a.condition == condition:
        raise Conflict(f"alert '{a.id}' already watches for {condition} at place '{place_id}'")
    alert = self.state.alerts.insert(
      WeatherAlert(
        id=self.state.new_id("alrt"),
        place_id=place_id,
        condition=condition,
        created_at=self.state.now,
      )
    )
    return {**alert.model_dump(), "matching_dates": self._matching_dates(alert)}

  @tool(mutates=True, consumes=("alert.id",))
  def cancel_weather_alert(self, alert_id: str) -> WeatherAlert:
    """Cancel an active weather alert (it stays listed as inactive).

    Args:
      alert_id: the alert's id.
    """
    alert = self.state.alerts.get(alert_id)
    if not alert.active:
      raise Conflict(f"alert '{alert_id}' is already cancelled")
    return self.state.alerts.update(alert_id, active=False)
