from collections import Counter

import pytest

from envs._world import world
from envs.simosphere import SimosphereService
from tests.contract import call_fails, call_ok

SEED = 3
ME = world(SEED).people[0].email


@pytest.fixture
def sim():
  return SimosphereService.create(seed=SEED)


def messages(sim, **filters):
  return call_ok(sim, "search_messages", {"limit": 100, **filters})["items"]


def document(sim, title):
  return call_ok(sim, "list_documents", {"query": title})["items"][0]


def test_seeded_data_is_sized():
  a = SimosphereService.create(seed=5)
  msgs = list(a.state.messages)
  assert len(msgs) == 40 and 10 <= len({m.thread_id for m in msgs}) <= 20
  folders = Counter(m.folder for m in msgs)
  assert folders["inbox"] > folders["sent"] > 0 and folders["drafts"] > 0
  assert {m.read for m in msgs if m.folder == "inbox"} == {True, False}
  me = world(5).people[0].email
  assert all(m.sender == me for m in msgs if m.folder in ("sent", "drafts"))
  assert all(me in m.to + m.cc for m in msgs if m.sender != me)
  assert all(m.sent_at < a.state.now for m in msgs)
  assert len(a.state.documents) == 6 and len(a.state.invitations) == 2
  big = SimosphereService.create(seed=5, size=150)
  assert len(big.state.messages) == 150 and len(big.state.documents) == 6


def test_search_messages_filters_and_pages(sim):
  page = call_ok(sim, "search_messages", {"limit": 5})
  assert page["total"] == 40 and len(page["items"]) == 5 and page["next_offset"] == 5
  dates = [m["sent_at"] for m in page["items"]]
  assert dates == sorted(dates, reverse=True)
  rest = call_ok(sim, "search_messages", {"limit": 100, "offset": 5})["items"]
  assert {m["id"] for m in rest}.isdisjoint(m["id"] for m in page["items"])
  sent = messages(sim, folder="sent")
  assert sent and all(m["folder"] == "sent" and m["sender"] == ME for m in sent)
  unread = messages(sim, unread_only=True)
  assert unread and all(not m["read"] for m in unread)
  who = messages(sim, folder="inbox")[0]["sender"]
  theirs = messages(sim, sender=who.upper())
  assert theirs and all(m["sender"] == who for m in theirs)
  word = messages(sim, folder="inbox")[-1]["subject"].split()[-1]
  hits = messages(sim, query=f"re: {word.upper()}")
  assert hits and all(word.lower() in (m["subject"] + m["body"]).lower() for m in hits)
  assert messages(sim, query="zebra quantum") == []


def test_read_message_and_thread(sim):
  msg = messages(sim)[0]
  got = call_ok(sim, "read_message", {"message_id": msg["id"]})
  assert got == msg and got["body"].startswith("Hi ")
  thread = call_ok(sim, "get_thread", {"thread_id": msg["thread_id"]})
  assert msg["id"] in [m["id"] for m in thread]
  assert all(m["thread_id"] == msg["thread_id"] for m in thread)
  assert [m["sent_at"] for m in thread] == sorted(m["sent_at"] for m in thread)
  assert len({m["subject"].removeprefix("Re: ") for m in thread}) == 1


def test_documents_and_invitations_are_listed(sim):
  page = call_ok(sim, "list_documents", {"limit": 100})
  assert page["total"] == 6
  assert all(set(d) == {"id", "title", "kind", "owner", "updated_at"} for d in page["items"])
  stamps = [d["updated_at"] for d in page["items"]]
  assert stamps == sorted(stamps, reverse=True)
  sheet = document(sim, "Office inventory")
  assert sheet["kind"] == "sheet" and sheet["owner"] == ME
  full = call_ok(sim, "read_document", {"document_id": sheet["id"]})
  assert full["content"].startswith("item,quantity,location")
  assert [d["title"] for d in call_ok(sim, "list_documents", {"query": "billing"})["items"]] == [
    "Q2 planning notes"
  ]
  invs = call_ok(sim, "list_invitations")
  assert invs["total"] == 2 and all(i["status"] == "sent" for i in invs["items"])
  assert [i["start"] for i in invs["items"]] == sorted(i["start"] for i in invs["items"])
  assert any(i["meeting_link"] for i in invs["items"])


def test_send_and_reply(sim):
  sent_at = sim.state.now
  sent = call_ok(
    sim,
    "send_message",
    {
      "to": ["Ann.Lee@example.com", "ann.lee@example.com"],
      "cc": ["bo@example.com", "ANN.LEE@example.com"],
      "subject": "Lunch",
      "body": "Noon?",
    },
  )
  assert sent["to"] == ["ann.lee@example.com"] and sent["cc"] == ["bo@example.com"]
  assert (sent["folder"], sent["sender"], sent["read"]) == ("sent", ME, True)
  assert sent["sent_at"] == sent_at.isoformat() and sim.state.now > sent_at
  stored = sim.state.messages.get(sent["id"])
  assert stored.thread_id == sent["thread_id"] and stored.subject == "Lunch"
  assert call_ok(sim, "get_thread", {"thread_id": sent["thread_id"]}) == [sent]
  assert messages(sim, folder="sent")[0]["id"] == sent["id"]
  # replying to your own message goes to its recipients
  own = call_ok(sim, "reply_to_message", {"message_id": sent["id"], "body": "Or 1pm?"})
  assert own["to"] == ["ann.lee@example.com"] and own["subject"] == "Re: Lunch"
  assert own["thread_id"] == sent["thread_id"]
  # replying to received mail goes to its sender, in its thread, without a second "Re:"
  inbound = next(m for m in messages(sim, folder="inbox") if m["subject"].startswith("Re: "))
  reply = call_ok(sim, "reply_to_message", {"message_id": inbound["id"], "body": "Thanks!"})
  assert reply["to"] == [inbound["sender"]] and reply["subject"] == inbound["subject"]
  assert (reply["thread_id"], reply["folder"], reply["sender"]) == (
    inbound["thread_id"],
    "sent",
    ME,
  )
  first = next(m for m in messages(sim, folder="inbox") if not m["subject"].startswith("Re: "))
  fresh = call_ok(sim, "reply_to_message", {"message_id": first["id"], "body": "On it."})
  assert fresh["subject"] == "Re: " + first["subject"]
  thread = call_ok(sim, "get_thread", {"thread_id": inbound["thread_id"]})
  assert thread[-1]["id"] == reply["id"]
  assert len(sim.state.messages) == 44


def test_mark_read_and_archive(sim):
  unread = messages(sim, unread_only=True)[0]
  got = call_ok(sim, "mark_read", {"message_id": unread["id"]})
  assert got["read"] is True and sim.state.messages.get(unread["id"]).read is True
  assert unread["id"] not in [m["id"] for m in messages(sim, unread_only=True)]
  inbox = messages(sim, folder="inbox")[0]
  archived = call_ok(sim, "archive_message", {"message_id": inbox["id"]})
  assert archived["folder"] == "archive"
  assert sim.state.messages.get(inbox["id"]).folder == "archive"
  assert inbox["id"] in [m["id"] for m in messages(sim, folder="archive")]


def test_documents_create_update_share(sim):
  doc = call_ok(sim, "create_document", {"title": "Budget", "content": "a,b", "kind": "sheet"})
  assert (doc["owner"], doc["kind"], doc["shared_with"]) == (ME, "sheet", [])
  assert document(sim, "Budget")["id"] == doc["id"]
  upd = call_ok(sim, "update_document", {"document_id": doc["id"], "title": "Budget v2"})
  assert upd["title"] == "Budget v2" and upd["content"] == "a,b"
  assert upd["updated_at"] > doc["updated_at"]
  upd = call_ok(sim, "update_document", {"document_id": doc["id"], "content": ""})
  assert sim.state.documents.get(doc["id"]).content == "" and upd["title"] == "Budget v2"
  shared = call_ok(
    sim,
    "share_document",
    {"document_id": doc["id"], "emails": ["X@example.com", "x@example.com", ME]},
  )
  assert shared["shared_with"] == ["x@example.com"]
  # a document shared with the user can be edited by them
  pipeline = document(sim, "Hiring pipeline")
  assert pipeline["owner"] != ME
  call_ok(sim, "update_document", {"document_id": pipeline["id"], "content": "candidate"})
  assert sim.state.documents.get(pipeline["id"]).content == "candidate"


def test_invitations_send_and_cancel(sim):
  inv = call_ok(
    sim,
    "send_meeting_invitation",
    {
      "subject": "Design sync",
      "start": "2026-03-10T10:00:00",
      "end": "2026-03-10T10:30:00",
      "invitees": ["a.b@example.com", "A.B@example.com", "c@example.com"],
      "meeting_link": "https://meet.example.com/abc",
    },
  )
  assert inv["invitees"] == ["a.b@example.com", "c@example.com"]
  assert (inv["status"], inv["location"], inv["meeting_link"]) == (
    "sent",
    "",
    "https://meet.example.com/abc",
  )
  assert sim.state.invitations.get(inv["id"]).subject == "Design sync"
  assert call_ok(sim, "list_invitations")["total"] == 3
  got = call_ok(sim, "cancel_invitation", {"invitation_id": inv["id"]})
  assert got["status"] == "cancelled"
  assert sim.state.invitations.get(inv["id"]).status == "cancelled"


def test_error_paths_are_atomic(sim):
  inbox = messages(sim, folder="inbox")[0]
  draft = messages(sim, folder="drafts")[0]
  read = messages(sim, folder="sent")[0]
  handbook = document(sim, "Team handbook")
  mine = document(sim, "Office inventory")
  inv = call_ok(sim, "list_invitations")["items"][0]
  # missing, ill-typed and out-of-range arguments
  for tool, arg in (
    ("read_message", "message_id"),
    ("get_thread", "thread_id"),
    ("read_document", "document_id"),
    ("mark_read", "message_id"),
    ("archive_message", "message_id"),
    ("cancel_invitation", "invitation_id"),
  ):
    call_fails(sim, tool, {}, 400, arg)
    call_fails(sim, tool, {arg: 7}, 400, arg, "string")
  call_fails(sim, "search_messages", {"limit": 0}, 400, "limit")
  call_fails(sim, "search_messages", {"folder": "spam"}, 400, "folder")
  call_fails(sim, "search_messages", {"sender": "not-an-email"}, 400, "sender")
  call_fails(sim, "list_documents", {"offset": -1}, 400, "offset")
  call_fails(sim, "list_invitations", {"limit": 101}, 400, "limit")
  call_fails(sim, "send_message", {"to": ["a@example.com"], "subject": "x"}, 400, "body")
  call_fails(sim, "send_message", {"to": "a@example.com", "subject": "x", "body": ""}, 400, "to")
  call_fails(sim, "send_message", {"to": ["nope"], "subject": "x", "body": ""}, 400, "to")
  call_fails(sim, "send_message", {"to": [], "subject": "x", "body": "y"}, 400, "to")
  call_fails(sim, "reply_to_message", {"message_id": inbox["id"], "body": ""}, 400, "body")
  call_fails(sim, "create_document", {"title": "x", "content": "", "kind": "pdf"}, 400, "kind")
  call_fails(sim, "create_document", {"title": "", "content": "y"}, 400, "title")
  call_fails(sim, "update_document", {"document_id": mine["id"]}, 400, "at least", "content")
  call_fails(sim, "share_document", {"document_id": mine["id"], "emails": []}, 400, "emails")
  meeting = {"subject": "x", "start": "2026-03-10T10:00", "end": "2026-03-10T11:00"}
  call_fails(sim, "send_meeting_invitation", meeting, 400, "invitees")
  call_fails(sim, "send_meeting_invitation", {**meeting, "invitees": []}, 400, "invitees")
  call_fails(
    sim,
    "send_meeting_invitation",
    {**meeting, "end": "2026-03-10T10:00", "invitees": ["a@example.com"]},
    400,
    "after",
  )
  call_fails(
    sim,
    "send_meeting_invitation",
    {**meeting, "start": "soon", "invitees": ["a@example.com"]},
    400,
    "start",
  )
  call_fails(
    sim,
    "send_meeting_invitation",
    {**meeting, "invitees": ["a@example.com"], "meeting_link": "meet me"},
    400,
    "meeting_link",
  )
  # unknown ids
  call_fails(sim, "read_message", {"message_id": "msg_nope"}, 404, "msg_nope")
  call_fails(sim, "get_thread", {"thread_id": "thr_nope"}, 404, "thr_nope")
  call_fails(sim, "read_document", {"document_id": "doc_nope"}, 404, "doc_nope")
  call_fails(sim, "reply_to_message", {"message_id": "msg_nope", "body": "x"}, 404, "msg_nope")
  call_fails(sim, "mark_read", {"message_id": "msg_nope"}, 404, "msg_nope")
  call_fails(sim, "archive_message", {"message_id": "msg_nope"}, 404, "msg_nope")
  call_fails(sim, "update_document", {"document_id": "doc_nope", "title": "x"}, 404, "doc_nope")
  call_fails(
    sim, "share_document", {"document_id": "doc_nope", "emails": ["a@example.com"]}, 404, "doc_nope"
  )
  call_fails(sim, "cancel_invitation", {"invitation_id": "inv_nope"}, 404, "inv_nope")
  # business rules
  call_fails(sim, "reply_to_message", {"message_id": draft["id"], "body": "x"}, 409, draft["id"])
  call_fails(sim, "archive_message", {"message_id": draft["id"]}, 409, draft["id"], "draft")
  call_fails(sim, "mark_read", {"message_id": read["id"]}, 409, read["id"], "already read")
  call_ok(sim, "archive_message", {"message_id": inbox["id"]})
  call_fails(sim, "archive_message", {"message_id": inbox["id"]}, 409, "already archived")
  call_fails(
    sim, "update_document", {"document_id": handbook["id"], "title": "x"}, 409, handbook["id"]
  )
  call_fails(
    sim,
    "share_document",
    {"document_id": handbook["id"], "emails": ["a@example.com"]},
    409,
    handbook["id"],
  )
  owned = sim.state.documents.get(mine["id"])
  call_ok(sim, "share_document", {"document_id": mine["id"], "emails": ["a@example.com"]})
  call_fails(
    sim,
    "share_document",
    {"document_id": mine["id"], "emails": ["A@example.com", owned.owner]},
    409,
    "already shared",
  )
  call_ok(sim, "cancel_invitation", {"invitation_id": inv["id"]})
  call_fails(sim, "cancel_invitation", {"invitation_id": inv["id"]}, 409, "already cancelled")
  call_fails(sim, "no_such_tool", {}, 404, "search_messages")
