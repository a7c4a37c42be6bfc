"""Email marketing facets: audiences as sources of people, campaigns as sources of send times,
subject lines and open counts; subscribing and drafting or scheduling campaigns as sinks; the
reschedule revisit (the send time goes stale)."""

from __future__ import annotations

from datetime import timedelta

from compoworld.tasks.authoring import AuthorContext, AuthoringError
from compoworld.tasks.facets import Found, Value, facets
from compoworld.tasks.rubric import exists, where
from envs._facets_common import (
  found_one,
  found_people,
  found_time,
  iso,
  mentions,
  schedule_time,
  scheduled_for,
  time_label,
  topic,
)
from envs._world import world

S = "email_marketing"


def _audience(ctx: AuthorContext, name: str) -> dict:
  """An audience found by name the way an agent would: from the list of audiences."""
  return next(a for a in ctx.call(S, "list_audiences") if a["name"] == name)


def _audience_id(ctx: AuthorContext, name: str) -> str:
  return next(a.id for a in ctx.state(S).audiences if a.name == name)


def _put_campaign(
  ctx: AuthorContext, name: str, status: str = "draft", audience: str = "Newsletter"
) -> dict:
  """Adds one of the scenario's campaigns to s0: a draft, a scheduled one or a sent one."""
  state, rng = ctx.state(S), ctx.rng
  codename = name.split()[0]
  created = state.now - timedelta(days=rng.randint(1, 6), hours=rng.randint(0, 8))
  send_at = None
  if status == "scheduled":
    send_at = state.now.replace(minute=0) + timedelta(
      days=rng.randint(2, 9), hours=ctx.choice((1, 2, 5, 7))
    )
  record = {
    "id": ctx.fresh_id("cmp"),
    "name": name,
    "subject": f"{codename}: {ctx.choice(('what changes for you', 'a first look', 'save the date'))}",
    "audience_id": _audience_id(ctx, audience),
    "body": f"Everything you need to know about {name.lower()}.",
    "status": status,
    "send_at": iso(send_at) if send_at else None,
    "sent_at": iso(created + timedelta(days=1)) if status == "sent" else None,
    "created_at": iso(created),
    "updated_at": iso(created),
  }
  return ctx.put(S, "campaigns", record)


def _find_campaign(ctx: AuthorContext, campaign: dict) -> dict:
  hits = ctx.call(S, "list_campaigns", query=campaign["name"], status=campaign["status"])["items"]
  return next(c for c in hits if c["name"] == campaign["name"])


# --- sources ---------------------------------------------------------------------------------


@facets.source(S, "person.email")
def waitlist_members(ctx: AuthorContext) -> Found:
  """A waitlist audience of customer contacts, two of whom have since unsubscribed."""
  state, w = ctx.state(S), world(ctx.env.seed)
  emails = sorted({c.email for cu in w.customers for c in cu.contacts})
  members = ctx.rng.sample(emails, 6)
  names = {c.email: c.name for cu in w.customers for c in cu.contacts}
  statuses = ["subscribed"] * 4 + ["unsubscribed"] * 2
  ctx.rng.shuffle(statuses)
  name = f"{topic(ctx)} waitlist"
  newsletter = next(a for a in state.audiences if a.name == "Newsletter")
  aid = ctx.fresh_id("aud")
  ctx.put(
    S,
    "audiences",
    {
      "id": aid,
      "name": name,
      "description": f"People who asked to hear first about {name.rsplit(' ', 1)[0]}",
      "from_name": newsletter.from_name,
      "from_email": newsletter.from_email,
      "created_at": iso(state.now - timedelta(days=20)),
    },
  )
  for email, status in zip(members, statuses, strict=True):
    joined = state.now - timedelta(days=ctx.rng.randint(5, 19))
    ctx.put(
      S,
      "subscribers",
      {
        "id": ctx.fresh_id("sub"),
        "audience_id": aid,
        "email": email,
        "name": names[email],
        "status": status,
        "joined_at": iso(joined),
        "updated_at": iso(joined + timedelta(days=2 if status == "unsubscribed" else 0)),
      },
    )
  audience = _audience(ctx, name)
  rows = ctx.call(S, "search_subscribers", audience_id=audience["id"], limit=100)["items"]
  return found_people(
    f'the people on our "{name}" mailing list',
    [r["email"] for r in rows if r["status"] == "subscribed"],
    [r["email"] for r in rows if r["status"] == "unsubscribed"],
    f'who unsubscribed from the "{name}" list',
  )


@facets.source(S, "datetime")
def campaign_send_time(ctx: AuthorContext) -> Found:
  campaign = _find_campaign(ctx, _put_campaign(ctx, f"{topic(ctx)} announcement", "scheduled"))
  return found_time(
    f'when the "{campaign["name"]}" email campaign is scheduled to go out', campaign["send_at"]
  )


@facets.source(S, "title")
def campaign_subject(ctx: AuthorContext) -> Found:
  campaign = _find_campaign(ctx, _put_campaign(ctx, f"{topic(ctx)} teaser"))
  return found_one(
    "title",
    f'the subject line of the draft "{campaign["name"]}" email campaign',
    campaign["subject"],
  )


@facets.source(S, "number")
def campaign_opens(ctx: AuthorContext) -> Found:
  """A sent campaign's report: how many people opened it."""
  campaign = _put_campaign(ctx, f"{topic(ctx)} digest", "sent")
  recipients = ctx.rng.randint(40, 400)
  bounces = ctx.rng.randint(0, 4)
  delivered = recipients - bounces
  opens = round(delivered * ctx.rng.uniform(0.2, 0.5))
  clicks = round(opens * ctx.rng.uniform(0.1, 0.3))
  ctx.put(
    S,
    "reports",
    {
      "id": campaign["id"],
      "recipients": recipients,
      "delivered": delivered,
      "bounces": bounces,
      "opens": opens,
      "clicks": clicks,
      "unsubscribes": ctx.rng.randint(0, 3),
      "open_rate": round(opens / delivered, 4),
      "click_rate": round(clicks / delivered, 4),
      "sent_at": campaign["sent_at"],
    },
  )
  hit = _find_campaign(ctx, campaign)
  report = ctx.call(S, "get_campaign_report", campaign_id=hit["id"])
  return Found(
    "number",
    f'how many people opened the "{hit["name"]}" email campaign',
    [Value(report["opens"], str(report["opens"]), float(report["opens"]))],
    answer=f'{report["opens"]} people opened "{hit["name"]}".',
  )


# --- lookups ---------------------------------------------------------------------------------


@facets.lookup(S, "company.name", "person.email")
def customer_subscribers(ctx: AuthorContext, found: Found) -> Found | None:
  """The contacts of a customer company on the Customers list (their addresses carry the
  company's name), leaving out those who unsubscribed."""
  company = str(found.values[0].value)
  audience = _audience(ctx, "Customers")
  rows = ctx.call(S, "search_subscribers", audience_id=audience["id"], query=company, limit=100)
  rows = rows["items"]
  going = [r["email"] for r in rows if r["status"] == "subscribed"]
  if not going:
    return None
  return found_people(
    f"the contacts from {company} who are subscribed to our Customers mailing list",
    going,
    [r["email"] for r in rows if r["status"] == "unsubscribed"],
    "who unsubscribed from the Customers list",
    answer=f"Subscribed contacts from {company}: {', '.join(going)}.",
  )


# --- sinks -----------------------------------------------------------------------------------


def _beta_list(ctx: AuthorContext) -> dict:
  audience = _audience(ctx, "Product updates")
  tag = f"{topic(ctx).split()[0].lower()}-beta"
  return {"audience_id": audience["id"], "audience": audience["name"], "tag": tag}


def _subscribe(ctx: AuthorContext, t: dict, value: Value) -> None:
  email = str(value.value).lower()
  # Known to the author, not looked up by a call: the write must be the first call that
  # carries the address, so an agent that brings a stale address writes the wrong one.
  members = ctx.state(S).subscribers
  if any(s.audience_id == t["audience_id"] and s.email == email for s in members):
    raise AuthoringError("already_on_list", email)  # the list would refuse or need consent
  ctx.call(S, "add_subscriber", audience_id=t["audience_id"], email=email, tags=[t["tag"]])


facets.sink(
  S,
  "person.email",
  "subscribe_with_tag",
  prepare=_beta_list,
  act=_subscribe,
  check=lambda ctx, t, v: exists(
    S,
    "subscribers",
    where("audience_id", t["audience_id"]),
    where("email", str(v.value).lower()),
    where("status", "subscribed"),
    where("tags", t["tag"], "contains"),
  ),
  phrase=lambda ctx, t, obj: (
    f'subscribe {obj} to our "{t["audience"]}" mailing list with the tag "{t["tag"]}"'
  ),
  text=lambda ctx, t, v: f'{v.label} is subscribed to "{t["audience"]}", tagged {t["tag"]}.',
)


def _draft_campaign(ctx: AuthorContext) -> dict:
  return _find_campaign(ctx, _put_campaign(ctx, f"{topic(ctx)} launch"))


def _schedule(ctx: AuthorContext, campaign: dict, value: Value) -> None:
  when = schedule_time(ctx, S, value, campaign.get("send_at"), "send_time_unchanged")
  ctx.call(S, "schedule_campaign", campaign_id=campaign["id"], send_at=when)


def _scheduled_check(ctx: AuthorContext, campaign: dict, value: Value) -> dict:
  return scheduled_for(S, "campaigns", campaign["id"], "send_at", value)


facets.sink(
  S,
  "datetime",
  "schedule_campaign",
  prepare=_draft_campaign,
  act=_schedule,
  check=_scheduled_check,
  phrase=lambda ctx, c, obj: f'schedule the draft "{c["name"]}" email campaign to go out at {obj}',
  text=lambda ctx, c, v: f'"{c["name"]}" is scheduled to go out at {v.label}.',
  single=True,
)


def _new_campaign(ctx: AuthorContext) -> dict:
  about = topic(ctx)
  return {
    "name": f"{about} update",
    "subject": f"An update on {about}",
    "audience_id": _audience(ctx, "Newsletter")["id"],
  }


def _draft(ctx: AuthorContext, t: dict, subject: str, body: str) -> None:
  """Drafts the campaign ``t`` names to its list."""
  ctx.call(
    S, "create_campaign", name=t["name"], subject=subject, audience_id=t["audience_id"], body=body
  )


def _drafted(t: dict, condition: dict) -> dict:
  """A rubric condition: the campaign ``t`` names is drafted to its list and meets
  ``condition``."""
  return exists(
    S, "campaigns", where("name", t["name"]), where("audience_id", t["audience_id"]), condition
  )


for kind in ("text", "url"):
  facets.sink(
    S,
    kind,
    f"campaign_with_{kind}",
    prepare=_new_campaign,
    act=lambda ctx, t, v: _draft(ctx, t, t["subject"], f"Hello! {v.value}"),
    check=lambda ctx, t, v: _drafted(t, mentions("body", v)),
    phrase=lambda ctx, t, obj: (
      f'draft an email campaign "{t["name"]}" to our Newsletter list, subject '
      f'"{t["subject"]}", with {obj} in the body'
    ),
    text=lambda ctx, t, v: f'The draft campaign "{t["name"]}" includes {v.label}.',
  )


def _subject_target(ctx: AuthorContext) -> dict:
  return {
    "name": f"{topic(ctx)} promo",
    "audience_id": _audience(ctx, "Newsletter")["id"],
  }


facets.sink(
  S,
  "title",
  "campaign_subject_line",
  prepare=_subject_target,
  act=lambda ctx, t, v: _draft(ctx, t, str(v.value), f"{v.value}: read on for the details."),
  check=lambda ctx, t, v: _drafted(t, where("subject", str(v.value))),
  phrase=lambda ctx, t, obj: (
    f'draft an email campaign "{t["name"]}" to our Newsletter list with {obj} as its subject line'
  ),
  text=lambda ctx, t, v: f'The draft campaign "{t["name"]}" has the subject "{v.label}".',
)


# --- the reschedule revisit: read the send time, move the campaign, read the new time -------


def _time_first(ctx: AuthorContext) -> tuple[Found, dict]:
  campaign = _find_campaign(ctx, _put_campaign(ctx, f"{topic(ctx)} reminder", "scheduled"))
  found = found_time(
    f'when the "{campaign["name"]}" email campaign is scheduled to go out', campaign["send_at"]
  )
  return found, campaign


def _time_second(ctx: AuthorContext, campaign: dict) -> Found:
  hits = ctx.call(S, "list_campaigns", query=campaign["name"], status="scheduled")["items"]
  now = next(c for c in hits if c["id"] == campaign["id"])
  return found_time(
    f'the new send time of the "{campaign["name"]}" campaign',
    now["send_at"],
    stale=campaign["send_at"],  # the time the first read saw
    answer=f'"{campaign["name"]}" now goes out at {time_label(now["send_at"])}.',
  )


facets.revisit(
  S,
  kind="datetime",
  kind_in="datetime",
  kind_after="datetime",
  name="reschedule_campaign",
  first=_time_first,
  second=_time_second,
  act=_schedule,
  check=_scheduled_check,
  phrase=lambda ctx, c, obj: f'move the "{c["name"]}" email campaign to go out at {obj} instead',
  text=lambda ctx, c, v: f'"{c["name"]}" now goes out at {v.label}.',
  single=True,
)
