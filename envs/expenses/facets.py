"""Expenses facets: reports as sources of amounts, claimants, approvers, receipt links and dates;
logging expenses and opening reports as sinks; a draft report's total before and after an
expense is added as the revisit."""

from __future__ import annotations

from datetime import datetime, time, timedelta
from typing import Any

from compoworld.tasks.authoring import AuthorContext, AuthoringError
from compoworld.tasks.facets import Found, Value, facets
from compoworld.tasks.rubric import exists, where
from envs._facets_common import (
  amount_is,
  colleague,
  currency_of,
  found_money,
  found_one,
  found_people,
  home_money,
  iso,
  since,
  today,
  topic,
  user,
  user_email,
)
from envs._world import world
from envs.expenses.service import POLICIES, RECEIPT_OVER

S = "expenses"


def _scenario_report(
  ctx: AuthorContext, person, title: str, status: str = "submitted", items: int = 3
) -> dict:
  """Puts a report of ``person`` with ``items`` policy-compliant expenses (distinct merchants)
  into s0 and returns it."""
  rng, member = ctx.rng, ctx.state(S).members.get(person.email)
  rid, city = ctx.fresh_id("rpt"), ctx.choice(world(ctx.env.seed).venues).city
  start = today(ctx, S) - timedelta(days=rng.randint(8, 25))
  total = 0.0
  for k, (cat, limit, _desc, merchants, low, high) in enumerate(rng.sample(POLICIES, items), 1):
    amount = round(rng.uniform(low, min(high, limit)), 2)
    total = round(total + amount, 2)
    ctx.put(
      S,
      "expenses",
      {
        "id": ctx.fresh_id("exp"),
        "report_id": rid,
        "date": (start + timedelta(days=rng.randint(0, 4))).isoformat(),
        "merchant": ctx.choice(merchants) + (f" {city}" if cat in ("meals", "lodging") else ""),
        "category": cat,
        "amount": amount,
        "currency": world(ctx.env.seed).currency,
        "receipt_url": f"https://receipts.example.com/{rid[4:]}/{k}.pdf"
        if amount > RECEIPT_OVER or rng.random() < 0.7
        else None,
      },
    )
  created = datetime.combine(start + timedelta(days=5), time(rng.randint(8, 18)))
  steps = [iso(created + timedelta(days=d)) for d in (1, 3, 5)]
  decided = status in ("approved", "rejected", "reimbursed")
  return ctx.put(
    S,
    "reports",
    {
      "id": rid,
      "title": title,
      "employee": member.id,
      "approver": member.approver,
      "currency": world(ctx.env.seed).currency,
      "status": status,
      "total": total,
      "created_at": iso(created),
      "submitted_at": steps[0] if status != "draft" else None,
      "decided_at": steps[1] if decided else None,
      "decided_by": member.approver if decided else None,
      "rejection_reason": "Receipts do not match the amounts" if status == "rejected" else "",
      "reimbursed_at": steps[2] if status == "reimbursed" else None,
      "payout_reference": f"ACH-{rng.randint(100000, 999999)}" if status == "reimbursed" else "",
    },
  )


def _find(ctx: AuthorContext, title: str, **filters: Any) -> dict:
  """The agent's way to a report: search by title, then open it."""
  hits = ctx.call(S, "list_reports", query=title, **filters)["items"]
  hit = next(r for r in hits if r["title"] == title)
  return ctx.call(S, "get_report", report_id=hit["id"])


def _colleague_report(ctx: AuthorContext, items: int = 3, status: str = "submitted"):
  who, title = colleague(ctx), topic(ctx)
  _scenario_report(ctx, who, title, status, items)
  return who, _find(ctx, title)


# --- sources -----------------------------------------------------------------------------


@facets.source(S, "money")
def report_total(ctx: AuthorContext) -> Found:
  who, report = _colleague_report(ctx, ctx.rng.randint(2, 4))
  return found_money(
    f'the total of {who.name}\'s "{report["title"]}" expense report',
    [home_money(ctx, report["total"])],
    report["currency"],
  )


@facets.source(S, "money")
def item_amounts(ctx: AuthorContext) -> Found:
  """Several amounts of one report, to sum or to handle one by one."""
  count = ctx.rng.randint(2, 4)
  who, report = _colleague_report(ctx, count)
  return found_money(
    f'the amounts of the {count} expenses on {who.name}\'s "{report["title"]}" report',
    [home_money(ctx, i["amount"]) for i in report["items"]],
    report["currency"],
  )


@facets.source(S, "person.email")
def claimants(ctx: AuthorContext) -> Found:
  """Everyone who filed a report for one trip; the rejected claims are left out."""
  title = topic(ctx)
  people = ctx.rng.sample(world(ctx.env.seed).people[2:], 5)
  statuses = ["submitted", "approved", "reimbursed", "rejected"]
  statuses.append(ctx.choice(("rejected", "approved")))
  ctx.rng.shuffle(statuses)
  for person, status in zip(people, statuses, strict=True):
    _scenario_report(ctx, person, title, status, ctx.rng.randint(1, 3))
  hits = [r for r in ctx.call(S, "list_reports", query=title)["items"] if r["title"] == title]
  return found_people(
    f'the people who filed "{title}" expense reports',
    [r["employee"] for r in hits if r["status"] != "rejected"],
    [r["employee"] for r in hits if r["status"] == "rejected"],
    "whose report was rejected",
  )


@facets.source(S, "person.email")
def report_approver(ctx: AuthorContext) -> Found:
  who, report = _colleague_report(ctx, ctx.rng.randint(1, 3))
  return found_one(
    "person.email",
    f'the person who has to approve {who.name}\'s "{report["title"]}" expense report',
    report["approver"],
  )


def _receipted_item(ctx: AuthorContext) -> tuple[Any, dict, dict]:
  who, report = _colleague_report(ctx, ctx.rng.randint(2, 4))
  items = [i for i in report["items"] if i["receipt_url"]]
  if not items:
    raise AuthoringError("no_receipt")
  return who, report, ctx.choice(items)


def _charge_noun(what: str, who, report: dict, item: dict) -> str:
  """How an instruction names ``what`` of one charge: "the date of the Uber charge on ..."."""
  owner = f'{who.name}\'s "{report["title"]}" expense report'
  return f"the {what} of the {item['merchant']} charge on {owner}"


@facets.source(S, "url")
def receipt_link(ctx: AuthorContext) -> Found:
  who, report, item = _receipted_item(ctx)
  return found_one("url", _charge_noun("receipt link", who, report, item), item["receipt_url"])


@facets.source(S, "date")
def expense_date(ctx: AuthorContext) -> Found:
  who, report, item = _receipted_item(ctx)
  return found_one("date", _charge_noun("date", who, report, item), item["date"])


# --- lookups -----------------------------------------------------------------------------


@facets.lookup(S, "person.email", "money")
def their_report_total(ctx: AuthorContext, found: Found) -> Found | None:
  if found.stale is not None:
    return None  # a revisit's fresh reading fed to a read alone: a stale one would pass unseen
  email = str(found.values[0].value).lower()
  person = world(ctx.env.seed).person(email)
  if person is None or email not in ctx.state(S).members:
    return None  # not an employee: they file no expense reports here
  title = topic(ctx)
  _scenario_report(ctx, person, title, ctx.choice(("submitted", "approved")), ctx.rng.randint(1, 4))
  hits = ctx.call(S, "list_reports", employee=email, query=title)["items"]
  report = next(r for r in hits if r["title"] == title)
  return found_money(
    f'the total of their "{title}" expense report',
    [home_money(ctx, report["total"])],
    report["currency"],
  )


# --- sinks -------------------------------------------------------------------------------


def _my_draft(ctx: AuthorContext, items: int = 0) -> dict:
  """A draft report of the user's, found the way the agent would, and what to log on it."""
  me, title = user(ctx), topic(ctx)
  _scenario_report(ctx, me, title, "draft", items)
  # By title and status, as the agent can: the instruction says "my", not who the user is; so
  # the user's draft must be the one draft of that title.
  hits = ctx.call(S, "list_reports", query=title, status="draft")["items"]
  drafts = [r for r in hits if r["title"] == title]
  if [r["employee"] for r in drafts] != [me.email]:
    raise AuthoringError("draft_not_unique", title)
  report = ctx.call(S, "get_report", report_id=drafts[0]["id"])
  # A category the draft has no expense in yet, so the new expense is told apart.
  used = {i["category"] for i in report["items"]}
  cat, _limit, _desc, merchants, *_ = ctx.choice([p for p in POLICIES if p[0] not in used])
  day = today(ctx, S) - timedelta(days=ctx.rng.randint(0, 3))
  return {
    "report": report,
    "title": title,
    "category": cat,
    "merchant": ctx.choice(merchants),
    "date": day.isoformat(),
  }


def _log(ctx: AuthorContext, t: dict, v: Value) -> None:
  amount, code = float(v.value), currency_of(v)
  if code not in (None, t["report"]["currency"]):
    # The report takes its own currency only: the agent would have to convert, unasked.
    raise AuthoringError("currency_mismatch", code)
  if not 0.01 <= amount <= 100000 or round(amount, 2) != amount:
    raise AuthoringError("expense_amount_out_of_range", str(v.value))
  _add_item(ctx, t, amount)


def _add_item(ctx: AuthorContext, t: dict, amount: float, **receipt: Any) -> None:
  """Adds the expense ``t`` describes, of ``amount``, to its report."""
  ctx.call(
    S,
    "add_expense_item",
    report_id=t["report"]["id"],
    date=t["date"],
    merchant=t["merchant"],
    category=t["category"],
    amount=amount,
    **receipt,
  )


def _log_check(ctx: AuthorContext, t: dict, v: Value) -> dict:
  return _item_on(t, where("merchant", t["merchant"]), amount_is("amount", float(v.value)))


def _item_on(t: dict, *conds: dict) -> dict:
  """A rubric condition: ``t``'s report has an expense that meets ``conds``."""
  return exists(S, "expenses", where("report_id", t["report"]["id"]), *conds)


def _report_started(ctx: AuthorContext, employee: str, title: str) -> dict:
  """A rubric condition: the agent started ``employee``'s report titled ``title``."""
  return exists(
    S, "reports", where("employee", employee), where("title", title), since(ctx, S, "created_at")
  )


def _log_phrase(t: dict, what: str) -> str:
  return f'{what} from {t["merchant"]} dated {t["date"]} to my draft "{t["title"]}" expense report'


facets.sink(
  S,
  "money",
  "log_expense",
  total="log_total_expense",
  prepare=_my_draft,
  act=_log,
  check=_log_check,
  phrase=lambda ctx, t, obj: _log_phrase(t, f"add {obj} as a {t['category']} expense"),
  total_phrase=lambda ctx, t, obj: _log_phrase(t, f"add a single {t['category']} expense of {obj}"),
  text=lambda ctx, t, v: (
    f'"{t["title"]}" has a {v.label} {t["category"]} expense from {t["merchant"]}.'
  ),
)


def _open_report(ctx: AuthorContext, t: dict, v: Value) -> None:
  if str(v.value).lower() not in ctx.state(S).members:
    raise AuthoringError("not_an_employee", str(v.value))
  ctx.call(S, "create_report", employee=v.value, title=t["title"])


facets.sink(
  S,
  "person.email",
  "open_report_for",
  prepare=lambda ctx: {"title": f"{topic(ctx)} expenses"},
  act=_open_report,
  check=lambda ctx, t, v: _report_started(ctx, str(v.value).lower(), t["title"]),
  phrase=lambda ctx, t, obj: f'start a draft expense report titled "{t["title"]}" for {obj}',
  text=lambda ctx, t, v: f'{v.label} has a new "{t["title"]}" expense report.',
)


def _titled(ctx: AuthorContext, t: dict, v: Value) -> None:
  if not str(v.value).strip():
    raise AuthoringError("empty_title")
  ctx.call(S, "create_report", employee=t["me"], title=str(v.value))


facets.sink(
  S,
  "title",
  "report_titled",
  prepare=lambda ctx: {"me": user_email(ctx)},
  act=_titled,
  check=lambda ctx, t, v: _report_started(ctx, t["me"], str(v.value)),
  phrase=lambda ctx, t, obj: (
    f"start a new draft expense report of mine ({t['me']}) with {obj} as its title"
  ),
  text=lambda ctx, t, v: f'I have a new draft expense report titled "{v.label}".',
)


def _receipt_target(ctx: AuthorContext) -> dict:
  t = _my_draft(ctx)
  # An amount within the category limit but above the receipt threshold: the receipt matters.
  options = [p for p in POLICIES if p[0] in ("lodging", "software", "office")]
  cat, limit, _desc, merchants, low, high = ctx.choice(options)
  amount = round(ctx.rng.uniform(max(low, RECEIPT_OVER + 1), min(high, limit)), 2)
  return {**t, "category": cat, "merchant": ctx.choice(merchants), "amount": amount}


def _attach(ctx: AuthorContext, t: dict, v: Value) -> None:
  if not str(v.value).startswith(("https://", "http://")):
    raise AuthoringError("receipt_not_a_web_link", str(v.value))
  _add_item(ctx, t, t["amount"], receipt_url=v.value)


facets.sink(
  S,
  "url",
  "attach_receipt",
  prepare=_receipt_target,
  act=_attach,
  check=lambda ctx, t, v: _item_on(
    t, where("receipt_url", v.value), amount_is("amount", t["amount"])
  ),
  phrase=lambda ctx, t, obj: (
    f"add the {t['amount']:,.2f} {t['category']} expense from {t['merchant']} dated "
    f'{t["date"]} to my draft "{t["title"]}" expense report, with {obj} as its receipt'
  ),
  text=lambda ctx, t, v: f'The {t["merchant"]} expense on "{t["title"]}" has receipt {v.label}.',
  single=True,
)


# --- revisit: a draft report's total before and after one more expense -------------------


def _total_first(ctx: AuthorContext) -> tuple[Found, dict]:
  t = _my_draft(ctx, items=ctx.rng.randint(1, 3))
  found = found_money(
    f'the current total of my draft "{t["title"]}" expense report',
    [home_money(ctx, t["report"]["total"])],
    t["report"]["currency"],
  )
  return found, t


def _total_second(ctx: AuthorContext, t: dict) -> Found:
  report = ctx.call(S, "get_report", report_id=t["report"]["id"])
  return found_money(
    f'the new total of the "{t["title"]}" expense report',
    [home_money(ctx, report["total"])],
    stale=t["report"]["total"],
    currency=report["currency"],
  )


facets.revisit(
  S,
  kind="money",
  kind_in="money",
  kind_after="money",
  name="report_total_after_expense",
  first=_total_first,
  second=_total_second,
  change="add_expense_to_report",
  act=_log,
  check=_log_check,
  phrase=lambda ctx, t, obj: (
    f"add {obj} to that report as a {t['category']} expense from {t['merchant']} dated {t['date']}"
  ),
  text=lambda ctx, t, v: (
    f'"{t["title"]}" has a {v.label} {t["category"]} expense from {t["merchant"]}.'
  ),
)
