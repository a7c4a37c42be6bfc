"""Team chat facets: who said what in a channel; posting and inviting as sinks."""

from __future__ import annotations

from datetime import timedelta

from compoworld.tasks.authoring import AuthorContext, AuthoringError
from compoworld.tasks.facets import Found, Value, facets
from compoworld.tasks.rubric import exists, record_is, where
from envs._facets_common import colleague, found_one, iso, mentions, since, topic

S = "chat"


def _channel(ctx: AuthorContext, name: str | None = None) -> dict:
  """A public, live channel the user belongs to, found the way an agent would."""
  state = ctx.state(S)
  options = [
    c
    for c in state.channels
    if not c.archived and not c.is_private and state.current_user in c.members
    and (name is None or c.name == name)
  ]  # fmt: skip
  chan = ctx.choice(sorted(options, key=lambda c: c.id))
  listed = ctx.call(S, "list_channels", limit=100)["items"]
  return next(c for c in listed if c["id"] == chan.id)


@facets.source(S, "person.email")
def poster_email(ctx: AuthorContext) -> Found:
  """Someone asked a question in a channel; the step hands on their email address."""
  chan = _channel(ctx)
  who, subject = colleague(ctx), topic(ctx)
  handle = next(u.id for u in ctx.state(S).users if u.email == who.email)
  ctx.put(
    S,
    "messages",
    {
      "id": ctx.fresh_id("msg"),
      "channel_id": chan["id"],
      "author": handle,
      "text": f"Who owns {subject}? I have a few questions before Friday.",
      "ts": iso(ctx.state(S).now - timedelta(hours=ctx.rng.randint(1, 30))),
    },
  )
  hit = ctx.call(S, "search_messages", query=subject, channel_id=chan["id"])["items"][0]
  user = ctx.call(S, "find_user", query=hit["author"])[0]
  return found_one(
    "person.email",
    f"the email address of whoever asked about {subject} in #{chan['name']}",
    user["email"],
  )


def _post_check(ctx: AuthorContext, chan: dict, v: Value) -> dict:
  return exists(
    S,
    "messages",
    where("channel_id", chan["id"]),
    mentions("text", v),
    since(ctx, S, "ts"),
  )


for kind in ("text", "url"):
  facets.sink(
    S,
    kind,
    f"post_{kind}_in_channel",
    prepare=_channel,
    act=lambda ctx, c, v: ctx.call(S, "post_message", channel_id=c["id"], text=f"FYI: {v.value}"),
    check=_post_check,
    phrase=lambda ctx, c, obj: f"post {obj} in the #{c['name']} channel",
    text=lambda ctx, c, v: f"#{c['name']} has a new message containing {v.label}.",
  )


def _invite(ctx: AuthorContext, chan: dict, v: Value) -> None:
  users = ctx.call(S, "find_user", query=v.value)
  if not users:
    raise AuthoringError("no_chat_user", v.value)
  chan["handles"] = {**chan.get("handles", {}), v.value: users[0]["id"]}
  ctx.call(S, "invite_to_channel", channel_id=chan["id"], user_ids=[users[0]["id"]])


def _handle_of(ctx: AuthorContext, email: str) -> str:
  return next((u.id for u in ctx.state(S).users if u.email == email), email)


def _project_channel(ctx: AuthorContext) -> dict:
  """A new private project channel with only the user in it, so whoever the walk brings is
  a new member (and nobody the task excludes is in it already)."""
  state, name = ctx.state(S), topic(ctx).lower().replace(" ", "-")
  ctx.put(
    S,
    "channels",
    {
      "id": ctx.fresh_id("ch"),
      "name": f"proj-{name}",
      "topic": f"Working channel for {name}",
      "is_private": True,
      "members": [state.current_user],
      "created_by": state.current_user,
    },
  )
  listed = ctx.call(S, "list_channels", limit=100)["items"]
  return next(c for c in listed if c["name"] == f"proj-{name}")


facets.sink(
  S,
  "person.email",
  "invite_to_channel",
  prepare=_project_channel,
  act=_invite,
  check=lambda ctx, c, v: record_is(
    S, "channels", c["id"], "members", _handle_of(ctx, v.value), "contains"
  ),
  phrase=lambda ctx, c, obj: f"add {obj} to the #{c['name']} channel",
  text=lambda ctx, c, v: f"{v.label} is a member of #{c['name']}.",
)
