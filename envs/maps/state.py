"""Maps: the records, state and constants; the service and its tools are in ``tools``."""

from __future__ import annotations

import random
import re
from datetime import date, datetime, time, timedelta
from typing import Annotated, Literal

from pydantic import Field

from compoworld import Conflict, Record, ServiceState, Table
from envs._world import haversine_km

Category = Literal[
  "restaurant", "cafe", "bar", "hotel", "airport", "office", "museum", "park", "library", "venue"
]
Mode = Literal["driving", "transit", "walking", "cycling"]
Weekday = Literal["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
Stars = Annotated[int, Field(ge=1, le=5, description="A rating from 1 to 5 stars.")]
WEEKDAYS: tuple[str, ...] = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")

#: Route length over straight-line distance, per mode.
DETOUR = {"driving": 1.3, "transit": 1.4, "walking": 1.2, "cycling": 1.25}
#: Route kilometres covered at city speed before highway / intercity rail speed applies.
CITY_KM = 15.0
#: (city speed, long-distance speed) in km/h.
SPEED_KMH = {
  "driving": (32.0, 95.0),
  "transit": (24.0, 110.0),
  "walking": (4.8, 4.8),
  "cycling": (15.0, 15.0),
}
#: Driving time multiplier at weekday rush hour, per city.
PEAK = {
  "Toronto": 1.7,
  "Oslo": 1.3,
  "Denver": 1.4,
  "Lisbon": 1.5,
  "Austin": 1.6,
  "Sapporo": 1.3,
  "Melbourne": 1.5,
  "Edinburgh": 1.4,
}
CONTINENT = {
  "Canada": "North America",
  "USA": "North America",
  "Norway": "Europe",
  "Portugal": "Europe",
  "UK": "Europe",
  "Japan": "Asia",
  "Australia": "Oceania",
}
CALLING_CODE = {
  "Canada": 1,
  "USA": 1,
  "Norway": 47,
  "Portugal": 351,
  "UK": 44,
  "Japan": 81,
  "Australia": 61,
}
AIRPORTS = {
  "Toronto": ("Toronto Pearson International Airport", 43.6777, -79.6248),
  "Oslo": ("Oslo Gardermoen Airport", 60.1976, 11.1004),
  "Denver": ("Denver International Airport", 39.8561, -104.6737),
  "Lisbon": ("Lisbon Humberto Delgado Airport", 38.7742, -9.1342),
  "Austin": ("Austin-Bergstrom International Airport", 30.1975, -97.6664),
  "Sapporo": ("New Chitose Airport", 42.7752, 141.6923),
  "Melbourne": ("Melbourne Airport", -37.6690, 144.8410),
  "Edinburgh": ("Edinburgh Airport", 55.9508, -3.3615),
}
BUSINESSES = {
  "hotel": ("Grand {city} Hotel", "{city} Harbour Inn", "Parkside Suites", "The Station Hotel"),
  "restaurant": (
    "Olive & Thyme",
    "The Copper Pot",
    "Saffron House",
    "Harbour Grill",
    "Noodle Bar 88",
    "Casa Lume",
    "The Green Fork",
    "Little Sakura",
  ),
  "cafe": ("Copper Kettle Cafe", "Northern Grind", "Little Fern Coffee", "Daily Ritual"),
  "bar": ("The Night Owl", "Hop & Barrel", "Velvet Lounge", "The Lantern"),
  "museum": ("{city} Museum of Art", "{city} Science Centre", "{city} History Museum"),
}
#: Businesses drawn per city, in order (so a small size still gets a spread of categories).
CITY_MIX = ("hotel", "restaurant", "cafe", "bar", "museum", "restaurant")
GOOD = (
  "Lovely staff and quick service.",
  "Great location, would come back.",
  "Clean, quiet and easy to get to.",
  "Exactly what we needed for the team.",
)
MIXED = ("Fine, but busy at lunchtime.", "Decent, a bit overpriced.", "OK for a quick stop.")
BAD = ("Long wait and nobody apologised.", "Closed earlier than the listed hours.")


class Hours(Record):
  id: Weekday  # one record per open weekday
  opens: time
  closes: time  # == opens: open all day; < opens: closes after midnight


class Place(Record):
  name: str
  category: Category
  address: str
  city: str
  country: str
  lat: Annotated[float, Field(ge=-90, le=90)]
  lon: Annotated[float, Field(ge=-180, le=180)]
  phone: str = ""
  rating: Annotated[float, Field(ge=1, le=5)]
  rating_count: int
  price_level: int | None = None  # 1 ($) to 4 ($$$$)
  hours: tuple[Hours, ...] = ()


class SavedList(Record):
  name: str
  description: str = ""
  owner: str
  place_ids: tuple[str, ...] = ()
  created_at: datetime
  updated_at: datetime


class Review(Record):
  place_id: str
  author: str
  rating: Stars
  text: str
  created_at: datetime


class MapsState(ServiceState):
  places: Table[Place]
  lists: Table[SavedList]
  reviews: Table[Review]


def congestion(city: str, at: datetime) -> float:
  """Driving time multiplier for a city at a moment (1.0 is free-flowing traffic)."""
  extra, hour = PEAK.get(city, 1.3) - 1, at.hour
  if at.weekday() >= 5:
    return round(1 + extra * 0.3, 2) if 10 <= hour < 19 else 1.0
  if hour in (7, 8, 9, 16, 17, 18):
    return round(1 + extra, 2)
  if 10 <= hour < 16:
    return round(1 + extra * 0.4, 2)
  if 19 <= hour < 22:
    return round(1 + extra * 0.2, 2)
  return 1.0


def travel(origin: Place, dest: Place, mode: str, depart_at: datetime) -> dict:
  """Distance and duration of a trip; raises Conflict when no route exists for the mode."""
  if origin.country != dest.country and mode == "walking":
    raise Conflict(
      f"no walking route from {origin.country} to {dest.country}: walking directions do not "
      "cross borders; use driving or transit"
    )
  if CONTINENT.get(origin.country) != CONTINENT.get(dest.country):
    raise Conflict(
      f"no {mode} route between {origin.country} and {dest.country}: they are on different "
      "continents; fly between their airports instead"
    )
  km = haversine_km(origin.lat, origin.lon, dest.lat, dest.lon) * DETOUR[mode]
  city_speed, far_speed = SPEED_KMH[mode]
  hours = min(km, CITY_KM) / city_speed + max(km - CITY_KM, 0) / far_speed
  minutes, factor = hours * 60, 1.0
  if mode == "driving":
    factor = congestion(origin.city, depart_at)
    minutes *= factor
  elif mode == "transit" and km > 0:
    minutes += 6 if 6 <= depart_at.hour < 22 else 15  # waiting for the next departure
  minutes = round(minutes)
  return {
    "distance_km": round(km, 2),
    "duration_min": minutes,
    "duration_text": _duration_text(minutes),
    "traffic_factor": factor,
    "depart_at": depart_at,
    "arrive_at": depart_at + timedelta(minutes=minutes),
  }


def _duration_text(minutes: int) -> str:
  hours, mins = divmod(minutes, 60)
  return f"{hours} h {mins} min" if hours else f"{mins} min"


def _hours(category: str, rng: random.Random) -> tuple[Hours, ...]:
  """A weekly timetable typical of the category."""

  def days(names, opens, closes):
    return [
      Hours(id=d, opens=time.fromisoformat(opens), closes=time.fromisoformat(closes)) for d in names
    ]

  if category in ("hotel", "airport"):
    return tuple(days(WEEKDAYS, "00:00", "00:00"))
  if category == "restaurant":
    if rng.random() < 0.5:
      return tuple(days(WEEKDAYS[1:], "11:30", "22:00"))  # closed on Mondays
    return tuple(days(WEEKDAYS, "12:00", "23:00"))
  if category == "cafe":
    return tuple(days(WEEKDAYS[:5], "07:00", "18:00") + days(WEEKDAYS[5:], "08:00", "17:00"))
  if category == "bar":
    return tuple(days(WEEKDAYS[2:], "17:00", "02:00"))
  if category == "office":
    return tuple(days(WEEKDAYS[:5], "08:30", "18:00"))
  if category == "museum":
    return tuple(
      days(("tue", "wed"), "10:00", "18:00")
      + days(("thu",), "10:00", "21:00")
      + days(WEEKDAYS[4:], "10:00", "18:00")
    )
  if category == "park":
    return tuple(days(WEEKDAYS, "06:00", "22:00"))
  if category == "library":
    return tuple(days(WEEKDAYS[:6], "09:00", "20:00"))
  return tuple(days(WEEKDAYS[:5], "09:00", "21:00") + days(("sat",), "10:00", "18:00"))


def _open_intervals(place: Place, first: date, last: date) -> list[tuple[datetime, datetime]]:
  """The place's opening intervals starting on days ``first`` to ``last``, merged."""
  by_day = {h.id: h for h in place.hours}
  spans = []
  day = first
  while day <= last:
    h = by_day.get(WEEKDAYS[day.weekday()])
    if h is not None:
      start = datetime.combine(day, h.opens)
      end = datetime.combine(day, h.closes)
      if h.closes <= h.opens:
        end += timedelta(days=1)
      spans.append((start, end))
    day += timedelta(days=1)
  merged: list[tuple[datetime, datetime]] = []
  for start, end in spans:
    if merged and start <= merged[-1][1]:
      merged[-1] = (merged[-1][0], max(merged[-1][1], end))
    else:
      merged.append((start, end))
  return merged


_WORD = re.compile(r"[a-z0-9]+")


def _words(*texts: str) -> set[str]:
  return {w for t in texts for w in _WORD.findall(t.lower())}
