import pytest

from envs.ledger import LedgerService
from tests.contract import call_fails, call_ok


@pytest.fixture
def gl():
  return LedgerService.create(seed=3)


def lines(amount=100.0, debit="6300", credit="1000"):
  return [{"account": debit, "debit": amount}, {"account": credit, "credit": amount}]


def entry(**over):
  return {"date": "2026-02-20", "memo": "Team dinner", "lines": lines(), **over}


def test_seeded_data_is_sized():
  a = LedgerService.create(seed=5)
  assert 40 <= len(a.state.entries) <= 43
  assert 120 <= len(LedgerService.create(seed=5, size=120).state.entries) <= 123
  for e in a.state.entries:
    assert len(e.lines) >= 2
    assert round(sum(li.debit for li in e.lines), 2) == round(sum(li.credit for li in e.lines), 2)
    assert all(li.account in a.state.accounts for li in e.lines)
  periods = {p.id: p.status for p in a.state.periods}
  assert periods["2026-01"] == "closed" and periods["2026-02"] == "open"
  assert periods["2025-01"] == "closed" and periods["2026-03"] == "open"
  reversed_ = [e for e in a.state.entries if e.status == "reversed"]
  assert len(reversed_) == 1
  assert a.state.entries.get(reversed_[0].reversed_by).reversal_of == reversed_[0].id


def test_accounts_balances_and_trial_balance(gl):
  page = call_ok(gl, "list_accounts", {"limit": 100})
  codes = [a["id"] for a in page["items"]]
  assert codes == sorted(codes) and "1000" in codes
  assert call_ok(gl, "list_accounts", {})["total"] == page["total"]
  revenue = call_ok(gl, "list_accounts", {"type": "revenue"})["items"]
  assert revenue and all(
    a["type"] == "revenue" and a["normal_balance"] == "credit" for a in revenue
  )
  assert call_ok(gl, "list_accounts", {"query": "cash"})["items"][0]["id"] == "1000"
  cash = call_ok(gl, "get_account_balance", {"account_code": "1000"})
  debits = sum(li.debit for e in gl.state.entries for li in e.lines if li.account == "1000")
  credits = sum(li.credit for e in gl.state.entries for li in e.lines if li.account == "1000")
  assert cash["balance"] == round(debits - credits, 2) and cash["debits"] == round(debits, 2)
  opening = call_ok(gl, "get_account_balance", {"account_code": "1000", "as_of": "2025-01-01"})
  assert opening["balance"] == 250000.0
  stock = call_ok(gl, "get_account_balance", {"account_code": "3000"})
  assert stock["balance"] == 250000.0  # credit-normal: positive on its normal side
  tb = call_ok(gl, "trial_balance", {})
  assert tb["balanced"] and tb["total_debits"] == tb["total_credits"] > 0
  early = call_ok(gl, "trial_balance", {"as_of": "2025-01-31"})
  assert early["balanced"] and early["total_debits"] == 310000.0


def test_entries_and_periods_reads(gl):
  page = call_ok(gl, "list_entries", {"limit": 5})
  assert page["total"] == len(gl.state.entries)
  dates = [e["date"] for e in page["items"]]
  assert dates == sorted(dates, reverse=True)
  rent = call_ok(gl, "list_entries", {"account_code": "6100", "limit": 100})["items"]
  assert all(any(li["account"] == "6100" for li in e["lines"]) for e in rent)
  window = call_ok(
    gl, "list_entries", {"start_date": "2026-01-01", "end_date": "2026-01-31", "limit": 100}
  )["items"]
  assert window and all("2026-01-01" <= e["date"] <= "2026-01-31" for e in window)
  gone = call_ok(gl, "list_entries", {"status": "reversed"})["items"]
  assert len(gone) == 1
  assert call_ok(gl, "list_entries", {"query": "opening"})["items"][0]["reference"] == "OB-2025"
  got = call_ok(gl, "get_entry", {"entry_id": gone[0]["id"]})
  assert got == gone[0]
  periods = call_ok(gl, "list_periods", {"year": 2026, "limit": 100})["items"]
  assert [p["id"] for p in periods] == [f"2026-{m:02d}" for m in range(1, 13)]
  closed = call_ok(gl, "list_periods", {"status": "closed", "limit": 100})
  assert closed["total"] == 13 and all(p["status"] == "closed" for p in closed["items"])


def test_post_reverse_and_accounts(gl):
  before = call_ok(gl, "get_account_balance", {"account_code": "6300"})["balance"]
  posted = call_ok(gl, "post_journal_entry", entry(lines=lines(123.45), reference="RCPT-9"))
  assert posted["status"] == "posted" and posted["total"] == 123.45
  assert [li["id"] for li in posted["lines"]] == ["1", "2"]
  assert gl.state.entries.get(posted["id"]).reference == "RCPT-9"
  after = call_ok(gl, "get_account_balance", {"account_code": "6300"})["balance"]
  assert round(after - before, 2) == 123.45
  three = call_ok(
    gl,
    "post_journal_entry",
    entry(
      lines=[
        {"account": "6000", "debit": 1000},
        {"account": "1000", "credit": 760},
        {"account": "2300", "credit": 240, "description": "withholding"},
      ]
    ),
  )
  assert three["lines"][2]["description"] == "withholding"
  out = call_ok(gl, "reverse_entry", {"entry_id": posted["id"], "memo": "wrong account"})
  mirror, original = out["reversal"], out["original"]
  assert original["status"] == "reversed" and original["reversed_by"] == mirror["id"]
  assert mirror["reversal_of"] == posted["id"] and mirror["date"] == "2026-03-02"
  assert mirror["lines"][0]["credit"] == 123.45 and "wrong account" in mirror["memo"]
  assert call_ok(gl, "get_account_balance", {"account_code": "6300"})["balance"] == before
  assert call_ok(gl, "trial_balance", {})["balanced"]
  dated = call_ok(gl, "reverse_entry", {"entry_id": three["id"], "date": "2026-02-21"})
  assert dated["reversal"]["date"] == "2026-02-21"
  acct = call_ok(gl, "create_account", {"code": "6450", "name": "Conferences", "type": "expense"})
  assert acct["normal_balance"] == "debit" and "6450" in gl.state.accounts
  loan = call_ok(gl, "create_account", {"code": "2600", "name": "Credit line", "type": "liability"})
  assert loan["normal_balance"] == "credit"
  call_ok(gl, "post_journal_entry", entry(lines=lines(50, debit="6450")))
  assert call_ok(gl, "get_account_balance", {"account_code": "6450"})["balance"] == 50


def test_close_and_reopen_periods(gl):
  closed = call_ok(gl, "close_period", {"period": "2026-02"})
  assert closed["status"] == "closed" and closed["closed_at"]
  assert gl.state.periods.get("2026-02").status == "closed"
  call_fails(gl, "post_journal_entry", entry(), 409, "closed")
  call_fails(gl, "reopen_period", {"period": "2026-01"}, 409, "reopen 2026-02 first")
  reopened = call_ok(gl, "reopen_period", {"period": "2026-02"})
  assert reopened["status"] == "open" and reopened["closed_at"] is None
  call_ok(gl, "reopen_period", {"period": "2026-01"})
  call_fails(gl, "close_period", {"period": "2026-02"}, 409, "close 2026-01 first")
  call_ok(gl, "post_journal_entry", entry(date="2026-01-15"))


def test_error_paths_are_atomic(gl):
  reversed_ = next(e for e in gl.state.entries if e.status == "reversed")
  posted = next(e for e in gl.state.entries if e.reference == "OB-2025")  # dated 2025-01-01
  # missing, ill-typed and out-of-range arguments
  call_fails(gl, "get_entry", {}, 400, "entry_id")
  call_fails(gl, "get_account_balance", {"account_code": "cash"}, 400, "account_code")
  call_fails(gl, "list_entries", {"limit": 101}, 400, "limit")
  call_fails(gl, "list_entries", {"start_date": "2026-02-10", "end_date": "2026-02-01"}, 400)
  call_fails(gl, "list_accounts", {"type": "income"}, 400, "type")
  call_fails(gl, "close_period", {"period": "2026-13"}, 400, "period")
  call_fails(gl, "create_account", {"code": "64500", "name": "x", "type": "expense"}, 400)
  call_fails(gl, "post_journal_entry", entry(memo=""), 400, "memo")
  call_fails(gl, "post_journal_entry", entry(lines=lines()[:1]), 400, "at least two")
  both = [{"account": "6300", "debit": 5, "credit": 5}, {"account": "1000", "credit": 0}]
  call_fails(gl, "post_journal_entry", entry(lines=both), 400, "either a debit or a credit")
  call_fails(gl, "post_journal_entry", entry(lines=lines(10.555)), 400, "two decimals")
  call_fails(gl, "post_journal_entry", entry(lines=lines(-5)), 400)
  call_fails(gl, "reverse_entry", {"entry_id": posted.id, "date": "2000-01-01"}, 400, "before")
  # unknown ids
  call_fails(gl, "get_entry", {"entry_id": "je_x"}, 404, "je_x")
  call_fails(gl, "get_account_balance", {"account_code": "9999"}, 404, "9999")
  call_fails(gl, "list_entries", {"account_code": "9999"}, 404, "9999")
  call_fails(gl, "post_journal_entry", entry(lines=lines(debit="9999")), 404, "9999")
  call_fails(gl, "post_journal_entry", entry(date="2027-03-01"), 404, "2027-03")
  call_fails(gl, "reverse_entry", {"entry_id": "je_x"}, 404, "je_x")
  call_fails(gl, "close_period", {"period": "2030-01"}, 404, "2030-01")
  call_fails(gl, "reopen_period", {"period": "2030-01"}, 404, "2030-01")
  # business rules
  unbalanced = [{"account": "6300", "debit": 100}, {"account": "1000", "credit": 90.5}]
  call_fails(gl, "post_journal_entry", entry(lines=unbalanced), 422, "100.00", "90.50")
  call_fails(gl, "post_journal_entry", entry(date="2025-11-03"), 409, "2025-11 is closed")
  call_fails(gl, "reverse_entry", {"entry_id": reversed_.id}, 409, "already reversed")
  call_fails(gl, "reverse_entry", {"entry_id": reversed_.reversed_by}, 409, "itself the reversal")
  call_fails(gl, "reverse_entry", {"entry_id": posted.id, "date": "2026-01-20"}, 409, "closed")
  call_fails(gl, "close_period", {"period": "2026-01"}, 409, "already closed")
  call_fails(gl, "close_period", {"period": "2026-03"}, 409, "not ended")
  call_fails(gl, "reopen_period", {"period": "2026-02"}, 409, "already open")
  call_fails(gl, "create_account", {"code": "1000", "name": "Petty", "type": "asset"}, 409, "Cash")
