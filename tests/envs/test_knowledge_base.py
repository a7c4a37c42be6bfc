import pytest

from envs._world import world
from envs.docstore import REFUND_WINDOW_DAYS
from envs.helpdesk import SLA_HOURS
from envs.knowledge_base import MIN_BODY, KnowledgeBaseService
from tests.contract import call_fails, call_ok

SEED = 3
ME = world(SEED).people[0].email
LONG = "Step one: open the console. Step two: follow the prompts until the light is green."


@pytest.fixture
def kb():
  return KnowledgeBaseService.create(seed=SEED)


def article(kb, title):
  return next(a for a in kb.state.articles if a.title == title)


def section(kb, name):
  return next(s for s in kb.state.sections if s.name == name)


def test_seeded_data_is_sized():
  a = KnowledgeBaseService.create(seed=5)
  st = a.state
  assert (
    len(st.articles) == 30
    and len(KnowledgeBaseService.create(seed=5, size=70).state.articles) == 70
  )
  assert {x.status for x in st.articles} == {"draft", "published", "archived"}
  keys = [(x.section_id, x.title.lower()) for x in st.articles]
  assert len(set(keys)) == len(keys)
  for x in st.articles:
    assert x.section_id in st.sections and x.created_at <= x.updated_at < st.now
    if x.status == "published":
      assert len(x.body.strip()) >= MIN_BODY and x.published_at is not None
    if x.status == "draft":
      assert (x.helpful, x.not_helpful, x.published_at) == (0, 0, None)
  assert any(len(x.body) < MIN_BODY for x in st.articles if x.status == "draft")
  for v in st.votes:
    art = st.articles.get(v.article_id)
    assert art.status == "published" and (art.helpful if v.helpful else art.not_helpful) >= 1
  refunds = article(a, "How refunds work").body
  assert f"within {REFUND_WINDOW_DAYS} days" in refunds
  assert all(
    f"{p} {h} hours" in article(a, "Support plans and response times").body
    for p, h in SLA_HOURS.items()
  )


def test_sections_and_search(kb):
  sections = call_ok(kb, "list_sections")
  assert [s["position"] for s in sections] == list(range(1, 8))
  billing = next(s for s in sections if s["name"] == "Billing & refunds")
  assert billing["articles"]["draft"] >= 1
  assert sum(sum(s["articles"].values()) for s in sections) == 30

  page = call_ok(kb, "search_articles", {"limit": 5})
  assert page["total"] == 30 and len(page["items"]) == 5
  stamps = [x["updated_at"] for x in page["items"]]
  assert stamps == sorted(stamps, reverse=True)
  hits = call_ok(kb, "search_articles", {"query": "refund"})["items"]
  assert hits[0]["title"] == "How refunds work" and "refund" in hits[0]["snippet"].lower()
  scores = [x["score"] for x in hits]
  assert scores == sorted(scores, reverse=True)
  sid = billing["id"]
  mine = call_ok(kb, "search_articles", {"section_id": sid, "status": "draft"})["items"]
  assert mine and all(x["section_id"] == sid and x["status"] == "draft" for x in mine)
  api = call_ok(kb, "search_articles", {"label": "API", "limit": 100})["items"]
  assert api and all("api" in x["labels"] for x in api)
  assert call_ok(kb, "search_articles", {"query": "zebra unicorn"})["total"] == 0


def test_get_and_popular(kb):
  art = article(kb, "How refunds work")
  got = call_ok(kb, "get_article", {"article_id": art.id})
  assert got["body"] == art.body and got["section"] == "Billing & refunds"
  votes = art.helpful + art.not_helpful
  assert got["helpful_pct"] == round(100 * art.helpful / votes, 1)
  top = call_ok(kb, "list_popular_articles", {"limit": 100})
  assert top["total"] == sum(x.status == "published" for x in kb.state.articles)
  helpful = [x["helpful"] for x in top["items"]]
  assert helpful == sorted(helpful, reverse=True)
  sid = section(kb, "Hardware & devices").id
  hw = call_ok(kb, "list_popular_articles", {"section_id": sid})["items"]
  assert hw and all(x["section_id"] == sid for x in hw)


def test_write_publish_vote_archive_restore(kb):
  sec = call_ok(kb, "create_section", {"name": " Kiosks ", "description": "Kiosk mode"})
  assert sec["name"] == "Kiosks" and sec["position"] == 8 and sec["id"] in kb.state.sections
  draft = call_ok(
    kb,
    "create_article",
    {"section_id": sec["id"], "title": "Kiosk setup", "labels": ["Kiosk Mode", "kiosk mode"]},
  )
  assert (draft["status"], draft["author"], draft["labels"]) == ("draft", ME, ["kiosk-mode"])
  up = call_ok(kb, "update_article", {"article_id": draft["id"], "body": LONG, "labels": ["A b"]})
  assert up["body"] == LONG and up["title"] == "Kiosk setup" and up["labels"] == ["a-b"]
  pub = call_ok(kb, "publish_article", {"article_id": draft["id"]})
  assert pub["status"] == "published" and pub["published_at"] is not None
  assert kb.state.articles.get(draft["id"]).status == "published"

  v = call_ok(kb, "vote_article", {"article_id": draft["id"], "helpful": True})
  assert (v["helpful"], v["not_helpful"], v["helpful_pct"]) == (1, 0, 100.0)
  v = call_ok(kb, "vote_article", {"article_id": draft["id"], "helpful": False})
  assert (v["helpful"], v["not_helpful"]) == (0, 1)
  other = call_ok(
    kb, "vote_article", {"article_id": draft["id"], "helpful": True, "voter": "A.B@example.com"}
  )
  assert (other["helpful"], other["not_helpful"]) == (1, 1)
  assert f"{draft['id']}:a.b@example.com" in kb.state.votes

  moved = call_ok(
    kb,
    "update_article",
    {"article_id": draft["id"], "section_id": section(kb, "Getting started").id, "title": "Kiosk"},
  )
  assert moved["section"] == "Getting started" and moved["status"] == "published"
  arch = call_ok(kb, "archive_article", {"article_id": draft["id"]})
  assert arch["status"] == "archived"
  back = call_ok(kb, "restore_article", {"article_id": draft["id"]})
  assert back["status"] == "draft" and kb.state.articles.get(draft["id"]).status == "draft"


def test_error_paths_are_atomic(kb):
  pub = article(kb, "How refunds work")
  short = next(x for x in kb.state.articles if x.status == "draft" and len(x.body) < MIN_BODY)
  ready = article(kb, "Updating payment details")
  arch = next(x for x in kb.state.articles if x.status == "archived")
  voted = next(iter(kb.state.votes))
  sid = pub.section_id
  call_fails(kb, "get_article", {}, 400, "article_id")
  call_fails(kb, "get_article", {"article_id": 1}, 400, "article_id")
  call_fails(kb, "get_article", {"article_id": "art_nope"}, 404, "art_nope")
  call_fails(kb, "search_articles", {"status": "live"}, 400, "status")
  call_fails(kb, "search_articles", {"section_id": "sec_nope"}, 404, "sec_nope")
  call_fails(kb, "search_articles", {"label": "!!"}, 400, "label")
  call_fails(kb, "list_popular_articles", {"section_id": "sec_nope"}, 404, "sec_nope")
  call_fails(kb, "list_popular_articles", {"limit": 0}, 400, "limit")
  call_fails(kb, "create_section", {"name": ""}, 400, "name")
  call_fails(kb, "create_section", {"name": "  "}, 400, "name")
  call_fails(kb, "create_article", {"section_id": sid, "title": " "}, 400, "title")
  call_fails(kb, "update_article", {"article_id": pub.id, "title": " "}, 400, "title")
  call_fails(kb, "create_section", {"name": "BILLING & REFUNDS"}, 409, "already exists")
  call_fails(kb, "create_article", {"section_id": sid}, 400, "title")
  call_fails(kb, "create_article", {"section_id": "sec_nope", "title": "x"}, 404, "sec_nope")
  call_fails(kb, "create_article", {"section_id": sid, "title": "HOW REFUNDS WORK"}, 409, "unique")
  call_fails(kb, "create_article", {"section_id": sid, "title": "x", "labels": ["a/b"]}, 400)
  call_fails(kb, "update_article", {"article_id": pub.id}, 400, "at least one")
  call_fails(kb, "update_article", {"article_id": "art_nope", "title": "x"}, 404, "art_nope")
  call_fails(kb, "update_article", {"article_id": pub.id, "section_id": "sec_nope"}, 404)
  call_fails(kb, "update_article", {"article_id": ready.id, "title": pub.title}, 409, "unique")
  call_fails(kb, "update_article", {"article_id": pub.id, "body": "Too short."}, 409, "50")
  call_fails(kb, "update_article", {"article_id": arch.id, "title": "x"}, 409, "archived")
  call_fails(kb, "publish_article", {"article_id": "art_nope"}, 404, "art_nope")
  call_fails(kb, "publish_article", {"article_id": short.id}, 409, f"at least {MIN_BODY}")
  call_fails(kb, "publish_article", {"article_id": pub.id}, 409, "already published")
  call_fails(kb, "publish_article", {"article_id": arch.id}, 409, "restore")
  call_fails(kb, "archive_article", {"article_id": "art_nope"}, 404, "art_nope")
  call_fails(kb, "archive_article", {"article_id": arch.id}, 409, "already archived")
  call_fails(kb, "restore_article", {"article_id": "art_nope"}, 404, "art_nope")
  call_fails(kb, "restore_article", {"article_id": pub.id}, 409, "only archived")
  call_fails(kb, "vote_article", {"article_id": pub.id}, 400, "helpful")
  call_fails(kb, "vote_article", {"article_id": "art_nope", "helpful": True}, 404, "art_nope")
  call_fails(kb, "vote_article", {"article_id": ready.id, "helpful": True}, 409, "only published")
  call_fails(kb, "vote_article", {"article_id": arch.id, "helpful": False}, 409, "archived")
  again = {"article_id": voted.article_id, "helpful": voted.helpful, "voter": voted.voter}
  call_fails(kb, "vote_article", again, 409, "already voted")
  call_fails(kb, "vote_article", {**again, "voter": "nobody"}, 400, "voter")
