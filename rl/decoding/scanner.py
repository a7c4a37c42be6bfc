"""Following a tool call's JSON as it is written, one symbol at a time (`JsonScanner`): which
container and key the text is in, and the string or bare number being written. The typed and
grounded decoding of `rl.decoding.arguments` reads it.
"""

from __future__ import annotations

import json

from rl.decoding.constrained import CALL_SYM, SPECIAL_BASE

QUOTE, BACKSLASH = 0x22, 0x5C
#: Bytes a bare JSON number is written with.
NUMBER_BYTES = frozenset(b"-+.0123456789eE")
#: The key path of the object call_tool passes on.
_PASSED_ON = ("arguments", "arguments")


def unescape(b: bytes | bytearray) -> str:
  """The text of a JSON string's body as written (escapes undone; bytes that do not parse
  decoded as UTF-8 with replacements)."""
  try:
    return json.loads(b'"' + bytes(b) + b'"')
  except ValueError:
    return bytes(b).decode("utf-8", "replace")


class JsonScanner:
  """Where the text of a turn is inside a tool call's JSON: the open containers and the key of
  each, the string being written (key or value), the string fields of the call's ``arguments``.

  Fed one symbol at a time (`rl.decoding.constrained` symbols: bytes, and the chat's specials). It is a
  tracker, not a validator: malformed JSON leaves it in some state and the next ``<tool_call>``
  resets it.
  """

  def __init__(self):
    self.in_call = False
    self._reset()

  def _reset(self) -> None:
    # One frame per open container: "{" an object expecting a key, ":" one in a member's value
    # (after its colon, until the comma), "[" an array; with each, the key of its member being
    # written (None in an array) and the keys it has.
    self.stack: list[str] = []
    self.keys: list[str | None] = []
    self.used: list[set[str]] = []
    self.fields: dict[str, str] = {}  # string members of the call's "arguments" (service, tool)
    self.in_string = self.is_value = self.escape = False
    self.awaiting = False  # after a member's colon, before its value
    self.value = bytearray()  # the string so far, as written (JSON-escaped)
    self.scalar = bytearray()  # the bare number being written as a member's value, so far

  def copy(self) -> JsonScanner:
    other = JsonScanner.__new__(JsonScanner)
    other.__dict__.update(
      self.__dict__,
      stack=list(self.stack),
      keys=list(self.keys),
      used=[set(u) for u in self.used],
      fields=dict(self.fields),
      value=bytearray(self.value),
      scalar=bytearray(self.scalar),
    )
    return other

  def feed(self, sym: int) -> None:
    if sym >= SPECIAL_BASE:
      self.in_call = sym == CALL_SYM
      self._reset()
      return
    if not self.in_call:
      return
    if self.in_string:
      if self.escape:
        self.escape = False
      elif sym == BACKSLASH:
        self.escape = True
      elif sym == QUOTE:
        self.in_string = False
        self._closed(unescape(self.value))
        return
      self.value.append(sym)
      return
    c = chr(sym)
    if sym in NUMBER_BYTES and (self.scalar or self.awaiting):
      self.scalar.append(sym)
    else:
      self.scalar.clear()
    if c != " ":
      self.awaiting = c == ":" and bool(self.stack) and self.stack[-1] == "{"
    if c == '"':
      self.in_string, self.escape = True, False
      self.is_value = bool(self.stack) and self.stack[-1] in ":["
      self.value.clear()
    elif c in "{[":
      self.stack.append(c)
      self.keys.append(None)
      self.used.append(set())
    elif c in "}]":
      if self.stack:
        del self.stack[-1], self.keys[-1], self.used[-1]
    elif c == ":" and self.stack and self.stack[-1] == "{":
      self.stack[-1] = ":"
    elif c == "," and self.stack and self.stack[-1] == ":":
      self.stack[-1] = "{"

  def _closed(self, text: str) -> None:
    if not self.is_value:
      if self.stack:
        self.keys[-1] = text
        self.used[-1].add(text)
    elif self.in_call_arguments and self.stack[-1] == ":":
      self.fields[self.keys[-1]] = text

  @property
  def depth(self) -> int:
    """Containers (objects and arrays) around the current position."""
    return len(self.stack)

  @property
  def in_call_arguments(self) -> bool:
    """Directly in the call's ``arguments`` object (where service and tool are named)."""
    return self.depth == 2 and self.keys[0] == "arguments"

  @property
  def in_passed_on(self) -> bool:
    """In the object call_tool passes on, at any depth."""
    return self.depth >= 3 and tuple(self.keys[:2]) == _PASSED_ON

  @property
  def passed_on(self) -> bool:
    """Directly in the object call_tool passes on (a key, or a member's value)."""
    return self.depth == 3 and self.in_passed_on
