"""Maps: a Google Maps-like service of places, opening hours, routes, saved lists and reviews.

Places are the shared world's venues plus the businesses a traveller looks up in each city:
an airport, hotels, restaurants, a cafe, a bar, a museum, the home company's offices and the
customers' head offices. Each place has a category, an address, coordinates, a rating with its
number of ratings, and weekly opening hours (one record per open weekday; ``closes`` equal to
``opens`` means open all day, an earlier ``closes`` means it closes after midnight). Times are
the place's local time.

Travel is computed, not stored, so it is deterministic: the great-circle (haversine) distance
times a per-mode detour factor (``DETOUR``), at per-mode speeds (city streets, then highway or
intercity rail past ``CITY_KM``; walking and cycling at a constant pace); transit adds a wait
for the next departure; driving is slowed by the origin city's congestion at the departure hour
(``PEAK`` at weekday rush hours, less at midday, evenings and weekends). The user (the world's
first person) owns saved lists of places and writes reviews.

Rules a maps user expects: ratings are whole numbers from 1 to 5; a person reviews a place once
(a review updates the place's rating and count); walking directions never cross a border, and
no ground mode crosses between continents (fly between airports instead); origin and
destination differ; a place is in a list once and list names are unique; a distance matrix is
at most 10 by 10; unknown modes and categories are refused.
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta
from typing import Annotated

from pydantic import Field

from compoworld import Conflict, InvalidArgument, NotFound, Service, registry, tool
from compoworld.runtime.fields import Email, Limit, Text
from compoworld.runtime.query import select
from envs._world import CITIES, STREETS, WorldUser, seeded, venue_category
from envs.maps.state import (
  AIRPORTS,
  BAD,
  BUSINESSES,
  CALLING_CODE,
  CITY_MIX,
  GOOD,
  MIXED,
  WEEKDAYS,
  Category,
  MapsState,
  Mode,
  Place,
  Review,
  SavedList,
  Stars,
  _hours,
  _open_intervals,
  _words,
  haversine_km,
  travel,
)


@registry.register
class MapsService(WorldUser, Service):
  name = "maps"
  domain = "location_travel"
  description = "Places, opening hours, directions and travel times, saved lists and reviews."
  State = MapsState

  @classmethod
  def generate(cls, seed: int, size: int | None) -> MapsState:
    rng, w, state = seeded(cls, seed)
    country = {c[0]: c[1] for c in CITIES}
    centre = {c[0]: (c[2], c[3]) for c in CITIES}

    def spot(city: str, spread: float = 0.04) -> tuple[float, float]:
      lat, lon = centre[city]
      return round(lat + rng.uniform(-spread, spread), 4), round(
        lon + rng.uniform(-spread, spread), 4
      )

    def street(city: str) -> str:
      return f"{rng.randint(2, 480)} {rng.choice(STREETS)}, {city}"

    specs = []  # (name, category, address, city, lat, lon)
    for city, (aname, lat, lon) in AIRPORTS.items():
      specs.append((aname, "airport", f"1 Terminal Way, {city}", city, lat, lon))
    for v in w.venues:
      specs.append((v.name, venue_category(v.name), v.address, v.city, v.lat, v.lon))
    home = {p.city for p in w.people[:12]}  # the cities where the company has staff offices
    for city in sorted(home):
      specs.append((f"{w.company} {city} Office", "office", street(city), city, *spot(city, 0.02)))
    for c in w.customers:
      specs.append((f"{c.name} HQ", "office", street(c.city), c.city, *spot(c.city)))
    used = {(s[0], s[3]) for s in specs}
    wanted = size if size is not None else len(specs) + len(CITY_MIX) * len(CITIES)
    i = 0
    while len(specs) < wanted:
      city = CITIES[i % len(CITIES)][0]
      cat = CITY_MIX[(i // len(CITIES)) % len(CITY_MIX)]
      name = rng.choice(BUSINESSES[cat]).format(city=city)
      if (name, city) in used:
        name = f"{name} {rng.choice(STREETS).rsplit(' ', 1)[0]}"
      if (name, city) not in used:
        used.add((name, city))
        specs.append((name, cat, street(city), city, *spot(city)))
      i += 1
    for name, cat, address, city, lat, lon in specs[:wanted]:
      priced = cat in ("restaurant", "cafe", "bar", "hotel")
      state.places.insert(
        Place(
          id=state.new_id("plc"),
          name=name,
          category=cat,
          address=address,
          city=city,
          country=country[city],
          lat=lat,
          lon=lon,
          phone=f"+{CALLING_CODE[country[city]]} {rng.randint(200, 999)} {rng.randint(1000, 9999)}",
          rating=round(rng.uniform(3.3, 4.8), 1),
          rating_count=rng.randint(20, 2500),
          price_level=rng.randint(1, 4) if priced else None,
          hours=_hours(cat, rng),
        )
      )
    cls._seed_reviews(state, rng, w)
    cls._seed_lists(state, rng, w.people[0].email)
    return state

  @staticmethod
  def _seed_reviews(state: MapsState, rng: random.Random, w) -> None:
    places = sorted(state.places, key=lambda p: p.id)
    me = w.people[0].email
    mine = set(p.id for p in rng.sample(places, min(3, len(places))))  # the user's own reviews
    for place in places:
      authors = [p.email for p in rng.sample(w.people[1:], rng.choice((0, 0, 1, 2, 3)))]
      if place.id in mine:
        authors.append(me)
      for author in authors:
        stars = max(1, min(5, round(rng.gauss(place.rating, 0.9))))
        text = rng.choice(GOOD if stars >= 4 else MIXED if stars == 3 else BAD)
        state.reviews.insert(
          Review(
            id=state.new_id("rev"),
            place_id=place.id,
            author=author,
            rating=stars,
            text=text,
            created_at=state.now - timedelta(days=rng.randint(1, 300), hours=rng.randint(0, 10)),
          )
        )

  @staticmethod
  def _seed_lists(state: MapsState, rng: random.Random, me: str) -> None:
    places = sorted(state.places, key=lambda p: p.id)

    def by_cat(*cats: str) -> list[Place]:
      return [p for p in places if p.category in cats]

    for name, desc, pool, k in (
      ("Favourites", "Places I keep coming back to", by_cat("restaurant", "cafe", "bar"), 4),
      ("Want to go", "", by_cat("museum", "restaurant", "park"), 3),
      (
        "Team offsite ideas",
        "Venues and hotels for the spring offsite",
        by_cat("venue", "hotel"),
        4,
      ),
    ):
      chosen = rng.sample(pool, min(k, len(pool)))
      created = state.now - timedelta(days=rng.randint(20, 200))
      state.lists.insert(
        SavedList(
          id=state.new_id("lst"),
          name=name,
          description=desc,
          owner=me,
          place_ids=tuple(p.id for p in chosen),
          created_at=created,
          updated_at=created + timedelta(days=rng.randint(0, 15)),
        )
      )

  # --- helpers -----------------------------------------------------------------------------

  def _resolve(self, ref: str, argument: str) -> Place:
    """A place id, or the place whose name and address best match the text."""
    found = self.state.places.find(ref.strip())
    if found is not None:
      return found
    wanted = _words(ref)
    best, best_key = None, None
    for p in self.state.places:
      have = _words(p.name, p.address, p.city, p.country)
      if wanted and wanted <= have:
        key = (len(have - wanted), p.name, p.id)  # the tightest match wins
        if best_key is None or key < best_key:
          best, best_key = p, key
    if best is None:
      raise NotFound(f"{argument}: no place id or address matches '{ref}'")
    return best

  @staticmethod
  def _brief(place: Place) -> dict:
    return {"id": place.id, "name": place.name, "address": place.address, "city": place.city}

  def _open_at(self, place: Place, at: datetime) -> tuple[bool, datetime | None]:
    """Whether the place is open at ``at`` and when that next changes (None: not within the
    coming week, e.g. open around the clock)."""
    horizon = at.date() + timedelta(days=8)
    for start, end in _open_intervals(place, at.date() - timedelta(days=1), horizon):
      if start <= at < end:
        return True, end if end.date() <= horizon else None
      if start > at:
        return False, start
    return False, None

  # --- reads -------------------------------------------------------------------------------

  @tool(
    mutates=False,
    page="place",
    consumes=("city",),
    produces=("place.id", "location", "address", "city", "coordinates"),
  )
  def search_places(
    self,
    query: str | None = None,
    category: Category | None = None,
    city: str | None = None,
    min_rating: Annotated[float, Field(ge=1, le=5)] | None = None,
    open_at: datetime | None = None,
  ) -> list:
    """Search places, best rated first.

    Args:
      query: words that must all appear in the name, address, city or category.
      category: only places of this category: restaurant, cafe, bar, hotel, airport, office,
        museum, park, library or venue.
      city: only places in this city (case-insensitive), e.g. "Lisbon".
      min_rating: only places rated at least this (1-5).
      open_at: only places open at this local time (ISO 8601).
    """
    return select(
      self.state.places,
      eq={"category": category},
      same={"city": city and city.strip()},
      ge={"rating": min_rating},
      text=query,
      fields=("name", "address", "city", "category"),
      where=lambda p: open_at is None or self._open_at(p, open_at)[0],
      key=lambda p: (-p.rating, p.name, p.id),
    )

  @tool(
    mutates=False,
    consumes=("place.id",),
    produces=("location", "address", "city", "coordinates", "person.phone", "number"),
  )
  def get_place(self, place_id: str) -> dict:
    """Get one place with its address, coordinates, phone, rating, weekly opening hours and its
    three most recent reviews.

    Args:
      place_id: the place's id.
    """
    place = self.state.places.get(place_id)
    recent = sorted(
      (r for r in self.state.reviews if r.place_id == place_id),
      key=lambda r: (r.created_at, r.id),
      reverse=True,
    )[:3]
    return {**place.model_dump(), "recent_reviews": recent}

  @tool(
    mutates=False,
    consumes=("place.id", "address", "location", "datetime"),
    produces=("duration", "number", "datetime"),
  )
  def get_directions(
    self,
    origin: Text,
    destination: Text,
    mode: Mode = "driving",
    depart_at: datetime | None = None,
  ) -> dict:
    """Get the route distance (km), travel time (minutes) and arrival time between two places.
    Driving time depends on the origin city's traffic at the departure time.

    Args:
      origin: a place id, or a place's name and/or address, e.g. "12 King St, Toronto".
      destination: a place id, or a place's name and/or address.
      mode: driving, transit, walking or cycling.
      depart_at: local departure time (ISO 8601); defaults to now.
    """
    a, b = self._resolve(origin, "origin"), self._resolve(destination, "destination")
    if a.id == b.id:
      raise InvalidArgument(f"origin and destination are the same place ('{a.name}')")
    trip = travel(a, b, mode, depart_at or self.state.now)
    return {"origin": self._brief(a), "destination": self._brief(b), "mode": mode, **trip}

  @tool(
    mutates=False,
    consumes=("place.id", "address", "location", "datetime"),
    produces=("duration", "number"),
  )
  def distance_matrix(
    self,
    origins: Annotated[list[Text], Field(min_length=1, max_length=10)],
    destinations: Annotated[list[Text], Field(min_length=1, max_length=10)],
    mode: Mode = "driving",
    depart_at: datetime | None = None,
  ) -> dict:
    """Travel distances and times from each origin to each destination (rows follow the
    origins, columns the destinations); a pair with no route has status "no_route".

    Args:
      origins: 1 to 10 place ids or addresses.
      destinations: 1 to 10 place ids or addresses.
      mode: driving, transit, walking or cycling.
      depart_at: local departure time (ISO 8601); defaults to now.
    """
    src = [self._resolve(o, "origins") for o in origins]
    dst = [self._resolve(d, "destinations") for d in destinations]
    at = depart_at or self.state.now
    rows = []
    for a in src:
      row = []
      for b in dst:
        if a.id == b.id:
          row.append({"status": "ok", "distance_km": 0.0, "duration_min": 0})
          continue
        try:
          trip = travel(a, b, mode, at)
        except Conflict as err:
          row.append({"status": "no_route", "reason": err.message})
          continue
        row.append(
          {"status": "ok", "distance_km": trip["distance_km"], "duration_min": trip["duration_min"]}
        )
      rows.append(row)
    return {
      "origins": [self._brief(p) for p in src],
      "destinations": [self._brief(p) for p in dst],
      "mode": mode,
      "depart_at": at,
      "rows": rows,
    }

  @tool(mutates=False, consumes=("place.id", "datetime"), produces=("datetime",))
  def is_open_at(self, place_id: str, at: datetime | None = None) -> dict:
    """Whether a place is open at a local time (now by default), that day's hours, and when it
    next opens or closes.

    Args:
      place_id: the place's id.
      at: the local time to check (ISO 8601); defaults to now.
    """
    place = self.state.places.get(place_id)
    at = at or self.state.now
    is_open, change = self._open_at(place, at)
    today = next((h for h in place.hours if h.id == WEEKDAYS[at.weekday()]), None)
    return {
      "place_id": place.id,
      "name": place.name,
      "at": at,
      "open": is_open,
      "hours_that_day": today,
      "closes_at": change if is_open else None,
      "opens_at": None if is_open else change,
    }

  @tool(mutates=False, consumes=("place.id",), produces=("place.id", "location", "number"))
  def nearby(
    self,
    place_id: str,
    category: Category | None = None,
    radius_km: Annotated[float, Field(gt=0, le=50)] = 2.0,
    limit: Limit = 20,
  ) -> list[dict]:
    """List other places within a straight-line radius of a place, nearest first, each with
    its distance_km.

    Args:
      place_id: the place to search around.
      category: only places of this category (restaurant, cafe, bar, hotel, ...).
      radius_km: radius in km (above 0, at most 50).
      limit: the most places to return (1-100).
    """
    here = self.state.places.get(place_id)
    found = sorted(
      (round(haversine_km(here.lat, here.lon, p.lat, p.lon), 3), p.name, p.id, p)
      for p in self.state.places
      if p.id != place_id and (category is None or p.category == category)
    )
    return [
      {**self._brief(p), "category": p.category, "rating": p.rating, "distance_km": km}
      for km, _, _, p in found
      if km <= radius_km
    ][:limit]

  @tool(mutates=False, produces=("list.id", "place.id", "title"))
  def list_lists(self) -> list[dict]:
    """List the user's saved lists by name, each with its places (id, name, address, city)."""
    return [
      {**lst.model_dump(), "places": [self._brief(self.state.places.get(p)) for p in lst.place_ids]}
      for lst in sorted(self.state.lists, key=lambda x: (x.name.lower(), x.id))
    ]

  @tool(
    mutates=False,
    page="review",
    consumes=("place.id", "person.email"),
    produces=("review.id", "person.email", "text", "number"),
  )
  def list_reviews(
    self, place_id: str | None = None, author: Email | None = None, min_rating: Stars | None = None
  ) -> list:
    """List reviews, newest first.

    Args:
      place_id: only reviews of this place.
      author: only reviews written by this email address.
      min_rating: only reviews with at least this many stars (1-5).
    """
    self.state.places.check(place_id)
    return select(
      self.state.reviews,
      eq={"place_id": place_id, "author": author and author.lower()},
      ge={"rating": min_rating},
      key=lambda r: (r.created_at, r.id),
      reverse=True,
    )

  # --- writes ------------------------------------------------------------------------------

  @tool(mutates=True, consumes=("title", "text"), produces=("list.id",))
  def create_list(self, name: Text, description: str = "") -> SavedList:
    """Create an empty saved list; list names are unique (case-insensitive).

    Args:
      name: the list's name, e.g. "Lisbon trip".
      description: what the list is for.
    """
    name = name.strip()
    for other in self.state.lists:
      if other.name.lower() == name.lower():
        raise Conflict(f"a list named '{other.name}' already exists ({other.id})")
    return self.state.lists.insert(
      SavedList(
        id=self.state.new_id("lst"),
        name=name,
        description=description,
        owner=self.user,
        created_at=self.state.now,
        updated_at=self.state.now,
      )
    )

  @tool(mutates=True, consumes=("list.id", "place.id"))
  def save_place_to_list(self, list_id: str, place_id: str) -> SavedList:
    """Add a place to one of the user's saved lists.

    Args:
      list_id: the list's id.
      place_id: the place's id.
    """
    lst = self.state.lists.get(list_id)
    place = self.state.places.get(place_id)
    if place_id in lst.place_ids:
      raise Conflict(f"'{place.name}' ({place_id}) is already in list '{lst.name}'")
    return self.state.lists.update(
      list_id, place_ids=(*lst.place_ids, place_id), updated_at=self.state.now
    )

  @tool(mutates=True, consumes=("list.id", "place.id"))
  def remove_place_from_list(self, list_id: str, place_id: str) -> SavedList:
    """Remove a place from a saved list.

    Args:
      list_id: the list's id.
      place_id: the place's id.
    """
    lst = self.state.lists.get(list_id)
    if place_id not in lst.place_ids:
      raise NotFound(f"place '{place_id}' is not in list '{lst.name}'")
    kept = tuple(p for p in lst.place_ids if p != place_id)
    return self.state.lists.update(list_id, place_ids=kept, updated_at=self.state.now)

  @tool(mutates=True, consumes=("place.id", "text", "number"), produces=("review.id",))
  def add_review(self, place_id: str, rating: Stars, text: Text) -> dict:
    """Review a place as the user (once per place); the place's rating and rating count are
    updated.

    Args:
      place_id: the place's id.
      rating: whole stars from 1 to 5.
      text: the review.
    """
    place = self.state.places.get(place_id)
    for r in self.state.reviews:
      if r.place_id == place_id and r.author == self.user:
        raise Conflict(f"you already reviewed '{place.name}' ({r.id}); a place is reviewed once")
    review = self.state.reviews.insert(
      Review(
        id=self.state.new_id("rev"),
        place_id=place_id,
        author=self.user,
        rating=rating,
        text=text,
        created_at=self.state.now,
      )
    )
    count = place.rating_count + 1
    average = round((place.rating * place.rating_count + rating) / count, 2)
    place = self.state.places.update(place_id, rating=average, rating_count=count)
    return {**review.model_dump(), "place_rating": place.rating, "place_rating_count": count}
