"""The SFT input pipeline (grain): trajectories → tokens and loss mask → packed rows → batches.

Each batch is a dict of int32 arrays of shape [B, T], ready for a trainer:

- ``tokens``: input ids (pad id where nothing was packed);
- ``targets``: the next token of each input (``tokens`` shifted left inside its segment);
- ``loss_mask``: 1 where ``targets`` is an assistant-generated token, else 0 (pad included);
- ``value_mask``: 1 where ``targets`` writes an argument value a call passes on
  (`rl.decoding.arguments.value_tokens`) when ``DataConfig.value_mask``, else 0;
- ``segment_ids``: 1, 2, ... for the trajectories packed into a row, 0 on padding; attention
  must not cross segments;
- ``positions``: position of each token inside its own segment (restarts at 0).

The pipeline is deterministic given the seed (grain's index shuffle, re-drawn every epoch; first-fit
packing; seeded shuffling of packed rows), and its iterator state (``get_state``/``set_state``,
plain JSON) can be checkpointed so that a resumed run sees exactly the batches it would have seen.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

import grain
import numpy as np
from tqdm import tqdm

from rl.data.chat import ChatRenderer

#: The per-token features an example carries into packing.
FEATURES = ("tokens", "targets", "loss_mask", "value_mask")
#: What every batch holds, each int32 [B, T].
BATCH_KEYS = ("tokens", "targets", "loss_mask", "value_mask", "segment_ids", "positions")


@dataclasses.dataclass(frozen=True)
class DataConfig:
  """How trajectories become batches."""

  seq_len: int  # T: tokens per packed row
  batch_size: int  # B: rows per batch (per process, after sharding)
  seed: int = 0  # shuffles examples (every epoch anew) and packed rows
  num_epochs: int | None = 1  # passes over the data; None repeats forever
  num_packing_bins: int | None = None  # rows packed at once (first fit); default: batch_size
  overlong: Literal["truncate", "drop"] = "truncate"  # a trajectory longer than seq_len + 1
  drop_remainder: bool = True  # drop the last, incomplete batch
  shard_index: int = 0  # this process's share of the trajectories ...
  num_shards: int = 1  # ... out of this many (jax.process_index(), jax.process_count())
  read_threads: int = 0  # grain reader threads; 0 renders in the caller (data is in memory)
  value_mask: bool = False  # mark the argument values' tokens (else value_mask is all 0)

  def __post_init__(self):
    if self.seq_len < 2 or self.batch_size < 1:
      raise ValueError(f"need seq_len >= 2 and batch_size >= 1, got {self}")
    if self.num_epochs is not None and self.num_epochs < 1:
      raise ValueError(f"num_epochs must be positive or None, got {self.num_epochs}")
    if self.num_packing_bins is not None and self.num_packing_bins < 1:
      raise ValueError(f"num_packing_bins must be positive, got {self.num_packing_bins}")
    if self.overlong not in ("truncate", "drop"):
      raise ValueError(f"overlong must be 'truncate' or 'drop', got {self.overlong!r}")
    if self.read_threads < 0:
      raise ValueError(f"read_threads must be >= 0, got {self.read_threads}")
    if not 0 <= self.shard_index < self.num_shards:
      raise ValueError(f"shard_index {self.shard_index} is not in [0, {self.num_shards})")


def example_from_ids(
  ids: np.ndarray, loss_mask: np.ndarray, seq_len: int, value_mask: np.ndarray | None = None
) -> dict[str, np.ndarray]:
  """Inputs, next-token targets and their loss (and value) masks for one sequence, cut to
  ``seq_len``."""
  ids, loss_mask = ids[: seq_len + 1], loss_mask[: seq_len + 1]
  values = np.zeros(len(ids), np.int32) if value_mask is None else value_mask[: seq_len + 1]
  return {
    "tokens": np.asarray(ids[:-1], dtype=np.int32),
    "targets": np.asarray(ids[1:], dtype=np.int32),
    "loss_mask": np.asarray(loss_mask[1:], dtype=np.int32),  # a target is learned, not an input
    "value_mask": np.asarray(values[1:], dtype=np.int32),
  }


class RenderTrajectory(grain.transforms.Map):
  """A trajectory (a record with ``messages``, or the message list) → an example dict."""

  def __init__(self, renderer: ChatRenderer, seq_len: int, overlong: str, values: bool = False):
    self.renderer, self.seq_len, self.overlong = renderer, seq_len, overlong
    self.vocab = None
    if values:  # each id's bytes, for finding the argument values' tokens
      from rl.decoding.constrained import Vocabulary

      self.vocab = Vocabulary.from_tokenizer(renderer.tokenizer, renderer.special_ids)

  def map(self, element: Any) -> dict[str, np.ndarray] | None:
    messages = element["messages"] if isinstance(element, Mapping) else element
    rendered = self.renderer.render(messages)
    if self.overlong == "drop" and len(rendered) > self.seq_len + 1:
      return None
    values = None
    if self.vocab is not None:
      from rl.decoding.arguments import value_tokens

      values = value_tokens(rendered.ids, rendered.loss_mask, self.vocab).astype(np.int32)
    return example_from_ids(rendered.ids, rendered.loss_mask, self.seq_len, values)


class HasLoss(grain.transforms.Filter):
  """Drops examples with nothing to learn (e.g. truncated before the first assistant turn)."""

  def filter(self, element: dict[str, np.ndarray] | None) -> bool:
    return element is not None and bool(element["loss_mask"].any())


class ToBatchKeys(grain.transforms.Map):
  """grain's packed features (``tokens_segment_ids``, ...) → the trainer's keys."""

  def map(self, element: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    out = {k: element[k] for k in FEATURES}
    out["segment_ids"] = element["tokens_segment_ids"]
    out["positions"] = element["tokens_positions"]
    return out


def sft_dataset(
  trajectories: Sequence[Any], renderer: ChatRenderer, config: DataConfig
) -> grain.IterDataset:
  """Batches of packed SFT rows from ``trajectories`` (records with ``messages``)."""
  if not len(trajectories):
    raise ValueError("no trajectories to train on")
  ds = grain.MapDataset.source(trajectories)[config.shard_index :: config.num_shards]
  ds = ds.shuffle(seed=config.seed).repeat(config.num_epochs)
  render = RenderTrajectory(renderer, config.seq_len, config.overlong, config.value_mask)
  ds = ds.map(render).filter(HasLoss())
  pad = renderer.tokenizer.pad_id
  packed = grain.experimental.FirstFitPackIterDataset(
    ds.to_iter_dataset(grain.ReadOptions(num_threads=config.read_threads)),
    length_struct={k: config.seq_len for k in FEATURES},
    num_packing_bins=config.num_packing_bins or config.batch_size,
    seed=config.seed,
    padding_struct={"tokens": pad, "targets": pad, "loss_mask": 0, "value_mask": 0},
  )
  return packed.map(ToBatchKeys()).batch(config.batch_size, drop_remainder=config.drop_remainder)


class ShardBatches:
  """This process's data shards' batches side by side: each step, one batch of every shard, their
  rows concatenated in shard order. Iterating gives a `ShardBatchIterator`, whose state (for a
  checkpoint) holds each shard's iterator state under the shard's index; with one shard in all,
  it is that shard's own state (as a plain grain iterator's)."""

  def __init__(self, shards: Mapping[int, grain.IterDataset], num_shards: int):
    if not shards:
      raise ValueError("no data shards")
    self.shards, self.num_shards = dict(shards), num_shards

  def __iter__(self) -> ShardBatchIterator:
    return ShardBatchIterator({s: iter(ds) for s, ds in self.shards.items()}, self.num_shards)


class ShardBatchIterator:
  def __init__(self, iterators: Mapping[int, Any], num_shards: int):
    self.iterators, self.num_shards = dict(iterators), num_shards

  def __iter__(self) -> ShardBatchIterator:
    return self

  def __next__(self) -> dict[str, np.ndarray]:
    parts = [next(it) for it in self.iterators.values()]  # StopIteration at the first one done
    if len(parts) == 1:
      return parts[0]
    return {k: np.concatenate([np.asarray(p[k]) for p in parts]) for k in parts[0]}

  def get_state(self) -> dict[str, Any]:
    if self.num_shards == 1:
      return next(iter(self.iterators.values())).get_state()
    return {str(s): it.get_state() for s, it in self.iterators.items()}

  def set_state(self, state: Mapping[str, Any]) -> None:
    if self.num_shards == 1:
      next(iter(self.iterators.values())).set_state(state)
      return
    if missing := [s for s in self.iterators if str(s) not in state]:
      raise ValueError(
        f"the checkpoint's data state has no shard {missing} (has {sorted(state)}): it was "
        f"written with another data.num_shards"
      )
    for s, it in self.iterators.items():
      it.set_state(state[str(s)])


@dataclasses.dataclass
class PackingStats:
  """Token counts over batches; ``efficiency`` = non-pad tokens / all tokens."""

  batches: int = 0
  rows: int = 0
  tokens: int = 0
  non_pad: int = 0
  loss_tokens: int = 0
  segments: int = 0
  max_row_loss_tokens: int = 0  # the most loss tokens one row holds

  def add(self, batch: Mapping[str, np.ndarray]) -> None:
    seg = np.asarray(batch["segment_ids"])  # [B, T]
    self.batches += 1
    self.rows += seg.shape[0]
    self.tokens += seg.size
    self.non_pad += int((seg > 0).sum())
    loss_mask = np.asarray(batch["loss_mask"])
    self.loss_tokens += int(loss_mask.sum())
    self.max_row_loss_tokens = max(self.max_row_loss_tokens, int(loss_mask.sum(axis=1).max()))
    self.segments += int(sum(len(np.unique(row[row > 0])) for row in seg))

  @property
  def efficiency(self) -> float:
    return self.non_pad / self.tokens if self.tokens else 0.0

  def summary(self) -> dict[str, Any]:
    return {
      **dataclasses.asdict(self),
      "packing_efficiency": round(self.efficiency, 4),
      "loss_token_fraction": round(self.loss_tokens / self.tokens, 4) if self.tokens else 0.0,
      "segments_per_row": round(self.segments / self.rows, 3) if self.rows else 0.0,
    }


def measure_packing(
  batches: Iterable[Mapping[str, np.ndarray]], max_batches: int | None = None, progress: bool = True
) -> PackingStats:
  """Packing statistics over (up to ``max_batches`` of) ``batches``."""
  stats = PackingStats()
  for i, batch in enumerate(tqdm(batches, desc="packing", disable=not progress, mininterval=1.0)):
    if max_batches is not None and i >= max_batches:
      break
    stats.add(batch)
  return stats
