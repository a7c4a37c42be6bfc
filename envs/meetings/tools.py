"""Meetings: a Zoom-like video meeting service of meetings, registrants, recordings and
transcripts.

The account is the home company's: every colleague can host meetings, and the user (the world's
first person) acts as themselves. A meeting has a topic, a start, a duration, a host, a join URL
with a passcode, an approval mode for registrations and a status that moves
scheduled → started → ended (or scheduled → cancelled). Registrants sign up with their email
and are approved at once ("automatic" approval) or wait for the host ("manual": pending, then
approved or declined). An ended meeting with cloud recording on gets a recording; most recordings
have a transcript whose text can be searched. A recording is private until it is shared, which
gives it a share URL.

Rules a Zoom user expects: a new start lies in the future and the end of a time range after its
start; only the host starts, ends, reschedules or cancels a meeting; only a scheduled meeting can
be rescheduled, cancelled or started, only a started one ended, and a host runs one meeting at a
time; anyone may register people but only the host approves, declines or removes them; nobody
registers twice, the host does not register for their own meeting, and the registrants of an
ended or cancelled meeting no longer change; a recording is shared once.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Literal

from compoworld import Conflict, InvalidArgument, NotFound, Service, registry, tool
from compoworld.runtime.fields import Email, Text
from compoworld.runtime.query import select, text_matches
from envs._world import WorldUser, seeded
from envs.meetings.state import (
  LINES,
  ROLES,
  TOPICS,
  Approval,
  Meeting,
  MeetingsState,
  MeetingStatus,
  Minutes,
  Recording,
  Registrant,
  RegistrantStatus,
  Transcript,
  _join,
)


@registry.register
class MeetingsService(WorldUser, Service):
  name = "meetings"
  domain = "productivity"
  description = "Video meetings: schedule, register people, start and end, recordings, transcripts."
  State = MeetingsState

  @classmethod
  def generate(cls, seed: int, size: int | None) -> MeetingsState:
    rng, w, state = seeded(cls, seed)
    me, now = w.people[0], state.now
    for i in range(size if size is not None else 30):
      topic, agenda, external = TOPICS[i % len(TOPICS)] if i < len(TOPICS) else rng.choice(TOPICS)
      customer, product = rng.choice(w.customers), rng.choice(w.products)
      fill = dict(customer=customer.name, product=product.name, qty=rng.choice((10, 25, 50)))
      fill.update(
        q=rng.choice((1, 2, 3)), role=rng.choice(ROLES), vendor=rng.choice(w.vendors).name
      )
      host = me if rng.random() < 0.65 else rng.choice(w.people[1:])
      minutes = rng.choice((30, 30, 45, 60, 60, 90))
      # The first meeting is the user's, in progress now; the others lie clearly in the past or
      # the future, so a status always agrees with the clock.
      if i == 0:
        host, start = me, now - timedelta(minutes=15)
      else:
        days = rng.choice((*range(-21, 0), *range(1, 22)))
        start = now.replace(hour=rng.randint(8, 16), minute=rng.choice((0, 30))) + timedelta(days)
      mid = state.new_id("mtg")
      url, code = _join(mid)
      status, started, ended = "scheduled", None, None
      if i == 0:
        status, started = "started", start
      elif rng.random() < 0.1:
        status = "cancelled"
      elif start < now:
        status = "ended"
        started = start + timedelta(minutes=rng.randint(0, 4))
        ended = started + timedelta(minutes=minutes + rng.randint(-10, 10))
      meeting = state.meetings.insert(
        Meeting(
          id=mid,
          topic=topic.format(**fill),
          agenda=agenda.format(**fill),
          start=start,
          duration_minutes=minutes,
          host=host.email,
          join_url=url,
          passcode=code,
          approval="manual" if rng.random() < 0.3 else "automatic",
          auto_record=rng.random() < 0.7,
          status=status,
          started_at=started,
          ended_at=ended,
          created_at=start - timedelta(days=rng.randint(2, 20)),
        )
      )
      guests = [(p.name, p.email) for p in rng.sample(w.people[1:], rng.randint(1, 4))]
      if external:
        guests += [(c.name, c.email) for c in customer.contacts[: rng.randint(1, 2)]]
      for name, email in guests:
        if email == meeting.host:
          continue
        choice = ("approved", "approved", "pending", "declined")
        state.registrants.insert(
          Registrant(
            id=state.new_id("reg"),
            meeting_id=mid,
            email=email,
            name=name,
            status="approved" if meeting.approval == "automatic" else rng.choice(choice),
            registered_at=meeting.created_at + timedelta(hours=rng.randint(1, 30)),
          )
        )
      if status == "ended" and meeting.auto_record:
        cls._record(state, rng, w, meeting, [n for n, _ in guests], customer, product)
    return state

  @staticmethod
  def _record(state, rng, w, meeting: Meeting, names, customer, product) -> None:
    rid = state.new_id("rec")
    length = int((meeting.ended_at - meeting.started_at).total_seconds() // 60)
    shared = rng.random() < 0.3
    state.recordings.insert(
      Recording(
        id=rid,
        meeting_id=meeting.id,
        topic=meeting.topic,
        recorded_at=meeting.started_at,
        duration_minutes=length,
        file_size_mb=round(length * rng.uniform(8, 14), 1),
        share_url=f"https://zoom.example.com/rec/share/{rid[4:]}" if shared else None,
        shared_at=meeting.ended_at + timedelta(hours=2) if shared else None,
      )
    )
    if rng.random() < 0.2:
      return  # transcription is not always on
    qty = rng.choice((10, 25, 50, 100))
    day = (meeting.start + timedelta(days=rng.randint(7, 30))).date()
    person = rng.choice(w.people[1:])
    fill = dict(product=product.name, customer=customer.name, qty=qty, date=day.isoformat())
    fill.update(price=f"{w.currency} {product.unit_price:,.2f}", person=person.name)
    fill.update(contact_email=customer.contacts[0].email, pct=rng.randint(10, 40))
    fill.update(amount=f"{w.currency} {rng.randint(50, 400) * 1000:,}", month=day.strftime("%B"))
    fill.update(vendor=rng.choice(w.vendors).name)
    host = next((p.name for p in w.people if p.email == meeting.host), meeting.host)
    speakers = [host, *names] if names else [host]
    lines = [f"[00:00:04] {host}: Thanks for joining, everyone. Today: {meeting.topic}."]
    for k, line in enumerate(rng.sample(LINES, rng.randint(3, 6)), start=1):
      stamp = f"[00:{min(59, 3 * k + rng.randint(0, 2)):02d}:{rng.randint(0, 59):02d}]"
      lines.append(f"{stamp} {rng.choice(speakers)}: {line.format(**fill)}")
    state.transcripts.insert(
      Transcript(
        id=state.new_id("trn"), meeting_id=meeting.id, recording_id=rid, text="\n".join(lines)
      )
    )

  # --- helpers -----------------------------------------------------------------------------

  def _hosted(self, meeting_id: str, action: str) -> Meeting:
    meeting = self.state.meetings.get(meeting_id)
    if meeting.host != self.user:
      raise Conflict(f"only the host {meeting.host} can {action} meeting '{meeting_id}'")
    return meeting

  def _expect(self, meeting: Meeting, allowed: tuple[str, ...], action: str) -> None:
    if meeting.status not in allowed:
      raise Conflict(
        f"meeting '{meeting.id}' is {meeting.status}; only a {' or '.join(allowed)} meeting "
        f"can be {action}"
      )

  def _future(self, start: datetime) -> None:
    if start <= self.state.now:
      raise InvalidArgument(
        f"start ({start.isoformat()}) must be after the current time ({self.state.now.isoformat()})"
      )

  def _registrant(self, meeting_id: str, email: str) -> Registrant:
    reg = next(
      (r for r in self.state.registrants if r.meeting_id == meeting_id and r.email == email), None
    )
    if reg is None:
      raise NotFound(f"'{email}' is not registered for meeting '{meeting_id}'")
    return reg

  # --- reads -------------------------------------------------------------------------------

  @tool(
    mutates=False,
    page="meeting",
    produces=("meeting.id", "title", "datetime", "person.email", "url"),
  )
  def list_meetings(
    self,
    query: str | None = None,
    status: MeetingStatus | None = None,
    host: Email | None = None,
    start_after: datetime | None = None,
    start_before: datetime | None = None,
  ) -> list:
    """List the account's meetings in start order, optionally filtered.

    Args:
      query: words that must all appear in the topic or agenda.
      status: only meetings in this status ("scheduled", "started", "ended" or "cancelled").
      host: only meetings hosted by this email address.
      start_after: only meetings starting at or after this time (ISO 8601).
      start_before: only meetings starting before this time (ISO 8601).
    """
    if start_after and start_before and start_before <= start_after:
      raise InvalidArgument("start_before must be after start_after")
    return select(
      self.state.meetings,
      eq={"status": status, "host": host and host.lower()},
      ge={"start": start_after},
      lt={"start": start_before},
      text=query,
      fields=("topic", "agenda"),
      key=lambda m: (m.start, m.id),
    )

  @tool(
    mutates=False,
    consumes=("meeting.id",),
    produces=("title", "datetime", "duration", "person.email", "url", "status"),
  )
  def get_meeting(self, meeting_id: str) -> dict:
    """Get one meeting with its end time, join link, passcode and registrant counts.

    Args:
      meeting_id: the meeting's id.
    """
    m = self.state.meetings.get(meeting_id)
    regs = [r.status for r in self.state.registrants if r.meeting_id == meeting_id]
    counts = {s: regs.count(s) for s in ("approved", "pending", "declined")}
    end = m.start + timedelta(minutes=m.duration_minutes)
    return {**m.model_dump(), "end": end, "registrants": counts}

  @tool(
    mutates=False,
    page="registrant",
    consumes=("meeting.id",),
    produces=("person.email", "person.name"),
  )
  def list_registrants(self, meeting_id: str, status: RegistrantStatus | None = None) -> list:
    """List the people registered for a meeting, in registration order.

    Args:
      meeting_id: the meeting's id.
      status: only registrants in this status ("approved", "pending" or "declined").
    """
    self.state.meetings.get(meeting_id)
    return select(
      self.state.registrants,
      eq={"meeting_id": meeting_id, "status": status},
      key=lambda r: (r.registered_at, r.id),
    )

  @tool(
    mutates=False,
    page="recording",
    produces=("recording.id", "meeting.id", "duration", "url", "datetime"),
  )
  def list_recordings(self, meeting_id: str | None = None, query: str | None = None) -> list:
    """List cloud recordings, newest first.

    Args:
      meeting_id: only the recordings of this meeting.
      query: words that must all appear in the recording's topic.
    """
    self.state.meetings.check(meeting_id)
    return select(
      self.state.recordings,
      eq={"meeting_id": meeting_id},
      text=query,
      fields=("topic",),
      key=lambda r: (r.recorded_at, r.id),
      reverse=True,
    )

  @tool(mutates=False, consumes=("meeting.id",), produces=("document.text", "text"))
  def get_transcript(self, meeting_id: str) -> Transcript:
    """Get the transcript of a recorded meeting.

    Args:
      meeting_id: the meeting's id.
    """
    self.state.meetings.get(meeting_id)
    missing = f"meeting '{meeting_id}' has no transcript"
    return self.state.transcripts.get_by(missing, meeting_id=meeting_id)

  @tool(mutates=False, page="hit", produces=("meeting.id", "text"))
  def search_transcripts(self, query: Text) -> list:
    """Search transcript text; each hit gives the meeting and the lines that match.

    Args:
      query: words that must all appear in the transcript; lines with any of them are returned.
    """
    words = query.lower().split()
    hits = []
    for t in sorted(self.state.transcripts, key=lambda t: t.id):
      if text_matches(query, t.text):
        meeting = self.state.meetings.get(t.meeting_id)
        lines = [x for x in t.text.splitlines() if any(w in x.lower() for w in words)]
        hits.append(
          {
            "transcript_id": t.id,
            "meeting_id": t.meeting_id,
            "topic": meeting.topic,
            "lines": lines,
          }
        )
    return hits

  # --- writes: meetings --------------------------------------------------------------------

  @tool(mutates=True, consumes=("title", "datetime", "duration"), produces=("meeting.id", "url"))
  def schedule_meeting(
    self,
    topic: Text,
    start: datetime,
    duration_minutes: Minutes = 60,
    agenda: str = "",
    approval: Approval = "automatic",
    auto_record: bool = False,
  ) -> Meeting:
    """Schedule a meeting hosted by you; it gets a join URL and a passcode.

    Args:
      topic: the meeting topic.
      start: start time (ISO 8601), in the future.
      duration_minutes: planned length in minutes (5-1440).
      agenda: what the meeting is about.
      approval: "automatic" approves registrants at once; "manual" leaves them pending.
      auto_record: record the meeting to the cloud when it runs.
    """
    self._future(start)
    mid = self.state.new_id("mtg")
    url, code = _join(mid)
    return self.state.meetings.insert(
      Meeting(
        id=mid,
        topic=topic,
        agenda=agenda,
        start=start,
        duration_minutes=duration_minutes,
        host=self.user,
        join_url=url,
        passcode=code,
        approval=approval,
        auto_record=auto_record,
        created_at=self.state.now,
      )
    )

  @tool(mutates=True, consumes=("meeting.id", "datetime", "duration"))
  def reschedule_meeting(
    self, meeting_id: str, start: datetime | None = None, duration_minutes: Minutes | None = None
  ) -> Meeting:
    """Move a scheduled meeting to a new start time and/or change its length (host only).

    Args:
      meeting_id: the meeting's id.
      start: the new start time (ISO 8601), in the future.
      duration_minutes: the new length in minutes (5-1440).
    """
    meeting = self._hosted(meeting_id, "reschedule")
    if start is None and duration_minutes is None:
      raise InvalidArgument("reschedule_meeting: supply start, duration_minutes or both")
    self._expect(meeting, ("scheduled",), "rescheduled")
    if start is not None:
      self._future(start)
    changes = dict(start=start, duration_minutes=duration_minutes)
    changes = {k: v for k, v in changes.items() if v is not None}
    return self.state.meetings.update(meeting_id, **changes)

  @tool(mutates=True, consumes=("meeting.id",))
  def cancel_meeting(self, meeting_id: str) -> Meeting:
    """Cancel a scheduled meeting (host only); it stays listed as "cancelled".

    Args:
      meeting_id: the meeting's id.
    """
    meeting = self._hosted(meeting_id, "cancel")
    if meeting.status == "started":
      raise Conflict(f"meeting '{meeting_id}' is in progress; end it instead of cancelling it")
    self._expect(meeting, ("scheduled",), "cancelled")
    return self.state.meetings.update(meeting_id, status="cancelled")

  @tool(mutates=True, consumes=("meeting.id",), produces=("url",))
  def start_meeting(self, meeting_id: str) -> Meeting:
    """Start a scheduled meeting now (host only; a host runs one meeting at a time).

    Args:
      meeting_id: the meeting's id.
    """
    meeting = self._hosted(meeting_id, "start")
    self._expect(meeting, ("scheduled",), "started")
    running = next(
      (m for m in self.state.meetings if m.host == meeting.host and m.status == "started"), None
    )
    if running is not None:
      raise Conflict(
        f"you are already hosting meeting '{running.id}' ({running.topic}); end it before "
        "starting another"
      )
    return self.state.meetings.update(meeting_id, status="started", started_at=self.state.now)

  @tool(mutates=True, consumes=("meeting.id",), produces=("recording.id", "duration"))
  def end_meeting(self, meeting_id: str) -> dict:
    """End a meeting in progress (host only); with cloud recording on, a recording is made.

    Args:
      meeting_id: the meeting's id.
    """
    meeting = self._hosted(meeting_id, "end")
    self._expect(meeting, ("started",), "ended")
    ended = self.state.meetings.update(meeting_id, status="ended", ended_at=self.state.now)
    recording = None
    if ended.auto_record:
      length = max(1, int((ended.ended_at - ended.started_at).total_seconds() // 60))
      recording = self.state.recordings.insert(
        Recording(
          id=self.state.new_id("rec"),
          meeting_id=meeting_id,
          topic=ended.topic,
          recorded_at=ended.started_at,
          duration_minutes=length,
          file_size_mb=round(length * 10.5, 1),
        )
      )
    return {"meeting": ended, "recording": recording}

  # --- writes: registrants and recordings --------------------------------------------------

  @tool(mutates=True, consumes=("meeting.id", "person.email", "person.name"))
  def add_registrant(self, meeting_id: str, email: Email, name: Text) -> Registrant:
    """Register someone for a meeting; they are approved at once unless the meeting uses
    manual approval, in which case they wait as "pending".

    Args:
      meeting_id: the meeting's id.
      email: the registrant's email address.
      name: the registrant's full name.
    """
    meeting = self.state.meetings.get(meeting_id)
    self._expect(meeting, ("scheduled", "started"), "registered for")
    email = email.lower()
    if email == meeting.host:
      raise Conflict(f"{email} hosts meeting '{meeting_id}' and does not need to register")
    existing = next(
      (r for r in self.state.registrants if r.meeting_id == meeting_id and r.email == email), None
    )
    if existing is not None:
      raise Conflict(
        f"{email} is already registered for meeting '{meeting_id}' ({existing.status})"
      )
    return self.state.registrants.insert(
      Registrant(
        id=self.state.new_id("reg"),
        meeting_id=meeting_id,
        email=email,
        name=name,
        status="approved" if meeting.approval == "automatic" else "pending",
        registered_at=self.state.now,
      )
    )

  @tool(mutates=True, consumes=("meeting.id", "person.email"))
  def remove_registrant(self, meeting_id: str, email: Email) -> Registrant:
    """Remove someone's registration from a meeting (host only).

    Args:
      meeting_id: the meeting's id.
      email: the registrant's email address.
    """
    meeting = self._hosted(meeting_id, "remove registrants of")
    reg = self._registrant(meeting_id, email.lower())
    self._expect(meeting, ("scheduled", "started"), "changed")
    return self.state.registrants.delete(reg.id)

  @tool(mutates=True, consumes=("meeting.id", "person.email"))
  def update_registrant_status(
    self, meeting_id: str, email: Email, status: Literal["approved", "declined"]
  ) -> Registrant:
    """Approve or decline a registrant (host only).

    Args:
      meeting_id: the meeting's id.
      email: the registrant's email address.
      status: "approved" or "declined".
    """
    meeting = self._hosted(meeting_id, "approve or decline registrants of")
    reg = self._registrant(meeting_id, email.lower())
    self._expect(meeting, ("scheduled", "started"), "changed")
    if reg.status == status:
      raise Conflict(f"{reg.email} is already {status} for meeting '{meeting_id}'")
    return self.state.registrants.update(reg.id, status=status)

  @tool(mutates=True, consumes=("recording.id",), produces=("url",))
  def share_recording(self, recording_id: str) -> Recording:
    """Share a cloud recording: it gets a link anyone in the account can open.

    Args:
      recording_id: the recording's id.
    """
    rec = self.state.recordings.get(recording_id)
    if rec.share_url is not None:
      raise Conflict(f"recording '{recording_id}' is already shared at {rec.share_url}")
    return self.state.recordings.update(
      recording_id,
      share_url=f"https://zoom.example.com/rec/share/{recording_id[4:]}",
      shared_at=self.state.now,
    )
