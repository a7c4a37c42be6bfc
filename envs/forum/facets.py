"""Forum facets: a post's author as a source; replies and announcements as sinks."""

from __future__ import annotations

from datetime import timedelta

from compoworld.tasks.authoring import AuthorContext
from compoworld.tasks.facets import Found, facets
from compoworld.tasks.rubric import exists, where
from envs._facets_common import colleague, found_one, iso, mentions, topic

S = "forum"


def _community(ctx: AuthorContext) -> dict:
  return ctx.choice(ctx.call(S, "list_communities"))


@facets.source(S, "person.email")
def post_author_email(ctx: AuthorContext) -> Found:
  """A member posted a question; the step hands on their email from their profile."""
  community, who, subject = _community(ctx), colleague(ctx), topic(ctx)
  handle = next(u.id for u in ctx.state(S).users if u.email == who.email)
  title = f"Anyone else working on {subject}?"
  ctx.put(
    S,
    "posts",
    {
      "id": ctx.fresh_id("post"),
      "community_id": community["id"],
      "author": handle,
      "title": title,
      "body": "Would love to compare notes with someone on this.",
      "score": ctx.rng.randint(3, 40),
      "created_at": iso(ctx.state(S).now - timedelta(days=ctx.rng.randint(1, 5))),
    },
  )
  hits = ctx.call(S, "search_posts", query=subject, community_id=community["id"])["items"]
  post = next(p for p in hits if p["title"] == title)
  user = ctx.call(S, "get_user", handle=post["author"])
  return found_one(
    "person.email",
    f'the email address of whoever posted "{title}" in {community["name"]}',
    user["email"],
  )


def _announce_target(ctx: AuthorContext) -> dict:
  return {"community": _community(ctx), "title": f"Update on {topic(ctx)}"}


for kind in ("url", "text"):
  facets.sink(
    S,
    kind,
    f"announce_{kind}",
    prepare=_announce_target,
    act=lambda ctx, t, v: ctx.call(
      S,
      "create_post",
      community_id=t["community"]["id"],
      title=t["title"],
      body=f"Quick update: {v.value}",
    ),
    check=lambda ctx, t, v: exists(S, "posts", where("title", t["title"]), mentions("body", v)),
    phrase=lambda ctx, t, obj: (
      f'share {obj} in a new post titled "{t["title"]}" in {t["community"]["name"]}'
    ),
    text=lambda ctx, t, v: f'The post "{t["title"]}" shares {v.label}.',
  )
