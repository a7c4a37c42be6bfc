"""CRM: a Salesforce/HubSpot-like sales CRM of accounts, contacts, deals and activities.

Accounts are the shared world's customer companies (name, web domain, industry, tier), each
owned by an employee of the home company; contacts are the people at those companies. A deal
(opportunity) belongs to one account, has an amount in a currency, an owner, an expected close
date and a stage in the pipeline prospecting → qualification → proposal → negotiation →
closed_won / closed_lost. Activities (call, email, meeting, note, task) are logged against a
contact, a deal or both; tasks and meetings are planned with a due time and completed later.

Rules a CRM user expects: a contact's email address is unique across the CRM; deal stages only
move forward (any open deal may be lost); a closed deal is frozen; a lost deal records why; an
expected close date is not in the past; amounts are not negative; a contact and a deal logged
together belong to the same account; owners are employees of the home company.
"""

from __future__ import annotations

from datetime import date, datetime

from compoworld import Conflict, InvalidArgument, Service, registry, tool
from compoworld.runtime.fields import Email, Money, Text
from compoworld.runtime.query import select
from envs._world import WorldUser, employee_email, world
from envs.crm.data import CrmData
from envs.crm.state import (
  CLOSED,
  PROBABILITY,
  STAGES,
  Activity,
  ActivityKind,
  Contact,
  CrmState,
  Currency,
  Deal,
  OpenStage,
  Stage,
  Tier,
)


@registry.register
class CrmService(CrmData, WorldUser, Service):
  name = "crm"
  domain = "sales_crm"
  description = "Sales CRM: accounts, contacts, deals through the pipeline, logged activities."
  State = CrmState

  # --- helpers -----------------------------------------------------------------------------

  def _future_date(self, value: date, argument: str) -> date:
    today = self.state.now.date()
    if value < today:
      raise InvalidArgument(f"{argument} ({value.isoformat()}) is in the past; today is {today}")
    return value

  def _email_free(self, email: str, contact_id: str | None = None) -> str:
    email = email.lower()
    taken = next((c for c in self.state.contacts if c.email == email and c.id != contact_id), None)
    if taken is not None:
      raise Conflict(
        f"a contact with email '{email}' already exists ('{taken.id}'); emails are unique"
      )
    return email

  def _open_deal(self, deal_id: str) -> Deal:
    deal = self.state.deals.get(deal_id)
    if deal.stage in CLOSED:
      raise Conflict(f"deal '{deal_id}' is {deal.stage}; closed deals cannot be changed")
    return deal

  # --- reads -------------------------------------------------------------------------------

  @tool(
    mutates=False,
    page="account",
    produces=("account.id", "company.name", "company.domain", "person.email"),
  )
  def search_accounts(
    self,
    query: str | None = None,
    industry: str | None = None,
    tier: Tier | None = None,
    owner: Email | None = None,
  ) -> list:
    """Search accounts by name, in name order.

    Args:
      query: words that must all appear in the name, domain, industry or city.
      industry: only accounts in this industry (e.g. "Retail").
      tier: only accounts of this tier ("enterprise", "mid-market" or "smb").
      owner: only accounts owned by this employee email.
    """
    return select(
      self.state.accounts,
      eq={"tier": tier, "owner": owner and owner.lower()},
      same={"industry": industry},
      text=query,
      fields=("name", "domain", "industry", "city"),
      key=lambda a: (a.name, a.id),
    )

  @tool(
    mutates=False,
    produces=("account.id", "company.name", "company.domain", "person.email", "person.name"),
  )
  def get_account(self, account_id: str) -> dict:
    """Get one account with its contacts and its deals.

    Args:
      account_id: the account's id.
    """
    acc = self.state.accounts.get(account_id)
    return {
      **acc.model_dump(),
      "contacts": sorted(
        self.state.contacts.filter(lambda c: c.account_id == acc.id), key=_by_name
      ),
      "deals": sorted(
        self.state.deals.filter(lambda d: d.account_id == acc.id), key=lambda d: d.close_date
      ),
    }

  @tool(
    mutates=False,
    page="contact",
    produces=("contact.id", "person.email", "person.name", "person.phone"),
  )
  def search_contacts(self, query: str | None = None, account_id: str | None = None) -> list:
    """Search contacts by name, email or title, in name order.

    Args:
      query: words that must all appear in the name, email or title.
      account_id: only contacts of this account.
    """
    self.state.accounts.check(account_id)
    return select(
      self.state.contacts,
      eq={"account_id": account_id},
      text=query,
      fields=("name", "email", "title"),
      key=_by_name,
    )

  @tool(mutates=False, page="deal", produces=("deal.id", "money", "date", "status", "person.email"))
  def list_deals(
    self,
    stage: Stage | None = None,
    owner: Email | None = None,
    account_id: str | None = None,
    open_only: bool = False,
  ) -> list:
    """List deals by expected close date.

    Args:
      stage: only deals in this stage.
      owner: only deals owned by this employee email.
      account_id: only deals of this account.
      open_only: only deals that are not closed.
    """
    self.state.accounts.check(account_id)
    return select(
      self.state.deals,
      eq={"stage": stage, "owner": owner and owner.lower(), "account_id": account_id},
      where=lambda d: not (open_only and d.stage in CLOSED),
      key=lambda d: (d.close_date, d.id),
    )

  @tool(mutates=False, produces=("deal.id", "money", "currency", "date", "status", "person.email"))
  def get_deal(self, deal_id: str) -> Deal:
    """Get one deal with its amount, stage, owner and expected close date.

    Args:
      deal_id: the deal's id.
    """
    return self.state.deals.get(deal_id)

  @tool(mutates=False, page="activity", produces=("activity.id", "datetime", "text"))
  def list_activities(
    self,
    contact_id: str | None = None,
    deal_id: str | None = None,
    kind: ActivityKind | None = None,
    open_only: bool = False,
  ) -> list:
    """List activities, open ones by due time first, then done ones newest first.

    Args:
      contact_id: only activities logged against this contact.
      deal_id: only activities logged against this deal.
      kind: only this kind ("call", "email", "meeting", "note" or "task").
      open_only: only activities not done yet.
    """
    self.state.contacts.check(contact_id)
    self.state.deals.check(deal_id)
    found = select(
      self.state.activities,
      eq={"contact_id": contact_id, "deal_id": deal_id, "kind": kind},
      where=lambda a: not (open_only and a.done),
    )
    pending = sorted((a for a in found if not a.done), key=lambda a: (a.due or a.created_at, a.id))
    done = sorted((a for a in found if a.done), key=lambda a: (a.completed_at, a.id), reverse=True)
    return pending + done

  @tool(mutates=False, produces=("money", "currency", "number"))
  def pipeline_summary(self, currency: Currency | None = None, owner: Email | None = None) -> dict:
    """Totals per stage of the deals in one currency: count, amount, and the open pipeline's
    probability-weighted forecast.

    Args:
      currency: the currency to total (default: the company's currency); other deals are left out.
      owner: only deals owned by this employee email.
    """
    currency = currency or world(self.state.seed).currency
    deals = [
      d
      for d in self.state.deals
      if d.currency == currency and (owner is None or d.owner == owner.lower())
    ]
    by_stage = []
    for stage in STAGES:
      mine = [d for d in deals if d.stage == stage]
      by_stage.append(
        {"stage": stage, "count": len(mine), "amount": round(sum(d.amount for d in mine), 2)}
      )
    live = [d for d in deals if d.stage not in CLOSED]
    return {
      "currency": currency,
      "by_stage": by_stage,
      "open_count": len(live),
      "open_amount": round(sum(d.amount for d in live), 2),
      "weighted_amount": round(sum(d.amount * PROBABILITY[d.stage] for d in live), 2),
      "won_amount": by_stage[STAGES.index("closed_won")]["amount"],
    }

  # --- writes: contacts --------------------------------------------------------------------

  @tool(
    mutates=True,
    consumes=("account.id", "person.email", "person.name", "person.phone", "job.title"),
    produces=("contact.id",),
  )
  def create_contact(
    self, account_id: str, name: Text, email: Email, title: str = "", phone: str = ""
  ) -> Contact:
    """Add a contact to an account; the email must not belong to another contact.

    Args:
      account_id: the account the person works for.
      name: the person's full name.
      email: their email address (unique in the CRM).
      title: their job title.
      phone: their phone number.
    """
    acc = self.state.accounts.get(account_id)
    return self.state.contacts.insert(
      Contact(
        id=self.state.new_id("con"),
        account_id=acc.id,
        name=name,
        email=self._email_free(email),
        title=title,
        phone=phone,
        created_at=self.state.now,
      )
    )

  @tool(mutates=True, consumes=("contact.id", "person.email", "person.phone", "job.title"))
  def update_contact(
    self,
    contact_id: str,
    name: Text | None = None,
    email: Email | None = None,
    title: str | None = None,
    phone: str | None = None,
  ) -> Contact:
    """Change a contact's name, email, title or phone; only supplied fields change.

    Args:
      contact_id: the contact's id.
      name: new full name.
      email: new email address (unique in the CRM).
      title: new job title.
      phone: new phone number.
    """
    self.state.contacts.get(contact_id)
    changes = {k: v for k, v in dict(name=name, title=title, phone=phone).items() if v is not None}
    if email is not None:
      changes["email"] = self._email_free(email, contact_id)
    if not changes:
      raise InvalidArgument("update_contact: supply at least one field to change")
    return self.state.contacts.update(contact_id, **changes)

  # --- writes: deals -----------------------------------------------------------------------

  @tool(
    mutates=True,
    consumes=("account.id", "money", "currency", "date", "person.email", "contact.id"),
    produces=("deal.id",),
  )
  def create_deal(
    self,
    account_id: str,
    name: Text,
    amount: Money,
    close_date: date,
    stage: OpenStage = "prospecting",
    owner: Email | None = None,
    currency: Currency | None = None,
    contact_id: str | None = None,
  ) -> Deal:
    """Open a deal on an account.

    Args:
      account_id: the account the deal is with.
      name: the deal name.
      amount: expected value (>= 0).
      close_date: expected close date (ISO 8601 date), today or later.
      stage: starting stage (an open stage; default "prospecting").
      owner: employee email of the owner (default: the account owner).
      currency: ISO 4217 code (default: the company's currency).
      contact_id: the main contact, who must work for the account.
    """
    acc = self.state.accounts.get(account_id)
    if contact_id is not None and self.state.contacts.get(contact_id).account_id != acc.id:
      raise Conflict(f"contact '{contact_id}' does not work for account '{account_id}'")
    return self.state.deals.insert(
      Deal(
        id=self.state.new_id("deal"),
        account_id=acc.id,
        name=name,
        amount=round(amount, 2),
        currency=currency or world(self.state.seed).currency,
        stage=stage,
        close_date=self._future_date(close_date, "close_date"),
        owner=employee_email(self.state.seed, owner, "owner") if owner is not None else acc.owner,
        contact_id=contact_id,
        created_at=self.state.now,
        updated_at=self.state.now,
      )
    )

  @tool(mutates=True, consumes=("deal.id", "money", "date", "person.email"))
  def update_deal(
    self,
    deal_id: str,
    name: Text | None = None,
    amount: Money | None = None,
    close_date: date | None = None,
    owner: Email | None = None,
  ) -> Deal:
    """Change an open deal's name, amount, expected close date or owner; only supplied fields
    change. Closed deals cannot be changed.

    Args:
      deal_id: the deal's id.
      name: new name.
      amount: new amount (>= 0).
      close_date: new expected close date (ISO 8601 date), today or later.
      owner: new owner's employee email.
    """
    self._open_deal(deal_id)
    changes: dict = {k: v for k, v in dict(name=name).items() if v is not None}
    if amount is not None:
      changes["amount"] = round(amount, 2)
    if close_date is not None:
      changes["close_date"] = self._future_date(close_date, "close_date")
    if owner is not None:
      changes["owner"] = employee_email(self.state.seed, owner, "owner")
    if not changes:
      raise InvalidArgument("update_deal: supply at least one field to change")
    return self.state.deals.update(deal_id, updated_at=self.state.now, **changes)

  @tool(mutates=True, consumes=("deal.id", "status", "text"))
  def update_deal_stage(self, deal_id: str, stage: Stage, lost_reason: str | None = None) -> Deal:
    """Move an open deal to a later stage, or mark it lost from any open stage. Closing a deal
    (closed_won or closed_lost) sets its close date to today and freezes it.

    Args:
      deal_id: the deal's id.
      stage: the new stage; later than the current one, or "closed_lost".
      lost_reason: why the deal was lost; required with "closed_lost" and only with it.
    """
    deal = self._open_deal(deal_id)
    if stage == "closed_lost" and not (lost_reason or "").strip():
      raise InvalidArgument("lost_reason is required when moving a deal to closed_lost")
    if stage != "closed_lost" and lost_reason is not None:
      raise InvalidArgument("lost_reason only applies to stage closed_lost")
    here = STAGES.index(deal.stage)
    if stage == deal.stage:
      raise Conflict(f"deal '{deal_id}' is already in stage {stage}")
    if STAGES.index(stage) < here:
      allowed = ", ".join(STAGES[here + 1 :])
      raise Conflict(
        f"deal stages only move forward: from {deal.stage} deal '{deal_id}' can move to {allowed}"
      )
    changes: dict = {"stage": stage, "updated_at": self.state.now}
    if stage in CLOSED:
      changes.update(closed_at=self.state.now, close_date=self.state.now.date())
      changes["lost_reason"] = lost_reason.strip() if lost_reason else None
    return self.state.deals.update(deal_id, **changes)

  # --- writes: activities ------------------------------------------------------------------

  @tool(
    mutates=True, consumes=("contact.id", "deal.id", "datetime", "text"), produces=("activity.id",)
  )
  def log_activity(
    self,
    kind: ActivityKind,
    subject: Text,
    contact_id: str | None = None,
    deal_id: str | None = None,
    due: datetime | None = None,
    notes: str = "",
  ) -> Activity:
    """Log an activity against a contact, a deal or both. Calls, emails and notes without a
    due time are logged as done now; a task or meeting (or a call or email with a due time) is
    planned for its due time and completed later with complete_activity.

    Args:
      kind: "call", "email", "meeting", "note" or "task".
      subject: a short summary.
      contact_id: the contact it concerns.
      deal_id: the deal it concerns; with a contact, they must share the account.
      due: when a planned activity is due (ISO 8601), in the future; required for tasks and
        meetings, not allowed for notes.
      notes: details.
    """
    if contact_id is None and deal_id is None:
      raise InvalidArgument("log_activity: give a contact_id, a deal_id or both")
    contact = self.state.contacts.get(contact_id) if contact_id is not None else None
    deal = self.state.deals.get(deal_id) if deal_id is not None else None
    if contact and deal and contact.account_id != deal.account_id:
      raise Conflict(
        f"contact '{contact_id}' works for account '{contact.account_id}' but deal '{deal_id}' "
        f"belongs to '{deal.account_id}'; log against records of the same account"
      )
    if kind in ("task", "meeting") and due is None:
      raise InvalidArgument(f"due is required for a {kind}")
    if kind == "note" and due is not None:
      raise InvalidArgument("due does not apply to a note")
    if due is not None and due <= self.state.now:
      raise InvalidArgument(f"due ({due.isoformat()}) must be in the future")
    done = due is None
    return self.state.activities.insert(
      Activity(
        id=self.state.new_id("act"),
        kind=kind,
        subject=subject,
        notes=notes,
        contact_id=contact_id,
        deal_id=deal_id,
        owner=deal.owner if deal else self.user,
        due=due,
        done=done,
        completed_at=self.state.now if done else None,
        created_at=self.state.now,
      )
    )

  @tool(mutates=True, consumes=("activity.id", "text"))
  def complete_activity(self, activity_id: str, outcome: str = "") -> Activity:
    """Mark a planned activity as done, optionally appending its outcome to the notes.

    Args:
      activity_id: the activity's id.
      outcome: what came of it.
    """
    act = self.state.activities.get(activity_id)
    if act.done:
      raise Conflict(f"activity '{activity_id}' is already done")
    notes = "\n".join(n for n in (act.notes, outcome.strip()) if n)
    return self.state.activities.update(
      activity_id, done=True, completed_at=self.state.now, notes=notes
    )


def _by_name(c: Contact):
  return (c.name, c.id)
