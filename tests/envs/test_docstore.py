import pytest

from envs._world import world
from envs.docstore import (
  PAGE_CHARS,
  PER_DIEM,
  SNOW_CLOSURE_CM,
  SNOW_EVENT_ONLINE_CM,
  DocstoreService,
  split_pages,
)
from envs.helpdesk import SLA_HOURS
from tests.contract import call_fails, call_ok

SEED = 3
ME = world(SEED).people[0].email


@pytest.fixture
def ds():
  return DocstoreService.create(seed=SEED)


def doc(ds, title):
  return next(d for d in ds.state.documents if d.title == title)


def text_of(ds, d):
  return "\n\n".join(ds.state.pages.get(f"{d.id}/p{n}").text for n in range(1, d.page_count + 1))


def test_seeded_data_is_sized():
  a = DocstoreService.create(seed=5)
  st = a.state
  assert (
    len(st.documents) == 20 and len(DocstoreService.create(seed=5, size=45).state.documents) == 45
  )
  assert {d.category for d in st.documents} == {"manual", "policy", "contract", "report"}
  assert len({(d.category, d.title) for d in st.documents}) == len(st.documents)
  for d in st.documents:
    numbers = sorted(p.number for p in st.pages if p.document_id == d.id)
    assert numbers == list(range(1, d.page_count + 1))
  assert all(len(p.text) <= PAGE_CHARS for p in st.pages)
  for n in st.annotations:
    page = st.pages.get(f"{n.document_id}/p{n.page}")
    assert " ".join(n.highlight.split()).lower() in " ".join(page.text.split()).lower()
    assert st.documents.get(n.document_id).created_at < n.created_at < st.now
  me = world(5).people[0].email
  assert {n.author == me for n in st.annotations} == {True, False}
  assert st.bookmarks and all(b.owner == me for b in st.bookmarks)


def test_policies_carry_the_numbers_other_services_use(ds):
  travel = text_of(ds, doc(ds, "Travel and Expense Policy"))
  for city, amount in PER_DIEM.items():
    assert f"- {city}: USD {amount} per day" in travel
  assert "over USD 75" in travel
  weather = text_of(ds, doc(ds, "Severe Weather and Snow Day Policy"))
  assert f"{SNOW_CLOSURE_CM} cm of snow" in weather and f"{SNOW_EVENT_ONLINE_CM} cm" in weather
  sla = text_of(ds, doc(ds, "Customer Support SLA Manual"))
  assert all(f"resolution within {h} hours" in sla for h in SLA_HOURS.values())
  assert "30 days of delivery" in text_of(ds, doc(ds, "Refund and Returns Policy"))
  msa = next(d for d in ds.state.documents if d.category == "contract")
  customer = msa.title.split(" - ")[1]
  assert customer in {c.name for c in world(SEED).customers} and customer in text_of(ds, msa)


def test_split_pages():
  text = "1. Intro\n\n" + "\n\n".join("word " * 50 for _ in range(12)) + "\n\n2. End\n\nBye."
  pages = split_pages(text)
  assert len(pages) > 1 and all(len(p) <= PAGE_CHARS for p in pages)
  assert "\n\n".join(pages).split() == text.split()
  assert all(not p.endswith("2. End") for p in pages)  # a heading moves to the next page
  long = split_pages("x" * 10 + " " + "y " * 2000)
  assert all(len(p) <= PAGE_CHARS for p in long) and len(long) >= 3


def test_list_search_get_read(ds):
  page = call_ok(ds, "list_documents", {"limit": 5})
  assert page["total"] == 20 and len(page["items"]) == 5
  titles = [d["title"].lower() for d in call_ok(ds, "list_documents", {"limit": 100})["items"]]
  assert titles == sorted(titles)
  policies = call_ok(ds, "list_documents", {"category": "policy", "limit": 100})["items"]
  assert policies and all(d["category"] == "policy" for d in policies)
  snowy = call_ok(ds, "list_documents", {"tag": "Snow"})["items"]
  assert [d["title"] for d in snowy] == ["Severe Weather and Snow Day Policy"]
  owner = snowy[0]["owner"]
  assert all(d["owner"] == owner for d in call_ok(ds, "list_documents", {"owner": owner})["items"])
  assert call_ok(ds, "list_documents", {"query": "travel"})["items"][0]["title"].startswith(
    "Travel"
  )

  hits = call_ok(ds, "search_documents", {"query": "the per diem in Oslo"})
  top = hits["items"][0]
  assert top["title"] == "Travel and Expense Policy" and top["words_matched"] == 3
  assert "Oslo" in top["snippet"]
  ranks = [h["words_matched"] for h in hits["items"]]
  assert ranks == sorted(ranks, reverse=True)
  only = call_ok(ds, "search_documents", {"query": "snow", "category": "manual", "limit": 100})
  assert only["items"] and all(h["category"] == "manual" for h in only["items"])
  assert call_ok(ds, "search_documents", {"query": "cm", "tag": "msa"})["total"] == 0
  assert call_ok(ds, "search_documents", {"query": "zebra"})["total"] == 0

  weather = doc(ds, "Severe Weather and Snow Day Policy")
  got = call_ok(ds, "get_document", {"document_id": weather.id})
  assert got["page_count"] == weather.page_count and got["title"] == weather.title
  assert got["outline"][0] == {"page": 1, "heading": "1. Purpose"}
  assert [o["heading"] for o in got["outline"]][2] == "3. In-person events"
  last = call_ok(ds, "read_page", {"document_id": weather.id, "page": weather.page_count})
  assert last["page_count"] == weather.page_count and last["text"]
  assert call_ok(ds, "read_page", {"document_id": weather.id})["text"].startswith("1. Purpose")


def test_annotations_tags_uploads_bookmarks(ds):
  travel = doc(ds, "Travel and Expense Policy")
  note = call_ok(
    ds,
    "add_annotation",
    {"document_id": travel.id, "page": 1, "text": "Oslo rate", "highlight": "OSLO:  usd 110"},
  )
  assert note["author"] == ME and note["highlight"] == "OSLO: usd 110"
  assert note["id"] in ds.state.annotations
  mine = call_ok(ds, "list_annotations", {"document_id": travel.id, "author": ME})["items"]
  assert note["id"] in [n["id"] for n in mine] and all(n["author"] == ME for n in mine)
  assert call_ok(ds, "get_document", {"document_id": travel.id})["annotations"] >= 1
  assert call_ok(ds, "delete_annotation", {"annotation_id": note["id"]}) == {"deleted": note["id"]}
  assert note["id"] not in ds.state.annotations

  tagged = call_ok(ds, "add_tag", {"document_id": travel.id, "tag": "Finance Team"})
  assert (
    tagged["tags"][-1] == "finance-team"
    and "finance-team" in ds.state.documents.get(travel.id).tags
  )

  text = "# Setup\n\n" + "Plug in the device and wait. " * 60 + "\n\n# Support\n\nCall us."
  up = call_ok(
    ds,
    "upload_document",
    {"title": "Kiosk Guide", "category": "manual", "text": text, "tags": ["Kiosk", "kiosk"]},
  )
  assert up["owner"] == ME and up["tags"] == ["kiosk"] and up["page_count"] == 2
  assert [o["heading"] for o in up["outline"]] == ["Setup", "Support"]
  assert ds.state.pages.get(f"{up['id']}/p1").text.startswith("# Setup\n\nPlug in")
  assert "# Support" in ds.state.pages.get(f"{up['id']}/p2").text
  found = call_ok(ds, "search_documents", {"query": "plug device"})["items"][0]
  assert found["document_id"] == up["id"]
  again = call_ok(
    ds, "upload_document", {"title": "Kiosk Guide", "category": "report", "text": "x"}
  )
  assert again["page_count"] == 1

  mark = call_ok(ds, "bookmark_page", {"document_id": up["id"], "page": 2})
  assert mark["label"] == "Kiosk Guide, page 2" and mark["owner"] == ME
  marks = call_ok(ds, "list_bookmarks")
  assert marks[0]["id"] == mark["id"] and marks[0]["title"] == "Kiosk Guide"
  assert len(marks) == len(ds.state.bookmarks)


def test_error_paths_are_atomic(ds):
  travel = doc(ds, "Travel and Expense Policy")
  n = travel.page_count
  theirs = next(a for a in ds.state.annotations if a.author != ME)
  marked = next(iter(ds.state.bookmarks))
  call_fails(ds, "read_page", {}, 400, "document_id")
  call_fails(ds, "read_page", {"document_id": travel.id, "page": 0}, 400, "page")
  call_fails(ds, "read_page", {"document_id": travel.id, "page": "two"}, 400, "page")
  call_fails(ds, "read_page", {"document_id": travel.id, "page": n + 1}, 404, f"pages 1-{n}")
  call_fails(ds, "read_page", {"document_id": "doc_nope"}, 404, "doc_nope")
  call_fails(ds, "get_document", {"document_id": "doc_nope"}, 404, "doc_nope")
  call_fails(ds, "list_documents", {"category": "memo"}, 400, "category")
  call_fails(ds, "list_documents", {"owner": "nobody"}, 400, "owner")
  call_fails(ds, "search_documents", {}, 400, "query")
  call_fails(ds, "search_documents", {"query": "the and of"}, 400, "searchable")
  call_fails(ds, "search_documents", {"query": "x", "limit": 500}, 400, "limit")
  call_fails(ds, "list_annotations", {"document_id": "doc_nope"}, 404, "doc_nope")
  add = {"document_id": travel.id, "page": 1, "text": "x"}
  call_fails(ds, "add_annotation", {**add, "text": ""}, 400, "text")
  call_fails(ds, "add_annotation", {**add, "document_id": "doc_nope"}, 404, "doc_nope")
  call_fails(ds, "add_annotation", {**add, "page": n + 1}, 404, f"pages 1-{n}")
  call_fails(ds, "add_annotation", {**add, "highlight": "free unicorns"}, 409, "does not occur")
  call_fails(ds, "delete_annotation", {"annotation_id": "ann_nope"}, 404, "ann_nope")
  call_fails(ds, "delete_annotation", {"annotation_id": theirs.id}, 409, theirs.author)
  call_fails(ds, "add_tag", {"document_id": "doc_nope", "tag": "x"}, 404, "doc_nope")
  call_fails(ds, "add_tag", {"document_id": travel.id, "tag": " "}, 400, "tag")
  call_fails(ds, "add_tag", {"document_id": travel.id, "tag": "TRAVEL"}, 409, "already tagged")
  up = {"title": "travel and expense policy", "category": "policy", "text": "x"}
  call_fails(ds, "upload_document", up, 409, "already exists", travel.id)
  call_fails(ds, "upload_document", {**up, "category": "memo"}, 400, "category")
  call_fails(ds, "upload_document", {**up, "title": "New", "text": "  \n "}, 400, "text")
  call_fails(ds, "upload_document", {"title": "New", "category": "policy"}, 400, "text")
  call_fails(ds, "upload_document", {**up, "title": "  "}, 400, "title")
  call_fails(ds, "bookmark_page", {"document_id": "doc_nope", "page": 1}, 404, "doc_nope")
  call_fails(ds, "bookmark_page", {"document_id": travel.id, "page": n + 1}, 404, f"1-{n}")
  mark = {"document_id": marked.document_id, "page": marked.page}
  call_fails(ds, "bookmark_page", mark, 409, "already bookmarked")
