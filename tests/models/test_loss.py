"""`models.lm_loss`: the fused, chunked head loss equals the cross-entropy of the full logits."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from models import create_model, get_config, lm_loss, use_mesh


def full_logits_loss(model, tokens, segment_ids, loss_mask):
  out = model.forward(tokens, segment_ids_bt=segment_ids)
  logp = jax.nn.log_softmax(out.logits[:, :-1].astype(jnp.float32), axis=-1)
  nll = -jnp.take_along_axis(logp, tokens[:, 1:, None], axis=-1)[..., 0]
  weight = (segment_ids[:, 1:] == segment_ids[:, :-1]) * loss_mask[:, 1:]
  ce = jnp.sum(nll * weight) / jnp.sum(weight)
  return ce + model.config.router_aux_loss_coef * out.aux_loss


@pytest.mark.parametrize("chunk", [None, 4])
def test_fused_loss_and_gradients_equal_the_full_logits(chunk):
  with use_mesh(None):
    model = create_model(
      get_config("tiny", num_layers=1, full_attention_interval=1, moe_backend="sort"), seed=0
    )
  rng = np.random.default_rng(0)
  tokens = jnp.asarray(rng.integers(0, model.config.vocab_size, (2, 16)), jnp.int32)
  segment_ids = jnp.asarray(np.where(np.arange(16) < 9, 1, 2)[None].repeat(2, 0), jnp.int32)
  loss_mask = jnp.asarray(rng.random((2, 16)) < 0.7, jnp.int32)

  def fused(m):
    return lm_loss(m, tokens, segment_ids_bt=segment_ids, loss_mask_bt=loss_mask, chunk=chunk)[0]

  def full(m):
    return full_logits_loss(m, tokens, segment_ids, loss_mask)

  (loss, grads), (ref, ref_grads) = (nnx.value_and_grad(f)(model) for f in (fused, full))
  np.testing.assert_allclose(loss, ref, rtol=1e-5)
  pairs = zip(jax.tree.leaves(nnx.state(grads)), jax.tree.leaves(nnx.state(ref_grads)), strict=True)
  for a, b in pairs:
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
