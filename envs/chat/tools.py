"""Chat: a Slack-like team chat of channels, threads, reactions and direct messages.

The workspace's people come from the shared world, keyed by their handle; the user is the
world's first person. Channels have a unique lowercase name, a topic, a member list and may be
private or archived; messages live in a channel or a direct conversation and may start a thread.
Rules a chat user expects: a private channel is visible only to its members; only members post
in a channel, and nobody posts in an archived one (nor reacts, edits, invites or retopics there);
a reply always attaches to the top-level message of its thread; you edit only your own messages
and react with a given emoji once; a deactivated person can be neither messaged nor invited;
channel names are unique and #general can never be archived.
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta
from typing import Annotated

from pydantic import Field

from compoworld import Conflict, InvalidArgument, NotFound, Service, registry, tool
from compoworld.runtime.fields import Limit, Offset, Text
from compoworld.runtime.query import paginate, select, text_matches
from envs._world import COMPANIES, world
from envs.chat.state import (
  CHANNELS,
  DIRECT,
  EMOJIS,
  REPLIES,
  STATUSES,
  Channel,
  ChannelName,
  ChatState,
  DirectConversation,
  Emoji,
  Message,
  MessageText,
  Reaction,
  Topic,
  User,
)


@registry.register
class ChatService(Service):
  name = "chat"
  domain = "communication"
  description = "Slack-like team chat: channels, threads, reactions, direct messages, people."
  State = ChatState

  @classmethod
  def generate(cls, seed: int, size: int | None) -> ChatState:
    rng, w = random.Random(f"{cls.name}:{seed}"), world(seed)
    me = w.people[0].handle
    state = ChatState.empty(seed, current_user=me)
    gone = rng.choice(w.people[1:]).handle
    for p in w.people:
      state.users.insert(
        User(
          id=p.handle,
          display_name=p.name,
          email=p.email,
          title=p.title,
          status_text=rng.choice(STATUSES),
          deactivated=p.handle == gone,
        )
      )
    others = [p.handle for p in w.people[1:]]
    active = [h for h in others if h != gone]
    templates = {}
    for name, topic, private, joined, texts in CHANNELS:
      members = others if name == "general" else rng.sample(others, rng.randint(5, 12))
      members = ([me] if joined else []) + sorted(members)
      cid = state.new_id("ch")
      creator = me if joined and private else members[-1]
      state.channels.insert(
        Channel(
          id=cid,
          name=name,
          topic=topic,
          is_private=private,
          members=tuple(members),
          created_by=creator,
        )
      )
      templates[cid] = texts
    for handle in rng.sample(active, 3):
      did = state.new_id("dm")
      state.dms.insert(DirectConversation(id=did, members=(me, handle)))
      templates[did] = DIRECT
    orgs = [c for c, _ in COMPANIES if c != w.company]
    conversations = list(templates)
    tops: list[Message] = []

    def fill(text: str) -> str:
      return text.format(
        first=rng.choice(w.people).name.split()[0],
        city=rng.choice(w.people).city,
        org=rng.choice(orgs),
        q=rng.randint(1, 4),
        n=rng.randint(2, 60),
        pr=rng.randint(1200, 4800),
        ticket=rng.randint(10000, 99999),
      )

    for _ in range(size if size is not None else 60):
      roll = rng.random()
      if roll < 0.3 and tops:
        parent = rng.choice(tops)
        conv, thread = parent.channel_id, parent.id
        ts = min(parent.ts + timedelta(seconds=rng.randint(60, 3 * 3600)), state.now)
        text = rng.choice(REPLIES)
      else:
        conv = rng.choice(conversations[:-3] if roll < 0.85 else conversations[-3:])
        thread, ts = None, state.now - timedelta(seconds=rng.randint(1800, 14 * 86400))
        text = rng.choice(templates[conv])
      members = (state.channels.find(conv) or state.dms.get(conv)).members
      reactions = ()
      if rng.random() < 0.3:
        likers = [m for m in members if m != gone]
        reactions = tuple(
          Reaction(id=emoji, users=tuple(sorted(rng.sample(likers, rng.randint(1, 2)))))
          for emoji in rng.sample(EMOJIS, rng.randint(1, 2))
        )
      msg = Message(
        id=state.new_id("msg"),
        channel_id=conv,
        author=rng.choice(members),
        text=fill(text),
        ts=ts,
        thread_ts_id=thread,
        reactions=reactions,
      )
      state.messages.insert(msg)
      if thread is None:
        tops.append(msg)
    return state

  # --- helpers -----------------------------------------------------------------------------

  @property
  def _me(self) -> str:
    return self.state.current_user

  def _conversation(self, channel_id: str) -> Channel | DirectConversation:
    conv = self.state.channels.find(channel_id) or self.state.dms.find(channel_id)
    if conv is None:
      raise NotFound(f"channel '{channel_id}' not found (neither a channel nor a DM)")
    return conv

  def _readable(self, channel_id: str) -> Channel | DirectConversation:
    conv = self._conversation(channel_id)
    if isinstance(conv, Channel):
      if conv.is_private and self._me not in conv.members:
        raise Conflict(f"channel '{channel_id}' is private and you are not a member of it")
    elif self._me not in conv.members:
      raise Conflict(f"direct conversation '{channel_id}' is not one of yours")
    return conv

  def _writable(self, channel_id: str) -> Channel | DirectConversation:
    conv = self._readable(channel_id)
    if isinstance(conv, Channel):
      if conv.archived:
        raise Conflict(f"channel '{channel_id}' (#{conv.name}) is archived and read-only")
      if self._me not in conv.members:
        raise Conflict(
          f"you are not a member of channel '{channel_id}' (#{conv.name}); ask a member to "
          "invite you"
        )
    else:
      for handle in conv.members:
        if self.state.users.get(handle).deactivated:
          raise Conflict(f"user '{handle}' is deactivated and cannot receive messages")
    return conv

  def _check_text(self, text: str, argument: str = "text") -> str:
    if not text.strip():
      raise InvalidArgument(f"argument '{argument}' must not be blank")
    return text

  def _post(self, channel_id: str, text: str, thread_ts_id: str | None = None) -> Message:
    msg = Message(
      id=self.state.new_id("msg"),
      channel_id=channel_id,
      author=self._me,
      text=text,
      ts=self.state.now,
      thread_ts_id=thread_ts_id,
    )
    return self.state.messages.insert(msg)

  def _with_replies(self, msg: Message) -> dict:
    count = sum(1 for m in self.state.messages if m.thread_ts_id == msg.id)
    return {**msg.model_dump(), "reply_count": count}

  # --- reads -------------------------------------------------------------------------------

  @tool(mutates=False, page="channel", produces=("channel.id",))
  def list_channels(self, include_archived: bool = False) -> list:
    """List the channels the user can see (public ones and private ones they belong to), by
    name.

    Args:
      include_archived: include archived channels.
    """
    return sorted(
      (
        c
        for c in self.state.channels
        if (include_archived or not c.archived) and (not c.is_private or self._me in c.members)
      ),
      key=lambda c: (c.name, c.id),
    )

  @tool(mutates=False, produces=("channel.id", "person.handle"))
  def get_channel(self, channel_id: str) -> Channel:
    """Get one channel with its topic, privacy, members and archived flag.

    Args:
      channel_id: the channel's id.
    """
    channel = self.state.channels.get(channel_id)
    self._readable(channel_id)
    return channel

  @tool(
    mutates=False,
    consumes=("channel.id",),
    produces=("message.id", "person.handle", "text", "datetime"),
  )
  def read_channel(self, channel_id: str, limit: Limit = 20, offset: Offset = 0) -> dict:
    """Read the top-level messages of a channel or direct conversation, newest first, each with
    its thread's reply_count.

    Args:
      channel_id: the channel's id, or a direct conversation's id.
      limit: page size (1-100).
      offset: index of the first message to return.
    """
    self._readable(channel_id)
    tops = sorted(
      self.state.messages.filter(lambda m: m.channel_id == channel_id and m.thread_ts_id is None),
      key=lambda m: (m.ts, m.id),
      reverse=True,
    )
    return paginate(tops, limit, offset, view=self._with_replies)

  @tool(mutates=False, consumes=("message.id",), produces=("message.id", "person.handle", "text"))
  def read_thread(self, message_id: str) -> dict:
    """Read a whole thread: its top-level message and every reply in time order. A reply's id
    gives the thread it belongs to.

    Args:
      message_id: the id of the thread's top-level message or of any reply in it.
    """
    msg = self.state.messages.get(message_id)
    parent = self.state.messages.get(msg.thread_ts_id) if msg.thread_ts_id else msg
    self._readable(parent.channel_id)
    replies = sorted(
      self.state.messages.filter(lambda m: m.thread_ts_id == parent.id), key=lambda m: (m.ts, m.id)
    )
    return {"parent": parent, "replies": replies, "reply_count": len(replies)}

  @tool(
    mutates=False,
    page="message",
    consumes=("text", "channel.id", "person.handle"),
    produces=("message.id", "channel.id", "person.handle", "text"),
  )
  def search_messages(
    self, query: Text, channel_id: str | None = None, author: str | None = None
  ) -> list:
    """Search the messages and replies the user can read, newest first.

    Args:
      query: words that must all appear in the message text.
      channel_id: only messages of this channel or direct conversation.
      author: only messages by this user (a handle).
    """
    if channel_id is not None:
      self._readable(channel_id)
    self.state.users.check(author)
    readable: dict[str, bool] = {}

    def can_read(cid: str) -> bool:
      if cid not in readable:
        try:
          self._readable(cid)
          readable[cid] = True
        except (Conflict, NotFound):
          readable[cid] = False
      return readable[cid]

    return select(
      self.state.messages,
      eq={"channel_id": channel_id, "author": author},
      text=query,
      fields=("text",),
      where=lambda m: can_read(m.channel_id),
      key=lambda m: (m.ts, m.id),
      reverse=True,
    )

  @tool(
    mutates=False,
    consumes=("person.name", "person.email", "person.handle"),
    produces=("person.handle", "person.email", "person.name"),
  )
  def find_user(self, query: Text) -> list[User]:
    """Find people whose handle, display name or email contains every word of the query.

    Args:
      query: part of a handle, a name or an email address.
    """
    return sorted(
      self.state.users.filter(lambda u: text_matches(query, u.id, u.display_name, u.email)),
      key=lambda u: u.id,
    )

  @tool(mutates=False, produces=("channel.id", "person.handle"))
  def list_dms(self) -> list[dict]:
    """List the user's direct conversations, most recently active first, each with the other
    person and the last message.
    """
    out = []
    for dm in self.state.dms:
      if self._me not in dm.members:
        continue
      msgs = self.state.messages.filter(lambda m, d=dm.id: m.channel_id == d)
      last = max(msgs, key=lambda m: (m.ts, m.id), default=None)
      other = next((h for h in dm.members if h != self._me), self._me)
      out.append({**dm.model_dump(), "with": other, "last_message": last})
    epoch = datetime.min
    return sorted(
      out,
      key=lambda d: (d["last_message"].ts if d["last_message"] else epoch, d["id"]),
      reverse=True,
    )

  # --- writes ------------------------------------------------------------------------------

  @tool(mutates=True, consumes=("channel.id", "text"), produces=("message.id",))
  def post_message(self, channel_id: str, text: MessageText) -> Message:
    """Post a top-level message to a channel the user belongs to, or to a direct conversation.

    Args:
      channel_id: the channel's id, or a direct conversation's id.
      text: the message text.
    """
    self._writable(channel_id)
    return self._post(channel_id, self._check_text(text))

  @tool(mutates=True, consumes=("message.id", "text"), produces=("message.id",))
  def reply_in_thread(self, message_id: str, text: MessageText) -> Message:
    """Reply in a message's thread; replying to a reply attaches to the same thread.

    Args:
      message_id: the message to reply to.
      text: the reply text.
    """
    msg = self.state.messages.get(message_id)
    parent = self.state.messages.get(msg.thread_ts_id) if msg.thread_ts_id else msg
    self._writable(parent.channel_id)
    return self._post(parent.channel_id, self._check_text(text), thread_ts_id=parent.id)

  @tool(mutates=True, consumes=("person.handle", "text"), produces=("message.id", "channel.id"))
  def send_direct_message(self, user_id: str, text: MessageText) -> Message:
    """Send a direct message to a person, opening the conversation if there is none yet; the
    returned message's channel_id is the conversation's id.

    Args:
      user_id: the recipient's handle.
      text: the message text.
    """
    user = self.state.users.get(user_id)
    if user.id == self._me:
      raise InvalidArgument(f"user_id '{user_id}' is yourself; pick someone else")
    if user.deactivated:
      raise Conflict(f"user '{user_id}' is deactivated and cannot receive messages")
    self._check_text(text)
    pair = {self._me, user.id}
    dm = next((d for d in self.state.dms if set(d.members) == pair), None)
    if dm is None:
      dm = self.state.dms.insert(
        DirectConversation(id=self.state.new_id("dm"), members=(self._me, user.id))
      )
    return self._post(dm.id, text)

  @tool(mutates=True, consumes=("message.id",))
  def add_reaction(self, message_id: str, emoji: Emoji) -> Message:
    """React to a message with an emoji.

    Args:
      message_id: the message's id.
      emoji: the emoji's name, e.g. "thumbsup" or ":tada:".
    """
    msg = self.state.messages.get(message_id)
    self._writable(msg.channel_id)
    name = emoji.strip(":")
    reactions = list(msg.reactions)
    for i, r in enumerate(reactions):
      if r.id == name:
        if self._me in r.users:
          raise Conflict(f"you already reacted with :{name}: to message '{message_id}'")
        reactions[i] = r.with_changes(users=(*r.users, self._me))
        break
    else:
      reactions.append(Reaction(id=name, users=(self._me,)))
    return self.state.messages.update(message_id, reactions=tuple(reactions))

  @tool(mutates=True, consumes=("message.id", "text"))
  def edit_message(self, message_id: str, text: MessageText) -> Message:
    """Replace the text of one of the user's own messages; it is marked as edited.

    Args:
      message_id: the message's id.
      text: the new text.
    """
    msg = self.state.messages.get(message_id)
    if msg.author != self._me:
      raise Conflict(f"message '{message_id}' was written by '{msg.author}'; edit only your own")
    self._writable(msg.channel_id)
    return self.state.messages.update(message_id, text=self._check_text(text), edited=True)

  @tool(mutates=True, consumes=("text",), produces=("channel.id",))
  def create_channel(
    self, name: ChannelName, topic: Topic = "", is_private: bool = False
  ) -> Channel:
    """Create a channel; the user becomes its creator and first member.

    Args:
      name: unique name: 2-80 lowercase letters, digits, '-' or '_', no spaces.
      topic: what the channel is about.
      is_private: whether only members can see it.
    """
    taken = self.state.channels.find_by(name=name)
    if taken is not None:
      state = " (archived)" if taken.archived else ""
      raise Conflict(f"a channel named '{name}' already exists: '{taken.id}'{state}")
    channel = Channel(
      id=self.state.new_id("ch"),
      name=name,
      topic=topic,
      is_private=is_private,
      members=(self._me,),
      created_by=self._me,
    )
    return self.state.channels.insert(channel)

  @tool(mutates=True, consumes=("channel.id", "person.handle"))
  def invite_to_channel(
    self, channel_id: str, user_ids: Annotated[list[str], Field(min_length=1)]
  ) -> Channel:
    """Add people to a channel the user belongs to; people already in it are left as they are.

    Args:
      channel_id: the channel's id.
      user_ids: handles of the people to add.
    """
    channel = self.state.channels.get(channel_id)
    self._writable(channel_id)
    for handle in user_ids:
      if self.state.users.get(handle).deactivated:
        raise Conflict(f"user '{handle}' is deactivated and cannot be invited")
    new = [h for h in dict.fromkeys(user_ids) if h not in channel.members]
    if not new:
      raise Conflict(f"every given user is already a member of channel '{channel_id}'")
    return self.state.channels.update(channel_id, members=channel.members + tuple(new))

  @tool(mutates=True, consumes=("channel.id",))
  def archive_channel(self, channel_id: str) -> Channel:
    """Archive a channel: it stays readable but nobody can post in it any more.

    Args:
      channel_id: the channel's id.
    """
    channel = self.state.channels.get(channel_id)
    if channel.archived:
      raise Conflict(f"channel '{channel_id}' (#{channel.name}) is already archived")
    if channel.name == "general":
      raise Conflict(f"channel '{channel_id}' is #general, which can never be archived")
    self._writable(channel_id)
    return self.state.channels.update(channel_id, archived=True)

  @tool(mutates=True, consumes=("channel.id", "text"))
  def set_channel_topic(self, channel_id: str, topic: Topic) -> Channel:
    """Set a channel's topic (an empty string clears it).

    Args:
      channel_id: the channel's id.
      topic: the new topic, at most 250 characters.
    """
    self.state.channels.get(channel_id)
    self._writable(channel_id)
    return self.state.channels.update(channel_id, topic=topic)
