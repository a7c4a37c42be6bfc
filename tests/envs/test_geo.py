from datetime import date, timedelta

import pytest

from envs._world import world
from envs.geo import FORECAST_DAYS, GeoService, forecast_id, haversine_km
from tests.contract import call_fails, call_ok

START = date(2026, 3, 2)


@pytest.fixture
def geo():
  return GeoService.create(seed=3)


def a_place(geo, city="Toronto"):
  return next(p for p in geo.state.places if p.city == city)


def unsaved(geo):
  return next(p for p in geo.state.places if p.id not in geo.state.saved_places)


def test_seeded_data_is_sized():
  a = GeoService.create(seed=5)
  venues = world(5).venues
  names = {(p.name, p.address) for p in a.state.places}
  assert all((v.name, v.address) in names for v in venues)
  assert len(a.state.places) > len(venues)
  assert len(a.state.forecasts) == FORECAST_DAYS * len(a.state.places)
  small = GeoService.create(seed=5, size=30).state
  assert len(small.places) == 30 and len(small.forecasts) == 30 * FORECAST_DAYS


def test_forecasts_are_stored_and_plausible():
  state = GeoService.create(seed=5).state
  snowy = {v.city: v.snowy for v in world(5).venues}
  by_city_day = {}
  for f in state.forecasts:
    place = state.places.get(f.place_id)
    assert f.id == forecast_id(place.id, f.date)
    assert START <= f.date < START + timedelta(days=FORECAST_DAYS)
    assert f.temp_low_c <= f.temp_high_c and 0 <= f.precip_probability <= 1
    if f.condition in ("snow", "sleet"):
      assert snowy[place.city]
    else:
      assert f.snow_cm == 0
    by_city_day.setdefault((place.city, f.date), set()).add(f.condition)
  assert all(len(c) == 1 for c in by_city_day.values())  # one city, one day, one sky
  conditions = {f.condition for f in state.forecasts}
  assert {"sunny", "cloudy", "rain", "snow"} <= conditions


def test_search_get_and_geocode(geo):
  page = call_ok(geo, "search_places", {"limit": 5})
  assert page["total"] == len(geo.state.places) and len(page["items"]) == 5
  lisbon = call_ok(geo, "search_places", {"city": "lisbon", "limit": 100})["items"]
  assert lisbon and all(p["city"] == "Lisbon" for p in lisbon)
  stations = call_ok(geo, "search_places", {"kind": "station", "limit": 100})["items"]
  assert len(stations) == 8 and all(p["kind"] == "station" for p in stations)
  place = a_place(geo)
  hits = call_ok(geo, "search_places", {"query": place.name, "city": "Toronto"})["items"]
  assert place.id in [p["id"] for p in hits]
  assert call_ok(geo, "get_place", {"place_id": place.id}) == place.model_dump()

  assert call_ok(geo, "geocode", {"address": place.address})["id"] == place.id
  full = f"{place.name}, {place.address}"  # the calendar's location format
  assert call_ok(geo, "geocode", {"address": full})["id"] == place.id


def test_reverse_geocode_and_nearby(geo):
  place = a_place(geo)
  near = call_ok(geo, "reverse_geocode", {"lat": place.lat + 0.0005, "lon": place.lon})
  assert near["id"] == place.id and 0 < near["distance_km"] < 0.1
  far = call_ok(geo, "reverse_geocode", {"lat": -90, "lon": 180})
  assert far["city"] == "Melbourne"

  around = call_ok(geo, "nearby_places", {"place_id": place.id, "radius_km": 20})
  same_city = [p for p in geo.state.places if p.city == place.city and p.id != place.id]
  assert {p["id"] for p in around} == {p.id for p in same_city}
  distances = [p["distance_km"] for p in around]
  assert distances == sorted(distances) and all(d <= 20 for d in distances)
  first = geo.state.places.get(around[0]["id"])
  expected = haversine_km(place.lat, place.lon, first.lat, first.lon)
  assert around[0]["distance_km"] == pytest.approx(expected, abs=1e-3)
  default = call_ok(geo, "nearby_places", {"place_id": place.id})
  assert all(p["distance_km"] <= 2.0 for p in default)
  kind = around[0]["kind"]
  only = call_ok(geo, "nearby_places", {"place_id": place.id, "radius_km": 20, "kind": kind})
  assert only and all(p["kind"] == kind for p in only)


def test_forecasts(geo):
  place = a_place(geo, "Lisbon")
  day = START + timedelta(days=4)
  got = call_ok(geo, "get_forecast", {"place_id": place.id, "date": day.isoformat()})
  stored = geo.state.forecasts.get(forecast_id(place.id, day))
  assert got == stored.model_dump(mode="json") and got["date"] == "2026-03-06"
  span = call_ok(
    geo, "get_forecast_range", {"place_id": place.id, "start_date": "2026-03-02", "days": 14}
  )
  assert [f["date"] for f in span] == [(START + timedelta(days=d)).isoformat() for d in range(14)]
  assert len(call_ok(geo, "get_forecast_range", {"place_id": place.id, "start_date": day})) == 3
  # forecasts are stored records: a patch is what the tools report
  geo.state.forecasts.update(stored.id, condition="snow", snow_cm=4.0)
  got = call_ok(geo, "get_forecast", {"place_id": place.id, "date": day.isoformat()})
  assert (got["condition"], got["snow_cm"]) == ("snow", 4.0)


def test_saved_places(geo):
  before = call_ok(geo, "list_saved_places")
  assert len(before) == 2 and all(s["place"]["id"] == s["place_id"] for s in before)
  place = unsaved(geo)
  saved = call_ok(geo, "save_place", {"place_id": place.id, "label": "Home"})
  assert saved == {"id": place.id, "place_id": place.id, "label": "Home"}
  listed = call_ok(geo, "list_saved_places")
  assert len(listed) == 3 and any(s["label"] == "Home" for s in listed)
  removed = call_ok(geo, "remove_saved_place", {"place_id": place.id})
  assert removed["label"] == "Home" and place.id not in geo.state.saved_places


def test_weather_alerts(geo):
  place = a_place(geo, "Lisbon")
  rainy = sorted(
    f.date.isoformat()
    for f in geo.state.forecasts
    if f.place_id == place.id and f.condition == "rain"
  )
  alert = call_ok(geo, "create_weather_alert", {"place_id": place.id, "condition": "rain"})
  assert alert["active"] and alert["condition"] == "rain" and alert["matching_dates"] == rainy
  assert geo.state.alerts.get(alert["id"]).place_id == place.id
  listed = call_ok(geo, "list_alerts")
  assert len(listed) == 3 and listed[-1]["id"] == alert["id"]
  assert all(a["matching_dates"] == [] for a in listed if not a["active"])
  cancelled = call_ok(geo, "cancel_weather_alert", {"alert_id": alert["id"]})
  assert not cancelled["active"] and not geo.state.alerts.get(alert["id"]).active
  again = call_ok(geo, "create_weather_alert", {"place_id": place.id, "condition": "rain"})
  assert again["id"] != alert["id"]


def test_error_paths_are_atomic(geo):
  place = a_place(geo)
  pid = place.id
  saved = next(iter(geo.state.saved_places))
  active = next(a for a in geo.state.alerts if a.active)
  inactive = next(a for a in geo.state.alerts if not a.active)
  # missing, ill-typed and out-of-range arguments
  call_fails(geo, "get_place", {}, 400, "place_id")
  call_fails(geo, "get_place", {"place_id": 7}, 400, "place_id", "string")
  call_fails(geo, "search_places", {"kind": "bar"}, 400, "kind", "'cafe'")
  call_fails(geo, "search_places", {"limit": 101}, 400, "limit")
  call_fails(geo, "geocode", {}, 400, "address")
  call_fails(geo, "geocode", {"address": ""}, 400, "address")
  call_fails(geo, "reverse_geocode", {"lat": 91, "lon": 0}, 400, "lat")
  call_fails(geo, "reverse_geocode", {"lat": 0, "lon": -180.5}, 400, "lon")
  call_fails(geo, "reverse_geocode", {"lat": "north", "lon": 0}, 400, "lat")
  call_fails(geo, "reverse_geocode", {"lat": 10}, 400, "lon")
  call_fails(geo, "nearby_places", {"place_id": pid, "radius_km": 0}, 400, "radius_km")
  call_fails(geo, "nearby_places", {"place_id": pid, "radius_km": 500}, 400, "radius_km")
  call_fails(geo, "get_forecast", {"place_id": pid}, 400, "date")
  call_fails(geo, "get_forecast", {"place_id": pid, "date": "tomorrow"}, 400, "date")
  args = {"place_id": pid, "start_date": "2026-03-02"}
  call_fails(geo, "get_forecast_range", {**args, "days": 0}, 400, "days")
  call_fails(geo, "get_forecast_range", {**args, "days": 15}, 400, "days")
  call_fails(geo, "save_place", {"place_id": pid, "label": ""}, 400, "label")
  call_fails(geo, "create_weather_alert", {"place_id": pid, "condition": "hail"}, 400, "condition")
  call_fails(geo, "list_alerts", {"x": 1}, 400, "unknown argument")
  # unknown ids, addresses and days
  for tool in ("get_place", "nearby_places", "remove_saved_place"):
    call_fails(geo, tool, {"place_id": "plc_nope"}, 404, "plc_nope")
  call_fails(geo, "get_forecast", {"place_id": "plc_nope", "date": "2026-03-03"}, 404, "plc_nope")
  call_fails(geo, "get_forecast_range", {**args, "place_id": "plc_nope"}, 404, "plc_nope")
  call_fails(geo, "save_place", {"place_id": "plc_nope", "label": "x"}, 404, "plc_nope")
  call_fails(geo, "create_weather_alert", {"place_id": "plc_nope", "condition": "rain"}, 404)
  call_fails(geo, "cancel_weather_alert", {"alert_id": "alrt_nope"}, 404, "alrt_nope")
  call_fails(geo, "geocode", {"address": "1 Rue de Rivoli, Paris"}, 404, "Rue de Rivoli")
  call_fails(geo, "get_forecast", {"place_id": pid, "date": "2026-03-16"}, 404, "2026-03-16")
  call_fails(geo, "get_forecast", {"place_id": pid, "date": "2026-03-01"}, 404, "2026-03-01")
  call_fails(
    geo, "get_forecast_range", {**args, "start_date": "2026-03-10", "days": 7}, 404, "2026-03-16"
  )
  call_fails(geo, "remove_saved_place", {"place_id": unsaved(geo).id}, 404, "not among")
  # conflicts
  call_fails(geo, "save_place", {"place_id": saved.id, "label": "x"}, 409, "already saved")
  call_fails(
    geo,
    "create_weather_alert",
    {"place_id": active.place_id, "condition": active.condition},
    409,
    active.id,
  )
  call_fails(geo, "cancel_weather_alert", {"alert_id": inactive.id}, 409, "already cancelled")
  call_fails(geo, "no_such_tool", {}, 404, "get_forecast")
