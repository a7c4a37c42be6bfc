"""In-context copying: synthetic rows that teach (or probe) it, and a copy stage before SFT.

A tool-using policy passes ids, names and amounts from the instruction or a tool reply into its
next call: in-context copying. A small model trained from scratch on SFT trajectories learns the
shape of its turns and which tool to call long before it learns to copy (README, "A policy that
learns on a CPU"). Rows made of nothing but copies isolate that one skill:

- ``span``: random ids with one span written twice, the loss on the second copy (sparse: the
  probe's original task, `experiments.copy_probe`);
- ``periodic``: one random block of ``repeat`` ids written again and again, the loss on every id
  after the first block (dense: each target is the id ``repeat`` positions back);
- ``recall``: keys each followed by a value of ``repeat`` ids, then the keys again in another
  order, the loss on the recalled values (a copy that starts after a cue, as an argument does).

`copy_stage` trains a freshly built model on periodic rows whose block grows as it learns (the
distance a copy spans doubles from ``min_repeat`` up to ``max_repeat`` each time the accuracy
of a step reaches ``advance_at``: a model first has to learn to copy at all, which takes
longest at the shortest distance, and then extends it quickly), with its own optimizer and
schedule, and hands its weights to SFT (``configs/sft.py``'s ``copy`` block; the SFT optimizer
starts fresh). A schedule fixed in advance grew the block before the skill appeared and it
never did (README).
"""

from __future__ import annotations

import time
from typing import Any

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
from tqdm import tqdm

from rl.sft.steps import make_optimizer, make_train_step

#: Ids below this are left out of copy rows (the tokenizer's pad, unk, bos and eos).
FIRST_ID = 4


def _rows(toks: np.ndarray, mask: np.ndarray) -> dict[str, np.ndarray]:
  """The SFT batch dict of [B, T + 1] ids and their loss mask (targets shifted by one)."""
  batch, length = toks.shape[0], toks.shape[1] - 1
  positions = np.broadcast_to(np.arange(length, dtype=np.int32), (batch, length)).copy()
  return {
    "tokens": toks[:, :-1].astype(np.int32),
    "targets": toks[:, 1:].astype(np.int32),
    "loss_mask": mask[:, 1:].astype(np.int32),
    "value_mask": np.zeros((batch, length), np.int32),
    "segment_ids": np.ones((batch, length), np.int32),
    "positions": positions,
  }


def span_rows(rng: np.random.Generator, batch: int, length: int, repeat: int, vocab: int):
  """Rows of random ids with one span of ``repeat`` ids written twice; the loss mask covers the
  predictable part of the second copy (all but its first id)."""
  if length < 2 * repeat + 4:
    raise ValueError(f"length {length} cannot hold a span of {repeat} twice (2 * repeat + 4)")
  toks = rng.integers(FIRST_ID, vocab, size=(batch, length + 1))
  mask = np.zeros((batch, length + 1), np.int32)
  for b in range(batch):
    span = rng.integers(FIRST_ID, vocab, size=repeat)
    first = int(rng.integers(0, length - 2 * repeat - 3))
    second = int(rng.integers(first + repeat + 4, length + 1 - repeat))
    toks[b, first : first + repeat] = toks[b, second : second + repeat] = span
    mask[b, second + 1 : second + repeat] = 1
  return _rows(toks, mask)


def periodic_rows(rng: np.random.Generator, batch: int, length: int, repeat: int, vocab: int):
  """Rows of one random block of ``repeat`` ids written again and again; the loss mask covers
  every id after the first block."""
  if length < 2 * repeat:
    raise ValueError(f"length {length} cannot hold a block of {repeat} twice (2 * repeat)")
  blocks = rng.integers(FIRST_ID, vocab, size=(batch, repeat))
  toks = np.tile(blocks, (1, -(-(length + 1) // repeat)))[:, : length + 1]
  mask = np.zeros((batch, length + 1), np.int32)
  mask[:, repeat:] = 1
  return _rows(toks, mask)


def recall_rows(rng: np.random.Generator, batch: int, length: int, repeat: int, vocab: int):
  """Rows of cued recall: ``pairs`` keys, each followed by a value of ``repeat`` ids, then the
  keys again in another order, each to be followed by its value; the loss mask covers the
  recalled values. A call's argument is such a recall: the copy has to *start* after the cue
  (the id after ``"invoice_id": ``), which periodic rows never ask for."""
  pairs = (length + 1) // (2 * (repeat + 1))
  if pairs < 2:
    raise ValueError(f"length {length} cannot hold two key-value pairs of {repeat} twice")
  toks = rng.integers(FIRST_ID, vocab, size=(batch, length + 1))
  mask = np.zeros((batch, length + 1), np.int32)
  width = repeat + 1
  for b in range(batch):
    keys = rng.choice(np.arange(FIRST_ID, vocab), size=pairs, replace=False)
    values = rng.integers(FIRST_ID, vocab, size=(pairs, repeat))
    for i in range(pairs):
      toks[b, i * width] = keys[i]
      toks[b, i * width + 1 : (i + 1) * width] = values[i]
    start = pairs * width
    for j, i in enumerate(rng.permutation(pairs)):
      at = start + j * width
      toks[b, at] = keys[i]
      toks[b, at + 1 : at + width] = values[i]
      mask[b, at + 1 : at + width] = 1
  return _rows(toks, mask)


PATTERNS = {"span": span_rows, "periodic": periodic_rows, "recall": recall_rows}


def next_repeat(repeat: int, accuracy: float, advance_at: float, max_repeat: int) -> int:
  """The block size after a step at ``repeat`` scored ``accuracy``: doubled (at most to
  ``max_repeat``) once it reaches ``advance_at``, else the same."""
  return min(2 * repeat, max_repeat) if accuracy >= advance_at else repeat


def stage_config(copy: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
  """``copy`` checked: the stage's rows fit (2 * max_repeat <= length) and its sizes are
  positive."""
  if copy.steps < 0 or copy.batch_size < 1 or copy.lr <= 0:
    raise ValueError(
      f"copy stage: steps >= 0, batch_size >= 1 and lr > 0 (got {copy.steps}, "
      f"{copy.batch_size}, {copy.lr})"
    )
  if 2 * copy.max_repeat > copy.seq_len:
    raise ValueError(
      f"copy stage: a block of max_repeat {copy.max_repeat} must fit twice in seq_len "
      f"{copy.seq_len}"
    )
  if not 1 <= copy.min_repeat <= copy.max_repeat or not 0 < copy.advance_at <= 1:
    raise ValueError(
      f"copy stage: need 1 <= min_repeat ({copy.min_repeat}) <= max_repeat ({copy.max_repeat}) "
      f"and 0 < advance_at ({copy.advance_at}) <= 1"
    )
  return copy


def plot_stage(path, points: list[dict[str, float]]) -> str:
  """The stage's accuracy per step, one line per block size, as a PNG at ``path``."""
  from rl.pipeline.plots import Curve, line_plot

  curves = []
  for repeat in sorted({p["repeat"] for p in points}):
    at = [p for p in points if p["repeat"] == repeat]
    curves.append(
      Curve(f"copies {repeat} back", [p["step"] for p in at], [p["accuracy"] for p in at])
    )
  return line_plot(
    path, curves, title="copy stage", xlabel="step", ylabel="accuracy", ylim=(0.0, 1.0)
  )


def row_trainer(graphdef, params, rest, tx, schedule, aux_loss_coef: float):
  """A fresh train state on ``params``/``rest`` with ``tx``'s moments, and the jitted SFT step
  (one micro-batch) that trains it on rows."""
  state = {"step": jnp.zeros((), jnp.int32), "params": params, "rest": rest}
  state["opt_state"] = tx.init(params)
  # Rows are short: the loss runs on full logits, so the accuracy is the exact argmax's also
  # for a copy head (whose fused loss counts only targets of probability > 1/2).
  step = make_train_step(
    graphdef, tx, schedule, grad_accum=1, aux_loss_coef=aux_loss_coef, loss_chunk=-1
  )
  return state, jax.jit(step)


def copy_stage(
  config: ml_collections.ConfigDict,
  graphdef,
  state: dict[str, Any],
  *,
  vocab_size: int,
  aux_loss_coef: float,
  shard=lambda batch: {k: jnp.asarray(v) for k, v in batch.items()},
) -> tuple[dict[str, Any], list[dict[str, float]]]:
  """Trains ``state``'s weights on ``config.copy`` periodic rows; returns the state with the new
  ``params``/``rest`` (its ``step`` and ``opt_state`` untouched, so SFT starts fresh) and the
  recorded points (step, block size, accuracy, loss). ``shard`` places a host batch (SFT's
  ``shard_batch`` over its mesh)."""
  copy = stage_config(config.copy)
  stage = ml_collections.ConfigDict(config.to_dict())
  stage.optim.lr, stage.optim.warmup_steps = copy.lr, copy.warmup_steps
  tx, schedule = make_optimizer(stage, copy.steps)
  inner, step = row_trainer(graphdef, state["params"], state["rest"], tx, schedule, aux_loss_coef)
  rng = np.random.default_rng(copy.seed)
  points, start = [], time.time()
  bar = tqdm(range(copy.steps), desc="copy stage", mininterval=1.0)
  repeat = copy.min_repeat
  for i in bar:
    rows = periodic_rows(rng, copy.batch_size, copy.seq_len, repeat, vocab_size)
    inner, metrics = step(inner, shard(rows))
    acc, loss = float(metrics["accuracy"]), float(metrics["loss"])
    if (i + 1) % copy.log_every == 0 or i + 1 == copy.steps:
      points.append({"step": i + 1, "repeat": repeat, "accuracy": acc, "loss": loss})
      bar.set_postfix(repeat=repeat, acc=f"{acc:.3f}")
    repeat = next_repeat(repeat, acc, copy.advance_at, copy.max_repeat)
  if points:
    points[-1]["seconds"] = round(time.time() - start, 1)
  return dict(state, params=inner["params"], rest=inner["rest"]), points
