import pytest

from envs._world import world
from envs.email_marketing import EmailMarketingService
from tests.contract import call_fails, call_ok


@pytest.fixture
def mc():
  return EmailMarketingService.create(seed=3)


def audience(mc, name):
  return next(a for a in mc.state.audiences if a.name == name)


def subscriber(mc, status):
  return next(s for s in mc.state.subscribers if s.status == status)


def campaign(mc, status, **where):
  return next(
    c
    for c in mc.state.campaigns
    if c.status == status and all(getattr(c, k) == v for k, v in where.items())
  )


def test_seeded_data_is_sized():
  a = EmailMarketingService.create(seed=5)
  assert 50 <= len(a.state.subscribers) <= 60 and len(a.state.audiences) == 4
  big = EmailMarketingService.create(seed=5, size=200).state
  assert 180 <= len(big.subscribers) <= 200
  assert {s.status for s in big.subscribers} == {"subscribed", "unsubscribed", "cleaned"}
  assert {c.status for c in a.state.campaigns} == {"draft", "scheduled", "sent"}
  customers = {c.email for cu in world(5).customers for c in cu.contacts}
  in_customers = [s for s in a.state.subscribers if s.audience_id == audience(a, "Customers").id]
  assert in_customers and all(s.email in customers for s in in_customers)
  for aud in a.state.audiences:
    emails = [s.email for s in a.state.subscribers if s.audience_id == aud.id]
    assert len(emails) == len(set(emails))
  for c in a.state.campaigns:
    assert (c.id in a.state.reports) == (c.status == "sent")
    if c.status == "scheduled":
      assert c.send_at > a.state.now
  for r in a.state.reports:
    assert r.delivered == r.recipients - r.bounces and r.clicks <= r.opens <= r.delivered


def test_reads(mc):
  auds = call_ok(mc, "list_audiences")
  assert [a["name"] for a in auds] == sorted(a["name"] for a in auds)
  cust = next(a for a in auds if a["name"] == "Customers")
  members = [s for s in mc.state.subscribers if s.audience_id == cust["id"]]
  assert sum(cust["member_counts"].values()) == len(members)
  assert cust["member_counts"]["subscribed"] == sum(s.status == "subscribed" for s in members)
  page = call_ok(mc, "search_subscribers", {"audience_id": cust["id"], "limit": 5})
  assert page["total"] == len(members) and len(page["items"]) == 5
  emails = [s["email"] for s in page["items"]]
  assert emails == sorted(emails)
  hit = call_ok(mc, "search_subscribers", {"query": emails[0]})["items"]
  assert emails[0] in [s["email"] for s in hit]
  gone = call_ok(mc, "search_subscribers", {"status": "unsubscribed", "limit": 100})["items"]
  assert gone and all(s["status"] == "unsubscribed" for s in gone)
  tag = next(t for s in mc.state.subscribers for t in s.tags)
  tagged = call_ok(mc, "search_subscribers", {"tag": tag, "limit": 100})["items"]
  assert tagged and all(tag in s["tags"] for s in tagged)
  camps = call_ok(mc, "list_campaigns", {"limit": 100})["items"]
  assert len(camps) == 8
  assert [c["created_at"] for c in camps] == sorted((c["created_at"] for c in camps), reverse=True)
  sent = call_ok(mc, "list_campaigns", {"status": "sent"})["items"]
  assert len(sent) == 5 and all(c["status"] == "sent" for c in sent)
  news = audience(mc, "Newsletter").id
  assert all(
    c["audience_id"] == news for c in call_ok(mc, "list_campaigns", {"audience_id": news})["items"]
  )
  assert call_ok(mc, "list_campaigns", {"query": "renewal"})["items"][0]["name"] == (
    "Renewal reminder"
  )
  report = call_ok(mc, "get_campaign_report", {"campaign_id": sent[0]["id"]})
  assert report["id"] == sent[0]["id"] and report["recipients"] > 0


def test_subscriber_writes(mc):
  news = audience(mc, "Newsletter").id
  new = call_ok(
    mc,
    "add_subscriber",
    {"audience_id": news, "email": "New.Reader@Example.com", "name": "New", "tags": ["blog"]},
  )
  assert new["email"] == "new.reader@example.com" and new["status"] == "subscribed"
  assert mc.state.subscribers.get(new["id"]).tags == ("blog",)
  tags = call_ok(
    mc, "update_subscriber_tags", {"subscriber_id": new["id"], "add": ["vip"], "remove": ["blog"]}
  )
  assert tags["tags"] == ["vip"]
  assert call_ok(mc, "unsubscribe", {"subscriber_id": new["id"]})["status"] == "unsubscribed"
  back = call_ok(
    mc,
    "add_subscriber",
    {"audience_id": news, "email": new["email"], "tags": ["trial"], "resubscribe": True},
  )
  assert back["id"] == new["id"] and back["status"] == "subscribed"
  assert back["tags"] == ["trial", "vip"] and back["name"] == "New"


def test_campaign_lifecycle(mc):
  news = audience(mc, "Newsletter").id
  c = call_ok(
    mc, "create_campaign", {"name": "April", "subject": "April news", "audience_id": news}
  )
  assert c["status"] == "draft" and c["body"] == ""
  c = call_ok(mc, "update_campaign", {"campaign_id": c["id"], "body": "Hello!", "name": "Apr"})
  assert c["body"] == "Hello!" and c["name"] == "Apr" and c["subject"] == "April news"
  sch = call_ok(mc, "schedule_campaign", {"campaign_id": c["id"], "send_at": "2026-04-01T09:00:00"})
  assert sch["status"] == "scheduled" and sch["send_at"] == "2026-04-01T09:00:00"
  back = call_ok(mc, "unschedule_campaign", {"campaign_id": c["id"]})
  assert back["status"] == "draft" and back["send_at"] is None
  reach = [s for s in mc.state.subscribers if s.audience_id == news and s.status == "subscribed"]
  report = call_ok(mc, "send_campaign", {"campaign_id": c["id"]})
  assert report["id"] == c["id"] and report["recipients"] == len(reach)
  assert report["delivered"] == report["recipients"] - report["bounces"]
  assert mc.state.campaigns.get(c["id"]).status == "sent"
  assert call_ok(mc, "get_campaign_report", {"campaign_id": c["id"]}) == report
  after = {s.id: s.status for s in mc.state.subscribers if s.id in {r.id for r in reach}}
  assert sum(v == "cleaned" for v in after.values()) == report["bounces"]
  assert sum(v == "unsubscribed" for v in after.values()) == report["unsubscribes"]
  # A segment sends only to members with the tag.
  tag = next(t for s in reach for t in s.tags)
  seg = call_ok(
    mc,
    "create_campaign",
    {"name": "S", "subject": "S", "audience_id": news, "body": "b", "segment_tag": tag},
  )
  tagged = [s for s in mc.state.subscribers if s.audience_id == news and tag in s.tags]
  got = call_ok(mc, "send_campaign", {"campaign_id": seg["id"]})
  assert got["recipients"] == sum(s.status == "subscribed" for s in tagged)
  scheduled = campaign(mc, "scheduled")
  assert call_ok(mc, "send_campaign", {"campaign_id": scheduled.id})["recipients"] >= 0
  assert mc.state.campaigns.get(scheduled.id).send_at is None


def test_error_paths_are_atomic(mc):
  news, empty = audience(mc, "Newsletter").id, audience(mc, "Webinar waitlist").id
  gone, bounced = subscriber(mc, "unsubscribed"), subscriber(mc, "cleaned")
  live = subscriber(mc, "subscribed")
  sent, scheduled = campaign(mc, "sent"), campaign(mc, "scheduled")
  blank = campaign(mc, "draft", body="")
  to_empty = campaign(mc, "draft", audience_id=empty)
  call_fails(mc, "search_subscribers", {"audience_id": "aud_x"}, 404, "aud_x")
  call_fails(mc, "search_subscribers", {"status": "gone"}, 400, "status")
  call_fails(mc, "list_campaigns", {"audience_id": "aud_x"}, 404, "aud_x")
  call_fails(mc, "list_campaigns", {"offset": -1}, 400, "offset")
  call_fails(mc, "get_campaign_report", {}, 400, "campaign_id")
  call_fails(mc, "get_campaign_report", {"campaign_id": "cmp_x"}, 404, "cmp_x")
  call_fails(mc, "get_campaign_report", {"campaign_id": blank.id}, 409, "once sent")
  add = {"audience_id": news, "email": "z@example.com"}
  call_fails(mc, "add_subscriber", {**add, "audience_id": "aud_x"}, 404, "aud_x")
  call_fails(mc, "add_subscriber", {**add, "email": "nope"}, 400, "email")
  call_fails(mc, "add_subscriber", {**add, "tags": [""]}, 400, "tags")
  mine = {"audience_id": live.audience_id}
  call_fails(mc, "add_subscriber", {**mine, "email": live.email.upper()}, 409, "already")
  back = {"audience_id": gone.audience_id, "email": gone.email}
  call_fails(mc, "add_subscriber", back, 409, "resubscribe=True")
  dead = {"audience_id": bounced.audience_id, "email": bounced.email, "resubscribe": True}
  call_fails(mc, "add_subscriber", dead, 409, "cleaned")
  tags = {"subscriber_id": live.id}
  call_fails(mc, "update_subscriber_tags", {"subscriber_id": "sub_x", "add": ["a"]}, 404, "sub_x")
  call_fails(mc, "update_subscriber_tags", tags, 400, "add or remove")
  call_fails(mc, "update_subscriber_tags", {**tags, "add": ["a"], "remove": ["a"]}, 400, "both")
  call_fails(mc, "update_subscriber_tags", {**tags, "remove": ["zz-none"]}, 409, "already has")
  call_fails(mc, "unsubscribe", {"subscriber_id": "sub_x"}, 404, "sub_x")
  call_fails(mc, "unsubscribe", {"subscriber_id": gone.id}, 409, "unsubscribed")
  new = {"name": "n", "subject": "s", "audience_id": "aud_x"}
  call_fails(mc, "create_campaign", new, 404, "aud_x")
  call_fails(mc, "create_campaign", {**new, "audience_id": news, "subject": ""}, 400, "subject")
  call_fails(mc, "update_campaign", {"campaign_id": "cmp_x", "name": "n"}, 404, "cmp_x")
  call_fails(mc, "update_campaign", {"campaign_id": blank.id}, 400, "at least one")
  call_fails(mc, "update_campaign", {"campaign_id": sent.id, "name": "n"}, 409, "already sent")
  call_fails(mc, "update_campaign", {"campaign_id": scheduled.id, "name": "n"}, 409, "unschedule")
  call_fails(mc, "update_campaign", {"campaign_id": blank.id, "audience_id": "aud_x"}, 404, "aud_x")
  later = "2026-04-01T09:00:00"
  call_fails(mc, "schedule_campaign", {"campaign_id": "cmp_x", "send_at": later}, 404, "cmp_x")
  call_fails(mc, "schedule_campaign", {"campaign_id": blank.id, "send_at": "x"}, 400, "send_at")
  past = {"campaign_id": to_empty.id, "send_at": "2026-03-01T09:00:00"}
  call_fails(mc, "schedule_campaign", past, 400, "future")
  call_fails(mc, "schedule_campaign", {**past, "send_at": later}, 409, "no subscribed members")
  call_fails(mc, "schedule_campaign", {"campaign_id": blank.id, "send_at": later}, 409, "content")
  call_fails(mc, "schedule_campaign", {"campaign_id": sent.id, "send_at": later}, 409, "sent")
  call_fails(mc, "unschedule_campaign", {"campaign_id": "cmp_x"}, 404, "cmp_x")
  call_fails(mc, "unschedule_campaign", {"campaign_id": blank.id}, 409, "not scheduled")
  call_fails(mc, "unschedule_campaign", {"campaign_id": sent.id}, 409, "already sent")
  call_fails(mc, "send_campaign", {"campaign_id": "cmp_x"}, 404, "cmp_x")
  call_fails(mc, "send_campaign", {"campaign_id": sent.id}, 409, "already sent")
  call_fails(mc, "send_campaign", {"campaign_id": to_empty.id}, 409, "reach nobody")
  call_fails(mc, "send_campaign", {"campaign_id": blank.id}, 409, "no content")
