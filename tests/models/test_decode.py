import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from models import create_model, decode_step, greedy_generate, prefill
from models.copy_head import set_word_forms
from models.decode import forward_unrolled, roll_cache, unroll, unroll_cache
from tests.models.conftest import BATCH, SEQ, forward, paired_word_forms, random_tokens

B, T, MAX_LEN, STEPS = BATCH, SEQ, 32, 6


def test_cached_decoding_equals_the_full_forward(tiny_model, tiny_config):
  """Right-padded prompts of different lengths, then steps: every logit as in one full pass."""
  tokens = random_tokens((B, T), tiny_config.vocab_size, seed=3)
  full = forward(tiny_model, tokens).logits
  lengths = jnp.array([5, 13, 9])
  rows = jnp.arange(B)
  prompt = jnp.where(jnp.arange(T)[None] < lengths[:, None], tokens, 0)  # padding is garbage
  logits, cache = nnx.jit(prefill, static_argnames="max_len")(tiny_model, prompt, lengths, MAX_LEN)
  np.testing.assert_allclose(logits, full[rows, lengths - 1], atol=1e-5)
  step = nnx.jit(decode_step)
  for i in range(STEPS):
    logits, cache = step(tiny_model, tokens[rows, lengths + i], cache)
    np.testing.assert_allclose(logits, full[rows, lengths + i], atol=1e-4)
  np.testing.assert_array_equal(cache.lengths_b, lengths + STEPS)


def test_prompt_longer_than_the_cache_is_rejected(tiny_model, tiny_config):
  with pytest.raises(ValueError, match="cache length"):
    prefill(tiny_model, random_tokens((1, 8), tiny_config.vocab_size), jnp.array([8]), 4)


@pytest.mark.slow
def test_greedy_generation_is_the_argmax_of_the_full_forward(tiny_model, tiny_config):
  tokens = random_tokens((2, 10), tiny_config.vocab_size, seed=4)
  lengths = jnp.array([4, 7])
  generated = greedy_generate(tiny_model, tokens, lengths, steps=4, max_len=16)
  assert generated.shape == (2, 4)
  for b in range(2):
    row = jnp.concatenate([tokens[b, : lengths[b]], generated[b]])[None]
    logits = forward(tiny_model, row).logits
    predicted = jnp.argmax(logits[0, int(lengths[b]) - 1 : -1], axis=-1)
    np.testing.assert_array_equal(predicted, generated[b])


@pytest.mark.parametrize(
  ("interval", "dense", "copy_head"),
  [
    (4, False, False),
    (4, True, False),
    (1, False, False),
    (1, True, False),
    (4, False, True),
    (4, False, "match"),
    (4, False, "forms"),
  ],
)
def test_unrolled_decoding_equals_the_scanned_cache_path(tiny_config, interval, dense, copy_head):
  """`forward_unrolled` on per-layer weights and caches (DeltaNet and attention layers, sparse
  or dense experts, a copy head whose cache comes last, with or without its match bonus and word
  forms) gives the scanned forward's logits, and its caches stack back into the scanned path's
  cache."""
  match, forms = copy_head in ("match", "forms"), copy_head == "forms"
  config = tiny_config.replace(
    full_attention_interval=interval,
    copy_head=bool(copy_head),
    copy_head_match=match,
    copy_head_forms=forms,
  )
  model = create_model(config, seed=1)
  if copy_head:  # a gate that mixes in earnest
    model.copy_head.b_gate[...] = jnp.ones(())
  if forms:  # tokens 2k and 2k + 1 one word, and a form gate that does not split it evenly
    set_word_forms(model.copy_head, *paired_word_forms(config.vocab_size))
    model.copy_head.b_form[...] = jnp.full((), 0.7)
  tokens = random_tokens((B, T), 6 if match else config.vocab_size, seed=5)
  lengths = jnp.array([5, 13, 9])
  rows = jnp.arange(B)
  prompt = jnp.where(jnp.arange(T)[None] < lengths[:, None], tokens, 0)
  _, cache = nnx.jit(prefill, static_argnames="max_len")(model, prompt, lengths, MAX_LEN)

  @nnx.jit
  def steps(model, cache):
    weights = unroll(model, dense_experts=dense)
    caches, lengths_b = unroll_cache(cache), cache.lengths_b
    scanned, unrolled = [], []
    for i in range(3):
      step_b = tokens[rows, lengths + i][:, None]
      out = model.forward(step_b, cache=cache)
      logits, caches, lengths_b = forward_unrolled(config, weights, step_b, caches, lengths_b)
      cache = out.cache
      scanned.append(out.logits[:, 0])
      unrolled.append(logits[:, 0])
    return jnp.stack(scanned), jnp.stack(unrolled), cache, roll_cache(cache, caches, lengths_b)

  scanned, unrolled, cache, rolled = steps(model, cache)
  np.testing.assert_allclose(unrolled, scanned, atol=1e-5)
  for a, b in zip(jax.tree.leaves(rolled), jax.tree.leaves(cache), strict=True):
    np.testing.assert_allclose(a, b, atol=1e-5)
