"""rl.pipeline.diagnose on a scripted model whose argmax is exactly the reference, then one token off."""

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from rl.data.chat import assistant_body
from rl.pipeline.diagnose import diagnose


class Scripted(nnx.Module):
  """Logits whose argmax at position t is ``script[t]``, whatever the input."""

  def __init__(self, script: np.ndarray, vocab: int):
    self.script = nnx.Variable(jnp.asarray(script, jnp.int32))
    self.vocab = vocab

  def __call__(self, tokens_bt):
    t = tokens_bt.shape[1]
    script = jnp.pad(self.script[...], (0, max(0, t - self.script[...].shape[0])))[:t]
    return jax.nn.one_hot(script, self.vocab)[None]


def _record(messages):
  return {"messages": messages}


def _prefix(messages, calls=6):
  """The conversation up to the reply to its ``calls``-th call: short enough for one row."""
  seen = 0
  for i, m in enumerate(messages):
    seen += m["role"] == "tool"
    if seen == calls:
      return messages[: i + 1]
  return messages


def test_a_model_that_reproduces_the_reference_matches_every_part(renderer, oracle_messages):
  messages = _prefix(oracle_messages[0])
  ids = renderer.render(messages).ids
  model = Scripted(np.append(ids[1:], 0), renderer.tokenizer.vocab_size)
  out = diagnose(model, renderer, [_record(messages)], max_len=4096 * 4)
  calls = sum(1 for m in messages if m["role"] == "assistant" and m.get("tool_calls"))
  assert out["calls"] == out["turns"] == calls == 6
  assert out["turn_match"] == out["sentence_match"] == out["arguments_match"] == 1.0
  assert out["header_match"] == 1.0 and out["final_turns"] == 0
  assert all(v["share"] == 1.0 for v in out["values"].values()) and not out["missed_copies"]


def test_one_wrong_token_inside_a_copied_value_fails_only_that_value(renderer, oracle_messages):
  messages = _prefix(oracle_messages[0])
  ids = renderer.render(messages).ids
  text = renderer.decode(ids)
  # The last call's first copied id ("..._id": "xyz_..."): break the token that ends it.
  last = max(i for i, m in enumerate(messages) if m["role"] == "assistant" and m.get("tool_calls"))
  body = assistant_body(messages[last])
  value = next(v for k, v in _inner(messages[last]).items() if isinstance(v, str) and v in text)
  at = text.rindex(body) + body.index(f'"{value}"') + len(value)  # the value's last character
  offsets = np.cumsum([len(renderer.decode([i])) for i in ids])
  k = int(np.searchsorted(offsets, at))  # the token that holds it
  script = np.append(ids[1:], 0)
  script[k - 1] = (script[k - 1] + 1) % renderer.tokenizer.vocab_size
  out = diagnose(Scripted(script, renderer.tokenizer.vocab_size), renderer, [_record(messages)],
                 max_len=4096 * 4)  # fmt: skip
  assert out["turns"] - round(out["turn_match"] * out["turns"]) == 1  # that turn alone
  assert out["arguments_match"] == (out["calls"] - 1) / out["calls"]
  assert out["sentence_match"] == out["header_match"] == 1.0
  misses = sum(v["total"] - v["reproduced"] for v in out["values"].values())
  assert misses == 1 and out["missed_copies"][0]["value"] == f'"{value}"'


def _inner(message):
  import json

  args = json.loads(message["tool_calls"][0]["function"]["arguments"])
  return args["arguments"]


def test_copy_starts_are_split_by_the_copy_heads_gate(renderer, oracle_messages):
  """With a copy head, each copied value's first token is scored by the gate and by each part
  of the mixture; the shares add up (a random tiny model: what it predicts does not matter)."""
  from models import create_model, get_config

  messages = _prefix(oracle_messages[0], calls=2)
  vocab = renderer.tokenizer.vocab_size
  model = create_model(get_config("tiny", vocab_size=vocab, copy_head=True, copy_head_match=True))
  row = len(renderer.render(messages).ids)  # the whole conversation in one row
  out = diagnose(model, renderer, [_record(messages)], max_len=row)
  start = out["copy_start"]
  copied = sum(v["total"] for k, v in out["values"].items() if k.startswith("copied_"))
  assert start["values"] == copied > 0
  assert all(
    0.0 <= start[k] <= 1.0 for k in ("right", "gate_open", "pointer_right", "lm_head_right")
  )
  # A copied value's first token stands earlier as itself or as its word's other form.
  assert 0.0 < start["token_in_context"] <= start["word_in_context"] <= 1.0
  by_gate = [(start[f"right_when_{g}"] or 0.0, share) for g, share in
             (("open", start["gate_open"]), ("closed", 1.0 - start["gate_open"]))]  # fmt: skip
  assert abs(sum(r * share for r, share in by_gate) - start["right"]) < 1e-9
  model.copy_head.b_gate[...] = jnp.asarray(30.0)  # every gate open
  start = diagnose(model, renderer, [_record(messages)], max_len=row)["copy_start"]
  assert start["gate_open"] == 1.0 and start["right_when_closed"] is None
  assert start["right_when_open"] == start["right"]
  scripted = Scripted(np.zeros(8, int), renderer.tokenizer.vocab_size)
  assert diagnose(scripted, renderer, [_record(messages)], max_len=row)["copy_start"] == {}


def test_with_word_forms_the_pointer_writes_the_form_its_gate_prefers(renderer, oracle_messages):
  """With ``copy_head_forms`` the pointer's token is its word in the form the form gate prefers:
  every one spaced (or of one form) with the gate pushed one way, plain the other way."""
  from models import create_model, get_config
  from models.copy_head import set_word_forms
  from rl.data.tokenizer import word_forms
  from rl.pipeline.diagnose import _Scorer

  vocab = renderer.tokenizer.vocab_size
  config = get_config(
    "tiny", vocab_size=vocab, copy_head=True, copy_head_match=True, copy_head_forms=True
  )
  model = create_model(config)
  plain, spaced = word_forms(renderer.tokenizer, vocab)
  set_word_forms(model.copy_head, plain, spaced)
  ids = renderer.render(_prefix(oracle_messages[0], calls=2)).ids
  pointed = {}
  for bias, form in ((30.0, spaced), (-30.0, plain)):
    model.copy_head.b_form[...] = jnp.asarray(bias)
    pointed[bias] = _Scorer(model, renderer.tokenizer.pad_id).score(ids, len(ids))["pointer"]
    np.testing.assert_array_equal(form[pointed[bias]], pointed[bias])
  assert (pointed[30.0] != pointed[-30.0]).any()  # some words have both forms
  np.testing.assert_array_equal(plain[pointed[30.0]], pointed[-30.0])


def test_the_match_gate_is_read_at_copy_starts_continuations_and_elsewhere(
  renderer, oracle_messages
):
  """With ``copy_head_match_gate``, ``match_gate`` holds the gate's mean share at the copied
  values' first tokens, their later tokens and the calling turns' other tokens (a gate of one
  value, sigmoid(b), everywhere when its weights are 0); without it, nothing."""
  from models import create_model, get_config

  messages = _prefix(oracle_messages[0], calls=2)
  vocab = renderer.tokenizer.vocab_size
  config = get_config(
    "tiny", vocab_size=vocab, copy_head=True, copy_head_match=True, copy_head_match_gate=True
  )
  model = create_model(config)
  model.copy_head.w_match_d[...] = jnp.zeros_like(model.copy_head.w_match_d[...])
  model.copy_head.b_match[...] = jnp.asarray(0.7)
  row = len(renderer.render(messages).ids)
  gate = diagnose(model, renderer, [_record(messages)], max_len=row)["match_gate"]
  assert set(gate) == {"copy_start", "copy_continue", "other"}
  np.testing.assert_allclose(list(gate.values()), 1 / (1 + np.exp(-0.7)), rtol=1e-6)
  no_gate = create_model(config.replace(copy_head_match_gate=False))
  assert diagnose(no_gate, renderer, [_record(messages)], max_len=row)["match_gate"] == {}
