"""What call_tool passes on (rl.decoding.arguments): typed by the tool's schema, grounded in the context."""

import json

import numpy as np

from rl.decoding.arguments import ArgumentConstraint, JsonScanner, composed_arguments
from rl.decoding.constrained import CALL_END_SYM, CALL_SYM, SPECIAL_BASE, SPECIALS, Vocabulary

WORDS = ["Juniper", " vendor", " onboarding", "Atlas", '"}', "inv_", "ed", "ff", '\\"']


def toy_vocab():
  """Every byte, a few words, then the chat's specials; returns the vocabulary and word -> id."""
  symbols = [(b,) for b in range(256)] + [tuple(w.encode()) for w in WORDS]
  symbols += [(SPECIAL_BASE + k,) for k in range(len(SPECIALS))]
  ids = {w: 256 + k for k, w in enumerate(WORDS)}
  ids.update({s: 256 + len(WORDS) + k for k, s in enumerate(SPECIALS)})
  return Vocabulary(symbols), ids


CALL = {
  "name": "call_tool",
  "arguments": {
    "service": "invoicing",
    "tool": "list_invoices",
    "arguments": {"query": "Juniper", "limit": 10, "tags": ["a", "b"], "done": True},
  },
}


def grounded_chars(text: str) -> str:
  """The characters of ``text`` (a call's JSON) written while the scanner says grounding."""
  vocab, _ = toy_vocab()
  g = ArgumentConstraint(vocab, b"")
  g.scanner.feed(CALL_SYM)
  out = []
  for ch in text:
    if g.grounding:
      out.append(ch)
    g.scanner.feed(ord(ch))
  return "".join(out)


def test_only_the_string_values_call_tool_passes_on_are_grounded():
  text = json.dumps(CALL)
  # The quote that closes each value is written while grounding: it ends the copy.
  assert grounded_chars(text) == 'Juniper"a"b"'


def test_the_scanner_resets_at_each_call_and_stops_after_it():
  s = JsonScanner()
  for ch in '{"a": {"b": {"c": "x':
    s.feed(ord(ch))
  assert not s.in_call  # text before a <tool_call> is not JSON to track
  s.feed(CALL_SYM)
  for ch in '{"a": {"b": {"c": "x':
    s.feed(ord(ch))
  assert s.in_call and s.in_string and s.is_value and s.depth == 3 and s.value == b"x"
  s.feed(CALL_END_SYM)
  assert not s.in_call and s.depth == 0


def test_escaped_quotes_stay_inside_the_value():
  s = JsonScanner()
  s.feed(CALL_SYM)
  for ch in '{"a": "say \\"hi\\" now':
    s.feed(ord(ch))
  assert s.in_string and s.value == b'say \\"hi\\" now'


def _start(context: bytes, written: str):
  vocab, ids = toy_vocab()
  g = ArgumentConstraint(vocab, context)
  g.advance(ids["<tool_call>"])
  for ch in written:
    g.advance(ord(ch))
  return g, ids


PREFIX = '{"name": "call_tool", "arguments": {"service": "invoicing", "tool": "t", "arguments": '
CONTEXT = b'Find the "Juniper vendor onboarding" invoice inv_edff9e11 please'


def test_a_grounded_value_only_continues_a_substring_of_the_context():
  g, ids = _start(CONTEXT, PREFIX + '{"query": "')
  assert g.grounding
  mask = g.allowed()
  assert mask[ids["Juniper"]] and mask[ord("J")] and mask[ids["inv_"]]
  assert not mask[ids["Atlas"]] and not mask[ord("Z")]
  # A copy starts where a word does: "n" occurs in the context, never at a word's start.
  assert mask[ord("i")] and not mask[ord("n")] and not mask[ord('"')]
  g.advance(ids["Juniper"])
  mask = g.allowed()
  assert mask[ids[" vendor"]] and not mask[ids[" onboarding"]] and not mask[ord("x")]
  assert mask[ord('"')] and mask[ids['"}']]  # the value may end here: "Juniper" is a copy
  for token in (" vendor", " onboarding"):
    g.advance(ids[token])
  assert set(np.flatnonzero(g.allowed())) == {ord('"'), ids['"}']}  # nothing follows but the quote
  g.advance(ids['"}'])
  assert not g.grounding and g.allowed().all()  # after the value: the model writes freely


def test_the_system_turn_is_not_copied_from():
  system = b"<|im_start|>system\nCall call_tool(service, tool, arguments). Atlas<|im_end|>\n"
  user = b"<|im_start|>user\n" + CONTEXT + b"<|im_end|>\n"
  g, ids = _start(system + user, PREFIX + '{"query": "')
  mask = g.allowed()
  assert mask[ids["Juniper"]] and not mask[ids["Atlas"]] and not mask[ord("s")]
  # Only a leading system turn goes: the same words in a later turn are copied.
  g, ids = _start(user + system, PREFIX + '{"query": "')
  assert g.allowed()[ids["Atlas"]]


def test_a_copy_ends_with_its_turn():
  """The user's last words run into ``<|im_end|>`` without a space: a copy of them may not go
  on into the marker ("it's done.<|im_end")."""
  user = b"<|im_start|>user\nPost it word for word<|im_end|>\n<|im_start|>assistant\n"
  g, ids = _start(user, PREFIX + '{"query": "word for word')
  mask = g.allowed()
  assert mask[ord('"')] and not mask[ord("<")]
  g, ids = _start(user, PREFIX + '{"query": "')
  assert not g.allowed()[ord("<")] and not g.allowed()[ids["<|im_end|>"]]


def test_ids_are_copied_token_by_token_and_keys_and_numbers_are_free():
  g, ids = _start(CONTEXT, PREFIX + '{"invoice_id": "inv_')
  mask = g.allowed()
  assert mask[ids["ed"]] and not mask[ids["ff"]]  # only what follows "inv_" in the context
  g.advance(ids["ed"])
  assert not g.allowed()[ord('"')]  # "inv_ed" is a piece of an id: it cannot end there
  for ch in "ff9e11":
    g.advance(ord(ch))
  assert g.allowed()[ord('"')] and not g.allowed()[ord("1")]  # the whole id can
  g, _ = _start(CONTEXT, PREFIX + '{"lim')
  assert not g.grounding and g.allowed().all()  # a key
  g, _ = _start(CONTEXT, PREFIX + '{"limit": 1')
  assert not g.grounding and g.allowed()[[ord(c) for c in "0123456789.,} "]].all()  # a number


def test_the_mask_never_empties_and_wraps_the_inner_constraint():
  class Inner:
    def __init__(self, size):
      self.mask, self.fed = np.zeros(size, bool), []

    def allowed(self, budget=None):
      return self.mask

    def advance(self, token):
      self.fed.append(token)

  vocab, ids = toy_vocab()
  inner = Inner(vocab.size)
  inner.mask[ids["Atlas"]] = True  # the grammar allows only a token the context lacks
  g = ArgumentConstraint(vocab, CONTEXT, inner=inner, forced=[ids["<tool_call>"]])
  assert inner.fed == []  # forced ids are the inner constraint's own business
  for ch in PREFIX + '{"q": "':
    g.advance(ord(ch))
  assert g.grounding
  assert list(np.flatnonzero(g.allowed())) == [ids["Atlas"]]  # the inner mask, not an empty one
  assert len(inner.fed) == len(PREFIX) + len('{"q": "')


SCHEMAS = {
  ("invoicing", "t"): {
    "type": "object",
    "properties": {
      "query": {"type": "string"},
      "status": {"type": "string", "enum": ["sent", "paid"]},
      "limit": {"type": "integer", "default": 20},
      "amount": {"type": "number"},
    },
    "required": ["status"],
  }
}


def _typed(written: str, ground: bool = True, context: bytes = CONTEXT):
  vocab, ids = toy_vocab()
  g = ArgumentConstraint(vocab, context, ground=ground, schemas=SCHEMAS)
  g.advance(ids["<tool_call>"])
  for ch in written:
    g.advance(ord(ch))
  return g.allowed(), ids


def test_keys_are_the_called_tools_parameters_each_once():
  mask, _ = _typed(PREFIX + '{"')
  assert mask[ord("q")] and mask[ord("s")] and mask[ord("l")] and not mask[ord("x")]
  mask, _ = _typed(PREFIX + '{"lim')
  assert mask[ord("i")] and not mask[ord('"')]  # "lim" is not a parameter yet
  mask, _ = _typed(PREFIX + '{"limit')
  assert mask[ord('"')]
  mask, _ = _typed(PREFIX + '{"query": "Juniper", "')
  assert not mask[ord("q")] and mask[ord("s")]  # query is there already
  # A tool the schemas do not know (or not yet named) leaves the keys free.
  mask, _ = _typed(PREFIX.replace('"t"', '"other"') + '{"')
  assert mask[ord("x")]


def test_the_tool_is_one_of_the_named_services_tools():
  """The meta-tools' grammar gives ``tool`` one enum over every service's tools; once the call
  names its service, the name is one of that service's (a policy wrote `ledger.add_signer`)."""
  SCHEMAS[("esign", "add_signer")] = {"type": "object", "properties": {}}
  try:
    start = '{"name": "call_tool", "arguments": {"service": "invoicing", "tool": "'
    mask, _ = _typed(start)
    assert mask[ord("t")] and not mask[ord("a")] and not mask[ord('"')]
    mask, _ = _typed(start + "t")
    assert mask[ord('"')] and not mask[ord("t")]
    mask, _ = _typed(start.replace("invoicing", "esign"))
    assert mask[ord("a")] and not mask[ord("t")]
    # describe_tool names them the same way; a service the schemas do not know leaves it free.
    mask, _ = _typed(start.replace("call_tool", "describe_tool"))
    assert mask[ord("t")] and not mask[ord("a")]
    mask, _ = _typed(start.replace("invoicing", "crm"))
    assert mask[ord("a")] and mask[ord("t")] and mask[ord("x")]
    # Untyped decoding (grounded only) leaves the name to the grammar.
    vocab, ids = toy_vocab()
    g = ArgumentConstraint(vocab, CONTEXT, ground=True)
    g.advance(ids["<tool_call>"])
    for ch in start:
      g.advance(ord(ch))
    assert g.allowed()[ord("a")]
  finally:
    del SCHEMAS[("esign", "add_signer")]


def test_a_tool_of_no_parameters_takes_the_empty_object_only():
  """A closed schema without properties (a tool that takes no arguments): no key may even be
  opened, so the passed-on object is `{}` (a key opened here once let the model write anything)."""
  SCHEMAS[("invoicing", "n")] = {"type": "object", "properties": {}, "additionalProperties": False}
  try:
    mask, _ = _typed(PREFIX.replace('"t"', '"n"') + "{")
    assert mask[ord("}")] and not mask[ord('"')]
  finally:
    del SCHEMAS[("invoicing", "n")]


def test_an_integer_is_written_within_its_range():
  SCHEMAS[("invoicing", "b")] = {
    "type": "object",
    "properties": {
      "limit": {"type": "integer", "minimum": 1, "maximum": 100, "default": 20},
      "delta": {"type": "integer", "minimum": -5},
    },
  }
  prefix = PREFIX.replace('"t"', '"b"')
  try:
    mask, _ = _typed(prefix + '{"limit": ')
    assert mask[ord("1")] and mask[ord("9")] and not mask[ord("0")] and not mask[ord("-")]
    mask, _ = _typed(prefix + '{"limit": 10')
    assert mask[ord("0")] and not mask[ord("1")] and not mask[ord(".")] and mask[ord("}")]
    mask, _ = _typed(prefix + '{"limit": 100')  # the maximum: nothing but the end follows
    assert not any(mask[ord(d)] for d in "0123456789") and mask[ord("}")] and mask[ord(",")]
    # (Not grounded: a grounded number without a default is one the context writes.)
    mask, _ = _typed(prefix + '{"delta": -', ground=False)
    assert mask[ord("5")] and not mask[ord("6")] and not mask[ord("}")]
    mask, _ = _typed(prefix + '{"delta": -5', ground=False)
    assert mask[ord("}")] and not mask[ord("0")]
    mask, _ = _typed(prefix + '{"delta": 7', ground=False)  # no maximum: any number of digits
    assert mask[ord("0")] and mask[ord("9")] and mask[ord("}")]
  finally:
    del SCHEMAS[("invoicing", "b")]


def test_an_enum_parameter_takes_one_of_its_values():
  mask, _ = _typed(PREFIX + '{"status":')
  assert mask[ord(" ")] and mask[ord('"')] and not mask[ord("1")] and not mask[ord("t")]
  mask, ids = _typed(PREFIX + '{"status": "')
  assert mask[ord("s")] and mask[ord("p")] and not mask[ids["Juniper"]] and not mask[ord('"')]
  mask, _ = _typed(PREFIX + '{"status": "se')
  assert mask[ord("n")] and not mask[ord('"')]
  mask, ids = _typed(PREFIX + '{"status": "sent')
  assert mask[ord('"')] and mask[ids['"}']] and not mask[ord("s")]


def test_a_value_starts_as_its_parameters_type_says():
  mask, _ = _typed(PREFIX + '{"limit": ')
  assert mask[ord("1")] and mask[ord("-")] and not mask[ord('"')] and not mask[ord("t")]
  mask, _ = _typed(PREFIX + '{"query":')
  assert mask[ord(" ")] and mask[ord('"')] and not mask[ord("1")] and not mask[ord("[")]
  mask, _ = _typed(PREFIX + '{"limit": 1')
  assert mask[ord("2")] and mask[ord(",")]  # past its first byte the grammar takes over


def test_a_date_or_a_date_time_is_written_in_its_iso_shape():
  """A string parameter of ``format`` date or date-time takes its ISO 8601 shape, grounded or
  not (a date written "209197177389", a copy of "Hyatt" or "2026-07T09:00:00" cannot be)."""
  SCHEMAS[("invoicing", "d")] = {
    "type": "object",
    "properties": {
      "due": {"type": "string", "format": "date"},
      "at": {"type": "string", "format": "date-time"},
    },
  }
  prefix = PREFIX.replace('"t"', '"d"')
  try:
    mask, ids = _typed(prefix + '{"due": "', ground=False)
    assert mask[ord("2")] and not mask[ord("H")] and not mask[ord('"')] and not mask[ids["Atlas"]]
    mask, _ = _typed(prefix + '{"due": "2026', ground=False)
    assert mask[ord("-")] and not mask[ord("0")] and not mask[ord('"')]
    mask, ids = _typed(prefix + '{"due": "2026-03-04', ground=False)
    assert mask[ord('"')] and mask[ids['"}']] and not mask[ord("0")] and not mask[ord("T")]
    mask, _ = _typed(prefix + '{"at": "2026-03-04T09:3', ground=False)
    assert mask[ord("0")] and not mask[ord('"')] and not mask[ord(":")]
    mask, _ = _typed(prefix + '{"at": "2026-03-04T09:30', ground=False)
    assert mask[ord('"')] and mask[ord(":")]  # with or without its seconds
    # Grounded: one of the conversation's dates. "Hyatt" is a word there, not a date, and the
    # digits of "209197177389" start no date (a copy of them would reach a dead end).
    context = b"Stay at the Hyatt (order 209197177389) from 2026-03-04 to 2026-03-06"
    mask, _ = _typed(prefix + '{"due": "', context=context)
    assert mask[ord("2")] and not mask[ord("H")]
    mask, _ = _typed(prefix + '{"due": "20', context=context)
    assert mask[ord("2")] and not mask[ord("9")]
    mask, _ = _typed(prefix + '{"due": "2026-03-0', context=context)
    assert mask[ord("4")] and mask[ord("6")] and not mask[ord("5")]
    # A conversation that writes no date-time in ISO form: the shape alone.
    context = b"Book it for 2026-03-08 16:00 please"
    mask, _ = _typed(prefix + '{"at": "2026-03-08', context=context)
    assert mask[ord("T")] and not mask[ord(" ")]
    mask, _ = _typed(prefix + '{"at": "2026-03-08T1', context=context)
    assert mask[ord("6")] and mask[ord("7")]
  finally:
    del SCHEMAS[("invoicing", "d")]


def test_the_object_closes_only_with_its_required_keys():
  mask, ids = _typed(PREFIX + '{"query": "Juniper')
  assert mask[ord('"')] and not mask[ids['"}']]  # "}" would close it without a status
  mask, _ = _typed(PREFIX + '{"query": "Juniper"')
  assert mask[ord(",")] and not mask[ord("}")]
  mask, ids = _typed(PREFIX + '{"query": "Juniper", "status": "paid')
  assert mask[ids['"}']]
  # Typed without grounding: any query, the same keys and enums.
  mask, ids = _typed(PREFIX + '{"query": "', ground=False)
  assert mask[ids["Atlas"]] and mask[ord("Z")]


PAY = b"Pay 13,600.00 against inv_edff9e11 and hold 40 units"


def test_the_conversations_numbers_as_json_writes_them():
  g = ArgumentConstraint(toy_vocab()[0], PAY)
  whole, prefixes = g.numbers()
  # Not the digits inside an id; the amount without its separator, and as its value.
  assert whole == {b"13600.00", b"13600.0", b"13600", b"40", b"40.0"}
  assert b"136" in prefixes and b"9" not in prefixes


def test_a_number_without_a_default_is_one_the_conversation_writes():
  mask, _ = _typed(PREFIX + '{"amount": ', context=PAY)
  assert mask[ord("1")] and mask[ord("4")] and not mask[ord("2")] and not mask[ord("-")]
  mask, _ = _typed(PREFIX + '{"amount": 13', context=PAY)
  assert mask[ord("6")] and not mask[ord(",")] and not mask[ord("}")]  # "13" is not one
  mask, _ = _typed(PREFIX + '{"amount": 13600', context=PAY)
  assert mask[ord(",")] and mask[ord(".")] and not mask[ord("1")]
  mask, _ = _typed(PREFIX + '{"amount": 13600.0', context=PAY)
  assert mask[ord(",")] and mask[ord("0")] and not mask[ord("5")]
  # A parameter with a default (a page size) and an ungrounded call write any number.
  mask, _ = _typed(PREFIX + '{"limit": 7', context=PAY)
  assert mask[ord("5")] and mask[ord(",")]
  mask, _ = _typed(PREFIX + '{"amount": 2', context=PAY, ground=False)
  assert mask[ord("5")] and mask[ord(",")]


def _mask_token_by_token(g: ArgumentConstraint) -> np.ndarray:
  """The mask by its definition: every token's bytes walked or fitted one by one."""
  vocab = g.vocab
  if not g.scanner.in_call:
    return np.ones(vocab.size, bool)
  mask = np.zeros(vocab.size, bool)
  s, rule = g.scanner, g._rule(g.scanner)
  kinds = g._kinds
  number = bool(s.scalar) and (g._grounds_number(s) or g._integer_bounds(s) is not None)
  if number or g._value_start(s) is not None:
    for i in kinds.plain:
      mask[i] = g._keeps(kinds.token_bytes[i])
  elif rule is None:
    mask[kinds.plain] = True
    mask[kinds.specials] = True
  elif rule[0] == "copy":
    for i in kinds.plain:
      text = bytes(s.value) + kinds.token_bytes[i]
      mask[i] = text in g.context and g._occurs(text, closed=False)
  else:
    for i in kinds.plain:
      mask[i] = g._fits(rule, bytes(s.value) + kinds.token_bytes[i], closed=False)
  for i in kinds.structural:
    mask[i] = g._keeps(kinds.token_bytes[i])
  return mask


def _typed_calls():
  """A vocabulary with keys and enum values that are not ASCII and tokens that escape, schemas,
  a context, and three typed and grounded calls to write byte by byte: (vocabulary, a fresh
  constraint inside a call, the calls)."""
  words = ["sta", "tus", "se", "nt", "pa", "id", "qu", "ery", "amo", "unt", "lim", "it", "é", "\\u"]
  words += ['", "', '": "', '": ', "12", "3.5", " ", "  "]
  vocab, _ = toy_vocab()
  symbols = list(vocab.symbols[:256]) + [tuple(w.encode()) for w in WORDS + words]
  symbols += list(vocab.symbols[256 + len(WORDS) :])
  vocab = Vocabulary(symbols)
  call_sym = symbols.index((CALL_SYM,))
  schemas = {
    ("invoicing", "t"): {
      **SCHEMAS[("invoicing", "t")],
      "properties": {
        **SCHEMAS[("invoicing", "t")]["properties"],
        "réf": {"type": "string", "enum": ["café", "naïve"]},
        "due": {"type": "string", "format": "date"},
      },
    }
  }
  context = CONTEXT + b" amount 12.5 and 3,500.25 due 2026-03-04"
  written = [
    PREFIX + '{"status": "sent", "amount": 12.5, "réf": "café", "query": "Juniper vendor"}}',
    PREFIX + '{"due": "2026-03-04", "status": "paid"}}',
    PREFIX + '{"limit": 3, "qu\\u0065ry": "inv_edff9e11", "status": "paid"}}',
  ]

  def start():
    g = ArgumentConstraint(vocab, context, schemas=schemas)
    g.advance(call_sym)
    return g

  return vocab, start, written


def test_the_mask_is_what_each_token_walked_on_its_own_gives():
  """Tokens found by the names' continuations and by their first byte, at every step of typed
  and grounded calls, against the token-by-token definition; with keys and enum values that
  are not ASCII and tokens that escape, so both ways of finding them are checked."""
  _, start, written = _typed_calls()
  checked = 0
  for text in written:
    g = start()
    for byte in text.encode():
      assert (g._mask() == _mask_token_by_token(g)).all(), text.encode()[: len(g.scanner.value)]
      g.advance(byte)
      checked += 1
  assert checked > 150


def test_greedy_takes_the_masks_best_token_without_building_the_mask():
  """`best` (greedy's token, found by trying the likeliest tokens one by one) is the argmax of
  the logits over `allowed`, at every step of the typed and grounded calls, for logits of many
  ties and for logits that put the invalid tokens first (so the whole mask is the fallback);
  each token's validity on its own is the mask's entry."""
  vocab, start, written = _typed_calls()
  rng = np.random.default_rng(0)
  fell_back = 0
  for text in written:
    g = start()
    for byte in text.encode():
      mask = g.allowed()
      assert [g._validity()(i) for i in range(vocab.size)] == list(g._mask())
      for logits in (
        rng.integers(0, 4, vocab.size).astype(np.float64),  # many ties: the lowest id wins
        rng.normal(size=vocab.size),
        np.where(mask, 0.0, 1.0) + rng.normal(size=vocab.size) * 1e-3,  # invalid ones first
      ):
        want = int(np.argmax(np.where(mask, logits, -np.inf)))
        assert g.best(logits) == want, text.encode()[: len(g.scanner.value)]
      fell_back += int((~mask).sum() > 16)  # the invalid-first logits try 16 tokens
      g.advance(byte)
  assert fell_back > 100  # the whole-mask fallback was taken, not only the first tries


def test_a_composed_parameter_is_written_freely_under_grounding():
  """What the policy's data composes (``composed``: service, tool, parameter) is not a copy:
  grounding leaves that parameter's strings and numbers free and copies the others."""
  vocab, ids = toy_vocab()
  composed = [("invoicing", "t", "memo"), ("invoicing", "t", "amount")]
  for written, token, free in [
    ('{"memo": "', ids["Atlas"], True),
    ('{"query": "', ids["Atlas"], False),
    ('{"amount": ', ord("2"), True),
    ('{"memo": "Paid", "query": "', ids["Atlas"], False),
  ]:
    g = ArgumentConstraint(vocab, PAY, schemas=SCHEMAS, composed=composed)
    g.advance(ids["<tool_call>"])
    for ch in PREFIX + written:
      g.advance(ord(ch))
    assert g.grounding is (not free and written.endswith('"')), written
    assert g.allowed()[token] == free, written  # "Atlas" and a 2 start no copy of the context
  # Without it the amount is grounded: one of the conversation's numbers.
  g = ArgumentConstraint(vocab, PAY, schemas=SCHEMAS)
  g.advance(ids["<tool_call>"])
  for ch in PREFIX + '{"amount": ':
    g.advance(ord(ch))
  assert not g.allowed()[ord("2")]


def test_composed_arguments_are_those_the_data_writes_other_than_as_copies():
  def record(query, memo, amount):
    call = {"service": "ledger", "tool": "post", "arguments": {"query": query, "memo": memo}}
    call["arguments"]["amount"] = amount
    return {
      "messages": [
        {"role": "user", "content": f"Find {query} and pay 13,600.00"},
        {
          "role": "assistant",
          "content": "Now I'll call post on ledger.",
          "tool_calls": [{"function": {"name": "call_tool", "arguments": json.dumps(call)}}],
        },
      ]
    }

  records = [record(f"Atlas {i}", f"Paid: Atlas {i}", 13600.0) for i in range(9)]
  records.append(record("Zephyr", "Zephyr", 27200.0))  # one copied memo, one computed amount
  assert composed_arguments(records) == [("ledger", "post", "memo")]
  assert composed_arguments(records, min_copied=0.95) == [
    ("ledger", "post", "amount"),
    ("ledger", "post", "memo"),
  ]
