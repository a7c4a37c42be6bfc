"""One seeded world shared by every service: the same people, organisations and venues.

Services built with the same seed see the same people, so a calendar attendee, a mail
correspondent and a forum user can be one person with one email address.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import random
from typing import Any

from compoworld.runtime.envelope import NotFound

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
#: The kinds of venue in the world (a venue's name ends with its kind), each with the category
#: it has as a place in the services that list places (geo, maps).
VENUE_CATEGORY = {
  "Community Hall": "venue",
  "Library": "library",
  "Makerspace": "venue",
  "Conference Centre": "venue",
  "Cafe": "cafe",
  "Park": "park",
}
VENUE_KINDS = tuple(VENUE_CATEGORY)
STREETS = ("Maple St", "Harbour Rd", "King St", "Elm Ave", "Station Rd", "Market Sq", "Lake Dr")


@dataclasses.dataclass(frozen=True)
class Person:
  """An employee of the home company (also a user of its mail, chat, forum...)."""

  name: str
  email: str
  handle: str
  department: str
  title: str
  company: str
  city: str
  employee_id: str = ""
  manager_email: str | None = None  # None for the CEO; the org chart is a tree
  phone: str = ""
  hired: str = ""  # ISO date


@dataclasses.dataclass(frozen=True)
class Contact:
  """A person at a customer or vendor company."""

  name: str
  email: str
  title: str
  phone: str


@dataclasses.dataclass(frozen=True)
class Customer:
  """A customer account: the same company in the CRM, invoicing, support and shipping."""

  name: str
  domain: str
  industry: str
  city: str
  country: str
  tier: str  # "enterprise" | "mid-market" | "smb"
  contacts: tuple[Contact, ...]


@dataclasses.dataclass(frozen=True)
class Product:
  sku: str
  name: str
  category: str
  unit_price: float
  weight_kg: float


@dataclasses.dataclass(frozen=True)
class Vendor:
  name: str
  domain: str
  category: str
  contact: Contact


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
  people: tuple[Person, ...]  # people[0] is the user the agent works for
  venues: tuple[Venue, ...]
  customers: tuple[Customer, ...] = ()
  products: tuple[Product, ...] = ()
  vendors: tuple[Vendor, ...] = ()
  currency: str = "USD"  # the home company's currency

  def person(self, email: str) -> Person | None:
    return next((p for p in self.people if p.email == email), None)

  def reports_of(self, email: str) -> list[Person]:
    return [p for p in self.people if p.manager_email == email]


def seeded(service: Any, seed: int) -> tuple[random.Random, World, Any]:
  """Where a service's data generator starts: a random stream of its own (seeded by its name and
  ``seed``, so that services draw independently), the shared world, and its empty state."""
  return random.Random(f"{service.name}:{seed}"), world(seed), service.State.empty(seed)


def venue_category(name: str) -> str:
  """The place category ("venue", "library", "cafe" or "park") of the venue called ``name``."""
  return next(c for kind, c in VENUE_CATEGORY.items() if name.endswith(kind))


def haversine_km(lat1: float, lon1: float, lat2: float, lon2: float) -> float:
  """Great-circle distance in kilometres."""
  p1, p2 = math.radians(lat1), math.radians(lat2)
  dp, dl = p2 - p1, math.radians(lon2 - lon1)
  a = math.sin(dp / 2) ** 2 + math.cos(p1) * math.cos(p2) * math.sin(dl / 2) ** 2
  return 2 * 6371.0 * math.asin(min(1.0, math.sqrt(a)))


class WorldUser:
  """For a service used by one person: ``self.user`` is the email of the shared world's first
  person, whom every service of a seed serves (the agent acts as them: the default author,
  owner, assignee or sender)."""

  @property
  def user(self) -> str:
    return world(self.state.seed).people[0].email  # type: ignore[attr-defined]


def employee_email(seed: int, email: str, argument: str = "") -> str:
  """``email`` lower-cased, once it is the address of an employee of the world of ``seed``;
  anyone else is a 404 ``NotFound`` (naming the tool's ``argument``, when given)."""
  email = email.lower()
  if world(seed).person(email) is None:
    where = f"{argument}: " if argument else ""
    raise NotFound(f"{where}no employee with email '{email}'")
  return email


INDUSTRIES = ("Retail", "Logistics", "Healthcare", "Manufacturing", "Education", "Media", "Fintech")
CUSTOMER_NAMES = (
  "Acme Robotics",
  "Globex Retail",
  "Initech Health",
  "Umbrella Logistics",
  "Stark Fabrication",
  "Wayne Learning",
  "Pied Piper Media",
  "Hooli Pay",
  "Vandelay Imports",
  "Soylent Grocers",
  "Tyrell Motors",
  "Cyberdyne Clinics",
  "Wonka Confectionery",
  "Oscorp Labs",
  "Duff Beverages",
  "Gringotts Credit",
)
PRODUCTS = (
  ("Sensor Hub", "Hardware", 149.0, 0.4),
  ("Edge Gateway", "Hardware", 899.0, 2.1),
  ("Barcode Scanner", "Hardware", 219.0, 0.6),
  ("Label Printer", "Hardware", 349.0, 3.2),
  ("Thermal Labels (roll)", "Supplies", 12.5, 0.3),
  ("Shipping Boxes (25)", "Supplies", 38.0, 4.0),
  ("Analytics Seat (annual)", "Software", 480.0, 0.0),
  ("Support Plan Gold", "Services", 2400.0, 0.0),
  ("Onboarding Workshop", "Services", 1500.0, 0.0),
  ("Replacement Battery", "Hardware", 29.0, 0.2),
  ("Mounting Kit", "Hardware", 45.0, 1.1),
  ("Cable Pack", "Supplies", 18.0, 0.5),
)
VENDORS = (
  ("Apex Components", "Hardware"),
  ("Blue River Packaging", "Supplies"),
  ("Summit Freight", "Logistics"),
  ("Nimbus Cloud", "Software"),
  ("Keystone Office", "Supplies"),
)
CONTACT_TITLES = ("CTO", "Procurement Lead", "Operations Director", "Finance Manager", "IT Admin")


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
  return _business(seed, World(seed, company, domain, tuple(people), tuple(venues)))


def _phone(rng: random.Random) -> str:
  return f"+1-555-{rng.randint(100, 999)}-{rng.randint(1000, 9999)}"


def _contact(rng: random.Random, domain: str) -> Contact:
  first, last = rng.choice(FIRST), rng.choice(LAST)
  return Contact(
    name=f"{first} {last}",
    email=f"{first}.{last}@{domain}".lower(),
    title=rng.choice(CONTACT_TITLES),
    phone=_phone(rng),
  )


def _business(seed: int, w: World) -> World:
  """Adds the org chart, customers, products and vendors (a separate stream of draws, so the
  people and venues above stay what they were)."""
  rng = random.Random(f"world-business:{seed}")
  # Org chart: people[1] is the CEO; each department has a head reporting to the CEO; everyone
  # else reports to their department head (the user, people[0], included).
  ceo = w.people[1]
  heads: dict[str, Person] = {}
  for p in w.people[2:]:
    heads.setdefault(p.department, p)
  people = []
  for i, p in enumerate(w.people):
    if p is ceo:
      manager = None
    elif heads.get(p.department) is p:
      manager = ceo.email
    else:
      head = heads.get(p.department)
      manager = head.email if head is not None else ceo.email
    people.append(
      dataclasses.replace(
        p,
        title="CEO"
        if p is ceo
        else (f"Head of {p.department}" if heads.get(p.department) is p else p.title),
        employee_id=f"E{1001 + i}",
        manager_email=manager,
        phone=_phone(rng),
        hired=f"{rng.randint(2016, 2025)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
      )
    )
  customers = []
  for name in rng.sample(CUSTOMER_NAMES, 10):
    cdomain = name.lower().replace(" ", "") + ".com"
    city, country, *_ = rng.choice(CITIES)
    customers.append(
      Customer(
        name=name,
        domain=cdomain,
        industry=rng.choice(INDUSTRIES),
        city=city,
        country=country,
        tier=rng.choice(("enterprise", "mid-market", "smb")),
        contacts=tuple(_contact(rng, cdomain) for _ in range(rng.randint(2, 4))),
      )
    )
  products = tuple(
    Product(
      sku=f"{cat[:3].upper()}-{1000 + 37 * i + rng.randint(0, 30)}",
      name=name,
      category=cat,
      unit_price=price,
      weight_kg=weight,
    )
    for i, (name, cat, price, weight) in enumerate(PRODUCTS)
  )
  vendors = []
  for name, cat in VENDORS:
    vdomain = name.lower().replace(" ", "") + ".com"
    vendors.append(Vendor(name=name, domain=vdomain, category=cat, contact=_contact(rng, vdomain)))
  return dataclasses.replace(
    w, people=tuple(people), customers=tuple(customers), products=products, vendors=tuple(vendors)
  )
