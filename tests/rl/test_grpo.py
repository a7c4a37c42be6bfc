"""GRPO trainer: batch assembly, the step's loss against rl.grpo.loss, a policy-improvement sanity
check, the task order, reward choice by name, whole runs with a scripted engine (resume equality),
and a sharded step on 8 fake devices against one device."""

import functools
import json
import textwrap
from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

import models
from configs.grpo import get_config
from rl.grpo import trainer as grpo
from rl.grpo.loss import GRPOLossConfig, grpo_loss
from rl.serve.policy import load_policy_parts, save_policy
from tests.rl.fake_devices import run_script

TINY = {"num_layers": 2, "full_attention_interval": 2, "deltanet_chunk": 16, "moe_backend": "sort"}
SMALL = {**TINY, "d_model": 32, "expert_dim": 16, "shared_expert_dim": 16}


def rollout(group, index, tokens, mask, logprobs=None, passed=(), **fields):
  tokens = np.asarray(tokens, np.int32)
  mask = np.asarray(mask, bool)
  logprobs = np.zeros(len(tokens), np.float32) if logprobs is None else np.asarray(logprobs)
  defaults = {
    "task_id": f"t{group}",
    "messages": [],
    "final_answer": None,
    "finished": True,
    "turns": 1,
    "tool_calls": 2,
    "tool_errors": 1,
    "criteria": [f"c{j}" for j in range(len(passed))],
    "generated_tokens": int(mask.sum()),
    "env_seconds": 0.0,
  }
  return SimpleNamespace(
    group=group,
    index=index,
    tokens=tokens,
    loss_mask=mask,
    logprobs=np.where(mask, logprobs, 0.0).astype(np.float32),
    passed=np.asarray(passed, bool),
    **{**defaults, **fields},
  )


def random_rollouts(seed, num_groups, n, vocab, criteria=(2, 3)):
  """Conversations of 20-60 random ids: an 8-token prompt, then alternating agent / tool blocks."""
  rng = np.random.default_rng(seed)
  out = []
  for g in range(num_groups):
    m = criteria[g % len(criteria)]
    for i in range(n):
      length = int(rng.integers(20, 60))
      mask = np.zeros(length, bool)
      t = 8
      while t < length:
        k = int(rng.integers(2, 9))
        mask[t : t + k] = True
        t += k + int(rng.integers(1, 6))
      passed = rng.random(m) < 0.5
      tokens = rng.integers(3, vocab, length)
      out.append(rollout(g, i, tokens, mask, -rng.random(length) * 3, passed))
  return out


# --- batch assembly ---------------------------------------------------------------------------


def test_assemble_batch_pads_shifts_and_lays_out_groups():
  rollouts = [
    rollout(0, 0, [5, 6, 7, 8], [0, 0, 1, 1], [0, 0, -0.5, -0.25], passed=[1, 0]),
    rollout(0, 1, [5, 6, 9], [0, 1, 1], [0, -1.0, -2.0], passed=[0, 0]),
    rollout(1, 0, [4, 3, 2, 1, 7, 7], [0, 1, 0, 0, 1, 1], [0, -3.0, 0, 0, -4.0, -5.0], passed=[1]),
    rollout(1, 1, [4, 3], [0, 1], [0, -6.0], passed=[1]),
  ]
  batch = grpo.assemble_batch(rollouts, 2, 2, min_length=8)
  assert batch["tokens"].shape == (4, 8)  # longest row: 5 inputs, padded to min_length
  np.testing.assert_array_equal(batch["tokens"][0], [5, 6, 7, 0, 0, 0, 0, 0])
  np.testing.assert_array_equal(batch["targets"][0], [6, 7, 8, 0, 0, 0, 0, 0])
  np.testing.assert_array_equal(batch["loss_mask"][0], [0, 1, 1, 0, 0, 0, 0, 0])
  np.testing.assert_allclose(batch["old_logp"][0], [0, -0.5, -0.25, 0, 0, 0, 0, 0])
  np.testing.assert_array_equal(batch["targets"][2], [3, 2, 1, 7, 7, 0, 0, 0])
  np.testing.assert_array_equal(batch["loss_mask"][2], [1, 0, 0, 1, 1, 0, 0, 0])
  np.testing.assert_allclose(batch["old_logp"][2], [-3, 0, 0, -4, -5, 0, 0, 0])
  np.testing.assert_array_equal(batch["segment_ids"][3], [1, 0, 0, 0, 0, 0, 0, 0])
  np.testing.assert_array_equal(batch["positions"][2], [0, 1, 2, 3, 4, 0, 0, 0])
  # loss-token positions, padded with 0 to the widest row's count (3) rounded up to K = 8
  assert batch["loss_index"].shape == (4, 8)
  np.testing.assert_array_equal(batch["loss_index"][0], [1, 2, 0, 0, 0, 0, 0, 0])
  np.testing.assert_array_equal(batch["loss_index"][2], [0, 3, 4, 0, 0, 0, 0, 0])
  # passed [G, N, M] with M = 2; group 1 has one criterion, its second column masked
  np.testing.assert_array_equal(batch["passed"], [[[1, 0], [0, 0]], [[1, 0], [1, 0]]])
  np.testing.assert_array_equal(batch["criteria_mask"], [[1, 1], [1, 0]])
  metrics = grpo.rollout_metrics(rollouts, batch)
  assert metrics["pass_rate"] == 0.5  # (0, 0) fails c1, (0, 1) fails both, group 1 passes
  assert metrics["criterion_pass_rate"] == pytest.approx((0.25 + 1.0) / 2)
  assert metrics["tool_error_rate"] == 0.5


def test_batch_b_ij_follow_the_coupling():
  # criteria (positive, positive, must_not): the second positive fails, the must-not holds
  raw, gated = [1, 0, 1], [1, 0, 0]
  rollouts = [
    rollout(0, 0, [1, 2, 3], [0, 1, 1], passed=gated, raw_passed=np.asarray(raw, bool)),
    rollout(0, 1, [1, 2, 3], [0, 1, 1], passed=[1, 1, 1], raw_passed=np.ones(3, bool)),
  ]
  independent = grpo.assemble_batch(rollouts, 1, 2, min_length=8)
  np.testing.assert_array_equal(independent["passed"], [[raw, [1, 1, 1]]])  # the default
  batch = grpo.assemble_batch(rollouts, 1, 2, min_length=8, coupling="gated")
  np.testing.assert_array_equal(batch["passed"], [[gated, [1, 1, 1]]])
  # a hand-made rollout without raw results has one form
  plain = [rollout(0, i, [1, 2], [0, 1], passed=gated) for i in range(2)]
  np.testing.assert_array_equal(grpo.assemble_batch(plain, 1, 2)["passed"], [[gated, gated]])
  with pytest.raises(ValueError, match="unknown rubric coupling 'both'"):
    grpo.assemble_batch(rollouts, 1, 2, coupling="both")


def test_reward_coupling_config():
  config = get_config("tiny")
  assert config.reward.coupling == "independent" == grpo.reward_coupling(config)
  config.reward.coupling = "gated"
  assert grpo.reward_coupling(config) == "gated"
  config.reward.coupling = "strict"
  with pytest.raises(ValueError, match="coupling 'strict'; valid: independent, gated"):
    grpo.reward_coupling(config)


def test_groups_with_signal():
  rewards = np.array([[0.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.5, 0.5, 0.5], [0.2, 0.3, 0.2]])
  assert grpo.groups_with_signal(rewards) == 0.5
  assert grpo.groups_with_signal(np.ones((2, 4))) == 0.0
  assert grpo.groups_with_signal([[1.0, 1.0 + 1e-9]]) == 0.0  # within the tolerance
  assert grpo.groups_with_signal([[0.0, 1e-3]]) == 1.0
  with pytest.raises(ValueError, match="G, N"):
    grpo.groups_with_signal(np.ones(3))


def test_assemble_batch_floors_fix_the_shapes():
  """min_length and min_loss_tokens are floors on L and K: batches of shorter rollouts keep the
  floors' shape (one compilation of the update), with the same rows."""
  rollouts = random_rollouts(0, 2, 2, 50)
  plain = grpo.assemble_batch(rollouts, 2, 2, min_length=8)
  floored = grpo.assemble_batch(rollouts, 2, 2, min_length=128, min_loss_tokens=64)
  assert plain["tokens"].shape[1] < 128 and plain["loss_index"].shape[1] == 32
  assert floored["tokens"].shape == (4, 128) and floored["loss_index"].shape == (4, 64)
  n = plain["tokens"].shape[1]
  for key in ("tokens", "targets", "loss_mask", "old_logp", "segment_ids"):
    np.testing.assert_array_equal(floored[key][:, :n], plain[key], err_msg=key)
    assert not floored[key][:, n:].any(), key
  np.testing.assert_array_equal(floored["loss_index"][:, :32], plain["loss_index"])
  assert not floored["loss_index"][:, 32:].any()
  # K stays within the row: a floor past L gives K = L
  assert grpo.assemble_batch(rollouts, 2, 2, min_length=64, min_loss_tokens=256)[
    "loss_index"
  ].shape == (4, 64)


def test_bucket_lengths():
  assert [grpo.bucket_length(n, 128) for n in (1, 128, 129, 191, 300, 1000, 1025)] == [
    128, 128, 160, 192, 320, 1024, 1280,
  ]  # fmt: skip


def test_assemble_batch_rejects_bad_layouts():
  a, b = rollout(0, 0, [1, 2], [0, 1]), rollout(0, 1, [1, 2], [0, 1])
  with pytest.raises(ValueError, match="group-major"):
    grpo.assemble_batch([b, a], 1, 2)
  with pytest.raises(ValueError, match="2 rollouts for 2 groups"):
    grpo.assemble_batch([a, b], 2, 2)
  short = rollout(0, 1, [1, 2], [0, 1])
  short.logprobs = short.logprobs[:1]
  with pytest.raises(ValueError, match="differ in length"):
    grpo.assemble_batch([a, short], 1, 2)


def test_task_order_is_seeded_and_cycles():
  first = [grpo.step_task_indices(5, s, 2, seed=0) for s in range(5)]  # two passes over 5 tasks
  flat = [i for step in first for i in step]
  assert sorted(flat[:5]) == list(range(5)) and sorted(flat[5:]) == list(range(5))
  assert first == [grpo.step_task_indices(5, s, 2, seed=0) for s in range(5)]
  assert first != [grpo.step_task_indices(5, s, 2, seed=1) for s in range(5)]


@pytest.mark.parametrize("name", ["completion_focused", "uniform", "binary"])
def test_reward_is_chosen_by_name(name):
  config = get_config("tiny")
  config.reward.name = name
  passed = np.array([[[1, 0], [1, 1], [0, 0]]], bool)
  mask = np.ones((1, 2), bool)
  rewards = np.asarray(grpo.reward_function(config)(passed, mask))[0]
  expected = {
    # eq. 5: p = (2/3, 1/3), w = (0.01 + 1/3, 0.01 + 2/3)
    "completion_focused": [(1 / 3 + 0.01) / (1 + 0.02), 1.0, 0.0],
    "uniform": [0.5, 1.0, 0.0],
    "binary": [0.0, 1.0, 0.0],
  }[name]
  np.testing.assert_allclose(rewards, expected, rtol=1e-5)
  config.reward.name = "nope"
  with pytest.raises(ValueError, match="unknown reward"):
    grpo.reward_function(config)


def test_tasks_come_from_the_sft_run_split_as_it_split_trajectories(tmp_path, tasks):
  from compoworld.tasks.task import save_tasks
  from configs.sft import get_config as sft_config

  data = tmp_path / "data"
  save_tasks(tasks, data / "tasks.jsonl")
  with open(data / "sft.jsonl", "w") as f:
    for t in tasks:
      f.write(json.dumps({"task_id": t.id, "messages": [], "success": True}) + "\n")
  config = sft_config("tiny")
  config.data.trajectories = str(data / "sft.jsonl")
  config.data.eval_fraction = 0.34  # one of three
  (tmp_path / "config.json").write_text(config.to_json())
  train, held = grpo.load_task_sets(get_config("tiny"), tmp_path)
  assert len(train) == 2 and len(held) == 1
  assert {t.id for t in train} | {t.id for t in held} == {t.id for t in tasks}
  with pytest.raises(ValueError, match="no task set"):
    grpo.load_task_sets(get_config("tiny"), tmp_path / "elsewhere")
  explicit = get_config("tiny")
  explicit.data.tasks = str(data / "tasks.jsonl")
  explicit.data.num_eval_tasks = 2
  train, held = grpo.load_task_sets(explicit, None)
  assert len(train) == 1 and len(held) == 2


# --- the update step --------------------------------------------------------------------------


@pytest.mark.parametrize("chunk", [4, 5, 11])
def test_chunked_head_matches_the_whole_head(chunk):
  rng = np.random.default_rng(0)
  h, head = jnp.asarray(rng.normal(size=(2, 11, 8))), jnp.asarray(rng.normal(size=(8, 50)))
  targets = jnp.asarray(rng.integers(0, 50, (2, 11)))
  w = jnp.asarray(rng.normal(size=(2, 11)))

  def objective(h, head, chunk):
    logp, entropy = grpo.head_logp(h, head, targets, 0.7, chunk)
    return jnp.sum(logp * w) + 0.3 * jnp.sum(entropy * w), (logp, entropy)

  grad = jax.grad(objective, argnums=(0, 1), has_aux=True)
  (gh, ghead), (logp, entropy) = grad(h, head, 0)
  (ch, chead), (c_logp, c_entropy) = grad(h, head, chunk)
  np.testing.assert_allclose(c_logp, logp, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(c_entropy, entropy, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(ch, gh, rtol=1e-4, atol=1e-6)
  np.testing.assert_allclose(chead, ghead, rtol=1e-4, atol=1e-6)
  z = np.asarray(h @ head) / 0.7  # and the whole head against numpy
  ref = z - np.log(np.exp(z).sum(-1, keepdims=True))
  np.testing.assert_allclose(
    logp, np.take_along_axis(ref, np.asarray(targets)[..., None], -1)[..., 0], rtol=1e-5
  )


def tiny_model(vocab=256, mesh=None, **overrides):
  return models.create_model(
    models.get_config("tiny", vocab_size=vocab, **{**SMALL, **overrides}), seed=0, mesh=mesh
  )


#: The update of the single-step checks, one compiled step for all of them (the same shapes too:
#: 4 rows of 64 tokens, K = 32): ratios clipped at 0.9 and 1.1, KL to the initial policy and an
#: entropy bonus, at temperature 0.7.
STEP_LOSS = GRPOLossConfig(eps_low=0.1, eps_high=0.1, kl_coef=0.05, entropy_coef=0.01)
STEP_TEMPERATURE = 0.7


def one_step(model, batch, advantages):
  """`model` after one update on `batch` (`STEP_LOSS`, `STEP_TEMPERATURE`, Adam at 1e-3, one
  minibatch), and the step's metrics: those of the loss before the update."""
  config = get_config("tiny")
  config.optim.lr = 1e-3
  loss_config, temperature, minibatches = STEP_LOSS, STEP_TEMPERATURE, 1
  mesh = models.make_mesh(devices=jax.devices()[:1])
  tx = grpo.make_optimizer(config)
  with models.use_mesh(mesh):
    graphdef, state = grpo.init_state(model, tx, mesh, keep_reference=loss_config.kl_coef > 0)
    step = jax.jit(
      grpo.make_grpo_step(
        graphdef,
        tx,
        loss_config,
        temperature=temperature,
        num_minibatches=minibatches,
      ),
      donate_argnums=0,
    )
    state, metrics = step(state, grpo.shard_batch(batch, advantages, mesh))
  return nnx.merge(graphdef, state["params"], state["rest"]), jax.device_get(metrics)


@nnx.jit
def _logits(model, tokens):  # one compilation for every sequence_logp of one model shape
  return model(tokens)


def sequence_logp(model, rollouts, temperature):
  """Per rollout, log pi(tokens[t] | tokens[:t]) for t >= 1 and the entropy of that distribution,
  of the tempered policy over the whole vocabulary. No segment ids or positions: the rows are
  only right-padded, which a causal model never sees."""
  tokens = np.zeros((len(rollouts), 64), np.int32)
  for row, r in enumerate(rollouts):
    tokens[row, : len(r.tokens) - 1] = r.tokens[:-1]
  logits = np.asarray(_logits(model, jnp.asarray(tokens)))
  logps, entropies = [], []
  for row, r in enumerate(rollouts):
    z = logits[row, : len(r.tokens) - 1] / temperature
    logp = (
      z
      - np.log(np.exp(z - z.max(-1, keepdims=True)).sum(-1, keepdims=True))
      - z.max(-1, keepdims=True)
    )
    logps.append(np.take_along_axis(logp, r.tokens[1:, None], -1)[:, 0])
    entropies.append(-(np.exp(logp) * logp).sum(-1))
  return logps, entropies


def pad_rows(rows, shape):
  out = np.zeros(shape, np.float32)
  for i, row in enumerate(rows):
    out[i, : len(row)] = row
  return out


@pytest.mark.slow  # one step compilation: ~20 s alone, ~90 s on 2 cores shared with 4 jobs
def test_step_loss_equals_grpo_loss_on_the_same_arrays():
  temperature, config = STEP_TEMPERATURE, STEP_LOSS
  rollouts = random_rollouts(0, 2, 2, 256)
  batch = grpo.assemble_batch(rollouts, 2, 2, min_length=64)
  advantages = np.array([1.2, -0.8, 0.5, -1.5], np.float32)
  with models.use_mesh(None):
    model = tiny_model()
    logp, entropy = sequence_logp(model, rollouts, temperature)
  # The reference: grpo_loss on hand-padded per-sequence values. The sampler's log-probs are
  # perturbed so that ratios leave the clip range on both sides.
  logp_bt = pad_rows(logp, batch["tokens"].shape)
  entropy_bt = pad_rows(entropy, batch["tokens"].shape)
  mask = batch["loss_mask"].astype(bool)
  rng = np.random.default_rng(1)
  old = np.where(mask, logp_bt + rng.normal(0, 0.3, logp_bt.shape), 0.0).astype(np.float32)
  batch["old_logp"] = old
  expected, ref_metrics = grpo_loss(
    *map(jnp.asarray, (logp_bt, old, advantages, mask)), config, jnp.asarray(logp_bt),
    jnp.asarray(entropy_bt),
  )  # fmt: skip
  assert ref_metrics["clip_frac_low"] > 0 and ref_metrics["clip_frac_high"] > 0
  _, metrics = one_step(model, batch, advantages)
  np.testing.assert_allclose(metrics["first_loss"], expected, rtol=1e-4, atol=1e-6)
  for key in ("clip_frac_low", "clip_frac_high", "ratio_min", "ratio_max", "pg_loss", "entropy"):
    np.testing.assert_allclose(metrics[key], ref_metrics[key], rtol=1e-4, atol=1e-6, err_msg=key)
  np.testing.assert_allclose(metrics["kl"], 0.0, atol=1e-6)  # the reference is the policy itself


@pytest.mark.slow  # as above
def test_positive_advantage_raises_that_trajectory_logprob():
  rollouts = random_rollouts(3, 1, 4, 256, criteria=(2,))
  with models.use_mesh(None):
    model = tiny_model()
    before, _ = sequence_logp(model, rollouts, STEP_TEMPERATURE)
  batch = grpo.assemble_batch(rollouts, 1, 4, min_length=64)
  for row, lp in enumerate(before):  # sampled by this very policy: ratio 1
    batch["old_logp"][row, : len(lp)] = np.where(batch["loss_mask"][row, : len(lp)], lp, 0.0)
  advantages = np.array([1.5, -0.5, -0.5, -0.5], np.float32)
  trained, metrics = one_step(model, batch, advantages)
  np.testing.assert_allclose([metrics["ratio_min"], metrics["ratio_max"]], 1.0, atol=1e-4)
  with models.use_mesh(None):
    after, _ = sequence_logp(trained, rollouts, STEP_TEMPERATURE)
  change = [
    (a[r.loss_mask[1:]].mean() - b[r.loss_mask[1:]].mean())
    for a, b, r in zip(after, before, rollouts, strict=True)
  ]
  assert change[0] > 0, change
  assert all(c < 0 for c in change[1:]), change


# --- whole runs with a scripted engine --------------------------------------------------------


#: Loss tokens per scripted row at most: every batch then has the same loss-index width K (32,
#: `grpo.assemble_batch`), so a run compiles its step once, not once per K.
SCRIPTED_LOSS_TOKENS = 32
#: Rows of the scripted engine's log-prob pass: a smaller (held-out) batch is padded to it, so
#: training and evaluation share one compiled pass.
SCRIPTED_ROWS = 8


@functools.cache
def scripted_logp(graphdef, temperature: float):
  """The jitted log-prob pass of a policy graph, one per graph and temperature for the session:
  the engines of every run (training, held out, killed, resumed) share it and its compilation."""

  @jax.jit
  def logp(state, rows):
    return grpo.policy_logp(nnx.merge(graphdef, state), rows, temperature)[0]

  return logp


class ScriptedEngine:
  """Random conversations (a function of the seed) whose log-probs are the sampling policy's own,
  as a real engine's: the trainer's first ratio is 1 exactly when its shifts agree."""

  def __init__(self, model, renderer, config, sampler=None):
    self.config = config
    self.vocab = renderer.tokenizer.vocab_size
    self.calls = []
    self._logp = scripted_logp(nnx.graphdef(model), config.temperature)

  def run(self, tasks, *, seed, state=None):
    assert state is not None, "the trainer passes the parameters to sample with"
    self.calls.append((tuple(t.id for t in tasks), seed))
    n = self.config.num_rollouts
    rollouts = random_rollouts(seed % 2**31, len(tasks), n, self.vocab)
    for r, task in zip(rollouts, [t for t in tasks for _ in range(n)], strict=True):
      r.task_id = task.id
      r.passed = np.random.default_rng(seed % 997 + r.index).random(len(task.rubric)) < 0.5
      r.loss_mask[1:] &= np.cumsum(r.loss_mask[1:]) <= SCRIPTED_LOSS_TOKENS
      r.generated_tokens = int(r.loss_mask.sum())
    batch = grpo.assemble_batch(rollouts, len(tasks), n, min_length=64)
    assert batch["loss_index"].shape[1] == SCRIPTED_LOSS_TOKENS
    rows = {k: batch[k] for k in ("tokens", "targets", "positions", "segment_ids")}
    pad = SCRIPTED_ROWS - len(rollouts)  # copies of the first row, whose log-probs go unused
    if pad > 0:
      rows = {k: np.concatenate([v, np.repeat(v[:1], pad, 0)]) for k, v in rows.items()}
    logp = np.asarray(self._logp(state, {k: jnp.asarray(v) for k, v in rows.items()}))
    for row, r in enumerate(rollouts):
      r.logprobs = np.where(r.loss_mask, np.concatenate([[0.0], logp[row, : len(r.tokens) - 1]]), 0)
      r.logprobs = r.logprobs.astype(np.float32)
    return rollouts


@pytest.fixture(scope="module")
def init_policy(tmp_path_factory, tokenizer):
  directory = tmp_path_factory.mktemp("init")
  with models.use_mesh(None):
    save_policy(directory, tiny_model(vocab=tokenizer.vocab_size), tokenizer, 0)
  return directory


def run_config(init, **changes):
  config = get_config("tiny")
  config.init = str(init)
  config.sft_config = ""
  config.num_steps = 4
  config.data.tasks_per_step = 2
  config.data.min_length = 64
  config.rollout.num_rollouts = 4
  config.optim.lr = 1e-3
  config.optim.num_minibatches = 2
  config.eval.every = 2
  config.checkpoint.every = 2
  config.checkpoint.keep = 2
  for key, value in changes.items():
    target = config
    *path, last = key.split(".")
    for name in path:
      target = target[name]
    target[last] = value
  return config


@pytest.mark.slow  # three short runs, ~60 s on 2 busy cores
def test_kill_and_resume_gives_the_same_next_metrics(tmp_path, init_policy, tasks):
  kw = {"engine_factory": ScriptedEngine, "tasks": tasks, "eval_tasks": tasks[:1]}
  whole = grpo.train(run_config(init_policy, **{"reward.name": "uniform"}), tmp_path / "w", **kw)
  assert whole["steps"] == 4 and whole["reward"] == "uniform"
  assert len(whole["mean_reward"]) == len(whole["pass_rate"]) == 4
  assert whole["eval_steps"] == [0, 2, 4] and len(whole["eval_rubric_score"]) == 3
  assert whole["loss"][0] != whole["loss"][1]

  config = run_config(init_policy, stop_after=3, **{"reward.name": "uniform"})
  killed = grpo.train(config, tmp_path / "r", **kw)
  assert killed["steps"] == 3  # step 3 ran but was never saved: the run resumes from step 2
  resumed = grpo.train(run_config(init_policy, **{"reward.name": "uniform"}), tmp_path / "r", **kw)
  assert resumed["start_step"] == 2 and resumed["steps"] == 4
  for key in ("loss", "mean_reward", "pass_rate"):
    np.testing.assert_allclose(resumed[key], whole[key], rtol=1e-5, err_msg=key)
  for key in ("entropy", "ratio_min", "ratio_max", "grad_norm", "clip_frac_high"):
    np.testing.assert_allclose(resumed["final"][key], whole["final"][key], rtol=1e-4, err_msg=key)
  assert resumed["eval_pass_rate"] == whole["eval_pass_rate"]
  assert sorted(int(p.name) for p in (tmp_path / "r" / "checkpoints").iterdir()) == [2, 4]
  # the first minibatch samples and trains with the same parameters: its ratio is 1
  first = json.loads((tmp_path / "w" / "metrics.jsonl").read_text().splitlines()[1])
  assert first["step"] == 1 and 0 < first["ratio_max"] < 1.5
  assert {"clip_frac_low", "entropy", "tool_error_rate", "tokens_per_s", "criterion_pass_rate",
          "groups_with_signal"} <= set(first)  # fmt: skip
  signal = whole["groups_with_signal"]
  assert len(signal) == 4 and whole["mean_groups_with_signal"] == pytest.approx(np.mean(signal))
  _, _, path = load_policy_parts(tmp_path / "r")
  assert path == tmp_path / "r" / "policy" / "checkpoints" / "4"


@pytest.mark.slow  # one short run: ~60 s on 2 busy cores
def test_first_minibatch_ratio_is_one(tmp_path, init_policy, tasks):
  """With one minibatch the update sees exactly the sampling policy: every ratio is 1."""
  config = run_config(init_policy, num_steps=1, **{"optim.num_minibatches": 1, "eval.every": 0})
  summary = grpo.train(config, tmp_path, engine_factory=ScriptedEngine, tasks=tasks)
  final = summary["final"]
  np.testing.assert_allclose([final["ratio_min"], final["ratio_max"]], 1.0, atol=1e-4)
  assert final["clip_frac_low"] == final["clip_frac_high"] == 0
  assert summary["reward"] == "completion_focused" and summary["eval_pass_rate"] == []
  assert summary["reward_coupling"] == "independent"
  assert 0.0 <= summary["mean_groups_with_signal"] <= 1.0
  assert summary["mean_groups_with_signal"] == final["groups_with_signal"]


def test_steps_report_their_batch_shape(tmp_path, init_policy, tasks):
  """Each step logs its loss-token width and whether its batch shape was new (compiled)."""
  config = run_config(init_policy, num_steps=2, **{"eval.every": 0, "data.min_loss_tokens": 64})
  grpo.train(config, tmp_path, engine_factory=ScriptedEngine, tasks=tasks)
  rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
  steps = [r for r in rows if "new_shape" in r]
  assert [r["new_shape"] for r in steps] == [1.0, 0.0]
  assert [r["loss_positions"] for r in steps] == [64.0, 64.0]
  assert [r["batch_length"] for r in steps] == [64.0, 64.0]


def test_keep_groups_prefers_a_reward_spread_in_sampled_order():
  rewards = np.array([[0, 0], [1, 0], [0.5, 0.5], [0, 1], [1, 1]])
  assert grpo.keep_groups(rewards, 2) == [1, 3]
  assert grpo.keep_groups(rewards, 3) == [0, 1, 3]  # then the first without one
  assert grpo.keep_groups(rewards, 5) == [0, 1, 2, 3, 4]


def test_regroup_renumbers_the_kept_groups():
  rollouts = random_rollouts(0, 3, 2, vocab=64)
  kept = grpo.regroup(rollouts, [0, 2], 2)
  assert [(r.group, r.index) for r in kept] == [(0, 0), (0, 1), (1, 0), (1, 1)]
  np.testing.assert_array_equal(kept[2].tokens, rollouts[4].tokens)


@pytest.mark.slow  # one short run
def test_oversampled_steps_train_on_the_groups_with_signal(tmp_path, init_policy, tasks):
  """The wiring: 4 groups played, 2 trained, both shares reported. (The scripted engine's groups
  all hold a spread under the uniform reward; that the spread ones are kept is
  `test_oversampling_trains_on_the_groups_that_carry_a_signal`'s.)"""
  config = run_config(
    init_policy, num_steps=2, **{"data.oversample": 2, "eval.every": 0, "reward.name": "uniform"}
  )
  summary = grpo.train(config, tmp_path, engine_factory=ScriptedEngine, tasks=tasks)
  sampled, update = summary["groups_with_signal"], summary["update_groups_with_signal"]
  assert len(sampled) == len(update) == 2
  for s_, u in zip(sampled, update, strict=True):  # 4 sampled groups, 2 kept
    assert u == min(1.0, 2 * s_)
  assert summary["final"]["sampled_groups"] == 4


class HalfSpreadEngine(ScriptedEngine):
  """The scripted conversations, with outcomes set per group: the rollouts of every second task
  alternate between passing every criterion and passing none (a reward spread), the others all
  fail (none): half the sampled groups carry a signal, and which half is known."""

  def run(self, tasks, *, seed, state=None):
    rollouts = super().run(tasks, seed=seed, state=state)
    n = self.config.num_rollouts
    for i, r in enumerate(rollouts):
      spread = (i // n) % 2 == 1
      r.passed = np.full(len(r.passed), spread and i % 2 == 0)
    return rollouts


def test_oversampling_trains_on_the_groups_that_carry_a_signal(tmp_path, init_policy, tasks):
  config = run_config(
    init_policy, num_steps=2, **{"data.oversample": 2, "eval.every": 0, "reward.name": "binary"}
  )
  engines = []

  def factory(*args, **kwargs):
    engines.append(HalfSpreadEngine(*args, **kwargs))
    return engines[-1]

  summary = grpo.train(config, tmp_path, engine_factory=factory, tasks=tasks)
  # 4 groups played a step, 2 of them with a spread: the 2 trained are those 2
  assert summary["groups_with_signal"] == [0.5, 0.5]
  assert summary["update_groups_with_signal"] == [1.0, 1.0]
  played = [ids for engine in engines for ids, _ in engine.calls]
  assert all(len(ids) == 4 for ids in played)


class FirstStepFlatEngine(HalfSpreadEngine):
  """HalfSpreadEngine, but on its first call every rollout fails (no group has a spread); it
  keeps a checksum of the parameters it is given to sample with."""

  def __init__(self, *args, **kwargs):
    super().__init__(*args, **kwargs)
    self.checksums = []

  def run(self, tasks, *, seed, state=None):
    leaves = jax.tree.leaves(state)
    self.checksums.append(float(sum(np.abs(np.asarray(x, np.float64)).sum() for x in leaves)))
    rollouts = super().run(tasks, seed=seed, state=state)
    if len(self.calls) == 1:
      for r in rollouts:
        r.passed = np.zeros(len(r.passed), bool)
    return rollouts


@pytest.mark.parametrize("skip", [True, False])
def test_a_step_without_a_spread_skips_its_update(tmp_path, init_policy, tasks, skip):
  config = run_config(
    init_policy,
    num_steps=3,
    **{"eval.every": 0, "reward.name": "binary", "optim.skip_without_signal": skip},
  )
  engines = []

  def factory(*args, **kwargs):
    engines.append(FirstStepFlatEngine(*args, **kwargs))
    return engines[-1]

  summary = grpo.train(config, tmp_path, engine_factory=factory, tasks=tasks)
  assert summary["groups_with_signal"] == [0.0, 0.5, 0.5]
  rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
  steps = [r for r in rows if "update_skipped" in r]
  assert [r["update_skipped"] for r in steps] == [float(skip), 0.0, 0.0]
  sums = engines[0].checksums  # the training engine (built first)
  if skip:
    # the first step left the policy as it was; its logged loss is the zero-advantage loss,
    # and the steps that trained compiled the update once
    assert sums[1] == sums[0] and sums[2] != sums[1]
    assert steps[0]["loss"] == 0.0 and "entropy" not in steps[0]
    assert steps[0]["train_tokens_per_s"] == 0.0 < steps[1]["train_tokens_per_s"]
    assert [r["new_shape"] for r in steps] == [0.0, 1.0, 0.0]
  else:  # the MoE aux loss alone still moves the parameters
    assert sums[1] != sums[0]
    assert "entropy" in steps[0] and steps[0]["loss"] == pytest.approx(0.0, abs=1e-6)


def test_signal_rows_keep_the_groups_with_a_spread_filled_to_a_power_of_two():
  rollouts = random_rollouts(4, 4, 2, 256)
  batch = grpo.assemble_batch(rollouts, 4, 2, min_length=64)
  tokens_b = batch["loss_mask"].sum(-1)
  advantages = np.zeros((4, 2), np.float32)
  assert grpo.signal_rows(batch, advantages, "seq-mean-token-mean") is None  # nothing to train
  advantages[2] = [0.5, -0.5]
  rows, adv = grpo.signal_rows(batch, advantages, "seq-mean-token-mean")
  assert list(rows) == [4, 5] and np.allclose(adv, [0.5 * 2 / 8, -0.5 * 2 / 8])
  rows, adv = grpo.signal_rows(batch, advantages, "token-mean")
  assert np.allclose(adv, np.array([0.5, -0.5]) * tokens_b[4:6].sum() / tokens_b.sum())
  advantages[0] = [1.0, -1.0]
  rows, _ = grpo.signal_rows(batch, advantages, "seq-mean-token-mean")
  assert list(rows) == [0, 1, 4, 5]  # two groups: no filling
  advantages[3] = [1.0, -1.0]
  assert grpo.signal_rows(batch, advantages, "seq-mean-token-mean") is None  # 3 -> all 4
  advantages[[0, 3]] = 0
  # one group's 2 rows over 4 shards: the whole batch
  assert grpo.signal_rows(batch, advantages, "seq-mean-token-mean", multiple=4) is None


def _plain_step(model, batch, advantages):
  """The metrics of one update without a KL or entropy term (the loss and gradient before it)."""
  config = get_config("tiny")
  mesh = models.make_mesh(devices=jax.devices()[:1])
  tx = grpo.make_optimizer(config)
  with models.use_mesh(mesh):
    graphdef, state = grpo.init_state(model, tx, mesh, keep_reference=False)
    step = jax.jit(grpo.make_grpo_step(graphdef, tx, GRPOLossConfig(), temperature=0.7))
    _, metrics = step(state, grpo.shard_batch(batch, advantages, mesh))
  return jax.device_get(metrics)


@pytest.mark.slow  # two step compilations
def test_the_update_on_the_groups_with_a_spread_is_the_whole_batchs():
  rollouts = random_rollouts(5, 4, 4, 256)
  batch = grpo.assemble_batch(rollouts, 4, 4, min_length=64)
  rng = np.random.default_rng(0)
  batch["old_logp"] = np.where(batch["loss_mask"], rng.normal(-5, 1, batch["old_logp"].shape), 0)
  advantages = np.zeros((4, 4), np.float32)
  advantages[2] = [1.0, -0.5, 0.25, -0.75]
  rows, row_advantages = grpo.signal_rows(batch, advantages, "seq-mean-token-mean")
  with models.use_mesh(None):
    model = tiny_model()
  whole = _plain_step(model, batch, advantages.reshape(-1))
  part = _plain_step(model, {k: batch[k][rows] for k in grpo.ROW_KEYS}, row_advantages)
  assert abs(whole["pg_loss"]) > 1e-4
  for key in ("pg_loss", "grad_norm"):
    np.testing.assert_allclose(part[key], whole[key], rtol=1e-4, err_msg=key)


def test_steps_update_on_the_groups_with_a_spread(tmp_path, init_policy, tasks):
  changes = {"eval.every": 0, "reward.name": "binary", "optim.num_minibatches": 1}
  changes |= {"optim.skip_without_signal": True, "optim.signal_groups_only": True}
  config = run_config(init_policy, num_steps=3, **changes)
  summary = grpo.train(config, tmp_path, engine_factory=FirstStepFlatEngine, tasks=tasks)
  assert summary["groups_with_signal"] == [0.0, 0.5, 0.5]
  rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
  steps = [r for r in rows if "update_skipped" in r]
  assert [r["update_rows"] for r in steps] == [0.0, 4.0, 4.0]  # one group of 4 rollouts
  assert [r["batch_rows"] for r in steps] == [8.0] * 3
  assert [r["new_shape"] for r in steps] == [0.0, 1.0, 0.0]


def test_bad_coupling_is_rejected_before_anything_runs(tmp_path):
  config = run_config(tmp_path / "no-policy", **{"reward.coupling": "gates"})
  with pytest.raises(ValueError, match="unknown rubric coupling 'gates'"):
    grpo.train(config, tmp_path / "w", engine_factory=ScriptedEngine, tasks=["unused"])


def test_bad_batch_split_is_rejected(tmp_path, init_policy, tasks):
  config = run_config(init_policy, **{"optim.num_minibatches": 3})
  with pytest.raises(ValueError, match="minibatches"):
    grpo.train(config, tmp_path, engine_factory=ScriptedEngine, tasks=tasks)


# --- sharded = single device ------------------------------------------------------------------

_SHARDED_SCRIPT = textwrap.dedent(
  """
  import json, sys
  import jax
  import numpy as np
  sys.path.insert(0, {root!r})
  import models
  from rl.grpo import trainer as grpo
  from rl.grpo.loss import GRPOLossConfig
  import optax
  from tests.rl.test_grpo import TINY, random_rollouts
  assert len(jax.devices()) == 8, jax.devices()
  # SGD, not Adam: Adam turns reduction-order noise in near-zero gradients (group advantages
  # cancel) into whole lr-sized moves, which would blur the comparison of the second steps
  tx = optax.sgd(1.0)
  model_config = models.get_config("tiny", vocab_size=256, **TINY)
  batches = []
  for seed in range(2):
    batch = grpo.assemble_batch(random_rollouts(seed, 2, 4, 256), 2, 4, min_length=64)
    adv = np.random.default_rng(seed).normal(size=8).astype(np.float32)
    batches.append((batch, adv))

  def run(mesh):
    with models.use_mesh(mesh):
      model = models.create_model(model_config, seed=0, mesh=mesh)
      graphdef, state = grpo.init_state(model, tx, mesh, keep_reference=True)
      step = jax.jit(grpo.make_grpo_step(
        graphdef, tx, GRPOLossConfig(kl_coef=0.1), temperature=0.8,
        num_minibatches=2, aux_loss_coef=1e-3), donate_argnums=0)
      out = []
      for batch, adv in batches:
        state, m = step(state, grpo.shard_batch(batch, adv, mesh))
        out.append({{k: float(v) for k, v in jax.device_get(m).items()}})
      return out

  single = run(models.make_mesh(devices=jax.devices()[:1]))
  sharded = run(models.make_mesh(data=2, fsdp=2, tensor=2))
  print(json.dumps({{"single": single, "sharded": sharded}}))
  """
)


@pytest.mark.slow
@pytest.mark.heavy  # 8 fake devices in a subprocess, two compilations: ~80 s on 2 idle cores
def test_sharded_step_matches_single_device():
  result = run_script(_SHARDED_SCRIPT)
  for single, sharded in zip(result["single"], result["sharded"], strict=True):
    assert all(np.isfinite(v) for v in single.values()), single
    for key in ("loss", "first_loss", "kl", "entropy", "ratio_max", "clip_frac_high"):
      np.testing.assert_allclose(sharded[key], single[key], rtol=5e-5, atol=1e-6, err_msg=key)
    np.testing.assert_allclose(sharded["kl"], single["kl"], rtol=1e-3, err_msg="kl")  # ~1e-4
    np.testing.assert_allclose(sharded["grad_norm"], single["grad_norm"], rtol=1e-4)
  # the second minibatch and step train a policy that moved away from the reference
  assert result["single"][1]["kl"] > 1e-5, result["single"]
