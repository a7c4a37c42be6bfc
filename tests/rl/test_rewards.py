import jax
import jax.numpy as jnp
import numpy as np
import pytest

from compoworld.tasks.rubric import couple
from rl.grpo import rewards
from rl.grpo.batches import groups_unlike_uniform
from rl.grpo.rewards import (
  REWARDS,
  binary_reward,
  completion_focused_reward,
  criterion_weights,
  group_advantages,
  make_reward,
  pad_passed,
  register_reward,
  uniform_reward,
)

# One group, N = 4 rollouts, M = 3 criteria.
B_NM = [[1, 1, 0], [1, 0, 0], [1, 1, 1], [0, 0, 0]]


def one_group(b_nm, m=None):
  passed = np.asarray([b_nm], bool)
  return passed, np.ones((1, passed.shape[2] if m is None else m), bool)


def test_completion_focused_hand_values():
  # p = (3/4, 2/4, 1/4); lam = 0.01 -> w = (0.26, 0.51, 0.76), W = 1.53.
  # R_0 = (0.26 + 0.51) / 1.53, R_1 = 0.26 / 1.53, R_2 = 1.53 / 1.53 = 1, R_3 = 0.
  got = completion_focused_reward(*one_group(B_NM), lam=0.01)
  np.testing.assert_allclose(got, [[0.77 / 1.53, 0.26 / 1.53, 1.0, 0.0]], rtol=1e-6)
  # lam = 1: w = (1.25, 1.5, 1.75), W = 4.5 -> R_0 = 2.75 / 4.5, R_1 = 1.25 / 4.5.
  got = completion_focused_reward(*one_group(B_NM), lam=1.0)
  np.testing.assert_allclose(got, [[2.75 / 4.5, 1.25 / 4.5, 1.0, 0.0]], rtol=1e-6)


def test_uniform_and_binary_hand_values():
  np.testing.assert_allclose(
    uniform_reward(*one_group(B_NM)), [[2 / 3, 1 / 3, 1.0, 0.0]], rtol=1e-6
  )
  np.testing.assert_array_equal(binary_reward(*one_group(B_NM)), [[0.0, 0.0, 1.0, 0.0]])


def test_rarer_criterion_earns_more():
  # Criterion 0 passes in 3 of 4 rollouts, criterion 1 in 1 of 4: p = (0.75, 0.25),
  # w = (0.26, 0.76), W = 1.02. Rollout 3 (passes only the rare one) earns 0.76 / 1.02,
  # rollouts 0-2 (only the common one) 0.26 / 1.02; uniform averaging cannot tell them apart.
  b_nm = [[1, 0], [1, 0], [1, 0], [0, 1]]
  got = completion_focused_reward(*one_group(b_nm), lam=0.01)
  np.testing.assert_allclose(got, [[0.26 / 1.02] * 3 + [0.76 / 1.02]], rtol=1e-6)
  np.testing.assert_allclose(uniform_reward(*one_group(b_nm)), [[0.5] * 4])


# [G=1, N=2, M=3]: criteria (positive, positive, must_not). Rollout 0 fails the second positive
# and keeps the must-not; rollout 1 passes all three. Raw check results, then b_ij per coupling.
KINDS = ["positive", "positive", "must_not"]
RAW_NM = [[1, 0, 1], [1, 1, 1]]


@pytest.mark.parametrize(
  "coupling, b_nm, completion, uniform, binary",
  [
    # b = [[1,0,1],[1,1,1]]: p = (1, 1/2, 1), w = (0.01, 0.51, 0.01), W = 0.53
    ("independent", [[1, 0, 1], [1, 1, 1]], [0.02 / 0.53, 1.0], [2 / 3, 1.0], [0.0, 1.0]),
    # b = [[1,0,0],[1,1,1]]: p = (1, 1/2, 1/2), w = (0.01, 0.51, 0.51), W = 1.03
    ("gated", [[1, 0, 0], [1, 1, 1]], [0.01 / 1.03, 1.0], [1 / 3, 1.0], [0.0, 1.0]),
  ],
)
def test_rewards_under_each_coupling(coupling, b_nm, completion, uniform, binary):
  b = [couple(raw, KINDS, coupling) for raw in RAW_NM]
  assert b == [[bool(x) for x in row] for row in b_nm]
  passed, mask = one_group(b)
  got = completion_focused_reward(passed, mask, lam=0.01)
  np.testing.assert_allclose(got, [completion], rtol=1e-6)
  np.testing.assert_allclose(uniform_reward(passed, mask), [uniform], rtol=1e-6)
  np.testing.assert_array_equal(binary_reward(passed, mask), [binary])


@pytest.mark.parametrize("lam", [0.01, 0.5])
def test_appendix_a_weights_follow_completion_gap(lam):
  rng = np.random.default_rng(0)
  passed = rng.random((16, 8, 5)) < rng.random((16, 1, 5))  # a pass rate per criterion
  mask = np.ones((16, 5), bool)
  alpha = np.asarray(criterion_weights(passed, mask, lam))
  p = passed.mean(axis=1)
  np.testing.assert_allclose(alpha.sum(axis=-1), 1.0, rtol=1e-6)
  checked = 0
  for g in range(16):
    for j in range(5):
      for k in range(5):
        if p[g, j] < p[g, k]:  # eq. 11: alpha_j / alpha_k = (lam + 1 - p_j) / (lam + 1 - p_k) > 1
          ratio = alpha[g, j] / alpha[g, k]
          assert ratio > 1
          np.testing.assert_allclose(ratio, (lam + 1 - p[g, j]) / (lam + 1 - p[g, k]), rtol=1e-5)
          checked += 1
  assert checked > 50
  # The reward is linear in b_ij with those coefficients.
  np.testing.assert_allclose(
    completion_focused_reward(passed, mask, lam), np.einsum("gnm,gm->gn", passed, alpha), rtol=1e-6
  )


def test_eq9_advantage_decomposition():
  # eq. 9: A_i = sum_j w_j (b_ij - p_j) / (W (sigma_R + delta)), in plain Python.
  lam, delta = 0.01, 1e-3
  n, m = len(B_NM), len(B_NM[0])
  p = [sum(B_NM[i][j] for i in range(n)) / n for j in range(m)]
  w = [lam + 1 - p[j] for j in range(m)]
  big_w = sum(w)
  r = [sum(w[j] * B_NM[i][j] for j in range(m)) / big_w for i in range(n)]
  mean = sum(r) / n
  sigma = (sum((x - mean) ** 2 for x in r) / n) ** 0.5
  want = [
    sum(w[j] * (B_NM[i][j] - p[j]) for j in range(m)) / (big_w * (sigma + delta)) for i in range(n)
  ]
  got = group_advantages(completion_focused_reward(*one_group(B_NM), lam=lam), delta=delta)
  np.testing.assert_allclose(got, [want], rtol=1e-5)


def test_group_advantages_population_std_and_delta():
  # mean 0.5; population std sqrt(((0.5^2) * 4) / 4) = 0.5 (the sample std would be 0.577);
  # delta = 0.5 -> A = (R - 0.5) / 1.0.
  got = group_advantages(jnp.array([[0.0, 0.0, 1.0, 1.0]]), delta=0.5)
  np.testing.assert_allclose(got, [[-0.5, -0.5, 0.5, 0.5]], rtol=1e-6)
  # mean 0.25, population std sqrt((3 * 0.0625 + 0.5625) / 4) = sqrt(0.1875); the second group is
  # constant: zero advantage, kept finite by delta.
  got = group_advantages(jnp.array([[0.0, 0.0, 0.0, 1.0], [0.7, 0.7, 0.7, 0.7]]), delta=1e-6)
  s = np.sqrt(0.1875) + 1e-6
  np.testing.assert_allclose(got[0], [-0.25 / s, -0.25 / s, -0.25 / s, 0.75 / s], rtol=1e-5)
  np.testing.assert_array_equal(got[1], np.zeros(4))
  # Constant groups of 8 whose float32 mean is not their value (0.7, 1/3, a uniform reward of 1
  # of 3 criteria): still exactly 0, not (rounding) / (sigma + delta) ~ 0.06 for every rollout.
  got = group_advantages(jnp.array([[0.7] * 8, [1 / 3] * 8, [0.0] * 7 + [1 / 3]]))
  np.testing.assert_array_equal(got[:2], np.zeros((2, 8)))
  assert got[2, -1] > 2.0 and np.all(got[2, :-1] < 0)


@pytest.mark.parametrize("name", sorted(REWARDS))
def test_padded_criteria_are_ignored(name):
  rng = np.random.default_rng(1)
  real = rng.random((3, 8, 2)) < 0.5  # every group has 2 real criteria
  fn = make_reward(name)
  want = fn(real, np.ones((3, 2), bool))
  for junk in [np.zeros((3, 8, 3), bool), np.ones((3, 8, 3), bool), rng.random((3, 8, 3)) < 0.5]:
    padded = np.concatenate([real, junk], axis=-1)
    mask = np.array([[True, True, False, False, False]] * 3)
    np.testing.assert_allclose(fn(padded, mask), want, rtol=1e-6)


def test_groups_of_different_sizes_in_one_batch():
  # Group 0 is the 3-criterion task above; group 1 has one criterion, padded to 3.
  passed, mask = pad_passed([B_NM, [[1], [0], [0], [0]]])
  assert passed.shape == (2, 4, 3)
  np.testing.assert_array_equal(mask, [[True, True, True], [True, False, False]])
  got = completion_focused_reward(passed, mask, lam=0.01)
  np.testing.assert_allclose(got[0], [0.77 / 1.53, 0.26 / 1.53, 1.0, 0.0], rtol=1e-6)
  np.testing.assert_allclose(got[1], [1.0, 0.0, 0.0, 0.0])  # one criterion: R_i = b_i1
  np.testing.assert_array_equal(binary_reward(passed, mask)[1], [1.0, 0.0, 0.0, 0.0])


@pytest.mark.parametrize("name", sorted(REWARDS))
def test_group_without_criteria_gets_zero(name):
  passed = np.ones((2, 4, 3), bool)
  mask = np.array([[True, True, True], [False, False, False]])
  got = np.asarray(make_reward(name)(passed, mask))
  np.testing.assert_array_equal(got, [[1.0] * 4, [0.0] * 4])
  assert np.all(np.isfinite(group_advantages(got)))


def test_jit_matches_eager():
  rng = np.random.default_rng(2)
  passed, mask = rng.random((4, 8, 6)) < 0.4, rng.random((4, 6)) < 0.8
  for name in REWARDS:
    fn = make_reward(name)
    np.testing.assert_allclose(jax.jit(fn)(passed, mask), fn(passed, mask), rtol=1e-6)
  fn = jax.jit(lambda p, m: group_advantages(completion_focused_reward(p, m, 0.01), 1e-6))
  np.testing.assert_allclose(
    fn(passed, mask), group_advantages(completion_focused_reward(passed, mask, 0.01)), rtol=1e-5
  )


def test_registry_by_name():
  assert {"completion_focused", "uniform", "binary"} <= set(REWARDS)
  fn = make_reward("completion_focused", lam=1.0)
  np.testing.assert_allclose(fn(*one_group(B_NM))[0, :2], [2.75 / 4.5, 1.25 / 4.5], rtol=1e-6)
  with pytest.raises(KeyError, match="completion_focused"):
    make_reward("nope")
  with pytest.raises(ValueError, match="lam"):
    make_reward("uniform", lam=0.01)
  with pytest.raises(ValueError, match="already registered"):
    register_reward("uniform")(uniform_reward)

  @register_reward("half_uniform")
  def half(passed, mask, scale=0.5):
    return scale * uniform_reward(passed, mask)

  try:
    np.testing.assert_allclose(
      make_reward("half_uniform")(*one_group(B_NM))[0, 0], 1 / 3, rtol=1e-6
    )
  finally:
    del rewards.REWARDS["half_uniform"]


def test_bad_input_is_rejected():
  passed, mask = one_group(B_NM)
  with pytest.raises(ValueError, match=r"\[G, N, M\]"):
    uniform_reward(passed[0], mask)
  with pytest.raises(ValueError, match=r"mask \[G, M\]"):
    uniform_reward(passed, mask[:, :2])
  with pytest.raises(ValueError, match="lam must be > 0"):
    completion_focused_reward(passed, mask, lam=0.0)
  with pytest.raises(ValueError, match="delta must be > 0"):
    group_advantages(jnp.zeros((1, 4)), delta=0.0)
  with pytest.raises(ValueError, match=r"\[G, N\]"):
    group_advantages(jnp.zeros(4))
  with pytest.raises(ValueError, match="group 1 has 2 rollouts"):
    pad_passed([[[1], [0], [1]], [[1], [0]]])
  with pytest.raises(ValueError, match="disagree"):
    pad_passed([[[1], [0, 1]]])


def test_groups_unlike_uniform_counts_where_the_weighting_changes_the_advantages():
  n = 4
  passed = np.zeros((3, n, 2), bool)
  passed[0, :, 0] = [1, 0, 1, 0]  # one criterion varies, the other always passes: affine
  passed[0, :, 1] = True
  passed[1, :, 0] = [1, 1, 1, 0]  # two vary, with pass rates 3/4 and 1/4: reweighted
  passed[1, :, 1] = [0, 0, 1, 0]
  passed[2, :, 0] = [1, 0, 1, 0]  # two vary with the same pass rate: alike again
  passed[2, :, 1] = [0, 1, 1, 0]
  batch = {"passed": passed, "criteria_mask": np.ones((3, 2), bool)}
  completion = group_advantages(completion_focused_reward(passed, batch["criteria_mask"]), 1e-6)
  uniform = group_advantages(uniform_reward(passed, batch["criteria_mask"]), 1e-6)
  assert groups_unlike_uniform(batch, completion, 1e-6) == pytest.approx(1 / 3)
  assert groups_unlike_uniform(batch, uniform, 1e-6) == 0.0
  # the one reweighted group: the rollout meeting the rare criterion gains against uniform
  assert completion[1, 2] > uniform[1, 2]
