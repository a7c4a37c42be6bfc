"""The copy head (`models.copy_head`): its mixture is the distribution it defines, training and
cached decoding agree on it, packing does not leak it across sequences, and it trains; with word
forms it copies a word in either of its two tokens."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

from models import create_model, decode_step, prefill
from models.copy_head import set_word_forms, training_pointer
from models.model import Cache
from tests.models.conftest import BATCH, SEQ, forward, paired_word_forms, random_tokens

B, T, MAX_LEN = BATCH, SEQ, 32


@pytest.fixture(
  scope="module",
  params=[
    (False, 0, False, False),
    (True, 0, False, False),
    (True, 4, False, False),
    (True, 0, True, False),
    (True, 0, True, True),
  ],
  ids=["pointer", "match", "match+run", "match+forms", "match+forms+gate"],
)
def config(tiny_config, request):
  match, run, forms, match_gate = request.param
  return tiny_config.replace(
    copy_head=True,
    copy_head_dim=16,
    copy_head_match=match,
    copy_head_match_run=run,
    copy_head_forms=forms,
    copy_head_match_gate=match_gate,
  )


def _word_forms(config):
  """(plain [V], spaced [V]): with word forms, tokens 2k and 2k + 1 (k < 3) are one word, 2k its
  plain form and 2k + 1 its spaced one; every other token (and every token without) its own."""
  return paired_word_forms(config.vocab_size, words=3 if config.copy_head_forms else 0)


def _form_share(config, form_logit, v):
  """The form gate's share of token v's word (1 for a word of one token)."""
  plain, spaced = _word_forms(config)
  if plain[v] == spaced[v]:
    return 1.0
  f = 1 / (1 + np.exp(-form_logit))
  return f if v == spaced[v] else 1 - f


def _vocab(config):
  """Token ids drawn for a test: few with the match bonus, so keys match queries often (and
  runs of three or four tokens recur)."""
  if config.copy_head_match_run:
    return 3
  return 6 if config.copy_head_match else config.vocab_size


@pytest.fixture(scope="module")
def model(config):
  model = create_model(config, seed=2)
  # A gate that mixes in earnest (sigmoid(1) = 0.73 on the copy side) and sharper pointer scores,
  # so both parts of the mixture matter in every comparison below.
  model.copy_head.b_gate[...] = jnp.ones(())
  model.copy_head.w_q_dc[...] = model.copy_head.w_q_dc[...] * 50.0
  if config.copy_head_forms:  # and a form gate that does not split a word evenly
    set_word_forms(model.copy_head, *_word_forms(config))
    model.copy_head.b_form[...] = jnp.full((), 0.7)
  if config.copy_head_match_gate:  # a match gate that varies from query to query
    model.copy_head.b_match[...] = jnp.full((), 0.3)
    model.copy_head.w_match_d[...] = model.copy_head.w_match_d[...] * 10.0
  return model


def test_logits_are_the_mixture_of_the_head_and_the_pointer(model, config):
  """exp(logits) sums to one, and equals (1 - g) softmax(lm) + g sum_{s < t} a_ts [x_{s+1} = v]
  computed position by position in numpy (plus m_0 [x_s = x_t] + m_1 [x_{s-1} = x_{t-1}] on
  the scores with the match bonus, and m_r where the last r tokens agree with its runs, all
  times the query's match gate where there is one; with word forms the tokens compared and
  copied are plain forms, split by the form gate)."""
  tokens = random_tokens((B, T), _vocab(config), seed=1)
  out = forward(model, tokens)
  probs = np.exp(np.asarray(out.logits, np.float64))
  np.testing.assert_allclose(probs.sum(-1), 1.0, atol=1e-4)

  h = out.hidden
  q, k, gate = (np.asarray(x, np.float64) for x in model.copy_head.project(h))
  lm = np.asarray(h @ model.head_weight(), np.float64)
  lm = np.exp(lm - lm.max(-1, keepdims=True))
  lm /= lm.sum(-1, keepdims=True)
  plain, _ = _word_forms(config)
  toks = plain[np.asarray(tokens)]
  form = model.copy_head.form_logits(h)
  match = model.copy_head.match_weights()
  match = np.zeros(2) if match is None else np.asarray(match, np.float64)
  match_gate = model.copy_head.match_gate(h)
  match_gate = np.ones((B, T)) if match_gate is None else np.asarray(match_gate, np.float64)
  for b in range(B):
    # back[j][s]: the token j places before s (-1 before the row's start, matching nothing).
    back = [np.concatenate([[-1] * j, toks[b, : T - j]]) for j in range(len(match))]
    for t in (0, 1, 7, T - 1):
      expected = lm[b, t].copy()
      if t > 0:
        g = 1 / (1 + np.exp(-gate[b, t]))
        scores = k[b, :t] @ q[b, t] / np.sqrt(config.copy_head_dim)
        same = [(x[:t] == x[t]) & (x[t] >= 0) for x in back]
        bonus = match[0] * same[0] + match[1] * same[1]
        for r in range(3, len(match) + 1):  # the last r tokens all agree
          bonus += match[r - 1] * np.logical_and.reduce(same[:r])
        scores += match_gate[b, t] * bonus
        weights = np.exp(scores - scores.max())
        weights /= weights.sum()
        words = np.zeros(config.vocab_size)
        np.add.at(words, toks[b, 1 : t + 1], weights)
        f = 0.0 if form is None else float(form[b, t])
        copy = [words[plain[v]] * _form_share(config, f, v) for v in range(len(words))]
        expected = (1 - g) * expected + g * np.asarray(copy)
      np.testing.assert_allclose(probs[b, t], expected, atol=2e-5)


def test_packed_sequences_do_not_point_into_each_other(model, config):
  """Two sequences packed in one row (positions restarting) get the logits each gets alone."""
  first = random_tokens((1, 8), _vocab(config), seed=2)
  second = random_tokens((1, 12), _vocab(config), seed=3)
  packed = jnp.concatenate([first, second], axis=1)
  segments = jnp.array([[1] * 8 + [2] * 12])
  positions = jnp.array([list(range(8)) + list(range(12))])
  together = forward(model, packed, segments, positions).logits
  np.testing.assert_allclose(together[:, 8:], forward(model, second).logits, atol=1e-4)
  np.testing.assert_allclose(together[:, :8], forward(model, first).logits, atol=1e-4)


def test_cached_decoding_equals_the_full_forward(model, config):
  """Right-padded prompts, then one token at a time: the pointer reads keys and tokens from the
  cache, and every logit is the full pass's."""
  tokens = random_tokens((B, T), _vocab(config), seed=4)
  full = forward(model, tokens).logits
  lengths = jnp.array([5, 13, 9])
  rows = jnp.arange(B)
  prompt = jnp.where(jnp.arange(T)[None] < lengths[:, None], tokens, 0)
  logits, cache = nnx.jit(prefill, static_argnames="max_len")(model, prompt, lengths, MAX_LEN)
  np.testing.assert_allclose(logits, full[rows, lengths - 1], atol=1e-4)
  step = nnx.jit(decode_step)
  for i in range(5):
    logits, cache = step(model, tokens[rows, lengths + i], cache)
    np.testing.assert_allclose(logits, full[rows, lengths + i], atol=1e-4)
  assert cache.copy.k_bsc.shape == (B, MAX_LEN, config.copy_head_dim)


def test_logits_at_some_positions_equal_the_full_logits(model, config):
  tokens = random_tokens((B, T), _vocab(config), seed=6)
  out = forward(model, tokens)
  index = jnp.array([[0, 3, 19], [1, 1, 2], [18, 5, 0]])
  at = nnx.jit(lambda m, o, i: m.logits_at(o, i))(model, out, index)
  np.testing.assert_allclose(at, jnp.take_along_axis(out.logits, index[..., None], 1), atol=1e-5)


def test_the_pointer_learns_to_recall_what_followed_a_cue(config):
  """A few Adam steps on rows "k1 v1 k2 v2 ... k_i ?" (cued recall, which the model without a
  copy head does not learn in 2,000 steps; README) raise the probability of the recalled value,
  with finite gradients everywhere (queries with nothing to point at included)."""
  if config.copy_head_forms:
    pytest.skip("a new model's words are its tokens: the match case (forms: the next test)")
  model = create_model(config, seed=0)
  rng = np.random.default_rng(0)
  pairs, rows = 6, 8
  toks = np.zeros((rows, 2 * pairs + 2), np.int32)
  for b in range(rows):
    keys = rng.choice(np.arange(4, config.vocab_size), pairs, replace=False)
    values = rng.integers(4, config.vocab_size, pairs)
    toks[b, : 2 * pairs : 2], toks[b, 1 : 2 * pairs : 2] = keys, values
    i = rng.integers(pairs)
    toks[b, -2:] = keys[i], values[i]
  inputs, target = jnp.asarray(toks[:, :-1]), jnp.asarray(toks[:, -1])

  def loss(model):
    logits = model(inputs)[:, -1]
    return -jnp.mean(jnp.take_along_axis(logits, target[:, None], axis=1))

  @nnx.jit
  def step(model, opt):
    value, grads = nnx.value_and_grad(loss)(model)
    opt.update(model, grads)
    return value, grads

  opt = nnx.Optimizer(model, optax.adam(3e-3), wrt=nnx.Param)
  first, grads = step(model, opt)
  assert all(bool(jnp.isfinite(g).all()) for g in jax.tree.leaves(grads))
  for _ in range(40):
    last, _ = step(model, opt)
  assert float(last) < 0.5 * float(first), (float(first), float(last))


def _recall_loss(model, inputs, target):
  """The NLL of each row's last target."""
  logits = model(inputs)[:, -1]
  return -jnp.mean(jnp.take_along_axis(logits, target[:, None], axis=1))


@nnx.jit
def _recall_step(model, opt, inputs, target):
  value, grads = nnx.value_and_grad(_recall_loss)(model, inputs, target)
  opt.update(model, grads)
  return value


def test_word_forms_recall_a_value_in_its_other_form(tiny_config):
  """Rows "k1 v1 k2 v2 ... k_i ?" whose values stand in their spaced form and are recalled in the
  plain one (a name of the instruction, written after a JSON quote): the pointer finds the word
  and the form gate learns the form, so a few Adam steps make the recalled value likely in rows
  never trained on (which a memorising LM head cannot do)."""
  config = tiny_config.replace(
    copy_head=True, copy_head_dim=16, copy_head_match=True, copy_head_forms=True
  )
  model = create_model(config, seed=0)
  v = config.vocab_size
  set_word_forms(model.copy_head, *paired_word_forms(v))  # 2k plain, 2k + 1 spaced
  rng = np.random.default_rng(0)

  def rows(n, pairs=6):
    toks = np.zeros((n, 2 * pairs + 2), np.int32)
    for b in range(n):
      keys = rng.choice(np.arange(4, v // 2), pairs, replace=False) * 2  # plain forms
      values = rng.integers(2, v // 2 - 1, pairs) * 2 + 1  # spaced forms
      toks[b, : 2 * pairs : 2], toks[b, 1 : 2 * pairs : 2] = keys, values
      i = rng.integers(pairs)
      toks[b, -2:] = keys[i], values[i] - 1  # the value's plain form
    return jnp.asarray(toks[:, :-1]), jnp.asarray(toks[:, -1])

  opt = nnx.Optimizer(model, optax.adam(3e-3), wrt=nnx.Param)
  unseen = rows(16)
  before = float(_recall_loss(model, *unseen))
  for _ in range(40):
    _recall_step(model, opt, *rows(8))
  after = float(_recall_loss(model, *unseen))
  assert after < 0.4 * before, (before, after)  # 6.2 -> 5.3 without word forms


def test_the_match_gate_sets_a_misleading_match_aside(tiny_config):
  """Rows "C v ... D w ... D ?" recalling v, the token after the cue C: the match bonus points
  at the earlier D (whose next token w is wrong), so the match gate at the query learns to drop
  it while the pointer learns to find the cue."""
  config = tiny_config.replace(
    copy_head=True, copy_head_dim=16, copy_head_match=True, copy_head_match_gate=True
  )
  model = create_model(config, seed=0)
  v, cue = config.vocab_size, 3
  rng = np.random.default_rng(0)

  def rows(n, filler=4):
    toks = rng.integers(4, v, (n, 2 * filler + 6)).astype(np.int32)
    toks[:, 0] = cue
    toks[:, filler + 2] = toks[:, -2] = rng.integers(4, v, n)  # D, twice
    toks[:, -1] = toks[:, 1]  # the target: v
    return jnp.asarray(toks[:, :-1]), jnp.asarray(toks[:, -1])

  def query_gate(model, inputs):
    return float(jnp.mean(model.copy_head.match_gate(forward(model, inputs).hidden)[:, -1]))

  opt = nnx.Optimizer(model, optax.adam(3e-3), wrt=nnx.Param)
  unseen = rows(16)
  before, gate_before = float(_recall_loss(model, *unseen)), query_gate(model, unseen[0])
  for _ in range(40):
    _recall_step(model, opt, *rows(8))
  after, gate_after = float(_recall_loss(model, *unseen)), query_gate(model, unseen[0])
  # 0.95 -> 0.52 after 40 steps on this machine (below 0.5 on another: CPU numerics differ),
  # ~0.48 where it levels off by step 60; a gate that does not learn stays above 0.9.
  assert gate_before > 0.9 and gate_after < 0.65, (gate_before, gate_after)
  assert after < 0.5 * before, (before, after)


def test_cache_zeros_holds_the_copy_state_only_with_a_copy_head(config, tiny_config):
  assert Cache.zeros(tiny_config, 2, 8).copy is None
  cache = Cache.zeros(config, 2, 8)
  assert cache.copy.tokens_bs.shape == (2, 8)


def test_training_pointer_allows_only_earlier_positions_of_the_segment(model, config):
  tokens = random_tokens((1, 6), config.vocab_size, seed=7)
  h = forward(model, tokens).hidden
  segments = jnp.array([[1, 1, 1, 2, 2, 2]])
  pointer = training_pointer(model.copy_head, h, tokens, segments)
  allowed = np.asarray(pointer.allowed_bks[0], int)
  expected = np.array(
    [
      [0, 0, 0, 0, 0, 0],
      [1, 0, 0, 0, 0, 0],
      [1, 1, 0, 0, 0, 0],
      [0, 0, 0, 0, 0, 0],
      [0, 0, 0, 1, 0, 0],
      [0, 0, 0, 1, 1, 0],
    ]
  )
  np.testing.assert_array_equal(allowed, expected)
  np.testing.assert_array_equal(pointer.values_bs[0, :5], _word_forms(config)[0][tokens[0, 1:]])


def test_a_copy_head_model_is_not_exported_as_qwen(config):
  from models.io.hf import config_to_hf

  with pytest.raises(ValueError, match="copy head"):
    config_to_hf(config)


def test_the_fused_loss_equals_the_loss_of_the_full_mixture(model, config):
  """`copy_head_losses` (no [B, T, V] array) gives the full mixture's weighted NLL and its
  gradients, and counts as correct only targets that are the mixture's argmax."""
  from models.loss import copy_head_losses
  from rl.sft.steps import token_losses

  tokens = random_tokens((B, T + 1), _vocab(config), seed=8)
  inputs, targets = tokens[:, :-1], tokens[:, 1:]
  weight = jnp.asarray(np.random.default_rng(0).uniform(0, 1, (B, T)), jnp.float32)
  mask = (weight > 0.3).astype(jnp.float32)

  def full(model):
    out = model.forward(inputs)
    return token_losses(out.logits, targets, weight)[0], token_losses(out.logits, targets, mask)

  def fused(model):
    out = model.forward(inputs)
    objective, nll, correct = copy_head_losses(
      out.hidden, model.head_weight(), out.pointer, targets, weight, mask, chunk=5
    )
    return objective, (nll, correct)

  (value, (nll, correct)), grads = nnx.jit(nnx.value_and_grad(full, has_aux=True))(model)
  (value2, (nll2, correct2)), grads2 = nnx.jit(nnx.value_and_grad(fused, has_aux=True))(model)
  np.testing.assert_allclose(value2, value, rtol=1e-5)
  np.testing.assert_allclose(nll2, nll, rtol=1e-5)
  assert correct2 <= correct
  flat, flat2 = nnx.to_flat_state(grads), nnx.to_flat_state(grads2)
  for (path, g), (_, g2) in zip(flat, flat2, strict=True):
    np.testing.assert_allclose(g2[...], g[...], atol=1e-5, rtol=1e-3, err_msg=str(path))


def test_a_match_run_needs_the_match_bonus_and_three_tokens(tiny_config):
  with pytest.raises(ValueError, match="copy_head_match_run"):
    tiny_config.replace(copy_head=True, copy_head_match=True, copy_head_match_run=2)
  with pytest.raises(ValueError, match="copy_head_match_run"):
    tiny_config.replace(copy_head=True, copy_head_match_run=3)


def test_the_pointer_path_loss_scores_copyable_targets_by_the_pointer_alone(model, config):
  """``copy_weight_bt`` adds c * -log(g copy(target)) where an earlier position is followed by
  the target (computed here from the pointer's own weights), and nothing where none is."""
  from models.copy_head import pointer_weights
  from models.loss import copy_head_losses

  tokens = random_tokens((B, T + 1), _vocab(config), seed=9)
  inputs, targets = tokens[:, :-1], tokens[:, 1:]
  weight = jnp.ones((B, T), jnp.float32)
  copy_weight = jnp.asarray(np.random.default_rng(1).uniform(0, 2, (B, T)), jnp.float32)
  out = forward(model, inputs)

  def objective(copy):
    return copy_head_losses(
      out.hidden, model.head_weight(), out.pointer, targets, weight, weight, 5, copy
    )[0]

  weights, _ = pointer_weights(out.pointer)
  plain, _ = _word_forms(config)
  hits = np.asarray(out.pointer.values_bs)[:, None, :] == plain[np.asarray(targets)][:, :, None]
  copy = np.sum(np.where(hits, np.asarray(weights), 0.0), axis=-1)
  form = out.pointer.form_bk
  for b, t in np.ndindex(*copy.shape):
    f = 0.0 if form is None else float(form[b, t])
    copy[b, t] *= _form_share(config, f, int(targets[b, t]))
  gate = np.asarray(jax.nn.sigmoid(out.pointer.gate_bk))
  copyable = copy > 0
  assert copyable.any() and (~copyable).any()
  safe = np.where(copyable, gate * copy, 1.0)
  expected = np.sum(np.where(copyable, np.asarray(copy_weight) * -np.log(safe), 0.0))
  added = float(objective(copy_weight)) - float(objective(None))
  np.testing.assert_allclose(added, expected, rtol=1e-4)
  # Weight only where nothing earlier is followed by the target: nothing is added.
  only_absent = jnp.where(jnp.asarray(copyable), 0.0, copy_weight)
  np.testing.assert_allclose(float(objective(only_absent)), float(objective(None)), rtol=1e-6)
