"""Chat: the records, state and constants; the service and its tools are in ``tools``."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import Field

from compoworld import Record, ServiceState, Table

ChannelName = Annotated[
  str,
  Field(
    pattern=r"^[a-z0-9][a-z0-9_-]{1,79}$",
    description="2-80 lowercase letters, digits, '-' or '_', starting with a letter or digit.",
  ),
]
MessageText = Annotated[str, Field(min_length=1, max_length=4000)]
Emoji = Annotated[str, Field(pattern=r"^:?[a-z0-9_+-]{1,50}:?$")]
Topic = Annotated[str, Field(max_length=250)]


class User(Record):
  id: str  # the person's handle
  display_name: str
  email: str
  title: str = ""
  status_text: str = ""
  deactivated: bool = False


class Channel(Record):
  name: str
  topic: str = ""
  is_private: bool = False
  members: tuple[str, ...] = ()
  archived: bool = False
  created_by: str


class Reaction(Record):
  id: str  # the emoji name, e.g. "thumbsup"
  users: tuple[str, ...] = ()


class Message(Record):
  channel_id: str  # a channel id or a direct conversation id
  author: str
  text: str
  ts: datetime
  thread_ts_id: str | None = None  # the top-level message this one replies to
  reactions: tuple[Reaction, ...] = ()
  edited: bool = False


class DirectConversation(Record):
  members: tuple[str, ...]


class ChatState(ServiceState):
  #: Handle of the signed-in user.
  current_user: str = ""
  users: Table[User]
  channels: Table[Channel]
  messages: Table[Message]
  dms: Table[DirectConversation]


STATUSES = ("", "", "", "In meetings all day", "Focus time", "On vacation", "Commuting", "OOO Fri")
EMOJIS = ("thumbsup", "eyes", "tada", "white_check_mark", "pray", "joy", "rocket", "heart")
#: (name, topic, private, user is a member, chatter templates)
CHANNELS = (
  (
    "general",
    "Company-wide announcements",
    False,
    True,
    (
      "Reminder: all-hands is Thursday at 4pm, the agenda is in the shared doc.",
      "Please welcome {first} to the team!",
      "The {city} office will be closed Monday for maintenance.",
      "Benefits enrollment closes Friday, ping People Ops with any questions.",
      "Q{q} OKR drafts are due by the end of next week.",
      "New expense policy is live: receipts over $75 need a photo.",
    ),
  ),
  (
    "random",
    "Non-work banter",
    False,
    True,
    (
      "Anyone up for lunch at the taco place around noon?",
      "Photos from the {city} offsite are up in the shared drive.",
      "Whoever brought the banana bread to the kitchen: thank you.",
      "Book club is picking next month's book, nominations in thread.",
      "Fire drill at 3pm today, don't panic.",
    ),
  ),
  (
    "eng",
    "Engineering: deploys, reviews, incidents",
    False,
    True,
    (
      "Deploy of api v2.{n} is out, keep an eye on the error dashboards.",
      "PR #{pr} is ready for review: retry logic for the billing webhook.",
      "The checkout test suite is flaky again, looking into it.",
      "Postgres upgrade window is Saturday 02:00-04:00 UTC.",
      "Who owns the search indexer? Seeing about {n} minutes of lag.",
      "Heads-up: rotating the staging API keys this afternoon.",
    ),
  ),
  (
    "sales",
    "Deals, pipeline and customer asks",
    False,
    False,
    (
      "Closed-won: {org} for ${n}k ARR!",
      "{org} needs a security questionnaire back by Friday.",
      "Pipeline review moved to Wednesday 10am.",
      "{org} asked for a discount on the annual plan, thoughts?",
      "Renewal call with {org} went well, they want a multi-year quote.",
    ),
  ),
  (
    "support-escalations",
    "Escalated customer tickets that need eng or leadership eyes",
    False,
    True,
    (
      "Escalation: {org} can't export invoices since this morning (ticket #{ticket}).",
      "Customer reports an SSO login loop, ticket #{ticket}.",
      "SLA breach risk on #{ticket}, need someone from eng.",
      "Resolved #{ticket}: root cause was an expired certificate.",
      "{org} is asking for an incident report on yesterday's outage.",
    ),
  ),
  (
    "leadership",
    "Leads only: planning, budget, hiring",
    True,
    True,
    (
      "Draft of the reorg memo is ready for review.",
      "Q{q} budget is approved with a {n}% cut to travel.",
      "Offer for the staff engineer candidate went out today.",
      "Board deck numbers need to be final by Tuesday.",
    ),
  ),
)
REPLIES = (
  "On it.",
  "Thanks, {first}!",
  "+1",
  "Can you share the link?",
  "Looking now.",
  "Fixed in PR #{pr}.",
  "I'll follow up with them today.",
  "Great news!",
  "Let's discuss at standup.",
  "Same here, seeing it too.",
)
DIRECT = (
  "Hey, do you have 10 minutes today?",
  "Can you review my doc before Friday?",
  "Thanks for covering on-call yesterday.",
  "Running 5 minutes late to our 1:1.",
  "Did {org} sign yet?",
  "Sent you the slides, let me know what you think.",
)
