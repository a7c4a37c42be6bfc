"""Docstore facets: contracts, the travel policy and product manuals as sources of customer
contacts, fees, per diems and SKUs; notes, tags and uploads as sinks. Documents are read the
way a person reads them: find the document, then read its pages until the fact turns up."""

from __future__ import annotations

import re
from datetime import timedelta

from compoworld.tasks.authoring import AuthorContext, AuthoringError
from compoworld.tasks.facets import Found, Value, facets
from compoworld.tasks.rubric import exists, record_is, where
from envs._facets_common import colleague, found_one, iso, since, topic
from envs._world import world
from envs.docstore.state import PER_DIEM, _contract, _prose, split_pages

S = "docstore"

_FEE = re.compile(r"annual fee of [A-Z]{3} ([\d,]+)")
_CONTACT = re.compile(r"Customer contact: [^(]+ \(([^)\s]+@[^)\s]+)\)")
_SKU = re.compile(r"\(([A-Z]{3}-\d+)\)")


def _rate(city: str) -> re.Pattern:
  return re.compile(rf"- {re.escape(city)}: [A-Z]{{3}} ([\d,.]+) per day")


def _document(ctx: AuthorContext, title: str, category: str | None = None) -> dict:
  """Finds a document by its title."""
  args = {"category": category} if category else {}
  hits = ctx.call(S, "list_documents", query=title, limit=100, **args)["items"]
  hit = next((d for d in hits if d["title"] == title), None)
  if hit is None:
    raise AuthoringError("document_not_found", title)
  return hit


def _read_until(ctx: AuthorContext, doc: dict, pattern: re.Pattern) -> re.Match:
  """Reads the document page by page until ``pattern`` turns up."""
  for page in range(1, doc["page_count"] + 1):
    text = " ".join(ctx.call(S, "read_page", document_id=doc["id"], page=page)["text"].split())
    found = pattern.search(text)
    if found:
      return found
  raise AuthoringError("fact_not_in_document", doc["title"])


def _contract_titles(ctx: AuthorContext) -> list[str]:
  return sorted(d.title for d in ctx.state(S).documents if d.category == "contract")


def _msa_title(name: str) -> str:
  return f"Master Services Agreement - {name}"


def _put_brief(ctx: AuthorContext) -> dict:
  """A one-page report of the scenario's own, owned by a colleague."""
  state, subject, owner = ctx.state(S), topic(ctx), colleague(ctx)
  did = ctx.fresh_id("doc")
  made = state.now - timedelta(days=ctx.rng.randint(3, 40), hours=ctx.rng.randint(1, 8))
  text = (
    f"{subject} brief\n\n1. Summary\n\nThis brief collects what we know about the {subject}: "
    "the goals, the people involved and the open questions for the next review.\n\n"
    "2. Open questions\n\n- Owners for each workstream\n- Dates for the next milestones"
  )
  ctx.put(S, "pages", {"id": f"{did}/p1", "document_id": did, "number": 1, "text": text})
  ctx.put(
    S,
    "documents",
    {
      "id": did,
      "title": f"{subject} brief",
      "category": "report",
      "owner": owner.email,
      "tags": [subject.split()[0].lower()],
      "page_count": 1,
      "created_at": iso(made),
      "updated_at": iso(made),
    },
  )
  return _document(ctx, f"{subject} brief", "report")


# --- sources -------------------------------------------------------------------------------


@facets.source(S, "person.email")
def brief_owner(ctx: AuthorContext) -> Found:
  doc = _put_brief(ctx)
  return found_one(
    "person.email",
    f'the email address of the owner of the "{doc["title"]}" document in the document store',
    doc["owner"],
  )


def _contract_contact(ctx: AuthorContext, title: str) -> str:
  return _read_until(ctx, _document(ctx, title, "contract"), _CONTACT).group(1).lower()


@facets.source(S, "person.email")
def contract_contact(ctx: AuthorContext) -> Found:
  title = ctx.choice(_contract_titles(ctx))
  email = _contract_contact(ctx, title)
  customer = title.removeprefix(_msa_title(""))
  return found_one(
    "person.email",
    f"the email address of the customer contact named in our Master Services Agreement with "
    f"{customer}",
    email,
  )


def _fee(ctx: AuthorContext, title: str) -> Value:
  amount = float(
    _read_until(ctx, _document(ctx, title, "contract"), _FEE).group(1).replace(",", "")
  )
  cur = world(ctx.env.seed).currency
  return Value(amount, f"{cur} {amount:,.0f}", amount)


@facets.source(S, "money")
def contract_fee(ctx: AuthorContext) -> Found:
  title = ctx.choice(_contract_titles(ctx))
  value = _fee(ctx, title)
  customer = title.removeprefix(_msa_title(""))
  return Found(
    "money",
    f"the annual fee in our Master Services Agreement with {customer}",
    [value],
    answer=f"The annual fee in the agreement with {customer} is {value.label}.",
  )


def _travel_policy(ctx: AuthorContext) -> dict:
  return _document(ctx, "Travel and Expense Policy", "policy")


@facets.source(S, "money")
def per_diem_rates(ctx: AuthorContext) -> Found:
  """The per diems of a trip through two or three cities: several amounts to add up."""
  cities = sorted({v.city for v in world(ctx.env.seed).venues})
  size = ctx.rng.randint(2, 3)
  for _ in range(20):  # cities with different rates, so each amount is its own value
    trip = ctx.rng.sample(cities, size)
    if len({PER_DIEM.get(c) for c in trip}) == size:
      break
  doc, cur = _travel_policy(ctx), world(ctx.env.seed).currency
  rates: dict[str, float] = {}
  for page in range(1, doc["page_count"] + 1):  # read on until every city's rate is found
    text = " ".join(ctx.call(S, "read_page", document_id=doc["id"], page=page)["text"].split())
    for city in trip:
      found = _rate(city).search(text)
      if found and city not in rates:
        rates[city] = float(found.group(1).replace(",", ""))
    if len(rates) == len(trip):
      break
  if len(rates) < len(trip):
    raise AuthoringError("fact_not_in_document", "per diem")
  values = [Value(rates[c], f"{cur} {rates[c]:,.0f} ({c})", rates[c]) for c in trip]
  return Found(
    "money",
    f"the daily per-diem rates for {', '.join(trip[:-1])} and {trip[-1]} in the travel policy",
    values,
  )


@facets.source(S, "sku")
def manual_sku(ctx: AuthorContext) -> Found:
  titles = sorted(d.title for d in ctx.state(S).documents if d.title.endswith(" User Manual"))
  title = ctx.choice(titles)
  sku = _read_until(ctx, _document(ctx, title, "manual"), _SKU).group(1)
  return found_one(
    "sku", f'the SKU of the product covered by the "{title}" in the document store', sku
  )


# --- lookups -------------------------------------------------------------------------------


def _msa_of(ctx: AuthorContext, name: str) -> str | None:
  """The title of our agreement with a customer; one the store was too small to hold (it keeps
  the first few) is added, as the seeded ones are written."""
  title = _msa_title(str(name)).lower()
  found = next((t for t in _contract_titles(ctx) if t.lower() == title), None)
  w = world(ctx.env.seed)
  customer = next((c for c in w.customers if c.name.lower() == str(name).lower()), None)
  if found is not None or customer is None:
    return found
  state = ctx.state(S)
  start = state.now.date() - timedelta(days=ctx.rng.randint(30, 330))
  title, category, _, tags, text = _contract(customer, w, ctx.rng, start)
  heads = {p.department: p.email for p in w.people if p.title == f"Head of {p.department}"}
  did, made = ctx.fresh_id("doc"), iso(state.now - timedelta(days=ctx.rng.randint(20, 300)))
  pages = split_pages(_prose(text))
  for n, body in enumerate(pages, 1):
    ctx.put(S, "pages", {"id": f"{did}/p{n}", "document_id": did, "number": n, "text": body})
  ctx.put(
    S,
    "documents",
    {
      "id": did,
      "title": title,
      "category": category,
      "owner": heads.get("Finance", w.people[1].email),
      "tags": list(tags),
      "page_count": len(pages),
      "created_at": made,
      "updated_at": made,
    },
  )
  return title


@facets.lookup(S, "company.name", "money")
def msa_fee(ctx: AuthorContext, found: Found) -> Found | None:
  title = _msa_of(ctx, found.values[0].value)
  if title is None:
    return None
  value = _fee(ctx, title)
  return Found(
    "money",
    "the annual fee in our Master Services Agreement with that customer",
    [value],
    answer=f"The annual fee in the {title} is {value.label}.",
  )


@facets.lookup(S, "company.name", "person.email")
def msa_contact(ctx: AuthorContext, found: Found) -> Found | None:
  title = _msa_of(ctx, found.values[0].value)
  if title is None:
    return None
  email = _contract_contact(ctx, title)
  return found_one(
    "person.email",
    "the email address of the customer contact named in our Master Services Agreement with them",
    email,
  )


@facets.lookup(S, "location", "money")
def per_diem_there(ctx: AuthorContext, found: Found) -> Found | None:
  """The per diem of the city at the end of an address such as "12 King St, Oslo"."""
  city = str(found.values[0].value).rsplit(",", 1)[-1].strip()
  if city not in {v.city for v in world(ctx.env.seed).venues}:
    return None
  # Searching with the whole address finds the travel policy's rate table for that city.
  hits = ctx.call(
    S, "search_documents", query=f"per diem {found.values[0].value}", category="policy"
  )
  rate = None
  for hit in hits["items"]:
    if hit["title"] != "Travel and Expense Policy":
      continue
    page = ctx.call(S, "read_page", document_id=hit["document_id"], page=hit["page"])
    found_rate = _rate(city).search(" ".join(page["text"].split()))
    if found_rate:
      rate = float(found_rate.group(1).replace(",", ""))
      break
  if rate is None:
    return None
  cur = world(ctx.env.seed).currency
  return Found(
    "money",
    "the daily per-diem rate for that city in the travel policy",
    [Value(rate, f"{cur} {rate:,.0f}", rate)],
    answer=f"The per diem in {city} is {cur} {rate:,.0f} per day.",
  )


@facets.lookup(S, "sku", "title")
def manual_for_sku(ctx: AuthorContext, found: Found) -> Found | None:
  sku = str(found.values[0].value)
  hits = ctx.call(S, "list_documents", tag=sku, category="manual")["items"]
  if not hits:
    return None
  title = hits[0]["title"]
  return found_one(
    "title", "the title of the user manual for that product in the document store", title
  )


# --- sinks ---------------------------------------------------------------------------------


def _note_check(ctx: AuthorContext, doc: dict, text: str) -> dict:
  return exists(
    S,
    "annotations",
    where("document_id", doc["id"]),
    where("text", text, "icontains"),
    since(ctx, S, "created_at"),
  )


for kind in ("text", "url", "reference"):
  facets.sink(
    S,
    kind,
    f"note_{kind}_on_brief",
    prepare=_put_brief,
    act=lambda ctx, d, v: ctx.call(
      S, "add_annotation", document_id=d["id"], page=1, text=f"Note: {v.value}"
    ),
    check=lambda ctx, d, v: _note_check(ctx, d, str(v.value)),
    phrase=lambda ctx, d, obj: f'add a note with {obj} to page 1 of the "{d["title"]}" document',
    text=lambda ctx, d, v: f'"{d["title"]}" has a new note with {v.label}.',
  )


facets.sink(
  S,
  "person.email",
  "ask_to_review",
  prepare=_put_brief,
  act=lambda ctx, d, v: ctx.call(
    S,
    "add_annotation",
    document_id=d["id"],
    page=1,
    text=f"{v.value}: please review the open questions.",
  ),
  check=lambda ctx, d, v: _note_check(ctx, d, str(v.value)),
  phrase=lambda ctx, d, obj: (
    f'add a note to page 1 of the "{d["title"]}" document asking {obj} to review it, with '
    "their email address in the note"
  ),
  text=lambda ctx, d, v: f'A note on "{d["title"]}" asks {v.label} to review it.',
)


facets.sink(
  S,
  "sku",
  "tag_brief",
  prepare=_put_brief,
  act=lambda ctx, d, v: ctx.call(S, "add_tag", document_id=d["id"], tag=str(v.value)),
  check=lambda ctx, d, v: record_is(
    S, "documents", d["id"], "tags", "-".join(str(v.value).lower().split()), "contains"
  ),
  phrase=lambda ctx, d, obj: f'tag the "{d["title"]}" document with {obj}',
  text=lambda ctx, d, v: f'"{d["title"]}" is tagged {v.label}.',
)


def _upload_target(ctx: AuthorContext) -> dict:
  return {"about": topic(ctx)}


facets.sink(
  S,
  "title",
  "upload_report",
  prepare=_upload_target,
  act=lambda ctx, t, v: ctx.call(
    S,
    "upload_document",
    title=str(v.value),
    category="report",
    text=f"{v.value}\n\nStatus notes for the {t['about']}.",
  ),
  check=lambda ctx, t, v: exists(
    S,
    "documents",
    where("title", str(v.value)),
    where("category", "report"),
    since(ctx, S, "created_at"),
  ),
  phrase=lambda ctx, t, obj: (
    f"upload a short report to the document store with {obj} as its title and a line of "
    f"status notes on the {t['about']} as its text"
  ),
  text=lambda ctx, t, v: f'A report titled "{v.label}" is in the document store.',
)
