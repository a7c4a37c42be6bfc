"""Parameter and FLOP accounting read off the built model, not typed in as formulas.

Parameters come from the abstract model's variables (their logical axes say which are experts).
FLOPs come from the forward pass's jaxpr: every matmul-class primitive (dot_general, ragged_dot,
triangular_solve) is counted from its operand shapes, scans multiply their body by their length.
Elementwise work is not counted, as in the usual "model FLOPs" convention.
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx
from jax.extend import core as jax_core

from models.config import ModelConfig
from models.model import abstract_model


def count_flops(fn, *args: Any) -> float:
  """Matmul FLOPs of `fn(*args)`; args may be `jax.ShapeDtypeStruct`s."""
  return _jaxpr_flops(jax.make_jaxpr(fn)(*args).jaxpr)


def _jaxpr_flops(jaxpr) -> float:
  return sum(_eqn_flops(eqn) for eqn in jaxpr.eqns)


def _eqn_flops(eqn) -> float:
  name = eqn.primitive.name
  shapes = [v.aval.shape for v in eqn.invars]
  if name == "dot_general":
    (lhs_contract, _), _ = eqn.params["dimension_numbers"]
    contracted = math.prod(shapes[0][d] for d in lhs_contract)
    return 2.0 * math.prod(eqn.outvars[0].aval.shape) * contracted
  if name in ("ragged_dot", "ragged_dot_general"):
    # Each of the m rows meets one group's [k, n] block: 2 m k n, whatever the group count.
    (m, k), n = shapes[0], shapes[1][-1]
    return 2.0 * m * k * n
  if name == "triangular_solve":
    a, b = shapes[0], shapes[1]
    return float(math.prod(b[:-2]) * a[-1] * a[-1] * (b[-1] if eqn.params["left_side"] else b[-2]))
  if name == "cond":
    return max(_jaxpr_flops(branch.jaxpr) for branch in eqn.params["branches"])
  if name == "while":
    raise ValueError("a while loop has no static trip count; use lax.scan or a static fori_loop")
  scale = eqn.params["length"] if name == "scan" else 1
  return scale * sum(_jaxpr_flops(sub) for sub in _sub_jaxprs(eqn.params))


def _sub_jaxprs(params: dict[str, Any]):
  for value in params.values():
    for item in value if isinstance(value, tuple | list) else (value,):
      if isinstance(item, jax_core.ClosedJaxpr):
        yield item.jaxpr
      elif isinstance(item, jax_core.Jaxpr):
        yield item


def param_counts(model) -> dict[str, int]:
  """total, and active per token: routed experts count k/E of their size, and the embedding
  table counts nothing (a lookup reads one row) unless it doubles as the LM head."""
  config: ModelConfig = model.config
  total, expert, embed = 0, 0, 0
  for path, variable in nnx.to_flat_state(nnx.state(model, nnx.Param)):
    size = math.prod(variable.shape)
    total += size
    names = variable.get_metadata().get("out_sharding") or ()
    if "expert" in names:
      expert += size
    if path == ("embed_vd",) and not config.tie_embeddings:
      embed += size
  routed = expert * config.num_experts_per_tok // config.num_experts
  return {"total_params": total, "active_params": total - expert + routed - embed}


def model_summary(config: ModelConfig, seq_len: int = 4096) -> dict[str, Any]:
  """Sizes and per-token FLOPs of `config`, from the abstract model; nothing is allocated.

  `forward_flops_per_token` is one forward over a `seq_len` sequence divided by `seq_len` (the
  attention and chunked-DeltaNet terms grow with it); `flops_per_token` is training (forward +
  backward = 3 x forward). FLOPs are counted with the grouped-matmul MoE, whose work is the
  routed rows only.
  """
  model = abstract_model(config.replace(moe_backend="ragged_dot"))
  graphdef, state = nnx.split(model)
  tokens = jax.ShapeDtypeStruct((1, seq_len), jnp.int32)
  forward = count_flops(lambda s, t: nnx.merge(graphdef, s)(t), state, tokens) / seq_len
  return {
    **param_counts(model),
    "forward_flops_per_token": forward,
    "flops_per_token": 3.0 * forward,
    "seq_len": seq_len,
  }
