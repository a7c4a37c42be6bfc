from datetime import datetime, timedelta

import pytest

from envs._world import world
from envs.maps import DETOUR, MapsService, congestion, haversine_km
from tests.contract import call_fails, call_ok

SEED = 3


@pytest.fixture
def mp():
  return MapsService.create(seed=SEED)


def places(mp, **attrs):
  return sorted(
    (p for p in mp.state.places if all(getattr(p, k) == v for k, v in attrs.items())),
    key=lambda p: p.id,
  )


def airport(mp, city):
  return places(mp, category="airport", city=city)[0]


def in_city(mp, city, category=None):
  return [p for p in places(mp, city=city) if category in (None, p.category)]


def user():
  return world(SEED).people[0].email


def test_seeded_data_is_sized():
  a = MapsService.create(seed=5)
  st, w = a.state, world(5)
  cats = {p.category for p in st.places}
  assert cats == {
    "restaurant",
    "cafe",
    "bar",
    "hotel",
    "airport",
    "office",
    "museum",
    "park",
    "library",
    "venue",
  }
  assert 60 <= len(st.places) <= 120 and len(st.lists) == 3 and len(st.reviews) > 40
  names = {p.name for p in st.places}
  assert all(v.name in names for v in w.venues)  # the shared world's venues are places here
  assert all(f"{c.name} HQ" in names for c in w.customers)
  mine = [r for r in st.reviews if r.author == w.people[0].email]
  assert mine and len({r.place_id for r in mine}) == len(mine)
  pairs = [(r.place_id, r.author) for r in st.reviews]
  assert len(pairs) == len(set(pairs))  # nobody reviewed a place twice
  assert all(set(lst.place_ids) <= set(st.places.ids()) for lst in st.lists)
  assert len(MapsService.create(seed=5, size=30).state.places) == 30
  assert len(MapsService.create(seed=5, size=150).state.places) == 150


def test_search_places(mp):
  page = call_ok(mp, "search_places", {"limit": 10})
  assert page["total"] == len(mp.state.places) and page["next_offset"] == 10
  ratings = [p["rating"] for p in page["items"]]
  assert ratings == sorted(ratings, reverse=True)
  food = call_ok(mp, "search_places", {"category": "restaurant", "city": "LISBON"})["items"]
  assert food and all(p["category"] == "restaurant" and p["city"] == "Lisbon" for p in food)
  good = call_ok(mp, "search_places", {"min_rating": 4.5, "limit": 100})["items"]
  assert good and all(p["rating"] >= 4.5 for p in good)
  hq = call_ok(mp, "search_places", {"query": "pearson airport"})["items"]
  assert [p["name"] for p in hq] == ["Toronto Pearson International Airport"]
  # restaurants either close on Mondays or open at noon: none is open Monday at 10:00
  monday = call_ok(
    mp, "search_places", {"category": "restaurant", "open_at": "2026-03-02T10:00:00"}
  )
  assert monday["total"] == 0
  late = call_ok(mp, "search_places", {"open_at": "2026-03-05T01:00:00", "limit": 100})["items"]
  assert {p["category"] for p in late} == {"bar", "hotel", "airport"}


def test_get_place_and_reviews(mp):
  reviewed = max(
    mp.state.places, key=lambda p: (sum(r.place_id == p.id for r in mp.state.reviews), p.id)
  )
  got = call_ok(mp, "get_place", {"place_id": reviewed.id})
  assert got["name"] == reviewed.name and got["hours"] and got["phone"].startswith("+")
  recent = got["recent_reviews"]
  assert 1 <= len(recent) <= 3
  assert [r["created_at"] for r in recent] == sorted(
    (r["created_at"] for r in recent), reverse=True
  )
  listed = call_ok(mp, "list_reviews", {"place_id": reviewed.id, "limit": 100})
  assert listed["total"] == sum(r.place_id == reviewed.id for r in mp.state.reviews)
  mine = call_ok(mp, "list_reviews", {"author": user().upper()})["items"]
  assert mine and all(r["author"] == user() for r in mine)
  high = call_ok(mp, "list_reviews", {"min_rating": 5, "limit": 100})["items"]
  assert high and all(r["rating"] == 5 for r in high)


def test_directions_are_computed_deterministically(mp):
  origin = next(p for p in in_city(mp, "Toronto") if p.category != "airport")
  dest = airport(mp, "Toronto")
  km = haversine_km(origin.lat, origin.lon, dest.lat, dest.lon)
  rush = call_ok(
    mp,
    "get_directions",
    {"origin": origin.id, "destination": "Pearson Airport", "depart_at": "2026-03-03T08:00:00"},
  )
  assert rush["destination"]["id"] == dest.id and rush["mode"] == "driving"
  assert rush["distance_km"] == round(km * DETOUR["driving"], 2)
  assert rush["traffic_factor"] == congestion("Toronto", datetime(2026, 3, 3, 8)) > 1.5
  night = call_ok(
    mp,
    "get_directions",
    {"origin": origin.address, "destination": dest.id, "depart_at": "2026-03-03T23:00:00"},
  )
  assert night["origin"]["id"] == origin.id and night["traffic_factor"] == 1.0
  assert rush["duration_min"] > night["duration_min"] > 0
  arrive = datetime.fromisoformat(rush["depart_at"]) + timedelta(minutes=rush["duration_min"])
  assert rush["arrive_at"] == arrive.isoformat()
  walk = call_ok(
    mp, "get_directions", {"origin": origin.id, "destination": dest.id, "mode": "walking"}
  )
  bike = call_ok(
    mp, "get_directions", {"origin": origin.id, "destination": dest.id, "mode": "cycling"}
  )
  bus = call_ok(
    mp, "get_directions", {"origin": origin.id, "destination": dest.id, "mode": "transit"}
  )
  assert walk["duration_min"] > bike["duration_min"] > night["duration_min"]
  assert walk["duration_min"] == round(km * DETOUR["walking"] / 4.8 * 60)
  assert bus["distance_km"] == round(km * DETOUR["transit"], 2)
  # default departure is the service's now
  assert walk["depart_at"] == mp.state.now.isoformat()
  # a border crossing by car works inside one continent
  cross = call_ok(
    mp, "get_directions", {"origin": dest.id, "destination": airport(mp, "Denver").id}
  )
  assert cross["distance_km"] > 2000


def test_distance_matrix(mp):
  tor, den, osl = airport(mp, "Toronto"), airport(mp, "Denver"), airport(mp, "Oslo")
  got = call_ok(
    mp,
    "distance_matrix",
    {"origins": [tor.id, osl.id], "destinations": [tor.id, den.id], "mode": "driving"},
  )
  assert [o["id"] for o in got["origins"]] == [tor.id, osl.id]
  (same, far), (ocean, ocean2) = got["rows"]
  assert same == {"status": "ok", "distance_km": 0.0, "duration_min": 0}
  assert far["status"] == "ok" and far["distance_km"] > 2000
  assert ocean["status"] == ocean2["status"] == "no_route" and "continents" in ocean["reason"]
  walk = call_ok(
    mp, "distance_matrix", {"origins": [tor.id], "destinations": [den.id], "mode": "walking"}
  )
  assert walk["rows"][0][0]["status"] == "no_route" and "border" in walk["rows"][0][0]["reason"]


def test_opening_hours(mp):
  bar = places(mp, category="bar")[0]  # open Wednesday to Sunday, 17:00 to 02:00
  closed = call_ok(mp, "is_open_at", {"place_id": bar.id, "at": "2026-03-02T20:00:00"})
  assert closed["open"] is False and closed["hours_that_day"] is None
  assert closed["opens_at"] == "2026-03-04T17:00:00"
  late = call_ok(mp, "is_open_at", {"place_id": bar.id, "at": "2026-03-05T01:30:00"})
  assert late["open"] and late["closes_at"] == "2026-03-05T02:00:00"
  after = call_ok(mp, "is_open_at", {"place_id": bar.id, "at": "2026-03-05T02:00:00"})
  assert not after["open"] and after["opens_at"] == "2026-03-05T17:00:00"
  sunday_night = call_ok(mp, "is_open_at", {"place_id": bar.id, "at": "2026-03-09T01:00:00"})
  assert sunday_night["open"]  # Sunday's hours run past midnight into Monday
  air = call_ok(mp, "is_open_at", {"place_id": airport(mp, "Oslo").id})
  assert air["open"] and air["closes_at"] is None and air["at"] == mp.state.now.isoformat()
  office = places(mp, category="office")[0]
  weekend = call_ok(mp, "is_open_at", {"place_id": office.id, "at": "2026-03-07T12:00:00"})
  assert not weekend["open"] and weekend["opens_at"] == "2026-03-09T08:30:00"


def test_nearby(mp):
  here = airport(mp, "Lisbon")
  near = call_ok(mp, "nearby", {"place_id": here.id, "radius_km": 20})
  assert near and all(p["distance_km"] <= 20 and p["id"] != here.id for p in near)
  assert [p["distance_km"] for p in near] == sorted(p["distance_km"] for p in near)
  assert all(p["city"] == "Lisbon" for p in near)
  cafes = call_ok(mp, "nearby", {"place_id": here.id, "radius_km": 20, "category": "cafe"})
  assert all(p["category"] == "cafe" for p in cafes)
  assert len(call_ok(mp, "nearby", {"place_id": here.id, "radius_km": 50, "limit": 2})) == 2
  assert call_ok(mp, "nearby", {"place_id": here.id, "radius_km": 0.001}) == []


def test_lists(mp):
  lists = call_ok(mp, "list_lists")
  assert [x["name"] for x in lists] == ["Favourites", "Team offsite ideas", "Want to go"]
  assert all(len(x["places"]) == len(x["place_ids"]) for x in lists)
  new = call_ok(mp, "create_list", {"name": "Lisbon trip", "description": "April visit"})
  assert new["owner"] == user() and new["place_ids"] == [] and new["id"] in mp.state.lists
  place = in_city(mp, "Lisbon")[0]
  saved = call_ok(mp, "save_place_to_list", {"list_id": new["id"], "place_id": place.id})
  assert saved["place_ids"] == [place.id]
  assert mp.state.lists.get(new["id"]).place_ids == (place.id,)
  shown = next(x for x in call_ok(mp, "list_lists") if x["id"] == new["id"])
  assert shown["places"][0]["name"] == place.name
  call_ok(mp, "remove_place_from_list", {"list_id": new["id"], "place_id": place.id})
  assert mp.state.lists.get(new["id"]).place_ids == ()


def test_add_review_updates_rating(mp):
  mine = {r.place_id for r in mp.state.reviews if r.author == user()}
  # the least-rated place, so one review visibly moves its average
  place = min((p for p in places(mp) if p.id not in mine), key=lambda p: (p.rating_count, p.id))
  got = call_ok(mp, "add_review", {"place_id": place.id, "rating": 1, "text": "Cold coffee."})
  assert got["author"] == user() and got["rating"] == 1
  after = mp.state.places.get(place.id)
  assert after.rating_count == place.rating_count + 1 == got["place_rating_count"]
  expected = round((place.rating * place.rating_count + 1) / (place.rating_count + 1), 2)
  assert after.rating == expected == got["place_rating"] and after.rating < place.rating
  newest = call_ok(mp, "list_reviews", {"place_id": place.id})["items"][0]
  assert newest["id"] == got["id"] and mp.state.reviews.get(got["id"]).text == "Cold coffee."


def test_error_paths_are_atomic(mp):
  tor, osl = airport(mp, "Toronto"), airport(mp, "Oslo")
  lst = next(iter(mp.state.lists))
  # missing / ill-typed arguments
  call_fails(mp, "get_place", {}, 400, "place_id")
  call_fails(mp, "get_place", {"place_id": 3}, 400, "place_id", "string")
  call_fails(mp, "get_directions", {"origin": tor.id}, 400, "destination")
  call_fails(
    mp, "get_directions", {"origin": tor.id, "destination": osl.id, "mode": "flying"}, 400, "mode"
  )
  call_fails(mp, "get_directions", {"origin": tor.id, "destination": osl.id, "depart_at": "x"}, 400)
  call_fails(mp, "search_places", {"category": "spa"}, 400, "category")
  call_fails(mp, "search_places", {"min_rating": 6}, 400, "min_rating")
  call_fails(mp, "nearby", {"place_id": tor.id, "radius_km": 0}, 400, "radius_km")
  call_fails(mp, "nearby", {"place_id": tor.id, "radius_km": 500}, 400, "radius_km")
  call_fails(mp, "distance_matrix", {"origins": [], "destinations": [tor.id]}, 400, "origins")
  call_fails(
    mp, "distance_matrix", {"origins": [tor.id] * 11, "destinations": [tor.id]}, 400, "origins"
  )
  call_fails(mp, "list_reviews", {"author": "not-an-email"}, 400, "author")
  call_fails(mp, "create_list", {"name": ""}, 400, "name")
  # 400 rules
  for stars in (0, 6):
    call_fails(mp, "add_review", {"place_id": tor.id, "rating": stars, "text": "x"}, 400, "rating")
  call_fails(mp, "add_review", {"place_id": tor.id, "rating": 4.5, "text": "x"}, 400, "rating")
  call_fails(mp, "add_review", {"place_id": tor.id, "rating": 4, "text": ""}, 400, "text")
  call_fails(
    mp, "get_directions", {"origin": tor.id, "destination": tor.address}, 400, "same place"
  )
  # unknown ids and addresses
  call_fails(mp, "get_place", {"place_id": "plc_x"}, 404, "plc_x")
  call_fails(mp, "is_open_at", {"place_id": "plc_x"}, 404, "plc_x")
  call_fails(mp, "nearby", {"place_id": "plc_x"}, 404, "plc_x")
  call_fails(mp, "list_reviews", {"place_id": "plc_x"}, 404, "plc_x")
  call_fails(mp, "add_review", {"place_id": "plc_x", "rating": 3, "text": "x"}, 404, "plc_x")
  call_fails(
    mp, "get_directions", {"origin": "plc_x", "destination": tor.id}, 404, "origin", "plc_x"
  )
  call_fails(
    mp, "get_directions", {"origin": tor.id, "destination": "Atlantis Pier"}, 404, "Atlantis Pier"
  )
  call_fails(mp, "distance_matrix", {"origins": [tor.id], "destinations": ["zzz"]}, 404, "zzz")
  call_fails(mp, "save_place_to_list", {"list_id": "lst_x", "place_id": tor.id}, 404, "lst_x")
  call_fails(mp, "save_place_to_list", {"list_id": lst.id, "place_id": "plc_x"}, 404, "plc_x")
  call_fails(mp, "remove_place_from_list", {"list_id": "lst_x", "place_id": tor.id}, 404, "lst_x")
  outside = next(p.id for p in places(mp) if p.id not in lst.place_ids)
  call_fails(mp, "remove_place_from_list", {"list_id": lst.id, "place_id": outside}, 404, outside)
  # 409 business rules
  call_fails(
    mp,
    "get_directions",
    {"origin": tor.id, "destination": airport(mp, "Denver").id, "mode": "walking"},
    409,
    "border",
  )
  call_fails(mp, "get_directions", {"origin": tor.id, "destination": osl.id}, 409, "continents")
  call_fails(
    mp,
    "get_directions",
    {"origin": tor.id, "destination": osl.id, "mode": "transit"},
    409,
    "fly",
  )
  call_fails(mp, "create_list", {"name": lst.name.upper()}, 409, "already exists")
  call_fails(
    mp, "save_place_to_list", {"list_id": lst.id, "place_id": lst.place_ids[0]}, 409, "already"
  )
  reviewed = next(r.place_id for r in mp.state.reviews if r.author == user())
  call_fails(
    mp, "add_review", {"place_id": reviewed, "rating": 5, "text": "Again!"}, 409, "already reviewed"
  )
