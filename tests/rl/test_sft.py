"""SFT trainer: loss normalisation under accumulation, sharded = single-device, resume, training."""

import json
import textwrap
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

import models
from configs.sft import get_config
from rl.data.chat import SPECIAL_TOKENS
from rl.sft import bench as sft_bench
from rl.sft import data as sft_data
from rl.sft import steps as sft_steps
from rl.sft import trainer as sft
from tests.rl.fake_devices import run_script

TINY = {"num_layers": 2, "full_attention_interval": 2, "deltanet_chunk": 16, "moe_backend": "sort"}
# One attention block: what the step's arithmetic (accumulation, loss weights) is checked on; it
# compiles several times faster than a block with DeltaNet.
ONE_BLOCK = {"num_layers": 1, "full_attention_interval": 1, "moe_backend": "sort"}


def fake_batch(seed: int, b: int, t: int, vocab: int) -> dict[str, np.ndarray]:
  """Rows of two packed segments each; loss masks of very different sizes per row, so the mean of
  per-micro-batch means differs from the mean over the batch."""
  rng = np.random.default_rng(seed)
  tokens = rng.integers(3, vocab, size=(b, t)).astype(np.int32)
  targets = rng.integers(3, vocab, size=(b, t)).astype(np.int32)
  cut = t // 2 + 3
  segment_ids = np.where(np.arange(t) < cut, 1, 2).astype(np.int32)[None].repeat(b, 0)
  segment_ids[:, t - 4 :] = 0  # padding
  positions = np.where(np.arange(t) < cut, np.arange(t), np.arange(t) - cut).astype(np.int32)
  loss_mask = np.zeros((b, t), np.int32)
  for row in range(b):
    loss_mask[row, : 2 + 5 * row] = 1  # 2, 7, 12, ... loss tokens
  loss_mask[segment_ids == 0] = 0
  return {
    "tokens": tokens,
    "targets": targets,
    "loss_mask": loss_mask,
    "value_mask": np.zeros((b, t), np.int32),
    "segment_ids": segment_ids,
    "positions": positions * (segment_ids > 0),
  }


def _config(**optim):
  config = get_config("tiny")
  config.optim.update(optim)
  return config


#: Jitted train steps and their optimizers by model config, optimizer config, aux loss, context
#: weight and mesh: the checks that step the same model the same way share one compilation.
_STEPS: dict[tuple, tuple] = {}


def run_steps(
  config, batches, mesh, aux_coef=0.0, vocab=256, context_weight=0.0, shape=None, positions=0
):
  """Losses and final parameters of consecutive train steps on `batches` (a tiny model of
  ``shape``, default `TINY`, from its seed-0 initialisation), scoring ``positions`` a row."""
  model_config = models.get_config("tiny", vocab_size=vocab, **(shape or TINY))
  optim = tuple(sorted(config.optim.items()))
  key = (model_config, optim, aux_coef, context_weight, mesh, positions)
  with models.use_mesh(mesh):
    model = models.create_model(model_config, seed=0, mesh=mesh)
    (tx, schedule), step = _STEPS.get(key) or (sft.make_optimizer(config, total_steps=10), None)
    graphdef, state = sft.init_state(model, tx, mesh)
    if step is None:
      step = sft.make_train_step(
        graphdef,
        tx,
        schedule,
        grad_accum=config.optim.grad_accum,
        aux_loss_coef=aux_coef,
        context_weight=context_weight,
        loss_positions=positions,
      )
      step = jax.jit(step, donate_argnums=0)
      _STEPS[key] = (tx, schedule), step
    metrics = []
    for batch in batches:
      state, m = step(state, sft.shard_batch(batch, mesh))
      metrics.append(jax.device_get(m))
    return metrics, jax.device_get(state["params"])


def one_device_mesh():
  return models.make_mesh(devices=jax.devices()[:1])


def test_token_losses_matches_numpy_reference():
  rng = np.random.default_rng(0)
  logits = rng.normal(size=(2, 5, 7)).astype(np.float32)
  targets = rng.integers(0, 7, size=(2, 5))
  mask = np.array([[1, 1, 0, 0, 0], [0, 1, 1, 1, 0]])
  logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
  nll = -np.take_along_axis(logp, targets[..., None], -1)[..., 0]
  nll_sum, correct = sft.token_losses(jnp.asarray(logits), jnp.asarray(targets), jnp.asarray(mask))
  np.testing.assert_allclose(nll_sum, (nll * mask).sum(), rtol=1e-5)
  assert correct == ((logits.argmax(-1) == targets) * mask).sum()


@pytest.mark.parametrize("chunk", [None, 1, 3, 12])
def test_fused_head_losses_equal_the_full_logits_loss(chunk):
  rng = np.random.default_rng(1)
  b, t, d, v = 2, 12, 8, 40
  hidden = jnp.asarray(rng.normal(size=(b, t, d)), jnp.float32)
  head = jnp.asarray(rng.normal(size=(d, v)), jnp.float32)
  targets = jnp.asarray(rng.integers(0, v, size=(b, t)))
  mask = jnp.asarray(rng.integers(0, 2, size=(b, t)))
  # Row 0, step 0: the target is the argmax, so "correct" counts at least one token.
  targets = targets.at[0, 0].set(jnp.argmax(hidden[0, 0] @ head))
  mask = mask.at[0, 0].set(1)

  def full(h, w):
    return sft.token_losses(jnp.einsum("btd,dv->btv", h, w), targets, mask)

  def fused(h, w):
    return sft.head_losses(h, w, targets, mask, chunk)

  (nll, correct), (nll_ref, correct_ref) = fused(hidden, head), full(hidden, head)
  np.testing.assert_allclose(nll, nll_ref, rtol=1e-5)
  assert correct == correct_ref >= 1
  # Gradients of a scaled loss (the trainer divides by the loss-token count): the backward
  # pass must scale the gradients formed in the forward pass.
  grads = jax.grad(lambda h, w: 0.37 * fused(h, w)[0], argnums=(0, 1))(hidden, head)
  grads_ref = jax.grad(lambda h, w: 0.37 * full(h, w)[0], argnums=(0, 1))(hidden, head)
  for g, g_ref in zip(grads, grads_ref, strict=True):
    np.testing.assert_allclose(g, g_ref, rtol=1e-4, atol=1e-6)
  assert float(jnp.abs(grads[0][mask == 0]).max()) == 0.0  # masked tokens get no gradient


@pytest.mark.parametrize("chunk", [None, 1, 4])
def test_head_eval_is_the_full_logits_loss_and_argmax(chunk):
  rng = np.random.default_rng(2)
  b, t, d, v = 2, 8, 8, 30
  hidden = jnp.asarray(rng.normal(size=(b, t, d)), jnp.float32)
  head = jnp.asarray(rng.normal(size=(d, v)), jnp.float32)
  logits = jnp.einsum("btd,dv->btv", hidden, head)
  argmax = np.asarray(logits.argmax(-1))
  targets = np.where(rng.random((b, t)) < 0.5, argmax, (argmax + 1) % v)
  mask = jnp.asarray(rng.integers(0, 2, size=(b, t)))
  nll, correct = sft.head_eval(hidden, head, jnp.asarray(targets), mask, chunk)
  np.testing.assert_array_equal(np.asarray(correct), targets == argmax)
  assert np.asarray(correct).any() and not np.asarray(correct).all()
  np.testing.assert_allclose(
    nll, sft.token_losses(logits, jnp.asarray(targets), mask)[0], rtol=1e-5
  )


def test_turn_matches_counts_whole_turns_and_skips_a_turn_cut_by_the_row_end():
  mask = np.array([[0, 1, 1, 0, 0, 1, 1, 1, 0, 1], [1, 1, 0, 1, 0, 0, 0, 0, 0, 0]])
  correct = np.array([[0, 1, 1, 0, 0, 1, 0, 1, 1, 1], [1, 1, 0, 0, 1, 1, 1, 1, 1, 1]])
  # Row 0: turns [1, 3) reproduced, [5, 8) not (step 6), [9, 10) cut by the row end.
  # Row 1: [0, 2) reproduced, [3, 4) not; correct tokens off the mask do not count.
  assert sft.turn_matches(correct, mask) == (2, 4)
  assert sft.turn_matches(np.ones_like(mask), np.zeros_like(mask)) == (0, 0)


@pytest.mark.parametrize("chunk", [None, 3])
def test_weighted_head_losses_weigh_the_objective_and_score_the_mask(chunk):
  rng = np.random.default_rng(3)
  b, t, d, v = 2, 12, 8, 40
  hidden = jnp.asarray(rng.normal(size=(b, t, d)), jnp.float32)
  head = jnp.asarray(rng.normal(size=(d, v)), jnp.float32)
  targets = jnp.asarray(rng.integers(0, v, size=(b, t)))
  mask = jnp.asarray(rng.integers(0, 2, size=(b, t)))
  weight = mask + 0.25 * (1 - mask)

  def full(h, w, weights):
    return sft.token_losses(jnp.einsum("btd,dv->btv", h, w), targets, weights)

  objective, nll, correct = sft.weighted_head_losses(hidden, head, targets, weight, mask, chunk)
  np.testing.assert_allclose(objective, full(hidden, head, weight)[0], rtol=1e-5)
  np.testing.assert_allclose(nll, full(hidden, head, mask)[0], rtol=1e-5)
  assert correct == full(hidden, head, mask)[1]
  assert objective > nll  # the context tokens add to the objective only

  def fused(h, w):
    return 0.5 * sft.weighted_head_losses(h, w, targets, weight, mask, chunk)[0]

  grads = jax.grad(fused, argnums=(0, 1))(hidden, head)
  grads_ref = jax.grad(lambda h, w: 0.5 * full(h, w, weight)[0], argnums=(0, 1))(hidden, head)
  for g, g_ref in zip(grads, grads_ref, strict=True):
    np.testing.assert_allclose(g, g_ref, rtol=1e-4, atol=1e-6)


def test_loss_weights_put_the_context_weight_on_real_non_assistant_tokens():
  batch = {
    "loss_mask": jnp.asarray([[0, 1, 1, 0, 0]]),
    "segment_ids": jnp.asarray([[1, 1, 1, 1, 0]]),
  }
  np.testing.assert_array_equal(sft.loss_weights(batch), [[0, 1, 1, 0, 0]])
  np.testing.assert_allclose(sft.loss_weights(batch, 0.1), [[0.1, 1, 1, 0.1, 0]])
  with pytest.raises(ValueError, match="context_weight"):
    sft.loss_weights(batch, -1.0)
  batch["value_mask"] = jnp.asarray([[0, 0, 1, 0, 0]])
  np.testing.assert_allclose(sft.loss_weights(batch, value_weight=2.0), [[0, 1, 3, 0, 0]])
  np.testing.assert_allclose(sft.loss_weights(batch, 0.1, 2.0), [[0.1, 1, 3, 0.1, 0]])


@pytest.mark.slow  # two compilations of the step, the plain one shared with the accumulation check
def test_context_weight_changes_the_update_not_the_reported_loss():
  batch = fake_batch(0, 4, 32, 256)
  mesh = one_device_mesh()
  # Warmup: the first step's learning rate is 0, so both runs take their second step from the
  # same weights; the second step moves them (by moments the first step's gradients set).
  config = _config()
  plain, params_plain = run_steps(config, [batch, batch], mesh, shape=ONE_BLOCK)
  weighted, params_weighted = run_steps(
    config, [batch, batch], mesh, context_weight=0.5, shape=ONE_BLOCK
  )
  for step in range(2):
    for key in ("loss", "accuracy", "loss_tokens"):
      np.testing.assert_allclose(weighted[step][key], plain[step][key], rtol=1e-6)
    assert weighted[step]["grad_norm"] != pytest.approx(plain[step]["grad_norm"], rel=1e-3)
  diffs = jax.tree.leaves(
    jax.tree.map(lambda a, b: np.abs(a - b).max(initial=0.0), params_plain, params_weighted)
  )
  assert max(diffs) > 1e-6


def test_positions_to_score_list_each_rows_weighted_positions_first():
  weight = jnp.asarray([[0, 1, 0, 0.5, 1, 0], [1, 0, 0, 0, 1, 0]])
  np.testing.assert_array_equal(
    sft_steps.positions_to_score(weight, 4), [[1, 3, 4, 0], [0, 4, 1, 2]]
  )
  batch = {"loss_mask": np.asarray(weight > 0), "segment_ids": np.asarray([[1] * 5 + [0]] * 2)}
  assert sft_steps.weighted_positions(batch) == 3
  assert sft_steps.weighted_positions(batch, context_weight=0.1) == 5  # and the real tokens


@pytest.mark.slow  # four compilations of a one-block step
@pytest.mark.parametrize("copy_head", [False, True])
def test_scoring_only_the_loss_positions_takes_the_same_steps(copy_head):
  # fake_batch's rows hold 2, 7, 12 and 17 loss tokens: 17 positions a row lose none of them.
  batches = [fake_batch(0, 4, 32, 256), fake_batch(1, 4, 32, 256)]
  shape = {**ONE_BLOCK, "copy_head": copy_head, "copy_head_match": copy_head}
  config, mesh = _config(warmup_steps=0), one_device_mesh()
  every, params_every = run_steps(config, batches, mesh, shape=shape)
  some, params_some = run_steps(config, batches, mesh, shape=shape, positions=17)
  for step in range(2):
    for key in ("loss", "accuracy", "loss_tokens", "grad_norm"):
      np.testing.assert_allclose(some[step][key], every[step][key], rtol=2e-5)
  jax.tree.map(
    lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6), params_some, params_every
  )


def test_loss_positions_follow_the_fullest_row_and_fall_back_to_every_position():
  config = get_config("cpu")
  stats = {"max_row_loss_tokens": 670}
  assert config.data.loss_positions == -1 and sft.loss_positions(config, stats) == 768
  assert sft.loss_positions(config, {"max_row_loss_tokens": 2000}) == 0  # not fewer than a row
  config.data.loss_positions = 300
  assert sft.loss_positions(config, stats) == 300  # as set: fuller rows take a full step
  config.data.loss_positions, config.data.context_loss_weight = -1, 0.5
  assert sft.loss_positions(config, stats) == 0  # every real token is weighed
  assert get_config("paper").data.loss_positions == 0


def test_fused_head_loss_chunk_must_divide_the_sequence():
  with pytest.raises(ValueError, match="divide"):
    sft.head_losses(jnp.zeros((1, 6, 4)), jnp.zeros((4, 5)), jnp.zeros((1, 6), jnp.int32),
                    jnp.ones((1, 6)), chunk=4)  # fmt: skip
  assert sft.loss_chunk_length(512, 8) == 32
  assert sft.loss_chunk_length(12, 1, tokens=5) == 4  # the largest divisor of 12 up to 5


@pytest.mark.slow  # three compilations of the step
def test_accumulation_equals_one_big_batch():
  batch = fake_batch(0, 4, 32, 256)
  mesh = one_device_mesh()
  big, params_big = run_steps(_config(grad_accum=1), [batch], mesh, shape=ONE_BLOCK)
  for accum in (2, 4):
    small, params_small = run_steps(_config(grad_accum=accum), [batch], mesh, shape=ONE_BLOCK)
    np.testing.assert_allclose(small[0]["loss"], big[0]["loss"], rtol=1e-6)
    np.testing.assert_allclose(small[0]["grad_norm"], big[0]["grad_norm"], rtol=1e-4)
    jax.tree.map(
      lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-7), params_small, params_big
    )
  assert big[0]["loss_tokens"] == batch["loss_mask"].sum()

  # The loss is the mean over all loss tokens: check it against a plain forward pass, and check
  # that the mean of per-row means (the wrong normalisation) would differ.
  with models.use_mesh(None):
    model = models.create_model(models.get_config("tiny", vocab_size=256, **ONE_BLOCK), seed=0)
    logits = model(
      jnp.asarray(batch["tokens"]),
      positions_bt=jnp.asarray(batch["positions"]),
      segment_ids_bt=jnp.asarray(batch["segment_ids"]),
    )
  logp = jax.nn.log_softmax(logits, -1)
  nll = -np.take_along_axis(np.asarray(logp), batch["targets"][..., None], -1)[..., 0]
  mask = batch["loss_mask"]
  np.testing.assert_allclose(big[0]["loss"], (nll * mask).sum() / mask.sum(), rtol=1e-5)
  row_means = (nll * mask).sum(1) / mask.sum(1)
  assert abs(row_means.mean() - big[0]["loss"]) > 1e-3


def test_batch_must_split_into_micro_batches(tmp_path):
  config = _config(grad_accum=3)
  with pytest.raises(ValueError, match="grad_accum"):
    sft.train(config, tmp_path)


_SHARDED_SCRIPT = textwrap.dedent(
  """
  import json, sys
  import jax
  sys.path.insert(0, {root!r})
  import models
  from tests.rl.test_sft import fake_batch, run_steps, _config
  assert len(jax.devices()) == 8, jax.devices()
  batches = [fake_batch(i, 8, 32, 256) for i in range(3)]
  config = _config(grad_accum=2, lr=1e-2)
  single, _ = run_steps(config, batches, models.make_mesh(devices=jax.devices()[:1]), 1e-3)
  mesh = models.make_mesh(data=2, fsdp=2, tensor=2)
  sharded, params = run_steps(config, batches, mesh, 1e-3)
  print(json.dumps({{
    "single": [float(m["loss"]) for m in single],
    "sharded": [float(m["loss"]) for m in sharded],
    "grad_norm": [[float(m["grad_norm"]) for m in ms] for ms in (single, sharded)],
  }}))
  """
)


@pytest.mark.slow
@pytest.mark.heavy  # fake devices in a subprocess: ~90 s on 2 idle cores
def test_sharded_steps_match_single_device():
  result = run_script(_SHARDED_SCRIPT)
  np.testing.assert_allclose(result["sharded"], result["single"], rtol=2e-5)
  np.testing.assert_allclose(*result["grad_norm"], rtol=1e-4)


# --- whole runs on short synthetic conversations -----------------------------------------------


def conversation(i: int) -> dict:
  """A short tool-use conversation with a learnable pattern."""
  args = json.dumps({"service": "inventory", "tool": "get_item", "arguments": {"id": f"I{i}"}})
  return {
    "success": True,
    "messages": [
      {"role": "user", "content": f"How many units of item I{i} are in stock?"},
      {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": "c1", "function": {"name": "call_tool", "arguments": args}}],
      },
      {"role": "tool", "tool_call_id": "c1", "content": json.dumps({"ok": True, "data": i * 3})},
      {"role": "assistant", "content": f"Item I{i} has {i * 3} units in stock."},
    ],
  }


@pytest.fixture(scope="module")
def run_files(tmp_path_factory, tokenizer):
  root = tmp_path_factory.mktemp("sft_data")
  with open(root / "sft.jsonl", "w") as f:
    for i in range(40):
      f.write(json.dumps(conversation(i)) + "\n")
  tokenizer.save(root / "tok")
  return root


def run_config(files: Path, **changes):
  config = get_config("tiny")
  config.model.overrides = dict(TINY, d_model=32, expert_dim=16, shared_expert_dim=16)
  config.tokenizer.path = str(files / "tok")
  config.data.trajectories = str(files / "sft.jsonl")
  config.data.seq_len = 128
  config.data.batch_size = 4
  config.data.num_packing_bins = 4
  config.data.eval_fraction = 0.2
  config.optim.lr = 1e-2
  config.optim.warmup_steps = 2
  config.eval_every = 1000
  config.checkpoint.keep = 2
  for key, value in changes.items():
    target = config
    *path, last = key.split(".")
    for name in path:
      target = target[name]
    target[last] = value
  return config


def test_data_stats_report_lengths_truncation_and_packing(run_files, tokenizer):
  from compoworld.agents.trajectories import load_trajectories
  from rl.data.chat import ChatRenderer

  records = load_trajectories(run_files / "sft.jsonl")
  renderer = ChatRenderer(tokenizer, ())
  lengths = sorted(len(renderer.render(r["messages"])) for r in records)
  fits = sft.data_stats(
    records, renderer, run_config(run_files, **{"data.seq_len": 3 * lengths[-1]})
  )
  assert fits["trajectories"] == len(records) and fits["overlong_share"] == 0.0
  assert fits["length_percentiles"]["0"] == lengths[0]
  assert fits["length_percentiles"]["100"] == lengths[-1]
  assert fits["loss_tokens_past_row_end_share"] == 0.0
  assert 0 < fits["packing_efficiency"] <= 1 and fits["segments_per_row"] > 1  # several per row
  cut = sft.data_stats(records, renderer, run_config(run_files, **{"data.seq_len": lengths[0]}))
  assert cut["overlong_share"] == np.mean(np.asarray(lengths) > lengths[0] + 1) > 0.5
  assert 0 < cut["loss_tokens_past_row_end_share"] < 1
  assert cut["segments_per_row"] == 1.0  # a cut trajectory fills its row alone


def learning_config(files: Path, **changes):
  """30 steps over 10 epochs of the 32 training conversations: the learning run, and the runs
  that are killed and resumed against it (one compiled step and eval step for all of them)."""
  return run_config(files, max_steps=30, **{"data.num_epochs": 10, **changes})


@pytest.fixture(scope="module")
def learned_run(tmp_path_factory, run_files):
  """The learning run, uninterrupted: its workdir and summary."""
  workdir = tmp_path_factory.mktemp("sft_learned")
  return workdir, sft.train(learning_config(run_files), workdir, tools=())


@pytest.mark.slow  # two short runs against the learning run (compiled once, shared)
def test_kill_and_resume_gives_the_same_next_losses(tmp_path, run_files, learned_run):
  _, whole = learned_run
  assert whole["steps"] == 30 and len(whole["losses"]) == 30
  killed = sft.train(
    learning_config(run_files, stop_after=3, **{"checkpoint.every": 2}), tmp_path, tools=()
  )
  assert killed["steps"] == 3  # step 3 ran but was never saved: the run resumes from step 2
  # Killed again after two steps, each saved: the second save prunes step 2's checkpoint.
  resumed = sft.train(
    learning_config(run_files, stop_after=2, **{"checkpoint.every": 1}), tmp_path, tools=()
  )
  assert resumed["start_step"] == 2 and resumed["steps"] == 4
  np.testing.assert_allclose(resumed["losses"], whole["losses"][2:4], rtol=1e-6)
  np.testing.assert_allclose(killed["losses"], whole["losses"][:3], rtol=1e-6)
  kept = sorted(int(p.name) for p in (tmp_path / sft.CHECKPOINT_DIR).iterdir())
  assert kept == [3, 4]  # the last two
  assert (tmp_path / "tokenizer.model").is_file()
  assert json.loads((tmp_path / sft.CONFIG_FILE).read_text())["max_steps"] == 30


@pytest.mark.slow
def test_tiny_run_learns(learned_run):
  workdir, summary = learned_run
  assert summary["steps"] == 30
  assert summary["eval_loss"] < 0.5 * summary["initial_eval_loss"]
  assert summary["final_loss"] < 0.5 * summary["initial_loss"]
  assert summary["tokens_per_s"] > 0 and 0 < summary["mfu"] < 1
  assert list((workdir / "tensorboard").glob("events.out.tfevents.*"))
  lines = (workdir / sft.METRICS_FILE).read_text().splitlines()
  first = json.loads(lines[0])
  assert first["step"] == 0 and first["eval_loss"] == summary["initial_eval_loss"]
  assert first["eval_turn_match"] == summary["initial_eval_turn_match"]
  assert 0 <= first["eval_accuracy"] <= 1 and 0 <= summary["eval_turn_match"] <= 1
  assert {"loss", "accuracy", "lr", "grad_norm", "tokens_per_s", "mfu"} <= set(json.loads(lines[1]))
  # the run's workdir serves as a policy: its exported weights reproduce the trained model
  from rl.serve.policy import load_policy_parts

  model, tokenizer, path = load_policy_parts(workdir)
  assert path.parent.parent == workdir / "policy" and path.name == "30"
  assert tokenizer.vocab_size <= model.config.vocab_size


# --- starting from imported weights --------------------------------------------------------------


@pytest.fixture(scope="module")
def hf_checkpoint(tmp_path_factory, tokenizer):
  """A tiny random transformers Qwen3.5-MoE saved with `save_pretrained`, no tokenizer in it."""
  torch = pytest.importorskip("torch")
  pytest.importorskip("transformers")
  from transformers import Qwen3_5MoeForCausalLM
  from transformers.models.qwen3_5_moe import Qwen3_5MoeTextConfig

  text = dict(
    vocab_size=tokenizer.vocab_size + 64,  # room beyond the project tokenizer's ids
    hidden_size=32,
    num_hidden_layers=2,
    full_attention_interval=2,
    layer_types=["linear_attention", "full_attention"],
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=8,
    linear_key_head_dim=8,
    linear_value_head_dim=8,
    linear_num_key_heads=2,
    linear_num_value_heads=4,
    moe_intermediate_size=16,
    shared_expert_intermediate_size=16,
    num_experts=8,
    num_experts_per_tok=2,
  )
  torch.manual_seed(0)
  model = Qwen3_5MoeForCausalLM(Qwen3_5MoeTextConfig(**text)).eval()
  path = tmp_path_factory.mktemp("qwen3_5_moe_tiny")
  model.save_pretrained(path)
  embed = model.model.embed_tokens.weight.detach().numpy().copy()
  return path, embed


def import_config(files: Path, checkpoint: Path, **changes):
  config = run_config(files, **changes)
  config.model.init_from = str(checkpoint)
  # Shape fields are the checkpoint's; only how it runs may be overridden.
  config.model.overrides = {"moe_backend": "sort", "deltanet_chunk": 16, "num_layers": 99}
  return config


@pytest.mark.slow  # one compiled run of 3 steps, ~40 s on a loaded 2-core machine
def test_training_starts_from_imported_weights(tmp_path, run_files, hf_checkpoint):
  from flax import nnx

  from rl.data.chat import ChatRenderer
  from rl.data.packing import sft_dataset

  path, hf_embed = hf_checkpoint
  config = import_config(run_files, path, max_steps=3)
  tokenizer = sft.get_tokenizer(config, tmp_path, [])
  model, model_config = sft.build_model(config, tokenizer.vocab_size)
  assert model_config.moe_backend == "sort" and model_config.num_layers == 2
  assert model_config.vocab_size == hf_embed.shape[0] > tokenizer.vocab_size
  imported, _ = models.from_pretrained(path)
  ours = nnx.to_flat_state(nnx.state(model, nnx.Param))
  theirs = dict(nnx.to_flat_state(nnx.state(imported, nnx.Param)))
  for key, value in ours:
    np.testing.assert_array_equal(value[...], theirs[key][...])
  np.testing.assert_array_equal(model.embed_vd[...], hf_embed)  # the transformers weights

  # The run's first loss is the imported model's loss on its first batch, then it falls.
  summary = sft.train(config, tmp_path / "run", tools=())
  train_set, _ = sft.load_sft_set(config, tmp_path / "run")
  data = sft_data.data_config(config, epochs=config.data.num_epochs, train=True)
  first = next(iter(sft_dataset(train_set, ChatRenderer(tokenizer, ()), data)))
  graphdef, params, rest = nnx.split(imported, nnx.Param, ...)
  batch = {k: jnp.asarray(v) for k, v in first.items()}
  _, nll, _, _ = sft_steps._losses(graphdef, params, rest, batch, loss_chunk=-1)
  expected = float(nll) / float(first["loss_mask"].sum())
  assert np.isfinite(summary["initial_loss"])
  np.testing.assert_allclose(summary["initial_loss"], expected, rtol=1e-4)
  assert summary["final_loss"] < summary["initial_loss"]
  assert summary["vocab_size"] == tokenizer.vocab_size


def test_an_imported_checkpoint_brings_its_tokenizer(tmp_path, tokenizer):
  config = get_config("tiny")
  config.model.init_from = str(tmp_path / "ckpt")
  # A SentencePiece one: used as is, nothing is trained (a Hugging Face tokenizer.json:
  # tests/rl/test_tokenizer.py).
  tokenizer.save(tmp_path / "ckpt")
  loaded = sft.get_tokenizer(config, tmp_path / "run", [])
  assert loaded.vocab_size == tokenizer.vocab_size
  assert loaded.encode("get_item I7") == tokenizer.encode("get_item I7")


@pytest.mark.slow  # two compiled steps and a matmul-peak measurement
def test_benchmark_times_ours_and_a_baseline_of_the_same_model():
  config = sft_bench.reference_model_config(
    vocab_size=128, d_model=32, num_layers=1, num_heads=2, num_kv_heads=1, head_dim=16,
    expert_dim=16,
  )  # fmt: skip
  out = sft_bench.benchmark(
    config, batch_size=2, seq_len=16, steps=1, warmup=1, baseline=config.replace(moe_backend="loop")
  )
  assert out["tokens_per_s"] > 0 and out["baseline_tokens_per_s"] > 0 and 0 < out["mfu"] < 1
  assert out["speedup_vs_baseline"] == pytest.approx(
    out["baseline_step_s_median"] / out["step_s_median"]
  )
  # Same weights, same rows, two steps each: dense experts + full logits train the same model.
  np.testing.assert_allclose(out["final_loss"], out["baseline_final_loss"], rtol=1e-5)
  assert sft_bench.reference_model_config().num_experts == 8  # the shape


def test_an_attention_only_model_saves_and_restores(tmp_path):
  # full_attention_interval=1 leaves every block an empty DeltaNet stack: zero-size arrays, which
  # Orbax refuses to save; rl.serve.policy.savable / unsavable carry them around it.
  from flax import nnx

  from rl.data.tokenizer import SentencePieceTokenizer
  from rl.serve.policy import load_policy_parts, save_policy

  with nnx.use_eager_sharding(False):
    model = models.create_model(
      models.get_config("tiny", vocab_size=512, num_layers=2, full_attention_interval=1), seed=0
    )
    assert any(x.size == 0 for x in jax.tree.leaves(nnx.state(model)))
    tok = SentencePieceTokenizer.train(
      ["<tool_call> call_tool list_services " * 50, "hello world 123"], 300, SPECIAL_TOKENS
    )
    save_policy(tmp_path, model, tok, 3)
    loaded, _, path = load_policy_parts(tmp_path)
  assert path.name == "3"
  same = jax.tree.map(
    lambda a, b: a.shape == b.shape and bool(jnp.all(a == b)),
    nnx.state(model),
    nnx.state(loaded),
  )
  assert all(jax.tree.leaves(same))


@pytest.mark.parametrize("variant", ["tiny", "cpu", "small", "paper"])
def test_sft_variants_build_their_model_config(variant):
  cfg = sft.model_config(get_config(variant), 4000)
  assert cfg.vocab_size == 4096


@pytest.mark.slow  # generates tasks, trains a tokenizer, two compiled steps
def test_the_cpu_regime_runs_at_test_size(tmp_path):
  # configs/sft.py:cpu as it is, shrunk: K = 1 tasks played by an oracle without discovery, the
  # brief system turn, an attention-only model that checkpoints and resumes.
  from compoworld.tasks.task import load_tasks, needed_calls
  from rl.serve.policy import load_policy_parts

  config = get_config("cpu")
  config.generate.num_tasks = 6
  config.tokenizer.vocab_size = 1024
  config.data.seq_len = 1024
  config.data.batch_size = 2
  config.data.eval_fraction = 0.34
  config.data.num_epochs = 2  # batches to spare for the resumed run's third step
  config.max_steps = 2
  config.eval_every = 2
  config.checkpoint.every = 1
  config.copy.update(steps=2, batch_size=2, seq_len=64, min_repeat=8, max_repeat=16)
  summary = sft.train(config, tmp_path)
  assert summary["steps"] == 2 and summary["tokens_seen"] > 0
  # The heads scored each row's loss positions only: the fullest row's, rounded up to 128.
  fullest = summary["data"]["max_row_loss_tokens"]
  assert summary["loss_positions"] == -(-fullest // 128) * 128 < config.data.seq_len
  assert summary["full_position_steps"] == 0
  # The copy stage ran first, once: its points and plot are in the workdir.
  # (The block doubles to 16 once a step copies well enough: the regime's copy head with its
  # match bonus can do so from the first step.)
  assert summary["copy_stage"]["step"] == 2 and summary["copy_stage"]["repeat"] in (8, 16)
  assert json.loads((tmp_path / sft.COPY_STAGE_FILE).read_text())[-1]["step"] == 2
  assert (tmp_path / sft.COPY_STAGE_PLOT).stat().st_size > 0
  assert 0 < summary["loss_tokens_seen"] < summary["tokens_seen"]
  first = json.loads((tmp_path / "data" / "sft.jsonl").read_text().splitlines()[0])
  names = {c["function"]["name"] for m in first["messages"] for c in m.get("tool_calls") or []}
  assert names == {"call_tool"}
  # The oracle played only the reads a later call needs (generate.reads = "needed").
  tasks = {t.id: t for t in load_tasks(tmp_path / "data" / "tasks.jsonl")}
  calls = [c for m in first["messages"] for c in m.get("tool_calls") or []]
  assert len(calls) == len(needed_calls(tasks[first["task_id"]]))
  final, tokenizer, _ = load_policy_parts(summary["policy"])
  assert tokenizer.chat_system == "brief"
  # Either kept checkpoint exports as a servable policy; the last one is the run's own.
  first_policy, first_tokenizer, path = load_policy_parts(sft.export_checkpoint(tmp_path, 1))
  assert path.name == "1" and first_tokenizer.chat_system == "brief"
  last_policy, _, _ = load_policy_parts(sft.export_checkpoint(tmp_path, out=tmp_path / "last"))
  params = [nnx.state(m, nnx.Param) for m in (first_policy, last_policy, final)]
  leaves = [jax.tree.leaves(p) for p in params]
  assert any(not np.array_equal(a, b) for a, b in zip(leaves[0], leaves[2], strict=True))
  assert all(np.array_equal(a, b) for a, b in zip(leaves[1], leaves[2], strict=True))
  with pytest.raises(ValueError, match="no checkpoint of step 7"):
    sft.export_checkpoint(tmp_path, 7)
  config.max_steps = 3
  config.data.loss_positions = 1  # every row holds more: the step over every position
  resumed = sft.train(config, tmp_path)
  assert resumed["start_step"] == 2  # resumed from the checkpoint
  assert resumed["steps"] == 3 and resumed["loss_positions"] == 1
  assert resumed["full_position_steps"] == 1
  assert resumed["copy_stage"] is None  # the checkpoint holds the stage's result


def test_a_copy_head_with_word_forms_takes_them_from_the_tokenizer_and_keeps_them(
  tmp_path, tokenizer
):
  """``copy_head_forms``: the new model's word-form tables are the tokenizer's
  (`rl.data.tokenizer.word_forms`), a policy saved and loaded keeps them, and building one
  without a tokenizer is a clear error."""
  from rl.data.tokenizer import word_forms
  from rl.serve.policy import load_policy_parts, save_policy

  config = get_config("tiny")
  config.model.overrides = dict(TINY, copy_head=True, copy_head_match=True, copy_head_forms=True)
  model, model_config = sft.build_model(config, tokenizer.vocab_size, tokenizer=tokenizer)
  plain, spaced = word_forms(tokenizer, model_config.vocab_size)
  assert (plain != spaced).any()
  np.testing.assert_array_equal(model.copy_head.plain_v[...], plain)
  np.testing.assert_array_equal(model.copy_head.spaced_v[...], spaced)
  save_policy(tmp_path / "policy", model, tokenizer)
  loaded, _, _ = load_policy_parts(tmp_path / "policy")
  np.testing.assert_array_equal(loaded.copy_head.plain_v[...], plain)
  np.testing.assert_array_equal(loaded.copy_head.spaced_v[...], spaced)
  with pytest.raises(ValueError, match="copy_head_forms needs the tokenizer"):
    sft.build_model(config, tokenizer.vocab_size)
