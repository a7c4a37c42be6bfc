"""CRM: the seeded data generator, a base of the service class in ``tools``."""

from __future__ import annotations

from datetime import datetime, time, timedelta

from envs._world import seeded
from envs.crm.state import (
  ACTIVITY_SUBJECTS,
  CLOSED,
  DEAL_KINDS,
  LOST_REASONS,
  STAGES,
  Account,
  Activity,
  Contact,
  CrmState,
  Deal,
  _sales_team,
)


class CrmData:
  """Draws the initial state from a seed: ``generate`` and the helpers only it uses."""

  @classmethod
  def generate(cls, seed: int, size: int | None) -> CrmState:
    rng, w, state = seeded(cls, seed)
    now, today = state.now, state.now.date()
    team = _sales_team(seed)
    seen: set[str] = set()
    for customer in w.customers:
      acc = state.accounts.insert(
        Account(
          id=state.new_id("acc"),
          name=customer.name,
          domain=customer.domain,
          industry=customer.industry,
          tier=customer.tier,
          city=customer.city,
          country=customer.country,
          owner=rng.choice(team).email,
          created_at=now - timedelta(days=rng.randint(60, 900)),
        )
      )
      for c in customer.contacts:
        if c.email in seen:  # two contacts drawn with the same name: keep emails unique
          continue
        seen.add(c.email)
        state.contacts.insert(
          Contact(
            id=state.new_id("con"),
            account_id=acc.id,
            name=c.name,
            email=c.email,
            title=c.title,
            phone=c.phone,
            created_at=acc.created_at + timedelta(days=rng.randint(0, 30)),
          )
        )
    accounts = list(state.accounts)
    for _ in range(size if size is not None else 24):
      acc = rng.choice(accounts)
      product = rng.choice(w.products)
      qty = rng.choice((1, 2, 5, 10, 25, 50)) if product.unit_price < 1000 else rng.randint(1, 6)
      stage = rng.choices(STAGES, weights=(4, 4, 3, 3, 3, 2))[0]
      closed = stage in CLOSED
      close = today + timedelta(days=-rng.randint(3, 120) if closed else rng.randint(7, 120))
      created = now - timedelta(days=rng.randint(20, 150) + (120 if closed else 0))
      contacts = state.contacts.filter(lambda c, a=acc.id: c.account_id == a)
      deal = state.deals.insert(
        Deal(
          id=state.new_id("deal"),
          account_id=acc.id,
          name=f"{acc.name} - {product.name} {rng.choice(DEAL_KINDS)}",
          amount=round(product.unit_price * qty * rng.choice((1, 1, 1.2, 1.5)), 2),
          currency=w.currency,
          stage=stage,
          close_date=close,
          owner=acc.owner if rng.random() < 0.8 else rng.choice(team).email,
          contact_id=rng.choice(contacts).id if contacts else None,
          lost_reason=rng.choice(LOST_REASONS) if stage == "closed_lost" else None,
          created_at=created,
          updated_at=created + timedelta(days=rng.randint(1, 15)),
          closed_at=datetime.combine(close, time(17, 0)) if closed else None,
        )
      )
      for _ in range(rng.randint(1, 2)):
        kind = rng.choice(("call", "email", "meeting", "note", "task"))
        planned = kind in ("task", "meeting") and not closed and rng.random() < 0.7
        due = (
          now + timedelta(days=rng.randint(-3, 14), hours=rng.randint(0, 6)) if planned else None
        )
        logged = created + timedelta(days=rng.randint(1, 15))
        state.activities.insert(
          Activity(
            id=state.new_id("act"),
            kind=kind,
            subject=rng.choice(ACTIVITY_SUBJECTS[kind]),
            contact_id=deal.contact_id if rng.random() < 0.6 else None,
            deal_id=deal.id,
            owner=deal.owner,
            due=due,
            done=not planned,
            completed_at=None if planned else logged,
            created_at=logged,
          )
        )
    return state
