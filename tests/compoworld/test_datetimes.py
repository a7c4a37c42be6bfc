"""Arguments with a time zone (or Unix times) meet naive service clocks without a 500."""

import pytest

from compoworld import registry
from tests.contract import call_ok


@pytest.mark.parametrize("when", ["2026-03-05T10:00:00Z", "2026-03-05T05:00:00-05:00", 1772704800])
def test_zoned_and_unix_times_mean_the_same_utc_instant(when):
  cal = registry.get("calendar").create(seed=0)
  naive = call_ok(cal, "list_events", {"start_after": "2026-03-05T10:00:00", "limit": 100})
  zoned = call_ok(cal, "list_events", {"start_after": when, "limit": 100})
  assert zoned == naive
