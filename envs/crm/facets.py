"""CRM facets: deals as sources of contacts, owners, amounts and dates; reassigning, logging,
repricing and opening deals as sinks; the reprice-a-deal revisit (its amount goes stale)."""

from __future__ import annotations

from datetime import datetime, timedelta

from compoworld.tasks.authoring import AuthorContext, AuthoringError
from compoworld.tasks.facets import Found, Value, facets
from compoworld.tasks.rubric import all_of, exists, record_is, where
from envs._facets_common import (
  amount_of,
  code_money_label,
  colleague_email,
  day_of,
  found_day,
  found_one,
  found_time,
  future_time,
  iso,
  mentions,
  since,
  today,
  topic,
  user_email,
)
from envs._world import world

S = "crm"


def _account(ctx: AuthorContext):
  """A customer account that has at least one contact to put on a deal."""
  state = ctx.state(S)
  with_contacts = {c.account_id for c in state.contacts}
  return ctx.choice(
    sorted((a for a in state.accounts if a.id in with_contacts), key=lambda a: a.id)
  )


def _put_deal(
  ctx: AuthorContext, acc, name: str, stage: str = "proposal", owner: str | None = None
) -> dict:
  """Adds one of the scenario's deals to s0 (open unless ``stage`` says otherwise)."""
  state, rng = ctx.state(S), ctx.rng
  now = state.now
  contacts = sorted((c for c in state.contacts if c.account_id == acc.id), key=lambda c: c.id)
  closed = stage in ("closed_won", "closed_lost")
  close = now.date() + timedelta(days=-rng.randint(3, 20) if closed else rng.randint(14, 75))
  created = now - timedelta(days=rng.randint(10, 60))
  record = {
    "id": ctx.fresh_id("deal"),
    "account_id": acc.id,
    "name": name,
    "amount": float(rng.randint(150, 6000) * 10),
    "currency": world(ctx.env.seed).currency,
    "stage": stage,
    "close_date": close.isoformat(),
    "owner": owner or acc.owner,
    "contact_id": ctx.choice(contacts).id,
    "lost_reason": "Chose a competitor" if stage == "closed_lost" else None,
    "created_at": iso(created),
    "updated_at": iso(now - timedelta(days=rng.randint(1, 9))),
    "closed_at": iso(datetime.combine(close, datetime.min.time()) + timedelta(hours=17))
    if closed
    else None,
  }
  return ctx.put(S, "deals", record)


def _open_account(ctx: AuthorContext, name: str) -> dict:
  """The agent's way to an account: search by name, then open it (contacts and deals)."""
  hits = ctx.call(S, "search_accounts", query=name)["items"]
  hit = next(a for a in hits if a["name"] == name)
  return ctx.call(S, "get_account", account_id=hit["id"])


def _scenario_deal(
  ctx: AuthorContext, stage: str = "proposal", owner: str | None = None
) -> tuple[dict, dict]:
  """Puts a distinctive open deal on a customer account and finds it as an agent would:
  the account by name, the deal among its deals. Returns (account, deal)."""
  acc = _account(ctx)
  deal = _put_deal(ctx, acc, f"{acc.name} - {topic(ctx)}", stage, owner)
  account = _open_account(ctx, acc.name)
  hit = next(d for d in account["deals"] if d["name"] == deal["name"])
  return account, ctx.call(S, "get_deal", deal_id=hit["id"])


def _contact_of(account: dict, deal: dict) -> dict:
  return next(c for c in account["contacts"] if c["id"] == deal["contact_id"])


# --- sources ---------------------------------------------------------------------------------


@facets.source(S, "person.email")
def deal_contact_email(ctx: AuthorContext) -> Found:
  account, deal = _scenario_deal(ctx)
  email = _contact_of(account, deal)["email"]
  return found_one("person.email", f'the main contact on the "{deal["name"]}" deal', email)


@facets.source(S, "person.email")
def deal_owner_email(ctx: AuthorContext) -> Found:
  """The colleague who owns a deal: an employee address, unlike a deal's contacts."""
  team = [p.email for p in world(ctx.env.seed).people[2:] if p.department == "Sales"]
  _, deal = _scenario_deal(ctx, owner=ctx.choice(team or [world(ctx.env.seed).people[2].email]))
  return found_one(
    "person.email", f'the colleague who owns the "{deal["name"]}" deal in the CRM', deal["owner"]
  )


@facets.source(S, "person.name")
def deal_contact_name(ctx: AuthorContext) -> Found:
  account, deal = _scenario_deal(ctx)
  name = _contact_of(account, deal)["name"]
  return found_one(
    "person.name", f'the name of the main contact on the "{deal["name"]}" deal', name
  )


@facets.source(S, "money")
def deal_amount(ctx: AuthorContext) -> Found:
  _, deal = _scenario_deal(ctx, stage=ctx.choice(("qualification", "proposal", "negotiation")))
  amount = deal["amount"]
  return Found(
    "money",
    f'the amount of the "{deal["name"]}" deal',
    [Value(amount, code_money_label(amount, deal["currency"]), amount)],
    answer=f'The "{deal["name"]}" deal is worth {code_money_label(amount, deal["currency"])}.',
  )


@facets.source(S, "money")
def open_deal_amounts(ctx: AuthorContext) -> Found:
  """Several open deals of one program on one account (and a lost one that does not count):
  the amounts a total is made of."""
  acc, program, w = _account(ctx), topic(ctx), world(ctx.env.seed)
  products = ctx.rng.sample(w.products, 4)
  stages = [ctx.choice(("prospecting", "qualification", "proposal", "negotiation")) for _ in "abc"]
  for product, stage in zip(products, [*stages, "closed_lost"], strict=True):
    _put_deal(ctx, acc, f"{program} - {product.name}", stage)
  account = _open_account(ctx, acc.name)
  deals = ctx.call(S, "list_deals", account_id=account["id"], open_only=True, limit=100)["items"]
  mine = [d for d in deals if d["name"].startswith(f"{program} - ")]
  if len({d["amount"] for d in mine}) < len(mine):
    raise AuthoringError("repeated_value")  # "each of them" must mean distinct amounts
  return Found(
    "money",
    f'the amounts of the open "{program}" deals with {acc.name}',
    [Value(d["amount"], code_money_label(d["amount"], d["currency"]), d["amount"]) for d in mine],
  )


@facets.source(S, "company.name")
def deal_customer(ctx: AuthorContext) -> Found:
  """A deal named after its project only: which customer it is with takes a lookup."""
  acc, name = _account(ctx), f"{topic(ctx)} expansion"
  _put_deal(ctx, acc, name, ctx.choice(("qualification", "proposal")))
  deals = ctx.call(S, "list_deals", open_only=True, limit=100)["items"]
  deal = next((d for d in deals if d["name"] == name), None)
  if deal is None:
    raise AuthoringError("deal_not_listed", name)  # more open deals than one page holds
  account = ctx.call(S, "get_account", account_id=deal["account_id"])
  return found_one("company.name", f'the customer the "{name}" deal is with', account["name"])


@facets.source(S, "date")
def deal_close_date(ctx: AuthorContext) -> Found:
  _, deal = _scenario_deal(ctx)
  day = deal["close_date"]
  return found_day(f'the expected close date of the "{deal["name"]}" deal', day)


@facets.source(S, "datetime")
def task_due(ctx: AuthorContext) -> Found:
  """A planned task on a deal: when it is due."""
  _, deal = _scenario_deal(ctx)
  state = ctx.state(S)
  due = state.now.replace(minute=0) + timedelta(
    days=ctx.rng.randint(2, 8), hours=ctx.rng.randint(1, 7)
  )
  subject = ctx.choice(("Send revised quote", "Book technical review", "Confirm decision maker"))
  ctx.put(
    S,
    "activities",
    {
      "id": ctx.fresh_id("act"),
      "kind": "task",
      "subject": subject,
      "deal_id": deal["id"],
      "owner": deal["owner"],
      "due": iso(due),
      "done": False,
      "created_at": iso(state.now - timedelta(days=1)),
    },
  )
  tasks = ctx.call(S, "list_activities", deal_id=deal["id"], kind="task", open_only=True)["items"]
  task = next(t for t in tasks if t["subject"] == subject)
  return found_time(f'when the "{subject}" task on the "{deal["name"]}" deal is due', task["due"])


# --- lookups ---------------------------------------------------------------------------------


def _account_named(ctx: AuthorContext, name: str) -> dict | None:
  hits = ctx.call(S, "search_accounts", query=name)["items"]
  return next((a for a in hits if a["name"].lower() == str(name).lower()), None)


@facets.lookup(S, "company.name", "person.email")
def account_owner(ctx: AuthorContext, found: Found) -> Found | None:
  acc = _account_named(ctx, found.values[0].value)
  if acc is None:
    return None
  return found_one(
    "person.email",
    f"the owner of the {acc['name']} account in the CRM",
    acc["owner"],
    answer=f"{acc['owner']} owns the {acc['name']} account.",
  )


@facets.lookup(S, "company.name", "money")
def open_pipeline(ctx: AuthorContext, found: Found) -> Found | None:
  acc = _account_named(ctx, found.values[0].value)
  if acc is None:
    return None
  deals = ctx.call(S, "list_deals", account_id=acc["id"], open_only=True, limit=100)["items"]
  if not deals:
    return None
  total = round(sum(d["amount"] for d in deals), 2)
  label = code_money_label(total, deals[0]["currency"])
  return Found(
    "money",
    f"the total amount of the open deals with {acc['name']} in the CRM",
    [Value(total, label, total)],
    answer=f"The open deals with {acc['name']} add up to {label}.",
  )


# --- sinks -----------------------------------------------------------------------------------


def _deal_amount(value: Value) -> float:
  amount = amount_of(value)
  if amount < 0:
    raise AuthoringError("negative_amount", str(value.value))
  return round(amount, 2)


def _my_deal(ctx: AuthorContext) -> dict:
  """An open deal the user owns, so handing it to anyone else is a change."""
  _, deal = _scenario_deal(ctx, owner=user_email(ctx))
  return deal


def _hand_over(ctx: AuthorContext, deal: dict, value: Value) -> None:
  email = colleague_email(ctx, value, "owner_not_employee")  # deal owners are colleagues
  if email == deal["owner"]:
    raise AuthoringError("owner_unchanged", email)
  ctx.call(S, "update_deal", deal_id=deal["id"], owner=email)


facets.sink(
  S,
  "person.email",
  "hand_over_deal",
  prepare=_my_deal,
  act=_hand_over,
  check=lambda ctx, d, v: record_is(S, "deals", d["id"], "owner", str(v.value).lower()),
  phrase=lambda ctx, d, obj: f'reassign my "{d["name"]}" deal in the CRM to {obj}',
  text=lambda ctx, d, v: f'{v.label} owns the "{d["name"]}" deal.',
  single=True,
)


def _log(ctx: AuthorContext, t: dict, kind: str, **what: str) -> None:
  """Logs a ``kind`` activity with ``t``'s subject on its deal."""
  ctx.call(S, "log_activity", kind=kind, subject=t["subject"], deal_id=t["id"], **what)


def _logged(t: dict, kind: str, *conds: dict) -> dict:
  """A rubric condition: ``t``'s deal has a ``kind`` activity that meets ``conds``."""
  return exists(S, "activities", where("deal_id", t["id"]), where("kind", kind), *conds)


def _task_target(ctx: AuthorContext) -> dict:
  deal = _my_deal(ctx)
  return {**deal, "subject": f"Follow up on {deal['name'].split(' - ', 1)[1]}"}


facets.sink(
  S,
  "datetime",
  "plan_follow_up",
  prepare=_task_target,
  act=lambda ctx, t, v: _log(ctx, t, "task", due=iso(future_time(ctx, S, v, "time_not_plannable"))),
  check=lambda ctx, t, v: _logged(
    t,
    "task",
    where("subject", t["subject"]),
    where("due", iso(datetime.fromisoformat(str(v.value)))),
  ),
  phrase=lambda ctx, t, obj: (
    f'add a task "{t["subject"]}" to the "{t["name"]}" deal in the CRM, due at {obj}'
  ),
  text=lambda ctx, t, v: f'The "{t["name"]}" deal has a "{t["subject"]}" task due {v.label}.',
)


def _note_target(ctx: AuthorContext) -> dict:
  _, deal = _scenario_deal(ctx)
  return {**deal, "subject": f"{deal['name'].split(' - ', 1)[1]} update"}


facets.sink(
  S,
  "text",
  "log_note",
  prepare=_note_target,
  act=lambda ctx, t, v: _log(ctx, t, "note", notes=str(v.value)),
  check=lambda ctx, t, v: _logged(t, "note", mentions("notes", v), since(ctx, S, "created_at")),
  phrase=lambda ctx, t, obj: (
    f'log {obj} as a note titled "{t["subject"]}" on the "{t["name"]}" deal in the CRM'
  ),
  text=lambda ctx, t, v: f'The "{t["name"]}" deal has a note saying {v.label}.',
)


def _reprice(ctx: AuthorContext, deal: dict, value: Value) -> None:
  amount = _deal_amount(value)
  if amount == deal["amount"]:
    raise AuthoringError("amount_unchanged", str(amount))
  ctx.call(S, "update_deal", deal_id=deal["id"], amount=amount)


def _amount_check(ctx: AuthorContext, deal: dict, value: Value) -> dict:
  return record_is(S, "deals", deal["id"], "amount", _deal_amount(value), "approx")


def _open_deal(ctx: AuthorContext) -> dict:
  return _scenario_deal(ctx, stage=ctx.choice(("qualification", "proposal", "negotiation")))[1]


facets.sink(
  S,
  "money",
  "set_deal_amount",
  total="set_deal_amount_to_total",
  prepare=_open_deal,
  act=_reprice,
  check=_amount_check,
  phrase=lambda ctx, d, obj: f'update the amount of the "{d["name"]}" deal to {obj}',
  text=lambda ctx, d, v: f'The "{d["name"]}" deal is worth {v.label}.',
  single=True,
)


def _move_close(ctx: AuthorContext, deal: dict, value: Value) -> None:
  day = day_of(value)
  if day < today(ctx, S):
    raise AuthoringError("date_in_past", str(value.value))
  if day.isoformat() == deal["close_date"]:
    raise AuthoringError("close_date_unchanged", day.isoformat())
  ctx.call(S, "update_deal", deal_id=deal["id"], close_date=day.isoformat())


facets.sink(
  S,
  "date",
  "move_close_date",
  prepare=_open_deal,
  act=_move_close,
  check=lambda ctx, d, v: record_is(S, "deals", d["id"], "close_date", str(v.value)),
  phrase=lambda ctx, d, obj: f'move the expected close date of the "{d["name"]}" deal to {obj}',
  text=lambda ctx, d, v: f'The "{d["name"]}" deal is expected to close on {v.label}.',
  single=True,
)


def _new_deal_target(ctx: AuthorContext) -> dict:
  close = ctx.state(S).now.date() + timedelta(days=ctx.rng.randint(30, 90))
  return {
    "name": f"{topic(ctx)} pilot",
    "amount": float(ctx.rng.randint(20, 180) * 100),
    "close_date": close.isoformat(),
  }


def _account_for(ctx: AuthorContext, value: Value) -> str:
  """The id of the account named ``value`` (the rubric names the account the deal is on)."""
  name = str(value.value).lower()
  return next((a.id for a in ctx.state(S).accounts if a.name.lower() == name), "")


def _open_new_deal(ctx: AuthorContext, t: dict, value: Value) -> None:
  acc = _account_named(ctx, value.value)
  if acc is None:
    raise AuthoringError("no_such_account", str(value.value))
  ctx.call(
    S,
    "create_deal",
    account_id=acc["id"],
    name=t["name"],
    amount=t["amount"],
    close_date=t["close_date"],
  )


facets.sink(
  S,
  "company.name",
  "open_deal",
  prepare=_new_deal_target,
  act=_open_new_deal,
  check=lambda ctx, t, v: exists(
    S,
    "deals",
    where("account_id", _account_for(ctx, v)),
    where("name", t["name"]),
    where("amount", t["amount"], "approx"),
  ),
  phrase=lambda ctx, t, obj: (
    f'open a "{t["name"]}" deal in the CRM with {obj} as the customer, worth '
    f"{t['amount']:,.2f} and expected to close on {t['close_date']}"
  ),
  text=lambda ctx, t, v: f'A "{t["name"]}" deal is open with {v.label}.',
)


# --- the reprice revisit: read the deal's contact, reprice the deal, read its new amount ------


def _contact_first(ctx: AuthorContext) -> tuple[Found, dict]:
  account, deal = _scenario_deal(ctx, stage=ctx.choice(("qualification", "proposal")))
  email = _contact_of(account, deal)["email"]
  found = found_one("person.email", f'the main contact on the "{deal["name"]}" deal', email)
  return found, deal


def _amount_second(ctx: AuthorContext, deal: dict) -> Found:
  now = ctx.call(S, "get_deal", deal_id=deal["id"])
  label = code_money_label(now["amount"], now["currency"])
  return Found(
    "money",
    f'the amount of the "{deal["name"]}" deal now',
    [Value(now["amount"], label, now["amount"])],
    stale=deal["amount"],  # what the deal was worth when the first read saw it
    answer=f'The "{deal["name"]}" deal is now worth {label}.',
  )


facets.revisit(
  S,
  kind="person.email",
  kind_in="money",
  kind_after="money",
  name="reprice_deal",
  first=_contact_first,
  second=_amount_second,
  act=_reprice,
  check=lambda ctx, d, v: all_of(
    _amount_check(ctx, d, v), record_is(S, "deals", d["id"], "stage", d["stage"])
  ),
  phrase=lambda ctx, d, obj: f'update the amount of the "{d["name"]}" deal to {obj}',
  text=lambda ctx, d, v: f'The "{d["name"]}" deal is worth {v.label}, in the same stage.',
  single=True,
)
