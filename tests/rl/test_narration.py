"""Narrated calls (rl.decoding.narration): a turn that says which call it makes makes that call."""

import json

import numpy as np
import pytest

from rl.decoding.constrained import SPECIAL_BASE, SPECIALS, Vocabulary
from rl.decoding.modes import DECODINGS, TurnConstraints, library_schemas
from rl.decoding.narration import NarratedConstraint, episode_pairs, narrated_call
from rl.decoding.symbols import text_symbols

WORDS = ["Now", " I'll", " call", " make", "_offer", " on", " expenses", " recruiting", ".\n"]
WORDS += ['{"name": ', '"call_tool"', "The", " answer", ' {"', "add_"]
PAIRS = [("recruiting", "make_offer"), ("recruiting", "list_candidates"), ("expenses", "add_item")]


def toy_vocab():
  """Every byte, a few words, then the chat's specials."""
  symbols = [(b,) for b in range(256)] + [tuple(w.encode()) for w in WORDS]
  symbols += [(SPECIAL_BASE + k,) for k in range(len(SPECIALS))]
  return Vocabulary(symbols)


class Free:
  """An inner constraint that allows everything (what the narration alone does shows)."""

  def __init__(self, size):
    self.size, self.fed = size, []

  def allowed(self, budget=None):
    return np.ones(self.size, bool)

  proposal = allowed

  def admits(self, token):
    return True

  def best(self, logits, budget=None, tries=16):
    return int(np.argmax(logits))

  def advance(self, token):
    self.fed.append(token)

  def copy(self):
    other = Free(self.size)
    other.fed = list(self.fed)
    return other

  finished = False


def tokens_of(vocab, text):
  """``text`` as the vocabulary's ids, longest match first."""
  by_symbols = {s: i for i, s in reversed(list(enumerate(vocab.symbols))) if s}
  symbols, out = tuple(text_symbols(text)), []
  while symbols:
    k = max(k for k in range(1, len(symbols) + 1) if symbols[:k] in by_symbols)
    out.append(by_symbols[symbols[:k]])
    symbols = symbols[k:]
  return out


def text_of(vocab, ids):
  special = {SPECIAL_BASE + k: s.encode() for k, s in enumerate(SPECIALS)}
  return b"".join(
    bytes((s,)) if s < SPECIAL_BASE else special[s] for i in ids for s in vocab.symbols[i]
  ).decode(errors="replace")


def greedy(constraint, vocab, wanted, steps):
  """Greedy decoding under ``constraint`` by a "model" whose logits at step t favour
  ``wanted[t]`` (a fixed id sequence), as a policy that has learned a broken habit does."""
  rng = np.random.default_rng(0)
  out = []
  for t in range(steps):
    logits = rng.normal(0, 0.1, vocab.size)
    if t < len(wanted):
      logits[wanted[t]] += 10.0
    token = constraint.best(logits, None)
    assert token == int(np.argmax(np.where(constraint.allowed(), logits, -np.inf)))
    out.append(token)
    constraint.advance(token)
  return out


def test_the_narrated_call_is_the_oracles_rendering():
  from rl.data.chat import assistant_body

  message = {
    "role": "assistant",
    "content": "Now I'll call make_offer on recruiting.",
    "tool_calls": [
      {
        "function": {
          "name": "call_tool",
          "arguments": json.dumps(
            {"service": "recruiting", "tool": "make_offer", "arguments": {"salary": 1}}
          ),
        }
      }
    ],
  }
  assert assistant_body(message).startswith(narrated_call("recruiting", "make_offer"))


def test_a_broken_narration_becomes_the_call_it_names():
  """The held-out failure: the tool named, the service wrong, the call written as plain text."""
  vocab = toy_vocab()
  broken = 'Now I\'ll call make_offer on expenses.\n{"name": "call_tool", "arguments": {"x'
  wanted = tokens_of(vocab, broken)
  free = greedy(Free(vocab.size), vocab, wanted, len(wanted))
  assert text_of(vocab, free) == broken  # unconstrained, the habit wins
  c = NarratedConstraint(Free(vocab.size), vocab, PAIRS)
  head = narrated_call("recruiting", "make_offer")
  out = greedy(c, vocab, wanted, 200)
  text = text_of(vocab, out)
  assert text.startswith(head) and not c.holding  # the service is the tool's; then the inner's
  assert c.inner.fed == out  # the inner constraint saw every token


def test_after_the_tool_only_its_service_and_then_the_call_may_follow():
  vocab = toy_vocab()
  c = NarratedConstraint(Free(vocab.size), vocab, PAIRS)
  for token in tokens_of(vocab, "Now I'll call make_offer on "):
    c.advance(token)
  allowed = {text_of(vocab, [i]) for i in np.flatnonzero(c.allowed())}
  assert "r" in allowed and all("recruiting.\n".startswith(a) for a in allowed)
  # Mid tool name, only the episode's tools go on: "make" may end in "_offer", "add_" in "item".
  # The sentence's start written to its last space, byte by byte: the tool comes next.
  c = NarratedConstraint(Free(vocab.size), vocab, PAIRS)
  for byte in b"Now I'll call ":
    c.advance(byte)
  allowed = {text_of(vocab, [i]) for i in np.flatnonzero(c.allowed())}
  assert {"m", "l", "a", "add_"} <= allowed and not {"x", " ", "The"} & allowed
  c = NarratedConstraint(Free(vocab.size), vocab, PAIRS)
  for token in tokens_of(vocab, "Now I'll call add_"):
    c.advance(token)
  allowed = {text_of(vocab, [i]) for i in np.flatnonzero(c.allowed())}
  assert "i" in allowed and all("item on expenses.\n".startswith(a) for a in allowed)


def test_a_turn_that_names_no_call_is_left_free():
  vocab = toy_vocab()
  c = NarratedConstraint(Free(vocab.size), vocab, PAIRS)
  assert c.allowed().all()  # nothing yet says a narrated call is coming
  for token in tokens_of(vocab, "The answer"):
    c.advance(token)
  assert not c.holding and c.allowed().all()
  c = NarratedConstraint(Free(vocab.size), vocab, PAIRS)
  for token in tokens_of(vocab, "Now I'll"):
    c.advance(token)
  assert c.holding and c.allowed().all()  # "Now I'll see..." is still free text
  c.advance(tokens_of(vocab, " ")[0])
  c.advance(tokens_of(vocab, "x")[0])
  assert not c.holding


def test_a_quoted_sentence_is_free_and_the_call_after_it_is_held():
  """``Next step: "..."`` and a line break (the quoting oracle's turn): the quote is free text,
  even where it says "Now I'll call" or closes in the token that starts the call's sentence;
  the narrated call after it is held as ever."""
  vocab = toy_vocab()
  c = NarratedConstraint(Free(vocab.size), vocab, PAIRS)
  quote = 'Next step: "Now I\'ll call the answer on expenses."\n'
  for token in tokens_of(vocab, quote):
    assert c.allowed().all()  # quoting: nothing held
    c.advance(token)
  wanted = tokens_of(vocab, 'Now I\'ll call make_offer on expenses.\n{"name": ')
  text = text_of(vocab, greedy(c, vocab, wanted, 120))
  assert text.startswith(narrated_call("recruiting", "make_offer")) and not c.holding
  # The closing quote, the line break and the sentence's first word in one token ('"\nNow').
  wide = Vocabulary([*vocab.symbols, tuple(b'"\nNow')])
  c = NarratedConstraint(Free(wide.size), wide, PAIRS)
  for token in [*tokens_of(vocab, 'Next step: "The answer.'), wide.size - 1]:
    c.advance(token)
  for token in tokens_of(vocab, " I'll call "):
    c.advance(token)
  allowed = {text_of(vocab, [i]) for i in np.flatnonzero(c.allowed()) if i < vocab.size}
  assert c.holding and {"m", "l", "a"} <= allowed and "x" not in allowed
  # A turn that starts like a quote and is not one is free, as any other text.
  c = NarratedConstraint(Free(vocab.size), vocab, PAIRS)
  for token in tokens_of(vocab, "Next time"):
    c.advance(token)
  assert not c.holding and c.allowed().all()


def test_the_quote_is_the_quoting_oracles():
  from compoworld.agents.agent import QUOTE_PREFIX
  from rl.decoding.narration import _QUOTE

  assert tuple(text_symbols(QUOTE_PREFIX + '"')) == _QUOTE


def test_a_quote_given_the_instructions_sentences_is_one_of_them_whole():
  """The quoting policy's held-out habit: the right sentence with another opening word, or a
  sentence lost halfway. Given the instruction's sentences the quote is one of them, copied to
  its end; then the narrated call is held as ever."""
  from rl.decoding.narration import instruction_sentences

  request = "Hi! Find the offer. With that, make the offer on expenses. Thanks!"
  messages = [{"role": "system", "content": "Tools."}, {"role": "user", "content": request}]
  sentences = instruction_sentences(messages)
  assert sentences == [
    "Hi!",
    "Find the offer.",
    "With that, make the offer on expenses.",
    "make the offer on expenses.",  # a bare quote's form: without the opening connective
    "Thanks!",
  ]
  vocab = toy_vocab()
  c = NarratedConstraint(Free(vocab.size), vocab, PAIRS, sentences)
  habit = tokens_of(vocab, 'Next step: "Now, make the offer on expenses."\nNow')
  out = []
  while '"\n' not in text_of(vocab, out):  # greedy, one token at a time, to the quote's end
    out += greedy(c, vocab, habit[len(out) :], 1)
    assert len(out) < 80
  quote = text_of(vocab, out).partition('"\n')[0]
  assert quote.startswith('Next step: "') and quote[12:] in sentences, quote
  free = NarratedConstraint(Free(vocab.size), vocab, PAIRS)  # no sentences: the habit's quote
  assert text_of(vocab, greedy(free, vocab, habit, len(habit))).startswith(
    'Next step: "Now, make the offer on expenses."'
  )
  for token in tokens_of(vocab, "Now I'll call make_offer on "):
    c.advance(token)
  allowed = {text_of(vocab, [i]) for i in np.flatnonzero(c.allowed())}
  assert c.holding and "r" in allowed and "e" not in allowed  # the call is held as ever
  # Free text otherwise: a turn that quotes nothing, and a quote when no sentences are given.
  c = NarratedConstraint(Free(vocab.size), vocab, PAIRS, sentences)
  for token in tokens_of(vocab, "The answer"):
    c.advance(token)
  assert not c.holding and c.allowed().all()
  assert instruction_sentences([{"role": "system", "content": "no user turn"}]) == []


def test_the_mask_never_empties_and_copies_are_independent():
  vocab = toy_vocab()

  class OnlyEnd(Free):
    def allowed(self, budget=None):
      mask = np.zeros(self.size, bool)
      mask[-5] = True  # <|im_end|>
      return mask

  c = NarratedConstraint(OnlyEnd(vocab.size), vocab, PAIRS)
  for token in tokens_of(vocab, "Now I'll call "):
    c.advance(token)
  assert np.flatnonzero(c.allowed()).tolist() == [vocab.size - 5]  # the inner's, not empty
  d = c.copy()
  d.advance(tokens_of(vocab, "make")[0])
  assert c._text != d._text and c.inner.fed != d.inner.fed
  with pytest.raises(ValueError, match="pairs"):
    NarratedConstraint(Free(vocab.size), vocab, [])


def test_narrated_decoding_wraps_the_typed_grounded_turn():
  vocab = toy_vocab()
  assert DECODINGS["constrained+grounded+narrated"]["narrated"] is True
  with pytest.raises(ValueError, match="needs constrained"):
    TurnConstraints(vocab, grounded=True, narrated=True)
  from compoworld.compose.env import META_TOOLS

  tc = TurnConstraints(vocab, constrained=True, grounded=True, narrated=True)
  c = tc.start(META_TOOLS, ["recruiting", "expenses"], b"offer 120000")
  pairs = episode_pairs(["recruiting", "expenses"], library_schemas())
  assert pairs and {s for s, _ in pairs} == {"recruiting", "expenses"}
  assert isinstance(c, NarratedConstraint)
  broken = 'Now I\'ll call make_offer on expenses.\n{"name": "call_tool", "arguments": {"x'
  out = greedy(c, vocab, tokens_of(vocab, broken), 160)
  assert text_of(vocab, out).startswith(narrated_call("recruiting", "make_offer"))
