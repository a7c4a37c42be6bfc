"""FX: currency rates and multi-currency wallets, like Wise Business or Revolut Business.

The service publishes one daily reference rate per currency against the US dollar for the 30
days up to today (a plausible random walk around real-world levels); a rate between two other
currencies is crossed through the dollar. The company holds wallets (balances) in some
currencies, one wallet per currency: it deposits into them and moves money between them at the
day's rate. Every deposit and transfer is recorded with the rate used and the converted amount.
Rate alerts watch a currency pair and fire when its latest rate is above or below a threshold.

Rules a treasury user expects: currency codes must exist (404); a date outside the 30 published
days has no rate (404 naming the date and the available range); amounts are positive and have no
more decimals than the currency allows (JPY has none); a transfer needs two different wallets
and at most the source wallet's balance; there is one wallet per currency; an alert watches two
different currencies and the same alert is not created twice.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta
from typing import Annotated, Literal

from pydantic import Field

from compoworld import Conflict, InvalidArgument, NotFound, Service, registry, tool
from compoworld.runtime.query import select
from compoworld.runtime.state import Record, ServiceState, Table
from envs._world import seeded, world

Code = Annotated[str, Field(min_length=3, max_length=3, description="An ISO 4217 code.")]
Amount = Annotated[float, Field(gt=0, le=1e12, description="An amount of money, above zero.")]
Direction = Literal["above", "below"]

#: (code, name, symbol, decimals, units per USD around the service's start date)
CURRENCIES = (
  ("USD", "US Dollar", "$", 2, 1.0),
  ("EUR", "Euro", "€", 2, 0.92),
  ("GBP", "Pound Sterling", "£", 2, 0.79),
  ("CAD", "Canadian Dollar", "C$", 2, 1.36),
  ("JPY", "Japanese Yen", "¥", 0, 150.2),
  ("AUD", "Australian Dollar", "A$", 2, 1.52),
  ("CHF", "Swiss Franc", "CHF", 2, 0.88),
  ("NOK", "Norwegian Krone", "kr", 2, 10.6),
  ("SEK", "Swedish Krona", "kr", 2, 10.4),
  ("MXN", "Mexican Peso", "MX$", 2, 17.1),
)
RATE_DAYS = 30
#: Wallets the company holds at the start, with a typical balance in their own currency.
WALLETS = (("USD", 250000), ("EUR", 80000), ("GBP", 40000), ("CAD", 60000), ("JPY", 3000000))


class Currency(Record):
  id: str  # the ISO code
  name: str
  symbol: str
  decimals: int


class Rate(Record):
  id: str  # "<CODE>@<YYYY-MM-DD>"
  currency: str
  date: date
  per_usd: float  # units of the currency one US dollar buys


class Wallet(Record):
  currency: str
  label: str
  balance: float
  opened_at: datetime


class Transfer(Record):
  kind: Literal["deposit", "transfer"]
  from_wallet_id: str | None = None  # None for a deposit
  to_wallet_id: str
  amount: float  # in the source currency (the target's for a deposit)
  from_currency: str
  to_currency: str
  rate: float  # target units per source unit
  converted_amount: float
  reference: str = ""
  at: datetime


class RateAlert(Record):
  base: str
  quote: str
  direction: Direction
  threshold: float
  created_at: datetime


class FxState(ServiceState):
  currencies: Table[Currency]
  rates: Table[Rate]
  wallets: Table[Wallet]
  transfers: Table[Transfer]
  alerts: Table[RateAlert]


def rate_id(code: str, day: date) -> str:
  return f"{code}@{day.isoformat()}"


@registry.register
class FxService(Service):
  name = "fx"
  domain = "finance"
  description = "Daily currency rates, conversions, multi-currency wallets, transfers and alerts."
  State = FxState

  @classmethod
  def generate(cls, seed: int, size: int | None) -> FxState:
    rng, w, state = seeded(cls, seed)
    today = state.now.date()
    for code, name, symbol, decimals, level in CURRENCIES:
      state.currencies.insert(Currency(id=code, name=name, symbol=symbol, decimals=decimals))
      # A random walk backwards from a level near today's real one: about 0.4% a day.
      value = level * rng.uniform(0.97, 1.03)
      for back in range(RATE_DAYS):
        day = today - timedelta(days=back)
        per_usd = 1.0 if code == "USD" else round(value, 6)
        state.rates.insert(Rate(id=rate_id(code, day), currency=code, date=day, per_usd=per_usd))
        value *= 1 + rng.gauss(0, 0.004)
    svc = cls(state)
    start = datetime.combine(today - timedelta(days=RATE_DAYS - 1), datetime.min.time())
    for code, level in WALLETS:
      state.wallets.insert(
        Wallet(
          id=state.new_id("wal"),
          currency=code,
          label=f"{w.company} {code}",
          balance=float(round(level * rng.uniform(0.6, 1.4), -2)),
          opened_at=start - timedelta(days=rng.randint(200, 900)),
        )
      )
    wallets = list(state.wallets)
    n = size if size is not None else 20
    moments = sorted(
      start + timedelta(days=rng.randint(0, RATE_DAYS - 2), hours=rng.randint(8, 18))
      for _ in range(n)
    )
    for at in moments:
      if rng.random() < 0.3:
        target = rng.choice(wallets)
        amount = float(round(rng.uniform(0.02, 0.2) * dict(WALLETS)[target.currency], -1))
        customer = rng.choice(w.customers).name
        svc._move(None, target.id, amount, at, f"Payment from {customer}")
      else:
        source, target = rng.sample(wallets, 2)
        balance = state.wallets.get(source.id).balance
        amount = float(round(balance * rng.uniform(0.02, 0.15), -1))
        if amount > 0:
          svc._move(source.id, target.id, amount, at, rng.choice(("Supplier payment", "Payroll")))
    # Alerts a treasurer watches: some already past their threshold, some not.
    for base, quote, direction, factor in (
      ("USD", "EUR", "above", 0.99),
      ("GBP", "USD", "below", 0.97),
      ("USD", "JPY", "above", 1.03),
      ("EUR", "CAD", "below", 1.01),
    ):
      latest = svc._rate(base, quote, today)
      state.alerts.insert(
        RateAlert(
          id=state.new_id("alr"),
          base=base,
          quote=quote,
          direction=direction,
          threshold=round(latest * factor, 4),
          created_at=start + timedelta(days=rng.randint(0, 20)),
        )
      )
    return state

  # --- helpers -----------------------------------------------------------------------------

  def _currency(self, code: str) -> Currency:
    return self.state.currencies.get(code.upper())

  def _per_usd(self, code: str, day: date) -> float:
    rate = self.state.rates.find(rate_id(code, day))
    if rate is None:
      first = self.state.now.date() - timedelta(days=RATE_DAYS - 1)
      last = self.state.now.date()
      raise NotFound(
        f"no {code} rate on {day.isoformat()}; rates are published for {first.isoformat()} "
        f"to {last.isoformat()}"
      )
    return rate.per_usd

  def _rate(self, base: str, quote: str, day: date | None = None) -> float:
    """Units of ``quote`` one unit of ``base`` buys on ``day`` (crossed through USD)."""
    day = day or self.state.now.date()
    b, q = self._currency(base).id, self._currency(quote).id
    return round(self._per_usd(q, day) / self._per_usd(b, day), 6)

  def _check_amount(self, amount: float, code: str, argument: str = "amount") -> float:
    decimals = self._currency(code).decimals
    if round(amount, decimals) != amount:
      raise InvalidArgument(
        f"{argument} {amount} has more than {decimals} decimals, the most {code} allows"
      )
    return amount

  def _move(self, from_id: str | None, to_id: str, amount: float, at: datetime, reference: str):
    target = self.state.wallets.get(to_id)
    if from_id is None:
      source_currency, rate = target.currency, 1.0
    else:
      source = self.state.wallets.get(from_id)
      source_currency = source.currency
      rate = self._rate(source.currency, target.currency, at.date())
      self.state.wallets.update(source.id, balance=round(source.balance - amount, 2))
    decimals = self._currency(target.currency).decimals
    converted = round(amount * rate, decimals)
    self.state.wallets.update(target.id, balance=round(target.balance + converted, decimals))
    return self.state.transfers.insert(
      Transfer(
        id=self.state.new_id("trf"),
        kind="deposit" if from_id is None else "transfer",
        from_wallet_id=from_id,
        to_wallet_id=target.id,
        amount=amount,
        from_currency=source_currency,
        to_currency=target.currency,
        rate=rate,
        converted_amount=converted,
        reference=reference,
        at=at,
      )
    )

  def _alert_view(self, alert: RateAlert) -> dict:
    latest = self._rate(alert.base, alert.quote)
    hit = latest > alert.threshold if alert.direction == "above" else latest < alert.threshold
    return {**alert.model_dump(), "latest_rate": latest, "triggered": hit}

  # --- reads -------------------------------------------------------------------------------

  @tool(mutates=False, produces=("currency",))
  def list_currencies(self) -> list[dict]:
    """List supported currencies with their latest rate per US dollar."""
    today = self.state.now.date()
    return [
      {**c.model_dump(), "per_usd": self._per_usd(c.id, today)}
      for c in sorted(self.state.currencies, key=lambda c: c.id)
    ]

  @tool(mutates=False, consumes=("currency", "date"), produces=("percentage",))
  def get_rate(self, base: Code, quote: Code, date: date | None = None) -> dict:
    """The exchange rate of a pair on a day: how many units of quote one unit of base buys.

    Args:
      base: the currency sold, e.g. "USD".
      quote: the currency bought, e.g. "EUR".
      date: the day (YYYY-MM-DD), within the last 30 days; today if omitted.
    """
    day = date or self.state.now.date()
    rate = self._rate(base, quote, day)
    return {"base": base.upper(), "quote": quote.upper(), "date": day, "rate": rate}

  @tool(mutates=False, consumes=("money", "currency", "date"), produces=("money",))
  def convert(
    self, amount: Amount, from_currency: Code, to_currency: Code, date: date | None = None
  ) -> dict:
    """Convert an amount between currencies at a day's rate (nothing is moved).

    Args:
      amount: the amount in from_currency.
      from_currency: the currency of the amount.
      to_currency: the currency to convert into.
      date: the day whose rate to use (YYYY-MM-DD), within the last 30 days; today if omitted.
    """
    day = date or self.state.now.date()
    rate = self._rate(from_currency, to_currency, day)
    decimals = self._currency(to_currency).decimals
    return {
      "amount": amount,
      "from_currency": from_currency.upper(),
      "to_currency": to_currency.upper(),
      "date": day,
      "rate": rate,
      "converted_amount": round(amount * rate, decimals),
    }

  @tool(mutates=False, consumes=("currency", "date"), produces=("percentage", "date"))
  def rate_history(
    self, base: Code, quote: Code, start_date: date | None = None, end_date: date | None = None
  ) -> dict:
    """Daily rates of a pair over a range, oldest first, with the low, high and change.

    Args:
      base: the currency sold.
      quote: the currency bought.
      start_date: the first day (YYYY-MM-DD); 30 days ago if omitted.
      end_date: the last day (YYYY-MM-DD); today if omitted.
    """
    last = end_date or self.state.now.date()
    first = start_date or self.state.now.date() - timedelta(days=RATE_DAYS - 1)
    if last < first:
      raise InvalidArgument(f"end_date ({last}) must not be before start_date ({first})")
    points = [
      {
        "date": first + timedelta(days=d),
        "rate": self._rate(base, quote, first + timedelta(days=d)),
      }
      for d in range((last - first).days + 1)
    ]
    rates = [p["rate"] for p in points]
    return {
      "base": base.upper(),
      "quote": quote.upper(),
      "points": points,
      "low": min(rates),
      "high": max(rates),
      "change_pct": round((rates[-1] / rates[0] - 1) * 100, 3),
    }

  @tool(mutates=False, page="wallet", produces=("wallet.id", "currency", "money"))
  def list_wallets(self, currency: Code | None = None) -> list:
    """List the company's wallets with their balances, by currency.

    Args:
      currency: only the wallet in this currency.
    """
    code = self._currency(currency).id if currency else None
    return select(self.state.wallets, eq={"currency": code}, key=lambda w: (w.currency, w.id))

  @tool(mutates=False, consumes=("wallet.id",), produces=("money", "currency"))
  def get_wallet(self, wallet_id: str) -> dict:
    """Get one wallet with its balance and its value in US dollars at today's rate.

    Args:
      wallet_id: the wallet's id.
    """
    wallet = self.state.wallets.get(wallet_id)
    usd = round(wallet.balance * self._rate(wallet.currency, "USD"), 2)
    return {**wallet.model_dump(), "usd_value": usd}

  @tool(mutates=False, page="movement", produces=("transfer.id", "money", "datetime"))
  def list_transfers(
    self, wallet_id: str | None = None, kind: Literal["deposit", "transfer"] | None = None
  ) -> list:
    """List deposits and transfers, newest first.

    Args:
      wallet_id: only movements into or out of this wallet.
      kind: only "deposit"s or only "transfer"s.
    """
    self.state.wallets.check(wallet_id)
    return select(
      self.state.transfers,
      eq={"kind": kind},
      where=lambda t: wallet_id is None or wallet_id in (t.from_wallet_id, t.to_wallet_id),
      key=lambda t: (t.at, t.id),
      reverse=True,
    )

  @tool(mutates=False, page="alert", produces=("alert.id", "percentage"))
  def list_rate_alerts(self, triggered: bool | None = None) -> list:
    """List rate alerts, oldest first, with the pair's latest rate and whether the alert has
    fired.

    Args:
      triggered: true for only alerts that have fired, false for only those that have not.
    """
    alerts = sorted(self.state.alerts, key=lambda a: (a.created_at, a.id))
    views = [self._alert_view(a) for a in alerts]
    return [v for v in views if triggered is None or v["triggered"] == triggered]

  # --- writes ------------------------------------------------------------------------------

  @tool(mutates=True, consumes=("currency",), produces=("wallet.id",))
  def open_wallet(self, currency: Code, label: str = "") -> Wallet:
    """Open an empty wallet in a currency the company holds no wallet in yet.

    Args:
      currency: the wallet's currency.
      label: a name for the wallet.
    """
    code = self._currency(currency).id
    existing = self.state.wallets.find_by(currency=code)
    if existing is not None:
      raise Conflict(f"a {code} wallet already exists ({existing.id}); one wallet per currency")
    return self.state.wallets.insert(
      Wallet(
        id=self.state.new_id("wal"),
        currency=code,
        label=label or f"{world(self.state.seed).company} {code}",
        balance=0.0,
        opened_at=self.state.now,
      )
    )

  @tool(mutates=True, consumes=("wallet.id", "money", "reference"), produces=("transfer.id",))
  def deposit(self, wallet_id: str, amount: Amount, reference: str = "") -> dict:
    """Pay money into a wallet, in the wallet's currency.

    Args:
      wallet_id: the wallet's id.
      amount: the amount, in the wallet's currency.
      reference: where the money comes from (an invoice or payment reference).
    """
    wallet = self.state.wallets.get(wallet_id)
    self._check_amount(amount, wallet.currency)
    record = self._move(None, wallet.id, amount, self.state.now, reference)
    return {"transfer": record, "wallet": self.state.wallets.get(wallet.id)}

  @tool(mutates=True, consumes=("wallet.id", "money"), produces=("transfer.id", "money"))
  def transfer_between_wallets(
    self, from_wallet_id: str, to_wallet_id: str, amount: Amount, reference: str = ""
  ) -> dict:
    """Move money from one wallet to another, converted at today's rate.

    Args:
      from_wallet_id: the wallet the money leaves.
      to_wallet_id: the wallet the money arrives in.
      amount: the amount taken from the source wallet, in its currency.
      reference: what the transfer is for.
    """
    if from_wallet_id == to_wallet_id:
      raise InvalidArgument("from_wallet_id and to_wallet_id are the same wallet; pick two")
    source = self.state.wallets.get(from_wallet_id)
    self.state.wallets.get(to_wallet_id)
    self._check_amount(amount, source.currency)
    if amount > source.balance:
      raise Conflict(
        f"wallet {source.id} holds {source.balance} {source.currency}, less than {amount}; "
        "deposit or transfer less"
      )
    record = self._move(source.id, to_wallet_id, amount, self.state.now, reference)
    return {
      "transfer": record,
      "from_wallet": self.state.wallets.get(source.id),
      "to_wallet": self.state.wallets.get(to_wallet_id),
    }

  @tool(mutates=True, consumes=("currency", "percentage"), produces=("alert.id",))
  def create_rate_alert(
    self,
    base: Code,
    quote: Code,
    direction: Direction,
    threshold: Annotated[float, Field(gt=0)],
  ) -> dict:
    """Watch a pair: the alert fires while its latest rate is above (or below) a threshold.

    Args:
      base: the currency sold.
      quote: the currency bought.
      direction: "above" or "below".
      threshold: the rate (units of quote per unit of base) that fires the alert.
    """
    b, q = self._currency(base).id, self._currency(quote).id
    if b == q:
      raise InvalidArgument(f"base and quote are both {b}; an alert watches two currencies")
    same = next(
      (
        a
        for a in self.state.alerts
        if (a.base, a.quote, a.direction, a.threshold) == (b, q, direction, threshold)
      ),
      None,
    )
    if same is not None:
      raise Conflict(f"alert {same.id} already watches {b}/{q} {direction} {threshold}")
    alert = self.state.alerts.insert(
      RateAlert(
        id=self.state.new_id("alr"),
        base=b,
        quote=q,
        direction=direction,
        threshold=threshold,
        created_at=self.state.now,
      )
    )
    return self._alert_view(alert)

  @tool(mutates=True, consumes=("alert.id",))
  def delete_rate_alert(self, alert_id: str) -> RateAlert:
    """Delete a rate alert.

    Args:
      alert_id: the alert's id.
    """
    return self.state.alerts.delete(alert_id)
