"""Ledger: the records, state and constants; the service and its tools are in ``tools``."""

from __future__ import annotations

from datetime import date, datetime, timedelta
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from compoworld import Record, ServiceState, Table

AccountType = Literal["asset", "liability", "equity", "revenue", "expense"]
Side = Literal["debit", "credit"]
NORMAL: dict[str, Side] = {
  "asset": "debit",
  "expense": "debit",
  "liability": "credit",
  "equity": "credit",
  "revenue": "credit",
}
Code = Annotated[str, Field(pattern=r"^\d{4}$", description="A four-digit account code.")]
PeriodId = Annotated[str, Field(pattern=r"^\d{4}-(0[1-9]|1[0-2])$", description="YYYY-MM.")]
Amount = Annotated[float, Field(ge=0, le=1e10)]

CHART = (
  ("1000", "Cash", "asset", ""),
  ("1100", "Accounts Receivable", "asset", ""),
  ("1200", "Inventory", "asset", ""),
  ("1300", "Prepaid Expenses", "asset", ""),
  ("1500", "Equipment", "asset", ""),
  ("1510", "Accumulated Depreciation", "asset", "credit"),  # a contra-asset account
  ("2000", "Accounts Payable", "liability", ""),
  ("2100", "Accrued Liabilities", "liability", ""),
  ("2200", "Sales Tax Payable", "liability", ""),
  ("2300", "Payroll Liabilities", "liability", ""),
  ("2500", "Loans Payable", "liability", ""),
  ("3000", "Common Stock", "equity", ""),
  ("3100", "Retained Earnings", "equity", ""),
  ("4000", "Product Revenue", "revenue", ""),
  ("4100", "Service Revenue", "revenue", ""),
  ("4200", "Subscription Revenue", "revenue", ""),
  ("5000", "Cost of Goods Sold", "expense", ""),
  ("6000", "Salaries and Wages", "expense", ""),
  ("6100", "Rent", "expense", ""),
  ("6200", "Software Subscriptions", "expense", ""),
  ("6300", "Travel and Meals", "expense", ""),
  ("6400", "Marketing", "expense", ""),
  ("6500", "Utilities", "expense", ""),
  ("6600", "Professional Fees", "expense", ""),
  ("6700", "Depreciation", "expense", ""),
  ("7000", "Interest Expense", "expense", ""),
)
#: Expense account of a vendor's bill, by vendor category.
BILL_ACCOUNT = {"Hardware": "5000", "Supplies": "1200", "Logistics": "5000", "Software": "6200"}
FIRST_PERIOD, LAST_PERIOD = date(2025, 1, 1), date(2026, 12, 1)


class Account(Record):
  id: str  # the account code
  name: str
  type: AccountType
  normal_balance: Side
  description: str = ""


class Period(Record):
  id: str  # "YYYY-MM"
  start: date
  end: date
  status: Literal["open", "closed"] = "open"
  closed_at: datetime | None = None


class JournalLine(Record):
  id: str  # "1", "2", ... in entry order
  account: str
  debit: Amount = 0.0
  credit: Amount = 0.0
  description: str = ""


class JournalEntry(Record):
  date: date
  memo: str
  reference: str = ""
  lines: tuple[JournalLine, ...]
  total: float  # the sum of the debits (= the sum of the credits)
  status: Literal["posted", "reversed"] = "posted"
  reversal_of: str | None = None
  reversed_by: str | None = None
  posted_at: datetime


class LedgerState(ServiceState):
  accounts: Table[Account]
  periods: Table[Period]
  entries: Table[JournalEntry]


class LineInput(BaseModel):
  """One line of a journal entry: a debit or a credit to one account."""

  model_config = ConfigDict(extra="forbid")

  account: Code = Field(description="The account code.")
  debit: Amount = Field(0.0, description="Amount debited (leave 0 for a credit line).")
  credit: Amount = Field(0.0, description="Amount credited (leave 0 for a debit line).")
  description: str = Field("", description="A note on the line.")


def _cents(x: float) -> int:
  return round(x * 100)


def _period_id(day: date) -> str:
  return f"{day:%Y-%m}"


def _month_end(first: date) -> date:
  return (first.replace(day=28) + timedelta(days=4)).replace(day=1) - timedelta(days=1)
