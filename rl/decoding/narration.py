"""Narrated calls: a turn that says which call it makes makes that call.

The oracle's trajectories (``compoworld.agents.agent.OracleAgent``, ``narrate=True``) open each
tool call with a sentence that names it, and the call follows at once::

  Now I'll call get_invoice on invoicing.
  <tool_call>
  {"name": "call_tool", "arguments": {"service": "invoicing", "tool": "get_invoice", "arguments": {...}}}
  </tool_call>

A policy trained on them decides the call in that sentence. Where it has not seen the step (the
first call into the second service of a held-out pair) it often names a tool and then loses the
format: "Now I'll call make_offer on expenses." followed by JSON written as plain text, or
"Now I'll call add_", "pay_date": ..., and the episode ends without a call.

``NarratedConstraint`` wraps a turn's constraint (`rl.decoding.arguments.ArgumentConstraint`, or
the grammar's `rl.decoding.constrained.Constraint`) and, once the turn's text starts with
``Now I'll call ``, holds it to one of the sentences of the episode's ``(service, tool)`` pairs,
``{tool} on {service}.``, then a line break, ``<tool_call>`` and the call's head up to the
arguments it passes on, naming the same service and tool: the model still chooses the tool, token
by token, among the episode's (the service is then the one that has it); the format is no longer
its to lose. A turn that starts otherwise (a final answer, another sentence) is left as the inner
constraint leaves it. A turn that quotes the request first (``OracleAgent(quote=True)``:
``Next step: "<a sentence>"`` and a line break) is held from the ``Now I'll call `` that
follows; given the instruction's ``sentences`` (`instruction_sentences`), the quote is held to
one of them, copied whole (a quoting policy that has not seen the pair often writes the right
sentence with another opening word, or loses it halfway); without, it is free.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from compoworld.tasks.authoring import without_connective
from rl.decoding.constrained import Vocabulary
from rl.decoding.symbols import text_symbols

#: How a narrated call's sentence starts (``OracleAgent``'s narration).
PREFIX = "Now I'll call "
_PREFIX = tuple(text_symbols(PREFIX))
#: How a quoted sentence of the request opens and closes, before the narrated call.
QUOTE_OPEN, QUOTE_CLOSE = 'Next step: "', '"\n'
_QUOTE = tuple(text_symbols(QUOTE_OPEN))
_QUOTE_END = tuple(text_symbols(QUOTE_CLOSE))
#: Token prefixes indexed up to this many symbols (`_Index.starting_with`).
_INDEXED = 3


def narrated_call(service: str, tool: str) -> str:
  """What a narrated call's turn holds from its first character to the object it passes on, as
  the chat format renders the oracle's (``rl.data.chat.assistant_body``)."""
  head = {"service": service, "tool": tool}
  head_text = json.dumps(head)[:-1]  # '{"service": "s", "tool": "t"' without its "}"
  return (
    f"{PREFIX}{tool} on {service}.\n<tool_call>\n"
    f'{{"name": "call_tool", "arguments": {head_text}, "arguments": '
  )


class _Index:
  """A vocabulary's tokens by their symbols: the ids of each symbol sequence, and of each
  sequence's first 1..`_INDEXED` symbols."""

  def __init__(self, vocab: Vocabulary):
    self.size = vocab.size
    self.exact: dict[tuple[int, ...], list[int]] = {}
    self.prefix: dict[tuple[int, ...], list[int]] = {}
    for i, s in enumerate(vocab.symbols):
      if not s:
        continue
      self.exact.setdefault(s, []).append(i)
      for k in range(1, min(len(s), _INDEXED) + 1):
        self.prefix.setdefault(s[:k], []).append(i)
    self.longest = max((len(s) for s in vocab.symbols), default=0)
    self.symbols = vocab.symbols

  def starting_with(self, head: tuple[int, ...]) -> list[int]:
    """The ids of the tokens whose symbols start with ``head`` (non-empty)."""
    ids = self.prefix.get(head[:_INDEXED], [])
    if len(head) <= _INDEXED:
      return ids
    return [i for i in ids if self.symbols[i][: len(head)] == head]

  def fitting(self, rest: tuple[int, ...]) -> list[int]:
    """The ids of the tokens that continue a text whose next symbols must be ``rest`` (non-empty):
    a token that is a prefix of ``rest``, or one that starts with all of it (and goes on past
    it, where the inner constraint takes over)."""
    ids = [
      i for k in range(1, min(len(rest), self.longest) + 1) for i in self.exact.get(rest[:k], ())
    ]
    return ids + [i for i in self.starting_with(rest) if len(self.symbols[i]) > len(rest)]


@functools.lru_cache(maxsize=4)
def _index(vocab: Vocabulary) -> _Index:
  return _Index(vocab)


@functools.lru_cache(maxsize=64)
def _texts(pairs: frozenset[tuple[str, str]]) -> tuple[tuple[int, ...], ...]:
  return tuple(tuple(text_symbols(narrated_call(s, t))) for s, t in sorted(pairs))


@functools.lru_cache(maxsize=64)
def _quotes(sentences: tuple[str, ...]) -> tuple[tuple[int, ...], ...]:
  return tuple(tuple(text_symbols(f"{QUOTE_OPEN}{s}{QUOTE_CLOSE}")) for s in sentences)


def instruction_sentences(messages: Sequence[dict[str, Any]]) -> list[str]:
  """The sentences of a conversation's instruction (its first user message), each also
  without its opening connective where it has one (``OracleAgent(quote="bare")``'s quotes):
  what a quoting policy may quote."""
  user = next((m for m in messages if m.get("role") == "user"), None)
  text = user.get("content") if user is not None else None
  if not isinstance(text, str):
    return []
  sentences = [s for s in re.split(r"(?<=[.?!])\s+(?=[A-Z])", text.strip()) if s]
  return list(dict.fromkeys(f for s in sentences for f in (s, without_connective(s))))


def _compatible(a: Sequence[int], b: Sequence[int]) -> bool:
  """Whether one of ``a`` and ``b`` is a prefix of the other."""
  n = min(len(a), len(b))
  return tuple(a[:n]) == tuple(b[:n])


class NarratedConstraint:
  """A turn's ``inner`` constraint, with a call's narration held to the call it names (module
  docstring). ``pairs`` are the ``(service, tool)`` the episode may call. The same interface as
  the inner constraint: ``allowed``, ``advance``, ``best``, ``proposal`` / ``admits``,
  ``copy``, ``finished``."""

  def __init__(
    self,
    inner: Any,
    vocab: Vocabulary,
    pairs: Iterable[tuple[str, str]],
    sentences: Iterable[str] = (),
  ):
    self.inner, self.vocab = inner, vocab
    self._index = _index(vocab)
    self._live = _texts(frozenset(pairs))  # the narrated calls the turn's text can still be
    if not self._live:
      raise ValueError("a narrated call needs (service, tool) pairs to name")
    self.sentences = tuple(dict.fromkeys(sentences))  # what a quote may be (none: anything)
    self._quotes = _quotes(self.sentences)
    self._text: tuple[int, ...] = ()  # the turn's symbols so far, while the narration decides
    self._phase = "open"  # open (a prefix of PREFIX) | quote | named | free | through

  @property
  def holding(self) -> bool:
    """True while the narration still decides what the next token may be."""
    return self._phase in ("open", "named") or (self._phase == "quote" and bool(self._quotes))

  def _narration_mask(self) -> np.ndarray | None:
    """bool [vocab]: the tokens the narration allows next; None when it allows every one."""
    index, text = self._index, self._text
    if self._phase == "quote" or (self._phase == "open" and not _compatible(text, _PREFIX)):
      return self._mask_to([c for c in self._quotes if _compatible(c, text)])
    if self._phase == "open":
      rest = _PREFIX[len(text) :]
      # Only tokens that complete the prefix and go on past it can break a narrated call.
      crossing = [i for i in index.starting_with(rest) if len(index.symbols[i]) > len(rest)]
      bad = [i for i in crossing if not self._fits(text + index.symbols[i])]
      if not bad:
        return None
      mask = np.ones(index.size, bool)
      mask[bad] = False
      return mask
    return self._mask_to(self._live)

  def _mask_to(self, texts: Sequence[tuple[int, ...]]) -> np.ndarray | None:
    """The tokens that keep the turn's text on the way to one of ``texts`` (None: no text)."""
    if not texts:
      return None
    mask = np.zeros(self._index.size, bool)
    for rest in {c[len(self._text) :] for c in texts}:
      mask[self._index.fitting(rest)] = True
    return mask

  def _fits(self, text: tuple[int, ...]) -> bool:
    return any(_compatible(c, text) for c in self._live)

  def proposal(self, budget: int | None = None) -> np.ndarray:
    """The inner constraint's proposal (`rl.decoding.arguments.ArgumentConstraint.proposal`),
    narrowed to the narration's tokens."""
    mask = self.inner.proposal(budget)
    return mask if not self.holding else _narrowed(mask, self._narration_mask())

  def admits(self, token: int) -> bool:
    return self.inner.admits(token)

  def allowed(self, budget: int | None = None) -> np.ndarray:
    """bool [vocab]: the inner constraint's tokens that keep a narrated call whole. Never
    empty: where none does (a budget too short for the call), the inner constraint's."""
    mask = self.inner.allowed(budget)
    return mask if not self.holding else _narrowed(mask, self._narration_mask())

  def best(self, logits: np.ndarray, budget: int | None = None, tries: int = 16) -> int:
    """Greedy's token: ``argmax(where(allowed(budget), logits, -inf))``. While a call is named,
    the few tokens the narration allows are tried from the likeliest, as the inner constraint
    tries its proposal (``admits``), before any whole mask is built."""
    narration = self._narration_mask() if self.holding else None
    admits = getattr(self.inner, "admits", None)
    if narration is None:
      if admits is None:  # a bare grammar (`rl.decoding.constrained.Constraint`)
        return self.inner.best(logits, budget)
      return self.inner.best(logits, budget, tries)
    if admits is not None:
      ids = np.flatnonzero(narration & self.inner.proposal(budget))
      for i in ids[np.argsort(-logits[ids], kind="stable")][:tries]:
        if admits(int(i)):
          return int(i)
    allowed = _narrowed(self.inner.allowed(budget), narration)  # `allowed`, narration reused
    return int(np.argmax(np.where(allowed, logits, -np.inf)))

  def advance(self, token: int) -> None:
    self.inner.advance(token)
    if self.holding or self._phase == "quote":
      self._take(self._text + self.vocab.symbols[int(token)])

  def _take(self, text: tuple[int, ...]) -> None:
    """The turn's text since the narration began to decide (``text``): its next phase."""
    if self._phase == "quote":
      end = _find(text, _QUOTE_END, len(_QUOTE))
      if end < 0:
        self._text = text
        return
      self._phase, text = "open", text[end + len(_QUOTE_END) :]  # the call's sentence begins
    if self._phase == "open" and not _compatible(text, _PREFIX):
      if not _compatible(text, _QUOTE):
        self._phase = "free"
        return
      if len(text) < len(_QUOTE):
        self._text = text  # the quote's opening, so far
        return
      self._phase = "quote"
      self._take(text)  # the quote may close in the same token
      return
    self._text = text
    if len(text) < len(_PREFIX):
      return
    self._phase = "named"
    self._live = tuple(c for c in self._live if _compatible(c, text))
    if not self._live or any(len(text) >= len(c) for c in self._live):
      self._phase = "through"  # the call's head is written (or, off the mask, lost): the inner's

  def copy(self) -> NarratedConstraint:
    other = NarratedConstraint.__new__(NarratedConstraint)
    other.__dict__.update(self.__dict__, inner=self.inner.copy())
    return other

  @property
  def grounding(self) -> bool:
    return getattr(self.inner, "grounding", False)

  @property
  def scanner(self):
    return self.inner.scanner

  @property
  def finished(self) -> bool:
    return self.inner.finished


def _find(text: Sequence[int], part: Sequence[int], start: int) -> int:
  """Where ``part`` first stands in ``text`` at or after ``start``; -1 if nowhere."""
  n = len(part)
  return next((i for i in range(start, len(text) - n + 1) if tuple(text[i : i + n]) == part), -1)


def _narrowed(mask: np.ndarray, narration: np.ndarray | None) -> np.ndarray:
  if narration is None:
    return mask
  kept = mask & narration
  return kept if kept.any() else mask


def episode_pairs(
  services: Sequence[str], schemas: dict[tuple[str, str], Any]
) -> list[tuple[str, str]]:
  """The ``(service, tool)`` pairs of ``schemas`` (`rl.decoding.modes.library_schemas`) whose
  service is one of ``services``: what a narrated call may name in an episode."""
  keep = set(services)
  return sorted(pair for pair in schemas if pair[0] in keep)
