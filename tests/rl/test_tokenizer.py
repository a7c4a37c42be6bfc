"""The SentencePiece tokenizer: lossless round trips (byte fallback), atomic special tokens,
save/load beside a checkpoint, pickling for grain workers, clear errors."""

import json
import pickle
import subprocess
import sys

import pytest

from compoworld.tasks import save_tasks
from rl.chat import SPECIAL_TOKENS
from rl.corpus import build_corpus
from rl.tokenizer import (
  SENTENCEPIECE_FILE,
  SentencePieceTokenizer,
  Tokenizer,
  load_tokenizer,
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
