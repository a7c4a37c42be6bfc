"""Grammar-constrained decoding of tool calls from the tools' JSON Schemas.

As vLLM's and SGLang's guided decoding do for tool calls: while a turn is constrained, every
sampled token keeps the text a prefix of a valid assistant turn in the chat format (``rl.chat``),
so tool names and enum values are always valid and arguments always parse and satisfy their
schema. Three pieces:

- `ToolCallGrammar`: a pushdown automaton over *symbols* (bytes 0..255, and 256 + k for the k-th
  of `SPECIALS`, the chat's special tokens), compiled from OpenAI function schemas. It knows
  nothing of tokens or JAX. A state is a hashable tuple of frames (a stack); ``step`` consumes one
  symbol; ``finish_cost`` is the exact number of symbols the shortest completion of a state needs.
- `Vocabulary`: each token id's symbols (``Tokenizer.token_bytes``, the chat's special ids).
- `TokenConstraint`: both together. For a state it computes, once, the finish cost after each
  token (`BIG` where the grammar rejects it) and caches it, so a decode step is one comparison
  ``costs <= tokens left`` and one short walk of the chosen token's bytes. `Constraint` is one
  sequence's state for a sampler (``allowed``, ``advance``): see ``rl.policy.Policy.generate``.

The turn grammar (``mode="auto"``)::

  turn    := content? (call ("\\n" call)*)? <|im_end|>     content: free text
  call    := <tool_call> "\\n" {"name": NAME, "arguments": ARGS} "\\n" </tool_call>

``mode="required"`` (``tool_choice="required"`` or a named function) is the same without the
content: the turn opens with ``<tool_call>`` at once, as ``Policy.prompt`` forces it, and may
make more calls after the first. NAME is one of the tools' names; ARGS follows that tool's
``parameters``. Content and JSON strings are valid UTF-8 and may not spell a special token out of
ordinary tokens (the parser would split the text there).

JSON follows the schema as far as it goes: ``type`` (one or a list), ``enum`` and ``const`` (the
value is one of the literals, as ``json.dumps`` writes it), ``properties`` (an object with
properties takes only those, each at most once, in any order, as vLLM's and outlines' guided
decoding do; the ``required`` ones must all be there before ``}``), ``additionalProperties`` (the
values of an object without ``properties``), ``items``. An object without ``properties`` (such as
``call_tool``'s ``arguments``) is any JSON object, a schema without ``type`` any value. Integers
take no fraction or exponent. Other keywords (``anyOf``, ``$ref``, ``pattern``, ``minLength``,
...) are not enforced: the value is then any value of the schema's ``type``. Whitespace is what
``json.dumps`` writes: at most one space after ``:`` and ``,``, none elsewhere (no
pretty-printing), which also keeps a constrained model from padding forever.

Budget: ``Constraint.allowed(budget)`` only lets a token through if the turn can still be
finished in the ``budget`` tokens left after it (with byte fallback every byte is a token, so
``finish_cost`` in symbols bounds it in tokens), so a constrained turn given enough
``max_tokens`` always ends with well-formed calls. With too few tokens from the start the
grammar alone applies and the turn is cut at its budget, as any other.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Sequence
from typing import Any, Literal

import numpy as np

#: The chat format's special tokens, in ``rl.chat.SPECIAL_TOKENS``' order (repeated here so the
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
IM_END_SYM, CALL_SYM, CALL_END_SYM = (SPECIAL_BASE + SPECIALS.index(s) for s in SPECIALS[1:4])
#: The cost of a rejected token.
BIG = int(np.iinfo(np.int32).max)

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


class _Node:
  """A compiled schema: what one JSON value may be."""

  __slots__ = ("items", "lits", "min_len", "props", "required", "types", "values")

  def __init__(self):
    self.types: frozenset[str] = _TYPES
    self.lits: int | None = None  # a literal set's id: the value is one of them
    self.props: dict[str, int] | None = None  # key -> node: a closed object
    self.required: frozenset[str] = frozenset()
    self.values = 0  # the node of a free object's values (0: any value)
    self.items = 0  # the node of an array's items
    self.min_len = 1  # symbols of the shortest value


class _Lits:
  """A set of literal byte strings, as a trie of prefixes."""

  __slots__ = ("complete", "next", "rest")

  def __init__(self, strings: tuple[bytes, ...]):
    self.complete = frozenset(strings)
    self.next: dict[bytes, frozenset[int]] = {}
    for s in strings:
      for k in range(len(s)):
        self.next[s[:k]] = self.next.get(s[:k], frozenset()) | {s[k]}
    #: the literals each prefix can still become
    self.rest = {p: [s for s in strings if s.startswith(p)] for p in {*self.next, *strings}}


class _Done:
  """A frame that completed: its result (the literal matched, else None) and whether it consumed
  the symbol (strings and literals do; a number ends on the symbol after it, its parent's)."""

  __slots__ = ("consumed", "result")

  def __init__(self, result: bytes | None, consumed: bool):
    self.result, self.consumed = result, consumed


_DONE = _Done(None, True)
_DONE_UNCONSUMED = _Done(None, False)

# Frames (a state is a tuple of them, the innermost last):
#   ("t", phase, utf, sp)            the turn (bottom); utf, sp: content's UTF-8 and special state
#   ("c", phase, tool)               one call's {"name": NAME, "arguments": ARGS}
#   ("r", phase)                     the root of a lone JSON value (mode="json")
#   ("v", node, space_ok)            a value of ``node`` still to start
#   ("o", node, phase, seen, key)    an object; seen: the keys written; key: the current one
#   ("a", node, phase)               an array
#   ("s", escape, utf, sp)           a string's inside (escape: 0, -1 after \, k hex digits left)
#   ("n", integer_only, phase)       a number
#   ("l", literals, prefix)          one of a set of literals (enum values, keys, names, true)


class ToolCallGrammar:
  """The assistant turns that call ``tools`` (OpenAI function schemas) validly, as the module
  docstring says; with ``schema=``, also the JSON values of one schema (``mode="json"``)."""

  def __init__(self, tools: Sequence[dict[str, Any]] = (), schema: Any = None):
    self._nodes: list[_Node] = [_Node()]  # node 0: any value (its values and items are 0 too)
    self._lits: list[_Lits] = []
    self._lit_ids: dict[tuple[bytes, ...], int] = {}
    functions = [t.get("function", t) for t in tools]
    names = [f.get("name") for f in functions]
    if any(not isinstance(n, str) or not n for n in names) or len(set(names)) != len(names):
      raise ValueError(f"tools need distinct non-empty names, got {names}")
    self.tool_names: list[str] = names
    self._name_lits: dict[bytes, int] = {}
    self._args: list[int] = []
    for i, f in enumerate(functions):
      params = f.get("parameters")
      params = {"type": "object"} if params is None else params
      if not isinstance(params, dict) or params.get("type", "object") != "object":
        raise ValueError(f"tool {names[i]!r}: parameters must be an object schema")
      self._args.append(self._compile({**params, "type": "object"}))
      for lit in _literals([names[i]]):
        self._name_lits[lit] = i
    self._name_node = None
    if names:
      node = _Node()
      node.lits = self._lit_id(tuple(self._name_lits))
      node.min_len = min(len(s) for s in self._name_lits)
      self._name_node = self._add(node)
    self._schema = None if schema is None else self._compile(schema)
    self.finish_cost = functools.lru_cache(maxsize=1 << 16)(self._finish_cost)
    self._steps: dict[tuple, tuple | None] = {}

  # -- schemas --

  def _lit_id(self, strings: tuple[bytes, ...]) -> int:
    if strings not in self._lit_ids:
      self._lit_ids[strings] = len(self._lits)
      self._lits.append(_Lits(strings))
    return self._lit_ids[strings]

  def _add(self, node: _Node) -> int:
    self._nodes.append(node)
    return len(self._nodes) - 1

  def _compile(self, schema: Any) -> int:
    if schema is True or schema == {}:
      return 0
    if not isinstance(schema, dict):
      raise ValueError(f"not a JSON Schema this grammar supports: {schema!r}")
    node = _Node()
    if "const" in schema or "enum" in schema:
      values = [schema["const"]] if "const" in schema else list(schema["enum"])
      if not values:
        raise ValueError(f"an empty enum admits no value: {schema!r}")
      node.lits = self._lit_id(_literals(values))
      node.min_len = min(len(s) for s in self._lits[node.lits].complete)
      return self._add(node)
    types = schema.get("type")
    if types is None:
      types = ["object"] if "properties" in schema else ["array"] if "items" in schema else _TYPES
    types = {types} if isinstance(types, str) else set(types)
    if not types or types - _TYPES:
      raise ValueError(f"unknown JSON Schema type(s) in {schema!r}")
    if {"integer", "number"} <= types:
      types.discard("integer")
    node.types = frozenset(types)
    lens = []
    if "object" in types:
      props = schema.get("properties")
      extra = schema.get("additionalProperties")
      if props is not None or extra is False:
        node.props = {k: self._compile(v) for k, v in (props or {}).items()}
        node.required = frozenset(schema.get("required", ()))
        if node.required - set(node.props):
          raise ValueError(f"required keys that are not properties: {schema!r}")
        req = sorted(node.required)
        lens.append(2 + sum(self._member_len(node, k) for k in req) + max(len(req) - 1, 0))
      else:
        node.values = self._compile(extra) if isinstance(extra, dict) else 0
        lens.append(2)
    if "array" in types:
      items = schema.get("items")
      node.items = self._compile(items) if isinstance(items, dict) else 0
      lens.append(2)
    lens += [{"string": 2, "boolean": 4, "null": 4}.get(t, 1) for t in types - {"object", "array"}]
    node.min_len = min(lens)
    return self._add(node)

  def _member_len(self, node: _Node, key: str) -> int:
    """Symbols of the shortest ``"key":value`` of a closed object's property."""
    return len(json.dumps(key, ensure_ascii=False).encode()) + 1 + self._min(node.props[key])

  def _min(self, n: int) -> int:
    return self._nodes[n].min_len

  def _key_lits(self, node: _Node, seen: frozenset[str]) -> int | None:
    left = [k for k in node.props if k not in seen]
    return self._lit_id(_literals(left)) if left else None

  # -- states --

  def initial(self, mode: Mode = "auto") -> tuple:
    """The state before the first generated symbol."""
    if mode == "json":
      if self._schema is None:
        raise ValueError("mode='json' needs ToolCallGrammar(schema=...)")
      return (("r", "v"), ("v", self._schema, False))
    if mode not in ("auto", "required"):
      raise ValueError(f"mode must be auto, required or json, got {mode!r}")
    if mode == "required" and not self.tool_names:
      raise ValueError("mode='required' needs tools")
    return (("t", "content" if mode == "auto" else "start", None, b""),)

  def feed(self, state: tuple | None, symbols: Iterable[int]) -> tuple | None:
    """The state after ``symbols``; None once one is rejected."""
    for sym in symbols:
      if state is None:
        return None
      state = self.step(state, sym)
    return state

  def accepts(self, text: str, mode: Mode = "json") -> bool:
    """Whether ``text`` is a whole sentence: a turn with its ``<|im_end|>``, or a JSON value."""
    state = self.feed(self.initial(mode), text_symbols(text))
    return state is not None and self.finish_cost(state) == 0

  def is_prefix(self, text: str, mode: Mode = "json") -> bool:
    """Whether ``text`` can still be completed to a sentence."""
    return self.feed(self.initial(mode), text_symbols(text)) is not None

  def step(self, state: tuple, sym: int) -> tuple | None:
    """The state after symbol ``sym``, or None if the grammar rejects it (memoized)."""
    key = (state, sym)
    if key in self._steps:
      return self._steps[key]
    if len(self._steps) > 1 << 18:
      self._steps.clear()
    out = self._steps[key] = self._step(state, sym)
    return out

  def _step(self, stack: tuple, sym: int) -> tuple | None:
    while True:
      top = stack[-1]
      res = getattr(self, "_s_" + top[0])(top, sym)
      if res is None:
        return None
      if isinstance(res, _Done):
        if len(stack) == 1:
          return None
        stack = (*stack[:-2], self._child_done(stack[-2], res.result))
        if res.consumed:
          return stack
        continue
      frames, consumed = res
      stack = stack[:-1] + frames
      if consumed:
        return stack

  def _child_done(self, parent: tuple, result: bytes | None) -> tuple:
    """``parent`` once its innermost child (a value, a key, a call) is complete."""
    tag = parent[0]
    if tag == "o":
      _, n, phase, seen, key = parent
      if phase == "k":
        return ("o", n, "colon", seen, None if result is None else json.loads(result))
      return ("o", n, "after", seen if key is None else seen | {key}, None)
    if tag == "a":
      return ("a", parent[1], "after")
    if tag == "c":
      if parent[1] == "c2v":
        return ("c", "c3", self._name_lits[result])
      return ("c", {"c1k": "c2", "c5k": "c6", "c6v": "c7"}[parent[1]], parent[2])
    if tag == "t":
      return ("t", "close_nl", None, b"")
    if tag == "r":
      return ("r", "end")
    raise AssertionError(parent)

  # -- each frame on one symbol: (frames replacing it, consumed) | _Done | None (rejected) --

  def _s_r(self, f, sym):  # the root: its one value is all there is
    return None

  def _s_v(self, f, sym):
    _, n, space_ok = f
    if sym >= SPECIAL_BASE:
      return None
    if sym == _SP and space_ok:
      return (("v", n, False),), True
    node = self._nodes[n]
    if node.lits is not None:
      return (("l", node.lits, b""),), False
    types = node.types
    if sym == _QUOTE and "string" in types:
      return (("s", 0, None, b""),), True
    if sym == 0x7B and "object" in types:  # {
      return (("o", n, "open", frozenset(), None),), True
    if sym == 0x5B and "array" in types:  # [
      return (("a", n, "open"),), True
    if (sym == 0x2D or sym in _DIGITS) and types & {"number", "integer"}:
      phase = "minus" if sym == 0x2D else "zero" if sym == 0x30 else "int"
      return (("n", "number" not in types, phase),), True
    if sym in (0x74, 0x66) and "boolean" in types:  # t f
      return (("l", self._lit_id((b"true", b"false")), b""),), False
    if sym == 0x6E and "null" in types:  # n
      return (("l", self._lit_id((b"null",)), b""),), False
    return None

  def _s_l(self, f, sym):
    _, lid, prefix = f
    lits = self._lits[lid]
    if sym < SPECIAL_BASE and sym in lits.next.get(prefix, ()):
      p = prefix + bytes((sym,))
      if p in lits.complete and p not in lits.next:
        return _Done(p, True)
      return (("l", lid, p),), True
    if prefix in lits.complete:
      return _Done(prefix, False)
    return None

  def _s_s(self, f, sym):
    _, esc, utf, sp = f
    if sym >= SPECIAL_BASE:
      return None
    if esc == 0:
      if utf is None:
        if sym == _QUOTE:
          return _DONE
        if sym == 0x5C:  # backslash
          return (("s", -1, None, b""),), True
        if sym < 0x20:
          return None
      nxt = _text_byte(utf, sp, sym)
      return None if nxt is None else ((("s", 0, *nxt),), True)
    if esc == -1:
      if sym == 0x75:  # u
        return (("s", 4, None, b""),), True
      return ((("s", 0, None, b""),), True) if sym in _ESCAPES else None
    return ((("s", esc - 1, None, b""),), True) if sym in _HEX else None

  def _s_n(self, f, sym):
    _, integer, phase = f
    digit = sym in _DIGITS
    if phase in ("minus", "frac0", "exps"):
      if not digit:
        return None
      nxt = {"minus": "zero" if sym == 0x30 else "int", "frac0": "frac", "exps": "exp"}[phase]
      return (("n", integer, nxt),), True
    if phase == "exp0":
      if sym in (0x2B, 0x2D):  # + -
        return (("n", integer, "exps"),), True
      return ((("n", integer, "exp"),), True) if digit else None
    if digit and phase in ("int", "frac", "exp"):
      return (f,), True
    if not integer and sym == 0x2E and phase in ("zero", "int"):  # .
      return (("n", integer, "frac0"),), True
    if not integer and sym in (0x65, 0x45) and phase in ("zero", "int", "frac"):  # e E
      return (("n", integer, "exp0"),), True
    return _DONE_UNCONSUMED

  def _s_o(self, f, sym):
    _, n, phase, seen, key = f
    node = self._nodes[n]
    closable = node.props is None or node.required <= seen
    if phase in ("open", "after") and sym == 0x7D and closable:  # }
      return _DONE
    if phase == "after":
      more = node.props is None or self._key_lits(node, seen) is not None
      return ((("o", n, "comma", seen, None),), True) if sym == _COMMA and more else None
    if phase == "comma" and sym == _SP:
      return (("o", n, "cws", seen, None),), True
    if phase in ("open", "comma", "cws") and sym == _QUOTE:
      if node.props is None:
        return (("o", n, "k", seen, None), ("s", 0, None, b"")), True
      lid = self._key_lits(node, seen)
      if lid is None:
        return None
      return (("o", n, "k", seen, None), ("l", lid, b"")), False
    if phase == "colon" and sym == _COLON:
      value = node.values if node.props is None else node.props[key]
      return (("o", n, "v", seen, key), ("v", value, True)), True
    return None

  def _s_a(self, f, sym):
    _, n, phase = f
    if sym == 0x5D:  # ]
      return _DONE
    items = self._nodes[n].items
    if phase == "open":
      return (("a", n, "v"), ("v", items, False)), False
    if sym == _COMMA:
      return (("a", n, "v"), ("v", items, True)), True
    return None

  def _s_c(self, f, sym):
    _, phase, tool = f
    if phase == "c0":
      return ((("c", "c1", None),), True) if sym == 0x7B else None
    if phase in ("c1", "c4", "c5") and sym == _QUOTE:
      key = self._lit_id((_NAME_KEY,) if phase == "c1" else (_ARGS_KEY,))
      return (("c", "c1k" if phase == "c1" else "c5k", tool), ("l", key, b"")), False
    if phase == "c4" and sym == _SP:
      return (("c", "c5", tool),), True
    if phase == "c2" and sym == _COLON:
      return (("c", "c2v", None), ("v", self._name_node, True)), True
    if phase == "c3" and sym == _COMMA:
      return (("c", "c4", tool),), True
    if phase == "c6" and sym == _COLON:
      return (("c", "c6v", tool), ("v", self._args[tool], True)), True
    if phase == "c7" and sym == 0x7D:
      return _DONE
    return None

  def _s_t(self, f, sym):
    _, phase, utf, sp = f
    if phase == "content":
      if sym == IM_END_SYM and utf is None:
        return (("t", "done", None, b""),), True
      if sym == CALL_SYM and utf is None and self.tool_names:
        return (("t", "open_nl", None, b""),), True
      if sym >= SPECIAL_BASE:
        return None
      nxt = _text_byte(utf, sp, sym)
      return None if nxt is None else ((("t", "content", *nxt),), True)
    if phase == "after":
      if sym == IM_END_SYM:
        return (("t", "done", None, b""),), True
      return ((("t", "between", None, b""),), True) if sym == _NL else None
    if phase == "open_nl":
      return ((("t", "call", None, b""), ("c", "c0", None)), True) if sym == _NL else None
    want = {"start": CALL_SYM, "between": CALL_SYM, "close_nl": _NL, "close": CALL_END_SYM}
    if sym != want.get(phase):
      return None
    nxt = {"start": "open_nl", "between": "open_nl", "close_nl": "close", "close": "after"}
    return (("t", nxt[phase], None, b""),), True

  # -- costs: symbols of the shortest completion --

  def _finish_cost(self, stack: tuple) -> int:
    top = stack[-1]
    lid, prefix = (top[1], top[2]) if top[0] == "l" else (None, b"")
    if top[0] == "v":
      lid = self._nodes[top[1]].lits
    if lid is None:
      own = self._own_cost(top)
      if len(stack) == 1:
        return own
      return own + self.finish_cost((*stack[:-2], self._child_done(stack[-2], None)))
    best = BIG
    for s in self._lits[lid].rest[prefix]:  # the parent's cost depends on which literal
      cost = len(s) - len(prefix)
      if len(stack) > 1:
        cost += self.finish_cost((*stack[:-2], self._child_done(stack[-2], s)))
      best = min(best, cost)
    return best

  def _call_cost(self, tool: int) -> int:
    """Symbols after a call's name: ``,"arguments":ARGS}``."""
    return 1 + len(_ARGS_KEY) + 1 + self._min(self._args[tool]) + 1

  def _name_cost(self) -> int:
    """Symbols of the shortest ``NAME,"arguments":ARGS}``."""
    return min(len(s) + self._call_cost(i) for s, i in self._name_lits.items())

  def _own_cost(self, f: tuple) -> int:
    """Symbols that finish frame ``f``, innermost, with nothing of its own pending."""
    tag = f[0]
    if tag == "v":
      return self._min(f[1])
    if tag == "s":
      esc, utf = f[1], f[2]
      return ((utf[0] if utf else 0) + 1) if esc == 0 else 2 if esc == -1 else esc + 1
    if tag == "n":
      return 1 if f[2] in ("minus", "frac0", "exp0", "exps") else 0
    if tag == "a":
      return 1
    if tag == "o":
      return self._object_cost(f)
    if tag == "c":
      phase, tool = f[1], f[2]
      head = {"c0": 1 + len(_NAME_KEY) + 1, "c1": len(_NAME_KEY) + 1, "c2": 1}
      if phase in head:  # ...NAME,"arguments":ARGS}
        return head[phase] + self._name_cost()
      if phase == "c3":
        return self._call_cost(tool)
      if phase == "c7":
        return 1
      key = {"c4": len(_ARGS_KEY) + 1, "c5": len(_ARGS_KEY) + 1, "c6": 1}[phase]
      return key + self._min(self._args[tool]) + 1
    if tag == "t":
      phase, utf = f[1], f[2]
      # After <tool_call>: \n {...} \n </tool_call> <|im_end|>.
      opened = 1 + self._own_cost(("c", "c0", None)) + 3 if self.tool_names else BIG
      costs = {"content": 1 + (utf[0] if utf else 0), "start": 1 + opened, "between": 1 + opened}
      costs.update(open_nl=opened, close_nl=3, close=2, after=1, done=0)
      return costs[phase]
    if tag == "r":
      return 0
    raise AssertionError(f)

  def _object_cost(self, f: tuple) -> int:
    _, n, phase, seen, key = f
    node = self._nodes[n]
    if node.props is None:
      member, missing = 2 + 1 + self._min(node.values), []  # "":value
    else:
      left = [k for k in node.props if k not in seen and k != key]
      member = min((self._member_len(node, k) for k in left), default=BIG)
      missing = sorted(node.required - seen - {key})
    need = sum(self._member_len(node, k) for k in missing) + len(missing)  # ...,"k":v ,
    if phase == "colon":  # : value [,"k":v ...] }
      value = node.values if node.props is None else node.props[key]
      return 1 + self._min(value) + need + 1
    if phase in ("comma", "cws"):  # "k":v [,"k":v ...] }
      return need if missing else member + 1
    if phase == "open":
      return need if missing else 1
    return need + 1 if missing else 1  # after: [,"k":v ...] }


# --- the vocabulary ----------------------------------------------------------------------


class Vocabulary:
  """Each token id's symbols; ``()`` for ids never allowed (pad, unk and other control tokens,
  tokens without bytes of their own)."""

  def __init__(self, symbols: Sequence[Sequence[int]]):
    self.symbols = [tuple(s) for s in symbols]
    self.size = len(self.symbols)
    self.first = np.full(self.size, -1, np.int64)
    contains = np.zeros((self.size, 256), bool)  # [token, byte]: the byte is in the token
    self.specials: dict[int, int] = {}  # special symbol -> id
    for i, s in enumerate(self.symbols):
      if s and s[0] >= SPECIAL_BASE:
        self.specials.setdefault(s[0], i)
      elif s:
        self.first[i] = s[0]
        contains[i, list(s)] = True
    self.is_bytes = self.first >= 0
    #: each token's set of bytes, as four 64-bit words
    self.byte_sets = np.packbits(contains, axis=1).view(np.uint64)

  @classmethod
  def from_tokenizer(cls, tokenizer, special_ids: dict[str, int] | None = None) -> Vocabulary:
    """The vocabulary of ``tokenizer`` (``token_bytes`` when it has one, else each id's decoded
    text); ``special_ids`` maps the chat's special tokens to their ids (default: the
    tokenizer's ``token_to_id``)."""
    if special_ids is None:
      special_ids = {s: tokenizer.token_to_id(s) for s in SPECIALS}
    by_id = {i: SPECIAL_BASE + SPECIALS.index(s) for s, i in special_ids.items() if i is not None}
    token_bytes = getattr(tokenizer, "token_bytes", None) or functools.partial(
      _decoded_bytes, tokenizer
    )
    out = []
    for i in range(tokenizer.vocab_size):
      b = None if i in by_id else token_bytes(i)
      out.append((by_id[i],) if i in by_id else tuple(b) if b else ())
    return cls(out)


def _decoded_bytes(tokenizer, i: int) -> bytes | None:
  text = tokenizer.decode([i])
  return None if not text or "\ufffd" in text else text.encode()


# --- grammar x vocabulary ----------------------------------------------------------------


class TokenConstraint:
  """A grammar over a vocabulary: per state, the finish cost after each token, cached."""

  def __init__(self, grammar: ToolCallGrammar, vocab: Vocabulary, cache_size: int = 4096):
    self.grammar, self.vocab = grammar, vocab
    self.costs = functools.lru_cache(maxsize=cache_size)(self._costs)

  def _costs(self, state: tuple) -> np.ndarray:
    """int32 [vocab]: ``finish_cost`` after each token from ``state``; `BIG` where rejected."""
    g, v = self.grammar, self.vocab
    costs = np.full(v.size, BIG, np.int32)
    for sym, i in v.specials.items():
      nxt = g.step(state, sym)
      if nxt is not None:
        costs[i] = g.finish_cost(nxt)
    nexts = [g.step(state, b) for b in range(256)]
    ok = np.array([s is not None for s in nexts])
    loop = np.packbits([s == state for s in nexts]).view(np.uint64)  # bytes that keep it as is
    cand = v.is_bytes & ok[np.maximum(v.first, 0)]
    # Tokens made only of such bytes (a string's plain characters) cost no walk.
    fast = cand & ~(v.byte_sets & ~loop).any(axis=1)
    costs[fast] = g.finish_cost(state)
    for i in np.flatnonzero(cand & ~fast):
      symbols = v.symbols[i]
      s = nexts[symbols[0]]
      for sym in symbols[1:]:
        s = g.step(s, sym)
        if s is None:
          break
      else:
        costs[i] = g.finish_cost(s)
    return costs

  def advance(self, state: tuple | None, token: int) -> tuple | None:
    return self.grammar.feed(state, self.vocab.symbols[int(token)] or (_NEVER,))

  def start(self, mode: Mode = "auto", forced: Sequence[int] = ()) -> Constraint:
    """One sequence's constraint, after the ``forced`` ids its turn starts with."""
    c = Constraint(self, self.grammar.initial(mode))
    for token in forced:
      c.advance(token)
    if c.state is None:
      raise ValueError("the forced start of the turn is not in the grammar")
    return c


class Constraint:
  """One sequence being decoded under a `TokenConstraint`."""

  def __init__(self, tc: TokenConstraint, state: tuple):
    self.tc, self.state = tc, state

  def allowed(self, budget: int | None = None) -> np.ndarray:
    """bool [vocab]: the tokens the grammar allows next and, given ``budget`` (tokens left after
    this one), after which the turn can still be finished in time. Never empty: when the budget
    cannot be met the grammar alone applies, and a dead state allows only ``<|im_end|>``."""
    if self.state is None:
      mask = np.zeros(self.tc.vocab.size, bool)
    else:
      costs = self.tc.costs(self.state)
      if budget is not None and (mask := costs <= budget).any():
        return mask
      mask = costs < BIG
    if not mask.any():
      mask[self.tc.vocab.specials[IM_END_SYM]] = True
    return mask

  def advance(self, token: int) -> None:
    self.state = self.tc.advance(self.state, token)

  @property
  def finished(self) -> bool:
    return self.state is not None and self.tc.grammar.finish_cost(self.state) == 0


def tools_with_enums(
  tools: Sequence[dict[str, Any]],
  services: Sequence[str] | None = None,
  tool_names: Sequence[str] | None = None,
) -> list[dict[str, Any]]:
  """Copies of ``tools`` (the meta-tools) whose ``service`` and ``tool`` arguments are limited to
  ``services`` and ``tool_names`` by an ``enum``, for a caller that knows them (from an episode's
  environment): constrained decoding then names only those. ``tool`` gets one enum over all the
  services' tools (the schema cannot make it depend on ``service``)."""
  enums = {"service": services, "tool": tool_names}
  out = []
  for tool in tools:
    tool = json.loads(json.dumps(tool))
    props = (tool.get("function", tool).get("parameters") or {}).get("properties") or {}
    for key, values in enums.items():
      if key in props and values is not None:
        props[key]["enum"] = sorted(set(values))
    out.append(tool)
  return out
