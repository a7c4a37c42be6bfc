"""One seeded world shared by every service: the same people, organisations and venues.

Services built with the same seed see the same people, so a calendar attendee, a mail
correspondent and a forum user can be one person with one email address.
"""

from __future__ import annotations

import dataclasses
import functools
import random

FIRST = (
  "Ava",
  "Liam",
  "Maya",
  "Noah",
  "Zara",
  "Ethan",
  "Priya",
  "Lucas",
  "Amara",
  "Mateo",
  "Hana",
  "Oliver",
  "Sofia",
  "Kenji",
  "Leila",
  "Diego",
  "Chloe",
  "Arjun",
  "Nora",
  "Samuel",
  "Ines",
  "Tariq",
  "Grace",
  "Jonas",
  "Mei",
  "Omar",
  "Elena",
  "Felix",
  "Yuki",
  "Rosa",
  "Daniel",
  "Aisha",
  "Hugo",
  "Freya",
  "Ravi",
  "Clara",
  "Mohammed",
  "Lena",
  "Tomas",
  "Isla",
)
LAST = (
  "Okafor",
  "Lindqvist",
  "Patel",
  "Nakamura",
  "Garcia",
  "Chen",
  "Moreau",
  "Kowalski",
  "Haddad",
  "Silva",
  "Brennan",
  "Novak",
  "Fischer",
  "Mensah",
  "Rossi",
  "Tanaka",
  "Dubois",
  "Andersen",
  "Kim",
  "Ibrahim",
  "Walsh",
  "Petrov",
  "Costa",
  "Yilmaz",
  "Murphy",
  "Larsen",
  "Santos",
  "Weber",
  "Osei",
  "Romero",
)
DEPARTMENTS = ("Engineering", "Sales", "Marketing", "Finance", "Support", "Operations", "People")
TITLES = {
  "Engineering": ("Software Engineer", "Staff Engineer", "Engineering Manager", "SRE"),
  "Sales": ("Account Executive", "Sales Manager", "SDR"),
  "Marketing": ("Marketing Manager", "Content Lead", "Growth Analyst"),
  "Finance": ("Accountant", "Controller", "FP&A Analyst"),
  "Support": ("Support Specialist", "Support Lead"),
  "Operations": ("Operations Manager", "Logistics Coordinator"),
  "People": ("HR Partner", "Recruiter", "People Ops Lead"),
}
COMPANIES = (
  ("Northwind Labs", "northwind.io"),
  ("Bluefin Analytics", "bluefin.ai"),
  ("Cedar & Co", "cedarco.com"),
  ("Helios Freight", "heliosfreight.com"),
  ("Quarry Health", "quarryhealth.org"),
  ("Marigold Foods", "marigold.co"),
)
#: (city, country, lat, lon, winter-snow-prone)
CITIES = (
  ("Toronto", "Canada", 43.65, -79.38, True),
  ("Oslo", "Norway", 59.91, 10.75, True),
  ("Denver", "USA", 39.74, -104.99, True),
  ("Lisbon", "Portugal", 38.72, -9.14, False),
  ("Austin", "USA", 30.27, -97.74, False),
  ("Sapporo", "Japan", 43.06, 141.35, True),
  ("Melbourne", "Australia", -37.81, 144.96, False),
  ("Edinburgh", "UK", 55.95, -3.19, True),
)
VENUE_KINDS = ("Community Hall", "Library", "Makerspace", "Conference Centre", "Cafe", "Park")
STREETS = ("Maple St", "Harbour Rd", "King St", "Elm Ave", "Station Rd", "Market Sq", "Lake Dr")


@dataclasses.dataclass(frozen=True)
class Person:
  name: str
  email: str
  handle: str
  department: str
  title: str
  company: str
  city: str


@dataclasses.dataclass(frozen=True)
class Venue:
  name: str
  address: str
  city: str
  country: str
  lat: float
  lon: float
  snowy: bool


@dataclasses.dataclass(frozen=True)
class World:
  seed: int
  company: str
  domain: str
  people: tuple[Person, ...]
  venues: tuple[Venue, ...]


@functools.lru_cache(maxsize=64)
def world(seed: int, population: int = 60) -> World:
  """The world of ``seed``: one home company, ``population`` people, a few venues per city."""
  rng = random.Random(f"world:{seed}")
  company, domain = rng.choice(COMPANIES)
  names = [(first, last) for first in FIRST for last in LAST]
  rng.shuffle(names)
  people = []
  for first, last in names[:population]:
    dept = rng.choice(DEPARTMENTS)
    people.append(
      Person(
        name=f"{first} {last}",
        email=f"{first}.{last}@{domain}".lower(),
        handle=f"{first.lower()}_{last.lower()[:3]}{rng.randint(1, 99)}",
        department=dept,
        title=rng.choice(TITLES[dept]),
        company=company,
        city=rng.choice(CITIES)[0],
      )
    )
  venues = []
  for city, country, lat, lon, snowy in CITIES:
    for kind in rng.sample(VENUE_KINDS, 3):
      venues.append(
        Venue(
          name=f"{rng.choice(LAST)} {kind}",
          address=f"{rng.randint(2, 480)} {rng.choice(STREETS)}, {city}",
          city=city,
          country=country,
          lat=round(lat + rng.uniform(-0.05, 0.05), 4),
          lon=round(lon + rng.uniform(-0.05, 0.05), 4),
          snowy=snowy,
        )
      )
  return World(seed, company, domain, tuple(people), tuple(venues))
