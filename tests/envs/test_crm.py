import pytest

from envs._world import world
from envs.crm import STAGES, CrmService
from tests.contract import call_fails, call_ok

TOMORROW = "2026-03-03"


@pytest.fixture
def crm():
  return CrmService.create(seed=3)


def open_deal(crm, stage="prospecting"):
  return next(d for d in crm.state.deals if d.stage == stage)


def closed_deal(crm):
  return next(d for d in crm.state.deals if d.stage in ("closed_won", "closed_lost"))


def other_account_contact(crm, account_id):
  return next(c for c in crm.state.contacts if c.account_id != account_id)


def test_seeded_data_is_sized():
  a = CrmService.create(seed=5)
  assert len(a.state.deals) == 24 and len(a.state.accounts) == len(world(5).customers)
  assert len(CrmService.create(seed=5, size=80).state.deals) == 80
  emails = [c.email for c in a.state.contacts]
  assert len(emails) == len(set(emails))
  names = {c.name for c in world(5).customers}
  assert {acc.name for acc in a.state.accounts} == names
  staff = {p.email for p in world(5).people}
  assert all(acc.owner in staff for acc in a.state.accounts)
  for d in a.state.deals:
    assert d.account_id in a.state.accounts and d.amount >= 0
    closed = d.stage in ("closed_won", "closed_lost")
    assert (d.close_date < a.state.now.date()) == closed
    assert (d.lost_reason is not None) == (d.stage == "closed_lost")
  stages = {d.stage for d in CrmService.create(seed=5, size=80).state.deals}
  assert len(stages) == 6


def test_account_and_contact_reads(crm):
  page = call_ok(crm, "search_accounts", {"limit": 4})
  assert page["total"] == 10 and len(page["items"]) == 4 and page["next_offset"] == 4
  names = [a["name"] for a in page["items"]]
  assert names == sorted(names)
  acc = page["items"][0]
  hits = call_ok(crm, "search_accounts", {"query": acc["name"].split()[0]})["items"]
  assert acc["id"] in [a["id"] for a in hits]
  tiered = call_ok(crm, "search_accounts", {"tier": acc["tier"], "limit": 100})["items"]
  assert tiered and all(a["tier"] == acc["tier"] for a in tiered)
  owned = call_ok(crm, "search_accounts", {"owner": acc["owner"], "limit": 100})["items"]
  assert all(a["owner"] == acc["owner"] for a in owned)
  by_ind = call_ok(crm, "search_accounts", {"industry": acc["industry"].upper()})["items"]
  assert acc["id"] in [a["id"] for a in by_ind]
  full = call_ok(crm, "get_account", {"account_id": acc["id"]})
  assert full["name"] == acc["name"] and full["contacts"]
  assert all(c["account_id"] == acc["id"] for c in full["contacts"] + full["deals"])
  contacts = call_ok(crm, "search_contacts", {"account_id": acc["id"], "limit": 100})
  assert contacts["total"] == len(full["contacts"])
  person = contacts["items"][0]
  found = call_ok(crm, "search_contacts", {"query": person["email"]})["items"]
  assert [c["id"] for c in found] == [person["id"]]


def test_deal_reads_and_pipeline(crm):
  deals = call_ok(crm, "list_deals", {"limit": 100})["items"]
  assert len(deals) == 24
  assert [d["close_date"] for d in deals] == sorted(d["close_date"] for d in deals)
  stage = deals[0]["stage"]
  assert all(d["stage"] == stage for d in call_ok(crm, "list_deals", {"stage": stage})["items"])
  live = call_ok(crm, "list_deals", {"open_only": True, "limit": 100})["items"]
  assert live and all(d["stage"] not in ("closed_won", "closed_lost") for d in live)
  owner = deals[0]["owner"]
  mine = call_ok(crm, "list_deals", {"owner": owner, "limit": 100})["items"]
  assert mine and all(d["owner"] == owner for d in mine)
  acc = deals[0]["account_id"]
  assert all(
    d["account_id"] == acc for d in call_ok(crm, "list_deals", {"account_id": acc})["items"]
  )
  assert call_ok(crm, "get_deal", {"deal_id": deals[0]["id"]}) == deals[0]
  summary = call_ok(crm, "pipeline_summary")
  assert summary["currency"] == world(3).currency
  assert [s["stage"] for s in summary["by_stage"]] == list(STAGES)
  assert sum(s["count"] for s in summary["by_stage"]) == 24
  assert summary["open_count"] == len(live)
  assert summary["open_amount"] == pytest.approx(sum(d["amount"] for d in live))
  assert 0 < summary["weighted_amount"] < summary["open_amount"]
  theirs = call_ok(crm, "pipeline_summary", {"owner": owner})
  assert sum(s["count"] for s in theirs["by_stage"]) == len(mine)
  assert call_ok(crm, "pipeline_summary", {"currency": "JPY"})["open_count"] == 0


def test_contact_writes(crm):
  acc = next(iter(crm.state.accounts))
  con = call_ok(
    crm,
    "create_contact",
    {"account_id": acc.id, "name": "Ada Byron", "email": "Ada@Example.com", "title": "CTO"},
  )
  assert con["email"] == "ada@example.com" and con["account_id"] == acc.id
  assert crm.state.contacts.get(con["id"]).title == "CTO"
  upd = call_ok(crm, "update_contact", {"contact_id": con["id"], "phone": "+1-555-000-1111"})
  assert upd["phone"] == "+1-555-000-1111" and upd["name"] == "Ada Byron"
  call_ok(crm, "update_contact", {"contact_id": con["id"], "email": "ada@example.com"})
  moved = call_ok(crm, "update_contact", {"contact_id": con["id"], "email": "ada@new.com"})
  assert crm.state.contacts.get(moved["id"]).email == "ada@new.com"


def test_deal_lifecycle(crm):
  acc = next(iter(crm.state.accounts))
  contact = next(c for c in crm.state.contacts if c.account_id == acc.id)
  deal = call_ok(
    crm,
    "create_deal",
    {
      "account_id": acc.id,
      "name": "Fleet rollout",
      "amount": 12000,
      "close_date": "2026-05-01",
      "contact_id": contact.id,
    },
  )
  assert deal["stage"] == "prospecting" and deal["owner"] == acc.owner
  assert deal["currency"] == world(3).currency
  upd = call_ok(crm, "update_deal", {"deal_id": deal["id"], "amount": 15000.5, "owner": acc.owner})
  assert upd["amount"] == 15000.5 and crm.state.deals.get(deal["id"]).amount == 15000.5
  call_ok(crm, "update_deal_stage", {"deal_id": deal["id"], "stage": "proposal"})
  won = call_ok(crm, "update_deal_stage", {"deal_id": deal["id"], "stage": "closed_won"})
  assert won["stage"] == "closed_won" and won["close_date"] == "2026-03-02"
  assert crm.state.deals.get(deal["id"]).closed_at is not None
  lost = call_ok(
    crm,
    "update_deal_stage",
    {"deal_id": open_deal(crm).id, "stage": "closed_lost", "lost_reason": "No budget"},
  )
  assert lost["lost_reason"] == "No budget"


def test_activities(crm):
  deal = open_deal(crm)
  note = call_ok(crm, "log_activity", {"kind": "note", "subject": "Met CFO", "deal_id": deal.id})
  assert note["done"] and note["owner"] == deal.owner and note["completed_at"]
  task = call_ok(
    crm,
    "log_activity",
    {
      "kind": "task",
      "subject": "Send quote",
      "deal_id": deal.id,
      "contact_id": deal.contact_id,
      "due": "2026-03-05T10:00:00",
    },
  )
  assert not task["done"]
  listed = call_ok(crm, "list_activities", {"deal_id": deal.id, "open_only": True})["items"]
  assert task["id"] in [a["id"] for a in listed] and all(not a["done"] for a in listed)
  tasks = call_ok(crm, "list_activities", {"kind": "task", "limit": 100})["items"]
  assert all(a["kind"] == "task" for a in tasks)
  by_contact = call_ok(crm, "list_activities", {"contact_id": deal.contact_id})["items"]
  assert task["id"] in [a["id"] for a in by_contact]
  done = call_ok(crm, "complete_activity", {"activity_id": task["id"], "outcome": "Sent"})
  assert done["done"] and done["notes"] == "Sent"
  assert crm.state.activities.get(task["id"]).completed_at is not None


def test_error_paths_are_atomic(crm):
  acc = next(iter(crm.state.accounts))
  con = next(c for c in crm.state.contacts if c.account_id == acc.id)
  deal, shut = open_deal(crm, "proposal"), closed_deal(crm)
  stranger = other_account_contact(crm, deal.account_id)
  call_fails(crm, "get_account", {}, 400, "account_id")
  call_fails(crm, "get_account", {"account_id": 5}, 400, "account_id")
  call_fails(crm, "get_account", {"account_id": "acc_x"}, 404, "acc_x")
  call_fails(crm, "get_deal", {"deal_id": "deal_x"}, 404, "deal_x")
  call_fails(crm, "search_accounts", {"tier": "huge"}, 400, "tier")
  call_fails(crm, "search_contacts", {"account_id": "acc_x"}, 404, "acc_x")
  call_fails(crm, "list_deals", {"account_id": "acc_x"}, 404, "acc_x")
  call_fails(crm, "list_deals", {"limit": 0}, 400, "limit")
  call_fails(crm, "list_activities", {"deal_id": "deal_x"}, 404, "deal_x")
  call_fails(crm, "list_activities", {"contact_id": "con_x"}, 404, "con_x")
  call_fails(crm, "pipeline_summary", {"currency": "dollars"}, 400, "currency")
  new = {"account_id": acc.id, "name": "X", "email": con.email.upper()}
  call_fails(crm, "create_contact", new, 409, con.email, "unique")
  call_fails(crm, "create_contact", {**new, "email": "nope"}, 400, "email")
  call_fails(crm, "create_contact", {**new, "account_id": "acc_x"}, 404, "acc_x")
  call_fails(crm, "update_contact", {"contact_id": "con_x", "name": "Y"}, 404, "con_x")
  call_fails(crm, "update_contact", {"contact_id": con.id}, 400, "at least one")
  twin = next(c for c in crm.state.contacts if c.id != con.id)
  call_fails(crm, "update_contact", {"contact_id": twin.id, "email": con.email}, 409, "unique")
  base = {"account_id": acc.id, "name": "D", "amount": 10, "close_date": TOMORROW}
  call_fails(crm, "create_deal", {**base, "account_id": "acc_x"}, 404, "acc_x")
  call_fails(crm, "create_deal", {**base, "amount": -1}, 400, "amount")
  call_fails(crm, "create_deal", {**base, "close_date": "2026-03-01"}, 400, "close_date", "past")
  call_fails(crm, "create_deal", {**base, "stage": "closed_won"}, 400, "stage")
  call_fails(crm, "create_deal", {**base, "owner": "who@nowhere.com"}, 404, "who@nowhere.com")
  call_fails(crm, "create_deal", {**base, "contact_id": "con_x"}, 404, "con_x")
  other = other_account_contact(crm, acc.id)
  call_fails(crm, "create_deal", {**base, "contact_id": other.id}, 409, "does not work for")
  call_fails(crm, "update_deal", {"deal_id": "deal_x", "name": "n"}, 404, "deal_x")
  call_fails(crm, "update_deal", {"deal_id": deal.id}, 400, "at least one")
  call_fails(crm, "update_deal", {"deal_id": deal.id, "close_date": "2025-01-01"}, 400, "past")
  call_fails(crm, "update_deal", {"deal_id": deal.id, "owner": "x@y.com"}, 404, "x@y.com")
  call_fails(crm, "update_deal", {"deal_id": shut.id, "amount": 1}, 409, "closed deals")
  stage = {"deal_id": deal.id}
  call_fails(crm, "update_deal_stage", {**stage, "stage": "qualification"}, 409, "forward")
  call_fails(crm, "update_deal_stage", {**stage, "stage": "proposal"}, 409, "already")
  call_fails(crm, "update_deal_stage", {**stage, "stage": "closed_lost"}, 400, "lost_reason")
  bad = {**stage, "stage": "negotiation", "lost_reason": "x"}
  call_fails(crm, "update_deal_stage", bad, 400, "lost_reason")
  call_fails(crm, "update_deal_stage", {**stage, "stage": "won"}, 400, "stage")
  call_fails(crm, "update_deal_stage", {"deal_id": "deal_x", "stage": "proposal"}, 404, "deal_x")
  call_fails(crm, "update_deal_stage", {"deal_id": shut.id, "stage": "closed_won"}, 409, "closed")
  act = {"kind": "call", "subject": "s", "deal_id": deal.id}
  call_fails(crm, "log_activity", {"kind": "call", "subject": "s"}, 400, "contact_id")
  call_fails(crm, "log_activity", {**act, "kind": "fax"}, 400, "kind")
  call_fails(crm, "log_activity", {**act, "deal_id": "deal_x"}, 404, "deal_x")
  call_fails(crm, "log_activity", {**act, "contact_id": "con_x"}, 404, "con_x")
  call_fails(crm, "log_activity", {**act, "contact_id": stranger.id}, 409, "same account")
  call_fails(crm, "log_activity", {**act, "kind": "task"}, 400, "due")
  call_fails(crm, "log_activity", {**act, "kind": "note", "due": "2026-04-01T09:00"}, 400, "due")
  call_fails(crm, "log_activity", {**act, "due": "2026-01-01T09:00"}, 400, "future")
  call_fails(crm, "complete_activity", {"activity_id": "act_x"}, 404, "act_x")
  done = next(a for a in crm.state.activities if a.done)
  call_fails(crm, "complete_activity", {"activity_id": done.id}, 409, "already done")
