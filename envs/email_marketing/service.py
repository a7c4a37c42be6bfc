"""Email marketing: a Mailchimp-like service of audiences, subscribers, campaigns and reports.

An audience (a mailing list) has a sender name and address and holds subscribers: an email
address (unique within the audience), a name, tags and a status: "subscribed", "unsubscribed"
(they opted out) or "cleaned" (the address bounced). A campaign is an email (name, subject,
body) to one audience, optionally only to the subscribers carrying one tag; it is a draft, is
scheduled for a future time, or has been sent. Sending delivers it to every subscribed member of
its segment and produces a report: recipients, opens, clicks, bounces and unsubscribes. The
numbers are derived deterministically from the campaign id and the recipients' addresses;
addresses that bounce are cleaned and people who unsubscribe are marked so.

Rules an email marketer expects: a campaign cannot be sent or scheduled to an empty segment nor
without content; a schedule time lies in the future; a scheduled campaign must be unscheduled
before it is edited and a sent one cannot be edited or sent again; an unsubscribed address is
re-added only with explicit consent (``resubscribe=True``) and a cleaned one not at all; a
report exists only for a sent campaign.
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta
from typing import Annotated, Literal

from pydantic import Field

from compoworld import Conflict, InvalidArgument, Service, registry, tool
from compoworld.runtime.fields import Email, Text
from compoworld.runtime.query import select
from compoworld.runtime.state import Record, ServiceState, Table, supplied
from envs._world import FIRST, LAST, seeded

SubscriberStatus = Literal["subscribed", "unsubscribed", "cleaned"]
CampaignStatus = Literal["draft", "scheduled", "sent"]
Tag = Annotated[str, Field(min_length=1, max_length=50, pattern=r"^[\w][\w -]*$")]


class Audience(Record):
  name: str
  description: str = ""
  from_name: str
  from_email: str
  created_at: datetime


class Subscriber(Record):
  audience_id: str
  email: str
  name: str = ""
  status: SubscriberStatus = "subscribed"
  tags: tuple[str, ...] = ()
  joined_at: datetime
  updated_at: datetime


class Campaign(Record):
  name: str
  subject: str
  audience_id: str
  body: str = ""
  segment_tag: str | None = None
  status: CampaignStatus = "draft"
  send_at: datetime | None = None
  sent_at: datetime | None = None
  created_at: datetime
  updated_at: datetime


class Report(Record):
  id: str  # the campaign's id
  recipients: int
  delivered: int
  bounces: int
  opens: int
  clicks: int
  unsubscribes: int
  open_rate: float
  click_rate: float
  sent_at: datetime


class EmailMarketingState(ServiceState):
  audiences: Table[Audience]
  subscribers: Table[Subscriber]
  campaigns: Table[Campaign]
  reports: Table[Report]


MAIL_DOMAINS = ("gmail.com", "outlook.com", "proton.me", "yahoo.com", "fastmail.com")
#: (audience name, description, share of the generated subscribers, tags to draw from)
AUDIENCES = (
  ("Customers", "Contacts at customer accounts", 0.4, ("vip", "enterprise", "renewal-2026")),
  ("Newsletter", "Monthly newsletter readers", 0.4, ("blog", "webinar", "trial", "vip")),
  ("Product updates", "Release notes and product news", 0.2, ("beta", "hardware", "software")),
  ("Webinar waitlist", "Sign-ups for the spring webinar (opens soon)", 0.0, ()),
)
#: (name, subject, body, audience index, segment tag)
CAMPAIGNS = (
  ("January newsletter", "What's new this January", "Our top stories of the month...", 1, None),
  ("Renewal reminder", "Your plan renews soon", "Your plan renews next month...", 0, None),
  ("Release 4.2", "Release 4.2: faster dashboards", "Dashboards now load twice as fast.", 2, None),
  ("VIP preview", "An early look for our VIPs", "You are invited to an early preview.", 1, "vip"),
  ("February newsletter", "February highlights", "Customer stories and tips.", 1, None),
  ("Spring webinar invite", "Join our spring webinar", "Save your seat for the webinar.", 3, None),
  ("March newsletter", "March: what's coming", "", 1, None),
  ("Customer survey", "Two minutes to help us improve?", "Tell us how we are doing.", 0, None),
)


def _fraction(*parts: str) -> float:
  """A deterministic number in [0, 1) derived from ``parts``."""
  digest = hashlib.blake2b(":".join(parts).encode(), digest_size=8).digest()
  return int.from_bytes(digest, "big") / 2**64


def _segment(
  state: EmailMarketingState, campaign: Campaign, at: datetime | None = None
) -> list[Subscriber]:
  """The subscribed members a campaign reaches (at time ``at``: only those who had joined)."""
  return sorted(
    (
      s
      for s in state.subscribers
      if s.audience_id == campaign.audience_id
      and s.status == "subscribed"
      and (campaign.segment_tag is None or campaign.segment_tag in s.tags)
      and (at is None or s.joined_at <= at)
    ),
    key=lambda s: s.email,
  )


def _deliver(state: EmailMarketingState, campaign: Campaign, at: datetime) -> Report:
  """Sends a campaign: cleans bounced addresses, marks unsubscribes, files the report."""
  recipients = _segment(state, campaign, at)
  cid = campaign.id
  bounce_rate = 0.01 + 0.04 * _fraction(cid, "bounce")
  unsub_rate = 0.005 + 0.02 * _fraction(cid, "unsub")
  bounces = unsubscribes = 0
  for s in recipients:
    roll = _fraction(cid, s.email)
    if roll < bounce_rate:
      bounces += 1
      state.subscribers.update(s.id, status="cleaned", updated_at=at)
    elif roll < bounce_rate + unsub_rate:
      unsubscribes += 1
      state.subscribers.update(s.id, status="unsubscribed", updated_at=at)
  delivered = len(recipients) - bounces
  opens = round(delivered * (0.18 + 0.3 * _fraction(cid, "open")))
  clicks = round(opens * (0.08 + 0.25 * _fraction(cid, "click")))
  state.campaigns.update(cid, status="sent", sent_at=at, send_at=None, updated_at=at)
  return state.reports.insert(
    Report(
      id=cid,
      recipients=len(recipients),
      delivered=delivered,
      bounces=bounces,
      opens=opens,
      clicks=clicks,
      unsubscribes=unsubscribes,
      open_rate=round(opens / delivered, 4) if delivered else 0.0,
      click_rate=round(clicks / delivered, 4) if delivered else 0.0,
      sent_at=at,
    )
  )


@registry.register
class EmailMarketingService(Service):
  name = "email_marketing"
  domain = "marketing"
  description = "Mailchimp-like email marketing: audiences, subscribers, campaigns, reports."
  State = EmailMarketingState

  @classmethod
  def generate(cls, seed: int, size: int | None) -> EmailMarketingState:
    rng, w, state = seeded(cls, seed)
    now, total = state.now, size if size is not None else 60
    marketer = next((p for p in w.people if p.department == "Marketing"), w.people[0])
    contacts = [(c, cu) for cu in w.customers for c in cu.contacts]
    audience_ids = []
    for name, desc, share, tags in AUDIENCES:
      aid = state.new_id("aud")
      audience_ids.append(aid)
      state.audiences.insert(
        Audience(
          id=aid,
          name=name,
          description=desc,
          from_name=f"{marketer.name.split()[0]} at {w.company}",
          from_email=f"news@{w.domain}",
          created_at=now - timedelta(days=rng.randint(200, 700) if share else 2),
        )
      )
      seen: set[str] = set()
      for i in range(round(total * share)):
        if name == "Customers" and i < len(contacts):
          contact, customer = contacts[i]
          email, person = contact.email, contact.name
          extra = (customer.industry.lower(),)
        else:
          first, last = rng.choice(FIRST), rng.choice(LAST)
          person = f"{first} {last}"
          email = f"{first}.{last}{rng.randint(1, 99)}@{rng.choice(MAIL_DOMAINS)}".lower()
          extra = ()
        if email in seen:  # the same address twice in one audience is one subscriber
          continue
        seen.add(email)
        joined = now - timedelta(days=rng.randint(30, 600), hours=rng.randint(0, 12))
        state.subscribers.insert(
          Subscriber(
            id=state.new_id("sub"),
            audience_id=aid,
            email=email,
            name=person,
            status=rng.choices(("subscribed", "unsubscribed", "cleaned"), (85, 10, 5))[0],
            tags=tuple(sorted({*rng.sample(tags, rng.randint(0, 2)), *extra})),
            joined_at=joined,
            updated_at=joined,
          )
        )
    # The first five campaigns went out over the past months; the rest are scheduled or drafts.
    for i, (name, subject, body, audience, tag) in enumerate(CAMPAIGNS):
      created = now - timedelta(days=(len(CAMPAIGNS) - i) * 14 + rng.randint(0, 5))
      campaign = state.campaigns.insert(
        Campaign(
          id=state.new_id("cmp"),
          name=name,
          subject=subject,
          audience_id=audience_ids[audience],
          body=body,
          segment_tag=tag,
          created_at=created,
          updated_at=created,
        )
      )
      if i < 5:
        _deliver(state, campaign, created + timedelta(days=rng.randint(1, 4), hours=10))
      elif i == 7:
        at = now.replace(hour=10, minute=0) + timedelta(days=rng.randint(2, 9))
        state.campaigns.update(campaign.id, status="scheduled", send_at=at)
    return state

  # --- helpers -----------------------------------------------------------------------------

  def _unsent(self, campaign_id: str) -> Campaign:
    campaign = self.state.campaigns.get(campaign_id)
    if campaign.status == "sent":
      raise Conflict(f"campaign '{campaign_id}' was already sent and cannot be changed")
    return campaign

  def _ready(self, campaign: Campaign) -> None:
    """A campaign can go out: it has content and someone to reach."""
    if not campaign.body.strip():
      raise Conflict(f"campaign '{campaign.id}' has no content; set its body first")
    if not _segment(self.state, campaign):
      who = f" tagged '{campaign.segment_tag}'" if campaign.segment_tag else ""
      raise Conflict(
        f"audience '{campaign.audience_id}' has no subscribed members{who}; "
        f"campaign '{campaign.id}' would reach nobody"
      )

  # --- reads -------------------------------------------------------------------------------

  @tool(mutates=False, produces=("audience.id", "person.email", "number"))
  def list_audiences(self) -> list[dict]:
    """List the audiences with their sender and member counts by status."""
    out = []
    for a in sorted(self.state.audiences, key=lambda a: (a.name, a.id)):
      members = self.state.subscribers.filter(lambda s, aid=a.id: s.audience_id == aid)
      counts = {st: sum(s.status == st for s in members) for st in SubscriberStatus.__args__}
      out.append({**a.model_dump(), "member_counts": counts})
    return out

  @tool(
    mutates=False,
    page="subscriber",
    produces=("subscriber.id", "person.email", "person.name", "status"),
  )
  def search_subscribers(
    self,
    audience_id: str | None = None,
    query: str | None = None,
    status: SubscriberStatus | None = None,
    tag: str | None = None,
  ) -> list:
    """Search subscribers, in email order.

    Args:
      audience_id: only members of this audience.
      query: words that must all appear in the email or name.
      status: only this status ("subscribed", "unsubscribed" or "cleaned").
      tag: only subscribers carrying this tag.
    """
    self.state.audiences.check(audience_id)
    return select(
      self.state.subscribers,
      eq={"audience_id": audience_id, "status": status},
      text=query,
      fields=("email", "name"),
      where=lambda s: tag is None or tag in s.tags,
      key=lambda s: (s.email, s.id),
    )

  @tool(mutates=False, page="campaign", produces=("campaign.id", "title", "status", "datetime"))
  def list_campaigns(
    self,
    status: CampaignStatus | None = None,
    audience_id: str | None = None,
    query: str | None = None,
  ) -> list:
    """List campaigns, newest first.

    Args:
      status: only this status ("draft", "scheduled" or "sent").
      audience_id: only campaigns to this audience.
      query: words that must all appear in the name, subject or body.
    """
    self.state.audiences.check(audience_id)
    return select(
      self.state.campaigns,
      eq={"status": status, "audience_id": audience_id},
      text=query,
      fields=("name", "subject", "body"),
      key=lambda c: (c.created_at, c.id),
      reverse=True,
    )

  @tool(mutates=False, consumes=("campaign.id",), produces=("number", "percentage", "datetime"))
  def get_campaign_report(self, campaign_id: str) -> Report:
    """Get a sent campaign's report: recipients, deliveries, bounces, opens, clicks, unsubscribes
    and rates.

    Args:
      campaign_id: the campaign's id.
    """
    campaign = self.state.campaigns.get(campaign_id)
    if campaign.status != "sent":
      raise Conflict(f"campaign '{campaign_id}' is {campaign.status}; reports exist once sent")
    return self.state.reports.get(campaign_id)

  # --- writes: subscribers -----------------------------------------------------------------

  @tool(
    mutates=True,
    consumes=("audience.id", "person.email", "person.name"),
    produces=("subscriber.id",),
  )
  def add_subscriber(
    self,
    audience_id: str,
    email: Email,
    name: str = "",
    tags: list[Tag] = (),
    resubscribe: bool = False,
  ) -> Subscriber:
    """Subscribe an address to an audience. An address that unsubscribed comes back only with
    resubscribe=True (their renewed consent); a cleaned (bounced) address cannot be re-added.

    Args:
      audience_id: the audience's id.
      email: the subscriber's email address.
      name: their name.
      tags: tags to give them.
      resubscribe: confirm that a person who unsubscribed asked to subscribe again.
    """
    self.state.audiences.get(audience_id)
    email = email.lower()
    old = next(
      (s for s in self.state.subscribers if s.audience_id == audience_id and s.email == email),
      None,
    )
    if old is None:
      return self.state.subscribers.insert(
        Subscriber(
          id=self.state.new_id("sub"),
          audience_id=audience_id,
          email=email,
          name=name,
          tags=tuple(sorted(set(tags))),
          joined_at=self.state.now,
          updated_at=self.state.now,
        )
      )
    if old.status == "subscribed":
      raise Conflict(f"{email} is already subscribed to audience '{audience_id}' ('{old.id}')")
    if old.status == "cleaned":
      raise Conflict(f"{email} bounced and was cleaned from audience '{audience_id}'")
    if not resubscribe:
      raise Conflict(
        f"{email} unsubscribed from audience '{audience_id}'; re-add them only with their "
        "consent, passing resubscribe=True"
      )
    return self.state.subscribers.update(
      old.id,
      status="subscribed",
      name=name or old.name,
      tags=tuple(sorted({*old.tags, *tags})),
      updated_at=self.state.now,
    )

  @tool(mutates=True, consumes=("subscriber.id",))
  def update_subscriber_tags(
    self, subscriber_id: str, add: list[Tag] = (), remove: list[Tag] = ()
  ) -> Subscriber:
    """Add and remove tags on a subscriber.

    Args:
      subscriber_id: the subscriber's id.
      add: tags to add.
      remove: tags to remove.
    """
    sub = self.state.subscribers.get(subscriber_id)
    if not add and not remove:
      raise InvalidArgument("update_subscriber_tags: give tags to add or remove")
    both = set(add) & set(remove)
    if both:
      raise InvalidArgument(f"tags {sorted(both)} are both added and removed")
    tags = tuple(sorted((set(sub.tags) | set(add)) - set(remove)))
    if tags == sub.tags:
      raise Conflict(f"subscriber '{subscriber_id}' already has exactly these tags: {list(tags)}")
    return self.state.subscribers.update(subscriber_id, tags=tags, updated_at=self.state.now)

  @tool(mutates=True, consumes=("subscriber.id",))
  def unsubscribe(self, subscriber_id: str) -> Subscriber:
    """Unsubscribe a subscriber; they stay listed with status "unsubscribed".

    Args:
      subscriber_id: the subscriber's id.
    """
    sub = self.state.subscribers.get(subscriber_id)
    if sub.status != "subscribed":
      raise Conflict(f"subscriber '{subscriber_id}' is {sub.status}, not subscribed")
    return self.state.subscribers.update(
      subscriber_id, status="unsubscribed", updated_at=self.state.now
    )

  # --- writes: campaigns -------------------------------------------------------------------

  @tool(
    mutates=True,
    consumes=("audience.id", "title", "document.text"),
    produces=("campaign.id",),
  )
  def create_campaign(
    self,
    name: Text,
    subject: Text,
    audience_id: str,
    body: str = "",
    segment_tag: Tag | None = None,
  ) -> Campaign:
    """Create a draft campaign to an audience (or to its members carrying one tag).

    Args:
      name: internal campaign name.
      subject: the email subject line.
      audience_id: the audience to send to.
      body: the email content.
      segment_tag: send only to members carrying this tag.
    """
    self.state.audiences.get(audience_id)
    return self.state.campaigns.insert(
      Campaign(
        id=self.state.new_id("cmp"),
        name=name,
        subject=subject,
        audience_id=audience_id,
        body=body,
        segment_tag=segment_tag,
        created_at=self.state.now,
        updated_at=self.state.now,
      )
    )

  @tool(mutates=True, consumes=("campaign.id", "audience.id", "title", "document.text"))
  def update_campaign(
    self,
    campaign_id: str,
    name: Text | None = None,
    subject: Text | None = None,
    body: str | None = None,
    audience_id: str | None = None,
    segment_tag: Tag | None = None,
  ) -> Campaign:
    """Edit a draft campaign; only supplied fields change. Unschedule a scheduled campaign
    first; a sent campaign cannot be edited.

    Args:
      campaign_id: the campaign's id.
      name: new internal name.
      subject: new subject line.
      body: new content.
      audience_id: new audience.
      segment_tag: new segment tag.
    """
    campaign = self._unsent(campaign_id)
    if campaign.status == "scheduled":
      raise Conflict(f"campaign '{campaign_id}' is scheduled; unschedule it before editing")
    self.state.audiences.check(audience_id)
    changes = supplied(
      "update_campaign",
      dict(name=name, subject=subject, body=body, audience_id=audience_id, segment_tag=segment_tag),
    )
    return self.state.campaigns.update(campaign_id, updated_at=self.state.now, **changes)

  @tool(mutates=True, consumes=("campaign.id", "datetime"))
  def schedule_campaign(self, campaign_id: str, send_at: datetime) -> Campaign:
    """Schedule a campaign for a future time (rescheduling a scheduled one moves it).

    Args:
      campaign_id: the campaign's id.
      send_at: when to send it (ISO 8601), in the future.
    """
    campaign = self._unsent(campaign_id)
    if send_at <= self.state.now:
      raise InvalidArgument(
        f"send_at ({send_at.isoformat()}) must be in the future (now {self.state.now.isoformat()})"
      )
    self._ready(campaign)
    return self.state.campaigns.update(
      campaign_id, status="scheduled", send_at=send_at, updated_at=self.state.now
    )

  @tool(mutates=True, consumes=("campaign.id",))
  def unschedule_campaign(self, campaign_id: str) -> Campaign:
    """Return a scheduled campaign to draft so it can be edited.

    Args:
      campaign_id: the campaign's id.
    """
    campaign = self._unsent(campaign_id)
    if campaign.status != "scheduled":
      raise Conflict(f"campaign '{campaign_id}' is a draft, not scheduled")
    return self.state.campaigns.update(
      campaign_id, status="draft", send_at=None, updated_at=self.state.now
    )

  @tool(mutates=True, consumes=("campaign.id",), produces=("number", "percentage"))
  def send_campaign(self, campaign_id: str) -> Report:
    """Send a draft or scheduled campaign now to every subscribed member of its segment, and
    return its report.

    Args:
      campaign_id: the campaign's id.
    """
    campaign = self._unsent(campaign_id)
    self._ready(campaign)
    return _deliver(self.state, campaign, self.state.now)
