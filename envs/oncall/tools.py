"""Oncall: a PagerDuty-like incident response service of on-call schedules and incidents.

Technical services (``checkout-api``, ``data-pipeline``...) each follow an escalation policy: an
ordered list of levels, where a level notifies whoever is on call on a schedule and/or fixed
employees. A schedule is a rotation of employees taking fixed-length shifts (daily, weekly...)
from its rotation start, until its optional end; an override puts someone else on call for a
window (the latest override wins). Incidents are triggered on a service (high or low urgency),
go to the first level's on-call responder, and move triggered → acknowledged → resolved.
Escalating re-triggers the incident at the next level; reassigning hands it to another
responder. Every step is written to the incident's timeline of notes.

Rules an on-call engineer expects: only a triggered incident can be acknowledged; only a
triggered or acknowledged one can be resolved; a resolved incident is immutable (no notes,
escalations or reassignments); escalation stops at the policy's last level; incidents can only be
reassigned to employees on the service's policy or its schedules' rotations; a service in
maintenance does not open incidents, and an open incident with the same title on a service is
not duplicated. An override ends after it starts, lies within its schedule's coverage, is not in
the past, goes to an employee and does not overlap another override; an override that has
ended cannot be deleted.
"""

from __future__ import annotations

import itertools
from datetime import datetime, timedelta
from typing import Literal

from compoworld import Conflict, InvalidArgument, registry, tool
from compoworld import Service as ServiceBase
from compoworld.runtime.fields import Email, Limit, Offset, Text
from compoworld.runtime.query import page_of, select
from envs._world import WorldUser, employee_email
from envs.oncall.data import OncallData
from envs.oncall.state import (
  MAX_SHIFT_WINDOW,
  Incident,
  IncidentStatus,
  Level,
  NoteKind,
  OncallState,
  Override,
  Policy,
  Schedule,
  Urgency,
  _note,
  shift_owner,
)


@registry.register
class OncallService(OncallData, WorldUser, ServiceBase):
  name = "oncall"
  domain = "software_devops"
  description = "On-call schedules, escalation policies and incidents: trigger, ack, resolve."
  State = OncallState

  # --- helpers -----------------------------------------------------------------------------

  def _on_call(self, schedule: Schedule, at: datetime) -> tuple[str | None, str | None]:
    """(who is on call, the override that put them there or None)."""
    covering = [
      o for o in self.state.overrides if o.schedule_id == schedule.id and o.start <= at < o.end
    ]
    if covering:
      latest = max(covering, key=lambda o: (o.created_at, o.id))
      return latest.email, latest.id
    return shift_owner(schedule, at), None

  def _responders(self, level: Level, at: datetime) -> list[str]:
    """Who a level pages at ``at``: its schedule's on-call person, then its fixed emails."""
    people = []
    if level.schedule_id is not None:
      schedule = self.state.schedules.get(level.schedule_id)
      who, _ = self._on_call(schedule, at)
      if who is None:
        end = schedule.ends_at.isoformat() if schedule.ends_at else "open-ended"
        raise Conflict(
          f"nobody is on call on schedule '{schedule.id}' ({schedule.name}) at "
          f"{at.isoformat()}: it covers {schedule.rotation_start.isoformat()} to {end}"
        )
      people.append(who)
    return list(dict.fromkeys([*people, *level.emails]))

  def _open(self, incident_id: str) -> Incident:
    incident = self.state.incidents.get(incident_id)
    if incident.status == "resolved":
      raise Conflict(f"incident '{incident_id}' is resolved; resolved incidents cannot change")
    return incident

  def _policy_of(self, incident: Incident) -> Policy:
    return self.state.policies.get(self.state.services.get(incident.service_id).policy_id)

  def _view(self, incident: Incident) -> dict:
    service = self.state.services.get(incident.service_id)
    levels = len(self.state.policies.get(service.policy_id).levels)
    return {**incident.model_dump(), "service_name": service.name, "policy_levels": levels}

  def _log(self, incident: Incident, kind: NoteKind, text: str, author: str | None = None):
    return _note(incident.notes, self.state.now, author or self.user, kind, text)

  # --- reads -------------------------------------------------------------------------------

  @tool(mutates=False, page="service", produces=("service.id", "policy.id", "status", "title"))
  def list_services(
    self,
    query: str | None = None,
    team: str | None = None,
    status: Literal["active", "maintenance"] | None = None,
  ) -> list:
    """List technical services by name with their team, escalation policy and status.

    Args:
      query: words that must all appear in the name, description or team.
      team: only services of this team (case-insensitive), e.g. "Payments".
      status: only services in this status: active or maintenance.
    """
    return select(
      self.state.services,
      eq={"status": status},
      same={"team": team and team.strip()},
      text=query,
      fields=("name", "description", "team"),
      key=lambda s: (s.name, s.id),
    )

  @tool(
    mutates=False,
    consumes=("service.id", "datetime"),
    produces=("person.email", "datetime", "schedule.id"),
  )
  def get_oncall(self, service_id: str, at: datetime | None = None) -> dict:
    """Who is on call for a service at a time (now by default): the first level's responder
    (email) and the responders of every escalation level.

    Args:
      service_id: the service's id.
      at: the moment to ask about (ISO 8601); defaults to now.
    """
    service = self.state.services.get(service_id)
    policy = self.state.policies.get(service.policy_id)
    at = at or self.state.now
    levels = []
    for level in policy.levels:
      override = None
      if level.schedule_id is not None:
        _, override = self._on_call(self.state.schedules.get(level.schedule_id), at)
      levels.append(
        {
          "level": int(level.id),
          "schedule_id": level.schedule_id,
          "responders": self._responders(level, at),
          "override_id": override,
        }
      )
    return {
      "service_id": service.id,
      "service_name": service.name,
      "policy_id": policy.id,
      "at": at,
      "email": levels[0]["responders"][0],
      "levels": levels,
    }

  @tool(mutates=False, consumes=("person.email",), produces=("schedule.id", "person.email"))
  def list_schedules(
    self, member: Email | None = None, limit: Limit = 20, offset: Offset = 0
  ) -> dict:
    """List on-call schedules by name with their rotation, who is on call now and their
    overrides.

    Args:
      member: only schedules whose rotation includes this email address.
      limit: page size (1-100).
      offset: index of the first schedule to return.
    """
    return page_of(
      self.state.schedules,
      where=lambda s: member is None or member.lower() in s.rotation,
      key=lambda s: (s.name, s.id),
      limit=limit,
      offset=offset,
      view=lambda s: {
        **s.model_dump(),
        "on_call_now": self._on_call(s, self.state.now)[0],
        "overrides": sorted(
          (o for o in self.state.overrides if o.schedule_id == s.id), key=lambda o: o.start
        ),
      },
    )

  @tool(mutates=False, consumes=("schedule.id", "datetime"), produces=("person.email", "datetime"))
  def list_shifts(self, schedule_id: str, start: datetime, end: datetime) -> list[dict]:
    """List who is on call on a schedule between two times, as consecutive shifts (overrides
    applied, each marked with its override_id).

    Args:
      schedule_id: the schedule's id.
      start: window start (ISO 8601).
      end: window end (ISO 8601), after the start and at most 31 days later.
    """
    schedule = self.state.schedules.get(schedule_id)
    if end <= start:
      raise InvalidArgument(f"end ({end.isoformat()}) must be after start ({start.isoformat()})")
    if end - start > MAX_SHIFT_WINDOW:
      raise InvalidArgument("the window from start to end is at most 31 days")
    step = timedelta(hours=schedule.shift_hours)
    cuts = {start, end}
    first = schedule.rotation_start + step * max(0, (start - schedule.rotation_start) // step)
    t = first
    while t < end:
      cuts.add(t)
      t += step
    if schedule.ends_at is not None:
      cuts.add(schedule.ends_at)
    for o in self.state.overrides:
      if o.schedule_id == schedule_id:
        cuts.update((o.start, o.end))
    edges = sorted(c for c in cuts if start <= c <= end)
    shifts: list[dict] = []
    for a, b in itertools.pairwise(edges):
      who, override = self._on_call(schedule, a)
      if who is None:
        continue
      last = shifts[-1] if shifts else None
      if last and last["end"] == a and (last["email"], last["override_id"]) == (who, override):
        last["end"] = b
      else:
        shifts.append({"start": a, "end": b, "email": who, "override_id": override})
    return shifts

  @tool(mutates=False, consumes=("policy.id",), produces=("person.email", "schedule.id"))
  def get_escalation_policy(self, policy_id: str) -> dict:
    """Get an escalation policy: its levels in order, each with its schedule, fixed emails,
    delay before escalating and the responders it would page now.

    Args:
      policy_id: the policy's id.
    """
    policy = self.state.policies.get(policy_id)
    return {
      **policy.model_dump(),
      "services": sorted(s.id for s in self.state.services if s.policy_id == policy_id),
      "levels": [
        {**lv.model_dump(), "responders_now": self._responders(lv, self.state.now)}
        for lv in policy.levels
      ],
    }

  @tool(
    mutates=False,
    consumes=("service.id", "person.email", "status"),
    produces=("incident.id", "person.email", "datetime", "status", "title"),
  )
  def list_incidents(
    self,
    service_id: str | None = None,
    status: IncidentStatus | None = None,
    open_only: bool = False,
    urgency: Urgency | None = None,
    assignee: Email | None = None,
    created_after: datetime | None = None,
    query: str | None = None,
    limit: Limit = 20,
    offset: Offset = 0,
  ) -> dict:
    """List incidents, newest first, optionally filtered.

    Args:
      service_id: only incidents of this service.
      status: only incidents in this status: triggered, acknowledged or resolved.
      open_only: only incidents not yet resolved.
      urgency: only incidents of this urgency: high or low.
      assignee: only incidents assigned to this email address.
      created_after: only incidents created at or after this time (ISO 8601).
      query: words that must all appear in the title or description.
      limit: page size (1-100).
      offset: index of the first incident to return.
    """
    self.state.services.check(service_id)
    return page_of(
      self.state.incidents,
      eq={
        "service_id": service_id,
        "status": status,
        "urgency": urgency,
        "assignee": assignee and assignee.lower(),
      },
      ge={"created_at": created_after},
      text=query,
      fields=("title", "description"),
      where=lambda i: not open_only or i.status != "resolved",
      key=lambda i: (i.created_at, i.number),
      reverse=True,
      limit=limit,
      offset=offset,
      view=self._view,
    )

  @tool(
    mutates=False,
    consumes=("incident.id",),
    produces=("person.email", "datetime", "status", "text", "title"),
  )
  def get_incident(self, incident_id: str) -> dict:
    """Get one incident with its timeline of notes.

    Args:
      incident_id: the incident's id.
    """
    return self._view(self.state.incidents.get(incident_id))

  # --- writes ------------------------------------------------------------------------------

  @tool(
    mutates=True,
    consumes=("service.id", "title", "text"),
    produces=("incident.id", "person.email"),
  )
  def trigger_incident(
    self, service_id: str, title: Text, urgency: Urgency = "high", description: str = ""
  ) -> dict:
    """Open an incident on a service; it pages the first escalation level's on-call responder.

    Args:
      service_id: the service's id.
      title: a short summary of what is wrong.
      urgency: high (pages immediately) or low.
      description: details.
    """
    service = self.state.services.get(service_id)
    if service.status == "maintenance":
      raise Conflict(
        f"service '{service.name}' is in maintenance and does not open incidents; "
        "take it out of maintenance first"
      )
    for other in self.state.incidents:
      if (
        other.service_id == service_id
        and other.status != "resolved"
        and other.title.lower() == title.strip().lower()
      ):
        raise Conflict(
          f"incident '{other.id}' with the same title is already open on '{service.name}'; "
          "add a note to it instead"
        )
    policy = self.state.policies.get(service.policy_id)
    assignee = self._responders(policy.levels[0], self.state.now)[0]
    self.state.last_incident_number += 1
    incident = Incident(
      id=self.state.new_id("inc"),
      number=self.state.last_incident_number,
      title=title.strip(),
      description=description,
      service_id=service_id,
      urgency=urgency,
      assignee=assignee,
      created_at=self.state.now,
      notes=_note((), self.state.now, self.user, "triggered", f"Triggered; paged {assignee}"),
    )
    return self._view(self.state.incidents.insert(incident))

  @tool(mutates=True, consumes=("incident.id",))
  def acknowledge_incident(self, incident_id: str) -> dict:
    """Acknowledge a triggered incident on behalf of its assignee (stops the escalation).

    Args:
      incident_id: the incident's id.
    """
    incident = self._open(incident_id)
    if incident.status != "triggered":
      raise Conflict(
        f"incident '{incident_id}' is already acknowledged; only triggered incidents can be "
        "acknowledged"
      )
    new = self.state.incidents.update(
      incident_id,
      status="acknowledged",
      acknowledged_at=self.state.now,
      notes=self._log(incident, "acknowledged", "Acknowledged", incident.assignee),
    )
    return self._view(new)

  @tool(mutates=True, consumes=("incident.id",), produces=("person.email",))
  def escalate_incident(self, incident_id: str) -> dict:
    """Escalate an open incident to the next level of its service's escalation policy; the
    next level's responder is paged and the incident is triggered again.

    Args:
      incident_id: the incident's id.
    """
    incident = self._open(incident_id)
    levels = self._policy_of(incident).levels
    if incident.level >= len(levels):
      raise Conflict(
        f"incident '{incident_id}' is already at the last level ({len(levels)}) of its "
        "escalation policy; reassign it instead"
      )
    assignee = self._responders(levels[incident.level], self.state.now)[0]
    new = self.state.incidents.update(
      incident_id,
      level=incident.level + 1,
      status="triggered",
      assignee=assignee,
      acknowledged_at=None,
      notes=self._log(
        incident, "escalated", f"Escalated to level {incident.level + 1}; paged {assignee}"
      ),
    )
    return self._view(new)

  @tool(mutates=True, consumes=("incident.id", "person.email"))
  def reassign_incident(self, incident_id: str, email: Email) -> dict:
    """Reassign an open incident to another responder of its service (someone on the
    escalation policy or on one of its schedules' rotations); they are paged and the
    incident is triggered again.

    Args:
      incident_id: the incident's id.
      email: the new assignee's email address.
    """
    incident, email = self._open(incident_id), email.lower()
    policy = self._policy_of(incident)
    allowed = {e for lv in policy.levels for e in lv.emails}
    for lv in policy.levels:
      if lv.schedule_id is not None:
        allowed.update(self.state.schedules.get(lv.schedule_id).rotation)
    if email not in allowed:
      raise Conflict(
        f"'{email}' is not on escalation policy '{policy.name}' or its schedules; "
        f"reassign to one of: {', '.join(sorted(allowed))}"
      )
    if email == incident.assignee:
      raise Conflict(f"incident '{incident_id}' is already assigned to '{email}'")
    new = self.state.incidents.update(
      incident_id,
      assignee=email,
      status="triggered",
      acknowledged_at=None,
      notes=self._log(incident, "reassigned", f"Reassigned from {incident.assignee} to {email}"),
    )
    return self._view(new)

  @tool(mutates=True, consumes=("incident.id", "text"))
  def resolve_incident(self, incident_id: str, resolution: str = "") -> dict:
    """Resolve a triggered or acknowledged incident.

    Args:
      incident_id: the incident's id.
      resolution: what fixed it (goes into the timeline).
    """
    incident = self._open(incident_id)
    new = self.state.incidents.update(
      incident_id,
      status="resolved",
      resolved_at=self.state.now,
      notes=self._log(incident, "resolved", resolution or "Resolved"),
    )
    return self._view(new)

  @tool(mutates=True, consumes=("incident.id", "text"))
  def add_note(self, incident_id: str, text: Text) -> dict:
    """Add a note to an open incident's timeline as the user.

    Args:
      incident_id: the incident's id.
      text: the note.
    """
    incident = self._open(incident_id)
    new = self.state.incidents.update(incident_id, notes=self._log(incident, "note", text))
    return self._view(new)

  @tool(
    mutates=True,
    consumes=("schedule.id", "person.email", "datetime"),
    produces=("override.id",),
  )
  def create_override(
    self, schedule_id: str, email: Email, start: datetime, end: datetime
  ) -> Override:
    """Put an employee on call on a schedule for a window, in place of the rotation.

    Args:
      schedule_id: the schedule's id.
      email: the employee who takes the shift.
      start: override start (ISO 8601), not before the schedule's rotation start.
      end: override end (ISO 8601), after the start, in the future and not after the
        schedule's end.
    """
    schedule, email = self.state.schedules.get(schedule_id), email.lower()
    if end <= start:
      raise InvalidArgument(f"end ({end.isoformat()}) must be after start ({start.isoformat()})")
    if start < schedule.rotation_start or (schedule.ends_at and end > schedule.ends_at):
      until = schedule.ends_at.isoformat() if schedule.ends_at else "open-ended"
      raise InvalidArgument(
        f"the override must lie within schedule '{schedule.name}', which covers "
        f"{schedule.rotation_start.isoformat()} to {until}"
      )
    if end <= self.state.now:
      raise InvalidArgument(f"end ({end.isoformat()}) is in the past; overrides are for the future")
    employee_email(self.state.seed, email)
    for o in self.state.overrides:
      if o.schedule_id == schedule_id and o.start < end and start < o.end:
        raise Conflict(
          f"override '{o.id}' ({o.email}, {o.start.isoformat()} to {o.end.isoformat()}) "
          "already covers part of that window; delete it first"
        )
    return self.state.overrides.insert(
      Override(
        id=self.state.new_id("ovr"),
        schedule_id=schedule_id,
        email=email,
        start=start,
        end=end,
        created_at=self.state.now,
      )
    )

  @tool(mutates=True, consumes=("override.id",))
  def delete_override(self, override_id: str) -> Override:
    """Delete an override that has not ended yet; the rotation takes over again.

    Args:
      override_id: the override's id.
    """
    override = self.state.overrides.get(override_id)
    if override.end <= self.state.now:
      raise Conflict(
        f"override '{override_id}' ended at {override.end.isoformat()}; past overrides are "
        "kept as history"
      )
    return self.state.overrides.delete(override_id)
