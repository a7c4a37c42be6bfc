"""The chat format: render/parse round trips on real oracle trajectories, the loss mask, the
incremental conversation of a rollout, and malformed tool calls."""

import json

import numpy as np
import pytest

from compoworld.agents.detours import TRAINED
from compoworld.compose.env import META_TOOLS
from rl.data.chat import (
  IM_END,
  SPECIAL_TOKENS,
  ChatRenderer,
  assistant_body,
  group_turns,
  parse_assistant,
  render_text,
)
from rl.data.tokenizer import Tokenizer


class CharTokenizer:
  """One id per character (ids 100 + ord), specials at 1..6: a second Tokenizer under the
  renderer, where a hand-written expected mask is easy to count."""

  def __init__(self, specials=SPECIAL_TOKENS):
    self.specials = {t: i for i, t in enumerate(specials, 1)}

  vocab_size = 100 + 0x110000
  pad_id = 0

  def encode(self, text):
    return [100 + ord(c) for c in text]

  def decode(self, ids):
    return "".join(chr(i - 100) for i in ids)

  def token_to_id(self, token):
    return self.specials.get(token)


def tool_call(name, arguments, call_id="c1"):
  return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


SMALL = [
  {"role": "system", "content": "S"},
  {"role": "user", "content": "U"},
  {"role": "assistant", "content": "A", "tool_calls": [tool_call("f", '{"x": 1}')]},
  {"role": "tool", "tool_call_id": "c1", "content": '{"ok": true}'},
  {"role": "assistant", "content": "B"},
]


def test_small_conversation_by_hand():
  renderer = ChatRenderer(CharTokenizer(), tools=[])
  out = renderer.render(SMALL)
  expected = [  # (text, loss) written out by hand from the Qwen template
    ("<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n", 0),
    ("<|im_start|>assistant\n", 0),
    ('A\n<tool_call>\n{"name": "f", "arguments": {"x": 1}}\n</tool_call><|im_end|>', 1),
    ("\n<|im_start|>user\n<tool_response>\n", 0),
    ('{"ok": true}\n</tool_response><|im_end|>\n<|im_start|>assistant\n', 0),
    ("B<|im_end|>", 1),
    ("\n", 0),
  ]
  special = {t: i for i, t in enumerate(SPECIAL_TOKENS, 1)}
  ids, mask = [], []
  for text, loss in expected:
    i = 0
    while i < len(text):
      token = next((t for t in SPECIAL_TOKENS if text.startswith(t, i)), None)
      ids.append(special[token] if token else 100 + ord(text[i]))
      i += len(token) if token else 1
      mask.append(loss)
  np.testing.assert_array_equal(out.ids, ids)
  np.testing.assert_array_equal(out.loss_mask, mask)
  assert out.ids.dtype == np.int32 and out.loss_mask.dtype == np.int32
  assert renderer.decode(out.ids) == "".join(t for t, _ in expected) == render_text(SMALL, [])


def test_system_turn_lists_the_meta_tools(renderer):
  text = renderer.decode(renderer.render(SMALL[1:]).ids)  # no system message: one is added
  assert text.startswith("<|im_start|>system\n# Tools\n")
  for tool in META_TOOLS:
    assert "\n" + json.dumps(tool) + "\n" in text
  with_system = renderer.decode(renderer.render(SMALL).ids)
  assert with_system.startswith("<|im_start|>system\nS\n\n# Tools\n")


def test_round_trip_on_oracle_trajectories(renderer, oracle_messages):
  n_assistant = 0
  for messages in oracle_messages:
    out = renderer.render(messages)
    assert renderer.decode(out.ids) == render_text(messages)  # SentencePiece loses nothing
    for msg in messages:
      if msg["role"] != "assistant":
        continue
      n_assistant += 1
      ids, mask = (np.asarray(x) for x in renderer.render_turn(msg))
      parsed = renderer.parse_assistant(ids[mask == 1])  # what the model generates
      assert parsed.ended and not parsed.errors
      assert parsed.content == msg["content"]
      expected = [
        {"name": c["function"]["name"], "arguments": json.loads(c["function"]["arguments"])}
        for c in msg.get("tool_calls") or []
      ]
      assert parsed.tool_calls == expected
      assert parsed.kind == ("tool_calls" if expected else "final")
      # the parsed message renders to the same ids: nothing is lost either way
      again, _ = renderer.render_turn(parsed.to_message())
      np.testing.assert_array_equal(again, ids)
  assert n_assistant > 30


def test_loss_mask_is_exactly_the_assistant_tokens(renderer, oracle_messages):
  messages = oracle_messages[0]
  out = renderer.render(messages)
  trained = renderer.decode(out.ids[out.loss_mask == 1])
  bodies = [assistant_body(m) + IM_END for m in messages if m["role"] == "assistant"]
  assert trained == "".join(bodies)
  # every assistant turn ends with a trained <|im_end|>; every other <|im_end|> is not trained
  im_end = out.ids == renderer.im_end_id
  assert int((im_end & (out.loss_mask == 1)).sum()) == len(bodies)
  assert int((im_end & (out.loss_mask == 0)).sum()) == len(group_turns(messages)) - len(bodies)
  # the untrained tokens are the rest of the text, in order
  rest = render_text(messages)
  for body in bodies:
    rest = rest.replace(body, "", 1)
  assert renderer.decode(out.ids[out.loss_mask == 0]) == rest


def test_an_untrained_assistant_turn_is_context_only(renderer, oracle_messages):
  """An oracle's detour (``"trained": false``): the same ids, none of its tokens in the loss."""
  messages = oracle_messages[0]
  k = next(i for i, m in enumerate(messages) if m["role"] == "assistant" and m.get("tool_calls"))
  marked = [*messages[:k], {**messages[k], TRAINED: False}, *messages[k + 1 :]]
  plain, out = renderer.render(messages), renderer.render(marked)
  np.testing.assert_array_equal(out.ids, plain.ids)
  trained = renderer.decode(out.ids[out.loss_mask == 1])
  bodies = [
    assistant_body(m) + IM_END
    for i, m in enumerate(messages)
    if m["role"] == "assistant" and i != k
  ]
  assert trained == "".join(bodies)
  assert int(plain.loss_mask.sum() - out.loss_mask.sum()) == len(
    renderer.encode_text(assistant_body(messages[k]) + IM_END)
  )


def test_incremental_conversation_equals_full_render(renderer, oracle_messages):
  messages = oracle_messages[1]
  full = renderer.render(messages)
  conv = renderer.conversation(messages[:2])
  turns = group_turns(messages[2:])
  for turn in turns:
    if turn[0]["role"] == "assistant":
      prompt = conv.prompt_ids()
      # what the policy is conditioned on is a prefix of what SFT trains on
      np.testing.assert_array_equal(full.ids[: len(prompt)], prompt)
      body = renderer.encode_text(assistant_body(turn[0]) + IM_END)  # "generated" ids
      parsed = conv.append_generated(body)
      assert parsed.kind in ("tool_calls", "final")
    else:
      conv.append(turn)
    assert conv.ids == full.ids[: len(conv.ids)].tolist()
  got = conv.rendered()
  np.testing.assert_array_equal(got.ids, full.ids)
  np.testing.assert_array_equal(got.loss_mask, full.loss_mask)
  # the recorded messages are the parsed ones: same calls, same final answer
  assert len(conv.messages) == len(messages)
  assert conv.messages[-1]["content"] == messages[-1]["content"]


def test_parallel_tool_results_form_one_turn(renderer):
  calls = [tool_call("f", "{}", "a"), tool_call("g", "{}", "b")]
  messages = [
    {"role": "user", "content": "U"},
    {"role": "assistant", "content": "", "tool_calls": calls},
    {"role": "tool", "tool_call_id": "a", "content": "1"},
    {"role": "tool", "tool_call_id": "b", "content": "2"},
  ]
  text = render_text(messages, tools=[])
  assert text.endswith(
    "<|im_start|>user\n<tool_response>\n1\n</tool_response>\n<tool_response>\n2\n"
    "</tool_response><|im_end|>\n"
  )
  assert '<|im_start|>assistant\n<tool_call>\n{"name": "f"' in text  # no newline without content
  conv = renderer.conversation(messages[:2])
  conv.append(messages[2])
  with pytest.raises(ValueError, match="appended together"):
    conv.append(messages[3])


@pytest.mark.parametrize(
  "text,kind,error",
  [
    ("Done: 42.<|im_end|>", "final", None),
    ('<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call><|im_end|>', "tool_calls", None),
    ('<tool_call>\n{"name": "f", "arguments": "{\\"a\\": 1}"}\n</tool_call>', "tool_calls", None),
    ('<tool_call>\n{"name": "f", "arguments": {}}\n', "malformed", "no closing </tool_call>"),
    ('<tool_call>\n{"name": "f", "arguments": {}\n</tool_call>', "malformed", "not valid JSON"),
    ("<tool_call>\n[1, 2]\n</tool_call>", "malformed", "must be a JSON object"),
    ('<tool_call>\n{"arguments": {}}\n</tool_call>', "malformed", "no string 'name'"),
    ('<tool_call>\n{"name": "f", "arguments": [1]}\n</tool_call>', "malformed", "JSON object"),
    ('<tool_call>\n{"name": "f", "arguments": "{oops"}\n</tool_call>', "malformed", "'arguments'"),
    ('<tool_call>\n{"name": "f"}\n</tool_call>\nand then', "malformed", "unexpected text"),
    ("hi <tool_response> there", "malformed", "unexpected <tool_response>"),
    ("stray </tool_call>", "malformed", "unexpected </tool_call>"),
  ],
)
def test_parse_reports_malformed_calls(text, kind, error):
  parsed = parse_assistant(text)
  assert parsed.kind == kind
  if error is None:
    assert parsed.errors == []
  else:
    assert any(error in e for e in parsed.errors), parsed.errors
  assert parsed.ended == text.endswith(IM_END)


def test_parse_keeps_good_calls_beside_bad_ones():
  text = (
    'Two calls.\n<tool_call>\n{"name": "f", "arguments": {"a": 1}}\n</tool_call>\n'
    "<tool_call>\nnot json\n</tool_call><|im_end|>"
  )
  parsed = parse_assistant(text)
  assert parsed.content == "Two calls."
  assert parsed.tool_calls == [{"name": "f", "arguments": {"a": 1}}]
  assert len(parsed.errors) == 1 and parsed.errors[0].startswith("tool call 2 is not valid JSON")


def test_parse_from_ids_matches_parse_from_text(renderer):
  text = (
    'Reading.\n<tool_call>\n{"name": "list_tools", "arguments": {"service": "crm"}}\n</tool_call>'
  )
  ids = renderer.encode_text(text + IM_END)
  assert renderer.parse_assistant(ids) == parse_assistant(text + IM_END)


def test_renderer_needs_every_special_token():
  assert isinstance(CharTokenizer(), Tokenizer)
  with pytest.raises(ValueError, match="<tool_response>"):
    ChatRenderer(CharTokenizer(specials=SPECIAL_TOKENS[:4]))


def test_unknown_role_is_an_error(renderer):
  with pytest.raises(ValueError, match="unknown message role 'critic'"):
    renderer.render([{"role": "critic", "content": "x"}])


def test_brief_system_turn_is_one_line_and_travels_with_the_tokenizer(
  tokenizer, oracle_messages, tmp_path
):
  import pickle

  from rl.data.chat import BRIEF_SYSTEM
  from rl.data.tokenizer import CHAT_FILE, load_tokenizer, set_chat_system

  full = ChatRenderer(tokenizer).render(oracle_messages[0])
  brief = ChatRenderer(tokenizer, system="brief")
  text = brief.decode(brief.render(oracle_messages[0]).ids)
  assert text.startswith(f"<|im_start|>system\n{BRIEF_SYSTEM}<|im_end|>\n<|im_start|>user\n")
  assert "<tools>" not in text
  rendered = brief.render(oracle_messages[0])
  # Only the system turn changes: the assistant tokens and their mask are the same.
  assert int(rendered.loss_mask.sum()) == int(full.loss_mask.sum())
  assert len(rendered) < len(full) - 300
  # A tokenizer set to "brief" is saved with it, loaded with it and pickled with it, so every
  # renderer of a trained policy shows the format it was trained on; "full" leaves no file.
  fresh = pickle.loads(pickle.dumps(tokenizer))
  assert fresh.chat_system == "full"
  set_chat_system(fresh, "brief")
  fresh.save(tmp_path)
  assert (tmp_path / CHAT_FILE).is_file()
  loaded = load_tokenizer(tmp_path)
  assert ChatRenderer(loaded).system == "brief"
  assert pickle.loads(pickle.dumps(loaded)).chat_system == "brief"
  set_chat_system(loaded, "full").save(tmp_path)
  assert not (tmp_path / CHAT_FILE).exists() and load_tokenizer(tmp_path).chat_system == "full"
  with pytest.raises(ValueError, match="valid: full, brief"):
    set_chat_system(loaded, "short")
  with pytest.raises(ValueError, match="unknown chat system"):
    ChatRenderer(tokenizer, system="short")


def test_reply_text_moves_id_keys_last_and_keeps_the_value():
  from rl.data.chat import reply_text

  envelope = {
    "ok": True,
    "status": 200,
    "data": {
      "items": [
        {"id": "sec_1", "name": "Hardware & devices", "customer_id": "cus_9", "position": 4},
        {"id": "sec_2", "name": "Shipping", "lines": [{"id": "L1", "sku": "SUP-1"}]},
      ],
      "next_offset": None,
    },
  }
  sent = json.dumps(envelope)
  assert reply_text(sent) == sent  # "as_sent": verbatim
  moved = reply_text(sent, "ids_last")
  assert moved == (
    '{"ok": true, "status": 200, "data": {"items": ['
    '{"name": "Hardware & devices", "position": 4, "id": "sec_1", "customer_id": "cus_9"}, '
    '{"name": "Shipping", "lines": [{"sku": "SUP-1", "id": "L1"}], "id": "sec_2"}], '
    '"next_offset": null}}'
  )
  assert json.loads(moved) == envelope  # the same JSON value, only the key order differs
  assert reply_text("Error: not JSON", "ids_last") == "Error: not JSON"
  assert reply_text([1, {"id": 2, "a": 3}], "ids_last") == '[1, {"a": 3, "id": 2}]'


def test_ids_last_replies_render_every_tool_turn_and_travel_with_the_tokenizer(
  tokenizer, oracle_messages, tmp_path
):
  import pickle

  from rl.data.chat import reply_text
  from rl.data.tokenizer import CHAT_FILE, load_tokenizer, set_chat_replies, set_chat_system

  messages = oracle_messages[0]
  plain = ChatRenderer(tokenizer).render(messages)
  renderer = ChatRenderer(tokenizer, replies="ids_last")
  rendered = renderer.render(messages)
  text = renderer.decode(rendered.ids)
  tool_contents = [m["content"] for m in messages if m["role"] == "tool"]
  assert tool_contents
  for content in tool_contents:
    assert reply_text(content, "ids_last") in text
  # Only the tool turns change: the assistant tokens and their mask are the same.
  assert int(rendered.loss_mask.sum()) == int(plain.loss_mask.sum())
  assert renderer.decode(rendered.ids[rendered.loss_mask == 1]) == ChatRenderer(tokenizer).decode(
    plain.ids[plain.loss_mask == 1]
  )
  # Turn by turn, as a rollout appends them, gives the same ids.
  conv = renderer.conversation()
  for turn in group_turns(messages):
    conv.append(turn)
  np.testing.assert_array_equal(conv.rendered().ids, rendered.ids)
  # Saved, loaded and pickled with the tokenizer, beside the system format.
  fresh = pickle.loads(pickle.dumps(tokenizer))
  assert fresh.chat_replies == "as_sent"
  set_chat_replies(set_chat_system(fresh, "brief"), "ids_last").save(tmp_path)
  assert json.loads((tmp_path / CHAT_FILE).read_text()) == {
    "system": "brief",
    "replies": "ids_last",
  }
  loaded = load_tokenizer(tmp_path)
  assert ChatRenderer(loaded).replies == "ids_last" and ChatRenderer(loaded).system == "brief"
  assert pickle.loads(pickle.dumps(loaded)).chat_replies == "ids_last"
  # The arguments grounded decoding leaves free travel the same way.
  loaded.chat_composed = (("ledger", "post", "memo"),)
  loaded.save(tmp_path)
  assert load_tokenizer(tmp_path).chat_composed == (("ledger", "post", "memo"),)
  assert pickle.loads(pickle.dumps(loaded)).chat_composed == (("ledger", "post", "memo"),)
  loaded.chat_composed = ()
  set_chat_system(set_chat_replies(loaded, "as_sent"), "full").save(tmp_path)
  assert not (tmp_path / CHAT_FILE).exists()
  with pytest.raises(ValueError, match="valid: as_sent, ids_last"):
    set_chat_replies(loaded, "sorted")
  with pytest.raises(ValueError, match="unknown chat reply format"):
    ChatRenderer(tokenizer, replies="sorted")
