"""Ledger: a general ledger (the accounting core of QuickBooks, Xero or NetSuite).

The chart of accounts lists accounts by a four-digit code (1xxx assets, 2xxx liabilities, 3xxx
equity, 4xxx revenue, 5xxx-7xxx expenses), each with a type and a normal balance (debit for
assets and expenses, credit for liabilities, equity and revenue; a contra account such as
accumulated depreciation has the opposite one). Accounting periods are calendar months
("2026-02"), open or closed. Journal entries have a date, a memo, an external reference (an
invoice or bill number) and at least two lines, each a debit or a credit to one account.
Entries are never edited or deleted: a mistake is undone by a reversing entry that swaps every
debit and credit and links back to the original, which becomes "reversed".

Rules an accountant expects: debits equal credits (422 with both sums); an entry has at least
two lines and each line is either a debit or a credit; every account code exists; nothing is
posted into a closed period, nor dated in a month that has no period; an entry is reversed at
most once and a reversal is not itself reversed; periods are closed in order, only after they
have ended, and reopened newest first; a period is not closed twice; account codes are unique.
An account's balance is computed in its normal direction from the entries up to a date; the
trial balance of every account always balances.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta
from typing import Literal

from compoworld import Conflict, InvalidArgument, NotFound, Service, Unprocessable, registry, tool
from compoworld.runtime.fields import Text
from compoworld.runtime.query import select
from envs._world import seeded
from envs.ledger.state import (
  BILL_ACCOUNT,
  CHART,
  FIRST_PERIOD,
  LAST_PERIOD,
  NORMAL,
  Account,
  AccountType,
  Code,
  JournalEntry,
  JournalLine,
  LedgerState,
  LineInput,
  Period,
  PeriodId,
  _cents,
  _month_end,
  _period_id,
)


@registry.register
class LedgerService(Service):
  name = "ledger"
  domain = "finance"
  description = "General ledger: chart of accounts, journal entries, periods and trial balance."
  State = LedgerState

  @classmethod
  def generate(cls, seed: int, size: int | None) -> LedgerState:
    rng, w, state = seeded(cls, seed)
    for code, name, kind, normal in CHART:
      state.accounts.insert(
        Account(id=code, name=name, type=kind, normal_balance=normal or NORMAL[kind])
      )
    today = state.now.date()
    first = FIRST_PERIOD
    while first <= LAST_PERIOD:
      # The books are closed up to two months back; last month is still being reviewed.
      closed = _month_end(first) < today.replace(day=1) - timedelta(days=1)
      state.periods.insert(
        Period(
          id=_period_id(first),
          start=first,
          end=_month_end(first),
          status="closed" if closed else "open",
          closed_at=datetime.combine(_month_end(first) + timedelta(days=8), datetime.min.time())
          if closed
          else None,
        )
      )
      first = _month_end(first) + timedelta(days=1)

    def post(day: date, memo: str, reference: str, *lines: tuple[str, str, float]) -> JournalEntry:
      rows = tuple(
        JournalLine(id=str(k), account=a, **{side: round(amt, 2)})
        for k, (a, side, amt) in enumerate(lines, 1)
      )
      total = round(sum(r.debit for r in rows), 2)
      assert _cents(total) == sum(_cents(r.credit) for r in rows), memo
      at = datetime.combine(day, datetime.min.time()) + timedelta(hours=rng.randint(9, 17))
      return state.entries.insert(
        JournalEntry(
          id=state.new_id("je"),
          date=day,
          memo=memo,
          reference=reference,
          lines=rows,
          total=total,
          posted_at=min(at, state.now),
        )
      )

    post(
      FIRST_PERIOD,
      "Opening balances",
      "OB-2025",
      ("1000", "debit", 250000.0),
      ("1500", "debit", 60000.0),
      ("3000", "credit", 250000.0),
      ("2500", "credit", 60000.0),
    )
    n = max(1, (size if size is not None else 40) - 1)
    start = date(2025, 9, 1)
    days = sorted(
      start + timedelta(days=rng.randint(0, (today - start).days - 1)) for _ in range(n)
    )
    open_sales, open_bills = [], []  # (reference, party, amount) still to be settled
    for day in days:
      kind = rng.choice(("sale", "sale", "receipt", "bill", "payment", "payroll", "rent", "other"))
      if kind == "receipt" and open_sales:
        ref, who, amount = open_sales.pop(0)
        post(day, f"Payment from {who}", ref, ("1000", "debit", amount), ("1100", "credit", amount))
      elif kind == "payment" and open_bills:
        ref, who, amount = open_bills.pop(0)
        post(day, f"Paid {who}", ref, ("2000", "debit", amount), ("1000", "credit", amount))
      elif kind in ("sale", "receipt"):
        cust = rng.choice(w.customers)
        net = round(rng.uniform(1500, 40000), 2)
        tax = round(net * 0.08, 2)
        ref = f"INV-{rng.randint(1001, 1999)}"
        revenue = rng.choice(("4000", "4100", "4200"))
        post(
          day,
          f"Invoice {ref} to {cust.name}",
          ref,
          ("1100", "debit", net + tax),
          (revenue, "credit", net),
          ("2200", "credit", tax),
        )
        open_sales.append((ref, cust.name, round(net + tax, 2)))
      elif kind in ("bill", "payment"):
        vendor = rng.choice(w.vendors)
        amount = round(rng.uniform(400, 12000), 2)
        ref = f"BILL-{rng.randint(3000, 3999)}"
        account = BILL_ACCOUNT.get(vendor.category, "6600")
        post(
          day,
          f"Bill from {vendor.name}",
          ref,
          (account, "debit", amount),
          ("2000", "credit", amount),
        )
        open_bills.append((ref, vendor.name, amount))
      elif kind == "payroll":
        gross = round(rng.uniform(38000, 52000), 2)
        withheld = round(gross * 0.24, 2)
        post(
          day,
          f"Payroll {day:%B %Y}",
          f"PR-{day:%Y%m}",
          ("6000", "debit", gross),
          ("1000", "credit", gross - withheld),
          ("2300", "credit", withheld),
        )
      elif kind == "rent":
        post(
          day, f"Office rent {day:%B %Y}", "", ("6100", "debit", 6500.0), ("1000", "credit", 6500.0)
        )
      else:
        account, memo = rng.choice(
          (
            ("6400", "Ad campaign"),
            ("6300", "Team travel"),
            ("6500", "Utilities"),
            ("6700", "Depreciation"),
          )
        )
        amount = round(rng.uniform(150, 4000), 2)
        credit = "1510" if account == "6700" else "1000"
        post(day, memo, "", (account, "debit", amount), (credit, "credit", amount))
    # An entry of the open month was booked twice by mistake; the duplicate has been reversed.
    recent = [e for e in state.entries if e.date >= today.replace(day=1) - timedelta(days=28)]
    if recent:
      orig = rng.choice(recent)
      sides = [(li.account, li.debit, li.credit) for li in orig.lines]
      wrong = post(
        orig.date,
        orig.memo,
        orig.reference,
        *((a, "debit" if d else "credit", d or c) for a, d, c in sides),
      )
      fix = post(
        today - timedelta(days=1),
        f"Reversal of {wrong.id}: entered twice",
        wrong.reference,
        *((a, "credit" if d else "debit", d or c) for a, d, c in sides),
      )
      state.entries.update(fix.id, reversal_of=wrong.id)
      state.entries.update(wrong.id, status="reversed", reversed_by=fix.id)
    return state

  # --- helpers -----------------------------------------------------------------------------

  def _open_period(self, day: date) -> Period:
    pid = _period_id(day)
    period = self.state.periods.find(pid)
    if period is None:
      ids = sorted(self.state.periods.ids())
      raise NotFound(f"period '{pid}' not found; periods run from {ids[0]} to {ids[-1]}")
    if period.status == "closed":
      raise Conflict(f"period {pid} is closed; post into an open period or reopen {pid} first")
    return period

  def _activity(self, account: str, as_of: date | None) -> tuple[int, int]:
    """Debits and credits to an account in cents, from entries dated up to ``as_of``."""
    debit = credit = 0
    for e in self.state.entries:
      if as_of is None or e.date <= as_of:
        for li in e.lines:
          if li.account == account:
            debit, credit = debit + _cents(li.debit), credit + _cents(li.credit)
    return debit, credit

  def _insert(self, day: date, memo: str, reference: str, lines, reversal_of=None) -> JournalEntry:
    return self.state.entries.insert(
      JournalEntry(
        id=self.state.new_id("je"),
        date=day,
        memo=memo,
        reference=reference,
        lines=lines,
        total=sum(_cents(li.debit) for li in lines) / 100,
        reversal_of=reversal_of,
        posted_at=self.state.now,
      )
    )

  # --- reads -------------------------------------------------------------------------------

  @tool(mutates=False, page="account", produces=("account.id", "title"))
  def list_accounts(self, type: AccountType | None = None, query: str | None = None) -> list:
    """List the chart of accounts in code order.

    Args:
      type: only accounts of this type ("asset", "liability", "equity", "revenue", "expense").
      query: words that must all appear in the account's name or description.
    """
    return select(
      self.state.accounts,
      eq={"type": type},
      text=query,
      fields=("name", "description"),
      key=lambda a: a.id,
    )

  @tool(mutates=False, consumes=("account.id", "date"), produces=("money",))
  def get_account_balance(self, account_code: Code, as_of: date | None = None) -> dict:
    """An account's balance in its normal direction (positive when it sits on its normal side),
    with total debits and credits, from entries dated up to a day.

    Args:
      account_code: the account's four-digit code.
      as_of: count entries dated on or before this day (YYYY-MM-DD); all entries if omitted.
    """
    account = self.state.accounts.get(account_code)
    debit, credit = self._activity(account.id, as_of)
    net = debit - credit if account.normal_balance == "debit" else credit - debit
    return {
      "account_code": account.id,
      "name": account.name,
      "type": account.type,
      "normal_balance": account.normal_balance,
      "as_of": as_of or self.state.now.date(),
      "debits": debit / 100,
      "credits": credit / 100,
      "balance": net / 100,
    }

  @tool(mutates=False, page="entry", produces=("entry.id", "date", "money", "reference"))
  def list_entries(
    self,
    account_code: Code | None = None,
    start_date: date | None = None,
    end_date: date | None = None,
    status: Literal["posted", "reversed"] | None = None,
    query: str | None = None,
  ) -> list:
    """List journal entries, newest first.

    Args:
      account_code: only entries with a line on this account.
      start_date: only entries dated on or after this day (YYYY-MM-DD).
      end_date: only entries dated on or before this day (YYYY-MM-DD).
      status: only "posted" or only "reversed" entries.
      query: words that must all appear in the memo or reference.
    """
    self.state.accounts.check(account_code)
    if start_date and end_date and end_date < start_date:
      raise InvalidArgument(f"end_date ({end_date}) must not be before start_date ({start_date})")
    return select(
      self.state.entries,
      eq={"status": status},
      ge={"date": start_date},
      le={"date": end_date},
      text=query,
      fields=("memo", "reference"),
      where=lambda e: account_code is None or any(li.account == account_code for li in e.lines),
      key=lambda e: (e.date, e.posted_at, e.id),
      reverse=True,
    )

  @tool(mutates=False, consumes=("entry.id",), produces=("account.id", "money", "date"))
  def get_entry(self, entry_id: str) -> JournalEntry:
    """Get one journal entry with its lines.

    Args:
      entry_id: the entry's id.
    """
    return self.state.entries.get(entry_id)

  @tool(mutates=False, consumes=("date",), produces=("money", "account.id"))
  def trial_balance(self, as_of: date | None = None) -> dict:
    """The trial balance: every account with activity and its balance in the debit or credit
    column, the column totals and whether they agree.

    Args:
      as_of: count entries dated on or before this day (YYYY-MM-DD); all entries if omitted.
    """
    rows, debits, credits = [], 0, 0
    for account in sorted(self.state.accounts, key=lambda a: a.id):
      debit, credit = self._activity(account.id, as_of)
      if not debit and not credit:
        continue
      net = debit - credit
      debits, credits = debits + max(net, 0), credits + max(-net, 0)
      rows.append(
        {
          "account_code": account.id,
          "name": account.name,
          "type": account.type,
          "debit": max(net, 0) / 100,
          "credit": max(-net, 0) / 100,
        }
      )
    return {
      "as_of": as_of or self.state.now.date(),
      "rows": rows,
      "total_debits": debits / 100,
      "total_credits": credits / 100,
      "balanced": debits == credits,
    }

  @tool(mutates=False, page="period", produces=("period.id", "status", "date"))
  def list_periods(
    self, status: Literal["open", "closed"] | None = None, year: int | None = None
  ) -> list:
    """List accounting periods (months) in order, with their open or closed status.

    Args:
      status: only "open" or only "closed" periods.
      year: only periods of this year.
    """
    return select(
      self.state.periods,
      eq={"status": status},
      where=lambda p: year is None or p.start.year == year,
      key=lambda p: p.id,
    )

  # --- writes ------------------------------------------------------------------------------

  @tool(mutates=True, consumes=("title", "text"), produces=("account.id",))
  def create_account(
    self, code: Code, name: Text, type: AccountType, description: str = ""
  ) -> Account:
    """Add an account to the chart of accounts; its normal balance follows its type.

    Args:
      code: a new four-digit code, e.g. 6450.
      name: the account's name.
      type: "asset", "liability", "equity", "revenue" or "expense".
      description: what the account is used for.
    """
    existing = self.state.accounts.find(code)
    if existing is not None:
      raise Conflict(f"account code {code} is already used by '{existing.name}'; pick another code")
    return self.state.accounts.insert(
      Account(id=code, name=name, type=type, normal_balance=NORMAL[type], description=description)
    )

  @tool(mutates=True, consumes=("account.id", "date", "money", "reference", "text"))
  def post_journal_entry(
    self, date: date, memo: Text, lines: list[LineInput], reference: str = ""
  ) -> JournalEntry:
    """Post a balanced journal entry into an open period.

    Args:
      date: the entry's accounting date (YYYY-MM-DD).
      memo: what the entry records.
      lines: at least two lines, each {account, debit} or {account, credit}; the debits must
        equal the credits.
      reference: an external document number such as an invoice or bill number.
    """
    if len(lines) < 2:
      raise InvalidArgument(f"lines: a journal entry needs at least two lines, got {len(lines)}")
    for k, li in enumerate(lines, 1):
      if (li.debit > 0) == (li.credit > 0):
        raise InvalidArgument(f"lines[{k}]: give either a debit or a credit above zero, not both")
      if _cents(li.debit + li.credit) != round((li.debit + li.credit) * 100, 6):
        raise InvalidArgument(f"lines[{k}]: amounts have at most two decimals")
    for li in lines:
      self.state.accounts.get(li.account)
    debit = sum(_cents(li.debit) for li in lines)
    credit = sum(_cents(li.credit) for li in lines)
    if debit != credit:
      raise Unprocessable(
        f"debits ({debit / 100:.2f}) do not equal credits ({credit / 100:.2f}); "
        f"the difference is {abs(debit - credit) / 100:.2f}"
      )
    self._open_period(date)
    rows = tuple(
      JournalLine(
        id=str(k), account=li.account, debit=li.debit, credit=li.credit, description=li.description
      )
      for k, li in enumerate(lines, 1)
    )
    return self._insert(date, memo, reference, rows)

  @tool(mutates=True, consumes=("entry.id", "date"), produces=("entry.id",))
  def reverse_entry(self, entry_id: str, date: date | None = None, memo: str = "") -> dict:
    """Reverse a posted entry: post its mirror image (debits and credits swapped) and mark the
    original reversed.

    Args:
      entry_id: the entry to reverse.
      date: the reversal's date (YYYY-MM-DD), not before the original's; today if omitted.
      memo: why it is reversed.
    """
    entry = self.state.entries.get(entry_id)
    if entry.status == "reversed":
      raise Conflict(f"entry '{entry_id}' was already reversed by '{entry.reversed_by}'")
    if entry.reversal_of is not None:
      raise Conflict(
        f"entry '{entry_id}' is itself the reversal of '{entry.reversal_of}'; "
        "post a new entry instead"
      )
    day = date or self.state.now.date()
    if day < entry.date:
      raise InvalidArgument(f"date ({day}) must not be before the entry's date ({entry.date})")
    self._open_period(day)
    rows = tuple(li.with_changes(debit=li.credit, credit=li.debit) for li in entry.lines)
    text = f"Reversal of {entry.id}" + (f": {memo}" if memo else "")
    mirror = self._insert(day, text, entry.reference, rows, reversal_of=entry.id)
    original = self.state.entries.update(entry.id, status="reversed", reversed_by=mirror.id)
    return {"reversal": mirror, "original": original}

  @tool(mutates=True, consumes=("period.id",))
  def close_period(self, period: PeriodId) -> Period:
    """Close an ended accounting period so nothing more is posted into it; periods close in
    order.

    Args:
      period: the period, as YYYY-MM.
    """
    found = self.state.periods.get(period)
    if found.status == "closed":
      raise Conflict(f"period {period} is already closed (since {found.closed_at})")
    if found.end >= self.state.now.date():
      raise Conflict(f"period {period} has not ended yet (it ends {found.end}); close it after")
    earlier = sorted(p.id for p in self.state.periods if p.id < period and p.status == "open")
    if earlier:
      raise Conflict(f"earlier period {earlier[0]} is still open; close {earlier[0]} first")
    return self.state.periods.update(period, status="closed", closed_at=self.state.now)

  @tool(mutates=True, consumes=("period.id",))
  def reopen_period(self, period: PeriodId) -> Period:
    """Reopen a closed period to post adjustments; the newest closed period is reopened first.

    Args:
      period: the period, as YYYY-MM.
    """
    found = self.state.periods.get(period)
    if found.status == "open":
      raise Conflict(f"period {period} is already open")
    later = sorted(p.id for p in self.state.periods if p.id > period and p.status == "closed")
    if later:
      raise Conflict(f"later period {later[-1]} is closed; reopen {later[-1]} first")
    return self.state.periods.update(period, status="open", closed_at=None)
