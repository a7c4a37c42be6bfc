"""Ledger facets: booked bills as sources of amounts, bill numbers and dates; account balances
as sources and lookups; journal entries as sinks; a project account's balance before and after
a posting as the revisit."""

from __future__ import annotations

from datetime import date, datetime, time, timedelta
from typing import Any

from compoworld.tasks.authoring import AuthorContext, AuthoringError
from compoworld.tasks.facets import Found, Value, facets
from compoworld.tasks.rubric import exists, where
from envs._facets_common import (
  amount_is,
  currency_of,
  found_home_money,
  found_one,
  fresh_number,
  home_money,
  iso,
  since,
  today,
  topic,
)
from envs._world import world

S = "ledger"

#: Where a vendor's bill is booked, by vendor category (debit account, its name).
BILL_ACCOUNT = {
  "Hardware": ("5000", "Cost of Goods Sold"),
  "Supplies": ("1200", "Inventory"),
  "Logistics": ("5000", "Cost of Goods Sold"),
  "Software": ("6200", "Software Subscriptions"),
}
FEES = ("6600", "Professional Fees")
#: Accounts whose balance a controller asks about.
WATCHED = ("Cash", "Accounts Receivable", "Accounts Payable", "Marketing", "Travel and Meals")


def _check_amount(ctx: AuthorContext, v: Value) -> float:
  """What the ledger takes as an amount: positive, in cents, in the books' currency (an amount
  read in another one would need converting first, and the task would not say so)."""
  amount, code = float(v.value), currency_of(v)
  if code not in (None, world(ctx.env.seed).currency):
    raise AuthoringError("currency_mismatch", code)
  if not 0.01 <= amount <= 1e9 or round(amount, 2) != amount:
    raise AuthoringError("ledger_amount_out_of_range", str(v.value))
  return amount


def _bill_number(ctx: AuthorContext) -> str:
  """A vendor bill number no generated entry carries."""
  used = {e.reference for e in ctx.state(S).entries}
  return fresh_number(ctx, "BILL-{}", (5000, 9999), used, "bill_numbers_exhausted", tries=100)


def _put_entry(
  ctx: AuthorContext, day: date, memo: str, reference: str, debit: str, credit: str, amount: float
) -> dict:
  """Puts a posted two-line entry into s0 (balanced, so the trial balance still agrees)."""
  at = datetime.combine(day, time(ctx.rng.randint(9, 17)))
  return ctx.put(
    S,
    "entries",
    {
      "id": ctx.fresh_id("je"),
      "date": day.isoformat(),
      "memo": memo,
      "reference": reference,
      "lines": [
        {"id": "1", "account": debit, "debit": amount},
        {"id": "2", "account": credit, "credit": amount},
      ],
      "total": amount,
      "posted_at": iso(min(at, ctx.state(S).now)),
    },
  )


def _scenario_bills(ctx: AuthorContext, count: int = 1) -> tuple[str, Any, list[dict]]:
  """Books ``count`` bills of one vendor for a project in this or last month (open periods)."""
  name, vendor = topic(ctx), ctx.choice(world(ctx.env.seed).vendors)
  account = BILL_ACCOUNT.get(vendor.category, FEES)[0]
  days = sorted(today(ctx, S) - timedelta(days=ctx.rng.randint(1, 25)) for _ in range(count))
  entries = []
  for k, day in enumerate(days, 1):
    memo = f"Bill from {vendor.name} - {name}" + (f" (part {k})" if count > 1 else "")
    amount = round(ctx.rng.uniform(400, 9000), 2)
    entries.append(_put_entry(ctx, day, memo, _bill_number(ctx), account, "2000", amount))
  return name, vendor, entries


def _find(ctx: AuthorContext, memo: str, query: str | None = None) -> dict:
  """The agent's way to an entry: search the journal by ``query`` (default: the memo), the
  words the instruction gives, then open it; the entry must be the search's one hit."""
  hits = ctx.call(S, "list_entries", query=query or memo)["items"]
  if query is not None and [e["memo"] for e in hits] != [memo]:
    raise AuthoringError("entry_not_unique", query)
  hit = next(e for e in hits if e["memo"] == memo)
  return ctx.call(S, "get_entry", entry_id=hit["id"])


def _net(ctx: AuthorContext, account) -> int:
  """An account's balance in cents, in its normal direction, from s0 as it stands."""
  lines = [li for e in ctx.state(S).entries for li in e.lines if li.account == account.id]
  net = sum(round(li.debit * 100) - round(li.credit * 100) for li in lines)
  return net if account.normal_balance == "debit" else -net


# --- sources -----------------------------------------------------------------------------


@facets.source(S, "money")
def bill_amount(ctx: AuthorContext) -> Found:
  name, vendor, (entry,) = _scenario_bills(ctx)
  found = _find(ctx, entry["memo"])
  return Found(
    "money",
    f"the amount of the {vendor.name} bill for {name} booked in the ledger",
    [home_money(ctx, found["total"])],
    context={"currency": world(ctx.env.seed).currency, "date": found["date"]},
  )


@facets.source(S, "reference")
def sale_invoice_number(ctx: AuthorContext) -> Found:
  """A sale booked for a project: the ledger names the customer invoice by its number."""
  name, cust = topic(ctx), ctx.choice(world(ctx.env.seed).customers)
  used = {e.reference for e in ctx.state(S).entries}
  if "invoicing" in ctx.env.services:  # one number, one invoice across the books
    used |= {i.reference for i in ctx.state("invoicing").invoices}
  # Numbers well above the invoicing sequence, like the scenario invoices there.
  ref = ctx.choice([f"INV-{n}" for n in range(5000, 9000, 7) if f"INV-{n}" not in used])
  day = today(ctx, S) - timedelta(days=ctx.rng.randint(1, 25))
  memo = f"Invoice {ref} to {cust.name} - {name}"
  revenue = ctx.choice(("4000", "4100", "4200"))
  _put_entry(ctx, day, memo, ref, "1100", revenue, round(ctx.rng.uniform(1500, 30000), 2))
  found = _find(ctx, memo, query=f"{cust.name} {name}")  # the invoice number is what is sought
  return found_one(
    "reference",
    f"the invoice number of the {cust.name} sale for {name} booked in the ledger",
    found["reference"],
  )


@facets.source(S, "date")
def bill_date(ctx: AuthorContext) -> Found:
  name, vendor, (entry,) = _scenario_bills(ctx)
  found = _find(ctx, entry["memo"])
  return found_one(
    "date", f"the date the {vendor.name} bill for {name} was booked in the ledger", found["date"]
  )


@facets.source(S, "money")
def bill_amounts(ctx: AuthorContext) -> Found:
  """A project billed in parts: several amounts to add up or handle one by one."""
  count = ctx.rng.randint(2, 4)
  name, vendor, _ = _scenario_bills(ctx, count)
  hits = ctx.call(S, "list_entries", query=f"{vendor.name} {name}")["items"]
  prefix = f"Bill from {vendor.name} - {name}"
  hits = sorted((e for e in hits if e["memo"].startswith(prefix)), key=lambda e: e["memo"])
  return found_home_money(
    ctx,
    f"the amounts of the {count} {vendor.name} bills for {name} in the ledger",
    [e["total"] for e in hits],
  )


@facets.source(S, "money")
def account_balance(ctx: AuthorContext) -> Found:
  state = ctx.state(S)
  # An account on its normal side (an empty or overdrawn one would hand on no useful amount).
  name = ctx.choice([a.name for a in state.accounts if a.name in WATCHED and _net(ctx, a) > 0])
  account = next(a for a in ctx.call(S, "list_accounts", query=name)["items"] if a["name"] == name)
  balance = ctx.call(S, "get_account_balance", account_code=account["id"])
  return found_home_money(
    ctx, f"the current balance of the {name} account in the ledger", [balance["balance"]]
  )


# --- lookups -----------------------------------------------------------------------------


@facets.lookup(S, "date", "money")
def cash_on_date(ctx: AuthorContext, found: Found) -> Found | None:
  if found.stale is not None:
    return None  # a revisit's fresh reading fed to a read alone: a stale one would pass unseen
  day = str(found.values[0].value)[:10]
  try:
    date.fromisoformat(day)
  except ValueError:
    return None
  cash = next(a for a in ctx.call(S, "list_accounts", query="Cash")["items"] if a["name"] == "Cash")
  balance = ctx.call(S, "get_account_balance", account_code=cash["id"], as_of=day)
  return found_home_money(
    ctx, "the balance of the Cash account in the ledger as of that date", [balance["balance"]]
  )


@facets.lookup(S, "reference", "money")
def booked_under(ctx: AuthorContext, found: Found) -> Found | None:
  """The amount booked under an invoice, bill or order number (the document is booked in the
  ledger's open month if the generated books do not hold it yet)."""
  if found.stale is not None:
    return None  # a revisit's fresh reading fed to a read alone: a stale one would pass unseen
  ref = str(found.values[0].value)
  if not ref.strip() or " " in ref:
    return None
  entries = [e for e in ctx.state(S).entries if e.reference == ref]
  if not entries:
    vendor = ctx.choice(world(ctx.env.seed).vendors)
    day = today(ctx, S) - timedelta(days=ctx.rng.randint(1, 20))
    account = BILL_ACCOUNT.get(vendor.category, FEES)[0]
    amount = round(ctx.rng.uniform(400, 9000), 2)
    _put_entry(ctx, day, f"Bill {ref} from {vendor.name}", ref, account, "2000", amount)
  elif len({e.total for e in entries}) > 1:
    return None  # several documents share the number: no one amount to hand on
  hits = ctx.call(S, "list_entries", query=ref, status="posted")["items"]
  hits = [e for e in hits if e["reference"] == ref and not e["reversal_of"]]
  if not hits:
    return None
  return found_home_money(
    ctx, "the amount booked in the ledger under that reference", [hits[0]["total"]]
  )


# --- sinks -------------------------------------------------------------------------------


def _entry_target(ctx: AuthorContext) -> dict:
  vendor = ctx.choice(world(ctx.env.seed).vendors)
  code, name = BILL_ACCOUNT.get(vendor.category, FEES)
  return {
    "memo": f"{topic(ctx)} - {vendor.name}",
    "account": code,
    "account_name": name,
    "date": today(ctx, S).isoformat(),
  }


def _posted(ctx: AuthorContext, *conds: dict) -> dict:
  """A rubric condition: the agent posted a journal entry that meets ``conds``."""
  return exists(S, "entries", *conds, since(ctx, S, "posted_at"))


def _book(ctx: AuthorContext, t: dict, v: Value, debit: str, credit: str) -> None:
  """Posts the amount ``v`` names on ``t``'s date under its memo: ``debit`` debited, ``credit``
  credited."""
  amount = _check_amount(ctx, v)
  ctx.call(
    S,
    "post_journal_entry",
    date=t["date"],
    memo=t["memo"],
    lines=[{"account": debit, "debit": amount}, {"account": credit, "credit": amount}],
  )


def _post(ctx: AuthorContext, t: dict, v: Value) -> None:
  _book(ctx, t, v, t["account"], "2000")  # a bill: the expense against Accounts Payable


def _post_check(ctx: AuthorContext, t: dict, v: Value) -> dict:
  return _posted(
    ctx,
    where("memo", t["memo"]),
    where("lines.account", t["account"], "contains"),
    where("lines.account", "2000", "contains"),
    amount_is("total", float(v.value)),
  )


facets.sink(
  S,
  "money",
  "book_payable",
  total="book_total_payable",
  prepare=_entry_target,
  act=_post,
  check=_post_check,
  phrase=lambda ctx, t, obj: (
    f'post a journal entry for {obj} dated {t["date"]} with the memo "{t["memo"]}", '
    f"debiting {t['account_name']} ({t['account']}) and crediting Accounts Payable (2000)"
  ),
  text=lambda ctx, t, v: f'A "{t["memo"]}" entry of {v.label} is posted.',
)


def _bill_target(ctx: AuthorContext) -> dict:
  return {**_entry_target(ctx), "amount": round(ctx.rng.uniform(400, 9000), 2)}


def _post_bill(ctx: AuthorContext, t: dict, v: Value) -> None:
  ref = str(v.value)
  if not ref.strip():
    raise AuthoringError("empty_reference")
  ctx.call(
    S,
    "post_journal_entry",
    date=t["date"],
    memo=t["memo"],
    reference=ref,
    lines=[
      {"account": t["account"], "debit": t["amount"]},
      {"account": "2000", "credit": t["amount"]},
    ],
  )


facets.sink(
  S,
  "reference",
  "book_bill_under",
  prepare=_bill_target,
  act=_post_bill,
  check=lambda ctx, t, v: _posted(
    ctx, where("reference", str(v.value)), where("memo", t["memo"]), amount_is("total", t["amount"])
  ),
  phrase=lambda ctx, t, obj: (
    f"post a journal entry of {t['amount']:,.2f} dated {t['date']} with the memo "
    f'"{t["memo"]}", debiting {t["account_name"]} ({t["account"]}) and crediting Accounts '
    f"Payable (2000), and use {obj} as its reference"
  ),
  text=lambda ctx, t, v: f'The "{t["memo"]}" entry is posted under {v.label}.',
  single=True,
)


def _accrual_target(ctx: AuthorContext) -> dict:
  return {
    "memo": f"{topic(ctx)} accrual",
    "amount": round(ctx.rng.uniform(800, 6000), 2),
  }


def _accrue(ctx: AuthorContext, t: dict, v: Value) -> None:
  day = str(v.value)[:10]
  try:
    pid = date.fromisoformat(day).strftime("%Y-%m")
  except ValueError as err:
    raise AuthoringError("not_a_date", day) from err
  period = ctx.state(S).periods.find(pid)
  if period is None or period.status != "open":
    raise AuthoringError("period_not_open", pid)
  ctx.call(
    S,
    "post_journal_entry",
    date=day,
    memo=t["memo"],
    lines=[{"account": FEES[0], "debit": t["amount"]}, {"account": "2100", "credit": t["amount"]}],
  )


facets.sink(
  S,
  "date",
  "accrue_on",
  prepare=_accrual_target,
  act=_accrue,
  check=lambda ctx, t, v: _posted(
    ctx, where("memo", t["memo"]), where("date", str(v.value)[:10]), amount_is("total", t["amount"])
  ),
  phrase=lambda ctx, t, obj: (
    f'post a {t["amount"]:,.2f} accrual with the memo "{t["memo"]}" on {obj}, debiting '
    "Professional Fees (6600) and crediting Accrued Liabilities (2100)"
  ),
  text=lambda ctx, t, v: f'The "{t["memo"]}" accrual is posted on {v.label}.',
)


# --- revisit: a project account's balance before and after a posting ---------------------


def _project_account(ctx: AuthorContext) -> dict:
  """Puts a project's expense account with a few postings into s0, found by name."""
  name = topic(ctx)
  label = f"{name.split()[0]} {name.split(' ', 1)[1].title()}"
  used = set(ctx.state(S).accounts.ids())
  code = ctx.choice([str(c) for c in range(6810, 7000, 10) if str(c) not in used])
  ctx.put(
    S,
    "accounts",
    {
      "id": code,
      "name": label,
      "type": "expense",
      "normal_balance": "debit",
      "description": f"Costs of the {name} project",
    },
  )
  for _ in range(ctx.rng.randint(1, 3)):
    day = today(ctx, S) - timedelta(days=ctx.rng.randint(1, 25))
    amount = round(ctx.rng.uniform(200, 3000), 2)
    _put_entry(ctx, day, f"{name} costs", "", code, "1000", amount)
  account = next(
    a for a in ctx.call(S, "list_accounts", query=label)["items"] if a["name"] == label
  )
  balance = ctx.call(S, "get_account_balance", account_code=account["id"])
  return {
    "code": code,
    "name": label,
    "balance": balance["balance"],
    "memo": f"{name} top-up",
    "date": today(ctx, S).isoformat(),
  }


def _balance_first(ctx: AuthorContext) -> tuple[Found, dict]:
  t = _project_account(ctx)
  found = found_home_money(
    ctx, f"the current balance of the {t['name']} account in the ledger", [t["balance"]]
  )
  return found, t


def _post_to_project(ctx: AuthorContext, t: dict, v: Value) -> None:
  _book(ctx, t, v, t["code"], "1000")  # paid from Cash


def _balance_second(ctx: AuthorContext, t: dict) -> Found:
  balance = ctx.call(S, "get_account_balance", account_code=t["code"])
  return found_home_money(
    ctx, f"the new balance of the {t['name']} account", [balance["balance"]], stale=t["balance"]
  )


facets.revisit(
  S,
  kind="money",
  kind_in="money",
  kind_after="money",
  name="account_balance_after_posting",
  first=_balance_first,
  second=_balance_second,
  change="post_to_project_account",
  act=_post_to_project,
  check=lambda ctx, t, v: _posted(
    ctx,
    where("memo", t["memo"]),
    where("lines.account", t["code"], "contains"),
    amount_is("total", float(v.value)),
  ),
  phrase=lambda ctx, t, obj: (
    f'post a journal entry for {obj} dated {t["date"]} with the memo "{t["memo"]}", '
    f"debiting that account ({t['code']}) and crediting Cash (1000)"
  ),
  text=lambda ctx, t, v: f'A "{t["memo"]}" entry of {v.label} is posted to {t["name"]}.',
)
