from collections import Counter
from datetime import timedelta

import pytest

from envs._world import world
from envs.esign import EsignService
from tests.contract import call_fails, call_ok

SEED = 3
ME = world(SEED).people[0].email


@pytest.fixture
def esign():
  return EsignService.create(seed=SEED)


def envelope(esign, status, where=lambda e: True):
  return next(
    e for e in sorted(esign.state.envelopes, key=lambda e: e.id) if e.status == status and where(e)
  )


def template(esign, name):
  return next(t for t in esign.state.templates if t.name == name)


def draft(esign, *signers):
  """A fresh draft with the given (email, routing order) signers."""
  env = call_ok(esign, "create_envelope", {"title": "Side letter", "document": "We agree."})
  for email, order in signers:
    args = {"envelope_id": env["id"], "email": email, "name": email.split("@")[0]}
    call_ok(esign, "add_signer", {**args, "routing_order": order})
  return env["id"]


def test_seeded_data_is_sized():
  a = EsignService.create(seed=5)
  assert len(a.state.envelopes) == 30 and len(a.state.templates) == 6
  assert len(EsignService.create(seed=5, size=90).state.envelopes) == 90
  envs = list(a.state.envelopes)
  assert set(Counter(e.status for e in envs)) == {
    "draft",
    "sent",
    "completed",
    "declined",
    "voided",
  }
  assert any(e.status == "draft" and not e.signers for e in envs)
  for e in envs:
    assert e.created_at < a.state.now
    statuses = [s.status for s in e.signers]
    if e.status == "completed":
      assert set(statuses) == {"signed"} and e.completed_at <= a.state.now
    if e.status == "declined":
      assert statuses.count("declined") == 1
    if e.status == "sent":
      assert "sent" in statuses and e.sent_at < a.state.now
    if e.status == "draft":
      assert set(statuses) <= {"pending"} and e.sent_at is None
  # Every template has a role filled per envelope and one its company signer fills by default.
  for t in a.state.templates:
    assert {r.default_email is None for r in t.roles} == {True, False}


def test_templates(esign):
  page = call_ok(esign, "list_templates", {"limit": 100})
  assert page["total"] == 6 and "document" not in page["items"][0]
  assert [t["name"] for t in page["items"]] == sorted(t["name"] for t in page["items"])
  nda = call_ok(esign, "list_templates", {"query": "disclosure"})["items"]
  assert [t["name"] for t in nda] == ["Mutual NDA"]
  got = call_ok(esign, "get_template", {"template_id": nda[0]["id"]})
  assert "[[Counterparty]]" in got["document"] and got["roles"][0]["id"] == "Counterparty"


def test_list_and_get_envelopes(esign):
  page = call_ok(esign, "list_envelopes", {"limit": 5})
  assert page["total"] == 30 and page["next_offset"] == 5 and "document" not in page["items"][0]
  every = call_ok(esign, "list_envelopes", {"limit": 100})["items"]
  stamps = [e["created_at"] for e in every]
  assert stamps == sorted(stamps, reverse=True)
  sent = call_ok(esign, "list_envelopes", {"status": "sent", "limit": 100})["items"]
  assert sent and all(e["status"] == "sent" for e in sent)
  who = sent[0]["signers"][0]["id"]
  theirs = call_ok(esign, "list_envelopes", {"signer": who.upper(), "limit": 100})["items"]
  assert theirs and all(any(s["id"] == who for s in e["signers"]) for e in theirs)
  orders = call_ok(esign, "list_envelopes", {"query": "order form", "limit": 100})["items"]
  assert orders and all("order form" in e["title"].lower() for e in orders)
  window = {"created_after": "2026-02-01T00:00:00", "created_before": "2026-02-20T00:00:00"}
  inside = call_ok(esign, "list_envelopes", {**window, "limit": 100})["items"]
  assert inside and all("2026-02-01" <= e["created_at"] < "2026-02-20" for e in inside)
  got = call_ok(esign, "get_envelope", {"envelope_id": sent[0]["id"]})
  assert got["document"] == esign.state.envelopes.get(sent[0]["id"]).document
  assert got["waiting_for"] == [s["id"] for s in got["signers"] if s["status"] == "sent"]


def test_draft_signers_send_and_sign_in_order(esign):
  eid = draft(esign, ("a@x.com", 1), ("b@x.com", 1))
  env = call_ok(esign, "add_signer", {"envelope_id": eid, "email": "C@X.com", "name": "C"})
  assert [(s["id"], s["routing_order"]) for s in env["signers"]][-1] == ("c@x.com", 2)
  call_ok(esign, "add_signer", {"envelope_id": eid, "email": "d@x.com", "name": "D"})
  gone = call_ok(esign, "remove_signer", {"envelope_id": eid, "email": "d@x.com"})
  assert [s["id"] for s in gone["signers"]] == ["a@x.com", "b@x.com", "c@x.com"]
  sent = call_ok(esign, "send_envelope", {"envelope_id": eid})
  assert sent["status"] == "sent" and sent["waiting_for"] == ["a@x.com", "b@x.com"]
  assert esign.state.envelopes.get(eid).sent_at is not None
  one = call_ok(esign, "record_signature", {"envelope_id": eid, "email": "b@x.com"})
  assert one["waiting_for"] == ["a@x.com"] and one["status"] == "sent"
  two = call_ok(esign, "record_signature", {"envelope_id": eid, "email": "A@x.com"})
  assert two["waiting_for"] == ["c@x.com"]
  done = call_ok(esign, "record_signature", {"envelope_id": eid, "email": "c@x.com"})
  assert done["status"] == "completed" and done["waiting_for"] == []
  stored = esign.state.envelopes.get(eid)
  assert stored.completed_at is not None and {s.status for s in stored.signers} == {"signed"}


def test_create_from_template(esign):
  nda = template(esign, "Mutual NDA")
  counter = {"role": "Counterparty", "email": "Pat@Acme.com", "name": "Pat Lee"}
  env = call_ok(
    esign, "create_envelope_from_template", {"template_id": nda.id, "signers": [counter]}
  )
  assert env["status"] == "draft" and env["template_id"] == nda.id and env["sender"] == ME
  assert env["title"] == "Mutual NDA - Pat Lee"
  company = next(r for r in nda.roles if r.default_email)
  assert [(s["id"], s["role"], s["routing_order"]) for s in env["signers"]] == [
    ("pat@acme.com", "Counterparty", 1),
    (company.default_email, company.id, 2),
  ]
  assert "Pat Lee <pat@acme.com>" in env["document"] and "[[" not in env["document"]
  assert esign.state.envelopes.get(env["id"]).signers[0].name == "Pat Lee"
  other = {"role": company.id, "email": "cfo@x.com", "name": "Cfo"}
  args = {"template_id": nda.id, "signers": [counter, other], "title": "NDA for Acme"}
  custom = call_ok(esign, "create_envelope_from_template", args)
  assert custom["title"] == "NDA for Acme" and custom["signers"][1]["id"] == "cfo@x.com"
  sent = call_ok(esign, "send_envelope", {"envelope_id": custom["id"]})
  assert sent["waiting_for"] == ["pat@acme.com"]


def test_decline_void_and_remind(esign):
  eid = draft(esign, ("a@x.com", 1), ("b@x.com", 2))
  call_ok(esign, "send_envelope", {"envelope_id": eid})
  args = {"envelope_id": eid, "email": "a@x.com", "reason": "Wrong price"}
  no = call_ok(esign, "decline_envelope", args)
  assert no["status"] == "declined" and no["signers"][0]["decline_reason"] == "Wrong price"
  assert esign.state.envelopes.get(eid).signers[0].status == "declined"
  eid = draft(esign, ("a@x.com", 1))
  call_ok(esign, "send_envelope", {"envelope_id": eid})
  reminded = call_ok(esign, "resend_reminder", {"envelope_id": eid})
  assert reminded == {"envelope_id": eid, "reminded": ["a@x.com"], "reminders_sent": 1}
  assert esign.state.envelopes.get(eid).last_reminder_at is not None
  call_fails(esign, "resend_reminder", {"envelope_id": eid}, 409, "next one can go out")
  esign.state.advance(timedelta(hours=24))
  assert call_ok(esign, "resend_reminder", {"envelope_id": eid})["reminders_sent"] == 2
  void = call_ok(esign, "void_envelope", {"envelope_id": eid, "reason": "Replaced"})
  assert void["status"] == "voided" and void["void_reason"] == "Replaced"
  assert esign.state.envelopes.get(eid).voided_at is not None
  old = envelope(esign, "sent", lambda e: e.last_reminder_at is None)
  assert call_ok(esign, "resend_reminder", {"envelope_id": old.id})["reminders_sent"] == 1


def test_workflow_conflicts(esign):
  sent = envelope(esign, "sent", lambda e: any(s.status == "pending" for s in e.signers))
  done, voided = envelope(esign, "completed"), envelope(esign, "voided")
  empty = envelope(esign, "draft", lambda e: not e.signers)
  current = next(s for s in sent.signers if s.status == "sent")
  waiting = next(s for s in sent.signers if s.status == "pending")
  add = {"envelope_id": sent.id, "email": "n@x.com", "name": "N"}
  call_fails(esign, "add_signer", add, 409, "sent", "only a draft")
  call_fails(esign, "remove_signer", {"envelope_id": sent.id, "email": current.id}, 409, "draft")
  call_fails(esign, "send_envelope", {"envelope_id": sent.id}, 409, "only a draft")
  call_fails(esign, "send_envelope", {"envelope_id": empty.id}, 409, "no signers")
  sign = {"envelope_id": sent.id, "email": waiting.id}
  call_fails(esign, "record_signature", sign, 409, "not", "turn", current.id)
  call_fails(esign, "decline_envelope", {**sign, "reason": "no"}, 409, "turn")
  for closed in (done, voided, empty):
    who = closed.signers[0].id if closed.signers else "x@y.com"
    call_fails(esign, "record_signature", {"envelope_id": closed.id, "email": who}, 409, "sent")
  call_fails(esign, "void_envelope", {"envelope_id": done.id, "reason": "x"}, 409, "binding")
  call_fails(esign, "void_envelope", {"envelope_id": voided.id, "reason": "x"}, 409, "voided")
  call_fails(esign, "void_envelope", {"envelope_id": empty.id, "reason": "x"}, 409, "draft")
  call_fails(esign, "resend_reminder", {"envelope_id": done.id}, 409, "completed")
  recent = envelope(
    esign,
    "sent",
    lambda e: e.last_reminder_at and esign.state.now - e.last_reminder_at < timedelta(1),
  )
  call_fails(esign, "resend_reminder", {"envelope_id": recent.id}, 409, "was sent at")
  eid = draft(esign, ("a@x.com", 1), ("b@x.com", 2))
  dup = {"envelope_id": eid, "email": "A@x.com", "name": "A"}
  call_fails(esign, "add_signer", dup, 409, "already a signer")
  call_ok(esign, "send_envelope", {"envelope_id": eid})
  call_ok(esign, "record_signature", {"envelope_id": eid, "email": "a@x.com"})
  again = {"envelope_id": eid, "email": "a@x.com"}
  call_fails(esign, "record_signature", again, 409, "already signed")
  call_fails(esign, "decline_envelope", {**again, "reason": "x"}, 409, "already signed")


def test_argument_errors_and_unknown_ids(esign):
  nda = template(esign, "Mutual NDA")
  eid = draft(esign, ("a@x.com", 1))
  call_fails(esign, "get_envelope", {}, 400, "envelope_id")
  call_fails(esign, "get_envelope", {"envelope_id": 1}, 400, "envelope_id", "string")
  call_fails(esign, "list_envelopes", {"status": "signed"}, 400, "status")
  call_fails(esign, "list_envelopes", {"signer": "nope"}, 400, "signer")
  call_fails(
    esign,
    "list_envelopes",
    {"created_after": "2026-02-10T00:00", "created_before": "2026-02-01T00:00"},
    400,
    "created_before",
  )
  call_fails(esign, "list_templates", {"limit": 0}, 400, "limit")
  call_fails(esign, "create_envelope", {"title": "", "document": "x"}, 400, "title")
  call_fails(esign, "create_envelope", {"title": "x"}, 400, "document")
  signer = {"envelope_id": eid, "email": "n@x.com", "name": "N"}
  call_fails(esign, "add_signer", {**signer, "routing_order": 0}, 400, "routing_order")
  call_fails(esign, "add_signer", {**signer, "routing_order": 21}, 400, "routing_order")
  call_fails(esign, "add_signer", {**signer, "email": "bad"}, 400, "email")
  call_fails(esign, "add_signer", {**signer, "name": ""}, 400, "name")
  call_fails(esign, "void_envelope", {"envelope_id": eid, "reason": ""}, 400, "reason")
  call_fails(esign, "decline_envelope", {"envelope_id": eid, "email": "a@x.com"}, 400, "reason")
  pat = {"role": "Counterparty", "email": "pat@x.com", "name": "Pat"}
  for signers, needle in (
    ([], "Counterparty"),
    ([{**pat, "role": "Witness"}], "Witness"),
    ([pat, {**pat, "email": "q@x.com"}], "twice"),
    ([pat, {**pat, "role": "Company signer"}], "only one role"),
    ([{"role": "Counterparty", "email": "pat@x.com"}], "name"),
  ):
    args = {"template_id": nda.id, "signers": signers}
    call_fails(esign, "create_envelope_from_template", args, 400, needle)
  for tool, args in (
    ("get_template", {"template_id": "env_nope"}),
    ("get_envelope", {"envelope_id": "env_nope"}),
    ("create_envelope_from_template", {"template_id": "env_nope", "signers": [pat]}),
    ("add_signer", {"envelope_id": "env_nope", "email": "a@b.com", "name": "A"}),
    ("remove_signer", {"envelope_id": "env_nope", "email": "a@b.com"}),
    ("send_envelope", {"envelope_id": "env_nope"}),
    ("record_signature", {"envelope_id": "env_nope", "email": "a@b.com"}),
    ("decline_envelope", {"envelope_id": "env_nope", "email": "a@b.com", "reason": "x"}),
    ("void_envelope", {"envelope_id": "env_nope", "reason": "x"}),
    ("resend_reminder", {"envelope_id": "env_nope"}),
  ):
    call_fails(esign, tool, args, 404, "env_nope")
  call_fails(esign, "remove_signer", {"envelope_id": eid, "email": "zz@x.com"}, 404, "zz@x.com")
  sent = envelope(esign, "sent")
  for tool, extra in (("record_signature", {}), ("decline_envelope", {"reason": "x"})):
    args = {"envelope_id": sent.id, "email": "zz@x.com", **extra}
    call_fails(esign, tool, args, 404, "zz@x.com")
  call_fails(esign, "no_such_tool", {}, 404, "list_envelopes")
