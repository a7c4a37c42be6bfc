"""The tool-call grammar: a pushdown automaton over symbols (``rl.decoding.symbols``), compiled
from OpenAI function schemas; it knows nothing of tokens or JAX (``rl.decoding.constrained`` puts
it over a vocabulary).

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
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Sequence
from typing import Any

from rl.decoding.symbols import (
  _ARGS_KEY,
  _COLON,
  _COMMA,
  _DIGITS,
  _ESCAPES,
  _HEX,
  _NAME_KEY,
  _NL,
  _QUOTE,
  _SP,
  _TYPES,
  BIG,
  CALL_END_SYM,
  CALL_SYM,
  IM_END_SYM,
  SPECIAL_BASE,
  Mode,
  _literals,
  _text_byte,
  text_symbols,
)


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
