import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rl.grpo.loss import (
  AGGREGATIONS,
  GRPOLossConfig,
  grpo_loss,
  grpo_loss_from_logits,
  token_logp_and_entropy,
)
from rl.grpo.rewards import completion_focused_reward, criterion_weights, group_advantages


def reference_loss(logits, targets, old_logp, adv, mask, config, ref_logp=None):
  """Eq. 8 token by token in plain Python loops, written as the paper writes it (min and clip)."""
  lo, hi = 1 - config.eps_low, 1 + config.eps_high
  per_traj, all_terms = [], []
  for b in range(targets.shape[0]):
    terms = []
    for t in range(targets.shape[1]):
      if not mask[b, t]:
        continue
      logp_v = jax.nn.log_softmax(logits[b, t])
      logp = logp_v[targets[b, t]]
      r = jnp.exp(logp - old_logp[b, t])
      term = jnp.minimum(r * adv[b], jnp.clip(r, lo, hi) * adv[b])
      if ref_logp is not None:
        d = ref_logp[b, t] - logp
        term = term - config.kl_coef * (jnp.exp(d) - d - 1)
      term = term + config.entropy_coef * -jnp.sum(jnp.exp(logp_v) * logp_v)
      terms.append(term)
    if not terms:
      continue  # a padding row is not a trajectory
    all_terms += terms
    per_traj.append(
      sum(terms) / len(terms) if config.aggregation == "seq-mean-token-mean" else sum(terms)
    )
  if config.aggregation == "token-mean":
    return -sum(all_terms) / len(all_terms)
  return -sum(per_traj) / len(per_traj)


def random_batch(seed=0, b=4, t=6, v=5):
  rng = np.random.default_rng(seed)
  logits = jnp.asarray(rng.normal(size=(b, t, v)), jnp.float32)
  targets = rng.integers(0, v, size=(b, t))
  logp, _ = token_logp_and_entropy(logits, jnp.asarray(targets))
  # Sampling log-probs off by up to +-0.6 nats: ratios spread over [0.55, 1.8].
  old_logp = np.asarray(logp) + rng.uniform(-0.6, 0.6, size=(b, t))
  ref_logp = np.asarray(logp) + rng.normal(scale=0.3, size=(b, t))
  adv = rng.normal(size=b)
  mask = rng.random((b, t)) < 0.7
  mask[:, 0] = True  # non-empty trajectories of different lengths and one padding row
  mask[-1] = False
  # Both clips must trigger: a ratio of e^0.5 with A > 0 and one of e^-0.5 with A < 0.
  adv[:2] = (0.5 + np.abs(adv[:2])) * [1, -1]
  old_logp[:2, 0] = np.asarray(logp[:2, 0]) + np.array([-0.5, 0.5])
  old_logp[~mask] = -1e9  # garbage at padding must not matter
  return logits, targets, old_logp, adv, mask, ref_logp


@pytest.mark.parametrize("aggregation", AGGREGATIONS)
@pytest.mark.parametrize("coefs", [(0.0, 0.0), (0.1, 0.05)])
def test_matches_loop_reference_value_and_gradient(aggregation, coefs):
  logits, targets, old_logp, adv, mask, ref_logp = random_batch()
  config = GRPOLossConfig(aggregation=aggregation, kl_coef=coefs[0], entropy_coef=coefs[1])
  ref = ref_logp if coefs[0] > 0 else None

  def vectorized(lg):
    return grpo_loss_from_logits(
      lg, jnp.asarray(targets), jnp.asarray(old_logp), jnp.asarray(adv), jnp.asarray(mask),
      config, None if ref is None else jnp.asarray(ref),
    )  # fmt: skip

  (loss, metrics), grad = jax.value_and_grad(vectorized, has_aux=True)(logits)
  want, want_grad = jax.value_and_grad(
    lambda lg: reference_loss(lg, targets, old_logp, adv, mask, config, ref)
  )(logits)
  np.testing.assert_allclose(loss, want, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(grad, want_grad, rtol=1e-4, atol=1e-6)
  assert metrics["clip_frac_low"] > 0 and metrics["clip_frac_high"] > 0
  assert np.all(np.asarray(grad)[-1] == 0)  # the padding row
  assert ("kl" in metrics) == (ref is not None)


def test_hand_derived_loss_metrics_and_gradient():
  # Row 0: A = +1, agent tokens t0, t1 with ratios 1 and 1.5; 1.5 > 1.28 clips -> terms 1, 1.28.
  # Row 1: A = -2, ratios 0.5, 1, 1.25; 0.5 < 0.8 clips to 0.8 -> terms -1.6, -2, -2.5
  #        (a ratio above 1 is never clipped for a negative advantage).
  log_ratio = np.log([[1.0, 1.5, 1.0], [0.5, 1.0, 1.25]])
  old = np.array([[-1.0, -2.0, -1e9], [-0.5, -1.5, -3.0]])  # t2 of row 0 is padding
  logp = jnp.asarray(old + log_ratio, jnp.float32).at[0, 2].set(0.0)
  args = (jnp.asarray(old), jnp.array([1.0, -2.0]), jnp.array([[1, 1, 0], [1, 1, 1]]))
  want = {
    "seq-mean-token-mean": -((1 + 1.28) / 2 + (-1.6 - 2 - 2.5) / 3) / 2,  # eq. 8: 0.4466667
    "token-mean": -(1 + 1.28 - 1.6 - 2 - 2.5) / 5,  # 0.764
    "seq-mean-token-sum": -((1 + 1.28) + (-1.6 - 2 - 2.5)) / 2,  # 1.91
  }
  for aggregation, value in want.items():
    loss, metrics = grpo_loss(logp, *args, GRPOLossConfig(aggregation=aggregation))
    np.testing.assert_allclose(loss, value, rtol=1e-5)
  assert metrics["clip_frac_low"] == pytest.approx(1 / 5) and metrics["clip_frac_high"] == 1 / 5
  assert metrics["ratio_min"] == pytest.approx(0.5) and metrics["ratio_max"] == pytest.approx(1.5)
  assert metrics["ratio_mean"] == pytest.approx((1 + 1.5 + 0.5 + 1 + 1.25) / 5)
  # eq. 8 gradient: d loss / d logp_it = -A_i r_it / (|y_i| * 2 trajectories), 0 where clipped.
  grad = jax.grad(lambda x: grpo_loss(x, *args)[0])(logp)
  want_grad = [[-1 * 1 / (2 * 2), 0.0, 0.0], [0.0, 2 * 1 / (3 * 2), 2 * 1.25 / (3 * 2)]]
  np.testing.assert_allclose(grad, want_grad, rtol=1e-5)


@pytest.mark.parametrize(
  "ratio, adv, eps_high, clipped",
  [
    (1.28 * 0.999, 1.0, 0.28, None),  # just inside the upper bound
    (1.28 * 1.001, 1.0, 0.28, "high"),  # just outside: the gradient stops
    (1.28 * 1.001, -1.0, 0.28, None),  # above the bound with A < 0: still pulled down
    (0.80 * 1.001, -1.0, 0.28, None),  # just inside the lower bound
    (0.80 * 0.999, -1.0, 0.28, "low"),  # just outside
    (0.80 * 0.999, 1.0, 0.28, None),  # below the bound with A > 0: still pushed up
    (1.25, 1.0, 0.28, None),  # asymmetric: inside 1 + 0.28 ...
    (1.25, 1.0, 0.20, "high"),  # ... but outside a symmetric 1 + 0.2
  ],
)
def test_clipping_at_the_boundaries(ratio, adv, eps_high, clipped):
  old = jnp.array([[-1.0]])
  logp = old + jnp.float32(math.log(ratio))
  config = GRPOLossConfig(eps_low=0.2, eps_high=eps_high)
  args = (old, jnp.array([adv]), jnp.array([[1]]), config)
  (loss, metrics), grad = jax.value_and_grad(grpo_loss, has_aux=True)(logp, *args)
  bound = {"high": 1 + eps_high, "low": 0.8, None: ratio}[clipped]
  np.testing.assert_allclose(loss, -bound * adv, rtol=1e-5)  # -min(r A, clip(r) A)
  np.testing.assert_allclose(grad, [[0.0 if clipped else -adv * ratio]], rtol=1e-5)
  assert metrics["clip_frac_high"] == (clipped == "high")
  assert metrics["clip_frac_low"] == (clipped == "low")


def test_appendix_a_gradient_at_the_update_origin():
  # With theta = the token log-probs themselves, z_i = mask_i / |y_i|. At r = 1 (no clipping),
  # eq. 10: grad J = 1/(sigma_R + delta) sum_j alpha_j g_j, g_j = 1/N sum_i (b_ij - p_j) z_i.
  lam, delta = 0.01, 1e-3
  passed = np.array([[[1, 1, 0], [1, 0, 0], [1, 1, 1], [0, 0, 0]]], bool)  # [1, N=4, M=3]
  mask_c = np.ones((1, 3), bool)
  rewards = completion_focused_reward(passed, mask_c, lam)
  adv = group_advantages(rewards, delta)[0]
  mask = np.arange(7)[None, :] < np.array([[3], [7], [1], [5]])  # |y| = 3, 7, 1, 5
  old = jnp.asarray(np.random.default_rng(3).normal(size=(4, 7)), jnp.float32)
  grad_j = -jax.grad(lambda x: grpo_loss(x, old, adv, jnp.asarray(mask))[0])(old)
  z = mask / mask.sum(axis=1, keepdims=True)  # z_i is row i of this, zero elsewhere: [N, T]
  b, p = passed[0].astype(float), passed[0].mean(axis=0)
  g = np.einsum("nm,nt->mnt", b - p, z) / 4  # g_j, a gradient over theta [N, T] per criterion
  sigma = np.std(np.asarray(rewards[0]))  # population std, as eq. 6
  alpha = np.asarray(criterion_weights(passed, mask_c, lam))[0]
  np.testing.assert_allclose(grad_j, np.einsum("m,mnt->nt", alpha, g) / (sigma + delta), atol=1e-6)


def test_kl_and_entropy_terms():
  logp = jnp.log(jnp.array([[0.5, 0.25]]))
  ref = jnp.log(jnp.array([[1.0, 0.25]]))  # d = log 2 and 0
  args = (logp, jnp.array([0.0]), jnp.array([[1, 1]]))  # A = 0: only the KL term remains
  loss, metrics = grpo_loss(logp, *args, GRPOLossConfig(kl_coef=0.5), ref_logp_bt=ref)
  k3 = 2 - math.log(2) - 1  # e^d - d - 1 = 0.3068528 at d = log 2, 0 at d = 0
  assert metrics["kl"] == pytest.approx(k3 / 2)
  np.testing.assert_allclose(loss, 0.5 * k3 / 2, rtol=1e-6)
  _, metrics = grpo_loss(logp, *args)
  assert "kl" not in metrics and "entropy" not in metrics
  # Uniform logits over V = 4: entropy log 4; the bonus lowers the loss by coef * log 4.
  logits = jnp.zeros((1, 2, 4))
  loss, metrics = grpo_loss_from_logits(
    logits, jnp.array([[0, 3]]), jnp.log(jnp.full((1, 2), 0.25)), jnp.array([1.0]),
    jnp.array([[1, 1]]), GRPOLossConfig(entropy_coef=0.1),
  )  # fmt: skip
  assert metrics["entropy"] == pytest.approx(math.log(4))
  np.testing.assert_allclose(loss, -1.0 - 0.1 * math.log(4), rtol=1e-6)


def test_inside_an_outer_jit():
  # The trainer jits its whole step around the loss, with the config static.
  logits, targets, old_logp, adv, mask, ref_logp = random_batch(seed=4)
  args = [jnp.asarray(x) for x in (logits, targets, old_logp, adv, mask)]
  config = GRPOLossConfig(aggregation="token-mean", kl_coef=0.1)
  fn = jax.value_and_grad(grpo_loss_from_logits, has_aux=True)
  inner = fn(*args, config, jnp.asarray(ref_logp))
  outer = jax.jit(fn, static_argnums=5)(*args, config, jnp.asarray(ref_logp))
  for a, b in zip(jax.tree.leaves(inner), jax.tree.leaves(outer), strict=True):
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_bad_input_is_rejected():
  with pytest.raises(ValueError, match="aggregation"):
    GRPOLossConfig(aggregation="mean")
  with pytest.raises(ValueError, match="eps_low"):
    GRPOLossConfig(eps_low=1.0)
  with pytest.raises(ValueError, match="eps_high"):
    GRPOLossConfig(eps_high=0.0)
  with pytest.raises(ValueError, match=">= 0"):
    GRPOLossConfig(kl_coef=-0.1)
  x, a, m = jnp.zeros((2, 3)), jnp.zeros(2), jnp.ones((2, 3))
  with pytest.raises(ValueError, match="mask_bt has shape"):
    grpo_loss(x, x, a, m[:, :2])
  with pytest.raises(ValueError, match=r"advantages_b \[B\]"):
    grpo_loss(x, x, jnp.zeros(3), m)
  with pytest.raises(ValueError, match="needs ref_logp_bt"):
    grpo_loss(x, x, a, m, GRPOLossConfig(kl_coef=0.1))
  with pytest.raises(ValueError, match="needs entropy_bt"):
    grpo_loss(x, x, a, m, GRPOLossConfig(entropy_coef=0.1))
