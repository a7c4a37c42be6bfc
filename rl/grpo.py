"""GRPO (paper section 4.3): rollouts → rubric rewards → group advantages → clipped policy updates.

``train(config, workdir)`` runs the paper's second stage. Each step takes G tasks (a seeded order
that cycles the task set), has the rollout engine play N trajectories of each in forked copies of
its s0, scores them with the configured reward (eq. 5 by default), turns the rewards into group
advantages (eq. 6) and takes ``optim.num_minibatches`` optimizer steps with the eq. 8 loss on the
padded ``[G * N, T]`` batch. The update is one jitted, sharded program ``state, batch -> state,
metrics`` with the state donated, on the same mesh, optimizer-state sharding and checkpoint layout
as SFT (``rl.sft``). Rollouts depend only on (seed, step) and the parameters, so a killed run that
resumes from its latest Orbax checkpoint takes the very steps an uninterrupted run would have.

Batch layout (``assemble_batch``): row ``g * N + i`` is rollout i of task g. A rollout's ids
``x_0 .. x_{T-1}`` become inputs ``x_0 .. x_{T-2}`` and targets ``x_1 .. x_{T-1}`` (the logits at
t - 1 predict token t), right-padded to a bucketed length so few shapes ever compile; the loss
mask and the sampling log-probabilities are shifted with the targets. ``loss_index`` lists each
row's loss-token positions: the LM head and the softmax run only there (agent turns are a small
share of a conversation), optionally in chunks (``optim.head_chunk``) for a large vocabulary.
"""

from __future__ import annotations

import copy
import functools
import inspect
import json
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
import orbax.checkpoint as ocp
from flax import nnx
from jax.sharding import NamedSharding, PartitionSpec
from tqdm import tqdm

import models
from compoworld.rubric import check_coupling
from models import sharding
from rl import distributed, sft
from rl.chat import ChatRenderer
from rl.grpo_loss import GRPOLossConfig, grpo_loss, token_logp_and_entropy
from rl.policy import POLICY_DIR, load_policy_parts, savable, save_policy
from rl.rewards import REWARDS, group_advantages, make_reward, pad_passed

#: The per-row arrays of a training batch: all [B, L], but ``loss_index`` [B, K].
ROW_KEYS = ("tokens", "targets", "positions", "segment_ids", "loss_mask", "old_logp", "loss_index")
SFT_DIR = "sft"
TASKS_FILE = "tasks.jsonl"

EngineFactory = Callable[[models.Transformer, ChatRenderer, Any], Any]


# --------------------------------------------------------------------------------------------------
# Batch assembly


def bucket_length(n: int, least: int) -> int:
  """The padded length of a batch whose longest row is n: `least`, or n rounded up to a quarter
  of its octave (4 lengths per power of two, so at most 25% padding and few compiled shapes)."""
  if n <= least:
    return least
  step = 1 << max((n - 1).bit_length() - 3, 0)
  return -(-n // step) * step


def rollout_passed(rollout: Any, coupling: str) -> np.ndarray:
  """A rollout's b_ij [M] under ``coupling`` (``compoworld.rubric.COUPLINGS``): its criteria's own
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
) -> dict[str, np.ndarray]:
  """The padded training arrays of G * N rollouts (``rl.rollout.Rollout`` fields).

  Returns the ``ROW_KEYS`` arrays [B, L] (B = G * N, row g * N + i; L = ``bucket_length``),
  ``loss_index`` [B, K] (each row's loss-token positions, then 0s), ``passed`` [G, N, M] (b_ij
  under ``coupling``: ``rollout_passed``) and ``criteria_mask`` [G, M]. Padding has segment id 0,
  loss mask 0 and log-probability 0.
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
  k = min(max(32, 1 << max(int(counts.max()) - 1, 0).bit_length()), length)
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


# --------------------------------------------------------------------------------------------------
# The update step


def head_logp(
  h_bkd: jax.Array, head_dv: jax.Array, targets_bk: jax.Array, temperature: float, chunk: int = 0
) -> tuple[jax.Array, jax.Array]:
  """log softmax(h @ head / temperature)[targets] and the entropy, both [B, K].

  ``chunk`` > 0 sends `chunk` positions of every row through the head at a time, each piece
  rematerialized in the backward pass: memory holds one [B, chunk, V] piece, not [B, K, V]
  (needed at a real vocabulary), for one more head matmul.
  """

  def piece(h_bcd, targets_bc):
    logits_bcv = jnp.einsum("bcd,dv->bcv", h_bcd, head_dv, preferred_element_type=jnp.float32)
    logits_bcv = sharding.constrain(logits_bcv, ("act_batch", "act_seq", "act_vocab"))
    return token_logp_and_entropy(logits_bcv / temperature, targets_bc)

  b, k = targets_bk.shape
  if not chunk or chunk >= k:
    return piece(h_bkd, targets_bk)
  n = -(-k // chunk)
  pad = n * chunk - k
  h = jnp.pad(h_bkd, ((0, 0), (0, pad), (0, 0))).reshape(b, n, chunk, -1).swapaxes(0, 1)
  t = jnp.pad(targets_bk, ((0, 0), (0, pad))).reshape(b, n, chunk).swapaxes(0, 1)
  logp_nbc, entropy_nbc = jax.lax.map(jax.checkpoint(lambda x: piece(*x)), (h, t))

  def unchunk(x_nbc):
    return x_nbc.swapaxes(0, 1).reshape(b, n * chunk)[:, :k]

  return unchunk(logp_nbc), unchunk(entropy_nbc)


def policy_logp(
  model: models.Transformer,
  batch: Mapping[str, jax.Array],
  temperature: float,
  index_bk: jax.Array | None = None,
  head_chunk: int = 0,
) -> tuple[jax.Array, jax.Array, jax.Array]:
  """log pi(targets) and the entropy of the tempered policy at positions `index_bk` of each row
  ([B, K]; all L positions when None), and the MoE aux loss.

  As the rollout engine records them: ``log_softmax(logits / temperature)`` over the model's
  whole vocabulary, before any top-p filtering. Only the gathered positions go through the LM
  head (``head_logp``), so prompt and tool tokens never cost [V]-wide logits (under jit the
  model's own full logits are unused and never computed).
  """
  out = model.forward(
    batch["tokens"], positions_bt=batch["positions"], segment_ids_bt=batch["segment_ids"]
  )
  h_bkd, targets_bk = out.hidden, batch["targets"]
  if index_bk is not None:
    h_bkd = jnp.take_along_axis(h_bkd, index_bk[..., None], axis=1)
    targets_bk = jnp.take_along_axis(targets_bk, index_bk, axis=1)
  if out.pointer is not None:  # the copy head's mixture: [B, K, V] at the gathered positions
    if index_bk is None:
      index_bk = jnp.broadcast_to(jnp.arange(targets_bk.shape[1]), targets_bk.shape)
    logits_bkv = model.logits_at(out, index_bk)
    logp_bk, entropy_bk = token_logp_and_entropy(logits_bkv / temperature, targets_bk)
    return logp_bk, entropy_bk, out.aux_loss
  logp_bk, entropy_bk = head_logp(h_bkd, model.head_weight(), targets_bk, temperature, head_chunk)
  return logp_bk, entropy_bk, out.aux_loss


def gather_loss_tokens(batch: Mapping[str, jax.Array]) -> dict[str, jax.Array]:
  """``old_logp`` and ``loss_mask`` at the ``loss_index`` positions [B, K]; the padding of the
  index (past each row's count of loss tokens) is masked out."""
  index_bk = batch["loss_index"]
  count_b = jnp.sum(batch["loss_mask"], axis=-1)
  return {
    "old_logp": jnp.take_along_axis(batch["old_logp"], index_bk, axis=1),
    "loss_mask": jnp.arange(index_bk.shape[1])[None, :] < count_b[:, None],
  }


def make_optimizer(config: ml_collections.ConfigDict) -> optax.GradientTransformation:
  """Adam (the paper's) at a constant rate, after optional global-norm clipping."""
  o = config.optim
  adam = optax.adamw(o.lr, b1=o.b1, b2=o.b2, eps=o.eps, weight_decay=o.weight_decay)
  return optax.chain(optax.clip_by_global_norm(o.clip_norm), adam) if o.clip_norm > 0 else adam


def make_grpo_step(
  graphdef,
  tx,
  loss_config: GRPOLossConfig,
  *,
  temperature: float,
  num_minibatches: int = 1,
  aux_loss_coef: float = 0.0,
  head_chunk: int = 0,
):
  """``step(state, batch) -> (state, metrics)``; state = {step, params, rest, opt_state} plus
  ``ref_params`` (frozen) when ``loss_config.kl_coef > 0``.

  The batch (``ROW_KEYS`` and ``advantages`` [B]) is cut into ``num_minibatches``
  minibatches of rows i, i + n, i + 2n, ... (each keeps its spread over the batch shards), and each
  takes one optimizer step with the eq. 8 loss of its own rows: the first sees ratio 1, later ones
  the policy moved by the earlier ones. Metrics are means over minibatches (ratio_min / ratio_max:
  the extremes), with ``first_loss``, the loss of the first minibatch before any update.
  ``head_chunk``: see ``head_logp``.
  """
  use_ref = loss_config.kl_coef > 0

  def logp(params, rest, mb):
    model = nnx.merge(graphdef, params, rest)
    return policy_logp(model, mb, temperature, mb["loss_index"], head_chunk)

  def loss_fn(params, rest, mb, ref_logp_bk):
    logp_bk, entropy_bk, aux = logp(params, rest, mb)
    if not loss_config.entropy_coef:  # a metric only: no backward pass through [B, K, V]
      entropy_bk = jax.lax.stop_gradient(entropy_bk)
    loss_tokens = gather_loss_tokens(mb)
    loss, metrics = grpo_loss(
      logp_bk, loss_tokens["old_logp"], mb["advantages"], loss_tokens["loss_mask"], loss_config,
      ref_logp_bk, entropy_bk,
    )  # fmt: skip
    return loss + aux_loss_coef * aux, {**metrics, "aux_loss": aux}

  grad_fn = jax.grad(loss_fn, has_aux=True)

  def step(state, batch):
    def split(x):  # [B, ...] -> [n, B / n, ...]
      return x.reshape(x.shape[0] // num_minibatches, num_minibatches, *x.shape[1:]).swapaxes(0, 1)

    minibatches = {k: split(batch[k]) for k in (*ROW_KEYS, "advantages")}

    # Everything the body reads goes through the carry: NNX refuses variables captured from the
    # enclosing trace.
    def update(carry, mb):
      params, opt_state, rest, ref_params = carry
      ref_logp_bk = None
      if use_ref:
        ref_logp_bk = jax.lax.stop_gradient(logp(ref_params, rest, mb)[0])
      grads, metrics = grad_fn(params, rest, mb, ref_logp_bk)
      updates, opt_state = tx.update(grads, opt_state, params)
      metrics["grad_norm"] = optax.tree.norm(grads)
      return (optax.apply_updates(params, updates), opt_state, rest, ref_params), metrics

    carry = (state["params"], state["opt_state"], state["rest"], state.get("ref_params"))
    (params, opt_state, _, _), per_mb = jax.lax.scan(update, carry, minibatches)
    new_state = {**state, "step": state["step"] + 1, "params": params, "opt_state": opt_state}
    metrics = {k: jnp.mean(v) for k, v in per_mb.items()}
    metrics["ratio_min"] = jnp.min(per_mb["ratio_min"])
    metrics["ratio_max"] = jnp.max(per_mb["ratio_max"])
    metrics["first_loss"] = per_mb["loss"][0]
    return new_state, metrics

  return step


def init_state(model: models.Transformer, tx, mesh, *, keep_reference: bool):
  """``rl.sft.init_state``'s graph definition and state, plus a frozen copy of the parameters
  (``ref_params``, its own buffers: the state is donated) when a KL term needs the reference."""
  graphdef, state = sft.init_state(model, tx, mesh)
  if keep_reference:
    state["ref_params"] = jax.tree.map(jnp.copy, state["params"])
  return graphdef, state


def shard_batch(batch: Mapping[str, np.ndarray], advantages_b: np.ndarray, mesh) -> dict:
  """The update's inputs (the whole batch, the same on every process) as global arrays, rows
  split over the batch axes of `mesh`; each process passes on the rows its devices hold."""
  rows = NamedSharding(mesh, PartitionSpec(sft.BATCH_AXES, None))
  whole = {k: np.asarray(batch[k]) for k in ROW_KEYS}
  whole["advantages"] = np.asarray(advantages_b, np.float32)
  return distributed.global_batch(distributed.own_rows(whole, rows), rows, len(whole["advantages"]))


# --------------------------------------------------------------------------------------------------
# Rollout statistics


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


# --------------------------------------------------------------------------------------------------
# Tasks and the initial policy


def _hold_out(tasks: list, n_eval: int, seed: int) -> tuple[list, list]:
  if n_eval >= len(tasks):
    raise ValueError(f"holding out {n_eval} of {len(tasks)} tasks leaves none to train on")
  order = np.random.default_rng(seed).permutation(len(tasks))
  held = set(order[:n_eval].tolist())
  return [t for i, t in enumerate(tasks) if i not in held], [t for i, t in enumerate(tasks) if i in held]  # fmt: skip


def load_task_sets(config: ml_collections.ConfigDict, sft_dir: Path | None) -> tuple[list, list]:
  """Training and held-out tasks: ``data.tasks`` (and ``data.eval_tasks``, else
  ``data.num_eval_tasks`` held out by seed), or the task set an SFT run generated, split as that
  run split its trajectories (its held-out trajectories' tasks are the held-out tasks)."""
  from compoworld.tasks import load_tasks

  d = config.data
  if d.tasks:
    tasks = load_tasks(d.tasks)
    if d.eval_tasks:
      return tasks, load_tasks(d.eval_tasks)
    return _hold_out(tasks, d.num_eval_tasks, d.seed)
  path = sft_dir / sft.DATA_DIR / TASKS_FILE if sft_dir else None
  if path is None or not path.is_file():
    raise ValueError(
      f"no task set: set data.tasks (a tasks.jsonl), or start from an SFT run that generated its "
      f"tasks ({path} does not exist)"
    )
  tasks = load_tasks(path)
  sft_config = ml_collections.ConfigDict(json.loads((sft_dir / sft.CONFIG_FILE).read_text()))
  _, sft_eval = sft.load_sft_set(sft_config, sft_dir)
  held = {r["task_id"] for r in sft_eval}
  train_tasks = [t for t in tasks if t.id not in held]
  eval_tasks = [t for t in tasks if t.id in held]
  if d.eval_tasks:
    eval_tasks = load_tasks(d.eval_tasks)
  if not train_tasks:
    raise ValueError(f"{path}: every task is held out")
  return train_tasks, eval_tasks


def _initial_policy(config: ml_collections.ConfigDict, workdir: Path) -> tuple[Path, Path | None]:
  """The policy directory to start from and the SFT workdir it came from (if one): ``init``, or
  the SFT run of ``sft_config`` trained here first (``WORKDIR/sft``)."""
  if config.init:
    init = Path(config.init)
    return init, init if (init / POLICY_DIR).is_dir() else None  # an SFT workdir, or a policy
  if not config.sft_config:
    raise ValueError("set init (an SFT workdir or policy directory) or sft_config (e.g. 'tiny')")
  from configs.sft import get_config as sft_get_config

  sft_dir = workdir / SFT_DIR
  if not (sft_dir / POLICY_DIR).is_dir():
    print(f"no --init: training the {config.sft_config!r} SFT policy in {sft_dir} first")
    summary = sft.train(sft_get_config(config.sft_config), sft_dir)
    (sft_dir / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
  return sft_dir, sft_dir


def _shard_model(model: models.Transformer, mesh) -> models.Transformer:
  """The (single-device) loaded model with every parameter placed in its shards on `mesh`."""
  graphdef, target = nnx.split(models.abstract_model(model.config, mesh))
  leaves, treedef = jax.tree.flatten(target)  # the variables' metadata differ: pair the leaves
  values = jax.tree.leaves(nnx.state(model))
  if len(values) != len(leaves):
    raise ValueError(f"the loaded model has {len(values)} arrays; its config makes {len(leaves)}")
  # (the abstract shardings name an abstract mesh: re-anchor their specs on the real one; every
  # process loaded the whole model and fills its own devices' shards)
  placed = []
  for x, t in zip(values, leaves, strict=True):
    value = np.asarray(x)
    placed.append(
      jax.make_array_from_callback(
        value.shape, NamedSharding(mesh, t.sharding.spec), lambda index, v=value: v[index]
      )
    )
  return nnx.merge(graphdef, jax.tree.unflatten(treedef, placed))


def _default_engine(model, renderer, rollout_config, **kwargs):
  from rl.rollout import RolloutEngine

  return RolloutEngine(model, renderer, rollout_config, **kwargs)


def rollout_config(config: ml_collections.ConfigDict, **changes):
  from rl.rollout import RolloutConfig

  return RolloutConfig(**{**config.rollout.to_dict(), **changes})


@functools.cache
def greedy_sampler(vocab_limit: int):
  """An ``rl.rollout`` sampler that takes the most likely id below `vocab_limit` (temperature 0)."""

  def sample(logits_bv, key_b, step, row_b, turn_b):
    del key_b, step, row_b, turn_b
    return jnp.argmax(logits_bv[:, :vocab_limit], axis=-1).astype(jnp.int32)

  return sample


def _eval_engine(config, engine_factory, model, renderer):
  """The held-out engine: ``eval.num_rollouts`` per task at ``eval.temperature``, greedy at 0."""
  e = config.eval
  if e.temperature > 0:
    return engine_factory(
      model,
      renderer,
      rollout_config(config, num_rollouts=e.num_rollouts, temperature=e.temperature),
    )
  sampler = greedy_sampler(renderer.tokenizer.vocab_size)
  # (the engine still records tempered log-probs; evaluation does not read them)
  cfg = rollout_config(config, num_rollouts=e.num_rollouts)
  return engine_factory(model, renderer, cfg, sampler=sampler)


# --------------------------------------------------------------------------------------------------
# The run


def _save(manager, step: int, state, log: dict[str, list]) -> None:
  manager.save(
    step,
    args=ocp.args.Composite(
      state=ocp.args.StandardSave(savable(state)), log=ocp.args.JsonSave(log)
    ),
  )


def _evaluate(engine, tasks, seed: int, state, mesh) -> dict[str, float]:
  """Pass rate (every criterion met) and mean rubric score of the eval engine on `tasks` (each
  process plays its share of them)."""
  mine, first = process_share(tasks)
  rollouts = run_engine(engine, mine, seed=seed, state=state, first_group=first, mesh=mesh)
  passed = [np.asarray(r.passed, bool) for r in rollouts]
  passed = [p for part in distributed.gather_objects(passed) for p in part]
  return {
    "eval_pass_rate": float(np.mean([p.size > 0 and p.all() for p in passed])),
    "eval_rubric_score": float(np.mean([p.mean() if p.size else 0.0 for p in passed])),
  }


def process_share(tasks: Sequence[Any]) -> tuple[list[Any], int]:
  """This process's tasks of a step's (or an evaluation's) and the index of its first: process
  p of P plays the p-th of P nearly equal, contiguous parts."""
  p, count = jax.process_index(), jax.process_count()
  bounds = np.linspace(0, len(tasks), count + 1).round().astype(int)
  return list(tasks[bounds[p] : bounds[p + 1]]), int(bounds[p])


def run_engine(engine, tasks, *, seed: int, state, first_group: int = 0, mesh=None) -> list[Any]:
  """``engine.run`` on this process's tasks; in a multi-process run on a process-local copy of
  `state` and on this process's devices (``first_group`` keeps each rollout's randomness that
  of the one-process run)."""
  if jax.process_count() == 1:
    return engine.run(tasks, seed=seed, state=state)
  local_mesh = distributed.local_mesh(mesh)
  local = distributed.to_local(state, local_mesh)  # (gathered under the training mesh)
  with models.use_mesh(local_mesh):
    return engine.run(tasks, seed=seed, state=local, first_group=first_group) if tasks else []


def gather_rollouts(rollouts: list[Any], first_group: int) -> list[Any]:
  """Every process's rollouts (group-major, groups renumbered in the whole batch), on every
  process: the batch, rewards and advantages are then the one-process run's."""
  for r in rollouts:
    r.group += first_group
  return [r for part in distributed.gather_objects(rollouts) for r in part]


def _progress(step: int, total: int, m: Mapping[str, float]) -> str:
  line = (
    f"step {step}/{total} reward {m['mean_reward']:.3f} pass {m['pass_rate']:.3f} "
    f"crit {m['criterion_pass_rate']:.3f} loss {m['loss']:+.4f} clip {m['clip_frac_low']:.3f}/"
    f"{m['clip_frac_high']:.3f} ratio [{m['ratio_min']:.3f}, {m['ratio_max']:.3f}] "
    f"ent {m['entropy']:.3f} signal {m['groups_with_signal']:.2f} "
    f"(update {m['update_groups_with_signal']:.2f}) len "
    f"{m['response_length']:.0f} toolerr {m['tool_error_rate']:.2f} "
    f"sample {m['sample_seconds']:.1f}s update {m['update_seconds']:.1f}s"
  )
  return line


def train(
  config: ml_collections.ConfigDict,
  workdir: str | Path,
  *,
  engine_factory: EngineFactory | None = None,
  tasks: Sequence[Any] | None = None,
  eval_tasks: Sequence[Any] | None = None,
) -> dict[str, Any]:
  """Trains (or resumes) GRPO as `config` says, in `workdir`; returns the summary.

  ``engine_factory(model, renderer, rollout_config)`` builds the rollout engine (default
  ``rl.rollout.RolloutEngine``); `tasks` / `eval_tasks` replace the configured task sets.
  """
  workdir = Path(workdir)
  workdir.mkdir(parents=True, exist_ok=True)
  engine_factory = engine_factory or _default_engine
  g, n = config.data.tasks_per_step, config.rollout.num_rollouts
  oversample = config.data.get("oversample", 1)
  if g < 1 or n < 2 or oversample < 1:
    raise ValueError(
      f"need tasks_per_step >= 1, num_rollouts >= 2 and oversample >= 1; got {g}, {n}, {oversample}"
    )
  if config.rollout.temperature <= 0:
    raise ValueError("GRPO samples: rollout.temperature must be > 0")
  loss_config = GRPOLossConfig(**config.loss.to_dict())
  reward_fn = reward_function(config)
  coupling = reward_coupling(config)

  init_dir, sft_dir = _initial_policy(config, workdir)
  if tasks is None:
    tasks, found_eval = load_task_sets(config, sft_dir)
    eval_tasks = found_eval if eval_tasks is None else eval_tasks
  tasks, eval_tasks = list(tasks), list(eval_tasks or [])
  if config.eval.num_tasks:
    eval_tasks = eval_tasks[: config.eval.num_tasks]
  if not tasks:
    raise ValueError("no training tasks")
  if jax.process_index() == 0:
    (workdir / sft.CONFIG_FILE).write_text(config.to_json_best_effort(indent=2) + "\n")

  mesh = sft.build_mesh(config)
  b, mb = g * n, config.optim.num_minibatches
  shards = mesh.shape["data"] * mesh.shape["fsdp"]
  if b % mb or (b // mb) % shards:
    raise ValueError(
      f"{b} rollouts per step do not split into {mb} minibatches over {shards} shards"
    )
  tx = make_optimizer(config)

  overrides = {k: v for k, v in (config.get("model_overrides") or {}).items() if v}
  loaded, tokenizer, checkpoint = load_policy_parts(init_dir, overrides)
  renderer = ChatRenderer(tokenizer)
  print(f"initial policy: {checkpoint}")
  with models.use_mesh(mesh):
    model = _shard_model(loaded, mesh)
    del loaded
    model_config = model.config
    graphdef, state = init_state(model, tx, mesh, keep_reference=loss_config.kl_coef > 0)
    state_shardings = jax.tree.map(lambda x: x.sharding, state)
    step_fn = make_grpo_step(
      graphdef,
      tx,
      loss_config,
      temperature=config.rollout.temperature,
      num_minibatches=mb,
      aux_loss_coef=model_config.router_aux_loss_coef if config.optim.aux_loss else 0.0,
      head_chunk=config.optim.head_chunk,
    )
    grpo_step = jax.jit(step_fn, out_shardings=(state_shardings, None), donate_argnums=0)
    # The engines sample with the state passed to run(); `model` only gives them the graph.
    engine = engine_factory(model, renderer, rollout_config(config))
    eval_engine = None
    if eval_tasks and config.eval.every > 0:
      eval_engine = _eval_engine(config, engine_factory, model, renderer)

    manager = sft._checkpoint_manager(workdir, config)
    start, state, log = sft.restore_latest(manager, state, "log")
    log = dict(log) if log is not None else {"history": [], "evals": []}  # per step; held out
    history, evals = log["history"], log["evals"]

    def sampling_state():
      # The engines sample with this state; the `model` they were built with only gives the
      # graph (its buffers were donated to the first update).
      return nnx.split(nnx.merge(graphdef, state["params"], state["rest"]))[1]

    def evaluate(at: int) -> dict[str, float]:
      result = _evaluate(eval_engine, eval_tasks, config.eval.seed, sampling_state(), mesh)
      evals.append({"step": at, **result})
      writer.write(at, result)
      return result

    writer = sft.MetricWriter(workdir)
    if eval_engine is not None and start == 0:
      result = evaluate(0)
      if distributed.is_primary():
        tqdm.write(f"step 0 | eval {result}")
    total = config.num_steps
    primary = distributed.is_primary()
    bar = tqdm(total=total, initial=start, desc="grpo", mininterval=1.0, disable=not primary)
    step = start
    while step < total:
      if config.stop_after and step - start >= config.stop_after:
        break  # a simulated preemption: nothing is saved
      t0 = time.perf_counter()
      sampled = g * oversample  # tasks played this step; the update keeps g of them
      step_tasks = [tasks[i] for i in step_task_indices(len(tasks), step, sampled, config.seed)]
      mine, first = process_share(step_tasks)  # each process plays its own groups
      rollouts = run_engine(
        engine,
        mine,
        seed=rollout_seed(config.seed, step),
        state=sampling_state(),
        first_group=first,
        mesh=mesh,
      )
      rollouts = gather_rollouts(rollouts, first)
      t1 = time.perf_counter()
      batch = assemble_batch(
        rollouts, sampled, n, min_length=config.data.min_length, coupling=coupling
      )
      rewards, advantages = rewards_and_advantages(batch, reward_fn, config.reward.delta)
      generated = sum(r.generated_tokens for r in rollouts)
      sampled_metrics = {
        **rollout_metrics(rollouts, batch),
        "mean_reward": float(rewards.mean()),
        "groups_with_signal": groups_with_signal(rewards),
      }
      if oversample > 1:  # the g groups that train: those with a reward spread first
        rollouts = regroup(rollouts, keep_groups(rewards, g), n)
        batch = assemble_batch(rollouts, g, n, min_length=config.data.min_length, coupling=coupling)
        rewards, advantages = rewards_and_advantages(batch, reward_fn, config.reward.delta)
      state, metrics = grpo_step(state, shard_batch(batch, advantages.reshape(-1), mesh))
      metrics = {k: float(v) for k, v in jax.device_get(metrics).items()}
      t2 = time.perf_counter()
      step += 1
      # Outcomes are the sampled rollouts' (all of them); the update's own groups are reported
      # apart (the same ones without oversampling).
      metrics.update(sampled_metrics)
      metrics.update(
        update_groups_with_signal=groups_with_signal(rewards),
        zero_advantage_groups=float(np.mean(np.all(np.abs(advantages) < 1e-6, axis=-1))),
        sample_seconds=t1 - t0,
        update_seconds=t2 - t1,
        tokens_per_s=generated / (t2 - t0),
        sample_tokens_per_s=generated / (t1 - t0),
        train_tokens_per_s=float(batch["segment_ids"].sum()) / (t2 - t1),
        sampled_groups=float(sampled),
        batch_length=float(batch["tokens"].shape[1]),
      )
      history.append({"step": step, **metrics})
      if step % config.log_every == 0:
        writer.write(step, metrics)
      line = _progress(step, total, metrics)
      if eval_engine is not None and (step % config.eval.every == 0 or step == total):
        line += f" | eval {evaluate(step)}"
      if primary:
        bar.write(line)
      bar.update(1)
      if step % config.checkpoint.every == 0 or step == total:
        _save(manager, step, state, log)
    bar.close()
    killed = bool(config.stop_after) and step - start >= config.stop_after and step < total
    if not killed and manager.latest_step() != step:
      _save(manager, step, state, log)
    manager.wait_until_finished()
    writer.close()
    if not killed:
      save_policy(workdir / POLICY_DIR, nnx.merge(graphdef, state["params"], state["rest"]),
                  tokenizer, int(step))  # fmt: skip

  return summarize(config, history, evals, start=start, step=step, workdir=workdir, extra={
    "init": str(checkpoint), "train_tasks": len(tasks), "eval_tasks": len(eval_tasks),
    "mesh": dict(mesh.shape), "vocab_size": tokenizer.vocab_size,
    "checkpoints": str(manager.directory), "policy": str(workdir / POLICY_DIR),
  })  # fmt: skip


def summarize(
  config, history, evals, *, start: int, step: int, workdir: Path, extra
) -> dict[str, Any]:
  """Per-step lists of the headline metrics, the last value of every other one, and the held-out
  curve (``eval_steps``, ``eval_pass_rate``, ``eval_rubric_score``; step 0 = before training).
  ``mean_groups_with_signal``: the mean over steps of the share of groups with a reward spread."""
  timed = history[1:] if len(history) > 1 else history  # the first step compiles
  signal = [h["groups_with_signal"] for h in history if "groups_with_signal" in h]
  update_signal = [
    h["update_groups_with_signal"] for h in history if "update_groups_with_signal" in h
  ]
  summary = {
    "steps": step,
    "start_step": start,
    "reward": config.reward.name,
    "reward_coupling": reward_coupling(config),
    "mean_reward": [round(h["mean_reward"], 6) for h in history],
    "pass_rate": [round(h["pass_rate"], 6) for h in history],
    "criterion_pass_rate": [round(h["criterion_pass_rate"], 6) for h in history],
    "loss": [round(h["loss"], 6) for h in history],
    "groups_with_signal": [round(x, 6) for x in signal],
    "mean_groups_with_signal": float(np.mean(signal)) if signal else None,
    # the groups the update trained on (data.oversample > 1: those with a spread first)
    "update_groups_with_signal": [round(x, 6) for x in update_signal],
    "mean_update_groups_with_signal": float(np.mean(update_signal)) if update_signal else None,
    "eval_steps": [h["step"] for h in evals],
    "eval_pass_rate": [h["eval_pass_rate"] for h in evals],
    "eval_rubric_score": [h["eval_rubric_score"] for h in evals],
    "final": {k: v for k, v in history[-1].items() if k != "step"} if history else {},
    "tokens_per_s": float(np.mean([h["tokens_per_s"] for h in timed])) if timed else None,
    "num_rollouts": config.rollout.num_rollouts,
    "tasks_per_step": config.data.tasks_per_step,
    "workdir": str(workdir),
  }
  return {**summary, **extra}
