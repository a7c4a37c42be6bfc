"""Small helpers that list and search tools share: text matching and pagination."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from compoworld.envelope import InvalidArgument

MAX_PAGE = 100


def text_matches(query: str | None, *fields: str | None) -> bool:
  """Case-insensitive: every word of ``query`` occurs in at least one of ``fields``."""
  if not query:
    return True
  haystack = " ".join(f for f in fields if f).lower()
  return all(word in haystack for word in query.lower().split())


def paginate(items: Sequence[Any], limit: int = 20, offset: int = 0) -> dict[str, Any]:
  """A page of ``items`` with the total count and the offset of the next page (or None)."""
  if limit < 1 or limit > MAX_PAGE:
    raise InvalidArgument(f"limit must be between 1 and {MAX_PAGE}, got {limit}")
  if offset < 0:
    raise InvalidArgument(f"offset must be >= 0, got {offset}")
  page = list(items[offset : offset + limit])
  nxt = offset + limit if offset + limit < len(items) else None
  return {"items": page, "total": len(items), "offset": offset, "next_offset": nxt}
