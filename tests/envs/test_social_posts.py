import pytest

from envs._world import world
from envs.social_posts import CHAR_LIMIT, SocialPostsService
from tests.contract import call_fails, call_ok

LATER = "2026-03-10T09:00:00"
IMG = "https://cdn.example.com/a.jpg"


@pytest.fixture
def social():
  return SocialPostsService.create(seed=3)


def profile(social, network):
  return next(p for p in social.state.profiles if p.network == network)


def post(social, status, network=None):
  return next(
    p
    for p in social.state.posts
    if p.status == status
    and (network is None or social.state.profiles.get(p.profile_id).network == network)
  )


def test_seeded_data_is_sized():
  a = SocialPostsService.create(seed=5)
  assert len(a.state.posts) == 30 and len(a.state.profiles) == 4
  big = SocialPostsService.create(seed=5, size=90).state
  assert len(big.posts) == 90
  assert {p.status for p in big.posts} == {"draft", "scheduled", "published", "failed"}
  assert world(5).company in {p.display_name for p in a.state.profiles}
  assert [p.network for p in a.state.profiles if not p.connected] == ["facebook"]
  for p in big.posts:
    prof = big.profiles.get(p.profile_id)
    assert len(p.text) <= prof.char_limit
    assert (p.id in big.analytics) == (p.status == "published")
    if prof.network == "instagram":
      assert p.media_urls
    if p.status == "scheduled":
      assert p.scheduled_at > big.now and prof.connected
    if p.status == "published":
      assert p.created_at < p.published_at < big.now
    assert (p.failure_reason is not None) == (p.status == "failed")


def test_reads(social):
  profs = call_ok(social, "list_profiles")
  assert {p["network"]: p["char_limit"] for p in profs} == CHAR_LIMIT
  page = call_ok(social, "list_posts", {"limit": 5})
  assert page["total"] == 30 and len(page["items"]) == 5 and page["next_offset"] == 5
  tw = profile(social, "twitter").id
  mine = call_ok(social, "list_posts", {"profile_id": tw, "limit": 100})["items"]
  assert mine and all(p["profile_id"] == tw for p in mine)
  drafts = call_ok(social, "list_posts", {"status": "draft", "limit": 100})["items"]
  assert drafts and all(p["status"] == "draft" for p in drafts)
  word = mine[0]["text"].split()[1]
  assert mine[0]["id"] in [
    p["id"] for p in call_ok(social, "list_posts", {"query": word, "limit": 100})["items"]
  ]
  pub = post(social, "published")
  got = call_ok(social, "get_post", {"post_id": pub.id})
  assert got["text"] == pub.text and got["status"] == "published"
  stats = call_ok(social, "get_post_analytics", {"post_id": pub.id})
  assert stats["impressions"] > 0 and stats == social.state.analytics.get(pub.id).model_dump()
  top = call_ok(social, "top_posts", {"metric": "likes", "limit": 100})
  likes = [p["analytics"]["likes"] for p in top["items"]]
  assert likes == sorted(likes, reverse=True)
  assert top["total"] == sum(p.status == "published" for p in social.state.posts)
  best = call_ok(social, "top_posts")["items"]
  eng = [sum(p["analytics"][k] for k in ("likes", "shares", "clicks", "comments")) for p in best]
  assert len(best) <= 5 and eng == sorted(eng, reverse=True)
  li = call_ok(social, "top_posts", {"network": "linkedin", "limit": 100})["items"]
  li_id = profile(social, "linkedin").id
  assert all(p["profile_id"] == li_id for p in li)
  by_prof = call_ok(social, "top_posts", {"profile_id": li_id, "limit": 100})["items"]
  assert [p["id"] for p in by_prof] == [p["id"] for p in li]


def test_post_lifecycle(social):
  tw = profile(social, "twitter").id
  draft = call_ok(social, "create_post", {"profile_id": tw, "text": "Hello world"})
  assert draft["status"] == "draft" and draft["author"] == world(3).people[0].email
  upd = call_ok(social, "update_post", {"post_id": draft["id"], "media_urls": [IMG]})
  assert upd["media_urls"] == [IMG] and upd["text"] == "Hello world"
  sch = call_ok(social, "schedule_post", {"post_id": draft["id"], "scheduled_at": LATER})
  assert sch["status"] == "scheduled" and sch["scheduled_at"] == LATER
  pub = call_ok(social, "publish_now", {"post_id": draft["id"]})
  assert pub["status"] == "published" and pub["published_at"] == "2026-03-02T09:03:00"
  zero = call_ok(social, "get_post_analytics", {"post_id": draft["id"]})
  assert zero["impressions"] == 0 and zero["likes"] == 0
  ig = profile(social, "instagram").id
  later = call_ok(
    social,
    "create_post",
    {"profile_id": ig, "text": "Spring!", "media_urls": [IMG], "scheduled_at": LATER},
  )
  assert later["status"] == "scheduled"
  gone = call_ok(social, "delete_post", {"post_id": later["id"]})
  assert gone["id"] == later["id"] and later["id"] not in social.state.posts
  failed = post(social, "failed", "twitter")
  again = call_ok(social, "schedule_post", {"post_id": failed.id, "scheduled_at": LATER})
  assert again["status"] == "scheduled" and again["failure_reason"] is None


def test_error_paths_are_atomic(social):
  tw, ig, fb = (profile(social, n).id for n in ("twitter", "instagram", "facebook"))
  pub = post(social, "published")
  draft = post(social, "draft")
  ig_draft = call_ok(social, "create_post", {"profile_id": ig, "text": "No photo yet"})["id"]
  fb_failed = post(social, "failed", "facebook")
  call_fails(social, "get_post", {}, 400, "post_id")
  call_fails(social, "get_post", {"post_id": "pst_x"}, 404, "pst_x")
  call_fails(social, "list_posts", {"profile_id": "prf_x"}, 404, "prf_x")
  call_fails(social, "list_posts", {"status": "gone"}, 400, "status")
  call_fails(social, "get_post_analytics", {"post_id": "pst_x"}, 404, "pst_x")
  call_fails(social, "get_post_analytics", {"post_id": draft.id}, 409, "only published")
  call_fails(social, "top_posts", {"metric": "views"}, 400, "metric")
  call_fails(social, "top_posts", {"profile_id": "prf_x"}, 404, "prf_x")
  new = {"profile_id": tw, "text": "hi"}
  call_fails(social, "create_post", {**new, "profile_id": "prf_x"}, 404, "prf_x")
  call_fails(social, "create_post", {**new, "text": ""}, 400, "text")
  call_fails(social, "create_post", {**new, "text": "x" * 281}, 400, "281", "280")
  call_fails(social, "create_post", {**new, "media_urls": [IMG] * 5}, 400, "media_urls")
  call_fails(social, "create_post", {**new, "media_urls": ["ftp://x"]}, 400, "media_urls")
  call_fails(social, "create_post", {**new, "scheduled_at": "2026-03-01T09:00"}, 400, "future")
  call_fails(social, "create_post", {**new, "profile_id": ig, "scheduled_at": LATER}, 409, "image")
  call_fails(
    social, "create_post", {**new, "profile_id": fb, "scheduled_at": LATER}, 409, "reconnect"
  )
  call_fails(social, "update_post", {"post_id": "pst_x", "text": "t"}, 404, "pst_x")
  call_fails(social, "update_post", {"post_id": draft.id}, 400, "text or media_urls")
  call_fails(social, "update_post", {"post_id": pub.id, "text": "t"}, 409, "published")
  long = {"post_id": post(social, "draft", "twitter").id, "text": "y" * 300}
  call_fails(social, "update_post", long, 400, "280")
  ig_sched = post(social, "scheduled", "instagram")
  call_fails(social, "update_post", {"post_id": ig_sched.id, "media_urls": []}, 409, "instagram")
  sched = {"post_id": draft.id, "scheduled_at": LATER}
  call_fails(social, "schedule_post", {**sched, "post_id": "pst_x"}, 404, "pst_x")
  call_fails(social, "schedule_post", {**sched, "scheduled_at": "2020-01-01T00:00"}, 400, "future")
  call_fails(social, "schedule_post", {**sched, "scheduled_at": "soon"}, 400, "scheduled_at")
  call_fails(social, "schedule_post", {**sched, "post_id": pub.id}, 409, "rescheduled")
  call_fails(social, "schedule_post", {**sched, "post_id": ig_draft}, 409, "instagram")
  call_fails(social, "schedule_post", {**sched, "post_id": fb_failed.id}, 409, "disconnected")
  call_fails(social, "publish_now", {"post_id": "pst_x"}, 404, "pst_x")
  call_fails(social, "publish_now", {"post_id": pub.id}, 409, "already published")
  call_fails(social, "publish_now", {"post_id": ig_draft}, 409, "instagram")
  call_fails(social, "publish_now", {"post_id": fb_failed.id}, 409, "reconnect")
  call_fails(social, "delete_post", {"post_id": "pst_x"}, 404, "pst_x")
  call_fails(social, "delete_post", {"post_id": pub.id}, 409, "published")
