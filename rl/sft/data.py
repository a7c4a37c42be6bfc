"""The SFT data: the SFT set (found, or generated and collected), the tokenizer, each process's
shards of packed rows, and the figures SFT reports about them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import jax
import ml_collections
import numpy as np

from rl import distributed
from rl.data.chat import SPECIAL_TOKENS
from rl.data.packing import BATCH_KEYS, DataConfig, ShardBatches, measure_packing, sft_dataset
from rl.data.tokenizer import (
  SentencePieceTokenizer,
  Tokenizer,
  has_tokenizer,
  load_tokenizer,
  require_tokens,
  set_chat_replies,
  set_chat_system,
)
from rl.decoding.arguments import composed_arguments

#: Where a run keeps the SFT set it generated.
DATA_DIR = "data"


def generate_sft_set(config: ml_collections.ConfigDict, data_dir: Path) -> Path:
  """Generates tasks and their oracle trajectories into `data_dir` (reused when present)."""
  from compoworld.agents.agent import oracle_settings
  from compoworld.agents.trajectories import collect_trajectories
  from compoworld.tasks.generate import generate_tasks
  from compoworld.tasks.task import save_tasks

  path = data_dir / "sft.jsonl"
  if path.is_file():
    return path
  g = config.generate
  tasks, _ = generate_tasks(
    g.num_tasks,
    seed=g.seed,
    k=g.num_services,
    min_walk=g.min_walk,
    max_walk=g.max_walk,
    num_distractors=g.num_distractors,
    workers=g.workers,
  )
  if not tasks:
    raise ValueError(f"task generation produced no task with {g}")
  save_tasks(tasks, data_dir / "tasks.jsonl")  # GRPO (rl.grpo.trainer) trains on the same tasks
  summary = collect_trajectories(tasks, data_dir, agent="oracle", agent_kwargs=oracle_settings(g))
  if not summary["kept"]:
    raise ValueError(f"no verified trajectory among {len(tasks)} generated tasks: {summary}")
  return path


def load_sft_set(
  config: ml_collections.ConfigDict, workdir: Path
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
  """Train and held-out trajectories: from the configured files, or generated when none."""
  from compoworld.agents.trajectories import load_trajectories

  d = config.data
  path = Path(d.trajectories) if d.trajectories else generate_sft_set(config, workdir / DATA_DIR)
  records = load_trajectories(path)
  records = [r for r in records if r.get("success", True)]
  if not records:
    raise ValueError(f"no successful trajectories in {path}")
  if d.eval_trajectories:
    return records, load_trajectories(d.eval_trajectories)
  n_eval = round(d.eval_fraction * len(records))
  if n_eval >= len(records):
    raise ValueError(f"eval_fraction={d.eval_fraction} leaves no training data of {len(records)}")
  order = np.random.default_rng(d.seed).permutation(len(records))
  held = set(order[:n_eval].tolist())
  train = [r for i, r in enumerate(records) if i not in held]
  return train, [r for i, r in enumerate(records) if i in held]


def get_tokenizer(
  config: ml_collections.ConfigDict, workdir: Path, trajectories: Sequence[Mapping[str, Any]]
) -> Tokenizer:
  """The configured tokenizer, the one saved in `workdir` by an earlier run, the imported
  checkpoint's own (``model.init_from``), or a new SentencePiece model trained on the
  trajectories' text and the library's tool schemas.

  An imported checkpoint's tokenizer is used whenever it has one (`rl.data.tokenizer.load_tokenizer`:
  a real Qwen checkpoint's Hugging Face ``tokenizer.json``, or a ``tokenizer.model``), since its
  ids are the ones the weights were trained on. A loaded tokenizer must have every special token
  of the chat format as one id (an error names the missing ones); `build_model` checks that the
  model's vocabulary holds the tokenizer's. A checkpoint with no tokenizer at all (a test model)
  trains on a new one, which must fit in its vocabulary.
  """
  if config.tokenizer.path:
    source = Path(config.tokenizer.path)
  elif has_tokenizer(workdir):
    source = workdir
  elif config.model.init_from and has_tokenizer(config.model.init_from):
    source = Path(config.model.init_from)
  else:
    source = None
  # The chat format's system turn and tool replies: a tokenizer trained here takes the config's;
  # a loaded one keeps its own unless the config asks for a format other than the default.
  system = config.tokenizer.get("chat_system", "full")
  replies = config.tokenizer.get("chat_replies", "as_sent")
  if source is not None:
    tokenizer = load_tokenizer(source)
    require_tokens(tokenizer, SPECIAL_TOKENS, source)
    if replies != "as_sent":
      set_chat_replies(tokenizer, replies)
    if system != "full":
      set_chat_system(tokenizer, system)
  else:
    from rl.data.corpus import conversation_texts, library_texts

    texts: dict[str, None] = {}
    for record in trajectories:
      texts.update(dict.fromkeys(conversation_texts(record["messages"])))
    texts.update(dict.fromkeys(library_texts()))
    tokenizer = SentencePieceTokenizer.train(
      list(texts), config.tokenizer.vocab_size, SPECIAL_TOKENS
    )
    set_chat_replies(set_chat_system(tokenizer, system), replies)
  # What the trajectories compose rather than copy: grounded decoding of this policy leaves it
  # free (rl.decoding.arguments). A tokenizer saved in the workdir has it from these trajectories.
  if trajectories and source != workdir:
    tokenizer.chat_composed = tuple(composed_arguments(trajectories))
  return tokenizer


def data_shards(config: ml_collections.ConfigDict) -> tuple[int, list[int]]:
  """(S, this process's data shards). The trajectories are dealt into S shards
  (``data.num_shards``; 0 = one per process), each packed into rows on its own; a global batch
  is every shard's B / S rows side by side, process p loading shards [p S / P, (p + 1) S / P).
  The batches depend on S alone, so a run of 1 process and one of P processes with the same S
  train on the same rows."""
  processes = jax.process_count()
  shards = config.data.get("num_shards", 0) or processes
  if shards % processes or config.data.batch_size % shards:
    raise ValueError(
      f"data.num_shards={shards} must be a multiple of the {processes} processes and divide "
      f"data.batch_size={config.data.batch_size}"
    )
  per = shards // processes
  first = jax.process_index() * per
  return shards, list(range(first, first + per))


def data_config(
  config: ml_collections.ConfigDict,
  *,
  epochs: int | None,
  train: bool,
  shard: int = 0,
  num_shards: int = 1,
) -> DataConfig:
  d = config.data
  return DataConfig(
    seq_len=d.seq_len,
    batch_size=d.batch_size // num_shards,
    seed=d.seed,
    num_epochs=epochs,
    num_packing_bins=d.num_packing_bins // num_shards or None,
    overlong=d.overlong,
    drop_remainder=train,
    shard_index=shard,
    num_shards=num_shards,
    value_mask=d.get("value_loss_weight", 0.0) > 0 or d.get("pointer_loss_weight", 0.0) > 0,
  )


def local_batches(
  trajectories, renderer, config: ml_collections.ConfigDict, *, epochs: int | None, train: bool
) -> ShardBatches:
  """This process's rows of every global batch (`data_shards`)."""
  shards, mine = data_shards(config)
  return ShardBatches(
    {
      s: sft_dataset(
        trajectories,
        renderer,
        data_config(config, epochs=epochs, train=train, shard=s, num_shards=shards),
      )
      for s in mine
    },
    shards,
  )


def data_stats(trajectories, renderer, config: ml_collections.ConfigDict) -> dict[str, Any]:
  """How the trajectories fit the configured rows: their token lengths (percentiles), the share
  longer than a row (truncated or dropped, per ``data.overlong``) and the share of loss tokens
  that falls past the row end, and one epoch's packing (`rl.data.packing.PackingStats`, whose
  ``packing_efficiency`` is non-pad tokens / all tokens)."""
  seq_len = config.data.seq_len
  shards, mine = data_shards(config)
  lengths, loss_tokens, lost = [], 0, 0
  for record in (r for s in mine for r in trajectories[s::shards]):  # this process's share
    rendered = renderer.render(record["messages"])
    lengths.append(len(rendered))
    loss_tokens += int(rendered.loss_mask[1:].sum())  # a target is learned, not the first input
    lost += int(rendered.loss_mask[seq_len + 1 :].sum())
  lengths_n = np.asarray(lengths)
  packing = measure_packing(
    local_batches(trajectories, renderer, config, epochs=1, train=True), progress=False
  )
  packing.batches = distributed.all_processes(packing.batches, min)  # steps every process has
  packing.max_row_loss_tokens = distributed.all_processes(packing.max_row_loss_tokens, max)
  return {
    "trajectories": len(lengths),
    "length_percentiles": {str(q): int(np.percentile(lengths_n, q)) for q in (0, 10, 50, 90, 100)},
    "mean_length": float(lengths_n.mean()),
    "seq_len": seq_len,
    "overlong_share": float(np.mean(lengths_n > seq_len + 1)),
    "loss_tokens_past_row_end_share": lost / max(loss_tokens, 1),
    **packing.summary(),
  }


def count_steps(
  trajectories, renderer, config: ml_collections.ConfigDict, batches_per_epoch: int | None = None
) -> int:
  """Optimizer steps of the configured run: ``max_steps``, or every batch of every epoch."""
  if config.max_steps > 0:
    return config.max_steps
  per_epoch = batches_per_epoch
  if per_epoch is None:
    one_epoch = local_batches(trajectories, renderer, config, epochs=1, train=True)
    per_epoch = distributed.all_processes(sum(1 for _ in one_epoch), min)
  if not per_epoch:
    raise ValueError(
      f"{len(trajectories)} trajectories do not fill one batch of {config.data.batch_size} rows"
    )
  return per_epoch * config.data.num_epochs


def pad_rows(batch: Mapping[str, np.ndarray], rows: int) -> dict[str, np.ndarray]:
  """A last, short eval batch padded with empty rows (loss mask 0), so shapes never change."""
  short = rows - len(batch["tokens"])
  return {k: np.pad(np.asarray(batch[k]), ((0, short), (0, 0))) for k in BATCH_KEYS}


def eval_batches(eval_set, renderer, config: ml_collections.ConfigDict) -> list[dict]:
  """This process's rows of every held-out batch: each shard's batches padded to B / S rows, and
  empty rows where a shard (or every shard of this process) has run out before the others."""
  shard_sets = local_batches(eval_set, renderer, config, epochs=1, train=False)
  rows, seq_len = config.data.batch_size // shard_sets.num_shards, config.data.seq_len
  per_shard = [[pad_rows(b, rows) for b in ds] for ds in shard_sets.shards.values()]
  count = distributed.all_processes(max(len(b) for b in per_shard), max)
  empty = {k: np.zeros((rows, seq_len), np.int32) for k in BATCH_KEYS}
  return [
    {k: np.concatenate([(b[i] if i < len(b) else empty)[k] for b in per_shard]) for k in BATCH_KEYS}
    for i in range(count)
  ]
