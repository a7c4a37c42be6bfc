"""Each vocabulary's tokens by kind, found once: what `rl.decoding.arguments` walks a token
through (a quote, brace or comma can open, close or end something), what it finds by its bytes,
and what it sets at once."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence

import numpy as np

from rl.decoding.constrained import SPECIAL_BASE, Vocabulary
from rl.decoding.scanner import BACKSLASH as _BACKSLASH


@dataclasses.dataclass(frozen=True)
class TokenKinds:
  """Per vocabulary, once: each id's bytes (None for specials), the ids that can open, close,
  end or continue something (a quote, brace or comma: walked on a copy of the scanner), the
  plain ones, and the specials. For finding tokens by what they write rather than one by one:
  the plain ids by their bytes where those are ASCII without a backslash (`simple`: such bytes
  read as themselves inside a JSON string), the other plain ids (`odd`), and the non-special ids
  by their first byte."""

  token_bytes: list[bytes | None]
  structural: list[int]
  plain: list[int]
  specials: list[int]
  simple: dict[bytes, list[int]]
  simple_ids: np.ndarray
  odd: list[int]
  plain_by_first: dict[int, list[int]]
  structural_by_first: dict[int, list[int]]
  is_structural: np.ndarray  # bool [vocab]
  is_special: np.ndarray  # bool [vocab]


def _by_first(ids: Sequence[int], token_bytes: Sequence[bytes | None]) -> dict[int, list[int]]:
  out: dict[int, list[int]] = {}
  for i in ids:
    out.setdefault(token_bytes[i][0], []).append(i)
  return out


@functools.lru_cache(maxsize=4)
def token_kinds(vocab: Vocabulary) -> TokenKinds:
  token_bytes = [bytes(s) if s and s[0] < SPECIAL_BASE else None for s in vocab.symbols]
  structural, plain = [], []
  for i, b in enumerate(token_bytes):
    if b:
      (structural if any(c in b for c in b'"},') else plain).append(i)
  specials = [i for i, b in enumerate(token_bytes) if b is None and vocab.symbols[i]]
  simple: dict[bytes, list[int]] = {}
  odd = []
  for i in plain:
    b = token_bytes[i]
    if b.isascii() and _BACKSLASH not in b:
      simple.setdefault(b, []).append(i)
    else:
      odd.append(i)
  simple_ids = np.asarray(sorted(i for ids in simple.values() for i in ids), np.int64)
  return TokenKinds(
    token_bytes,
    structural,
    plain,
    specials,
    simple,
    simple_ids,
    odd,
    _by_first(plain, token_bytes),
    _by_first(structural, token_bytes),
    np.isin(np.arange(vocab.size), structural),
    np.isin(np.arange(vocab.size), specials),
  )
