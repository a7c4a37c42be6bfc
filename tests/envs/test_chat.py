from datetime import timedelta

import pytest

from envs._world import world
from envs.chat import Channel, ChatService, Message
from tests.contract import call_fails, call_ok


@pytest.fixture
def chat():
  return ChatService.create(seed=3)


def channel_named(chat, name):
  return next(c for c in chat.state.channels if c.name == name)


def a_thread(chat, channel_id):
  """A top-level message of ``channel_id`` that has replies, and one of its replies."""
  for m in chat.state.messages:
    if m.thread_ts_id and chat.state.messages.get(m.thread_ts_id).channel_id == channel_id:
      return chat.state.messages.get(m.thread_ts_id), m
  raise AssertionError(f"no thread in {channel_id}")


def add_secret_channel(chat):
  """A private channel the user is not in, with one message (setup for the 409 paths)."""
  owner = chat.state.users.ids()[5]
  chat.state.channels.insert(
    Channel(id="ch_secret", name="secret", is_private=True, members=(owner,), created_by=owner)
  )
  chat.state.messages.insert(
    Message(id="msg_secret", channel_id="ch_secret", author=owner, text="psst", ts=chat.state.now)
  )


def test_seeded_data_is_sized():
  a = ChatService.create(seed=5)
  assert len(ChatService.create(seed=5, size=200).state.messages) == 200
  s = a.state
  assert s.current_user == world(5).people[0].handle
  assert len(s.users) == len(world(5).people)
  assert sum(u.deactivated for u in s.users) == 1
  names = {c.name for c in s.channels}
  assert {"general", "random", "eng", "sales", "support-escalations"} <= names
  assert len(names) == 6 and sum(c.is_private for c in s.channels) == 1
  assert len(s.messages) == 60 and len(s.dms) == 3
  assert all(s.current_user in d.members and len(d.members) == 2 for d in s.dms)
  assert any(m.thread_ts_id for m in s.messages) and any(m.reactions for m in s.messages)
  assert all(m.ts <= s.now for m in s.messages)


def test_list_and_get_channels(chat):
  add_secret_channel(chat)
  page = call_ok(chat, "list_channels", {"limit": 4})
  assert page["total"] == 6 and len(page["items"]) == 4 and page["next_offset"] == 4
  everything = call_ok(chat, "list_channels", {"limit": 100})["items"]
  names = [c["name"] for c in everything]
  assert names == sorted(names) and "secret" not in names
  private = next(c for c in everything if c["is_private"])
  assert chat.state.current_user in private["members"]
  got = call_ok(chat, "get_channel", {"channel_id": private["id"]})
  assert got == private


def test_read_channel_and_thread(chat):
  eng = channel_named(chat, "eng")
  page = call_ok(chat, "read_channel", {"channel_id": eng.id, "limit": 100})
  items = page["items"]
  assert items and all(m["channel_id"] == eng.id and m["thread_ts_id"] is None for m in items)
  assert [m["ts"] for m in items] == sorted((m["ts"] for m in items), reverse=True)
  for m in items:
    assert m["reply_count"] == sum(1 for r in chat.state.messages if r.thread_ts_id == m["id"])
  parent, reply = a_thread(chat, eng.id)
  thread = call_ok(chat, "read_thread", {"message_id": reply.id})
  assert thread["parent"]["id"] == parent.id
  assert reply.id in [r["id"] for r in thread["replies"]]
  assert [r["ts"] for r in thread["replies"]] == sorted(r["ts"] for r in thread["replies"])
  assert thread["reply_count"] == len(thread["replies"])
  assert call_ok(chat, "read_thread", {"message_id": parent.id}) == thread
  dm = next(iter(chat.state.dms))
  dm_page = call_ok(chat, "read_channel", {"channel_id": dm.id, "limit": 100})
  assert all(m["channel_id"] == dm.id for m in dm_page["items"])


def test_search_find_user_and_dms(chat):
  add_secret_channel(chat)
  hits = call_ok(chat, "search_messages", {"query": "psst", "limit": 100})
  assert hits["total"] == 0  # a private channel the user is not in is never searched
  msg = next(m for m in chat.state.messages if m.channel_id == channel_named(chat, "eng").id)
  word = max(msg.text.split(), key=len)
  hits = call_ok(chat, "search_messages", {"query": word, "limit": 100})["items"]
  assert msg.id in [h["id"] for h in hits]
  assert all(word.lower() in h["text"].lower() for h in hits)
  scoped = call_ok(
    chat, "search_messages", {"query": word, "channel_id": msg.channel_id, "author": msg.author}
  )["items"]
  assert msg.id in [h["id"] for h in scoped]
  assert all(h["channel_id"] == msg.channel_id and h["author"] == msg.author for h in scoped)
  person = chat.state.users.get(chat.state.current_user)
  for query in (person.id, person.display_name, person.email.upper()):
    assert person.id in [u["id"] for u in call_ok(chat, "find_user", {"query": query})]
  assert call_ok(chat, "find_user", {"query": "zzqx"}) == []
  dms = call_ok(chat, "list_dms")
  assert len(dms) == 3
  for d in dms:
    assert d["with"] in d["members"] and d["with"] != chat.state.current_user
    assert d["last_message"]["channel_id"] == d["id"]
  last = [d["last_message"]["ts"] for d in dms]
  assert last == sorted(last, reverse=True)


def test_post_reply_and_direct_messages(chat):
  me, eng = chat.state.current_user, channel_named(chat, "eng")
  now = chat.state.now
  msg = call_ok(chat, "post_message", {"channel_id": eng.id, "text": "Deploy done"})
  assert (msg["author"], msg["channel_id"], msg["thread_ts_id"]) == (me, eng.id, None)
  assert chat.state.messages.get(msg["id"]).text == "Deploy done"
  assert chat.state.now == now + timedelta(minutes=1)
  top = call_ok(chat, "read_channel", {"channel_id": eng.id, "limit": 1})["items"][0]
  assert top["id"] == msg["id"] and top["reply_count"] == 0
  r1 = call_ok(chat, "reply_in_thread", {"message_id": msg["id"], "text": "nice"})
  r2 = call_ok(chat, "reply_in_thread", {"message_id": r1["id"], "text": "agreed"})
  assert r1["thread_ts_id"] == r2["thread_ts_id"] == msg["id"]
  assert r2["channel_id"] == eng.id
  thread = call_ok(chat, "read_thread", {"message_id": msg["id"]})
  assert [r["id"] for r in thread["replies"]] == [r1["id"], r2["id"]]
  # A DM to someone already in a conversation reuses it; to someone new opens one.
  dm = next(iter(chat.state.dms))
  other = next(h for h in dm.members if h != me)
  sent = call_ok(chat, "send_direct_message", {"user_id": other, "text": "hi"})
  assert sent["channel_id"] == dm.id and len(chat.state.dms) == 3
  in_dm = {h for d in chat.state.dms for h in d.members}
  new = next(u.id for u in chat.state.users if u.id not in in_dm and not u.deactivated)
  sent = call_ok(chat, "send_direct_message", {"user_id": new, "text": "welcome!"})
  assert len(chat.state.dms) == 4
  assert chat.state.dms.get(sent["channel_id"]).members == (me, new)
  assert chat.state.messages.get(sent["id"]).text == "welcome!"
  again = call_ok(chat, "post_message", {"channel_id": sent["channel_id"], "text": "ping"})
  assert again["channel_id"] == sent["channel_id"] and len(chat.state.dms) == 4


def test_reactions_and_edits(chat):
  me, eng = chat.state.current_user, channel_named(chat, "eng")
  target = next(
    m
    for m in chat.state.messages
    if m.channel_id == eng.id and m.reactions and me not in m.reactions[0].users
  )
  emoji = target.reactions[0].id
  got = call_ok(chat, "add_reaction", {"message_id": target.id, "emoji": f":{emoji}:"})
  assert me in got["reactions"][0]["users"]
  assert len(got["reactions"][0]["users"]) == len(target.reactions[0].users) + 1
  got = call_ok(chat, "add_reaction", {"message_id": target.id, "emoji": "+1"})
  assert got["reactions"][-1] == {"id": "+1", "users": [me]}
  assert chat.state.messages.get(target.id).reactions[-1].users == (me,)
  mine = call_ok(chat, "post_message", {"channel_id": eng.id, "text": "typo hre"})
  edited = call_ok(chat, "edit_message", {"message_id": mine["id"], "text": "typo here"})
  assert edited["edited"] and edited["text"] == "typo here"
  stored = chat.state.messages.get(mine["id"])
  assert (stored.text, stored.edited, stored.ts.isoformat()) == ("typo here", True, mine["ts"])


def test_channel_lifecycle(chat):
  me = chat.state.current_user
  ch = call_ok(chat, "create_channel", {"name": "proj-apollo_2", "topic": "Apollo launch"})
  assert (ch["members"], ch["created_by"], ch["is_private"], ch["archived"]) == (
    [me],
    me,
    False,
    False,
  )
  assert chat.state.channels.get(ch["id"]).name == "proj-apollo_2"
  priv = call_ok(chat, "create_channel", {"name": "hush", "is_private": True})
  assert chat.state.channels.get(priv["id"]).is_private
  a, b = [u.id for u in chat.state.users if u.id != me and not u.deactivated][:2]
  got = call_ok(chat, "invite_to_channel", {"channel_id": ch["id"], "user_ids": [a, b, a]})
  assert got["members"] == [me, a, b]
  assert chat.state.channels.get(ch["id"]).members == (me, a, b)
  c = [u.id for u in chat.state.users if u.id != me and not u.deactivated][2]
  got = call_ok(chat, "invite_to_channel", {"channel_id": ch["id"], "user_ids": [a, c]})
  assert chat.state.channels.get(ch["id"]).members == (me, a, b, c)
  got = call_ok(chat, "set_channel_topic", {"channel_id": ch["id"], "topic": "Launch: May 4"})
  assert got["topic"] == chat.state.channels.get(ch["id"]).topic == "Launch: May 4"
  assert call_ok(chat, "archive_channel", {"channel_id": ch["id"]})["archived"]
  assert chat.state.channels.get(ch["id"]).archived
  listed = [c["id"] for c in call_ok(chat, "list_channels", {"limit": 100})["items"]]
  assert ch["id"] not in listed
  listed = call_ok(chat, "list_channels", {"include_archived": True, "limit": 100})["items"]
  assert ch["id"] in [c["id"] for c in listed]
  assert call_ok(chat, "read_channel", {"channel_id": ch["id"]})["total"] == 0


def test_error_paths_are_atomic(chat):
  add_secret_channel(chat)
  me = chat.state.current_user
  eng, sales = channel_named(chat, "eng"), channel_named(chat, "sales")
  general = channel_named(chat, "general")
  gone = next(u.id for u in chat.state.users if u.deactivated)
  parent, reply = a_thread(chat, eng.id)
  theirs = next(m for m in chat.state.messages if m.channel_id == eng.id and m.author != me)
  # missing and ill-typed arguments
  call_fails(chat, "get_channel", {}, 400, "channel_id")
  call_fails(chat, "get_channel", {"channel_id": 7}, 400, "channel_id", "string")
  call_fails(chat, "read_channel", {"channel_id": eng.id, "limit": 0}, 400, "limit")
  call_fails(chat, "list_channels", {"offset": -1}, 400, "offset")
  call_fails(chat, "list_channels", {"include_archived": "maybe"}, 400, "include_archived")
  call_fails(chat, "search_messages", {}, 400, "query")
  call_fails(chat, "find_user", {"query": ""}, 400, "query")
  call_fails(chat, "post_message", {"channel_id": eng.id}, 400, "text")
  call_fails(chat, "post_message", {"channel_id": eng.id, "text": ""}, 400, "text")
  call_fails(chat, "post_message", {"channel_id": eng.id, "text": "   "}, 400, "blank")
  call_fails(chat, "reply_in_thread", {"message_id": parent.id, "text": 5}, 400, "text")
  call_fails(chat, "send_direct_message", {"user_id": me, "text": "hi"}, 400, "yourself")
  call_fails(chat, "add_reaction", {"message_id": parent.id, "emoji": "thumbs up"}, 400, "emoji")
  call_fails(chat, "edit_message", {"message_id": parent.id}, 400, "text")
  call_fails(chat, "invite_to_channel", {"channel_id": eng.id, "user_ids": []}, 400, "user_ids")
  call_fails(chat, "invite_to_channel", {"channel_id": eng.id, "user_ids": me}, 400, "user_ids")
  call_fails(chat, "set_channel_topic", {"channel_id": eng.id, "topic": "x" * 251}, 400, "topic")
  for bad in ("Eng Team", "UPPER", "x", "-lead", "has.dot", "a" * 81):
    call_fails(chat, "create_channel", {"name": bad}, 400, "name")
  # unknown ids
  call_fails(chat, "get_channel", {"channel_id": "ch_nope"}, 404, "ch_nope")
  call_fails(chat, "read_channel", {"channel_id": "ch_nope"}, 404, "ch_nope")
  call_fails(chat, "read_thread", {"message_id": "msg_nope"}, 404, "msg_nope")
  call_fails(chat, "search_messages", {"query": "a", "channel_id": "ch_nope"}, 404, "ch_nope")
  call_fails(chat, "search_messages", {"query": "a", "author": "nobody"}, 404, "nobody")
  call_fails(chat, "post_message", {"channel_id": "ch_nope", "text": "x"}, 404, "ch_nope")
  call_fails(chat, "reply_in_thread", {"message_id": "msg_nope", "text": "x"}, 404, "msg_nope")
  call_fails(chat, "send_direct_message", {"user_id": "nobody", "text": "x"}, 404, "nobody")
  call_fails(chat, "add_reaction", {"message_id": "msg_nope", "emoji": "eyes"}, 404, "msg_nope")
  call_fails(chat, "edit_message", {"message_id": "msg_nope", "text": "x"}, 404, "msg_nope")
  call_fails(chat, "invite_to_channel", {"channel_id": "ch_nope", "user_ids": [me]}, 404, "ch_nope")
  call_fails(
    chat, "invite_to_channel", {"channel_id": eng.id, "user_ids": [me, "nobody"]}, 404, "nobody"
  )
  call_fails(chat, "archive_channel", {"channel_id": "ch_nope"}, 404, "ch_nope")
  call_fails(chat, "set_channel_topic", {"channel_id": "ch_nope", "topic": "x"}, 404, "ch_nope")
  # business rules
  call_fails(chat, "get_channel", {"channel_id": "ch_secret"}, 409, "ch_secret", "private")
  call_fails(chat, "read_channel", {"channel_id": "ch_secret"}, 409, "ch_secret", "private")
  call_fails(chat, "read_thread", {"message_id": "msg_secret"}, 409, "ch_secret")
  call_fails(chat, "search_messages", {"query": "a", "channel_id": "ch_secret"}, 409, "private")
  call_fails(chat, "post_message", {"channel_id": sales.id, "text": "x"}, 409, "not a member")
  call_fails(chat, "reply_in_thread", {"message_id": "msg_secret", "text": "x"}, 409, "private")
  call_fails(chat, "send_direct_message", {"user_id": gone, "text": "x"}, 409, gone, "deactivated")
  call_fails(chat, "invite_to_channel", {"channel_id": eng.id, "user_ids": [gone]}, 409, gone)
  call_fails(chat, "invite_to_channel", {"channel_id": sales.id, "user_ids": [me]}, 409, "member")
  members = [h for h in eng.members if not chat.state.users.get(h).deactivated][:2]
  call_fails(chat, "invite_to_channel", {"channel_id": eng.id, "user_ids": members}, 409, "already")
  call_fails(chat, "edit_message", {"message_id": theirs.id, "text": "x"}, 409, "your own")
  call_fails(chat, "create_channel", {"name": "eng"}, 409, "eng", eng.id)
  call_fails(chat, "archive_channel", {"channel_id": general.id}, 409, "general")
  call_fails(chat, "archive_channel", {"channel_id": sales.id}, 409, "not a member")
  call_fails(chat, "set_channel_topic", {"channel_id": sales.id, "topic": "x"}, 409, "member")
  call_ok(chat, "add_reaction", {"message_id": parent.id, "emoji": "eyes"})
  call_fails(chat, "add_reaction", {"message_id": parent.id, "emoji": "eyes"}, 409, "already")
  # a DM whose other member has since been deactivated
  dm = next(iter(chat.state.dms))
  other = next(h for h in dm.members if h != me)
  chat.state.users.update(other, deactivated=True)
  call_fails(chat, "post_message", {"channel_id": dm.id, "text": "x"}, 409, other, "deactivated")
  # an archived channel is read-only
  mine = call_ok(chat, "post_message", {"channel_id": eng.id, "text": "bye"})
  call_ok(chat, "archive_channel", {"channel_id": eng.id})
  call_fails(chat, "archive_channel", {"channel_id": eng.id}, 409, "already archived")
  call_fails(chat, "post_message", {"channel_id": eng.id, "text": "x"}, 409, "archived")
  call_fails(chat, "reply_in_thread", {"message_id": reply.id, "text": "x"}, 409, "archived")
  call_fails(chat, "add_reaction", {"message_id": parent.id, "emoji": "tada"}, 409, "archived")
  call_fails(chat, "edit_message", {"message_id": mine["id"], "text": "x"}, 409, "archived")
  call_fails(chat, "set_channel_topic", {"channel_id": eng.id, "topic": "x"}, 409, "archived")
  call_fails(chat, "invite_to_channel", {"channel_id": eng.id, "user_ids": [gone]}, 409, "archived")
  call_fails(chat, "create_channel", {"name": "eng"}, 409, "archived")
  assert call_ok(chat, "read_channel", {"channel_id": eng.id})["total"] > 0
  call_fails(chat, "no_such_tool", {}, 404, "post_message")
