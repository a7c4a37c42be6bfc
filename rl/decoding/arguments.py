"""Decoding the arguments ``call_tool`` passes on: typed by the tool's schema, grounded in the
conversation.

The meta-tool grammar of `rl.decoding.constrained` sees ``call_tool``'s ``arguments`` as any
JSON object: its schema cannot depend on which tool the call names. ``ArgumentConstraint`` wraps
that grammar (or none) with the same ``allowed``/``advance`` interface as
`rl.decoding.constrained.Constraint`, follows the call's JSON as it is written
(`rl.decoding.scanner.JsonScanner`) and, once the call has named its ``service`` and ``tool``
(as the chat format writes them: typed, a call names them first), constrains the object passed
on,
``{"name": "call_tool", "arguments": {"service": S, "tool": T, "arguments": {HERE}}}``:

- **typed** (``schemas``: ``(service, tool)`` → the tool's input JSON Schema): the ``tool`` a
  call names is one of the named service's (the meta-tools' grammar alone takes any tool of the
  episode's services there: `ledger.add_signer`); the passed-on object's keys are the
  tool's parameters, each at most once; it closes only once every required one is there; a
  parameter with a string ``enum`` takes one of its values, and a value starts as its
  parameter's ``type`` says (a string, a number, a boolean...); an integer is written as digits
  within its ``minimum`` and ``maximum`` (a page size of "1010141414..." cannot be); a string of
  ``format`` date, date-time or time is written in its ISO 8601 shape ("2026-03-04",
  "2026-03-04T09:30:00"; never "209197177389" or "2026-07T09:00"). This is the grammar "from
  the tool's JSON Schema" as vLLM and SGLang decode tool calls; other keywords (a number's
  range, patterns) are left to the service's own validation.
- **grounded** (``ground=True``): every other string value in it is a copy out of the
  conversation's text (the prompt: instruction and tool replies), whole words or a whole id: it
  starts at the start of a word there and may only end at the end of one ("inv_edff9e11", never
  "inv_e"). The model still chooses *which* copy and how many words. A value that is not in the
  conversation (a text the task asks the agent to compose) cannot be written, except for the
  parameters listed as ``composed`` (those the policy's training data composes:
  `composed_arguments`), which stay free: the lever trades the rest for copies, and is reported
  beside the plain grammar. With ``schemas`` too, a number
  passed for a parameter that has no ``default`` (an amount, a quantity, a reorder point: not a
  page size or an offset) is grounded the same way: one of the numbers the conversation writes
  (``"13,600.00"`` may be passed as ``13600.00``, ``13600.0`` or ``13600``).

A small policy trained from scratch names the right tool long before it learns to copy (README,
"A policy that learns on a CPU"): it writes a query or an id it saw in training instead of the one
in the instruction or the last reply. Both levers act on exactly those tokens.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from rl.decoding.constrained import SPECIAL_BASE, Constraint, Vocabulary
from rl.decoding.scanner import BACKSLASH as _BACKSLASH
from rl.decoding.scanner import NUMBER_BYTES as _NUMBER
from rl.decoding.scanner import QUOTE as _QUOTE
from rl.decoding.scanner import JsonScanner
from rl.decoding.scanner import unescape as _text
from rl.decoding.symbols import SPECIALS
from rl.decoding.token_kinds import token_kinds

#: A leading system turn (the chat's markers, `SPECIALS`): how to work, never a task's values.
_SYSTEM_TURN = re.compile(
  rb"\A%ssystem\n.*?%s\n?" % (re.escape(SPECIALS[0].encode()), re.escape(SPECIALS[1].encode())),
  re.S,
)
#: The chat's markers, `SPECIALS` ("<|im_end|>", "<tool_response>", ...), as the context spells them.
_MARKERS = re.compile(b"|".join(re.escape(m.encode()) for m in SPECIALS))
#: Bytes that make up words and ids (and every byte of a multi-byte UTF-8 character).
_WORD = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") | frozenset(
  range(0x80, 0x100)
)
#: What a copy may start with (a word, a channel, a handle, a signed or money amount) and end with.
_LEAD = _WORD | frozenset(b"#@+-$(")
_TAIL = _WORD | frozenset(b")")
#: The first byte of a JSON value of each type.
_STARTS = {
  "string": frozenset(b'"'),
  "integer": frozenset(b"-0123456789"),
  "number": frozenset(b"-0123456789"),
  "boolean": frozenset(b"tf"),
  "null": frozenset(b"n"),
  "array": frozenset(b"["),
  "object": frozenset(b"{"),
}
#: String formats written to shape: a template ("9" a digit, any other byte itself), the
#: lengths at which a value may close (a date-time with or without its seconds) and how the
#: conversation writes a whole one (a grounded value is one of those).
_FORMATS = {
  "date": (b"9999-99-99", (10,), rb"(?<![\w-])\d{4}-\d{2}-\d{2}(?![\w-])"),
  "date-time": (
    b"9999-99-99T99:99:99",
    (16, 19),
    rb"(?<![\w-])\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(?::\d{2})?(?![\w:])",
  ),
  "time": (b"99:99:99", (5, 8), rb"(?<![\w:])\d{2}:\d{2}(?::\d{2})?(?![\w:])"),
}
_DIGITS = frozenset(b"0123456789")


def _shaped(text: bytes, fmt: str, closed: bool) -> bool:
  """Whether ``text`` is (``closed``) or starts (open) a value of the string ``fmt``."""
  template, ends, _ = _FORMATS[fmt]
  if len(text) > len(template):
    return False
  for byte, want in zip(text, template, strict=False):
    if byte != want and not (want == ord("9") and byte in _DIGITS):
      return False
  return len(text) in ends if closed else True


#: A number as text writes it: not part of an id or a word, thousands maybe comma-separated.
_NUMBER_TEXT = re.compile(rb"(?<![\w.])-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?![\w])")

Schemas = Mapping[tuple[str, str], Mapping[str, Any]]


def _integer_prefix(text: bytes, low: float, high: float) -> bool:
  """Whether ``text`` starts a JSON integer in ``[low, high]``: digits without a leading zero
  (a lone "0" aside), after a "-" where ``low`` < 0, that lie in the range or grow into it."""
  negative = text.startswith(b"-")
  digits = text[1:] if negative else text
  if negative and low >= 0:
    return False
  if not digits:
    return negative
  if not digits.isdigit() or (digits.startswith(b"0") and len(digits) > 1):
    return False
  value = int(digits)
  if negative:  # more digits only lower it
    return -value >= low
  if value == 0:
    return low <= 0 <= high
  return value <= high and (value >= low or value * 10 <= high)


def _integer_in(text: bytes, low: float, high: float) -> bool:
  """Whether ``text`` is a whole JSON integer in ``[low, high]``."""
  try:
    return low <= int(text) <= high
  except ValueError:
    return False


class ArgumentConstraint:
  """One turn's decoding of what ``call_tool`` passes on, over an optional grammar ``inner``.

  ``context`` is the conversation's text (bytes) values are copied from when ``ground``, less a
  leading system turn (its words are the meta-tools' own: "service, tool" is no search query);
  a copy never runs over one of the chat's markers into the next turn;
  ``schemas`` types the object by the called tool's input schema; ``forced`` are the ids the turn
  starts with, already fed to ``inner``.
  """

  def __init__(
    self,
    vocab: Vocabulary,
    context: bytes,
    inner: Constraint | None = None,
    *,
    ground: bool = True,
    schemas: Schemas | None = None,
    forced: Sequence[int] = (),
    composed: Collection[tuple[str, str, str]] = (),
  ):
    self.vocab, self.inner = vocab, inner
    context = _SYSTEM_TURN.sub(b"", bytes(context), count=1)
    # A copy ends where its turn does: each marker becomes a line break, which no copy crosses
    # (the user's last words and "<|im_end" are no search query).
    self.context = _MARKERS.sub(b"\n", context)
    self.ground, self.schemas = ground, schemas or {}
    self.composed = frozenset(tuple(c) for c in composed)
    self.scanner = JsonScanner()
    self._kinds = kinds = token_kinds(vocab)
    self._bytes, self._structural, self._plain = kinds.token_bytes, kinds.structural, kinds.plain
    self._specials = kinds.specials
    self._context_ids: list[int] | None = None  # `_in_context`, found when first needed
    self._numbers: tuple[frozenset[bytes], frozenset[bytes]] | None = None  # (whole, prefixes)
    self._shaped: dict[str, tuple[str, ...]] = {}  # format -> the conversation's values of it
    self._tools: dict[str, list[str]] | None = None  # service -> its tools, of ``schemas``
    for token in forced:  # the turn's forced start (the inner constraint has its own)
      for sym in vocab.symbols[int(token)]:
        self.scanner.feed(sym)

  # --- what a string may be ----------------------------------------------------------------

  def _schema(self, s: JsonScanner) -> Mapping[str, Any] | None:
    key = (s.fields.get("service"), s.fields.get("tool"))
    return self.schemas.get(key) if None not in key else None

  def _rule(self, s: JsonScanner):
    """What the string being written in ``s`` must be: ``("key", names)`` (one of them),
    ``("avoid", names)`` (none of them, nor a start of one), ``("enum", values)`` (also a
    grounded date or time: one the conversation writes), ``("shape", format)`` (a date or time
    written in its ISO 8601 shape), ``("copy", None)``, or None (anything)."""
    if not (s.in_call and s.in_string):
      return None
    if self.schemas and s.in_call_arguments:
      if s.is_value and s.keys[-1] == "tool" and (tools := self._tools_of(s.fields)):
        return "enum", tools  # a tool of the service the call names, not of another one
      if not s.is_value and not {"service", "tool"} <= s.fields.keys():
        return "avoid", ["arguments"]  # what is passed on comes after the tool it is typed by
    if s.passed_on and (schema := self._schema(s)) is not None:
      props = schema.get("properties") or {}
      if not s.is_value:
        return "key", [k for k in props if k not in s.used[-1]]
      enum = (props.get(s.keys[-1]) or {}).get("enum")
      if enum and all(isinstance(v, str) for v in enum):
        return "enum", list(enum)
    grounded = s.is_value and self.ground and s.in_passed_on and not self._composed(s)
    if (fmt := self._format(s)) is not None:  # one of the conversation's dates, if it has any
      written = self.shaped(fmt) if grounded else ()
      return ("enum", list(written)) if written else ("shape", fmt)
    return ("copy", None) if grounded else None

  def _tools_of(self, fields: Mapping[str, str]) -> list[str]:
    """The tools ``schemas`` knows of the service the call has named (none before it names
    one, or for a service they do not know): the only names its ``tool`` may take."""
    if self._tools is None:
      self._tools = {}
      for service, tool in self.schemas:
        self._tools.setdefault(service, []).append(tool)
    return self._tools.get(fields.get("service"), [])

  def shaped(self, fmt: str) -> tuple[str, ...]:
    """The values of string format ``fmt`` the conversation writes whole (a date-time also
    without its seconds), in order of appearance."""
    if fmt not in self._shaped:
      found = [m.group().decode() for m in re.finditer(_FORMATS[fmt][2], self.context)]
      self._shaped[fmt] = tuple(dict.fromkeys(found + [v[:16] for v in found if len(v) == 19]))
    return self._shaped[fmt]

  def _composed(self, s: JsonScanner) -> bool:
    """Whether the parameter being written (of the passed-on object) is one the policy's
    training data composes rather than copies (``composed``): written freely when grounded."""
    key = (s.fields.get("service"), s.fields.get("tool"), s.keys[2])
    return bool(self.composed) and key in self.composed

  def _format(self, s: JsonScanner) -> str | None:
    """The ``_FORMATS`` shape of the string value being written in ``s`` (a passed-on member
    whose parameter is a string of that ``format``), else None."""
    if not (s.in_string and s.is_value and s.passed_on) or (schema := self._schema(s)) is None:
      return None
    prop = (schema.get("properties") or {}).get(s.keys[-1]) or {}
    fmt = prop.get("format")
    return fmt if prop.get("type") == "string" and fmt in _FORMATS else None

  def _value_start(self, s: JsonScanner) -> frozenset[int] | None:
    """The bytes a member of the passed-on object may start its value with, by its
    parameter's JSON type (a string enum: a string), once its colon is written; None when
    anything goes."""
    if not (s.awaiting and s.passed_on) or (schema := self._schema(s)) is None:
      return None
    prop = (schema.get("properties") or {}).get(s.keys[-1]) or {}
    enum = prop.get("enum")
    if enum:
      return _STARTS["string"] if all(isinstance(v, str) for v in enum) else None
    types = prop.get("type")
    types = [types] if isinstance(types, str) else types
    if not types or any(t not in _STARTS for t in types):
      return None
    return frozenset().union(*(_STARTS[t] for t in types))

  def _member_property(self, s: JsonScanner) -> Mapping[str, Any] | None:
    """The called tool's schema of the parameter whose bare value is written here ({} for one
    the schema does not list); None outside a passed-on member's bare value or without a schema."""
    if not (s.passed_on and s.stack[-1] == ":" and not s.in_string):
      return None
    if (schema := self._schema(s)) is None:
      return None
    return (schema.get("properties") or {}).get(s.keys[-1]) or {}

  def _grounds_number(self, s: JsonScanner) -> bool:
    """Whether a bare value written here is a grounded number: the member's parameter is typed
    a number or an integer (no enum) and has no default."""
    if not self.ground or (prop := self._member_property(s)) is None or self._composed(s):
      return False
    types = prop.get("type")
    types = {types} if isinstance(types, str) else set(types or ())
    return bool(types) and types <= {"number", "integer"} and not {"default", "enum"} & set(prop)

  def _integer_bounds(self, s: JsonScanner) -> tuple[float, float] | None:
    """(minimum, maximum) of the integer parameter whose bare value is written here (-inf / inf
    where the schema gives none); None when the member's parameter is not typed ``integer``."""
    prop = self._member_property(s)
    if prop is None or prop.get("type") != "integer" or "enum" in prop:
      return None
    return prop.get("minimum", -math.inf), prop.get("maximum", math.inf)

  def numbers(self) -> tuple[frozenset[bytes], frozenset[bytes]]:
    """The JSON numbers the conversation writes (each as its digits, without thousands
    separators, and as Python writes its value) and every prefix of them."""
    if self._numbers is None:
      whole: set[bytes] = set()
      for m in _NUMBER_TEXT.finditer(self.context):
        raw = m.group().replace(b",", b"")
        value = float(raw)
        whole.update({raw, repr(value).encode()})
        if value.is_integer():
          whole.add(str(int(value)).encode())
      prefixes = {w[:k] for w in whole for k in range(1, len(w) + 1)}
      self._numbers = frozenset(whole), frozenset(prefixes)
    return self._numbers

  def _fits(self, rule, text: bytes, closed: bool) -> bool:
    kind, names = rule
    if kind == "copy":
      return bool(text) and self._occurs(text, closed)
    if kind == "shape":
      return _shaped(text, names, closed)
    written = _text(text)
    if kind == "avoid":
      return not any(n.startswith(written) for n in names)
    return any(n == written if closed else n.startswith(written) for n in names)

  def _ends_word(self, k: int) -> bool:
    """A copy may end just before context position ``k``: at the end of a word."""
    ctx = self.context
    return ctx[k - 1] in _TAIL and (k == len(ctx) or ctx[k] not in _WORD)

  def _occurs(self, text: bytes, closed: bool) -> bool:
    """``text`` occurs in the context starting at the start of a word and, if ``closed``,
    ending at the end of one, else with the end of a word ahead before anything a JSON string
    cannot hold raw (so the copy can be finished)."""
    if text[0] not in _LEAD:
      return False
    ctx, at = self.context, self.context.find(text)
    while at >= 0:
      end = at + len(text)
      if at == 0 or ctx[at - 1] not in _WORD:
        k = end
        while True:
          if self._ends_word(k):
            return True
          if closed or k == len(ctx) or ctx[k] < 0x20 or ctx[k] in (_QUOTE, _BACKSLASH):
            break
          k += 1
      at = ctx.find(text, at + 1)
    return False

  # --- tokens --------------------------------------------------------------------------------

  def _in_context(self) -> list[int]:
    """Of the plain tokens, those in the context: the only ones that can extend a copy (found
    once, when a whole mask first needs them: a checked token needs none)."""
    if self._context_ids is None:
      self._context_ids = [i for i in self._plain if self._bytes[i] in self.context]
    return self._context_ids

  def _keeps(self, b: bytes) -> bool:
    """Whether writing ``b`` from here keeps every constrained string it touches valid (whole
    when it closes, a valid start when it stays open) and closes the passed-on object only with
    its required keys (and the call only once it passed one on, if its tool requires any). A
    token may close one string and open the next (``"],["x``)."""
    s = self.scanner.copy()
    for byte in b:
      if self._rejects(s, byte):
        return False
      if s.in_string and byte == _QUOTE and not s.escape:
        rule = self._rule(s)
        if rule is not None and not self._fits(rule, bytes(s.value), closed=True):
          return False
      elif not s.in_string and byte == ord("}") and (schema := self._schema(s)) is not None:
        required = set(schema.get("required") or ())
        if s.passed_on and not required <= s.used[-1]:
          return False
        if s.in_call_arguments and required and "arguments" not in s.used[-1]:
          return False  # the call ends without passing on what its tool requires
      elif not s.in_string and byte == ord(",") and s.passed_on:
        schema = self._schema(s)
        if schema is not None and set(schema.get("properties") or ()) <= s.used[-1]:
          return False  # no parameter is left for another member
      s.feed(byte)
    rule = self._rule(s)
    if rule is None:
      return True
    if not s.value and rule[0] in ("copy", "avoid"):
      return True  # a string just opened: a copy, or a name that is none of those, may follow
    # A key or an enum value: some name must start with what is written (none for a tool of no
    # parameters, whose object is `{}` only).
    return self._fits(rule, bytes(s.value), closed=False)

  def _rejects(self, s: JsonScanner, byte: int) -> bool:
    """Whether writing ``byte`` next, in ``s``, breaks the typed start of a value or a grounded
    number (one the conversation writes)."""
    if byte != 0x20 and (first := self._value_start(s)) is not None and byte not in first:
      return True
    if (s.scalar or s.awaiting) and (bounds := self._integer_bounds(s)) is not None:
      if byte in _NUMBER and not _integer_prefix(bytes(s.scalar) + bytes([byte]), *bounds):
        return True  # not the start of an integer in the parameter's range
      if byte not in _NUMBER and s.scalar and not _integer_in(bytes(s.scalar), *bounds):
        return True  # the integer would end out of range (or as "-")
    if (s.scalar or s.awaiting) and self._grounds_number(s):
      whole, prefixes = self.numbers()
      if byte in _NUMBER:
        return bytes(s.scalar) + bytes([byte]) not in prefixes
      return bool(s.scalar) and bytes(s.scalar) not in whole  # a number would end short
    return False

  def _walk(self, mask: np.ndarray, by_first: dict[int, list[int]]) -> None:
    """``_keeps`` of each token of ``by_first`` into ``mask``; those whose first byte
    `_rejects` here are False without a walk."""
    for byte, ids in by_first.items():
      if self._rejects(self.scanner, byte):
        mask[ids] = False
        continue
      for i in ids:
        mask[i] = self._keeps(self._bytes[i])

  def _name_tokens(self, mask: np.ndarray, rule, value: bytes) -> None:
    """What ``_fits`` says of each plain token after ``value`` for a key, an enum or an
    avoided name (an open string, so a token fits when it writes the start of a name): found
    from the names' own continuations, and one by one only for the tokens (or a value) that
    are not plain ASCII."""
    kind, names = rule
    kinds, odd = self._kinds, self._kinds.odd
    if value.isascii() and _BACKSLASH not in value:
      written = value.decode("ascii")
      starts = []  # tokens that write the start of a name's rest
      for name in names:
        if not name.startswith(written):
          continue
        rest = name[len(written) :]
        for k in range(1, len(rest) + 1):
          if not rest[k - 1].isascii() or rest[k - 1] == "\\":
            break
          starts += kinds.simple.get(rest[:k].encode(), ())
      if kind == "avoid":
        mask[kinds.simple_ids] = True
        mask[starts] = False
      else:
        mask[starts] = True
    else:
      odd = self._plain
    for i in odd:
      mask[i] = self._fits(rule, value + self._bytes[i], closed=False)

  def _mask(self) -> np.ndarray:
    """bool [vocab]: the tokens that keep what is passed on valid."""
    if not self.scanner.in_call:
      return np.ones(self.vocab.size, bool)
    mask = np.zeros(self.vocab.size, bool)
    rule = self._rule(self.scanner)
    if self._walks_each(self.scanner):
      self._walk(mask, self._kinds.plain_by_first)
    elif rule is None:
      mask[self._plain] = True  # without a quote, brace or comma a token changes nothing here
      mask[self._specials] = True
    elif rule[0] == "copy":
      value = bytes(self.scanner.value)
      for i in self._in_context():
        text = value + self._bytes[i]
        mask[i] = text in self.context and self._occurs(text, closed=False)
    elif rule[0] == "shape":
      value = bytes(self.scanner.value)
      for i in self._plain:
        mask[i] = _shaped(value + self._bytes[i], rule[1], closed=False)
    else:
      self._name_tokens(mask, rule, bytes(self.scanner.value))
    self._walk(mask, self._kinds.structural_by_first)
    return mask

  def _walks_each(self, s: JsonScanner) -> bool:
    """Whether each token is walked through here: at a value's (typed) first byte, and at a
    grounded or bounded number's next."""
    number = bool(s.scalar) and (self._grounds_number(s) or self._integer_bounds(s) is not None)
    return number or self._value_start(s) is not None

  def _validity(self) -> Callable[[int], bool]:
    """One token's entry of `_mask` from here, found for that token alone (each by the
    definition `_mask` finds them in bulk): what `best` tries its likeliest tokens with."""
    s, kinds = self.scanner, self._kinds
    rule = self._rule(s)
    walked = self._walks_each(s)
    value = bytes(s.value)

    def valid(i: int) -> bool:
      b = self._bytes[i]
      if b is None:  # a special: free where nothing constrains the string
        return not walked and rule is None and kinds.is_special[i]
      if walked or kinds.is_structural[i]:
        return self._keeps(b)
      if rule is None:
        return True
      if rule[0] == "copy":
        return value + b in self.context and self._occurs(value + b, closed=False)
      return self._fits(rule, value + b, closed=False)

    return valid

  def proposal(self, budget: int | None = None) -> np.ndarray:
    """bool [vocab]: the ids to draw from first, those of the inner constraint (all without
    one). Whenever one of them `admits` is true of, ``allowed(budget)`` is exactly those of them
    that it is true of; so a draw from ``proposal`` that `admits`, else a draw from
    ``allowed``, is a draw from ``allowed`` (rejection sampling: `rl.grpo.rollout`), and
    greedy's token is the likeliest proposal that `admits` (`best`)."""
    if self.inner is None:
      return np.ones(self.vocab.size, bool)
    return self.inner.allowed(budget)

  def admits(self, token: int) -> bool:
    """Whether ``token``, one of ``proposal``'s, keeps what is passed on valid."""
    return not self.scanner.in_call or self._validity()(int(token))

  def best(self, logits: np.ndarray, budget: int | None = None, tries: int = 16) -> int:
    """The most likely token ``allowed(budget)`` gives (lowest id among ties), as greedy
    decoding takes it: ``argmax(where(allowed(budget), logits, -inf))``. The proposal's tokens
    are tried from the likeliest, each on its own, and the first that keeps what is passed on
    valid is that argmax; only if none of the first ``tries`` does is the whole mask built. A
    trained policy's top token is nearly always valid, so a step checks one token instead of
    the vocabulary."""
    mask = self.proposal(budget)
    if self.scanner.in_call:
      ids = np.flatnonzero(mask)
      valid = self._validity()
      for i in ids[np.argsort(-logits[ids], kind="stable")[:tries]]:
        if valid(int(i)):
          return int(i)
      mask = self.allowed(budget)
    return int(np.argmax(np.where(mask, logits, -np.inf)))

  def allowed(self, budget: int | None = None) -> np.ndarray:
    """bool [vocab]: the inner constraint's tokens that keep what is passed on valid. A
    valid token that cannot finish within ``budget`` goes before the budget (the inner grammar
    cuts the turn then, as it does on its own). Never empty: with no valid token left, the
    inner constraint's mask."""
    mask = self.proposal(budget)
    if not self.scanner.in_call:
      return mask
    valid = self._mask()
    for candidates in [mask] if self.inner is None else [mask, self.inner.allowed()]:
      if (kept := candidates & valid).any():
        return kept
    return mask

  def advance(self, token: int) -> None:
    if self.inner is not None:
      self.inner.advance(token)
    for sym in self.vocab.symbols[int(token)]:
      self.scanner.feed(sym)

  def copy(self) -> ArgumentConstraint:
    """An independent copy (its own scanner and inner state), for exploring continuations."""
    other = ArgumentConstraint.__new__(ArgumentConstraint)
    other.__dict__.update(self.__dict__, scanner=self.scanner.copy())
    if self.inner is not None:
      other.inner = self.inner.copy()
    return other

  @property
  def grounding(self) -> bool:
    """True while the next token continues a grounded (copied) string value."""
    rule = self._rule(self.scanner)
    return rule is not None and rule[0] == "copy"

  @property
  def finished(self) -> bool:
    return self.inner.finished if self.inner is not None else False


def value_tokens(ids: Sequence[int], loss_mask: Sequence[int], vocab: Vocabulary) -> np.ndarray:
  """bool [N]: the tokens of ``ids`` (a rendered conversation) that write an argument value
  ``call_tool`` passes on, in the assistant's turns (``loss_mask``): a string value's text and
  its closing quote, or a bare number. The SFT objective can weigh these more
  (``data.value_loss_weight``): they are the copies a small policy gets wrong."""
  out = np.zeros(len(ids), bool)
  scanner = JsonScanner()
  for k in np.flatnonzero(np.asarray(loss_mask) > 0):
    for sym in vocab.symbols[int(ids[k])]:
      if sym < SPECIAL_BASE and scanner.in_call and scanner.in_passed_on:
        out[k] |= (scanner.in_string and scanner.is_value) or (
          not scanner.in_string and sym in _NUMBER and bool(scanner.scalar or scanner.awaiting)
        )
      scanner.feed(sym)
  return out


def composed_arguments(
  records: Iterable[Mapping[str, Any]], min_copied: float = 0.9
) -> list[tuple[str, str, str]]:
  """The ``(service, tool, parameter)`` whose values the trajectories ``records`` (chat
  messages) write as copies of the conversation less than ``min_copied`` of the time: a
  template's text ("Agenda: ..."), a sum, an end worked out from a start, a query. Grounded
  decoding writes these freely (``ArgumentConstraint(composed=...)``) and copies the rest; a
  policy trained on the records saves them with its tokenizer (`rl.data.tokenizer`)."""
  from compoworld.tasks.task import shows

  seen: dict[tuple[str, str, str], list[int]] = {}
  for record in records:
    context = ""
    for message in record["messages"]:
      calls = (message.get("tool_calls") or []) if message["role"] == "assistant" else []
      for call in (c["function"] for c in calls if c["function"]["name"] == "call_tool"):
        args = json.loads(call["arguments"])
        for key, value in (args.get("arguments") or {}).items():
          if isinstance(value, str | int | float) and not isinstance(value, bool):
            counts = seen.setdefault((args.get("service"), args.get("tool"), key), [0, 0])
            counts[0] += shows(context, value)
            counts[1] += 1
      context += message.get("content") or ""
  return sorted(k for k, (copied, n) in seen.items() if copied < min_copied * n)
