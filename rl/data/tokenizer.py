"""Tokenizers behind one small protocol: the project's own SentencePiece model, or the Hugging Face
tokenizer that comes with an imported Qwen checkpoint.

The SentencePiece model is trained on the project's own text (see ``rl.data.corpus``) with byte
fallback, so any Unicode string round-trips, and with the chat format's special tokens reserved as
user-defined symbols, so each is always one id. It is saved as ``tokenizer.model`` beside a
checkpoint and loaded with it.

An imported checkpoint's own tokenizer is its ``tokenizer.json`` (with ``tokenizer_config.json``),
read by the ``tokenizers`` library behind the same protocol (`HFTokenizer`): its ids are the ones
the checkpoint's embeddings were trained on. It is saved beside every checkpoint trained from it
the same way, so `load_tokenizer` finds whichever of the two a directory holds.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
import sentencepiece as spm
import tokenizers

#: The file a SentencePiece tokenizer is saved as, beside a checkpoint.
SENTENCEPIECE_FILE = "tokenizer.model"
#: The files a Hugging Face tokenizer is saved as (those of a real Qwen checkpoint).
HF_TOKENIZER_FILE = "tokenizer.json"
HF_TOKENIZER_CONFIG_FILE = "tokenizer_config.json"
#: The chat format a policy was trained with, saved beside its tokenizer (`CHAT_SYSTEMS`).
CHAT_FILE = "chat.json"
#: How the chat renderer writes the system turn (rl.data.chat): ``"full"`` (the episode's system
#: prompt and the tools' JSON schemas, Qwen's template: what an imported checkpoint expects) or
#: ``"brief"`` (one fixed line naming the four meta-tools: for a policy trained here, which
#: learns the tools from its data, at a third fewer tokens on short trajectories).
CHAT_SYSTEMS = ("full", "brief")
#: How the chat renderer writes tool replies (rl.data.chat.reply_text): ``"as_sent"`` (the
#: envelope's JSON as the service wrote it) or ``"ids_last"`` (the same JSON with every object's
#: ``id`` and ``*_id`` keys moved after its other keys: a causal model reads a record's name,
#: memo or email before the id it then copies, so the id that follows a matched field is that
#: record's own).
CHAT_REPLIES = ("as_sent", "ids_last")
#: ``composed``: the ``[service, tool, parameter]`` a policy's training data writes as its own text
#: rather than a copy of the conversation (`rl.decoding.arguments.composed_arguments`), which
#: grounded decoding then leaves free.
#: The chat format a tokenizer has unless set otherwise; only what differs is saved in `CHAT_FILE`.
CHAT_DEFAULTS = {"system": "full", "replies": "as_sent", "composed": ()}
#: What `load_tokenizer` looks for, in order of preference.
TOKENIZER_FILES = (HF_TOKENIZER_FILE, SENTENCEPIECE_FILE)
#: A Hugging Face tokenizer's pad token when neither its config nor its ``tokenizer.json`` names
#: one: the first of these in its vocabulary (Qwen's is ``<|endoftext|>``).
DEFAULT_PAD_TOKENS = ("<|endoftext|>", "<pad>", "<|pad|>", "[PAD]")
PAD, UNK = "<pad>", "<unk>"
#: 256 byte pieces, pad and unk: what byte fallback needs before any learned piece.
_MIN_VOCAB = 256 + 2


@runtime_checkable
class Tokenizer(Protocol):
  """What the chat renderer and the data pipeline need from a tokenizer.

  `SentencePieceTokenizer` and `HFTokenizer` implement it, and add ``id_to_token``, ``save`` /
  ``load`` (beside a checkpoint) and pickling (for grain workers).
  """

  @property
  def vocab_size(self) -> int: ...

  @property
  def pad_id(self) -> int: ...

  def encode(self, text: str) -> list[int]:
    """Token ids of ``text``; no BOS/EOS or other markers are added."""
    ...

  def decode(self, ids: Sequence[int]) -> str: ...

  def token_to_id(self, token: str) -> int | None:
    """The id of a token that is one vocabulary entry (a special token), else None."""
    ...


class SentencePieceTokenizer:
  """A SentencePiece model with byte fallback; picklable (for grain workers)."""

  def __init__(self, model_proto: bytes):
    self._proto = bytes(model_proto)
    self._sp = spm.SentencePieceProcessor(model_proto=self._proto)

  #: The system-turn format of `CHAT_SYSTEMS` that renderers of this tokenizer use.
  chat_system = "full"
  #: How renderers of this tokenizer write tool replies (`CHAT_REPLIES`).
  chat_replies = "as_sent"
  #: The arguments grounded decoding leaves free (`CHAT_DEFAULTS`' ``composed``).
  chat_composed: tuple[tuple[str, str, str], ...] = ()

  def __reduce__(self):
    state = {k: getattr(self, k) for k in ("chat_system", "chat_replies", "chat_composed")}
    return (SentencePieceTokenizer, (self._proto,), state)

  @classmethod
  def train(
    cls,
    corpus: Iterable[str],
    vocab_size: int,
    special_tokens: Sequence[str] = (),
    model_type: str = "bpe",
    num_threads: int = 1,
  ) -> SentencePieceTokenizer:
    """Trains on ``corpus`` (one string per item, newlines allowed).

    Text is kept as is: no normalization, no dummy ``▁`` prefix and no whitespace folding, so
    ``decode(encode(s)) == s`` and pieces encoded separately concatenate to the same text.
    ``"\\n"`` is a user-defined symbol too (JSON and prompts are line-structured).
    """
    symbols = list(dict.fromkeys([*special_tokens, "\n"]))
    floor = _MIN_VOCAB + len(symbols)
    if vocab_size <= floor:
      raise ValueError(
        f"vocab_size {vocab_size} is too small: byte fallback needs 256 byte pieces, pad, unk "
        f"and {len(symbols)} reserved symbols ({floor}), plus the corpus's characters; "
        "use a few hundred more"
      )
    model = io.BytesIO()
    try:
      spm.SentencePieceTrainer.train(
        sentence_iterator=iter(corpus),
        model_writer=model,
        vocab_size=vocab_size,
        model_type=model_type,
        byte_fallback=True,
        character_coverage=0.9995,  # rare characters go to bytes instead of taking the vocab
        user_defined_symbols=symbols,
        normalization_rule_name="identity",
        add_dummy_prefix=False,
        remove_extra_whitespaces=False,
        allow_whitespace_only_pieces=True,
        split_digits=True,
        max_sentence_length=1 << 20,  # tool schemas and envelopes are long single "sentences"
        pad_id=0,
        unk_id=1,
        bos_id=-1,
        eos_id=-1,  # a turn ends with <|im_end|>, which the chat format owns
        pad_piece=PAD,
        unk_piece=UNK,
        num_threads=num_threads,
        minloglevel=2,
      )
    except RuntimeError as err:
      raise ValueError(f"SentencePiece training failed (vocab_size={vocab_size}): {err}") from err
    return cls(model.getvalue())

  @property
  def vocab_size(self) -> int:
    return self._sp.get_piece_size()

  @property
  def pad_id(self) -> int:
    return self._sp.pad_id()

  def encode(self, text: str) -> list[int]:
    return self._sp.encode(text)

  def decode(self, ids: Sequence[int]) -> str:
    return self._sp.decode([int(i) for i in ids])

  def token_to_id(self, token: str) -> int | None:
    i = self._sp.piece_to_id(token)
    return None if i == self._sp.unk_id() and token != UNK else i

  def id_to_token(self, i: int) -> str:
    return self._sp.id_to_piece(int(i))

  def token_bytes(self, i: int) -> bytes | None:
    """The bytes id ``i`` stands for in decoded text (a byte piece's one byte); None for
    control, unknown and unused ids. ``decode`` of ids is these bytes joined, as UTF-8."""
    i, sp = int(i), self._sp
    if sp.is_control(i) or sp.is_unknown(i) or sp.is_unused(i):
      return None
    piece = sp.id_to_piece(i)
    if sp.is_byte(i):
      return bytes((int(piece[3:5], 16),))  # <0xNN>
    return piece.replace("\u2581", " ").encode()

  def save(self, directory: str | Path) -> Path:
    path = Path(directory) / SENTENCEPIECE_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(self._proto)
    _save_chat(self, path.parent)
    return path

  @classmethod
  def load(cls, directory: str | Path) -> SentencePieceTokenizer:
    return cls((Path(directory) / SENTENCEPIECE_FILE).read_bytes())


class HFTokenizer:
  """A Hugging Face ``tokenizer.json`` read by the ``tokenizers`` library: an imported Qwen
  checkpoint's own tokenizer. Picklable (for grain workers); pickles carry the whole JSON.

  ``encode`` never adds BOS/EOS or other template tokens (``add_special_tokens=False``), and any
  padding or truncation the file configures is switched off: the data pipeline packs and pads rows
  itself. ``decode`` writes special tokens out (``skip_special_tokens=False``), so decoding is
  faithful and ``decode(encode(s)) == s`` up to the file's normalizer (Qwen's applies NFC).
  ``vocab_size`` is the largest id plus one, added tokens included, i.e. the rows of the
  embedding it needs (a Qwen model's vocabulary is padded beyond that).

  ``pad_id`` is the id of ``pad_token`` when given, else of the ``pad_token`` of
  ``tokenizer_config.json`` (Qwen's is ``<|endoftext|>``), else of the padding token
  ``tokenizer.json`` configures, else of the first of `DEFAULT_PAD_TOKENS` in the vocabulary; a
  tokenizer with none of these is an error. Pad positions are masked out of attention and loss
  (segment id 0), so any real id would do; following the checkpoint's own choice keeps a saved
  checkpoint consistent with ``transformers``.
  """

  def __init__(
    self,
    tokenizer_json: str,
    config: Mapping[str, Any] | None = None,
    pad_token: str | None = None,
  ):
    self._json = str(tokenizer_json)
    self._config = dict(config or {})
    try:
      tok = tokenizers.Tokenizer.from_str(self._json)
    except Exception as err:  # the Rust side raises plain Exceptions
      raise ValueError(f"not a valid Hugging Face {HF_TOKENIZER_FILE}: {err}") from err
    padding = tok.padding
    tok.no_padding()
    tok.no_truncation()
    self._tok = tok
    vocab = tok.get_vocab(with_added_tokens=True)
    if not vocab:
      raise ValueError(f"the {HF_TOKENIZER_FILE} has an empty vocabulary")
    self._vocab_size = max(vocab.values()) + 1
    self._pad_token = pad_token or _hf_pad_token(self._config, padding, vocab)
    pad_id = tok.token_to_id(self._pad_token)
    if pad_id is None:
      raise ValueError(f"the pad token {self._pad_token!r} is not in the tokenizer's vocabulary")
    self._pad_id = pad_id
    added = tok.get_added_tokens_decoder()
    self._special_added = frozenset(i for i, t in added.items() if t.special)
    self._byte_level = '"ByteLevel"' in json.dumps(json.loads(self._json).get("decoder"))

  chat_system = "full"  # as SentencePieceTokenizer's
  chat_replies = "as_sent"
  chat_composed: tuple[tuple[str, str, str], ...] = ()

  def __reduce__(self):
    state = {k: getattr(self, k) for k in ("chat_system", "chat_replies", "chat_composed")}
    return (HFTokenizer, (self._json, self._config, self._pad_token), state)

  @classmethod
  def from_tokenizer(
    cls, tokenizer: tokenizers.Tokenizer, pad_token: str | None = None
  ) -> HFTokenizer:
    """Wraps a ``tokenizers.Tokenizer`` built or trained in memory."""
    return cls(tokenizer.to_str(), pad_token=pad_token)

  @property
  def vocab_size(self) -> int:
    return self._vocab_size

  @property
  def pad_id(self) -> int:
    return self._pad_id

  @property
  def pad_token(self) -> str:
    return self._pad_token

  def encode(self, text: str) -> list[int]:
    return self._tok.encode(text, add_special_tokens=False).ids

  def decode(self, ids: Sequence[int]) -> str:
    return self._tok.decode([int(i) for i in ids], skip_special_tokens=False)

  def token_to_id(self, token: str) -> int | None:
    return self._tok.token_to_id(token)

  def id_to_token(self, i: int) -> str:
    token = self._tok.id_to_token(int(i))
    if token is None:
      raise IndexError(f"id {i} is not in the tokenizer's vocabulary of {self.vocab_size}")
    return token

  def token_bytes(self, i: int) -> bytes | None:
    """The bytes id ``i`` stands for in decoded text: a byte-level token's bytes, else its
    decoded text's; None for special added tokens and ids without bytes of their own."""
    i = int(i)
    if i in self._special_added:
      return None
    token = self._tok.id_to_token(i)
    if token is None:
      return None
    if self._byte_level and all(c in _BYTE_OF_CHAR for c in token):
      return bytes(_BYTE_OF_CHAR[c] for c in token)
    text = self._tok.decode([i], skip_special_tokens=False)
    return None if not text or "\ufffd" in text else text.encode()

  def save(self, directory: str | Path) -> Path:
    """Writes ``tokenizer.json`` (as read) and ``tokenizer_config.json`` (the one read, if any,
    naming the pad token); returns the former."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / HF_TOKENIZER_FILE
    path.write_text(self._json, encoding="utf-8")
    config = {"tokenizer_class": "PreTrainedTokenizerFast", **self._config}
    config["pad_token"] = self._pad_token
    (directory / HF_TOKENIZER_CONFIG_FILE).write_text(
      json.dumps(config, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    _save_chat(self, directory)
    return path

  @classmethod
  def load(cls, directory: str | Path) -> HFTokenizer:
    directory = Path(directory)
    config_path = directory / HF_TOKENIZER_CONFIG_FILE
    config = json.loads(config_path.read_text(encoding="utf-8")) if config_path.is_file() else None
    return cls((directory / HF_TOKENIZER_FILE).read_text(encoding="utf-8"), config)


def _bytes_of_chars() -> dict[str, int]:
  """GPT-2's byte-level alphabet, inverted: the character that stands for each byte."""
  printable = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
  chars, extra = {}, 0
  for b in range(256):
    if b in printable:
      chars[chr(b)] = b
    else:
      chars[chr(256 + extra)] = b
      extra += 1
  return chars


_BYTE_OF_CHAR = _bytes_of_chars()


def _hf_pad_token(
  config: Mapping[str, Any], padding: Mapping[str, Any] | None, vocab: Mapping[str, int]
) -> str:
  """The pad token a Hugging Face tokenizer names (see `HFTokenizer`)."""
  named = config.get("pad_token")
  if isinstance(named, Mapping):  # a serialized AddedToken
    named = named.get("content")
  if named:
    return str(named)
  if padding and padding.get("pad_token"):
    return str(padding["pad_token"])
  for token in DEFAULT_PAD_TOKENS:
    if token in vocab:
      return token
  raise ValueError(
    f"the tokenizer names no pad token (neither {HF_TOKENIZER_CONFIG_FILE} nor its padding) and "
    f"has none of {list(DEFAULT_PAD_TOKENS)}; pass pad_token="
  )


def has_tokenizer(directory: str | Path) -> bool:
  """Whether ``directory`` holds a tokenizer `load_tokenizer` reads."""
  return any((Path(directory) / name).is_file() for name in TOKENIZER_FILES)


def set_chat_system(tokenizer: Tokenizer, system: str) -> Tokenizer:
  """Sets the system-turn format (`CHAT_SYSTEMS`) renderers of ``tokenizer`` use; returns it."""
  if system not in CHAT_SYSTEMS:
    raise ValueError(f"unknown chat system format {system!r}; valid: {', '.join(CHAT_SYSTEMS)}")
  tokenizer.chat_system = system
  return tokenizer


def set_chat_replies(tokenizer: Tokenizer, replies: str) -> Tokenizer:
  """Sets how renderers of ``tokenizer`` write tool replies (`CHAT_REPLIES`); returns it."""
  if replies not in CHAT_REPLIES:
    raise ValueError(f"unknown chat reply format {replies!r}; valid: {', '.join(CHAT_REPLIES)}")
  tokenizer.chat_replies = replies
  return tokenizer


def _save_chat(tokenizer: Tokenizer, directory: Path) -> None:
  chat = {k: getattr(tokenizer, f"chat_{k}", default) for k, default in CHAT_DEFAULTS.items()}
  chat = {k: v for k, v in chat.items() if v != CHAT_DEFAULTS[k]}
  path = directory / CHAT_FILE
  if chat:
    path.write_text(json.dumps(chat) + "\n", encoding="utf-8")
  elif path.is_file():  # a directory saved over keeps no stale format
    path.unlink()


def _load_chat(tokenizer: Tokenizer, directory: Path) -> Tokenizer:
  path = directory / CHAT_FILE
  if path.is_file():
    chat = {**CHAT_DEFAULTS, **json.loads(path.read_text(encoding="utf-8"))}
    set_chat_replies(set_chat_system(tokenizer, chat["system"]), chat["replies"])
    tokenizer.chat_composed = tuple(tuple(c) for c in chat["composed"])
  return tokenizer


def load_tokenizer(directory: str | Path) -> Tokenizer:
  """The tokenizer saved in ``directory`` (a checkpoint's directory or the run's workdir): a
  Hugging Face ``tokenizer.json`` or a SentencePiece ``tokenizer.model``. A directory with both
  (some Hugging Face checkpoints ship the slow tokenizer's model too) gives the former, as
  ``transformers`` does."""
  directory = Path(directory)
  if (directory / HF_TOKENIZER_FILE).is_file():
    return _load_chat(HFTokenizer.load(directory), directory)
  if (directory / SENTENCEPIECE_FILE).is_file():
    return _load_chat(SentencePieceTokenizer.load(directory), directory)
  raise FileNotFoundError(
    f"no tokenizer in {directory}: expected {SENTENCEPIECE_FILE} (a SentencePiece model written "
    f"by experiments.train_tokenizer) or {HF_TOKENIZER_FILE} (a Hugging Face tokenizer, as an "
    "imported Qwen checkpoint has)"
  )


def require_tokens(tokenizer: Tokenizer, tokens: Iterable[str], source: str | Path = "") -> None:
  """Raises a ValueError naming every one of ``tokens`` that is not a single id of
  ``tokenizer`` (the chat format's special tokens must be)."""
  missing = [t for t in tokens if tokenizer.token_to_id(t) is None]
  if missing:
    where = f" of {source}" if str(source) else ""
    raise ValueError(
      f"the tokenizer{where} has no single id for the special token(s) {missing}: the chat "
      "format (rl.data.chat) needs each of them as one vocabulary entry"
    )


def word_forms(
  tokenizer: Tokenizer, vocab_size: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
  """(plain [V], spaced [V]) int32 for a copy head with ``copy_head_forms``
  (`models.copy_head.set_word_forms`): where one token is a word with its leading space
  (" Isla") and another the same word without it ("Isla"), both map to the second in ``plain``
  and to the first in ``spaced``; every other id maps to itself in both. V is ``vocab_size``
  (a model's vocabulary may be rounded up past the tokenizer's; the extra ids are their own)."""
  v = vocab_size or tokenizer.vocab_size
  if v < tokenizer.vocab_size:
    raise ValueError(f"vocab_size {v} < the tokenizer's {tokenizer.vocab_size}")
  plain, spaced = np.arange(v, dtype=np.int32), np.arange(v, dtype=np.int32)
  by_bytes = {}  # a learned piece wins over the byte-fallback piece of the same byte (lower id)
  for i in range(tokenizer.vocab_size):
    b = tokenizer.token_bytes(i)
    if b:
      by_bytes[b] = i
  for b, i in by_bytes.items():
    j = by_bytes.get(b[1:]) if b[:1] == b" " and len(b) > 1 else None
    if j is not None:
      plain[i] = plain[j] = j
      spaced[i] = spaced[j] = i
  return plain, spaced
