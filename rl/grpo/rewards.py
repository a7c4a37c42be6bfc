"""Rubric rewards and group-relative advantages (paper section 4.3, eq. 5 and 6; appendix A).

Every function works on padded arrays so a whole batch of rollout groups is one `jnp` call:

- ``passed`` ``[G, N, M]``: b_ij, whether rollout i of group g satisfies criterion j (bool or 0/1);
  each criterion's own check result by default, or gated (must-not credited only when every
  positive passes): ``compoworld.tasks.rubric.COUPLINGS``, chosen by GRPO's ``reward.coupling``;
- ``mask`` ``[G, M]``: True for the criteria a group's task really has. A task with fewer than M
  criteria is padded with masked columns, whose values are ignored.

Rewards are looked up by name from a config (``make_reward("completion_focused", lam=0.01)``);
register a new one with ``@register_reward(name)``. A group with no criteria at all (a padding
group) gets reward 0 from every function, never NaN.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

RewardFn = Callable[..., jax.Array]
REWARDS: dict[str, RewardFn] = {}


def register_reward(name: str) -> Callable[[RewardFn], RewardFn]:
  """Registers ``fn(passed, mask, **params) -> [G, N]`` under ``name``."""

  def deco(fn: RewardFn) -> RewardFn:
    if name in REWARDS:
      raise ValueError(f"a reward named {name!r} is already registered")
    REWARDS[name] = fn
    return fn

  return deco


def make_reward(name: str, **params) -> Callable[[jax.Array, jax.Array], jax.Array]:
  """The reward ``name`` with its parameters bound: ``(passed, mask) -> rewards [G, N]``."""
  if name not in REWARDS:
    raise KeyError(f"no reward named {name!r}; rewards: {', '.join(sorted(REWARDS))}")
  fn = REWARDS[name]
  accepted = list(inspect.signature(fn).parameters)[2:]
  unknown = sorted(set(params) - set(accepted))
  if unknown:
    raise ValueError(f"reward {name!r} takes {accepted or 'no parameters'}, not {unknown}")
  return functools.partial(fn, **params)


def _check(passed: jax.Array, mask: jax.Array) -> tuple[jax.Array, jax.Array]:
  """Validates shapes (static, so it works under jit); returns b_ij as float and the mask."""
  passed, mask = jnp.asarray(passed), jnp.asarray(mask)
  if passed.ndim != 3 or mask.shape != (passed.shape[0], passed.shape[2]):
    raise ValueError(
      f"passed must be [G, N, M] and mask [G, M]; got {passed.shape} and {mask.shape}"
    )
  mask = mask.astype(bool)
  # Padded criteria count as failed here; each reward decides how masked columns enter.
  b_gnm = jnp.where(mask[:, None, :], passed.astype(jnp.float32), 0.0)
  return b_gnm, mask


def _alpha(b_gnm: jax.Array, mask: jax.Array, lam: float) -> jax.Array:
  if not lam > 0:  # static under jit, so a plain Python check
    raise ValueError(f"lam must be > 0 (it keeps every criterion's weight positive); got {lam}")
  p_gm = b_gnm.mean(axis=1)  # eq. 5: p_j = 1/N sum_i b_ij, the group pass rate
  w_gm = jnp.where(mask, lam + (1.0 - p_gm), 0.0)  # eq. 5: w_j = lambda + (1 - p_j)
  total_g1 = w_gm.sum(axis=-1, keepdims=True)  # W = sum_j w_j >= lam * M_g > 0 unless M_g = 0
  return w_gm / jnp.where(total_g1 > 0, total_g1, 1.0)


@functools.partial(jax.jit, static_argnames="lam")
def criterion_weights(passed: jax.Array, mask: jax.Array, lam: float = 0.01) -> jax.Array:
  """alpha_j = w_j / sum_k w_k (eq. 5, 10): shared by the group, 0 on masked criteria. [G, M]"""
  return _alpha(*_check(passed, mask), lam)


@register_reward("completion_focused")
@functools.partial(jax.jit, static_argnames="lam")  # one program, not one dispatch per op
def completion_focused_reward(passed: jax.Array, mask: jax.Array, lam: float = 0.01) -> jax.Array:
  """Eq. 5: R_i = sum_j w_j b_ij / sum_j w_j; rarer criteria weigh more. [G, N]"""
  b_gnm, mask = _check(passed, mask)
  # The weights are a function of the group's outcomes only; R is linear in b_ij given them.
  return jnp.einsum("gnm,gm->gn", b_gnm, _alpha(b_gnm, mask, lam))


@register_reward("uniform")
@jax.jit
def uniform_reward(passed: jax.Array, mask: jax.Array) -> jax.Array:
  """R_i = M^-1 sum_j b_ij over the group's own criteria (section 4.3's uniform averaging). [G, N]"""
  b_gnm, mask = _check(passed, mask)
  m_g = mask.sum(axis=-1)[:, None]  # [G, 1]
  return b_gnm.sum(axis=-1) / jnp.maximum(m_g, 1)


@register_reward("binary")
@jax.jit
def binary_reward(passed: jax.Array, mask: jax.Array) -> jax.Array:
  """Success = prod_j b_ij over the group's own criteria. [G, N]"""
  b_gnm, mask = _check(passed, mask)
  all_pass_gn = jnp.all(jnp.where(mask[:, None, :], b_gnm > 0, True), axis=-1)
  return jnp.where(mask.any(axis=-1)[:, None], all_pass_gn, False).astype(jnp.float32)


@functools.partial(jax.jit, static_argnames="delta")
def group_advantages(rewards: jax.Array, delta: float = 1e-6) -> jax.Array:
  """Eq. 6: A_i = (R_i - mean R) / (sigma_R + delta), sigma_R the population std (1/N). [G, N]"""
  if not delta > 0:
    raise ValueError(f"delta must be > 0 (it keeps a constant group finite); got {delta}")
  rewards = jnp.asarray(rewards, jnp.float32)
  if rewards.ndim != 2:
    raise ValueError(f"rewards must be [G, N]; got shape {rewards.shape}")
  dev_gn = rewards - rewards.mean(axis=-1, keepdims=True)
  # A group of equal rewards has no deviation: float32's mean of eight 0.7s is not 0.7, and
  # the rounding over (sigma + delta) would give every rollout of it an advantage of ~0.06.
  constant_g1 = rewards.max(axis=-1, keepdims=True) == rewards.min(axis=-1, keepdims=True)
  dev_gn = jnp.where(constant_g1, 0.0, dev_gn)
  sigma_g1 = jnp.sqrt(jnp.mean(dev_gn**2, axis=-1, keepdims=True))  # 1/N, not 1/(N - 1)
  return dev_gn / (sigma_g1 + delta)


def pad_passed(groups: Sequence[Sequence[Sequence[bool]]]) -> tuple[np.ndarray, np.ndarray]:
  """Per-group lists of per-rollout criterion results -> (passed [G, N, M], mask [G, M]).

  Every group needs the same number N of rollouts, and every rollout of a group the same number of
  criteria (its task's); M is the largest such number.
  """
  if not groups:
    raise ValueError("no groups")
  n = len(groups[0])
  m = max(len(rollout) for group in groups for rollout in group) if n else 0
  passed = np.zeros((len(groups), n, m), bool)
  mask = np.zeros((len(groups), m), bool)
  for g, group in enumerate(groups):
    if len(group) != n:
      raise ValueError(f"group {g} has {len(group)} rollouts; group 0 has {n}")
    lengths = {len(rollout) for rollout in group}
    if len(lengths) > 1:
      raise ValueError(f"group {g}: rollouts disagree on the number of criteria: {sorted(lengths)}")
    for i, rollout in enumerate(group):
      passed[g, i, : len(rollout)] = rollout
    mask[g, : lengths.pop() if lengths else 0] = True
  return passed, mask
