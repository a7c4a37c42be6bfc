"""The language-model training loss: next-token cross-entropy plus the MoE balancing term."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from models.model import Transformer


def lm_loss(
  model: Transformer,
  tokens_bt: jax.Array,
  *,
  segment_ids_bt: jax.Array | None = None,
  positions_bt: jax.Array | None = None,
  loss_mask_bt: jax.Array | None = None,
) -> tuple[jax.Array, dict[str, jax.Array]]:
  """Mean cross-entropy of each next token that is in the same segment and unmasked, plus
  `router_aux_loss_coef` times the load-balancing loss. Returns (loss, metrics)."""
  out = model.forward(tokens_bt, segment_ids_bt=segment_ids_bt, positions_bt=positions_bt)
  logp_btv = jax.nn.log_softmax(out.logits[:, :-1], axis=-1)
  nll_bt = -jnp.take_along_axis(logp_btv, tokens_bt[:, 1:, None], axis=-1)[..., 0]
  weight_bt = jnp.ones_like(nll_bt)
  if segment_ids_bt is not None:  # no target across a packing boundary
    weight_bt *= segment_ids_bt[:, 1:] == segment_ids_bt[:, :-1]
  if loss_mask_bt is not None:
    weight_bt *= loss_mask_bt[:, 1:]
  ce = jnp.sum(nll_bt * weight_bt) / jnp.maximum(jnp.sum(weight_bt), 1.0)
  loss = ce + model.config.router_aux_loss_coef * out.aux_loss
  return loss, {"ce": ce, "aux_loss": out.aux_loss, "expert_load": out.expert_load}
