"""The grain SFT pipeline: packed rows hold whole trajectories, positions restart per segment,
the efficiency is counted right, and the order is deterministic and resumable."""

import collections
import json
import random

import numpy as np
import pytest

from rl.data.chat import ChatRenderer
from rl.data.packing import (
  BATCH_KEYS,
  DataConfig,
  ShardBatches,
  example_from_ids,
  measure_packing,
  sft_dataset,
)

SEQ_LEN = 256
WORDS = ["the", "service", "tool", "returns", "an", "envelope", "ok", "status", "data", "id"]


def conversation(rng: random.Random, i: int) -> dict:
  """A small trajectory record of random length (a few to a few hundred tokens)."""

  def words(n):
    return " ".join(rng.choice(WORDS) for _ in range(n))

  calls = [{"id": "c", "type": "function", "function": {"name": "list_tools", "arguments": "{}"}}]
  return {
    "task_id": f"t{i}",
    "messages": [
      {"role": "user", "content": f"[{i}] " + words(rng.randint(1, 10))},
      {"role": "assistant", "content": words(rng.randint(0, 10)), "tool_calls": calls},
      {"role": "tool", "tool_call_id": "c", "content": words(rng.randint(1, 90))},
      {"role": "assistant", "content": words(rng.randint(1, 10))},
    ],
  }


@pytest.fixture(scope="module")
def renderer(tokenizer):
  """Without the tool schemas in a system turn, so that short rows hold several trajectories."""
  return ChatRenderer(tokenizer, tools=[])


@pytest.fixture(scope="module")
def records():
  rng = random.Random(0)
  return [conversation(rng, i) for i in range(40)]


def reference_examples(records, renderer, seq_len=SEQ_LEN):
  """What each record must become, rendered one by one without grain."""
  out = []
  for r in records:
    rendered = renderer.render(r["messages"])
    out.append(example_from_ids(rendered.ids, rendered.loss_mask, seq_len))
  return out


def segments(batch):
  """Every (row, segment) of a batch as (tokens, targets, loss_mask, positions)."""
  for b in range(batch["tokens"].shape[0]):
    seg = batch["segment_ids"][b]
    for s in np.unique(seg[seg > 0]):
      where = np.flatnonzero(seg == s)
      yield b, where, tuple(batch[k][b, where] for k in ("tokens", "targets", "loss_mask"))


def all_batches(records, renderer, **kwargs):
  config = DataConfig(**{"seq_len": SEQ_LEN, "batch_size": 4, **kwargs})
  return list(sft_dataset(records, renderer, config))


def test_batches_are_what_a_trainer_needs(records, renderer):
  batch = all_batches(records, renderer)[0]
  assert sorted(batch) == sorted(BATCH_KEYS)
  for key in BATCH_KEYS:
    assert batch[key].shape == (4, SEQ_LEN) and batch[key].dtype == np.int32, key


def test_rows_hold_whole_trajectories(records, renderer):
  """Segments never cross rows: each segment is exactly one reference example, every example
  is in exactly one segment, positions restart at 0 and padding carries no loss."""
  expected = reference_examples(records, renderer)
  lengths = {len(e["tokens"]) for e in expected}
  assert min(lengths) < SEQ_LEN // 3 and max(lengths) > SEQ_LEN // 2  # packing has work to do
  seen = collections.Counter()
  for batch in all_batches(records, renderer, drop_remainder=False):
    for b, where, (tokens, targets, mask) in segments(batch):
      assert np.array_equal(where, np.arange(where[0], where[0] + len(where)))  # contiguous
      assert np.array_equal(batch["positions"][b, where], np.arange(len(where)))
      seen[tokens.tobytes(), targets.tobytes(), mask.tobytes()] += 1
    seg = batch["segment_ids"]
    for row in seg:  # segments 1, 2, ... from the left, padding only at the end
      used = row[row > 0]
      assert np.array_equal(np.unique(used), np.arange(1, used.max() + 1))
      assert (row[len(used) :] == 0).all()
    assert (batch["loss_mask"][seg == 0] == 0).all() and (batch["positions"][seg == 0] == 0).all()
    assert (batch["tokens"][seg == 0] == renderer.tokenizer.pad_id).all()
  want = collections.Counter(
    (e["tokens"].tobytes(), e["targets"].tobytes(), e["loss_mask"].tobytes()) for e in expected
  )
  assert seen == want


def test_packing_efficiency_is_non_pad_over_all(records, renderer):
  batches = all_batches(records, renderer, drop_remainder=False)
  stats = measure_packing(batches, progress=False)
  expected = reference_examples(records, renderer)
  rows = sum(b["tokens"].shape[0] for b in batches)
  real = sum(len(e["tokens"]) for e in expected)
  assert stats.rows == rows and stats.tokens == rows * SEQ_LEN
  assert stats.non_pad == real and stats.segments == len(records)
  assert stats.loss_tokens == sum(int(e["loss_mask"].sum()) for e in expected)
  assert stats.efficiency == pytest.approx(real / (rows * SEQ_LEN))
  assert stats.efficiency > 0.6  # first fit does pack: one trajectory per row would be ~0.3
  summary = stats.summary()
  assert summary["packing_efficiency"] == round(real / (rows * SEQ_LEN), 4)
  assert summary["segments_per_row"] == round(len(records) / rows, 3)
  assert measure_packing(batches, max_batches=2, progress=False).batches == 2


def test_same_seed_same_batches_other_seed_other_order(records, renderer):
  a = all_batches(records, renderer, seed=3, num_epochs=2)
  b = all_batches(records, renderer, seed=3, num_epochs=2)
  c = all_batches(records, renderer, seed=4, num_epochs=2)
  assert len(a) == len(b) > 4
  for x, y in zip(a, b, strict=True):
    for key in BATCH_KEYS:
      np.testing.assert_array_equal(x[key], y[key])
  assert not np.array_equal(a[0]["tokens"], c[0]["tokens"])


def test_epochs_see_every_trajectory_each_time(records, renderer):
  batches = all_batches(records, renderer, num_epochs=3, drop_remainder=False)
  assert measure_packing(batches, progress=False).segments == 3 * len(records)


@pytest.mark.parametrize("bins", [4, 12])  # 12 bins: state taken in the middle of a packed lot
def test_iterator_state_restores_the_next_batch(records, renderer, bins):
  config = DataConfig(seq_len=SEQ_LEN, batch_size=4, num_epochs=None, num_packing_bins=bins)
  ds = sft_dataset(records, renderer, config)
  it = iter(ds)
  for _ in range(5):
    next(it)
  state = json.loads(json.dumps(it.get_state()))  # what a checkpoint stores
  expected = [next(it) for _ in range(3)]
  resumed = iter(sft_dataset(records, renderer, config))
  resumed.set_state(state)
  for want in expected:
    got = next(resumed)
    for key in BATCH_KEYS:
      np.testing.assert_array_equal(got[key], want[key])


def test_overlong_trajectories_are_truncated_or_dropped(records, renderer):
  short = 128
  expected = reference_examples(records, renderer, seq_len=short)
  n_long = sum(len(renderer.render(r["messages"])) > short + 1 for r in records)
  assert 0 < n_long < len(records)

  def count(overlong):
    config = DataConfig(seq_len=short, batch_size=2, overlong=overlong, drop_remainder=False)
    return measure_packing(sft_dataset(records, renderer, config), progress=False)

  truncated, dropped = count("truncate"), count("drop")
  with_loss = sum(bool(e["loss_mask"].any()) for e in expected)  # the rest has nothing to learn
  assert truncated.segments == with_loss
  assert dropped.segments == len(records) - n_long
  assert truncated.non_pad == sum(len(e["tokens"]) for e in expected if e["loss_mask"].any())


def test_shards_split_the_trajectories(records, renderer):
  def task_tokens(shard):
    batches = all_batches(records, renderer, shard_index=shard, num_shards=2, drop_remainder=False)
    return {t.tobytes() for b in batches for _, _, (t, _, _) in segments(b)}

  zero, one = task_tokens(0), task_tokens(1)
  assert not zero & one and len(zero) + len(one) == len(records)


@pytest.mark.parametrize(
  "kwargs,match",
  [
    ({"seq_len": 1, "batch_size": 1}, "seq_len >= 2"),
    ({"seq_len": 8, "batch_size": 1, "num_epochs": 0}, "num_epochs"),
    ({"seq_len": 8, "batch_size": 1, "overlong": "wrap"}, "overlong"),
    ({"seq_len": 8, "batch_size": 1, "shard_index": 2, "num_shards": 2}, "shard_index 2"),
  ],
)
def test_bad_configs_are_rejected(kwargs, match):
  with pytest.raises(ValueError, match=match):
    DataConfig(**kwargs)


def test_no_trajectories_is_an_error(renderer):
  with pytest.raises(ValueError, match="no trajectories"):
    sft_dataset([], renderer, DataConfig(seq_len=8, batch_size=1))


def test_targets_are_next_tokens_and_the_mask_follows_the_targets():
  ids, mask = np.array([10, 11, 12, 13, 14]), np.array([0, 0, 1, 1, 0])
  example = example_from_ids(ids, mask, seq_len=8)
  np.testing.assert_array_equal(example["tokens"], [10, 11, 12, 13])
  np.testing.assert_array_equal(example["targets"], [11, 12, 13, 14])
  np.testing.assert_array_equal(example["loss_mask"], [0, 1, 1, 0])  # learn 12 and 13
  cut = example_from_ids(ids, mask, seq_len=2)
  np.testing.assert_array_equal(cut["tokens"], [10, 11])
  np.testing.assert_array_equal(cut["targets"], [11, 12])
  np.testing.assert_array_equal(cut["loss_mask"], [0, 1])
  assert {v.dtype for v in example.values()} == {np.dtype(np.int32)}


def _shards(records, renderer, which, num_shards=2):
  def shard(s):
    config = DataConfig(seq_len=SEQ_LEN, batch_size=2, num_epochs=None, shard_index=s,
                        num_shards=num_shards)  # fmt: skip
    return sft_dataset(records, renderer, config)

  return ShardBatches({s: shard(s) for s in which}, num_shards)


def test_shard_batches_put_each_shards_rows_side_by_side(records, renderer):
  """A process with both shards sees, row for row, what two processes of one shard each see."""
  both, first, second = (iter(_shards(records, renderer, w)) for w in ([0, 1], [0], [1]))
  for _ in range(3):
    whole, a, b = next(both), next(first), next(second)
    for key in BATCH_KEYS:
      np.testing.assert_array_equal(whole[key], np.concatenate([a[key], b[key]]))


def test_shard_batches_state_restores_each_shard(records, renderer):
  it = iter(_shards(records, renderer, [0, 1]))
  for _ in range(3):
    next(it)
  state = json.loads(json.dumps(it.get_state()))
  assert set(state) == {"0", "1"}
  expected = next(it)
  resumed = iter(_shards(records, renderer, [1]))  # one process's share of the same state
  resumed.set_state(state)
  np.testing.assert_array_equal(next(resumed)["tokens"], expected["tokens"][2:])
  with pytest.raises(ValueError, match=r"no shard \[2\]"):
    iter(_shards(records, renderer, [2], num_shards=4)).set_state(state)


def test_value_masks_mark_the_argument_values_each_call_passes_on(oracle_messages, tokenizer):
  """With ``value_mask`` the packed rows mark the tokens of the values ``call_tool`` passes on
  (and only assistant tokens); the marked runs, read back, are those values as the calls write
  them, each with its closing quote."""
  from rl.decoding.arguments import value_tokens
  from rl.decoding.constrained import Vocabulary

  renderer = ChatRenderer(tokenizer)
  records = [{"messages": m} for m in oracle_messages]
  rendered = renderer.render(oracle_messages[0])
  marked = value_tokens(
    rendered.ids, rendered.loss_mask, Vocabulary.from_tokenizer(tokenizer, renderer.special_ids)
  )
  assert not (marked & (rendered.loss_mask == 0)).any()
  runs, run = [], []
  for token, on in zip(rendered.ids, marked, strict=True):
    if on:
      run.append(int(token))
    elif run:
      runs.append(renderer.decode(run))
      run = []
  passed_on = [
    json.loads(c["function"]["arguments"]).get("arguments") or {}
    for m in oracle_messages[0]
    if m["role"] == "assistant"
    for c in m.get("tool_calls") or []
    if c["function"]["name"] == "call_tool"
  ]
  values = [
    v
    for args in passed_on
    for v in args.values()
    if isinstance(v, str | int | float) and not isinstance(v, bool)
  ]
  assert values and len(runs) >= len(values)
  text = "".join(runs)
  for v in values:
    assert (json.dumps(v)[1:] if isinstance(v, str) else json.dumps(v)) in text
  assert '"service"' not in text and '"tool"' not in text  # names, not passed on
  config = dict(seq_len=8192, batch_size=1, overlong="truncate")
  plain = all_batches(records, renderer, **config)
  valued = all_batches(records, renderer, value_mask=True, **config)
  assert not any(b["value_mask"].any() for b in plain)
  for a, b in zip(plain, valued, strict=True):
    np.testing.assert_array_equal(a["tokens"], b["tokens"])
    assert (b["value_mask"] <= b["loss_mask"]).all()
  assert sum(int(b["value_mask"].sum()) for b in valued) > 0
