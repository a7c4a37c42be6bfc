"""The symbols the tool-call grammar reads: bytes 0..255, and 256 + k for the k-th of `SPECIALS`
(the chat's special tokens); and the byte-level rules its text obeys (UTF-8, no special token
spelled out of ordinary bytes).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, Literal

import numpy as np

#: The chat format's special tokens, in ``rl.data.chat.SPECIAL_TOKENS``' order (repeated here so the
#: automaton imports nothing; a test checks they agree). Symbol ``256 + k`` is ``SPECIALS[k]``.
SPECIALS = (
  "<|im_start|>",
  "<|im_end|>",
  "<tool_call>",
  "</tool_call>",
  "<tool_response>",
  "</tool_response>",
)


SPECIAL_BASE = 256


#: The cost of a rejected token.
BIG = int(np.iinfo(np.int32).max)


IM_END_SYM, CALL_SYM, CALL_END_SYM = (SPECIAL_BASE + SPECIALS.index(s) for s in SPECIALS[1:4])
_SPECIAL_BYTES = frozenset(s.encode() for s in SPECIALS)


_SPECIAL_PREFIXES = frozenset(s[:k] for s in _SPECIAL_BYTES for k in range(len(s)))


_TYPES = frozenset({"string", "number", "integer", "boolean", "null", "object", "array"})


_HEX = frozenset(b"0123456789abcdefABCDEF")


_ESCAPES = frozenset(b'"\\/bfnrt')


_DIGITS = frozenset(b"0123456789")


_SP, _QUOTE, _COLON, _COMMA, _NL = 0x20, 0x22, 0x3A, 0x2C, 0x0A


_NAME_KEY, _ARGS_KEY = b'"name"', b'"arguments"'


_NEVER = 1 << 20  # a symbol every state rejects (a token that is never allowed)


Mode = Literal["auto", "required", "json"]


def text_symbols(text: str) -> list[int]:
  """``text`` as symbols: special-token strings as one symbol each, the rest as UTF-8 bytes."""
  out: list[int] = []
  i = 0
  while i < len(text):
    for k, s in enumerate(SPECIALS):
      if text.startswith(s, i):
        out.append(SPECIAL_BASE + k)
        i += len(s)
        break
    else:
      j = text.find("<", i + 1)
      j = len(text) if j < 0 else j
      out.extend(text[i:j].encode())
      i = j
  return out


def _literals(values: Iterable[Any]) -> tuple[bytes, ...]:
  """Each value as JSON, with and without ``ensure_ascii`` (``json.dumps``' two spellings)."""
  out: dict[bytes, None] = {}
  for v in values:
    for ascii_only in (False, True):
      out[json.dumps(v, ensure_ascii=ascii_only).encode()] = None
  return tuple(out)


def _utf8_lead(b: int) -> tuple[int, int, int] | None:
  """(continuation bytes to come, lowest, highest next byte) after the lead byte ``b`` of a
  UTF-8 character; None when ``b`` cannot start one (RFC 3629's table)."""
  if 0xC2 <= b <= 0xDF:
    return (1, 0x80, 0xBF)
  if b == 0xE0:
    return (2, 0xA0, 0xBF)
  if 0xE1 <= b <= 0xEC or b in (0xEE, 0xEF):
    return (2, 0x80, 0xBF)
  if b == 0xED:
    return (2, 0x80, 0x9F)
  if b == 0xF0:
    return (3, 0x90, 0xBF)
  if 0xF1 <= b <= 0xF3:
    return (3, 0x80, 0xBF)
  if b == 0xF4:
    return (3, 0x80, 0x8F)
  return None


def _text_byte(utf: tuple | None, sp: bytes, b: int) -> tuple[tuple | None, bytes] | None:
  """Free text (content, or a JSON string's characters) after byte ``b``: the pending UTF-8
  state and the partial special-token string; None if ``b`` breaks UTF-8 or spells a special."""
  if utf is not None:
    left, lo, hi = utf
    if not lo <= b <= hi:
      return None
    return ((left - 1, 0x80, 0xBF) if left > 1 else None), b""
  if b >= 0x80:
    lead = _utf8_lead(b)
    return None if lead is None else (lead, b"")
  s = sp + bytes((b,))
  if s in _SPECIAL_BYTES:
    return None
  while s not in _SPECIAL_PREFIXES:
    s = s[1:]
  return None, s
