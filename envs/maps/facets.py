"""Maps facets: places, reviews, opening hours and walking routes as sources; saved lists and
reviews as sinks; the drop-a-stop-if-bad-weather revisits of a saved walking route."""

from __future__ import annotations

from datetime import datetime, timedelta
from itertools import pairwise

from compoworld.tasks.authoring import AuthorContext, AuthoringError
from compoworld.tasks.facets import Found, Revisit, Sink, Value, facets
from compoworld.tasks.rubric import all_of, exists, record_is, where
from envs._facets_common import (
  found_one,
  found_people,
  found_time,
  iso,
  mentions,
  time_label,
  topic,
  user_email,
)
from envs._world import world
from envs.maps.state import haversine_km, travel

S = "maps"
#: Categories only the shared world's venues have in maps (their addresses are known to the
#: other location services too).
SPOTS = {"venue": "event venue", "library": "library", "park": "park"}


def _places(ctx: AuthorContext, **attrs) -> list:
  state = ctx.state(S)
  return sorted(
    (p for p in state.places if all(getattr(p, k) == v for k, v in attrs.items())),
    key=lambda p: p.id,
  )


def _venues(ctx: AuthorContext, city: str | None = None) -> list:
  """The shared world's venues as maps places."""
  known = {(v.name, v.address) for v in world(ctx.env.seed).venues}
  return [
    p for p in _places(ctx) if (p.name, p.address) in known and (city is None or p.city == city)
  ]


def _find(ctx: AuthorContext, place) -> dict:
  """The agent's way to a named place: search its name in its city."""
  hits = ctx.call(S, "search_places", query=place.name, city=place.city, limit=100)["items"]
  return next(h for h in hits if h["id"] == place.id)


def _at_address(ctx: AuthorContext, address) -> dict | None:
  """The place at exactly ``address``, found by searching for the address (None when maps
  has no place there, or several)."""
  if not isinstance(address, str) or not address.strip():
    return None
  if sum(p.address == address for p in ctx.state(S).places) != 1:
    return None
  hits = ctx.call(S, "search_places", query=address, limit=100)["items"]
  return next((h for h in hits if h["address"] == address), None)


def _place_id(ctx: AuthorContext, address) -> str:
  """The id of the place at ``address`` (the rubric names the record the agent must touch)."""
  return next((p.id for p in _places(ctx) if p.address == address), "")


def _put_list(ctx: AuthorContext, name: str, description: str, place_ids: list[str]) -> dict:
  created = ctx.state(S).now - timedelta(days=ctx.rng.randint(1, 9))
  ctx.put(
    S,
    "lists",
    {
      "id": ctx.fresh_id("lst"),
      "name": name,
      "description": description,
      "owner": user_email(ctx),
      "place_ids": place_ids,
      "created_at": iso(created),
      "updated_at": iso(created),
    },
  )
  return next(x for x in ctx.call(S, "list_lists") if x["name"] == name)


# --- sources -------------------------------------------------------------------------------


@facets.source(S, "location")
def best_rated_spot(ctx: AuthorContext) -> Found:
  """The top-rated library, park or event venue of a city (one clear winner)."""
  options = []
  for city in sorted({p.city for p in _venues(ctx)}):
    for category in SPOTS:
      ratings = sorted((p.rating for p in _places(ctx, city=city, category=category)), reverse=True)
      if ratings and (len(ratings) == 1 or ratings[0] > ratings[1]):
        options.append((city, category))
  city, category = ctx.choice(options)
  top = ctx.call(S, "search_places", category=category, city=city)["items"][0]
  return found_one(
    "location", f"the address of the best-rated {SPOTS[category]} in {city}", top["address"]
  )


@facets.source(S, "person.email")
def place_reviewers(ctx: AuthorContext) -> Found:
  """Colleagues who reviewed a venue; those who panned it are left out."""
  w, state, me = world(ctx.env.seed), ctx.state(S), user_email(ctx)
  # Not one the user reviewed: a review of theirs written earlier in this task would already be
  # in the rating this s0 edit bakes in, and replaying it would count it twice.
  mine = {r.place_id for r in state.reviews if r.author == me}
  place = ctx.choice([p for p in _venues(ctx) if p.id not in mine])
  authors = {r.author for r in state.reviews if r.place_id == place.id}
  pool = [p.email for p in w.people[2:] if p.email not in authors]
  stars = [ctx.choice((4, 5)), ctx.choice((4, 5)), ctx.choice((3, 4)), ctx.choice((1, 2))]
  stars += [ctx.choice((1, 2, 5))][: ctx.rng.randint(0, 1)]
  texts = {1: "Too noisy for a team event.", 2: "Cramped and hard to find.", 3: "Decent space."}
  for n, (email, rating) in enumerate(zip(ctx.rng.sample(pool, len(stars)), stars, strict=True)):
    ctx.put(
      S,
      "reviews",
      {
        "id": ctx.fresh_id("rev"),
        "place_id": place.id,
        "author": email,
        "rating": rating,
        "text": texts.get(rating, "Great space for our team meetup."),
        "created_at": iso(state.now - timedelta(days=3 + 4 * n, hours=ctx.rng.randint(0, 9))),
      },
    )
  total = place.rating * place.rating_count + sum(stars)
  count = place.rating_count + len(stars)
  ctx.update(S, "places", place.id, rating=round(total / count, 2), rating_count=count)
  hit = _find(ctx, place)
  reviews = ctx.call(S, "list_reviews", place_id=hit["id"], limit=100)["items"]
  liked = list(
    dict.fromkeys(r["author"] for r in reviews if r["rating"] >= 3 and r["author"] != me)
  )
  panned = [r["author"] for r in reviews if r["rating"] < 3 and r["author"] != me]
  noun = f"the people who reviewed {place.name} in {place.city}"
  return found_people(noun, liked, panned, "who gave it fewer than 3 stars")


@facets.source(S, "number")
def walking_legs(ctx: AuthorContext) -> Found:
  """A walking route saved as a list: the minutes of each leg, stop to stop."""
  first = ctx.choice(_venues(ctx))
  near = [
    p
    for p in _places(ctx, city=first.city)
    if p.id != first.id
    and p.category != "airport"
    and haversine_km(first.lat, first.lon, p.lat, p.lon) <= 5
  ]
  if len(near) < 2:
    raise AuthoringError("no_walk_nearby", first.city)
  stops = [first, *ctx.rng.sample(near, min(len(near), ctx.choice((2, 3))))]
  name = f"{topic(ctx).split()[0]} walking route"
  listed = _put_list(
    ctx, name, f"Stops for a walk around {first.city}, in order", [p.id for p in stops]
  )
  legs = []
  for a, b in zip(listed["place_ids"], listed["place_ids"][1:], strict=False):
    trip = ctx.call(S, "get_directions", origin=a, destination=b, mode="walking")
    legs.append(trip["duration_min"])
  return Found(
    "number",
    f'the walking time in minutes of each leg of my "{name}" list, from stop to stop',
    [Value(m, f"{m} min", m) for m in legs],
  )


@facets.source(S, "datetime")
def next_opening(ctx: AuthorContext) -> Found:
  """When a place that is closed now opens again (local time)."""
  svc = ctx.env.services[S]
  now = ctx.state(S).now
  closed = []
  for p in _places(ctx):
    if p.category in ("airport", "hotel", "office"):
      continue
    is_open, change = svc._open_at(p, now)
    if not is_open and change is not None and change >= now + timedelta(hours=2):
      closed.append(p)
  named = {}
  for p in closed:  # a name the user can say: unique in its city
    named.setdefault((p.name, p.city), []).append(p)
  place = ctx.choice([ps[0] for ps in named.values() if len(ps) == 1])
  hit = _find(ctx, place)
  status = ctx.call(S, "is_open_at", place_id=hit["id"])
  return found_time(f"when {place.name} in {place.city} next opens", status["opens_at"])


# --- lookups -------------------------------------------------------------------------------


@facets.lookup(S, "location", "location")
def nearest_spot(ctx: AuthorContext, found: Found) -> Found | None:
  here = _at_address(ctx, found.values[0].value)
  if here is None:
    return None
  around = ctx.call(S, "nearby", place_id=here["id"], radius_km=50, limit=100)
  spot = next((p for p in around if p["category"] in SPOTS), None)
  if spot is None:
    return None
  return found_one(
    "location",
    "the address of the nearest library, park or event venue to there",
    spot["address"],
    answer=f"The nearest one is {spot['name']} at {spot['address']}.",
    context=found.context,
  )


@facets.lookup(S, "location", "number")
def drive_from_airport(ctx: AuthorContext, found: Found) -> Found | None:
  here = _at_address(ctx, found.values[0].value)
  if here is None:
    return None
  default = (ctx.state(S).now + timedelta(days=1)).date().isoformat()
  day = found.context.get("date", default)
  airport = ctx.call(S, "search_places", category="airport", city=here["city"])["items"]
  if not airport:
    return None
  trip = ctx.call(
    S,
    "get_directions",
    origin=airport[0]["id"],
    destination=here["id"],
    mode="driving",
    depart_at=f"{day}T10:00:00",
  )
  minutes = trip["duration_min"]
  return Found(
    "number",
    f"how many minutes the drive from {airport[0]['name']} to there takes, leaving at 10:00 on "
    f"{day}",
    [Value(minutes, f"{minutes} minutes", minutes)],
    answer=f"The drive takes {minutes} minutes.",
  )


# --- sinks ---------------------------------------------------------------------------------


def _shortlist(ctx: AuthorContext) -> dict:
  name = f"{topic(ctx)} shortlist"
  return _put_list(ctx, name, "Places to consider", [])


def _save(ctx: AuthorContext, lst: dict, v: Value) -> None:
  place = _at_address(ctx, v.value)
  if place is None:
    raise AuthoringError("unknown_address", str(v.value))
  ctx.call(S, "save_place_to_list", list_id=lst["id"], place_id=place["id"])


facets.sink(
  S,
  "location",
  "save_to_list",
  prepare=_shortlist,
  act=_save,
  check=lambda ctx, lst, v: record_is(
    S, "lists", lst["id"], "place_ids", _place_id(ctx, v.value), "contains"
  ),
  phrase=lambda ctx, lst, obj: f'save the place at {obj} to my "{lst["name"]}" list in maps',
  text=lambda ctx, lst, v: f'The place at {v.label} is on the "{lst["name"]}" list.',
)


def _review_target(ctx: AuthorContext) -> dict:
  me = user_email(ctx)
  mine = {r.place_id for r in ctx.state(S).reviews if r.author == me}
  names = {}
  for p in _places(ctx):
    names.setdefault((p.name, p.city), []).append(p)
  options = [
    ps[0]
    for ps in names.values()
    if len(ps) == 1 and ps[0].id not in mine and ps[0].category in ("restaurant", "cafe", "venue")
  ]
  place = ctx.choice(options)
  hit = _find(ctx, place)
  return {"id": hit["id"], "name": place.name, "city": place.city, "stars": ctx.choice((4, 5))}


def _review(ctx: AuthorContext, t: dict, v: Value) -> None:
  ctx.call(S, "add_review", place_id=t["id"], rating=t["stars"], text=str(v.value))


facets.sink(
  S,
  "text",
  "review_place",
  prepare=_review_target,
  act=_review,
  check=lambda ctx, t, v: exists(
    S,
    "reviews",
    where("place_id", t["id"]),
    where("author", user_email(ctx)),
    where("rating", t["stars"]),
    mentions("text", v),
  ),
  phrase=lambda ctx, t, obj: (
    f"post {obj} as my {t['stars']}-star review of {t['name']} in {t['city']}"
  ),
  text=lambda ctx, t, v: f"{t['name']} has a {t['stars']}-star review from the user: {v.label}.",
  single=True,  # one review per place
)


# --- the revisits: an outing's first stop, dropped if bad weather is forecast there; then the
# new first stop, or the new time the walk reaches its last stop

#: When the outing sets off from its first stop.
SET_OFF = "10:00"


def _walk_end(ctx: AuthorContext, place_ids: list[str], start: str) -> str:
  """When a walk from stop to stop, leaving at ``start``, reaches the last stop (computed
  directly: the stale reading an agent would have made before the change)."""
  places, at = ctx.state(S).places, datetime.fromisoformat(start)
  for a, b in pairwise(place_ids):
    at = travel(places.get(a), places.get(b), "walking", at)["arrive_at"]
  return iso(at)


def _tour_first(ctx: AuthorContext) -> tuple[Found, dict]:
  city = ctx.choice(sorted({p.city for p in _venues(ctx)}))
  stops = _venues(ctx, city)
  if len(stops) < 2:
    raise AuthoringError("too_few_stops", city)
  ctx.rng.shuffle(stops)
  day = (ctx.state(S).now + timedelta(days=ctx.rng.randint(2, 6))).date().isoformat()
  name = f"{topic(ctx).split()[0]} team outing"
  description = f"Stops for the team outing in {city} on {day}, walking from {SET_OFF}"
  listed = _put_list(ctx, name, description, [p.id for p in stops])
  first, start = listed["places"][0], f"{day}T{SET_OFF}:00"
  found = found_one(
    "location", f'the first stop on my "{name}" list', first["address"], context={"date": day}
  )
  return found, {
    **listed,
    "first": first,
    "rest": listed["place_ids"][1:],
    "day": day,
    "start": start,
    "end": _walk_end(ctx, listed["place_ids"], start),
  }


def _drop_check(ctx: AuthorContext, lst: dict, v: Value) -> dict:
  return all_of(
    record_is(S, "lists", lst["id"], "place_ids", lst["first"]["id"], "not_contains"),
    *[record_is(S, "lists", lst["id"], "place_ids", p, "contains") for p in lst["rest"]],
  )


def _tour_second(ctx: AuthorContext, lst: dict) -> Found:
  now = next(x for x in ctx.call(S, "list_lists") if x["id"] == lst["id"])
  first = now["places"][0]
  return found_one(
    "location",
    f'the new first stop on the "{lst["name"]}" list',
    first["address"],
    stale=lst["first"]["address"],
    context={"date": lst["day"]},
  )


def _tour_end_second(ctx: AuthorContext, lst: dict) -> Found:
  now = next(x for x in ctx.call(S, "list_lists") if x["id"] == lst["id"])
  if len(now["place_ids"]) < 2:
    raise AuthoringError("too_few_stops", lst["name"])
  at = lst["start"]
  for a, b in pairwise(now["place_ids"]):
    trip = ctx.call(S, "get_directions", origin=a, destination=b, mode="walking", depart_at=at)
    at = trip["arrive_at"]
  return Found(
    "datetime",
    f'when the outing now reaches the last stop on the "{lst["name"]}" list, walking from stop '
    f"to stop from {SET_OFF} on {lst['day']}",
    [Value(at, time_label(at))],
    stale=lst["end"],
    answer=f"The outing now reaches its last stop at {time_label(at)}.",
    context={"date": lst["day"]},
  )


_DROP = Sink(
  S,
  "weather.condition",
  "drop_first_stop",
  prepare=lambda ctx: None,
  act=lambda ctx, lst, v: ctx.call(
    S, "remove_place_from_list", list_id=lst["id"], place_id=lst["first"]["id"]
  ),
  check=_drop_check,
  phrase=lambda ctx, lst, obj: "take that stop off the list and keep the other stops",
  text=lambda ctx, lst, v: (
    f'{lst["first"]["name"]} is off the "{lst["name"]}" list; the other stops remain.'
  ),
)

for kind_after, name, second in (
  ("location", "drop_stop_if_bad_weather", _tour_second),
  ("datetime", "shorten_outing_if_bad_weather", _tour_end_second),
):
  facets.add_revisit(
    Revisit(
      S,
      kind="location",
      kind_in="weather.condition",
      kind_after=kind_after,
      name=name,
      first=_tour_first,
      change=_DROP,
      second=second,
    )
  )
