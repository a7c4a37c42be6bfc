"""The SentencePiece tokenizer: lossless round trips (byte fallback), atomic special tokens,
save/load beside a checkpoint, pickling for grain workers, clear errors. The Hugging Face adapter
(an imported Qwen checkpoint's ``tokenizer.json``): the same, plus the chat format on it and its
use by SFT and the policy loader."""

import json
import pickle
import subprocess
import sys

import numpy as np
import pytest
import tokenizers
from tokenizers import AddedToken, decoders, pre_tokenizers, processors, trainers

from compoworld.tasks.task import save_tasks
from rl.data.chat import IM_END, IM_START, SPECIAL_TOKENS, ChatRenderer, render_text
from rl.data.corpus import build_corpus
from rl.data.tokenizer import (
  HF_TOKENIZER_CONFIG_FILE,
  HF_TOKENIZER_FILE,
  SENTENCEPIECE_FILE,
  HFTokenizer,
  SentencePieceTokenizer,
  Tokenizer,
  load_tokenizer,
  word_forms,
)

TEXTS = [
  '{"ok": true, "status": 200, "data": {"id": "evt_17ace3a4", "total": 3}}',
  "Schedule the meetup at 2026-03-11 09:00 and invite Ines Nakamura.",
  "naïve café — Zoë's résumé; Ångström ±5 °C",  # Latin-1 and beyond, seen or not
  "日本語のテキスト、한국어, русский текст, العربية",  # scripts absent from the corpus
  "emoji 🎉👩🏽‍💻 and a flag 🇯🇵",  # multi-codepoint sequences
  "  two leading spaces\n\ttab\r\nCRLF  and trailing spaces  \n\n",
  "e\u0301 (combining accent) vs \u00e9 (precomposed)",  # no normalization may merge these
]


@pytest.mark.parametrize("text", TEXTS)
def test_round_trip_is_lossless(tokenizer, text):
  ids = tokenizer.encode(text)
  assert tokenizer.decode(ids) == text
  assert 1 not in ids  # never <unk>: unseen characters fall back to bytes


def test_unseen_characters_become_bytes(tokenizer):
  ids = tokenizer.encode("🇯")  # U+1F1EF: four UTF-8 bytes
  assert [tokenizer.id_to_token(i) for i in ids] == ["<0xF0>", "<0x9F>", "<0x87>", "<0xAF>"]


def test_special_tokens_are_atomic(tokenizer):
  ids = [tokenizer.token_to_id(t) for t in SPECIAL_TOKENS]
  assert len(set(ids)) == len(SPECIAL_TOKENS) and None not in ids
  for token, i in zip(SPECIAL_TOKENS, ids, strict=True):
    assert tokenizer.encode(token) == [i]
    assert tokenizer.decode([i]) == token
    inside = tokenizer.encode(f"abc{token}def")
    assert inside.count(i) == 1 and tokenizer.decode(inside) == f"abc{token}def"
  assert tokenizer.token_to_id("<not_a_token>") is None
  assert tokenizer.pad_id == 0 and tokenizer.decode([tokenizer.pad_id]) == ""


def test_save_load_and_pickle(tokenizer, tmp_path):
  path = tokenizer.save(tmp_path / "ckpt")
  assert path == tmp_path / "ckpt" / SENTENCEPIECE_FILE
  loaded = load_tokenizer(tmp_path / "ckpt")
  unpickled = pickle.loads(pickle.dumps(tokenizer))
  for other in (loaded, unpickled):
    assert isinstance(other, Tokenizer)
    assert other.vocab_size == tokenizer.vocab_size == 1024
    assert [other.encode(t) for t in TEXTS] == [tokenizer.encode(t) for t in TEXTS]
  with pytest.raises(FileNotFoundError, match="no tokenizer in"):
    load_tokenizer(tmp_path / "empty")


def test_training_is_deterministic(tasks):
  corpus = build_corpus(tasks[:1], progress=False)
  a = SentencePieceTokenizer.train(corpus, 600, SPECIAL_TOKENS)
  b = SentencePieceTokenizer.train(corpus, 600, SPECIAL_TOKENS)
  assert pickle.dumps(a) == pickle.dumps(b)


def test_vocabulary_too_small_is_a_clear_error():
  with pytest.raises(ValueError, match="vocab_size 260 is too small"):
    SentencePieceTokenizer.train(["hello world"], 260, SPECIAL_TOKENS)
  with pytest.raises(ValueError, match="Vocabulary size too high"):
    SentencePieceTokenizer.train(["hello world"] * 10, 2000, SPECIAL_TOKENS)


def test_train_tokenizer_script(tasks, tmp_path):
  save_tasks(tasks[:1], tmp_path / "tasks.jsonl")
  out = subprocess.run(
    [
      sys.executable,
      "-m",
      "experiments.train_tokenizer",
      f"--tasks={tmp_path / 'tasks.jsonl'}",
      "--vocab_size=700",
      f"--workdir={tmp_path / 'tok'}",
    ],
    capture_output=True,
    text=True,
    check=True,
  )
  summary = json.loads(out.stdout.strip().splitlines()[-1])
  assert summary["vocab_size"] == 700 and summary["round_trip_ok"]
  assert summary["special_ids"] == {t: i for i, t in enumerate(SPECIAL_TOKENS, 2)}
  assert summary["chars_per_token"] > 2.0
  assert load_tokenizer(tmp_path / "tok").vocab_size == 700


# --- Hugging Face tokenizer.json (an imported Qwen checkpoint's own) --------------------------

EOT = "<|endoftext|>"


def qwen_like(corpus, specials=SPECIAL_TOKENS, vocab_size=640) -> tokenizers.Tokenizer:
  """A byte-level BPE laid out like Qwen's tokenizer.json: <|endoftext|> and the <|...|> chat
  tokens special, the tool tags added as non-special tokens. Its post-processor appends
  <|endoftext|> and padding to 64 is on: `HFTokenizer.encode` must do neither."""
  tok = tokenizers.Tokenizer(tokenizers.models.BPE())
  tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
  tok.decoder = decoders.ByteLevel()
  trainer = trainers.BpeTrainer(
    vocab_size=vocab_size,
    special_tokens=[EOT, *(t for t in specials if t.startswith("<|"))],
    initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    show_progress=False,
  )
  tok.train_from_iterator(corpus, trainer=trainer)
  tok.add_tokens([AddedToken(t, normalized=False) for t in specials if not t.startswith("<|")])
  tok.post_processor = processors.TemplateProcessing(
    single=f"$A {EOT}", special_tokens=[(EOT, tok.token_to_id(EOT))]
  )
  tok.enable_padding(length=64, pad_id=tok.token_to_id(EOT), pad_token=EOT)
  return tok


@pytest.fixture(scope="module")
def hf_corpus(tasks):
  return build_corpus(tasks[:1], progress=False)[:300]


@pytest.fixture(scope="module")
def hf_json(hf_corpus):
  return qwen_like(hf_corpus).to_str()  # a tokenizer.json's text


@pytest.fixture(scope="module")
def hf_tokenizer(hf_json):
  return HFTokenizer(hf_json)


@pytest.mark.parametrize("text", TEXTS)
def test_hf_round_trip_is_lossless(hf_tokenizer, text):
  ids = hf_tokenizer.encode(text)
  assert hf_tokenizer.decode(ids) == text
  assert max(ids) < hf_tokenizer.vocab_size


def test_hf_special_tokens_are_single_ids_and_nothing_is_added(hf_tokenizer):
  tok = hf_tokenizer
  ids = [tok.token_to_id(t) for t in SPECIAL_TOKENS]
  assert len(set(ids)) == len(SPECIAL_TOKENS) and None not in ids
  for token, i in zip(SPECIAL_TOKENS, ids, strict=True):
    assert tok.encode(token) == [i] and tok.decode([i]) == token and tok.id_to_token(i) == token
    inside = tok.encode(f"abc{token}def")
    assert inside.count(i) == 1 and tok.decode(inside) == f"abc{token}def"
  assert tok.token_to_id("<not_a_token>") is None
  # no BOS/EOS from the post-processor, no padding to 64
  assert tok.pad_id == tok.token_to_id(EOT) and tok.pad_token == EOT
  ids = tok.encode("ok")
  assert tok.pad_id not in ids and len(ids) < 64 and tok.decode(ids) == "ok"
  assert tok.encode("") == []
  assert tok.vocab_size == 640 + 4  # the BPE's ids, then the four added tool tags
  with pytest.raises(IndexError):
    tok.id_to_token(tok.vocab_size)


def test_hf_save_load_and_pickle(hf_tokenizer, tokenizer, tmp_path):
  path = hf_tokenizer.save(tmp_path / "ckpt")
  assert path == tmp_path / "ckpt" / HF_TOKENIZER_FILE
  config = json.loads((tmp_path / "ckpt" / HF_TOKENIZER_CONFIG_FILE).read_text())
  assert config["pad_token"] == EOT
  loaded = load_tokenizer(tmp_path / "ckpt")
  unpickled = pickle.loads(pickle.dumps(hf_tokenizer))
  for other in (loaded, unpickled):
    assert isinstance(other, HFTokenizer) and isinstance(other, Tokenizer)
    assert (other.vocab_size, other.pad_id) == (hf_tokenizer.vocab_size, hf_tokenizer.pad_id)
    assert [other.encode(t) for t in TEXTS] == [hf_tokenizer.encode(t) for t in TEXTS]
  tokenizer.save(tmp_path / "ckpt")  # beside a tokenizer.json (as some HF checkpoints ship)
  assert isinstance(load_tokenizer(tmp_path / "ckpt"), HFTokenizer)
  with pytest.raises(FileNotFoundError, match=r"tokenizer\.model .* or tokenizer\.json"):
    load_tokenizer(tmp_path / "empty")


def test_hf_pad_token_and_bad_files(hf_tokenizer, hf_json, hf_corpus):
  text = hf_json
  im_end = hf_tokenizer.token_to_id(IM_END)
  assert HFTokenizer(text, {"pad_token": IM_END}).pad_id == im_end  # the config's wins
  assert HFTokenizer(text, {"pad_token": {"content": IM_END}}).pad_id == im_end
  assert HFTokenizer(text, pad_token=IM_START).pad_id == hf_tokenizer.token_to_id(IM_START)
  unpadded = qwen_like(hf_corpus[:20], vocab_size=300)
  unpadded.no_padding()
  assert HFTokenizer.from_tokenizer(unpadded).pad_token == EOT  # the default, present
  words = tokenizers.Tokenizer(tokenizers.models.WordLevel({"a": 0, "b": 1}, unk_token="a"))
  with pytest.raises(ValueError, match="names no pad token"):
    HFTokenizer.from_tokenizer(words)
  with pytest.raises(ValueError, match="'<nope>' is not in the tokenizer's vocabulary"):
    HFTokenizer(text, pad_token="<nope>")
  with pytest.raises(ValueError, match=r"not a valid Hugging Face tokenizer\.json"):
    HFTokenizer("{}")


def test_chat_renderer_on_an_hf_tokenizer(hf_tokenizer, oracle_messages):
  renderer = ChatRenderer(hf_tokenizer)
  for messages in oracle_messages[:2]:
    out = renderer.render(messages)
    assert renderer.decode(out.ids) == render_text(messages)
    for msg in (m for m in messages if m["role"] == "assistant"):
      ids, mask = (np.asarray(x) for x in renderer.render_turn(msg))
      parsed = renderer.parse_assistant(ids[mask == 1])
      assert parsed.ended and not parsed.errors and parsed.content == msg["content"]
      again, _ = renderer.render_turn(parsed.to_message())
      np.testing.assert_array_equal(again, ids)


def test_sft_uses_an_imported_tokenizer_json(hf_tokenizer, tmp_path):
  from configs.sft import get_config
  from rl.sft import trainer as sft

  config = get_config("tiny")
  config.model.init_from = str(tmp_path / "ckpt")
  hf_tokenizer.save(tmp_path / "ckpt")
  loaded = sft.get_tokenizer(config, tmp_path / "run", [])
  assert isinstance(loaded, HFTokenizer)
  assert [loaded.encode(t) for t in TEXTS] == [hf_tokenizer.encode(t) for t in TEXTS]
  loaded.save(tmp_path / "run")  # what a run does; a resumed run reads it from its workdir
  config.model.init_from = ""
  assert isinstance(sft.get_tokenizer(config, tmp_path / "run", []), HFTokenizer)


def test_a_tokenizer_json_without_the_chat_tokens_is_rejected(hf_corpus, tmp_path):
  from configs.sft import get_config
  from rl.sft import trainer as sft

  tok = HFTokenizer.from_tokenizer(qwen_like(hf_corpus[:20], SPECIAL_TOKENS[:4], vocab_size=300))
  tok.save(tmp_path / "ckpt")
  config = get_config("tiny")
  config.model.init_from = str(tmp_path / "ckpt")
  with pytest.raises(ValueError, match="ckpt has no single id") as err:
    sft.get_tokenizer(config, tmp_path / "run", [])
  assert "['<tool_response>', '</tool_response>']" in str(err.value)


def test_an_imported_checkpoint_trains_and_serves_with_its_tokenizer_json(hf_tokenizer, tmp_path):
  import models
  from configs.sft import get_config
  from rl.serve.policy import CONFIG_FILE, load_policy_parts, save_policy
  from rl.sft import trainer as sft

  # four layers: config_to_hf does not write full_attention_interval, read back as 4
  small = dict(num_layers=4, full_attention_interval=4, d_model=32, expert_dim=16)
  vocab = -(-hf_tokenizer.vocab_size // 128) * 128  # padded, as Qwen's is
  models.save_pretrained(
    models.create_model(models.get_config("tiny", vocab_size=vocab, **small)), tmp_path / "hf"
  )
  hf_tokenizer.save(tmp_path / "hf")
  config = get_config("tiny")
  config.model.init_from = str(tmp_path / "hf")
  tokenizer = sft.get_tokenizer(config, tmp_path / "run", [])
  model, model_config = sft.build_model(config, tokenizer.vocab_size)
  assert model_config.vocab_size == vocab > tokenizer.vocab_size
  with pytest.raises(ValueError, match=f"model vocab {vocab} < the tokenizer's {vocab + 1}"):
    sft.build_model(config, vocab + 1)

  save_policy(tmp_path / "policy", model, tokenizer)  # what a run exports
  assert (tmp_path / "policy" / HF_TOKENIZER_FILE).is_file()
  _, served, _ = load_policy_parts(tmp_path / "policy")
  assert isinstance(served, HFTokenizer) and served.encode("get_item") == tokenizer.encode(
    "get_item"
  )
  saved = json.loads((tmp_path / "policy" / CONFIG_FILE).read_text())
  (tmp_path / "policy" / CONFIG_FILE).write_text(json.dumps({**saved, "vocab_size": 128}))
  with pytest.raises(ValueError, match=f"the tokenizer has {tokenizer.vocab_size} ids but"):
    load_policy_parts(tmp_path / "policy")


@pytest.mark.parametrize("kind", ["sentencepiece", "hf"])
def test_word_forms_pair_a_word_with_and_without_its_leading_space(kind, tokenizer, hf_tokenizer):
  """Where " Schedule" and "Schedule" are both single tokens they are one word (plain form the
  second, spaced the first); a token without a twin, and the ids past the tokenizer's in a
  rounded-up vocabulary, are their own word."""
  tok = tokenizer if kind == "sentencepiece" else hf_tokenizer
  v = tok.vocab_size + 7
  plain, spaced = word_forms(tok, v)
  assert plain.shape == spaced.shape == (v,)
  pairs = 0
  for i in range(tok.vocab_size):
    if plain[i] == spaced[i]:
      assert plain[i] == i
      continue
    pairs += i == spaced[i]
    assert tok.token_bytes(int(spaced[i])) == b" " + tok.token_bytes(int(plain[i]))
    assert i in (plain[i], spaced[i]) and plain[plain[i]] == plain[i]
  assert pairs > 20
  np.testing.assert_array_equal(plain[tok.vocab_size :], np.arange(tok.vocab_size, v))
  (word,) = [w for w in ("Schedule", "id", "the") if len(tok.encode(" " + w)) == 1][:1]
  (spaced_id,), (plain_id,) = tok.encode(" " + word), tok.encode(word)
  assert (plain[spaced_id], spaced[plain_id]) == (plain_id, spaced_id)
  with pytest.raises(ValueError, match="vocab_size"):
    word_forms(tok, tok.vocab_size - 1)
