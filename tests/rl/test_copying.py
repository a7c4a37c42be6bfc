"""Copy rows and the copy stage before SFT (rl.sft.copying)."""

import jax
import numpy as np
import pytest
from flax import nnx

from configs import sft as sft_configs
from rl.sft import copying
from rl.sft import trainer as sft


def test_every_span_target_under_the_mask_is_the_token_written_at_the_first_copy():
  rows = copying.span_rows(np.random.default_rng(0), batch=8, length=64, repeat=8, vocab=512)
  assert rows["tokens"].shape == rows["targets"].shape == (8, 64)
  for b in range(8):
    tokens, targets, mask = rows["tokens"][b], rows["targets"][b], rows["loss_mask"][b]
    masked = np.flatnonzero(mask)
    assert len(masked) == 7  # the repeat less its first token
    # Each masked target appears earlier in the row, followed by what comes before it here:
    # predicting it needs only a look back at the first copy.
    for t in masked:
      earlier = [i for i in range(t - 1) if tokens[i] == tokens[t] and tokens[i + 1] == targets[t]]
      assert earlier, (b, t)
  with pytest.raises(ValueError, match="cannot hold a span"):
    copying.span_rows(np.random.default_rng(0), batch=1, length=16, repeat=8, vocab=512)


def test_periodic_targets_are_the_id_a_block_back_and_only_after_the_first_block():
  rows = copying.periodic_rows(np.random.default_rng(1), batch=4, length=40, repeat=6, vocab=300)
  tokens, targets, mask = rows["tokens"], rows["targets"], rows["loss_mask"]
  assert tokens.min() >= copying.FIRST_ID and tokens.max() < 300
  # Target t is the id at t + 1, which is the one written `repeat` ids earlier.
  np.testing.assert_array_equal(targets[:, 5:], tokens[:, :-5])
  np.testing.assert_array_equal(mask[0], (np.arange(40) >= 5).astype(np.int32))
  with pytest.raises(ValueError, match="cannot hold a block"):
    copying.periodic_rows(np.random.default_rng(0), batch=1, length=10, repeat=6, vocab=300)


def test_recall_targets_are_the_values_stored_after_the_same_key():
  rows = copying.recall_rows(np.random.default_rng(0), 3, 63, 3, 500)
  pairs, width = 64 // 8, 4  # keys each followed by 3 value ids, stored then recalled
  for tokens, targets, mask in zip(rows["tokens"], rows["targets"], rows["loss_mask"], strict=True):
    stored = {
      int(tokens[i]): list(tokens[i + 1 : i + width]) for i in range(0, pairs * width, width)
    }
    assert len(stored) == pairs and int(mask.sum()) == pairs * 3
    recalled = {}
    for t in np.flatnonzero(mask):  # target t is token t + 1: a value id after its key
      key_at = pairs * width + ((t + 1 - pairs * width) // width) * width
      recalled.setdefault(int(tokens[key_at]), []).append(int(targets[t]))
    assert recalled == {k: [int(v) for v in vals] for k, vals in stored.items()}
  with pytest.raises(ValueError, match="two key-value pairs"):
    copying.recall_rows(np.random.default_rng(0), 1, 8, 3, 500)


def test_the_block_doubles_once_a_step_copies_well_enough_up_to_the_max():
  assert copying.next_repeat(16, 0.5, 0.9, 256) == 16
  assert copying.next_repeat(16, 0.9, 0.9, 256) == 32
  assert copying.next_repeat(200, 1.0, 0.9, 256) == 256
  assert copying.next_repeat(256, 1.0, 0.9, 256) == 256


def test_a_stage_whose_block_cannot_fit_fails_clearly():
  c = sft_configs.get_config("tiny").copy
  c.steps, c.seq_len, c.max_repeat = 5, 64, 40
  with pytest.raises(ValueError, match="must fit twice"):
    copying.stage_config(c)
  c.max_repeat, c.min_repeat = 16, 32
  with pytest.raises(ValueError, match="min_repeat"):
    copying.stage_config(c)


def test_the_copy_stage_trains_the_weights_and_leaves_sft_optimizer_state_alone():
  config = sft_configs.get_config("tiny")
  config.model.overrides.update(num_layers=1, full_attention_interval=1, d_model=32)
  config.model.overrides.update(num_heads=2, num_kv_heads=1, head_dim=16, num_experts=2)
  config.model.overrides.update(num_experts_per_tok=1, expert_dim=16, shared_expert_dim=16)
  config.copy.update(steps=3, batch_size=2, seq_len=32, min_repeat=4, max_repeat=8, log_every=1)
  with nnx.use_eager_sharding(False):
    model, cfg = sft.build_model(config, 64)
    tx, _ = sft.make_optimizer(config, 10)
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    state = {"step": np.int32(0), "params": params, "rest": rest, "opt_state": tx.init(params)}
    out, points = copying.copy_stage(
      config, graphdef, state, vocab_size=64, aux_loss_coef=cfg.router_aux_loss_coef
    )
  assert [p["step"] for p in points] == [1, 2, 3]
  # A model that cannot copy yet stays at the shortest block (next_repeat: how it advances).
  assert [p["repeat"] for p in points] == [4, 4, 4]
  assert all(np.isfinite(p["loss"]) and 0 <= p["accuracy"] <= 1 for p in points)
  moved = jax.tree.leaves(jax.tree.map(lambda a, b: bool((a != b).any()), params, out["params"]))
  assert any(moved)
  assert out["opt_state"] is state["opt_state"] and out["step"] is state["step"]
