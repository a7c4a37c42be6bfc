import itertools
from datetime import date, timedelta

import pytest

from envs.fx import RATE_DAYS, FxService, rate_id
from tests.contract import call_fails, call_ok

TODAY = date(2026, 3, 2)


@pytest.fixture
def fx():
  return FxService.create(seed=3)


def wallet(svc, code):
  return next(w for w in svc.state.wallets if w.currency == code)


def per_usd(svc, code, day=TODAY):
  return svc.state.rates.get(rate_id(code, day)).per_usd


def test_seeded_data_is_sized():
  a = FxService.create(seed=5)
  assert len(a.state.transfers) == 20
  assert len(FxService.create(seed=5, size=60).state.transfers) == 60
  codes = a.state.currencies.ids()
  assert {"USD", "EUR", "GBP", "CAD", "JPY", "AUD", "CHF"} <= set(codes)
  assert len(a.state.rates) == RATE_DAYS * len(codes)
  for code in codes:
    series = [per_usd(a, code, TODAY - timedelta(days=d)) for d in range(RATE_DAYS)]
    steps = [abs(x / y - 1) for x, y in itertools.pairwise(series)]
    assert max(steps) < 0.03  # a plausible daily move
  assert 0.8 < per_usd(a, "EUR") < 1.05 and 130 < per_usd(a, "JPY") < 170
  assert all(w.balance >= 0 for w in a.state.wallets)
  assert len({w.currency for w in a.state.wallets}) == len(a.state.wallets)
  for t in a.state.transfers:
    assert t.converted_amount == round(t.amount * t.rate, 0 if t.to_currency == "JPY" else 2)


def test_rates_conversion_and_history(fx):
  cur = call_ok(fx, "list_currencies")
  assert [c["id"] for c in cur] == sorted(c["id"] for c in cur)
  jpy = next(c for c in cur if c["id"] == "JPY")
  assert jpy["decimals"] == 0 and jpy["per_usd"] == per_usd(fx, "JPY")
  got = call_ok(fx, "get_rate", {"base": "usd", "quote": "EUR"})
  assert got["rate"] == round(per_usd(fx, "EUR"), 6) and got["date"] == TODAY.isoformat()
  day = TODAY - timedelta(days=10)
  cross = call_ok(fx, "get_rate", {"base": "GBP", "quote": "CAD", "date": day.isoformat()})
  assert cross["rate"] == round(per_usd(fx, "CAD", day) / per_usd(fx, "GBP", day), 6)
  conv = call_ok(fx, "convert", {"amount": 1000, "from_currency": "EUR", "to_currency": "JPY"})
  assert conv["converted_amount"] == round(1000 * conv["rate"])
  back = call_ok(
    fx,
    "convert",
    {"amount": 250.5, "from_currency": "USD", "to_currency": "GBP", "date": day.isoformat()},
  )
  assert back["converted_amount"] == round(250.5 * per_usd(fx, "GBP", day), 2)
  hist = call_ok(fx, "rate_history", {"base": "USD", "quote": "CHF"})
  assert len(hist["points"]) == RATE_DAYS and hist["points"][-1]["date"] == TODAY.isoformat()
  rates = [p["rate"] for p in hist["points"]]
  assert hist["low"] == min(rates) and hist["high"] == max(rates)
  assert hist["change_pct"] == round((rates[-1] / rates[0] - 1) * 100, 3)
  week = call_ok(
    fx,
    "rate_history",
    {"base": "EUR", "quote": "USD", "start_date": "2026-02-20", "end_date": "2026-02-26"},
  )
  assert week["points"][0]["date"] == "2026-02-20" and len(week["points"]) == 7


def test_wallets_transfers_and_deposits(fx):
  page = call_ok(fx, "list_wallets", {})
  assert page["total"] == len(fx.state.wallets)
  usd, eur = wallet(fx, "USD"), wallet(fx, "EUR")
  only = call_ok(fx, "list_wallets", {"currency": "eur"})["items"]
  assert [w["id"] for w in only] == [eur.id]
  got = call_ok(fx, "get_wallet", {"wallet_id": eur.id})
  assert got["usd_value"] == round(eur.balance * round(1 / per_usd(fx, "EUR"), 6), 2)
  moved = call_ok(
    fx,
    "transfer_between_wallets",
    {"from_wallet_id": usd.id, "to_wallet_id": eur.id, "amount": 1000, "reference": "Rent"},
  )
  rate = round(per_usd(fx, "EUR"), 6)
  record = moved["transfer"]
  assert record["rate"] == rate and record["converted_amount"] == round(1000 * rate, 2)
  assert fx.state.wallets.get(usd.id).balance == round(usd.balance - 1000, 2)
  assert fx.state.wallets.get(eur.id).balance == round(eur.balance + 1000 * rate, 2)
  assert moved["to_wallet"]["balance"] == fx.state.wallets.get(eur.id).balance
  dep = call_ok(fx, "deposit", {"wallet_id": usd.id, "amount": 99.99, "reference": "INV-1042"})
  assert dep["transfer"]["kind"] == "deposit" and dep["transfer"]["from_wallet_id"] is None
  assert dep["wallet"]["balance"] == round(usd.balance - 1000 + 99.99, 2)
  mine = call_ok(fx, "list_transfers", {"wallet_id": usd.id, "limit": 2})["items"]
  assert [t["id"] for t in mine] == [dep["transfer"]["id"], record["id"]]
  deposits = call_ok(fx, "list_transfers", {"kind": "deposit", "limit": 100})["items"]
  assert deposits and all(t["kind"] == "deposit" for t in deposits)
  missing = next(
    c for c in fx.state.currencies.ids() if c not in {w.currency for w in fx.state.wallets}
  )
  opened = call_ok(fx, "open_wallet", {"currency": missing.lower(), "label": "Ops"})
  assert opened["currency"] == missing and opened["balance"] == 0 and opened["label"] == "Ops"
  assert opened["id"] in fx.state.wallets


def test_rate_alerts(fx):
  alerts = call_ok(fx, "list_rate_alerts", {})["items"]
  assert alerts and {a["triggered"] for a in alerts} == {True, False}
  fired = call_ok(fx, "list_rate_alerts", {"triggered": True})["items"]
  assert fired and all(a["triggered"] for a in fired)
  latest = round(per_usd(fx, "AUD"), 6)
  made = call_ok(
    fx,
    "create_rate_alert",
    {"base": "usd", "quote": "aud", "direction": "below", "threshold": latest + 0.1},
  )
  assert made["base"] == "USD" and made["triggered"] and made["latest_rate"] == latest
  assert made["id"] in fx.state.alerts
  gone = call_ok(fx, "delete_rate_alert", {"alert_id": made["id"]})
  assert gone["id"] == made["id"] and made["id"] not in fx.state.alerts


def test_error_paths_are_atomic(fx):
  usd, jpy = wallet(fx, "USD"), wallet(fx, "JPY")
  alert = next(iter(fx.state.alerts))
  # missing, ill-typed and out-of-range arguments
  call_fails(fx, "get_rate", {"base": "USD"}, 400, "quote")
  call_fails(fx, "get_rate", {"base": "USD", "quote": "EURO"}, 400, "quote")
  call_fails(fx, "get_rate", {"base": "USD", "quote": "EUR", "date": "soon"}, 400, "date")
  call_fails(fx, "convert", {"amount": 0, "from_currency": "USD", "to_currency": "EUR"}, 400)
  call_fails(fx, "convert", {"amount": -5, "from_currency": "USD", "to_currency": "EUR"}, 400)
  call_fails(
    fx,
    "rate_history",
    {"base": "USD", "quote": "EUR", "start_date": "2026-02-20", "end_date": "2026-02-10"},
    400,
    "end_date",
  )
  call_fails(fx, "list_transfers", {"kind": "refund"}, 400, "kind")
  call_fails(fx, "deposit", {"wallet_id": usd.id, "amount": 0}, 400, "amount")
  call_fails(fx, "deposit", {"wallet_id": usd.id, "amount": 10.555}, 400, "decimals")
  call_fails(fx, "deposit", {"wallet_id": jpy.id, "amount": 10.5}, 400, "JPY")
  same = {"from_wallet_id": usd.id, "to_wallet_id": usd.id, "amount": 5}
  call_fails(fx, "transfer_between_wallets", same, 400, "same wallet")
  call_fails(
    fx,
    "create_rate_alert",
    {"base": "EUR", "quote": "eur", "direction": "above", "threshold": 1},
    400,
    "both EUR",
  )
  call_fails(
    fx,
    "create_rate_alert",
    {"base": "EUR", "quote": "USD", "direction": "sideways", "threshold": 1},
    400,
    "direction",
  )
  call_fails(
    fx,
    "create_rate_alert",
    {"base": "EUR", "quote": "USD", "direction": "above", "threshold": 0},
    400,
    "threshold",
  )
  # unknown currencies, dates and ids
  call_fails(fx, "get_rate", {"base": "USD", "quote": "XYZ"}, 404, "XYZ")
  call_fails(
    fx,
    "get_rate",
    {"base": "USD", "quote": "EUR", "date": "2026-01-15"},
    404,
    "2026-01-15",
    "2026-02-01",
    "2026-03-02",
  )
  call_fails(fx, "convert", {"amount": 5, "from_currency": "ABC", "to_currency": "EUR"}, 404, "ABC")
  call_fails(
    fx,
    "convert",
    {"amount": 5, "from_currency": "USD", "to_currency": "EUR", "date": "2026-03-09"},
    404,
    "2026-03-09",
  )
  call_fails(
    fx,
    "rate_history",
    {"base": "USD", "quote": "EUR", "start_date": "2026-01-01"},
    404,
    "2026-01-01",
  )
  call_fails(fx, "rate_history", {"base": "QQQ", "quote": "EUR"}, 404, "QQQ")
  call_fails(fx, "list_wallets", {"currency": "XYZ"}, 404, "XYZ")
  call_fails(fx, "get_wallet", {"wallet_id": "wal_x"}, 404, "wal_x")
  call_fails(fx, "list_transfers", {"wallet_id": "wal_x"}, 404, "wal_x")
  call_fails(fx, "open_wallet", {"currency": "XYZ"}, 404, "XYZ")
  call_fails(fx, "deposit", {"wallet_id": "wal_x", "amount": 5}, 404, "wal_x")
  call_fails(
    fx,
    "transfer_between_wallets",
    {"from_wallet_id": "wal_x", "to_wallet_id": usd.id, "amount": 5},
    404,
    "wal_x",
  )
  call_fails(
    fx,
    "transfer_between_wallets",
    {"from_wallet_id": usd.id, "to_wallet_id": "wal_y", "amount": 5},
    404,
    "wal_y",
  )
  call_fails(
    fx,
    "create_rate_alert",
    {"base": "USD", "quote": "XYZ", "direction": "above", "threshold": 1},
    404,
    "XYZ",
  )
  call_fails(fx, "delete_rate_alert", {"alert_id": "alr_x"}, 404, "alr_x")
  # business rules
  too_much = {"from_wallet_id": usd.id, "to_wallet_id": jpy.id, "amount": usd.balance + 1}
  call_fails(fx, "transfer_between_wallets", too_much, 409, "holds")
  call_fails(fx, "open_wallet", {"currency": "usd"}, 409, "already exists", usd.id)
  dup = {
    "base": alert.base,
    "quote": alert.quote,
    "direction": alert.direction,
    "threshold": alert.threshold,
  }
  call_fails(fx, "create_rate_alert", dup, 409, alert.id)
