"""Social posts: a Buffer/Hootsuite-like scheduler for the company's social media profiles.

The company has one connected profile per network (Twitter/X, LinkedIn, Instagram, Facebook),
each with a handle, a follower count and a connection that can lapse (an expired token). A post
belongs to one profile and has text and optional media links; it is a draft, is scheduled for a
future time, has been published, or failed to publish (with a reason). Published posts collect
analytics: impressions, likes, shares, clicks and comments; a post just published starts at zero.

Rules a social media manager expects: text fits the network's limit (Twitter 280, LinkedIn
3000, Instagram 2200, Facebook 5000 characters) and media fit its count limit; media are
http(s) links; a schedule time lies in the future; Instagram posts need at least one image or
video before they are scheduled or published; a disconnected profile cannot schedule or publish
until it is reconnected; published posts cannot be edited, rescheduled or deleted here; only
published posts have analytics.
"""

from __future__ import annotations

import random
import re
from datetime import datetime, timedelta
from typing import Annotated, Literal

from pydantic import Field

from compoworld import Conflict, InvalidArgument, Service, registry, tool
from compoworld.runtime.fields import Limit, Offset, Text
from compoworld.runtime.query import page_of, select
from compoworld.runtime.state import Record, ServiceState, Table
from envs._world import WorldUser, seeded

Network = Literal["twitter", "linkedin", "instagram", "facebook"]
PostStatus = Literal["draft", "scheduled", "published", "failed"]
Metric = Literal["impressions", "likes", "shares", "clicks", "engagement"]
MediaUrl = Annotated[str, Field(pattern=r"^https?://\S+$", description="An http(s) media link.")]

CHAR_LIMIT = {"twitter": 280, "linkedin": 3000, "instagram": 2200, "facebook": 5000}
MEDIA_LIMIT = {"twitter": 4, "linkedin": 9, "instagram": 10, "facebook": 10}


class Profile(Record):
  network: Network
  handle: str
  display_name: str
  followers: int
  connected: bool = True
  char_limit: int


class Post(Record):
  profile_id: str
  text: str
  media_urls: tuple[str, ...] = ()
  status: PostStatus = "draft"
  author: str  # employee email
  scheduled_at: datetime | None = None
  published_at: datetime | None = None
  failure_reason: str | None = None
  created_at: datetime
  updated_at: datetime


class Analytics(Record):
  id: str  # the post's id
  impressions: int = 0
  likes: int = 0
  shares: int = 0
  clicks: int = 0
  comments: int = 0
  engagement_rate: float = 0.0  # (likes + shares + clicks + comments) / impressions


class SocialPostsState(ServiceState):
  profiles: Table[Profile]
  posts: Table[Post]
  analytics: Table[Analytics]


TEMPLATES = (
  "New: {product} is now shipping. Built for teams that move fast.",
  "Big thanks to {customer} for a great quarter together. Here's to the next one!",
  "We're in {city} next week. Come say hi at {venue}!",
  "We're hiring a {title} for our {department} team. Know someone great? Send them our way.",
  "How {customer} cut setup time in half with {product}: a short case study.",
  "Three tips to get more out of {product} this spring. Thread below.",
  "Our team volunteered at {venue} in {city} this weekend. Proud of everyone who joined.",
  "Webinar on Thursday: what's next for {product}. Save your seat.",
)
LINKEDIN_TAIL = (
  "\n\nWe started {company} to make everyday operations simpler, and stories like this are why "
  "we keep going. Thank you to our customers and to the team behind every release."
)
FAILURES = (
  "Access token expired; reconnect the profile",
  "Image could not be processed",
  "Rate limited by the network",
)


def _metrics(rng: random.Random, followers: int) -> dict:
  impressions = int(followers * rng.uniform(0.05, 0.6)) + rng.randint(20, 400)
  likes = int(impressions * rng.uniform(0.01, 0.06))
  shares = int(likes * rng.uniform(0.05, 0.3))
  clicks = int(impressions * rng.uniform(0.004, 0.03))
  comments = int(likes * rng.uniform(0.02, 0.2))
  return dict(
    impressions=impressions,
    likes=likes,
    shares=shares,
    clicks=clicks,
    comments=comments,
    engagement_rate=round((likes + shares + clicks + comments) / impressions, 4),
  )


@registry.register
class SocialPostsService(WorldUser, Service):
  name = "social_posts"
  domain = "marketing"
  description = "Social media scheduler: draft, schedule and publish posts; read their analytics."
  State = SocialPostsState

  @classmethod
  def generate(cls, seed: int, size: int | None) -> SocialPostsState:
    rng, w, state = seeded(cls, seed)
    now = state.now
    slug = re.sub(r"[^a-z0-9]", "", w.company.lower())
    handles = {
      "twitter": f"@{slug}",
      "linkedin": f"company/{slug}",
      "instagram": f"@{slug}.hq",
      "facebook": slug.capitalize(),
    }
    for network, handle in handles.items():
      state.profiles.insert(
        Profile(
          id=state.new_id("prf"),
          network=network,
          handle=handle,
          display_name=w.company,
          followers=rng.randint(800, 40000),
          # One profile's token has lapsed, so the reconnect rule has a profile to trip on.
          connected=network != "facebook",
          char_limit=CHAR_LIMIT[network],
        )
      )
    profiles = list(state.profiles)
    team = [p for p in w.people if p.department == "Marketing"] or [w.people[0]]
    for _ in range(size if size is not None else 30):
      profile = rng.choice(profiles)
      venue, customer = rng.choice(w.venues), rng.choice(w.customers)
      hire = rng.choice(w.people)
      text = rng.choice(TEMPLATES).format(
        product=rng.choice(w.products).name,
        customer=customer.name,
        city=venue.city,
        venue=venue.name,
        title=hire.title,
        department=hire.department,
      )
      if profile.network == "linkedin" and rng.random() < 0.5:
        text += LINKEDIN_TAIL.format(company=w.company)
      media = ()
      if profile.network == "instagram" or rng.random() < 0.3:
        media = tuple(
          f"https://cdn.{w.domain}/media/{rng.getrandbits(32):08x}.jpg"
          for _ in range(rng.randint(1, 3))
        )
      if profile.connected:
        status = rng.choices(("draft", "scheduled", "published", "failed"), (2, 2, 5, 1))[0]
      else:  # posts on the lapsed profile went out before it lapsed, or failed after
        status = rng.choice(("published", "failed"))
      created = now - timedelta(days=rng.randint(1, 60), hours=rng.randint(0, 10))
      scheduled = published = reason = None
      if status == "scheduled":
        scheduled = now.replace(minute=0) + timedelta(
          days=rng.randint(1, 14), hours=rng.randint(1, 8)
        )
      elif status in ("published", "failed"):
        slot = (created + timedelta(days=rng.randint(1, 5))).replace(hour=rng.choice((9, 12, 17)))
        scheduled = min(slot.replace(minute=0), now - timedelta(hours=1))
        if status == "published":
          published = scheduled
        elif not profile.connected:
          reason = FAILURES[0]
        else:
          reason = rng.choice(FAILURES[1:]) if media else FAILURES[2]
      post = state.posts.insert(
        Post(
          id=state.new_id("pst"),
          profile_id=profile.id,
          text=text,
          media_urls=media,
          status=status,
          author=rng.choice(team).email,
          scheduled_at=scheduled,
          published_at=published,
          failure_reason=reason,
          created_at=created,
          updated_at=created,
        )
      )
      if status == "published":
        state.analytics.insert(Analytics(id=post.id, **_metrics(rng, profile.followers)))
    return state

  # --- helpers -----------------------------------------------------------------------------

  def _check_content(self, profile: Profile, text: str, media: tuple[str, ...]) -> None:
    if len(text) > profile.char_limit:
      raise InvalidArgument(
        f"text is {len(text)} characters; {profile.network} allows {profile.char_limit}"
      )
    if len(media) > MEDIA_LIMIT[profile.network]:
      raise InvalidArgument(
        f"media_urls has {len(media)} items; {profile.network} allows "
        f"{MEDIA_LIMIT[profile.network]}"
      )

  def _check_publishable(self, profile: Profile, media: tuple[str, ...]) -> None:
    if not profile.connected:
      raise Conflict(
        f"profile '{profile.id}' ({profile.network} {profile.handle}) is disconnected; "
        "reconnect it before scheduling or publishing"
      )
    if profile.network == "instagram" and not media:
      raise Conflict("instagram posts need at least one image or video in media_urls")

  def _future(self, when: datetime) -> datetime:
    if when <= self.state.now:
      raise InvalidArgument(
        f"scheduled_at ({when.isoformat()}) must be in the future "
        f"(now {self.state.now.isoformat()})"
      )
    return when

  def _unpublished(self, post_id: str, action: str) -> Post:
    post = self.state.posts.get(post_id)
    if post.status == "published":
      raise Conflict(f"post '{post_id}' is already published and cannot be {action}")
    return post

  def _ranked(self, post: Post) -> dict:
    return {**post.model_dump(), "analytics": self.state.analytics.get(post.id).model_dump()}

  # --- reads -------------------------------------------------------------------------------

  @tool(mutates=False, produces=("profile.id", "person.handle", "number"))
  def list_profiles(self) -> list[Profile]:
    """List the connected social profiles with their network, handle, followers, character
    limit and whether their connection is still valid."""
    return sorted(self.state.profiles, key=lambda p: (p.network, p.id))

  @tool(mutates=False, page="post", produces=("post.id", "text", "status", "datetime", "url"))
  def list_posts(
    self, profile_id: str | None = None, status: PostStatus | None = None, query: str | None = None
  ) -> list:
    """List posts, latest first (by publish, schedule or creation time).

    Args:
      profile_id: only posts of this profile.
      status: only this status ("draft", "scheduled", "published" or "failed").
      query: words that must all appear in the text.
    """
    self.state.profiles.check(profile_id)
    return select(
      self.state.posts,
      eq={"profile_id": profile_id, "status": status},
      text=query,
      fields=("text",),
      key=lambda p: (p.published_at or p.scheduled_at or p.created_at, p.id),
      reverse=True,
    )

  @tool(mutates=False, produces=("post.id", "text", "status", "datetime", "url"))
  def get_post(self, post_id: str) -> Post:
    """Get one post with its text, media, status and times.

    Args:
      post_id: the post's id.
    """
    return self.state.posts.get(post_id)

  @tool(mutates=False, consumes=("post.id",), produces=("number", "percentage"))
  def get_post_analytics(self, post_id: str) -> Analytics:
    """Get a published post's analytics: impressions, likes, shares, clicks, comments and
    engagement rate.

    Args:
      post_id: the post's id.
    """
    post = self.state.posts.get(post_id)
    if post.status != "published":
      raise Conflict(f"post '{post_id}' is {post.status}; only published posts have analytics")
    return self.state.analytics.get(post_id)

  @tool(mutates=False, produces=("post.id", "text", "number"))
  def top_posts(
    self,
    metric: Metric = "engagement",
    profile_id: str | None = None,
    network: Network | None = None,
    limit: Limit = 5,
    offset: Offset = 0,
  ) -> dict:
    """Rank published posts by a metric, best first, each with its analytics.

    Args:
      metric: "impressions", "likes", "shares", "clicks" or "engagement" (likes + shares +
        clicks + comments).
      profile_id: only posts of this profile.
      network: only posts on this network.
      limit: page size (1-100).
      offset: index of the first post to return.
    """
    self.state.profiles.check(profile_id)

    def score(post: Post) -> int:
      a = self.state.analytics.get(post.id)
      if metric == "engagement":
        return a.likes + a.shares + a.clicks + a.comments
      return getattr(a, metric)

    return page_of(
      self.state.posts,
      eq={"status": "published", "profile_id": profile_id},
      where=lambda p: network is None or self.state.profiles.get(p.profile_id).network == network,
      key=lambda p: (-score(p), p.id),
      limit=limit,
      offset=offset,
      view=self._ranked,
    )

  # --- writes ------------------------------------------------------------------------------

  @tool(mutates=True, consumes=("profile.id", "text", "url", "datetime"), produces=("post.id",))
  def create_post(
    self,
    profile_id: str,
    text: Text,
    media_urls: list[MediaUrl] = (),
    scheduled_at: datetime | None = None,
  ) -> Post:
    """Write a post for a profile: a draft, or scheduled when a time is given.

    Args:
      profile_id: the profile to post on.
      text: the post text, within the network's character limit.
      media_urls: http(s) links of images or videos to attach.
      scheduled_at: when to publish (ISO 8601), in the future; omit to keep a draft.
    """
    profile = self.state.profiles.get(profile_id)
    media = tuple(media_urls)
    self._check_content(profile, text, media)
    if scheduled_at is not None:
      self._future(scheduled_at)
      self._check_publishable(profile, media)
    return self.state.posts.insert(
      Post(
        id=self.state.new_id("pst"),
        profile_id=profile.id,
        text=text,
        media_urls=media,
        status="draft" if scheduled_at is None else "scheduled",
        author=self.user,
        scheduled_at=scheduled_at,
        created_at=self.state.now,
        updated_at=self.state.now,
      )
    )

  @tool(mutates=True, consumes=("post.id", "text", "url"))
  def update_post(
    self, post_id: str, text: Text | None = None, media_urls: list[MediaUrl] | None = None
  ) -> Post:
    """Edit a post that is not published yet; only supplied fields change (an empty media list
    removes the media).

    Args:
      post_id: the post's id.
      text: new text, within the network's character limit.
      media_urls: new media links, replacing the old ones.
    """
    post = self._unpublished(post_id, "edited")
    if text is None and media_urls is None:
      raise InvalidArgument("update_post: supply text or media_urls")
    profile = self.state.profiles.get(post.profile_id)
    new_text = post.text if text is None else text
    media = post.media_urls if media_urls is None else tuple(media_urls)
    self._check_content(profile, new_text, media)
    if post.status == "scheduled" and profile.network == "instagram" and not media:
      raise Conflict("instagram posts need at least one image or video in media_urls")
    return self.state.posts.update(
      post_id, text=new_text, media_urls=media, updated_at=self.state.now
    )

  @tool(mutates=True, consumes=("post.id", "datetime"))
  def schedule_post(self, post_id: str, scheduled_at: datetime) -> Post:
    """Schedule a draft or failed post, or move a scheduled one, to a future time.

    Args:
      post_id: the post's id.
      scheduled_at: when to publish (ISO 8601), in the future.
    """
    post = self._unpublished(post_id, "rescheduled")
    self._future(scheduled_at)
    self._check_publishable(self.state.profiles.get(post.profile_id), post.media_urls)
    return self.state.posts.update(
      post_id,
      status="scheduled",
      scheduled_at=scheduled_at,
      failure_reason=None,
      updated_at=self.state.now,
    )

  @tool(mutates=True, consumes=("post.id",), produces=("datetime",))
  def publish_now(self, post_id: str) -> Post:
    """Publish a draft, scheduled or failed post immediately; its analytics start at zero.

    Args:
      post_id: the post's id.
    """
    post = self._unpublished(post_id, "published again")
    self._check_publishable(self.state.profiles.get(post.profile_id), post.media_urls)
    self.state.analytics.insert(Analytics(id=post.id))
    return self.state.posts.update(
      post_id,
      status="published",
      published_at=self.state.now,
      failure_reason=None,
      updated_at=self.state.now,
    )

  @tool(mutates=True, consumes=("post.id",))
  def delete_post(self, post_id: str) -> Post:
    """Delete a draft, scheduled or failed post (published posts are deleted on the network).

    Args:
      post_id: the post's id.
    """
    self._unpublished(post_id, "deleted here")
    return self.state.posts.delete(post_id)
