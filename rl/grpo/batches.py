"""What one GRPO step trains on: the tasks a step draws, the rewards and group advantages of its
rollouts (and the groups kept), the padded batch they become, and its outcome statistics.

Batch layout (``assemble_batch``): row ``g * N + i`` is rollout i of task g. A rollout's ids
``x_0 .. x_{T-1}`` become inputs ``x_0 .. x_{T-2}`` and targets ``x_1 .. x_{T-1}`` (the logits at
t - 1 predict token t), right-padded to a bucketed length so few shapes ever compile; the loss
mask and the sampling log-probabilities are shifted with the targets. ``loss_index`` lists each
row's loss-token positions: the LM head and the softmax run only there (agent turns are a small
share of a conversation), optionally in chunks (``optim.head_chunk``) for a large vocabulary.
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import ml_collections
import numpy as np

from compoworld.tasks.rubric import check_coupling
from rl.grpo.rewards import REWARDS, group_advantages, make_reward, pad_passed

#: The per-row arrays of a training batch: all [B, L], but ``loss_index`` [B, K].
ROW_KEYS = ("tokens", "targets", "positions", "segment_ids", "loss_mask", "old_logp", "loss_index")


def bucket_length(n: int, least: int) -> int:
  """The padded length of a batch whose longest row is n: `least`, or n rounded up to a quarter
  of its octave (4 lengths per power of two, so at most 25% padding and few compiled shapes)."""
  if n <= least:
    return least
  step = 1 << max((n - 1).bit_length() - 3, 0)
  return -(-n // step) * step


def rollout_passed(rollout: Any, coupling: str) -> np.ndarray:
  """A rollout's b_ij [M] under ``coupling`` (``compoworld.tasks.rubric.COUPLINGS``): its criteria's own
  check results (``raw_passed``) or their gated credit (``passed``). A rollout without raw
  results (one made by hand) has only the one form."""
  check_coupling(coupling)
  raw = getattr(rollout, "raw_passed", None)
  if coupling == "gated" or raw is None:
    return np.asarray(rollout.passed, bool)
  return np.asarray(raw, bool)


def assemble_batch(
  rollouts: Sequence[Any],
  num_groups: int,
  num_rollouts: int,
  *,
  min_length: int = 128,
  coupling: str = "independent",
  min_loss_tokens: int = 32,
) -> dict[str, np.ndarray]:
  """The padded training arrays of G * N rollouts (``rl.grpo.rollout.Rollout`` fields).

  Returns the ``ROW_KEYS`` arrays [B, L] (B = G * N, row g * N + i; L = ``bucket_length``),
  ``loss_index`` [B, K] (each row's loss-token positions, then 0s), ``passed`` [G, N, M] (b_ij
  under ``coupling``: ``rollout_passed``) and ``criteria_mask`` [G, M]. Padding has segment id 0,
  loss mask 0 and log-probability 0. ``min_length`` and ``min_loss_tokens`` are floors on L and
  K: a step whose shapes are new compiles the update again, so floors at the largest L and K a
  run meets keep it to one compilation.
  """
  check_coupling(coupling)
  b = num_groups * num_rollouts
  if len(rollouts) != b:
    raise ValueError(f"{len(rollouts)} rollouts for {num_groups} groups of {num_rollouts}")
  for row, r in enumerate(rollouts):
    if (r.group, r.index) != divmod(row, num_rollouts):
      raise ValueError(
        f"rollout {row} is (group {r.group}, index {r.index}); expected {divmod(row, num_rollouts)}"
        " (group-major order)"
      )
    if not len(r.tokens) == len(r.loss_mask) == len(r.logprobs):
      raise ValueError(f"rollout {row}: tokens, loss_mask and logprobs differ in length")
    if len(r.tokens) < 2:
      raise ValueError(f"rollout {row} has {len(r.tokens)} tokens; at least 2 are needed")
  length = bucket_length(max(len(r.tokens) - 1 for r in rollouts), min_length)
  out = {
    k: np.zeros((b, length), np.float32 if k == "old_logp" else np.int32)
    for k in ROW_KEYS
    if k != "loss_index"
  }
  for row, r in enumerate(rollouts):
    n = len(r.tokens) - 1
    out["tokens"][row, :n] = r.tokens[:-1]
    out["targets"][row, :n] = r.tokens[1:]
    out["positions"][row, :n] = np.arange(n)
    out["segment_ids"][row, :n] = 1
    out["loss_mask"][row, :n] = np.asarray(r.loss_mask[1:], bool)
    out["old_logp"][row, :n] = np.where(r.loss_mask[1:], r.logprobs[1:], 0.0)
  groups = [
    [rollout_passed(r, coupling) for r in rollouts[g * num_rollouts : (g + 1) * num_rollouts]]
    for g in range(num_groups)
  ]
  # Positions of each row's loss tokens, padded with 0 to a width K (a power of two: few shapes
  # with L) where the step runs the LM head (agent turns are a small share of the tokens).
  counts = out["loss_mask"].sum(-1)
  k = min(max(min_loss_tokens, 1 << max(int(counts.max()) - 1, 0).bit_length()), length)
  out["loss_index"] = np.zeros((b, k), np.int32)
  for row in range(b):
    out["loss_index"][row, : counts[row]] = np.flatnonzero(out["loss_mask"][row])
  out["passed"], out["criteria_mask"] = pad_passed(groups)
  return out


def reward_function(config: ml_collections.ConfigDict) -> Callable[[Any, Any], jax.Array]:
  """The configured reward, given only the parameters it takes (``lam`` for eq. 5)."""
  name = config.reward.name
  if name not in REWARDS:
    raise ValueError(f"unknown reward {name!r}; rewards: {', '.join(sorted(REWARDS))}")
  accepted = list(inspect.signature(REWARDS[name]).parameters)[2:]
  params = {k: v for k, v in config.reward.items() if k in accepted}
  return make_reward(name, **params)


def reward_coupling(config: ml_collections.ConfigDict) -> str:
  """``reward.coupling``: how rubric checks become the reward's b_ij (independent when unset)."""
  return check_coupling(config.reward.get("coupling", "independent"))


def groups_with_signal(rewards: Any, tol: float = 1e-6) -> float:
  """The share of groups (rows of ``rewards`` [G, N]) whose rewards are not all equal (range
  above ``tol``): the groups whose advantages, and so whose gradient, are not zero."""
  rewards = np.asarray(rewards, np.float64)
  if rewards.ndim != 2 or rewards.shape[0] == 0:
    raise ValueError(f"rewards must be [G, N] with G >= 1; got shape {rewards.shape}")
  return float(np.mean(np.ptp(rewards, axis=-1) > tol))


def rewards_and_advantages(
  batch: Mapping[str, np.ndarray], reward_fn, delta: float
) -> tuple[np.ndarray, np.ndarray]:
  """Rewards [G, N] of ``reward_fn(passed, criteria_mask)`` and their group advantages (eq. 6)."""
  rewards = reward_fn(batch["passed"], batch["criteria_mask"])
  return np.asarray(rewards), np.asarray(group_advantages(rewards, delta))


def groups_unlike_uniform(batch: Mapping[str, np.ndarray], advantages: Any, delta: float) -> float:
  """The share of groups whose advantages (eq. 6) differ from those the uniform reward gives the
  same rollouts: the groups where a reward's weighting of the criteria changes the update (0 for
  the uniform reward). Criteria that every rollout of a group passes, or none does, shift all
  rewards alike, so under eq. 5 a group differs only where two criteria vary with different
  group pass rates."""
  rewards = REWARDS["uniform"](batch["passed"], batch["criteria_mask"])
  uniform = np.asarray(group_advantages(rewards, delta))
  gap_g = np.abs(np.asarray(advantages, np.float64) - uniform).max(axis=-1)
  return float(np.mean(gap_g > 1e-3))


def zero_advantage_groups(advantages: np.ndarray, tol: float = 1e-6) -> np.ndarray:
  """bool [G]: the groups of ``advantages`` [G, N] whose every advantage is 0."""
  return np.all(np.abs(advantages) < tol, axis=-1)


def signal_rows(
  batch: Mapping[str, np.ndarray],
  advantages: np.ndarray,
  aggregation: str,
  *,
  multiple: int = 1,
  tol: float = 1e-6,
) -> tuple[np.ndarray, np.ndarray] | None:
  """The rows an update needs, and their advantages, when some groups have every advantage 0.

  Such a group's rows add nothing to the policy-gradient term, so the update can run on the
  groups with a spread alone: those, then as few zero-advantage ones as fill a power of two of
  groups (few batch shapes, each compiled once). The advantages are scaled so that the loss,
  and its gradient, equal the whole batch's: by the share of the loss's denominator the kept
  rows hold (rows with loss tokens for the ``seq-mean-*`` aggregations, loss tokens for
  ``token-mean``). Returns (row indices, advantages [rows]), or None when every group is kept or
  the kept rows would not split into ``multiple`` equal parts (the batch's shards times its
  minibatches)."""
  flat = zero_advantage_groups(advantages, tol)
  g, n = advantages.shape
  signal = [i for i in range(g) if not flat[i]]
  if not signal:
    return None
  size = 1 << (len(signal) - 1).bit_length()
  if size >= g or (size * n) % multiple:
    return None
  groups = sorted(signal + [i for i in range(g) if flat[i]][: size - len(signal)])
  rows = np.asarray([i * n + j for i in groups for j in range(n)])
  tokens_b = np.asarray(batch["loss_mask"]).sum(-1)
  if aggregation == "token-mean":
    share = tokens_b[rows].sum() / max(tokens_b.sum(), 1)
  else:
    share = (tokens_b[rows] > 0).sum() / max((tokens_b > 0).sum(), 1)
  return rows, (advantages.reshape(-1)[rows] * share).astype(np.float32)


def keep_groups(rewards: Any, keep: int, tol: float = 1e-6) -> list[int]:
  """Which `keep` of the sampled groups (rows of ``rewards`` [G', N]) train: those whose rewards
  differ first (DAPO's dynamic sampling: a group of equal rewards has zero advantages), then the
  others, each in sampled order; returned in sampled order."""
  spread = np.ptp(np.asarray(rewards, np.float64), axis=-1) > tol
  order = np.argsort(~spread, kind="stable")  # spread first, each part in sampled order
  return sorted(order[:keep].tolist())


def regroup(rollouts: Sequence[Any], groups: Sequence[int], num_rollouts: int) -> list[Any]:
  """The rollouts of `groups` (indices into group-major `rollouts`), renumbered 0, 1, ..."""
  out = []
  for new, g in enumerate(groups):
    for r in rollouts[g * num_rollouts : (g + 1) * num_rollouts]:
      r = copy.copy(r)  # the same arrays; only the group index changes
      r.group = new
      out.append(r)
  return out


def step_task_indices(num_tasks: int, step: int, per_step: int, seed: int) -> list[int]:
  """Indices of step `step`'s tasks: a fresh seeded permutation of the task set per pass over it,
  read `per_step` at a time, so the order is a function of (seed, step) alone."""
  out = []
  for k in range(step * per_step, (step + 1) * per_step):
    epoch, pos = divmod(k, num_tasks)
    out.append(int(np.random.default_rng([seed, epoch]).permutation(num_tasks)[pos]))
  return out


def rollout_seed(seed: int, step: int) -> int:
  return int(np.random.SeedSequence([seed, step]).generate_state(1)[0])


def rollout_metrics(rollouts: Sequence[Any], batch: Mapping[str, np.ndarray]) -> dict[str, float]:
  """Outcome statistics of one step's rollouts (``passed`` and ``criteria_mask`` from the batch)."""
  passed, mask = batch["passed"], batch["criteria_mask"]
  full = np.all(np.where(mask[:, None, :], passed, True), axis=-1) & mask.any(-1)[:, None]
  group_rate_gm = passed.mean(axis=1)  # p_j per group
  per_group = (group_rate_gm * mask).sum(-1) / np.maximum(mask.sum(-1), 1)
  calls = sum(r.tool_calls for r in rollouts)
  return {
    "pass_rate": float(full.mean()),
    "criterion_pass_rate": float(per_group[mask.any(-1)].mean()) if mask.any() else 0.0,
    "rubric_score": float(np.mean([np.mean(r.passed) if len(r.passed) else 0.0 for r in rollouts])),
    "response_length": float(np.mean([r.generated_tokens for r in rollouts])),
    "turns": float(np.mean([r.turns for r in rollouts])),
    "finished_rate": float(np.mean([r.finished for r in rollouts])),
    "tool_calls": float(calls / len(rollouts)),
    "tool_error_rate": float(sum(r.tool_errors for r in rollouts) / calls) if calls else 0.0,
    "env_seconds": float(sum(r.env_seconds for r in rollouts)),
  }
