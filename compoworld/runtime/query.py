"""Small helpers that list and search tools share: text matching, pagination, and one declarative
query over a table of records (filter, sort, page).

``select`` states what a typical list tool's body did by hand; a tool marked
``@tool(page="movement")`` returns it and the runtime pages it::

  return select(
    self.state.movements,
    eq={"sku": sku, "reason": reason},  # record.sku == sku, ...; a None value filters nothing
    ge={"at": since},  # range filters: record.at >= since (also gt, le, lt)
    text=q, fields=("name", "email"),  # every word of q in one of these fields
    key=lambda m: (m.at, m.id), reverse=True,  # the order, as sorted() takes it
  )

``page_of`` is the same query with the page taken in the body (``limit=limit, offset=offset``),
for a tool that shows each item of its page through a ``view``.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from compoworld.runtime.envelope import InvalidArgument

MAX_PAGE = 100

R = TypeVar("R")
Filters = Mapping[str, Any] | None


def text_matches(query: str | None, *fields: str | None) -> bool:
  """Case-insensitive: every word of ``query`` occurs in at least one of ``fields``."""
  if not query:
    return True
  haystack = " ".join(f for f in fields if f).lower()
  return all(word in haystack for word in query.lower().split())


def paginate(
  items: Sequence[Any],
  limit: int = 20,
  offset: int = 0,
  view: Callable[[Any], Any] | None = None,
) -> dict[str, Any]:
  """A page of ``items`` with the total count and the offset of the next page (or None); with
  ``view``, the page holds ``view(item)`` for each of its items (a summary, a record without its
  lines)."""
  if limit < 1 or limit > MAX_PAGE:
    raise InvalidArgument(f"limit must be between 1 and {MAX_PAGE}, got {limit}")
  if offset < 0:
    raise InvalidArgument(f"offset must be >= 0, got {offset}")
  page = list(items[offset : offset + limit])
  if view is not None:
    page = [view(item) for item in page]
  nxt = offset + limit if offset + limit < len(items) else None
  return {"items": page, "total": len(items), "offset": offset, "next_offset": nxt}


def _same(value: str, wanted: str) -> bool:
  return value.lower() == wanted.lower()


def select(
  rows: Iterable[R],
  *,
  eq: Filters = None,
  same: Filters = None,
  ge: Filters = None,
  gt: Filters = None,
  le: Filters = None,
  lt: Filters = None,
  text: str | None = None,
  fields: Sequence[str] = (),
  where: Callable[[R], bool] | None = None,
  key: Callable[[R], Any] | None = None,
  reverse: bool = False,
) -> list[R]:
  """The rows that pass every filter, sorted by ``key`` (in their own order without one).

  Each filter maps a field to the value it is compared with, and a None value filters nothing
  (a tool's omitted argument): ``eq`` record.field == value, ``same`` the same case-insensitively,
  ``ge``/``gt``/``le``/``lt`` record.field >= / > / <= / < value. ``text`` keeps the rows whose
  ``fields`` hold every word of it (``text_matches``); ``where`` is any further condition.
  """
  tests = [
    (field, test, value)
    for filters, test in (
      (eq, operator.eq),
      (same, _same),
      (ge, operator.ge),
      (gt, operator.gt),
      (le, operator.le),
      (lt, operator.lt),
    )
    for field, value in (filters or {}).items()
    if value is not None
  ]
  found = [
    r
    for r in rows
    if all(test(getattr(r, field), value) for field, test, value in tests)
    and text_matches(text, *(getattr(r, field) for field in fields))
    and (where is None or where(r))
  ]
  return found if key is None else sorted(found, key=key, reverse=reverse)


def page_of(
  rows: Iterable[R],
  *,
  limit: int = 20,
  offset: int = 0,
  view: Callable[[R], Any] | None = None,
  **select_args: Any,
) -> dict:
  """One page of ``select(rows, **select_args)``: filtered, sorted, then paged (and each item of
  the page shown through ``view``, as ``paginate`` does)."""
  return paginate(select(rows, **select_args), limit, offset, view)
