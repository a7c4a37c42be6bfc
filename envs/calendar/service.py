"""Calendar: a Google Calendar-like service of calendars and events.

Events carry a time window, a location (a venue address, or "Online" with a meeting link) and
attendees with their responses. Rules a calendar user expects: an event ends after it starts, a
cancelled event cannot be changed, an event already online cannot be moved online again, only
supplied fields change on update.
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta
from typing import Literal

from compoworld import Conflict, InvalidArgument, NotFound, Service, registry, tool
from compoworld.runtime.fields import Email, Text
from compoworld.runtime.query import select
from compoworld.runtime.state import Record, ServiceState, Table, supplied
from envs._world import seeded

Response = Literal["needs_action", "accepted", "declined", "tentative"]


class Attendee(Record):
  id: str  # the attendee's email; records are keyed by id everywhere
  response: Response = "needs_action"


class Calendar(Record):
  name: str
  owner: str
  description: str = ""


class Event(Record):
  calendar_id: str
  title: str
  description: str = ""
  start: datetime
  end: datetime
  location: str = ""
  is_online: bool = False
  meeting_link: str | None = None
  organizer: str
  attendees: tuple[Attendee, ...] = ()
  status: Literal["confirmed", "cancelled"] = "confirmed"
  updated_at: datetime


class CalendarState(ServiceState):
  calendars: Table[Calendar]
  events: Table[Event]


EVENT_TITLES = (
  "Quarterly planning",
  "1:1",
  "Design review",
  "Customer call",
  "Team standup",
  "Budget sync",
  "Hiring panel",
  "Product demo",
  "Retro",
  "Vendor check-in",
  "All-hands",
  "Roadmap review",
)


def _meeting_link(event_id: str) -> str:
  token = hashlib.blake2b(event_id.encode(), digest_size=5).hexdigest()
  return f"https://meet.example.com/{token[:3]}-{token[3:7]}-{token[7:]}"


@registry.register
class CalendarService(Service):
  name = "calendar"
  domain = "productivity"
  description = "Calendars and events: schedule, update, move online, invite attendees."
  State = CalendarState

  @classmethod
  def generate(cls, seed: int, size: int | None) -> CalendarState:
    rng, w, state = seeded(cls, seed)
    owner = w.people[0]
    for name, desc in (
      ("Work", "Meetings and reviews"),
      ("Team", "Team rituals"),
      ("Community", "Meetups and volunteering"),
    ):
      cid = state.new_id("cal")
      state.calendars.insert(Calendar(id=cid, name=name, owner=owner.email, description=desc))
    cal_ids = state.calendars.ids()
    for _ in range(size if size is not None else 30):
      start = state.now.replace(minute=0) + timedelta(
        days=rng.randint(-7, 28), hours=rng.randint(-1, 8)
      )
      people = rng.sample(w.people, rng.randint(1, 5))
      venue = rng.choice(w.venues)
      eid = state.new_id("evt")
      state.events.insert(
        Event(
          id=eid,
          calendar_id=rng.choice(cal_ids[:2]),
          title=rng.choice(EVENT_TITLES),
          start=start,
          end=start + timedelta(minutes=rng.choice((30, 45, 60, 90))),
          location=f"{venue.name}, {venue.address}",
          organizer=rng.choice(people).email,
          attendees=tuple(
            Attendee(id=p.email, response=rng.choice(("accepted", "needs_action", "tentative")))
            for p in people
          ),
          updated_at=state.now,
        )
      )
    return state

  # --- reads -------------------------------------------------------------------------------

  @tool(mutates=False)
  def list_calendars(self) -> list[Calendar]:
    """List the user's calendars."""
    return list(self.state.calendars)

  @tool(mutates=False, page="event", produces=("event.id", "datetime", "location"))
  def list_events(
    self,
    query: str | None = None,
    calendar_id: str | None = None,
    start_after: datetime | None = None,
    start_before: datetime | None = None,
    attendee: Email | None = None,
    include_cancelled: bool = False,
  ) -> list:
    """List events in start order, optionally filtered.

    Args:
      query: words that must all appear in the title, description or location.
      calendar_id: only events of this calendar.
      start_after: only events starting at or after this time (ISO 8601).
      start_before: only events starting before this time (ISO 8601).
      attendee: only events this email address attends.
      include_cancelled: include cancelled events.
    """
    self.state.calendars.check(calendar_id)
    return select(
      self.state.events,
      eq={"calendar_id": calendar_id},
      ge={"start": start_after},
      lt={"start": start_before},
      text=query,
      fields=("title", "description", "location"),
      where=lambda e: (
        (include_cancelled or e.status == "confirmed")
        and (attendee is None or any(a.id == attendee.lower() for a in e.attendees))
      ),
      key=lambda e: (e.start, e.id),
    )

  @tool(mutates=False, produces=("event.id", "datetime", "location", "person.email", "url"))
  def get_event(self, event_id: str) -> Event:
    """Get one event with its time, location, meeting link and attendees.

    Args:
      event_id: the event's id.
    """
    return self.state.events.get(event_id)

  # --- writes ------------------------------------------------------------------------------

  @tool(mutates=True, consumes=("datetime", "location", "person.email"), produces=("event.id",))
  def create_event(
    self,
    calendar_id: str,
    title: Text,
    start: datetime,
    end: datetime,
    location: str = "",
    description: str = "",
    attendees: list[Email] = (),
  ) -> Event:
    """Create an event on a calendar; the user is the organizer.

    Args:
      calendar_id: the calendar to add the event to.
      title: the event title.
      start: start time (ISO 8601).
      end: end time (ISO 8601), after the start.
      location: where it happens.
      description: free text.
      attendees: email addresses to invite.
    """
    cal = self.state.calendars.get(calendar_id)
    if end <= start:
      raise InvalidArgument(f"end ({end.isoformat()}) must be after start ({start.isoformat()})")
    event = Event(
      id=self.state.new_id("evt"),
      calendar_id=cal.id,
      title=title,
      description=description,
      start=start,
      end=end,
      location=location,
      organizer=cal.owner,
      attendees=tuple(Attendee(id=a) for a in dict.fromkeys(e.lower() for e in attendees)),
      updated_at=self.state.now,
    )
    return self.state.events.insert(event)

  def _live(self, event_id: str) -> Event:
    event = self.state.events.get(event_id)
    if event.status == "cancelled":
      raise Conflict(f"event '{event_id}' is cancelled and cannot be changed")
    return event

  @tool(mutates=True, consumes=("datetime", "location"))
  def update_event(
    self,
    event_id: str,
    title: Text | None = None,
    start: datetime | None = None,
    end: datetime | None = None,
    location: str | None = None,
    description: str | None = None,
  ) -> Event:
    """Change an event's title, time, location or description; only supplied fields change.

    Args:
      event_id: the event's id.
      title: new title.
      start: new start time (ISO 8601).
      end: new end time (ISO 8601).
      location: new location.
      description: new description.
    """
    event = self._live(event_id)
    changes = supplied(
      "update_event",
      dict(title=title, start=start, end=end, location=location, description=description),
    )
    new_start, new_end = changes.get("start", event.start), changes.get("end", event.end)
    if new_end <= new_start:
      raise InvalidArgument(
        f"end ({new_end.isoformat()}) must be after start ({new_start.isoformat()})"
      )
    return self.state.events.update(event_id, updated_at=self.state.now, **changes)

  @tool(mutates=True, produces=("url",))
  def move_event_online(self, event_id: str) -> Event:
    """Move an event online, keeping its time: the location becomes "Online" and a meeting
    link is created.

    Args:
      event_id: the event's id.
    """
    event = self._live(event_id)
    if event.is_online:
      raise Conflict(f"event '{event_id}' is already online at {event.meeting_link}")
    return self.state.events.update(
      event_id,
      is_online=True,
      location="Online",
      meeting_link=_meeting_link(event_id),
      updated_at=self.state.now,
    )

  @tool(mutates=True, consumes=("person.email",))
  def add_attendees(self, event_id: str, emails: list[Email]) -> Event:
    """Invite people to an event; addresses already on the list are left as they are.

    Args:
      event_id: the event's id.
      emails: email addresses to add.
    """
    event = self._live(event_id)
    present = {a.id for a in event.attendees}
    wanted = dict.fromkeys(e.lower() for e in emails)
    new = [Attendee(id=e) for e in wanted if e not in present]
    if not new:
      raise Conflict(f"every given address already attends event '{event_id}'")
    return self.state.events.update(
      event_id, attendees=event.attendees + tuple(new), updated_at=self.state.now
    )

  @tool(mutates=True, consumes=("person.email",))
  def remove_attendee(self, event_id: str, email: Email) -> Event:
    """Remove one attendee from an event.

    Args:
      event_id: the event's id.
      email: the attendee's email address.
    """
    event = self._live(event_id)
    kept = tuple(a for a in event.attendees if a.id != email.lower())
    if len(kept) == len(event.attendees):
      raise NotFound(f"'{email}' does not attend event '{event_id}'")
    return self.state.events.update(event_id, attendees=kept, updated_at=self.state.now)

  @tool(mutates=True)
  def cancel_event(self, event_id: str) -> Event:
    """Cancel an event (it stays visible with status "cancelled").

    Args:
      event_id: the event's id.
    """
    self._live(event_id)
    return self.state.events.update(event_id, status="cancelled", updated_at=self.state.now)
