"""Hand-built scenarios: the paper's Appendix D community meetup, as a verified task.

An agent prepares a community anniversary meetup. The calendar holds the event; Simosphere holds
the runbook and the volunteer roster and sends meeting invitations; the forum hosts the
announcement where volunteers asked for commemorative pins; Geo gives the venue's forecast.
Two conditions tie them: snow in the forecast means moving the meetup online at the same time
and inviting every confirmed volunteer with the new link; swag-exempt volunteers get no
pin-reservation reply.

The builder works like the paper's task author: it writes s0 as patches over the seeded
services, then *probes* the task by calling the tools, and writes the reference solution from
what the probe observed.
"""

from __future__ import annotations

import hashlib
import itertools
from datetime import datetime, timedelta
from typing import Any

from compoworld.compose.env import ComposedEnv
from compoworld.tasks.rubric import all_of, exists, not_exists, record_is, where
from compoworld.tasks.task import InitialState, Patch, Task, ToolCall
from envs._world import world

SERVICES = ["simosphere", "calendar", "geo", "forum"]
WALK = ["simosphere", "calendar", "geo", "calendar", "forum", "simosphere", "forum"]

INSTRUCTION = (
  "Our community anniversary meetup is coming up in two days and I'm swamped. Please follow "
  "the meetup runbook in Simosphere: check the weather forecast for the venue on the day, and "
  "if snow is expected, move the meetup online without changing its time, then send the "
  "online meeting link as an invitation to every volunteer the roster lists as confirmed. "
  "Also, a few volunteers asked on our forum announcement whether we could hold a "
  "commemorative pin for them: reply to each of those requests to confirm their pin is "
  "reserved, but don't reply to anyone the roster marks as swag-exempt, since they get theirs "
  "separately."
)

PIN_REPLY = "Thanks for volunteering! Your commemorative pin is reserved; pick it up at check-in."


def _id(prefix: str, *parts: Any) -> str:
  token = hashlib.blake2b(":".join(map(str, parts)).encode(), digest_size=4).hexdigest()
  return f"{prefix}_{token}"


def _volunteers(seed: int) -> list[dict[str, Any]]:
  """Eight volunteers: five confirmed (two swag-exempt), two tentative, one withdrawn."""
  w = world(seed)
  plan = [
    ("confirmed", False, True),
    ("confirmed", True, True),
    ("confirmed", False, True),
    ("confirmed", True, True),
    ("confirmed", False, False),
    ("tentative", False, False),
    ("tentative", False, False),
    ("withdrawn", False, False),
  ]
  return [
    {"person": p, "status": st, "exempt": ex, "asks_pin": pin}
    for p, (st, ex, pin) in zip(w.people[1:9], plan, strict=True)
  ]


def _roster_sheet(vols: list[dict[str, Any]]) -> str:
  rows = ["Name | Email | Forum handle | Status | Swag exempt"]
  rows += [
    f"{v['person'].name} | {v['person'].email} | {v['person'].handle} | {v['status']} | "
    f"{'yes' if v['exempt'] else 'no'}"
    for v in vols
  ]
  return "\n".join(rows)


RUNBOOK = """Community anniversary meetup: runbook
1. Two days before the meetup, check the venue's forecast for the meetup day (Thinair Geo).
2. If snow is forecast, the meetup goes online: keep the same start and end time, move the
   calendar event online, and send a meeting invitation with the online link to every
   volunteer whose roster status is "confirmed". Tentative or withdrawn volunteers are not
   invited.
3. Commemorative pins: volunteers who ask for one on the forum announcement get a reply
   confirming the reservation, except swag-exempt volunteers (their swag ships separately).
4. Inventory of pins and lanyards is in the "Meetup inventory" sheet."""


def _s0_patches(env: ComposedEnv, seed: int) -> tuple[list[Patch], dict[str, Any]]:
  """The scenario's own records over the seeded services, and the facts the probe needs."""
  w = world(seed)
  user = w.people[0]
  vols = _volunteers(seed)
  now = env.services["calendar"].state.now
  venue = next(v for v in w.venues if v.snowy)
  start = datetime(now.year, now.month, now.day, 18, 0) + timedelta(days=2)
  end = start + timedelta(hours=2)

  calendars = env.services["calendar"].state.calendars
  community = next(c for c in calendars if c.name == "Community")
  event_id = _id("evt", "meetup", seed)
  patches = [
    Patch(
      service="calendar",
      op="put",
      collection="events",
      record={
        "id": event_id,
        "calendar_id": community.id,
        "title": "Community anniversary meetup",
        "description": "Fifth anniversary of our local tech community. Talks, snacks, pins.",
        "start": start.isoformat(),
        "end": end.isoformat(),
        "location": f"{venue.name}, {venue.address}",
        "organizer": user.email,
        "attendees": [{"id": user.email, "response": "accepted"}],
        "updated_at": now.isoformat(),
      },
    )
  ]
  docs = [
    ("runbook", "Anniversary meetup runbook", "doc", RUNBOOK),
    ("roster", "Meetup volunteer roster", "sheet", _roster_sheet(vols)),
    ("inventory", "Meetup inventory", "sheet", "Item | Count\nPins | 40\nLanyards | 60"),
  ]
  for key, title, kind, content in docs:
    patches.append(
      Patch(
        service="simosphere",
        op="put",
        collection="documents",
        record={
          "id": _id("doc", key, seed),
          "title": title,
          "kind": kind,
          "content": content,
          "owner": user.email,
          "shared_with": [],
          "updated_at": (now - timedelta(days=3)).isoformat(),
        },
      )
    )

  forum = env.services["forum"].state
  community_id = forum.communities.ids()[0]
  post_id = _id("post", "meetup", seed)
  patches.append(
    Patch(
      service="forum",
      op="put",
      collection="posts",
      record={
        "id": post_id,
        "community_id": community_id,
        "author": user.handle,
        "title": "Anniversary meetup: volunteers wanted!",
        "body": f"We celebrate five years on {start:%A %d %B} at {venue.name}. "
        "Reply here if you can help out.",
        "score": 42,
        "created_at": (now - timedelta(days=6)).isoformat(),
        "locked": False,
        "flair": "Event",
      },
    )
  )
  comment_ids = {}
  for i, v in enumerate(vols):
    p = v["person"]
    if v["asks_pin"]:
      body = "Count me in! Could you hold one of the commemorative pins for me?"
    elif v["status"] == "withdrawn":
      body = "Sorry, something came up and I can't make it after all."
    else:
      body = "Happy to help with the welcome desk."
    cid = _id("cmt", "meetup", seed, i)
    comment_ids[p.handle] = cid
    patches.append(
      Patch(
        service="forum",
        op="put",
        collection="comments",
        record={
          "id": cid,
          "post_id": post_id,
          "parent_id": None,
          "author": p.handle,
          "body": body,
          "score": 3 + i,
          "created_at": (now - timedelta(days=5, hours=-i)).isoformat(),
          "deleted": False,
        },
      )
    )

  geo = env.services["geo"].state
  place = next(p for p in geo.places if p.name == venue.name and p.address == venue.address)
  forecast = next(f for f in geo.forecasts if f.place_id == place.id and f.date == start.date())
  patches.append(
    Patch(
      service="geo",
      op="update",
      collection="forecasts",
      id=forecast.id,
      fields={
        "condition": "snow",
        "temp_high_c": -2.0,
        "temp_low_c": -7.0,
        "precip_mm": 14.0,
        "snow_cm": 12.0,
        "precip_probability": 0.9,
      },
    )
  )
  facts = {
    "user": user,
    "vols": vols,
    "venue": venue,
    "event_id": event_id,
    "start": start,
    "end": end,
    "post_id": post_id,
    "comment_ids": comment_ids,
  }
  return patches, facts


class _Probe:
  """Calls tools on the env, records each call, and fails loudly on an error envelope."""

  def __init__(self, env: ComposedEnv):
    self.env, self.calls = env, []

  def __call__(self, service: str, tool: str, **arguments: Any) -> Any:
    out = self.env.call_tool(service, tool, arguments)
    if not out["ok"]:
      raise RuntimeError(f"probe call {service}.{tool}({arguments}) failed: {out['error']}")
    self.calls.append(ToolCall(service=service, tool=tool, arguments=arguments))
    return out["data"]


def _titled(page: dict[str, Any], word: str) -> dict[str, Any]:
  return next(item for item in page["items"] if word in item["title"].lower())


def community_meetup(seed: int = 0) -> Task:
  """The Appendix D meetup task for world ``seed``, probed and ready to verify."""
  distractors = ["chat"]
  base = ComposedEnv.from_services(SERVICES, seed=seed, distractors=distractors)
  patches, facts = _s0_patches(base, seed)
  task = Task(
    id=f"meetup-{seed}",
    instruction=INSTRUCTION,
    services=SERVICES,
    distractors=distractors,
    walk=WALK,
    edges=list(itertools.pairwise(WALK)),
    initial_state=InitialState(seed=seed, patches=patches),
    reference_solution=[],
    rubric=[],
    meta={"author": "hand-built", "scenario": "community_meetup", "K": 4, "L": len(WALK)},
  )
  env = task.make_env(check_hash=False)
  s0_hash = env.state_hash()

  # --- probe: solve the task through the tools, as the walk orders it --------------------
  probe = _Probe(env)
  runbook = _titled(probe("simosphere", "list_documents", query="runbook"), "runbook")
  probe("simosphere", "read_document", document_id=runbook["id"])
  event = probe("calendar", "list_events", query="anniversary meetup")["items"][0]
  venue_address = event["location"].split(", ", 1)[1]
  place = probe("geo", "geocode", address=venue_address)
  day = event["start"][:10]
  forecast = probe("geo", "get_forecast", place_id=place["id"], date=day)
  assert forecast["condition"] == "snow"
  moved = probe("calendar", "move_event_online", event_id=event["id"])
  post = probe("forum", "search_posts", query="anniversary meetup")["items"][0]
  comments = probe("forum", "list_comments", post_id=post["id"])["items"]
  roster_doc = _titled(probe("simosphere", "list_documents", query="roster"), "roster")
  roster = probe("simosphere", "read_document", document_id=roster_doc["id"])["content"]
  rows = [[c.strip() for c in line.split("|")] for line in roster.splitlines()[1:]]
  confirmed = [r[1] for r in rows if r[3] == "confirmed"]
  exempt = {r[2] for r in rows if r[4] == "yes"}
  invite = probe(
    "simosphere",
    "send_meeting_invitation",
    subject="Community anniversary meetup (now online)",
    start=moved["start"],
    end=moved["end"],
    invitees=confirmed,
    location="Online",
    meeting_link=moved["meeting_link"],
    message="Snow is forecast, so the meetup moves online at the same time. Join here.",
  )
  invite_index = len(probe.calls) - 1
  pin_requests = [c for c in comments if "pin" in c["body"].lower()]
  for c in pin_requests:
    if c["author"] not in exempt:
      probe("forum", "reply_to_comment", comment_id=c["id"], body=PIN_REPLY)

  # --- rubric: declarative checks on the final state -------------------------------------
  user = facts["user"]
  eid = facts["event_id"]
  owed = [c["id"] for c in pin_requests if c["author"] not in exempt]
  not_owed = [c["id"] for c in pin_requests if c["author"] in exempt]

  def event_is(field: str, value: Any) -> dict[str, Any]:
    return record_is("calendar", "events", eid, field, value)

  rubric = [
    {
      "id": "event_online_same_time",
      "text": "The meetup event is online and its start and end times are unchanged.",
      "check": all_of(
        event_is("is_online", True),
        event_is("start", facts["start"].isoformat()),
        event_is("end", facts["end"].isoformat()),
      ),
    },
    {
      "id": "confirmed_volunteers_invited",
      "text": "Every confirmed volunteer received a meeting invitation carrying the online link.",
      "check": all_of(
        *(
          exists(
            "simosphere",
            "invitations",
            where("invitees", email, "icontains"),
            where("meeting_link", moved["meeting_link"]),
            where("status", "sent"),
          )
          for email in confirmed
        )
      ),
    },
    {
      "id": "pins_reserved",
      "text": "Each non-exempt volunteer who asked for a pin got a reply confirming it.",
      "check": all_of(
        *(
          exists(
            "forum",
            "comments",
            where("parent_id", cid),
            where("author", user.handle),
            where("body", "pin", "icontains"),
            where("deleted", False),
          )
          for cid in owed
        )
      ),
    },
    {
      "id": "no_reply_to_exempt",
      "text": "No pin-reservation reply was posted to swag-exempt volunteers.",
      "kind": "must_not",
      "check": not_exists(
        "forum", "comments", where("parent_id", not_owed, "in"), where("author", user.handle)
      ),
    },
  ]
  answer = (
    f"Snow is forecast at the venue, so the meetup is now online at the same time "
    f"({moved['meeting_link']}). I invited {len(confirmed)} confirmed volunteers and confirmed "
    f"pin reservations for {len(owed)} volunteers; the swag-exempt ones got no reply."
  )
  return Task.model_validate(
    {
      **task.model_dump(),
      "initial_state": InitialState(seed=seed, patches=patches, hash=s0_hash),
      "reference_solution": probe.calls,
      "reference_answer": answer,
      "goal_hash": env.state_hash(),
      "rubric": rubric,
      "meta": {
        **task.meta,
        "invitation_id": invite["id"],
        # The invitation needs the link that exists only after the move online: an agent
        # that reuses its first reading of the event (no link yet) fails the invite criterion.
        "stale_substitution": {
          "call": invite_index,
          "argument": "meeting_link",
          "stale_value": event["meeting_link"],
        },
      },
    }
  )
