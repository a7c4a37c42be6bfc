"""Word pools and small helpers shared by the facets of every service."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from compoworld.authoring import AuthorContext, AuthoringError

CODENAMES = (
  "Falcon", "Juniper", "Atlas", "Cobalt", "Nimbus", "Orchid", "Granite", "Harbor", "Lumen",
  "Saffron", "Tundra", "Vertex", "Willow", "Zephyr", "Beacon", "Cinder", "Delta", "Ember",
)  # fmt: skip
SUBJECTS = (
  "budget review", "vendor onboarding", "launch readiness", "quarterly planning", "site visit",
  "security audit", "pricing workshop", "hiring sync", "customer kickoff", "data migration",
  "renewal prep", "offsite planning",
)  # fmt: skip


def topic(ctx: AuthorContext) -> str:
  """A distinctive project topic such as "Juniper launch readiness", unique within the task."""
  used = ctx.scratch.setdefault("topics", set())
  for _ in range(50):
    name = f"{ctx.choice(CODENAMES)} {ctx.choice(SUBJECTS)}"
    if name.split()[0] not in {u.split()[0] for u in used}:
      used.add(name)
      return name
  raise AuthoringError("topics_exhausted")


def iso(dt: datetime) -> str:
  return dt.replace(microsecond=0).isoformat()


def future_slot(ctx: AuthorContext, service: str, days: tuple[int, int] = (2, 9)) -> datetime:
  """A working-hours start time a few days after the service's logical now."""
  now = ctx.state(service).now
  day = now.replace(hour=0, minute=0, second=0) + timedelta(days=ctx.rng.randint(*days))
  return day + timedelta(hours=ctx.rng.choice((9, 10, 11, 13, 14, 15, 16)))


def since(ctx: AuthorContext, service: str, field: str) -> dict[str, Any]:
  """A rubric condition: the record was made after s0 (so it is the agent's doing)."""
  return {"field": field, "cmp": "ge", "value": ctx.since(service)}


def colleague(ctx: AuthorContext):
  """Someone at the user's company other than the user."""
  from envs._world import world

  w = world(ctx.env.seed)
  return ctx.choice(w.people[2:])
