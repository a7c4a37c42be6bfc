"""FX facets: wallets and customer deposits as sources of amounts, a pair's rate history as a
source of dates, conversion as a lookup; deposits and transfers as sinks; a wallet's balance
before and after a deposit as the revisit."""

from __future__ import annotations

from datetime import timedelta

from compoworld.tasks.authoring import AuthorContext, AuthoringError
from compoworld.tasks.facets import Found, Value, facets
from compoworld.tasks.rubric import exists, where
from envs._facets_common import (
  amount_is,
  currency_of,
  found_money,
  found_one,
  iso,
  money,
  since,
  topic,
)
from envs._world import world

S = "fx"

#: Wallets the facets pay into (JPY takes no cents, so most amounts would not fit it).
CENT_WALLETS = ("USD", "EUR", "GBP", "CAD")
PAIRS = (("EUR", "USD"), ("GBP", "USD"), ("USD", "JPY"), ("USD", "CAD"), ("EUR", "GBP"))


def _wallet(ctx: AuthorContext, code: str) -> dict:
  """The agent's way to a wallet: list the one in that currency."""
  return ctx.call(S, "list_wallets", currency=code)["items"][0]


def _put_deposits(ctx: AuthorContext, wallet: dict, refs: list[str]) -> None:
  """Customer payments received in the last two days (the wallet's balance is left as it is:
  s0 patches are absolute, and the probe may already have moved money in this wallet)."""
  now = ctx.state(S).now
  for ref in refs:
    amount = float(round(ctx.rng.uniform(1500, 25000), 2))
    ctx.put(
      S,
      "transfers",
      {
        "id": ctx.fresh_id("trf"),
        "kind": "deposit",
        "to_wallet_id": wallet["id"],
        "amount": amount,
        "from_currency": wallet["currency"],
        "to_currency": wallet["currency"],
        "rate": 1.0,
        "converted_amount": amount,
        "reference": ref,
        "at": iso(now - timedelta(minutes=ctx.rng.randint(30, 2800))),
      },
    )


def _deposits(ctx: AuthorContext, wallet: dict, prefix: str) -> list[dict]:
  hits = ctx.call(S, "list_transfers", wallet_id=wallet["id"], kind="deposit", limit=50)["items"]
  mine = [t for t in hits if t["reference"].startswith(prefix)]
  return sorted(mine, key=lambda t: t["reference"])


# --- sources -----------------------------------------------------------------------------


@facets.source(S, "money")
def wallet_balance(ctx: AuthorContext) -> Found:
  code = ctx.choice(CENT_WALLETS)
  wallet = ctx.call(S, "get_wallet", wallet_id=_wallet(ctx, code)["id"])
  return found_money(
    f"the current balance of our {code} wallet", [money(wallet["balance"], code)], code
  )


@facets.source(S, "money")
def customer_deposit(ctx: AuthorContext) -> Found:
  name, code = topic(ctx), ctx.choice(CENT_WALLETS)
  cust = ctx.choice(world(ctx.env.seed).customers).name
  ref = f"Payment from {cust} for {name}"
  _put_deposits(ctx, _wallet(ctx, code), [ref])
  (deposit,) = _deposits(ctx, _wallet(ctx, code), ref)
  return found_money(
    f"the amount {cust} paid into our {code} wallet for {name}",
    [money(deposit["amount"], code)],
    code,
  )


@facets.source(S, "money")
def instalments(ctx: AuthorContext) -> Found:
  """A customer paying a project in instalments: several amounts to add up."""
  name, code, count = topic(ctx), ctx.choice(CENT_WALLETS), ctx.rng.randint(2, 4)
  cust = ctx.choice(world(ctx.env.seed).customers).name
  prefix = f"{name} instalment"
  refs = [f"{prefix} {k} - {cust}" for k in range(1, count + 1)]
  _put_deposits(ctx, _wallet(ctx, code), refs)
  found = _deposits(ctx, _wallet(ctx, code), prefix)
  return found_money(
    f'the amounts of the {count} "{name}" instalments {cust} paid into our {code} wallet',
    [money(t["amount"], code) for t in found],
    code,
  )


@facets.source(S, "date")
def lowest_rate_day(ctx: AuthorContext) -> Found:
  base, quote = ctx.choice(PAIRS)
  history = ctx.call(S, "rate_history", base=base, quote=quote)
  low = [p for p in history["points"] if p["rate"] == history["low"]]
  if len(low) != 1:
    raise AuthoringError("rate_low_not_unique")
  return found_one(
    "date",
    f"the day in the last 30 days when the {base}/{quote} rate was at its lowest",
    low[0]["date"],
    answer=f"The {base}/{quote} rate was lowest on {low[0]['date']} ({low[0]['rate']}).",
  )


# --- lookups -----------------------------------------------------------------------------


@facets.lookup(S, "money", "money")
def converted(ctx: AuthorContext, found: Found) -> Found | None:
  """The incoming amount(s) in another currency at today's rate: a foreign amount in the home
  currency, a home one in another. The source currency is what the previous step read (the
  home currency if it did not say)."""
  if found.stale is not None:
    return None  # a revisit's fresh reading fed to a read alone: a stale one would pass unseen
  codes = {c.id for c in ctx.state(S).currencies}
  frm = str(found.context.get("currency") or world(ctx.env.seed).currency)
  amounts = [float(v.value) for v in found.values]
  if frm not in codes or not all(0 < a <= 1e12 for a in amounts):
    return None
  home = world(ctx.env.seed).currency  # a foreign amount is wanted in the books' currency
  to = home if frm != home else ctx.choice([c for c in CENT_WALLETS if c != frm])
  out = [
    ctx.call(S, "convert", amount=a, from_currency=frm, to_currency=to)["converted_amount"]
    for a in amounts
  ]
  what = "that amount" if len(out) == 1 else "those amounts"
  return found_money(
    f"{what} converted from {frm} to {to} at today's rate", [money(a, to) for a in out], to
  )


# --- sinks -------------------------------------------------------------------------------


def _wallet_for(ctx: AuthorContext, t: dict, v: Value, key: str = "wallet") -> dict:
  """The wallet in the amount's currency (any cent wallet if it names none), chosen when the
  amount is known and found as the agent would; a second amount must be in the same one."""
  code = currency_of(v)
  if key not in t:
    held = {w.currency for w in ctx.state(S).wallets}
    if code is not None and code not in held:
      raise AuthoringError("no_wallet_in", code)
    t[key] = _wallet(ctx, code or ctx.choice(CENT_WALLETS))
  if code not in (None, t[key]["currency"]):
    raise AuthoringError("currency_mismatch", f"{code} into {t[key]['currency']}")
  return t[key]


def _check_amount(ctx: AuthorContext, v: Value, code: str) -> float:
  """What a wallet takes: a positive amount with no more decimals than its currency has."""
  amount = float(v.value)
  decimals = ctx.state(S).currencies.get(code).decimals
  if not 0.01 <= amount <= 1e12 or round(amount, decimals) != amount:
    raise AuthoringError("fx_amount_out_of_range", f"{v.value} {code}")
  return amount


def _known(t: dict, key: str, field: str) -> list[dict]:
  """A condition on the wallet once ``act`` has chosen it (the reference alone is unique)."""
  return [where(field, t[key]["id"])] if key in t else []


def _deposit(ctx: AuthorContext, t: dict, v: Value) -> None:
  wallet = _wallet_for(ctx, t, v)
  amount = _check_amount(ctx, v, wallet["currency"])
  ctx.call(S, "deposit", wallet_id=wallet["id"], amount=amount, reference=t["reference"])


def _deposit_text(ctx: AuthorContext, t: dict, v: Value) -> str:
  code = t["wallet"]["currency"]
  return f'{v.label} is deposited in the {code} wallet ("{t["reference"]}").'


def _recorded(ctx: AuthorContext, kind: str, *conds: dict) -> dict:
  """A rubric condition: the agent recorded a ``kind`` of money movement that meets ``conds``."""
  return exists(S, "transfers", where("kind", kind), *conds, since(ctx, S, "at"))


def _deposit_check(ctx: AuthorContext, t: dict, v: Value) -> dict:
  return _recorded(
    ctx,
    "deposit",
    *_known(t, "wallet", "to_wallet_id"),
    where("reference", t["reference"]),
    amount_is("amount", float(v.value)),
  )


def _deposit_phrase(t: dict, what: str) -> str:
  return f'{what} into our {t["wallet"]["currency"]} wallet with the reference "{t["reference"]}"'


facets.sink(
  S,
  "money",
  "deposit_amount",
  total="deposit_total",
  prepare=lambda ctx: {"reference": f"{topic(ctx)} receipts"},
  act=_deposit,
  check=_deposit_check,
  phrase=lambda ctx, t, obj: _deposit_phrase(t, f"deposit {obj}"),
  total_phrase=lambda ctx, t, obj: _deposit_phrase(t, f"make one deposit of {obj}"),
  text=_deposit_text,
)


def _transfer(ctx: AuthorContext, t: dict, v: Value) -> None:
  """Funds another wallet from the one the amount is in (USD if the amount names none)."""
  if "source" not in t and currency_of(v) is None:
    t["source"] = _wallet(ctx, "USD")
  source = _wallet_for(ctx, t, v, "source")
  if "target" not in t:
    t["target"] = _wallet(ctx, ctx.choice([c for c in CENT_WALLETS if c != source["currency"]]))
  amount = _check_amount(ctx, v, source["currency"])
  if amount > ctx.state(S).wallets.get(source["id"]).balance:
    raise AuthoringError("transfer_exceeds_balance", str(amount))
  ctx.call(
    S,
    "transfer_between_wallets",
    from_wallet_id=source["id"],
    to_wallet_id=t["target"]["id"],
    amount=amount,
    reference=t["reference"],
  )


facets.sink(
  S,
  "money",
  "fund_wallet",
  prepare=lambda ctx: {"reference": f"{topic(ctx)} funding"},
  act=_transfer,
  check=lambda ctx, t, v: _recorded(
    ctx,
    "transfer",
    *_known(t, "source", "from_wallet_id"),
    *_known(t, "target", "to_wallet_id"),
    where("reference", t["reference"]),
    amount_is("amount", float(v.value)),
  ),
  phrase=lambda ctx, t, obj: (
    f"move {obj} from our {t['source']['currency']} wallet to our "
    f'{t["target"]["currency"]} wallet with the reference "{t["reference"]}"'
  ),
  text=lambda ctx, t, v: (
    f"{v.label} moved from the {t['source']['currency']} to the {t['target']['currency']} wallet."
  ),
)


def _receipt_target(ctx: AuthorContext) -> dict:
  code = ctx.choice(CENT_WALLETS)
  return {
    "wallet": _wallet(ctx, code),
    "code": code,
    "customer": ctx.choice(world(ctx.env.seed).customers).name,
    "amount": float(round(ctx.rng.uniform(1500, 15000), 2)),
  }


def _deposit_under(ctx: AuthorContext, t: dict, v: Value) -> None:
  if not str(v.value).strip():
    raise AuthoringError("empty_reference")
  ctx.call(S, "deposit", wallet_id=t["wallet"]["id"], amount=t["amount"], reference=str(v.value))


facets.sink(
  S,
  "reference",
  "deposit_under_reference",
  prepare=_receipt_target,
  act=_deposit_under,
  check=lambda ctx, t, v: _recorded(
    ctx,
    "deposit",
    where("to_wallet_id", t["wallet"]["id"]),
    where("reference", str(v.value)),
    amount_is("amount", t["amount"]),
  ),
  phrase=lambda ctx, t, obj: (
    f"record the {t['amount']:,.2f} {t['code']} payment from {t['customer']} as a deposit "
    f"into our {t['code']} wallet, with {obj} as its reference"
  ),
  text=lambda ctx, t, v: f"The {t['customer']} payment is deposited under {v.label}.",
  single=True,
)


# --- revisit: a wallet's balance before and after a deposit ------------------------------


def _balance_first(ctx: AuthorContext) -> tuple[Found, dict]:
  code = ctx.choice(CENT_WALLETS)
  wallet = ctx.call(S, "get_wallet", wallet_id=_wallet(ctx, code)["id"])
  t = {"wallet": wallet, "code": code, "reference": f"{topic(ctx)} top-up"}
  found = found_money(
    f"the current balance of our {code} wallet", [money(wallet["balance"], code)], code
  )
  return found, t


def _balance_second(ctx: AuthorContext, t: dict) -> Found:
  wallet = ctx.call(S, "get_wallet", wallet_id=t["wallet"]["id"])
  return found_money(
    f"the new balance of our {t['code']} wallet",
    [money(wallet["balance"], t["code"])],
    stale=t["wallet"]["balance"],
    currency=t["code"],
  )


facets.revisit(
  S,
  kind="money",
  kind_in="money",
  kind_after="money",
  name="wallet_balance_after_deposit",
  first=_balance_first,
  second=_balance_second,
  change="top_up_wallet",
  act=_deposit,
  check=_deposit_check,
  phrase=lambda ctx, t, obj: (
    f'deposit {obj} into that wallet with the reference "{t["reference"]}"'
  ),
  text=_deposit_text,
)
