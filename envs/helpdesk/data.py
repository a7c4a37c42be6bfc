"""Helpdesk: the seeded data generator, a base of the service class in ``tools``."""

from __future__ import annotations

from datetime import timedelta

from envs._world import seeded
from envs.helpdesk.state import (
  FIRST_REPLIES,
  ISSUES,
  MACROS,
  NOTES,
  REQUESTER_REPLIES,
  RESOLUTIONS,
  SLA_HOURS,
  Agent,
  Comment,
  HelpdeskState,
  Macro,
  Requester,
  Ticket,
  _breached,
  _first,
)


class HelpdeskData:
  """Draws the initial state from a seed: ``generate`` and the helpers only it uses."""

  @classmethod
  def generate(cls, seed: int, size: int | None) -> HelpdeskState:
    rng, w, state = seeded(cls, seed)
    now = state.now
    tiers = {}
    for customer in w.customers:
      for c in customer.contacts:
        if c.email not in state.requesters:
          state.requesters.insert(
            Requester(
              id=c.email, name=c.name, organization=customer.name, title=c.title, phone=c.phone
            )
          )
          tiers[c.email] = customer.tier
    # The user administers the desk; Support staff are the agents (others fill a thin team).
    roster = [w.people[0], *[p for p in w.people[1:] if p.department == "Support"][:6]]
    for p in w.people[1:]:
      if len(roster) >= 4:
        break
      if p not in roster and p.department in ("Operations", "Engineering"):
        roster.append(p)
    for i, p in enumerate(roster):
      state.agents.insert(
        Agent(
          id=p.email,
          name=p.name,
          employee_id=p.employee_id,
          role="admin" if i == 0 or p.title.startswith("Head") else "agent",
          active=i != len(roster) - 1,  # one agent left the team: kept for history
        )
      )
    active = [a.id for a in state.agents if a.active]
    everyone = list(state.agents.ids())
    for title, desc, changes, comment in MACROS:
      state.macros.insert(
        Macro(id=state.new_id("mac"), title=title, description=desc, comment=comment, **changes)
      )
    requesters = list(state.requesters)
    statuses = ("new", "open", "pending", "solved", "closed")
    for i in range(size if size is not None else 40):
      status = statuses[i] if i < 5 else rng.choices(statuses, (2, 4, 2, 3, 2))[0]
      req = rng.choice(requesters)
      product = rng.choice(w.products)
      subject, desc, tags = rng.choice(ISSUES)
      fill = dict(
        product=product.name,
        sku=product.sku,
        n=rng.randint(2, 40),
        invoice=f"INV-{rng.randint(20000, 29999)}",
        order=f"SO-{rng.randint(10000, 19999)}",
      )
      priority = rng.choices(("low", "normal", "high", "urgent"), (2, 5, 2, 1))[0]
      # Ages are drawn against the SLA target so that roughly a third of tickets breach it.
      sla = SLA_HOURS[priority]
      took = timedelta(hours=sla * rng.uniform(0.1, 1.5))  # open so far, or until solved
      solved_ago = timedelta(hours=rng.uniform(1, 90) if status == "solved" else 0)
      if status == "closed":  # closed automatically 4+ days after being solved
        solved_ago = timedelta(days=rng.uniform(5, 30))
      if status == "new":
        took = timedelta(hours=rng.uniform(0.5, min(30, sla * 1.2)))
      created = (now - solved_ago - took).replace(second=0, microsecond=0)
      tags = tags + (("vip",) if tiers[req.id] == "enterprise" else ())
      assignee = None if status == "new" else rng.choice(everyone if status == "closed" else active)
      tid = state.new_id("tkt")
      first = _first(req.name)
      script: list[tuple[str, str, bool]] = []  # (author, body, public)
      if status != "new":
        script.append((assignee, rng.choice(FIRST_REPLIES).format(first=first), True))
        if rng.random() < 0.4:
          script.append((rng.choice(active), rng.choice(NOTES), False))
        # Half the open tickets await an agent: their last public word is the requester's.
        if status in ("solved", "closed") or (status == "open" and rng.random() < 0.5):
          script.append((req.id, rng.choice(REQUESTER_REPLIES), True))
        if status in ("solved", "closed"):
          script.append((assignee, rng.choice(RESOLUTIONS).format(first=first), True))
      span = now - solved_ago - created
      at = created
      for k, (author, body, public) in enumerate(script, 1):
        at = (created + span * k / (len(script) + 1)).replace(microsecond=0)
        state.comments.insert(
          Comment(
            id=state.new_id("cmt"),
            ticket_id=tid,
            author=author,
            author_role="end_user" if author == req.id else "agent",
            body=body,
            public=public,
            created_at=at,
          )
        )
      solved_at = at + timedelta(minutes=5) if status in ("solved", "closed") else None
      ticket = Ticket(
        id=tid,
        subject=subject.format(**fill),
        description=desc.format(**fill),
        requester=req.id,
        organization=req.organization,
        priority=priority,
        status=status,
        assignee=assignee,
        tags=tags,
        channel=rng.choice(("email", "web", "web", "phone", "chat")),
        created_at=created,
        updated_at=solved_at or at,
        sla_due_at=created + timedelta(hours=SLA_HOURS[priority]),
        solved_at=solved_at,
      )
      state.tickets.insert(ticket.with_changes(sla_breached=_breached(ticket, now)))
    return state
