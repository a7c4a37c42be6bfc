"""Tokenizers behind one small protocol: the project's own SentencePiece model, or (later) the
tokenizer that comes with an imported Qwen checkpoint.

The SentencePiece model is trained on the project's own text (see ``rl.corpus``) with byte
fallback, so any Unicode string round-trips, and with the chat format's special tokens reserved as
user-defined symbols, so each is always one id. It is saved as ``tokenizer.model`` beside a
checkpoint and loaded with it.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

import sentencepiece as spm

#: The file a SentencePiece tokenizer is saved as, beside a checkpoint.
SENTENCEPIECE_FILE = "tokenizer.model"
PAD, UNK = "<pad>", "<unk>"
#: 256 byte pieces, pad and unk: what byte fallback needs before any learned piece.
_MIN_VOCAB = 256 + 2


@runtime_checkable
class Tokenizer(Protocol):
  """What the chat renderer and the data pipeline need from a tokenizer.

  ``tokenizers.Tokenizer`` (a Hugging Face ``tokenizer.json``) has the same ``token_to_id``; an
  adapter for it needs only ``encode``/``decode``/``vocab_size``/``pad_id``.
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

  def __reduce__(self):
    return (SentencePieceTokenizer, (self._proto,))

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

  def save(self, directory: str | Path) -> Path:
    path = Path(directory) / SENTENCEPIECE_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(self._proto)
    return path

  @classmethod
  def load(cls, directory: str | Path) -> SentencePieceTokenizer:
    return cls((Path(directory) / SENTENCEPIECE_FILE).read_bytes())


def load_tokenizer(directory: str | Path) -> Tokenizer:
  """The tokenizer saved in ``directory`` (a checkpoint's directory or the run's workdir)."""
  directory = Path(directory)
  if (directory / SENTENCEPIECE_FILE).is_file():
    return SentencePieceTokenizer.load(directory)
  raise FileNotFoundError(
    f"no tokenizer in {directory}: expected {SENTENCEPIECE_FILE} (a SentencePiece model written "
    "by experiments.train_tokenizer)"
  )
