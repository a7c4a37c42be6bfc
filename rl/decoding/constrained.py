"""Grammar-constrained decoding of tool calls from the tools' JSON Schemas.

As vLLM's and SGLang's guided decoding do for tool calls: while a turn is constrained, every
sampled token keeps the text a prefix of a valid assistant turn in the chat format (``rl.data.chat``),
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
  sequence's state for a sampler (``allowed``, ``advance``): see ``rl.serve.policy.Policy.generate``.

The grammar itself (the turn, and how far JSON follows the schema) is ``rl.decoding.grammar``.

Budget: ``Constraint.allowed(budget)`` only lets a token through if the turn can still be
finished in the ``budget`` tokens left after it (with byte fallback every byte is a token, so
``finish_cost`` in symbols bounds it in tokens), so a constrained turn given enough
``max_tokens`` always ends with well-formed calls. With too few tokens from the start the
grammar alone applies and the turn is cut at its budget, as any other.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from rl.decoding.grammar import ToolCallGrammar
from rl.decoding.symbols import (  # noqa: F401 (the grammar's symbols, as rl.constrained has always offered them)
  _NEVER,
  BIG,
  CALL_END_SYM,
  CALL_SYM,
  IM_END_SYM,
  SPECIAL_BASE,
  SPECIALS,
  Mode,
  text_symbols,
)

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

  def best(self, logits: np.ndarray, budget: int | None = None) -> int:
    """The most likely token ``allowed(budget)`` gives (lowest id among ties): greedy's."""
    return int(np.argmax(np.where(self.allowed(budget), logits, -np.inf)))

  def advance(self, token: int) -> None:
    self.state = self.tc.advance(self.state, token)

  def copy(self) -> Constraint:
    return Constraint(self.tc, self.state)  # states are immutable tuples

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
  services' tools (the schema cannot make it depend on ``service``; typed decoding,
  `rl.decoding.arguments.ArgumentConstraint`, narrows it to the named service's)."""
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
