import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

from models import abstract_model, create_model
from tests.models.conftest import BATCH, SEQ, forward, random_tokens


def test_forward_gives_float32_logits_and_moe_statistics(tiny_model, tiny_config):
  tokens = random_tokens((BATCH, SEQ), tiny_config.vocab_size)
  out = forward(tiny_model, tokens)
  assert out.logits.shape == (BATCH, SEQ, tiny_config.vocab_size)
  assert out.logits.dtype == jnp.float32
  assert np.isfinite(out.logits).all()
  assert out.expert_load.shape == (tiny_config.num_layers, tiny_config.num_experts)
  np.testing.assert_allclose(out.expert_load.sum(-1), 1.0, rtol=1e-5)
  assert 1.0 <= float(out.aux_loss) <= tiny_config.num_experts


def test_packed_rows_equal_separate_sequences(tiny_model, tiny_config):
  """Attention, DeltaNet state and its convolution all stop at a segment change."""
  first, second = (
    random_tokens((8,), tiny_config.vocab_size, 1),
    random_tokens((12,), tiny_config.vocab_size, 2),
  )
  packed = jnp.tile(jnp.concatenate([first, second])[None], (BATCH, 1))
  segments = jnp.asarray([[0] * 8 + [1] * 12] * BATCH)
  positions = jnp.asarray([list(range(8)) + list(range(12))] * BATCH)
  out_packed = forward(tiny_model, packed, segments, positions).logits[0]
  # Separately, as the prefixes of unpacked rows (causality makes what follows irrelevant).
  filler = random_tokens((SEQ,), tiny_config.vocab_size, 3)
  rows = jnp.stack(
    [filler, jnp.concatenate([second, filler[:8]]), jnp.concatenate([first, filler[:12]])]
  )
  out_separate = forward(tiny_model, rows).logits
  np.testing.assert_allclose(out_packed[:8], out_separate[2, :8], atol=1e-5)
  np.testing.assert_allclose(out_packed[8:], out_separate[1, :12], atol=1e-5)
  # With one segment over both, the second sequence reads the first.
  leaky = forward(tiny_model, packed, jnp.zeros_like(segments), positions).logits[0]
  assert not np.allclose(leaky[8:], out_separate[1, :12], atol=1e-3)


@pytest.mark.parametrize(
  ("policy", "marker"),
  [("none", None), ("full", "policy=None"), ("dots", "DotsSaveable(only_if_no_batch_dims=True)")],
)
def test_remat_policy_wraps_each_layer(tiny_config, policy, marker):
  model = abstract_model(tiny_config.replace(remat=policy))
  graphdef, state = nnx.split(model)
  tokens = jax.ShapeDtypeStruct((BATCH, SEQ), jnp.int32)
  jaxpr = str(jax.make_jaxpr(lambda s, t: nnx.merge(graphdef, s)(t))(state, tokens))
  # jax.checkpoint shows as `remat2`: once in the DeltaNet layers' scan, once on the attention
  # layer, and not around the block (that would hold a whole block's activations at once)
  assert jaxpr.count("remat2[") == (0 if marker is None else 2)
  assert marker is None or marker in jaxpr


@nnx.jit
def _loss_and_grads(model, tokens):
  def loss_fn(model):
    out = model.forward(tokens)
    ce = optax.softmax_cross_entropy_with_integer_labels(out.logits[:, :-1], tokens[:, 1:])
    return ce.mean() + 0.01 * out.aux_loss

  return nnx.value_and_grad(loss_fn)(model)


@pytest.mark.slow
@pytest.mark.parametrize("policy", ["full", "dots"])
def test_remat_policies_do_not_change_loss_or_gradients(tiny_config, policy):
  # One scanned block of one DeltaNet and one attention layer: every layer kind, rematerialised
  # inside the scan (test_remat_policy_wraps_each_layer checks where the remat sits). A
  # second block would double the compile time: XLA keeps the loop of a scan longer than one.
  config = tiny_config.replace(num_layers=2, full_attention_interval=2)
  tokens = random_tokens((BATCH, SEQ), config.vocab_size, seed=2)
  loss, grads = _loss_and_grads(create_model(config, seed=0), tokens)
  loss_r, grads_r = _loss_and_grads(create_model(config.replace(remat=policy), seed=0), tokens)
  np.testing.assert_allclose(loss_r, loss, rtol=1e-6)
  for g, g_r in zip(
    jax.tree.leaves(nnx.state(grads)), jax.tree.leaves(nnx.state(grads_r)), strict=True
  ):
    np.testing.assert_allclose(g_r, g, atol=1e-6, rtol=1e-5)
  assert any(float(jnp.abs(g).max()) > 0 for g in jax.tree.leaves(nnx.state(grads)))


@pytest.mark.slow
def test_bfloat16_compute_keeps_float32_master_weights(tiny_model, tiny_config):
  config = tiny_config.replace(dtype="bfloat16")
  model = create_model(config, seed=0)
  assert model.blocks.linear.moe.w_gate_edf[...].dtype == jnp.float32
  tokens = random_tokens((BATCH, SEQ), tiny_config.vocab_size)
  logits = forward(model, tokens).logits
  assert logits.dtype == jnp.float32
  reference = forward(tiny_model, tokens).logits
  # bfloat16 rounding flips a few near-tied expert choices, so compare in aggregate.
  assert np.corrcoef(np.ravel(logits), np.ravel(reference))[0, 1] > 0.99
  assert float(jnp.mean(jnp.abs(logits - reference))) < 0.1 * float(jnp.mean(jnp.abs(reference)))
