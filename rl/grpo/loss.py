"""The GRPO policy loss (paper eq. 7, 8) on plain arrays, for any model.

Per agent token t of trajectory i, with the ratio against the sampling policy

  r_it = pi_theta(y_it | c_it) / pi_old(y_it | c_it)                                   (eq. 7)

the objective is min(r_it A_i, clip(r_it, 1 - eps_low, 1 + eps_high) A_i) - beta KL_it
(eq. 8, with DAPO's asymmetric clip) plus an optional entropy bonus. Every agent token of a
trajectory carries the trajectory's advantage A_i; tool observations and padding (mask 0) are
context only. The loss is the negated objective, aggregated over agent tokens by
``GRPOLossConfig.aggregation``:

- ``seq-mean-token-mean`` (eq. 8): 1/|y_i| sum_t per trajectory, then the mean over trajectories;
- ``token-mean``: the mean over every agent token of the batch (long answers weigh more);
- ``seq-mean-token-sum``: sum_t per trajectory, then the mean over trajectories.

The means over trajectories skip rows without agent tokens, so batch padding changes nothing.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp

AGGREGATIONS = ("seq-mean-token-mean", "token-mean", "seq-mean-token-sum")


@dataclasses.dataclass(frozen=True)
class GRPOLossConfig:
  eps_low: float = 0.20  # ratios below 1 - eps_low stop pulling a negative-advantage token down
  eps_high: float = 0.28  # ratios above 1 + eps_high stop pushing a positive-advantage token up
  aggregation: str = "seq-mean-token-mean"  # one of AGGREGATIONS; eq. 8 is the default
  kl_coef: float = 0.0  # beta of eq. 8 (k3 estimator); 0 means no reference policy is needed
  entropy_coef: float = 0.0  # weight of the mean token entropy added to the objective

  def __post_init__(self):
    if not 0 < self.eps_low < 1:
      raise ValueError(f"eps_low must lie in (0, 1); got {self.eps_low}")
    if self.eps_high <= 0:
      raise ValueError(f"eps_high must be > 0; got {self.eps_high}")
    if self.aggregation not in AGGREGATIONS:
      raise ValueError(f"aggregation {self.aggregation!r} is not one of {AGGREGATIONS}")
    if self.kl_coef < 0 or self.entropy_coef < 0:
      raise ValueError(
        f"coefficients must be >= 0; got kl {self.kl_coef}, entropy {self.entropy_coef}"
      )


def _aggregate(x_bt: jax.Array, mask_bt: jax.Array, aggregation: str) -> jax.Array:
  """Reduces a per-token quantity over agent tokens to a scalar (see the module docstring)."""
  x_bt = jnp.where(mask_bt, x_bt, 0.0)
  n_b = mask_bt.sum(axis=-1)  # |y_i|, agent tokens per trajectory
  if aggregation == "token-mean":
    return x_bt.sum() / jnp.maximum(n_b.sum(), 1)
  per_seq_b = x_bt.sum(axis=-1)
  if aggregation == "seq-mean-token-mean":
    per_seq_b = per_seq_b / jnp.maximum(n_b, 1)
  return per_seq_b.sum() / jnp.maximum((n_b > 0).sum(), 1)


@functools.partial(jax.jit, static_argnames="config")  # one program, not one dispatch per op
def grpo_loss(
  logp_bt: jax.Array,
  old_logp_bt: jax.Array,
  advantages_b: jax.Array,
  mask_bt: jax.Array,
  config: GRPOLossConfig = GRPOLossConfig(),
  ref_logp_bt: jax.Array | None = None,
  entropy_bt: jax.Array | None = None,
) -> tuple[jax.Array, dict[str, jax.Array]]:
  """The loss to minimize and its metrics.

  Args:
    logp_bt: log pi_theta of each sampled token under the policy being trained. [B, T]
    old_logp_bt: log pi_old of the same tokens, recorded at sampling time. [B, T]
    advantages_b: one advantage per trajectory (eq. 6). [B]
    mask_bt: 1 on agent tokens, 0 on prompt, tool observations and padding. [B, T]
    config: clipping, aggregation and coefficients.
    ref_logp_bt: log pi_ref of the same tokens; needed when config.kl_coef > 0. [B, T]
    entropy_bt: entropy of pi_theta(. | c_t); needed when config.entropy_coef > 0. [B, T]

  Returns:
    (loss, metrics): clip fractions (of agent tokens whose gradient the clip removed), the ratio's
    min / max / mean over agent tokens, the policy term alone, and ``kl`` / ``entropy`` (token
    means) when their inputs are given.
  """
  shape = logp_bt.shape
  same_shape = {"old_logp_bt": old_logp_bt, "mask_bt": mask_bt, "ref_logp_bt": ref_logp_bt}
  for name, x in {**same_shape, "entropy_bt": entropy_bt}.items():
    if x is not None and x.shape != shape:
      raise ValueError(f"{name} has shape {x.shape}; logp_bt has {shape}")
  if len(shape) != 2 or advantages_b.shape != shape[:1]:
    raise ValueError(f"need logp_bt [B, T] and advantages_b [B]; got {shape}, {advantages_b.shape}")
  if config.kl_coef > 0 and ref_logp_bt is None:
    raise ValueError("kl_coef > 0 needs ref_logp_bt")
  if config.entropy_coef > 0 and entropy_bt is None:
    raise ValueError("entropy_coef > 0 needs entropy_bt (or use grpo_loss_from_logits)")

  mask_bt = mask_bt.astype(bool)
  logp_bt = logp_bt.astype(jnp.float32)
  # Zero the log-ratio off the mask *before* exp: padding may hold any value, and an inf in the
  # unselected branch of a later `where` would still turn the gradient into NaN.
  log_ratio_bt = jnp.where(mask_bt, logp_bt - old_logp_bt.astype(jnp.float32), 0.0)
  ratio_bt = jnp.exp(log_ratio_bt)  # eq. 7
  adv_bt = jnp.broadcast_to(advantages_b.astype(jnp.float32)[:, None], shape)  # A_it = A_i

  # eq. 8: min(r A, clip(r) A). The min picks the clipped (constant) term exactly when the ratio has
  # left the trust region on the side the advantage pushes it; written with `where` so the gradient
  # at the boundaries is defined (the boundary itself still gets the gradient).
  clip_high_bt = mask_bt & (adv_bt > 0) & (ratio_bt > 1 + config.eps_high)
  clip_low_bt = mask_bt & (adv_bt < 0) & (ratio_bt < 1 - config.eps_low)
  clipped_ratio_bt = jnp.clip(ratio_bt, 1 - config.eps_low, 1 + config.eps_high)
  ratio_term_bt = jnp.where(
    clip_high_bt | clip_low_bt, jax.lax.stop_gradient(clipped_ratio_bt), ratio_bt
  )
  objective_bt = ratio_term_bt * adv_bt
  pg_loss = -_aggregate(objective_bt, mask_bt, config.aggregation)
  loss = pg_loss

  n_tokens = jnp.maximum(mask_bt.sum(), 1)
  metrics = {
    "pg_loss": pg_loss,
    "clip_frac_low": clip_low_bt.sum() / n_tokens,
    "clip_frac_high": clip_high_bt.sum() / n_tokens,
    "ratio_min": jnp.where(mask_bt.any(), jnp.min(jnp.where(mask_bt, ratio_bt, jnp.inf)), 1.0),
    "ratio_max": jnp.where(mask_bt.any(), jnp.max(jnp.where(mask_bt, ratio_bt, -jnp.inf)), 1.0),
    "ratio_mean": jnp.where(mask_bt, ratio_bt, 0.0).sum() / n_tokens,
  }
  if ref_logp_bt is not None:
    # k3 estimator of KL(pi_theta || pi_ref): e^d - d - 1 with d = log pi_ref - log pi_theta;
    # unbiased, always >= 0, and smooth in theta.
    d_bt = jnp.where(mask_bt, ref_logp_bt.astype(jnp.float32) - logp_bt, 0.0)
    kl_bt = jnp.exp(d_bt) - d_bt - 1.0
    loss = loss + config.kl_coef * _aggregate(kl_bt, mask_bt, config.aggregation)
    metrics["kl"] = jnp.where(mask_bt, kl_bt, 0.0).sum() / n_tokens
  if entropy_bt is not None:
    entropy_bt = entropy_bt.astype(jnp.float32)
    loss = loss - config.entropy_coef * _aggregate(entropy_bt, mask_bt, config.aggregation)
    metrics["entropy"] = jnp.where(mask_bt, entropy_bt, 0.0).sum() / n_tokens
  metrics["loss"] = loss
  return loss, jax.lax.stop_gradient(metrics)


@jax.jit
def token_logp_and_entropy(
  logits_btv: jax.Array, targets_bt: jax.Array
) -> tuple[jax.Array, jax.Array]:
  """log pi(targets) and the entropy of pi, both [B, T], from logits [B, T, V] (in float32).

  ``logits_btv[:, t]`` must be the distribution over ``targets_bt[:, t]`` (the caller shifts).
  """
  logp_btv = jax.nn.log_softmax(logits_btv.astype(jnp.float32), axis=-1)
  logp_bt = jnp.take_along_axis(logp_btv, targets_bt[..., None], axis=-1)[..., 0]
  entropy_bt = -jnp.sum(jnp.exp(logp_btv) * logp_btv, axis=-1)
  return logp_bt, entropy_bt


@functools.partial(jax.jit, static_argnames="config")
def grpo_loss_from_logits(
  logits_btv: jax.Array,
  targets_bt: jax.Array,
  old_logp_bt: jax.Array,
  advantages_b: jax.Array,
  mask_bt: jax.Array,
  config: GRPOLossConfig = GRPOLossConfig(),
  ref_logp_bt: jax.Array | None = None,
) -> tuple[jax.Array, dict[str, jax.Array]]:
  """``grpo_loss`` on the model's logits [B, T, V]; the entropy comes from the logits."""
  logp_bt, entropy_bt = token_logp_and_entropy(logits_btv, targets_bt)
  return grpo_loss(logp_bt, old_logp_bt, advantages_b, mask_bt, config, ref_logp_bt, entropy_bt)
