"""Social posts facets: posts as sources of image links, publish times, authors and text;
drafting, scheduling and illustrating posts as sinks; the reschedule revisit (the publish time
goes stale)."""

from __future__ import annotations

import re
from datetime import timedelta

from compoworld.tasks.authoring import AuthorContext, AuthoringError
from compoworld.tasks.facets import Found, Value, facets
from compoworld.tasks.rubric import exists, record_is, where
from envs._facets_common import (
  colleague,
  employee,
  found_one,
  found_time,
  iso,
  mentions,
  schedule_time,
  scheduled_for,
  since,
  time_label,
  topic,
)
from envs._world import world

S = "social_posts"

NETWORK_NAMES = {"twitter": "X (Twitter)", "linkedin": "LinkedIn", "instagram": "Instagram"}
LINES = (
  "{about}: sneak peek coming next week. Stay tuned!",
  "Behind the scenes of {about}. Proud of this team.",
  "{about} is almost here. Here's what to expect.",
)


def _profile(ctx: AuthorContext, networks: tuple[str, ...] = tuple(NETWORK_NAMES)) -> dict:
  """A connected profile on one of ``networks``, found in the list of profiles."""
  network = ctx.choice(networks)
  return next(p for p in ctx.call(S, "list_profiles") if p["network"] == network)


def _put_post(
  ctx: AuthorContext,
  network: str,
  about: str,
  status: str = "draft",
  author: str | None = None,
  media: bool | None = None,
) -> dict:
  """Adds one of the scenario's posts about ``about`` to s0 (and the analytics a published
  post has)."""
  state, rng, w = ctx.state(S), ctx.rng, world(ctx.env.seed)
  profile = next(p for p in state.profiles if p.network == network)
  slug = re.sub(r"[^a-z0-9]+", "-", about.lower())
  with_media = network == "instagram" or (media if media is not None else rng.random() < 0.5)
  created = state.now - timedelta(days=rng.randint(1, 6), hours=rng.randint(0, 8))
  when = None
  if status == "scheduled":
    when = state.now.replace(minute=0) + timedelta(days=rng.randint(2, 9), hours=rng.randint(1, 7))
  elif status == "published":
    when = (state.now - timedelta(hours=rng.randint(3, 30))).replace(minute=0)
  record = {
    "id": ctx.fresh_id("pst"),
    "profile_id": profile.id,
    "text": ctx.choice(LINES).format(about=about),
    "media_urls": [f"https://cdn.{w.domain}/media/{slug}-{rng.randint(1, 9)}.jpg"]
    if with_media
    else [],
    "status": status,
    "author": author or colleague(ctx).email,
    "scheduled_at": iso(when) if when else None,
    "published_at": iso(when) if status == "published" else None,
    "created_at": iso(created),
    "updated_at": iso(created),
  }
  ctx.put(S, "posts", record)
  if status == "published":
    impressions = rng.randint(300, 6000)
    likes, shares = rng.randint(5, 120), rng.randint(0, 30)
    clicks, comments = rng.randint(2, 90), rng.randint(0, 20)
    ctx.put(
      S,
      "analytics",
      {
        "id": record["id"],
        "impressions": impressions,
        "likes": likes,
        "shares": shares,
        "clicks": clicks,
        "comments": comments,
        "engagement_rate": round((likes + shares + clicks + comments) / impressions, 4),
      },
    )
  return record


def _find(ctx: AuthorContext, post: dict, about: str) -> dict:
  """The agent's way to a post: search the posts for its subject, open the one found."""
  hits = ctx.call(S, "list_posts", query=about, status=post["status"])["items"]
  hit = next(p for p in hits if p["id"] == post["id"])
  return ctx.call(S, "get_post", post_id=hit["id"])


def _scenario_post(
  ctx: AuthorContext, status: str = "draft", networks=tuple(NETWORK_NAMES), **kwargs
) -> tuple[dict, str, str]:
  """A post about a distinctive subject; returns (post, subject, network's name)."""
  about, network = topic(ctx), ctx.choice(networks)
  post = _find(ctx, _put_post(ctx, network, about, status, **kwargs), about)
  return post, about, NETWORK_NAMES[network]


# --- sources ---------------------------------------------------------------------------------


@facets.source(S, "url")
def post_image_link(ctx: AuthorContext) -> Found:
  post, about, net = _scenario_post(ctx, media=True)
  link = post["media_urls"][0]
  return found_one("url", f"the image link on our draft {net} post about {about}", link)


@facets.source(S, "datetime")
def post_publish_time(ctx: AuthorContext) -> Found:
  post, about, net = _scenario_post(ctx, "scheduled")
  when = post["scheduled_at"]
  return found_time(f"when our {net} post about {about} is scheduled to go out", when)


@facets.source(S, "person.email")
def post_author(ctx: AuthorContext) -> Found:
  post, about, net = _scenario_post(ctx)
  return found_one(
    "person.email", f"the colleague who drafted our {net} post about {about}", post["author"]
  )


@facets.source(S, "text")
def published_post_text(ctx: AuthorContext) -> Found:
  post, about, net = _scenario_post(ctx, "published")
  return found_one("text", f"the text of our published {net} post about {about}", post["text"])


# --- lookups ---------------------------------------------------------------------------------


@facets.lookup(S, "person.email", "text")
def draft_by_author(ctx: AuthorContext, found: Found) -> Found | None:
  """A colleague has a draft waiting on one network: its text, found among that network's
  drafts by its author."""
  email = str(found.values[0].value).lower()
  if employee(ctx, email) is None:
    return None  # only colleagues write our posts
  state = ctx.state(S)
  busy = {p.profile_id for p in state.posts if p.author == email and p.status == "draft"}
  free = [
    n for n in NETWORK_NAMES if next(p for p in state.profiles if p.network == n).id not in busy
  ]
  if not free:
    return None
  network = ctx.choice(free)
  _put_post(ctx, network, topic(ctx), author=email)
  profile = next(p for p in ctx.call(S, "list_profiles") if p["network"] == network)
  drafts = ctx.call(S, "list_posts", profile_id=profile["id"], status="draft", limit=100)["items"]
  post = next(p for p in drafts if p["author"] == email)
  return found_one(
    "text",
    f"the text of the draft {NETWORK_NAMES[network]} post they wrote",
    post["text"],
    answer=f"Their draft {NETWORK_NAMES[network]} post says: {post['text']}",
  )


# --- sinks -----------------------------------------------------------------------------------


def _text_target(ctx: AuthorContext) -> dict:
  profile = _profile(ctx, ("linkedin", "twitter"))
  return {**profile, "net": NETWORK_NAMES[profile["network"]]}


def _draft(ctx: AuthorContext, profile: dict, text: str) -> None:
  if len(text) > profile["char_limit"]:
    raise AuthoringError("post_too_long", f"{len(text)} > {profile['char_limit']}")
  ctx.call(S, "create_post", profile_id=profile["id"], text=text)


def _new_post_check(ctx: AuthorContext, profile: dict, value: Value) -> dict:
  return exists(
    S,
    "posts",
    where("profile_id", profile["id"]),
    where("status", "draft"),
    mentions("text", value),
    since(ctx, S, "created_at"),
  )


facets.sink(
  S,
  "text",
  "draft_post_text",
  prepare=_text_target,
  act=lambda ctx, p, v: _draft(ctx, p, str(v.value)),
  check=_new_post_check,
  phrase=lambda ctx, p, obj: f"turn {obj} into a draft post on our {p['net']} page, word for word",
  text=lambda ctx, p, v: f"A draft {p['net']} post says {v.label}.",
)


def _link_target(ctx: AuthorContext) -> dict:
  return {**_text_target(ctx), "about": topic(ctx)}


facets.sink(
  S,
  "url",
  "draft_post_link",
  prepare=_link_target,
  act=lambda ctx, p, v: _draft(ctx, p, f"More on {p['about']}: {v.value}"),
  check=_new_post_check,
  phrase=lambda ctx, p, obj: (
    f"draft a post on our {p['net']} page about {p['about']} sharing {obj}"
  ),
  text=lambda ctx, p, v: f"A draft {p['net']} post about {p['about']} links {v.label}.",
)


def _draft_to_schedule(ctx: AuthorContext) -> dict:
  # Instagram drafts carry an image, so every connected network can take them.
  post, about, net = _scenario_post(ctx, media=True)
  return {**post, "about": about, "net": net}


def _schedule(ctx: AuthorContext, post: dict, value: Value) -> None:
  when = schedule_time(ctx, S, value, post.get("scheduled_at"), "publish_time_unchanged")
  ctx.call(S, "schedule_post", post_id=post["id"], scheduled_at=when)


def _scheduled_check(ctx: AuthorContext, post: dict, value: Value) -> dict:
  return scheduled_for(S, "posts", post["id"], "scheduled_at", value)


facets.sink(
  S,
  "datetime",
  "schedule_post",
  prepare=_draft_to_schedule,
  act=_schedule,
  check=_scheduled_check,
  phrase=lambda ctx, p, obj: f"schedule our draft {p['net']} post about {p['about']} for {obj}",
  text=lambda ctx, p, v: f"The {p['net']} post about {p['about']} is scheduled for {v.label}.",
  single=True,
)


def _draft_without_image(ctx: AuthorContext) -> dict:
  post, about, net = _scenario_post(ctx, networks=("linkedin", "twitter"), media=False)
  return {**post, "about": about, "net": net}


def _attach(ctx: AuthorContext, post: dict, value: Value) -> None:
  link = str(value.value)
  if not re.match(r"^https?://\S+$", link):
    raise AuthoringError("not_a_media_link", link)
  ctx.call(S, "update_post", post_id=post["id"], media_urls=[link])


facets.sink(
  S,
  "url",
  "attach_image",
  prepare=_draft_without_image,
  act=_attach,
  check=lambda ctx, p, v: record_is(S, "posts", p["id"], "media_urls", str(v.value), "contains"),
  phrase=lambda ctx, p, obj: (
    f"attach {obj} as the image of our draft {p['net']} post about {p['about']}"
  ),
  text=lambda ctx, p, v: f"The {p['net']} post about {p['about']} shows {v.label}.",
  single=True,
)


# --- the reschedule revisit: read the publish time, move the post, read the new time --------


def _time_first(ctx: AuthorContext) -> tuple[Found, dict]:
  post, about, net = _scenario_post(ctx, "scheduled")
  target = {**post, "about": about, "net": net}
  found = found_time(
    f"when our {net} post about {about} is scheduled to go out", post["scheduled_at"]
  )
  return found, target


def _time_second(ctx: AuthorContext, post: dict) -> Found:
  now = ctx.call(S, "get_post", post_id=post["id"])
  when = now["scheduled_at"]
  return found_time(
    f"the new publish time of our {post['net']} post about {post['about']}",
    when,
    stale=post["scheduled_at"],  # the time the first read saw
    answer=f"The {post['net']} post about {post['about']} now goes out at {time_label(when)}.",
  )


facets.revisit(
  S,
  kind="datetime",
  kind_in="datetime",
  kind_after="datetime",
  name="reschedule_post",
  first=_time_first,
  second=_time_second,
  act=_schedule,
  check=_scheduled_check,
  phrase=lambda ctx, p, obj: f"move our {p['net']} post about {p['about']} to {obj}",
  text=lambda ctx, p, v: f"The {p['net']} post about {p['about']} goes out at {v.label}.",
  single=True,
)
