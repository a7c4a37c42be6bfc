"""GRPO's update in micro-batches (``rl.grpo.update.MicroStep``, ``optim.micro_rows``): the
chunks' weighted gradients are the fused step's, metrics included, and a run with it trains."""

import json

import jax
import numpy as np
import optax
import pytest

import models
from rl.grpo import trainer as grpo
from rl.grpo.loss import GRPOLossConfig
from rl.grpo.update import MicroStep, loss_weights
from tests.rl.test_grpo import (
  FirstStepFlatEngine,
  HalfSpreadEngine,
  init_policy,  # noqa: F401 (a fixture)
  random_rollouts,
  run_config,
  tiny_model,
)


def test_loss_weights_are_each_chunks_share_of_the_denominator():
  mask = np.zeros((4, 6), bool)
  mask[0, :3] = mask[1, :1] = mask[3, :4] = True  # row 2 has no loss token
  # chunks of rows {0, 1} and {2, 3}: 4 and 4 tokens; 2 and 1 rows with tokens
  np.testing.assert_allclose(loss_weights(mask, 2, "token-mean"), [0.5, 0.5])
  np.testing.assert_allclose(loss_weights(mask, 2, "seq-mean-token-mean"), [2 / 3, 1 / 3])
  np.testing.assert_allclose(loss_weights(mask, 4, "seq-mean-token-sum"), [1 / 3] * 2 + [0, 1 / 3])
  np.testing.assert_allclose(loss_weights(np.zeros((4, 6)), 2, "token-mean"), [0.5, 0.5])


def _updates(aggregation):
  """One update of a tiny policy on 8 rows in 2 minibatches with a KL and an entropy term, fused
  and in chunks of 2 rows: (params, metrics) of each. SGD: the update is the gradient itself."""
  loss_config = GRPOLossConfig(aggregation=aggregation, kl_coef=0.05, entropy_coef=0.01)
  batch = grpo.assemble_batch(random_rollouts(3, 2, 4, 256), 2, 4, min_length=64)
  rng = np.random.default_rng(1)
  batch["old_logp"] = np.where(batch["loss_mask"], rng.normal(-5, 1, batch["old_logp"].shape), 0)
  advantages = rng.normal(size=8).astype(np.float32)
  tx = optax.sgd(1.0)
  mesh = models.make_mesh(devices=jax.devices()[:1])
  kw = {"temperature": 0.7, "num_minibatches": 2}
  out = []
  for micro in (False, True):
    with models.use_mesh(mesh):
      model = tiny_model(mesh=mesh)
      graphdef, state = grpo.init_state(model, tx, mesh, keep_reference=True)
      if micro:
        step = MicroStep(graphdef, tx, loss_config, mesh, rows=2, **kw)
        state, metrics = step(state, batch, advantages)
      else:
        fused = jax.jit(grpo.make_grpo_step(graphdef, tx, loss_config, **kw), donate_argnums=0)
        state, metrics = fused(state, grpo.shard_batch(batch, advantages, mesh))
        metrics = {k: float(v) for k, v in jax.device_get(metrics).items()}
    out.append((jax.device_get(state["params"]), metrics, int(state["step"])))
  return out


@pytest.mark.slow  # three compilations
@pytest.mark.parametrize("aggregation", ["seq-mean-token-mean", "token-mean"])
def test_micro_batches_give_the_fused_steps_update(aggregation):
  (fused, fused_m, fused_step), (micro, micro_m, micro_step) = _updates(aggregation)
  assert fused_step == micro_step == 1
  assert abs(fused_m["pg_loss"]) > 1e-4 and fused_m["kl"] > 0  # the second minibatch moved
  for key in ("loss", "first_loss", "pg_loss", "kl", "entropy", "ratio_min", "ratio_max"):
    np.testing.assert_allclose(micro_m[key], fused_m[key], rtol=2e-4, atol=1e-6, err_msg=key)
  for key in ("clip_frac_low", "clip_frac_high", "ratio_mean"):
    np.testing.assert_allclose(micro_m[key], fused_m[key], atol=1e-5, err_msg=key)
  np.testing.assert_allclose(micro_m["grad_norm"], fused_m["grad_norm"], rtol=1e-3)
  leaves = jax.tree.leaves(jax.tree.map(lambda a, b: np.abs(a - b).max(), fused, micro))
  assert max(leaves) < 1e-5, max(leaves)


def test_micro_step_rejects_rows_that_do_not_split():
  step = object.__new__(MicroStep)
  step.rows, step.num_minibatches = 3, 1
  with pytest.raises(ValueError, match="chunks of 3 rows"):
    step(None, {}, np.zeros(8))
  with pytest.raises(ValueError, match="rows >= 1"):
    MicroStep(None, None, GRPOLossConfig(), None, rows=0, temperature=1.0)


def test_a_run_in_micro_batches_trains_every_update_size_with_one_program(
  tmp_path,
  init_policy,  # noqa: F811
  tasks,
):
  class OneThenTwo(FirstStepFlatEngine):
    """One group of two with a spread at the first step, both at the second (updates of 4 and
    8 rows under optim.signal_groups_only: one chunk of 2 rows for both); it keeps a checksum
    of the parameters it samples with."""

    def run(self, tasks, *, seed, state=None):
      rollouts = HalfSpreadEngine.run(self, tasks, seed=seed, state=state)
      leaves = jax.tree.leaves(state)
      self.checksums.append(float(sum(np.abs(np.asarray(x, np.float64)).sum() for x in leaves)))
      if len(self.calls) >= 2:
        for i, r in enumerate(rollouts):
          r.passed = np.full(len(r.passed), i % 2 == 0)
      return rollouts

  engines = []

  def factory(*args, **kwargs):
    engines.append(OneThenTwo(*args, **kwargs))
    return engines[-1]

  changes = {"eval.every": 0, "reward.name": "binary", "optim.num_minibatches": 1}
  changes |= {"optim.skip_without_signal": True, "optim.signal_groups_only": True}
  config = run_config(init_policy, num_steps=3, **changes, **{"optim.micro_rows": 2})
  summary = grpo.train(config, tmp_path, engine_factory=factory, tasks=tasks)
  assert summary["groups_with_signal"] == [0.5, 1.0, 1.0]
  rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
  steps = [r for r in rows if "update_skipped" in r]
  assert [r["update_rows"] for r in steps] == [4.0, 8.0, 8.0]
  assert [r["new_shape"] for r in steps] == [1.0, 0.0, 0.0]  # one chunk shape for all
  assert all(np.isfinite(r["loss"]) and r["grad_norm"] > 0 for r in steps)
  checksums = engines[0].checksums
  assert len(checksums) == 3 and len(set(checksums)) == 3  # every update moved the policy


def test_micro_rows_that_do_not_split_a_minibatch_are_rejected(
  tmp_path,
  init_policy,  # noqa: F811
  tasks,
):
  config = run_config(init_policy, **{"optim.num_minibatches": 1, "optim.micro_rows": 3})
  with pytest.raises(ValueError, match="micro_rows=3 must divide the 8 rows"):
    grpo.train(config, tmp_path, engine_factory=HalfSpreadEngine, tasks=tasks)
