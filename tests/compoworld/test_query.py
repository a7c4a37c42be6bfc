"""The declarative query that list tools share: it filters, sorts and pages as their hand-written
bodies did (a None filter value filters nothing; errors are paginate's)."""

import dataclasses
from datetime import date

import pytest

from compoworld import InvalidArgument
from compoworld.runtime.query import page_of, paginate, select


@dataclasses.dataclass
class Row:
  id: str
  kind: str
  city: str
  on: date
  note: str | None = None


ROWS = [
  Row("a", "cafe", "Lisbon", date(2025, 1, 3), "late breakfast"),
  Row("b", "bar", "lisbon", date(2025, 1, 1)),
  Row("c", "cafe", "Porto", date(2025, 1, 2), "breakfast and lunch"),
]


def _ids(rows):
  return [r.id for r in rows]


def test_none_filters_nothing_and_order_is_kept_without_a_key():
  rows = select(ROWS, eq={"kind": None}, ge={"on": None}, text=None, fields=("note",))
  assert _ids(rows) == ["a", "b", "c"]


def test_filters_match_the_hand_written_conditions():
  def by_hand(kind, city, after, before, words):
    return [
      r
      for r in ROWS
      if (kind is None or r.kind == kind)
      and (city is None or r.city.lower() == city.lower())
      and (after is None or r.on >= after)
      and (before is None or r.on < before)
      and (not words or all(w in (r.note or "").lower() for w in words.lower().split()))
    ]

  cases = [
    ("cafe", None, None, None, None),
    (None, "LISBON", None, None, None),
    (None, None, date(2025, 1, 2), date(2025, 1, 3), None),
    ("cafe", None, None, None, "Breakfast"),
    ("bar", "porto", None, None, None),
  ]
  for kind, city, after, before, words in cases:
    got = select(
      ROWS,
      eq={"kind": kind},
      same={"city": city},
      ge={"on": after},
      lt={"on": before},
      text=words,
      fields=("note",),
    )
    assert got == by_hand(kind, city, after, before, words)


def test_where_key_reverse_and_page():
  rows = select(ROWS, where=lambda r: r.id != "b", key=lambda r: (r.on, r.id), reverse=True)
  assert _ids(rows) == ["a", "c"]
  page = page_of(ROWS, key=lambda r: r.on, limit=2, offset=0)
  assert _ids(page["items"]) == ["b", "c"]
  assert page == {**paginate(sorted(ROWS, key=lambda r: r.on), 2, 0), "items": page["items"]}
  assert page["total"] == 3 and page["next_offset"] == 2


def test_page_errors_are_paginates():
  for limit, offset in ((0, 0), (101, 0), (5, -1)):
    with pytest.raises(InvalidArgument) as got:
      page_of(ROWS, limit=limit, offset=offset)
    with pytest.raises(InvalidArgument) as want:
      paginate(ROWS, limit, offset)
    assert str(got.value) == str(want.value)
