"""A policy with a copy head in the GRPO path: the trainer's log-probs are those of the model's
own (mixture) logits, the distribution the rollout engine samples from."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from models import create_model, get_config
from models.copy_head import set_word_forms
from rl.grpo.trainer import policy_logp
from tests.models.conftest import paired_word_forms

TEMPERATURE = 0.7


@pytest.mark.parametrize(
  ("match", "forms"),
  [(False, False), (True, False), (True, True)],
  ids=["pointer", "pointer+match", "pointer+match+forms"],
)
def test_policy_logp_of_a_copy_head_model_is_that_of_its_logits(match, forms):
  config = get_config(
    "tiny", copy_head=True, copy_head_dim=16, copy_head_match=match, copy_head_forms=forms
  )
  model = create_model(config, seed=3)
  model.copy_head.b_gate[...] = jnp.ones(())  # the pointer carries real mass
  if forms:  # tokens 2k and 2k + 1 one word
    set_word_forms(model.copy_head, *paired_word_forms(config.vocab_size))
    model.copy_head.b_form[...] = jnp.full((), -0.5)
  rng = np.random.default_rng(0)
  vocab = 6 if match else config.vocab_size  # few ids: keys often match queries
  tokens = jnp.asarray(rng.integers(0, vocab, (2, 17)), jnp.int32)
  batch = {
    "tokens": tokens[:, :-1],
    "targets": tokens[:, 1:],
    "positions": jnp.broadcast_to(jnp.arange(16), (2, 16)),
    "segment_ids": jnp.ones((2, 16), jnp.int32),
  }
  logits = nnx.jit(lambda m, t: m(t))(model, batch["tokens"])
  logp_btv = jax.nn.log_softmax(logits / TEMPERATURE, axis=-1)
  expected = jnp.take_along_axis(logp_btv, batch["targets"][..., None], axis=-1)[..., 0]
  run = nnx.jit(policy_logp, static_argnames=("temperature", "head_chunk"))
  logp, entropy, _ = run(model, batch, temperature=TEMPERATURE)
  np.testing.assert_allclose(logp, expected, atol=1e-5)
  index = jnp.array([[0, 4, 15], [2, 2, 9]])
  logp_at, _, _ = run(model, batch, temperature=TEMPERATURE, index_bk=index)
  np.testing.assert_allclose(logp_at, jnp.take_along_axis(expected, index, axis=1), atol=1e-5)
  probs = jnp.exp(logp_btv)
  np.testing.assert_allclose(entropy, -jnp.sum(probs * logp_btv, axis=-1), atol=1e-4)
