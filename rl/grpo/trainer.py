"""GRPO (paper section 4.3): rollouts → rubric rewards → group advantages → clipped policy updates.

``train(config, workdir)`` runs the paper's second stage. Each step takes G tasks (a seeded order
that cycles the task set), has the rollout engine play N trajectories of each in forked copies of
its s0, scores them with the configured reward (eq. 5 by default), turns the rewards into group
advantages (eq. 6) and takes ``optim.num_minibatches`` optimizer steps with the eq. 8 loss on the
padded ``[G * N, T]`` batch. The update is one jitted, sharded program ``state, batch -> state,
metrics`` with the state donated, on the same mesh, optimizer-state sharding and checkpoint layout
as SFT (``rl.sft.trainer``). Rollouts depend only on (seed, step) and the parameters, so a killed run that
resumes from its latest Orbax checkpoint takes the very steps an uninterrupted run would have.

The batch a step trains on is ``rl.grpo.batches``; its update step is ``rl.grpo.update``.
"""

from __future__ import annotations

import functools
import json
import math
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import orbax.checkpoint as ocp
from flax import nnx
from jax.sharding import NamedSharding
from tqdm import tqdm

import models
from rl import distributed
from rl.data.chat import ChatRenderer
from rl.grpo.batches import (  # noqa: F401 (the batch functions, as rl.grpo has always offered them)
  ROW_KEYS,
  assemble_batch,
  bucket_length,
  groups_unlike_uniform,
  groups_with_signal,
  keep_groups,
  regroup,
  reward_coupling,
  reward_function,
  rewards_and_advantages,
  rollout_metrics,
  rollout_passed,
  rollout_seed,
  signal_rows,
  step_task_indices,
  zero_advantage_groups,
)
from rl.grpo.loss import GRPOLossConfig
from rl.grpo.update import (  # noqa: F401 (the update step, as rl.grpo has always offered it)
  MicroStep,
  gather_loss_tokens,
  head_logp,
  init_state,
  make_grpo_step,
  make_optimizer,
  policy_logp,
  shard_batch,
)
from rl.serve.policy import POLICY_DIR, load_policy_parts, savable, save_policy
from rl.sft import trainer as sft

SFT_DIR = "sft"
TASKS_FILE = "tasks.jsonl"

EngineFactory = Callable[[models.Transformer, ChatRenderer, Any], Any]


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
  from compoworld.tasks.task import load_tasks

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
  from rl.grpo.rollout import RolloutEngine

  return RolloutEngine(model, renderer, rollout_config, **kwargs)


def rollout_config(config: ml_collections.ConfigDict, **changes):
  from rl.grpo.rollout import RolloutConfig

  return RolloutConfig(**{**config.rollout.to_dict(), **changes})


@functools.cache
def greedy_sampler(vocab_limit: int):
  """An ``rl.grpo.rollout`` sampler that takes the most likely id below `vocab_limit` (temperature 0)."""

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


#: The update metrics of a step whose update was skipped (``optim.skip_without_signal``): every
#: advantage is 0, so the loss is 0 and nothing is clipped; the ratio, entropy, gradient norm
#: and aux loss were not computed and are left out.
SKIPPED_UPDATE = {"loss": 0.0, "pg_loss": 0.0, "first_loss": 0.0, "clip_frac_low": 0.0,
                  "clip_frac_high": 0.0}  # fmt: skip


def _progress(step: int, total: int, m: Mapping[str, float]) -> str:
  if m.get("update_skipped"):
    update = "update skipped (no spread)"
  else:
    update = (
      f"clip {m['clip_frac_low']:.3f}/{m['clip_frac_high']:.3f} ratio [{m['ratio_min']:.3f}, "
      f"{m['ratio_max']:.3f}] ent {m['entropy']:.3f}"
    )
  line = (
    f"step {step}/{total} reward {m['mean_reward']:.3f} pass {m['pass_rate']:.3f} "
    f"crit {m['criterion_pass_rate']:.3f} loss {m['loss']:+.4f} {update} "
    f"signal {m['groups_with_signal']:.2f} "
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
  ``rl.grpo.rollout.RolloutEngine``); `tasks` / `eval_tasks` replace the configured task sets.
  """
  workdir = Path(workdir)
  workdir.mkdir(parents=True, exist_ok=True)
  engine_factory = engine_factory or _default_engine
  g, n = config.data.tasks_per_step, config.rollout.num_rollouts
  oversample = config.data.get("oversample", 1)
  # Without a KL or entropy term only the policy gradient reads the advantages: a step whose
  # groups all lack a reward spread trains nothing (optim.skip_without_signal skips its update)
  # and a group without one adds nothing (optim.signal_groups_only leaves its rows out).
  gradient_only = not (config.loss.kl_coef or config.loss.entropy_coef)
  skip_without_signal = bool(config.optim.get("skip_without_signal", False)) and gradient_only
  # Floors on the update batch's length and loss-token width (assemble_batch): fixed shapes.
  floors = {
    "min_length": config.data.min_length,
    "min_loss_tokens": config.data.get("min_loss_tokens", 32),
  }
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
  # The update on the groups with a reward spread alone (signal_rows): the same policy-gradient
  # term at the cost of their rows, when one minibatch takes them all.
  signal_groups_only = (
    bool(config.optim.get("signal_groups_only", False)) and gradient_only and mb == 1
  )
  # Micro-batches (optim.micro_rows, MicroStep): the update's rows go through the loss that many
  # at a time, gradients added up; every batch size then runs the same compiled programs.
  micro_rows = config.optim.get("micro_rows", 0)
  if micro_rows and ((b // mb) % micro_rows or micro_rows % shards):
    raise ValueError(
      f"optim.micro_rows={micro_rows} must divide the {b // mb} rows of a minibatch and split"
      f" over {shards} shards"
    )
  multiple = math.lcm(shards, micro_rows) if micro_rows else shards
  signal_kw = {"aggregation": config.loss.aggregation, "multiple": multiple}

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
    step_kw = {
      "temperature": config.rollout.temperature,
      "num_minibatches": mb,
      "aux_loss_coef": model_config.router_aux_loss_coef if config.optim.aux_loss else 0.0,
      "head_chunk": config.optim.head_chunk,
    }
    micro = fused = None
    if micro_rows:
      micro = MicroStep(graphdef, tx, loss_config, mesh, rows=micro_rows, **step_kw)
    else:
      step_fn = make_grpo_step(graphdef, tx, loss_config, **step_kw)
      fused = jax.jit(step_fn, out_shardings=(state_shardings, None), donate_argnums=0)

    def grpo_step(state, inputs, row_advantages):
      if micro is not None:
        return micro(state, inputs, row_advantages)
      state, metrics = fused(state, shard_batch(inputs, row_advantages, mesh))
      return state, {k: float(v) for k, v in jax.device_get(metrics).items()}

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
    shapes: set = set()
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
      batch = assemble_batch(rollouts, sampled, n, coupling=coupling, **floors)
      rewards, advantages = rewards_and_advantages(batch, reward_fn, config.reward.delta)
      generated = sum(r.generated_tokens for r in rollouts)
      sampled_metrics = {
        **rollout_metrics(rollouts, batch),
        "mean_reward": float(rewards.mean()),
        "groups_with_signal": groups_with_signal(rewards),
        "groups_unlike_uniform": groups_unlike_uniform(batch, advantages, config.reward.delta),
      }
      if oversample > 1:  # the g groups that train: those with a reward spread first
        rollouts = regroup(rollouts, keep_groups(rewards, g), n)
        batch = assemble_batch(rollouts, g, n, coupling=coupling, **floors)
        rewards, advantages = rewards_and_advantages(batch, reward_fn, config.reward.delta)
      flat_groups = zero_advantage_groups(advantages)  # [G]
      skipped = skip_without_signal and bool(np.all(flat_groups))
      new_shape = False
      rows = update_rows = batch["tokens"].shape[0]
      trained_tokens = 0.0
      if skipped:  # every advantage 0: the policy gradient is 0, and nothing else is trained
        metrics = dict(SKIPPED_UPDATE)
        update_rows = 0
      else:
        inputs, row_advantages = batch, advantages.reshape(-1)
        if signal_groups_only and (kept := signal_rows(batch, advantages, **signal_kw)):
          picked, row_advantages = kept
          inputs = {k: batch[k][picked] for k in ROW_KEYS}
          update_rows = len(picked)
        trained_tokens = float(inputs["segment_ids"].sum())
        shape = (inputs["tokens"].shape, inputs["loss_index"].shape)
        if micro is not None:
          shape = micro.chunk_shape(inputs)
        new_shape = shape not in shapes
        shapes.add(shape)
        state, metrics = grpo_step(state, inputs, row_advantages)
      metrics["update_skipped"] = float(skipped)
      t2 = time.perf_counter()
      step += 1
      # Outcomes are the sampled rollouts' (all of them); the update's own groups are reported
      # apart (the same ones without oversampling).
      metrics.update(sampled_metrics)
      metrics.update(
        update_groups_with_signal=groups_with_signal(rewards),
        zero_advantage_groups=float(np.mean(flat_groups)),
        sample_seconds=t1 - t0,
        update_seconds=t2 - t1,
        tokens_per_s=generated / (t2 - t0),
        sample_tokens_per_s=generated / (t1 - t0),
        train_tokens_per_s=trained_tokens / (t2 - t1),
        # rows the update ran on (optim.signal_groups_only: the groups with a spread, filled
        # to a power of two), of the batch's
        update_rows=float(update_rows),
        batch_rows=float(rows),
        sampled_groups=float(sampled),
        batch_length=float(batch["tokens"].shape[1]),
        loss_positions=float(batch["loss_index"].shape[1]),
        # 1 when this step's batch shape was new to this process: its update_seconds include
        # compiling the step
        new_shape=float(new_shape),
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


def _mean_of(history: Sequence[Mapping[str, float]], key: str) -> float | None:
  values = [h[key] for h in history if key in h]
  return float(np.mean(values)) if values else None


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
    # the groups whose advantages the reward's weighting changed (against the uniform reward's)
    "mean_groups_unlike_uniform": _mean_of(history, "groups_unlike_uniform"),
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
