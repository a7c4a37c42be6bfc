"""Simosphere facets: mail and shared sheets as sources of people; sending mail, invitations
and documents as sinks."""

from __future__ import annotations

from datetime import datetime, timedelta

from compoworld.tasks.authoring import AuthorContext
from compoworld.tasks.facets import Found, Value, facets
from compoworld.tasks.rubric import exists, where
from envs._facets_common import colleague, found_one, iso, mentions, topic, user_email
from envs._world import world

S = "simosphere"


@facets.source(S, "person.email")
def sender_of_request(ctx: AuthorContext) -> Found:
  """Someone wrote in asking for something; their address is the fact handed on."""
  who, about = colleague(ctx), topic(ctx)
  subject = f"{about}: quick question"
  ctx.put(
    S,
    "messages",
    {
      "id": ctx.fresh_id("msg"),
      "thread_id": ctx.fresh_id("thr"),
      "folder": "inbox",
      "sender": who.email,
      "to": [user_email(ctx)],
      "subject": subject,
      "body": f"Hi, could you loop me in on {about}? Thanks, {who.name}",
      "sent_at": iso(ctx.state(S).now - timedelta(hours=ctx.rng.randint(2, 40))),
    },
  )
  hit = ctx.call(S, "search_messages", query=about)["items"][0]
  msg = ctx.call(S, "read_message", message_id=hit["id"])
  return found_one("person.email", f"the person who emailed me about {about}", msg["sender"])


@facets.source(S, "person.email")
def roster_members(ctx: AuthorContext) -> Found:
  """A shared sheet of people with a status column: some are in, some opted out."""
  w = world(ctx.env.seed)
  name = topic(ctx)
  people = ctx.rng.sample(w.people[2:], 6)
  statuses = ["confirmed"] * 4 + ["opted out"] * 2
  ctx.rng.shuffle(statuses)
  rows = ["Name | Email | Status"] + [
    f"{p.name} | {p.email} | {s}" for p, s in zip(people, statuses, strict=True)
  ]
  title = f"{name} participants"
  ctx.put(
    S,
    "documents",
    {
      "id": ctx.fresh_id("doc"),
      "title": title,
      "kind": "sheet",
      "content": "\n".join(rows),
      "owner": user_email(ctx),
      "updated_at": iso(ctx.state(S).now - timedelta(days=1)),
    },
  )
  hit = next(d for d in ctx.call(S, "list_documents", query=name)["items"] if d["title"] == title)
  doc = ctx.call(S, "read_document", document_id=hit["id"])
  table = [line.split(" | ") for line in doc["content"].splitlines()[1:]]
  return Found(
    "person.email",
    f'the people on the "{title}" sheet',
    [Value(r[1], r[1]) for r in table if r[2] == "confirmed"],
    excluded=[Value(r[1], r[1]) for r in table if r[2] == "opted out"],
    exclusion='marked "opted out" there',
  )


def _mail_target(ctx: AuthorContext) -> dict:
  return {"subject": f"{topic(ctx)}: next steps"}


facets.sink(
  S,
  "person.email",
  "email_person",
  prepare=_mail_target,
  act=lambda ctx, t, v: ctx.call(
    S,
    "send_message",
    to=[v.value],
    subject=t["subject"],
    body="Hi, sharing the next steps as discussed. Let me know if anything is unclear.",
  ),
  check=lambda ctx, t, v: exists(
    S,
    "messages",
    where("folder", "sent"),
    where("to", v.value, "icontains"),
    where("subject", t["subject"]),
  ),
  phrase=lambda ctx, t, obj: f'email {obj} with the subject "{t["subject"]}"',
  text=lambda ctx, t, v: f'{v.label} got an email titled "{t["subject"]}".',
)


def _link_target(ctx: AuthorContext) -> dict:
  who = colleague(ctx)
  return {"name": who.name, "email": who.email, "subject": f"Link for {topic(ctx)}"}


facets.sink(
  S,
  "url",
  "email_link",
  prepare=_link_target,
  act=lambda ctx, t, v: ctx.call(
    S, "send_message", to=[t["email"]], subject=t["subject"], body=f"Here is the link: {v.value}"
  ),
  check=lambda ctx, t, v: exists(
    S,
    "messages",
    where("folder", "sent"),
    where("to", t["email"], "icontains"),
    where("body", v.value, "icontains"),
  ),
  phrase=lambda ctx, t, obj: f"email {obj} to {t['name']} ({t['email']})",
  text=lambda ctx, t, v: f"{t['name']} received an email containing {v.label}.",
)


def _invite_target(ctx: AuthorContext) -> dict:
  return {"subject": f"{topic(ctx)} sync", "who": colleague(ctx)}


def _invite(ctx: AuthorContext, t: dict, v: Value) -> None:
  start = datetime.fromisoformat(v.value)
  ctx.call(
    S,
    "send_meeting_invitation",
    subject=t["subject"],
    start=v.value,
    end=iso(start + timedelta(minutes=30)),
    invitees=[t["who"].email],
  )


facets.sink(
  S,
  "datetime",
  "invite_at_time",
  prepare=_invite_target,
  act=_invite,
  check=lambda ctx, t, v: exists(
    S,
    "invitations",
    where("subject", t["subject"]),
    where("start", v.value),
    where("invitees", t["who"].email, "icontains"),
    where("status", "sent"),
  ),
  phrase=lambda ctx, t, obj: (
    f'send {t["who"].name} ({t["who"].email}) a 30-minute "{t["subject"]}" invitation '
    f"starting at {obj}"
  ),
  text=lambda ctx, t, v: f'"{t["subject"]}" invitation for {v.label} sent to {t["who"].name}.',
)


facets.sink(
  S,
  "text",
  "save_note",
  prepare=lambda ctx: {"title": f"{topic(ctx)} notes"},
  act=lambda ctx, t, v: ctx.call(S, "create_document", title=t["title"], content=str(v.value)),
  check=lambda ctx, t, v: exists(
    S, "documents", where("title", t["title"]), mentions("content", v)
  ),
  phrase=lambda ctx, t, obj: f'save {obj} in a new document called "{t["title"]}"',
  text=lambda ctx, t, v: f'The document "{t["title"]}" holds {v.label}.',
)
