"""Grounded decoding: the strings a tool call passes to a service are copied from the conversation.

A small policy trained from scratch names the right tool long before it learns to copy (README,
"A policy that learns on a CPU"): it writes a search query or an id it saw in training instead
of the one in the instruction or the last tool reply. Grounded decoding is a decoding-time
lever, like the grammar of `rl.constrained` and reported beside it: while the model writes a
JSON string *value* nested at least ``depth`` containers deep in a ``<tool_call>`` (3: the
arguments ``call_tool`` passes on, ``{"name", "arguments": {"service", "tool", "arguments":
{HERE}}}``), every token keeps the value written so far a substring of the conversation's text
(the prompt: instruction and tool replies), starting at a word boundary there, and the value
may only end where its occurrence does too: a copy is whole words or a whole id ("inv_edff9e11",
never "inv_e"). The model still chooses *which* copy, and how many words; keys, numbers,
literals, the service and tool names and free text are untouched.

A value that is not in the conversation (a text the task asks the agent to compose, a sum) cannot
be written under grounding: the lever trades those for copies. ``GroundedConstraint`` wraps a
grammar `rl.constrained.Constraint` (or none) with the same ``allowed``/``advance`` interface, so
``rl.policy.Policy.generate`` decodes under either or both.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rl.constrained import CALL_SYM, SPECIAL_BASE, Constraint, Vocabulary

_QUOTE, _BACKSLASH = 0x22, 0x5C
#: Bytes that make up words and ids (and every byte of a multi-byte UTF-8 character).
_WORD = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") | frozenset(
  range(0x80, 0x100)
)
#: What a copy may start with (a word, a channel, a handle, a signed or money amount) and end with.
_LEAD = _WORD | frozenset(b"#@+-$(")
_TAIL = _WORD | frozenset(b")")


class JsonScanner:
  """Where the text of a turn is: inside a tool call's JSON, how deep, in a string value or not.

  Fed one symbol at a time (`rl.constrained` symbols: bytes, and the chat's specials). It is a
  tracker, not a validator: malformed JSON leaves it in some state and the next ``<tool_call>``
  resets it.
  """

  def __init__(self):
    self.in_call = False
    # One frame per open container: "{" an object expecting a key, ":" one in a member's value
    # (after its colon, until the comma), "[" an array.
    self.stack: list[str] = []
    self.in_string = False
    self.is_value = False
    self.escape = False
    self.value = bytearray()  # the string value so far, as written (JSON-escaped)

  def feed(self, sym: int) -> None:
    if sym >= SPECIAL_BASE:
      self.in_call = sym == CALL_SYM
      self.stack, self.in_string, self.escape = [], False, False
      return
    if not self.in_call:
      return
    if self.in_string:
      if self.escape:
        self.escape = False
      elif sym == _BACKSLASH:
        self.escape = True
      elif sym == _QUOTE:
        self.in_string = False
        return
      if self.is_value:
        self.value.append(sym)
      return
    c = chr(sym)
    if c == '"':
      self.in_string, self.escape = True, False
      self.is_value = bool(self.stack) and self.stack[-1] in ":["
      self.value.clear()
    elif c in "{[":
      self.stack.append(c)
    elif c in "}]":
      if self.stack:
        self.stack.pop()
    elif c == ":" and self.stack and self.stack[-1] == "{":
      self.stack[-1] = ":"
    elif c == "," and self.stack and self.stack[-1] == ":":
      self.stack[-1] = "{"

  def copy(self) -> JsonScanner:
    other = JsonScanner.__new__(JsonScanner)
    other.__dict__.update(self.__dict__, stack=list(self.stack), value=bytearray(self.value))
    return other

  @property
  def depth(self) -> int:
    """Containers (objects and arrays) around the current position."""
    return len(self.stack)


class GroundedConstraint:
  """One turn's decoding under grounding, over an optional grammar constraint ``inner``.

  ``context`` is the conversation's text (bytes) the values are copied from; ``depth`` the
  nesting at which string values are grounded (see the module docstring); ``forced`` the ids the
  turn starts with, already fed to ``inner``.
  """

  def __init__(
    self,
    vocab: Vocabulary,
    context: bytes,
    inner: Constraint | None = None,
    depth: int = 3,
    forced: Sequence[int] = (),
  ):
    self.vocab, self.context, self.inner, self.depth = vocab, bytes(context), inner, depth
    self.scanner = JsonScanner()
    self._bytes = [
      bytes(s) if s and s[0] < SPECIAL_BASE else None
      for s in (vocab.symbols[i] for i in range(vocab.size))
    ]
    # Tokens with a quote (they may open or close a value), tokens without one, and those of
    # the latter that occur in the context (the only ones that can extend a copy).
    self._quoted = [i for i, b in enumerate(self._bytes) if b and _QUOTE in b]
    self._plain_all = [i for i, b in enumerate(self._bytes) if b and _QUOTE not in b]
    self._plain = [i for i in self._plain_all if self._bytes[i] in self.context]
    self._specials = [i for i, b in enumerate(self._bytes) if b is None and vocab.symbols[i]]
    for token in forced:  # the turn's forced start (the inner constraint has its own)
      for sym in vocab.symbols[int(token)]:
        self.scanner.feed(sym)

  def _grounded(self, s: JsonScanner) -> bool:
    return s.in_call and s.in_string and s.is_value and s.depth >= self.depth

  @property
  def grounding(self) -> bool:
    """True while the next token continues a grounded string value."""
    return self._grounded(self.scanner)

  def _ends_word(self, k: int) -> bool:
    """A copy may end just before context position ``k``: at the end of a word."""
    ctx = self.context
    return ctx[k - 1] in _TAIL and (k == len(ctx) or ctx[k] not in _WORD)

  def _occurs(self, text: bytes, closed: bool) -> bool:
    """``text`` occurs in the context starting at the start of a word and, if ``closed``,
    ending at the end of one, else with the end of a word ahead before anything a JSON string
    cannot hold raw (so the copy can be finished): whole words or a whole id, never a piece."""
    if text[0] not in _LEAD:
      return False
    ctx, at = self.context, self.context.find(text)
    while at >= 0:
      end = at + len(text)
      if at == 0 or ctx[at - 1] not in _WORD:
        if closed:
          if self._ends_word(end):
            return True
        else:
          k = end
          while True:
            if self._ends_word(k):
              return True
            if k == len(ctx) or ctx[k] < 0x20 or ctx[k] in (_QUOTE, _BACKSLASH):
              break
            k += 1
      at = ctx.find(text, at + 1)
    return False

  def _keeps_copies(self, b: bytes) -> bool:
    """Whether writing ``b`` from here keeps every grounded value it touches a copy: one it
    closes is a whole copy, one it opens or leaves open the start of one. A token may close a
    value and open the next (``"],["x``), so it is walked on a copy of the scanner."""
    s = self.scanner.copy()
    for byte in b:
      closes = byte == _QUOTE and not s.escape and self._grounded(s)
      if closes and not (s.value and self._occurs(bytes(s.value), closed=True)):
        return False
      s.feed(byte)
    if self._grounded(s) and s.value:
      value = bytes(s.value)
      return value in self.context and self._occurs(value, closed=False)
    return True

  def _copy_mask(self) -> np.ndarray:
    """bool [vocab]: the tokens that keep grounded values copies (every other token when no
    grounded value is open or can be opened here)."""
    if not self.scanner.in_call:
      return np.ones(self.vocab.size, bool)
    mask = np.zeros(self.vocab.size, bool)
    if self.grounding:
      value = bytes(self.scanner.value)
      for i in self._plain:
        text = value + self._bytes[i]
        if text in self.context and self._occurs(text, closed=False):
          mask[i] = True
    else:
      mask[self._plain_all] = True  # without a quote a token cannot open a value
      mask[self._specials] = True
    for i in self._quoted:
      mask[i] = self._keeps_copies(self._bytes[i])
    return mask

  def allowed(self, budget: int | None = None) -> np.ndarray:
    """bool [vocab]: the inner constraint's tokens that keep grounded values copies. A copy
    that cannot finish within ``budget`` goes before the budget (the inner grammar cuts the
    turn then, as it does on its own). Never empty: with no copy left to make, the inner
    constraint's mask."""
    mask = self.inner.allowed(budget) if self.inner is not None else np.ones(self.vocab.size, bool)
    if not self.scanner.in_call:
      return mask
    copy = self._copy_mask()
    candidates = [mask] if self.inner is None else [mask, self.inner.allowed()]
    for c in candidates:
      if (grounded := c & copy).any():
        return grounded
    return mask

  def advance(self, token: int) -> None:
    if self.inner is not None:
      self.inner.advance(token)
    for sym in self.vocab.symbols[int(token)]:
      self.scanner.feed(sym)

  @property
  def finished(self) -> bool:
    return self.inner.finished if self.inner is not None else False
