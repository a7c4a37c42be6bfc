"""Oncall: the seeded data generator, a base of the service class in ``tools``."""

from __future__ import annotations

import random
from datetime import timedelta

from envs._world import seeded
from envs.oncall.state import (
  ALERTS,
  NOTES,
  RESOLUTIONS,
  TEAMS,
  Incident,
  Level,
  OncallState,
  Override,
  Policy,
  Schedule,
  Service,
  _note,
  shift_owner,
)


class OncallData:
  """Draws the initial state from a seed: ``generate`` and the helpers only it uses."""

  @classmethod
  def generate(cls, seed: int, size: int | None) -> OncallState:
    rng, w, state = seeded(cls, seed)
    now = state.now
    head = next((p for p in w.people if p.title == "Head of Engineering"), w.people[1]).email
    # The head of engineering is the last escalation level, not a pager rotation member.
    engineers = [p for p in w.people[2:] if p.department == "Engineering" and p.email != head]
    extra = [p for p in w.people[2:] if p.department in ("Support", "Operations")]
    pool = [p.email for p in engineers + rng.sample(extra, max(0, 8 - len(engineers)))]
    monday = (now - timedelta(days=now.weekday())).replace(hour=9, minute=0)
    for team, hours, services in TEAMS:
      rotation = tuple(rng.sample(pool, rng.randint(3, 4)))
      # Mobile's spring rota is a temporary one: it has an end, so coverage can run out.
      ends = now + timedelta(days=14) if team == "Mobile" else None
      sched = state.schedules.insert(
        Schedule(
          id=state.new_id("sch"),
          name=f"{team} Primary",
          rotation=rotation,
          rotation_start=monday - timedelta(weeks=rng.randint(3, 12)),
          shift_hours=hours,
          ends_at=ends,
        )
      )
      lead = rng.choice([e for e in pool if e not in rotation] or pool)
      levels = [
        Level(id="1", schedule_id=sched.id, escalate_after_minutes=rng.choice((15, 30))),
        Level(id="2", emails=(lead,), escalate_after_minutes=30),
      ]
      if team != "Mobile":  # Mobile's policy is two levels deep
        levels.append(Level(id="3", emails=(head,), escalate_after_minutes=60))
      policy = state.policies.insert(
        Policy(id=state.new_id("pol"), name=f"{team} Escalation", levels=tuple(levels))
      )
      for sname, desc in services:
        state.services.insert(
          Service(
            id=state.new_id("svc"), name=sname, description=desc, team=team, policy_id=policy.id
          )
        )
    resting = rng.choice(list(state.services))
    state.services.update(resting.id, status="maintenance")
    cls._seed_overrides(state, rng, pool)
    cls._seed_incidents(state, rng, size if size is not None else 30)
    return state

  @staticmethod
  def _seed_overrides(state: OncallState, rng: random.Random, pool: list[str]) -> None:
    now = state.now.replace(minute=0)
    windows = ((-6, 1), (2, 2), (5, 3))  # (starts in N days, lasts N days): one already over
    for sched, (days, length) in zip(rng.sample(list(state.schedules), 3), windows, strict=True):
      start = now + timedelta(days=days)
      cover = rng.choice([e for e in pool if e != shift_owner(sched, start)])
      state.overrides.insert(
        Override(
          id=state.new_id("ovr"),
          schedule_id=sched.id,
          email=cover,
          start=start,
          end=start + timedelta(days=length),
          created_at=now - timedelta(days=rng.randint(7, 20)),
        )
      )

  @classmethod
  def _seed_incidents(cls, state: OncallState, rng: random.Random, count: int) -> None:
    services = sorted(state.services, key=lambda s: s.id)
    live = [s for s in services if s.status == "active"]
    created_list = sorted(
      (state.now - timedelta(minutes=rng.randint(10, 14 * 24 * 60)) for _ in range(count)),
    )
    for i, created in enumerate(created_list):
      age = state.now - created
      if i == count - 1:
        status = "triggered"  # the newest page is always still ringing
      elif i == count - 2:
        status = "acknowledged"
      elif age < timedelta(days=1):
        status = rng.choices(("triggered", "acknowledged", "resolved"), (2, 3, 2))[0]
      else:
        status = rng.choices(("triggered", "acknowledged", "resolved"), (1, 2, 20))[0]
      service = rng.choice(live if status != "resolved" else services)
      title = rng.choice(ALERTS).format(s=service.name)
      if status != "resolved" and any(
        x.status != "resolved" and x.service_id == service.id and x.title == title
        for x in state.incidents
      ):
        status = "resolved"  # an open duplicate would break the dedup rule
      cls._seed_incident(state, rng, service, title, created, status)

  @classmethod
  def _seed_incident(cls, state, rng, service: Service, title: str, created, status) -> None:
    svc = cls(state)
    policy = state.policies.get(service.policy_id)
    level = 2 if rng.random() < 0.25 and len(policy.levels) > 1 else 1
    first = svc._responders(policy.levels[0], created)[0]
    notes = _note((), created, "monitoring", "triggered", f"Alert fired: {title}; paged {first}")
    at, assignee = created, first
    if level == 2:
      at = created + timedelta(minutes=policy.levels[0].escalate_after_minutes)
      assignee = svc._responders(policy.levels[1], at)[0]
      notes = _note(notes, at, "system", "escalated", f"No acknowledgement; paged {assignee}")
    acked = resolved = None
    if status in ("acknowledged", "resolved"):
      acked = min(state.now, at + timedelta(minutes=rng.randint(2, 20)))
      notes = _note(notes, acked, assignee, "acknowledged", "Acknowledged")
      if rng.random() < 0.5:
        notes = _note(notes, acked, assignee, "note", rng.choice(NOTES))
    if status == "resolved":
      resolved = min(state.now, acked + timedelta(minutes=rng.randint(10, 240)))
      notes = _note(notes, resolved, assignee, "resolved", rng.choice(RESOLUTIONS))
    state.last_incident_number += 1
    state.incidents.insert(
      Incident(
        id=state.new_id("inc"),
        number=state.last_incident_number,
        title=title,
        service_id=service.id,
        urgency=rng.choices(("high", "low"), (3, 2))[0],
        status=status,
        assignee=assignee,
        level=level,
        created_at=created,
        acknowledged_at=acked,
        resolved_at=resolved,
        notes=notes,
      )
    )
