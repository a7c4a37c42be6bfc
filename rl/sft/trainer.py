"""Supervised fine-tuning on verified trajectories: packed batches → masked cross-entropy → AdamW.

``train(config, workdir)`` runs the whole first stage of the paper: it finds (or makes) the SFT set
and the tokenizer, builds the model on the device mesh, and trains with a jitted, sharded step
``state, batch -> state, metrics`` whose state is donated. The loss is the cross-entropy of the
agent's tokens only, summed and divided by the number of loss tokens of the whole global batch, so
gradient accumulation over micro-batches gives the gradient of the big batch exactly. Orbax saves
the train state and the grain iterator state together, so a killed run resumes on the very batch it
would have seen next. Metrics go to TensorBoard event files, ``metrics.jsonl`` and the console.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import orbax.checkpoint as ocp
from flax import nnx
from jax.sharding import NamedSharding, PartitionSpec
from tqdm import tqdm

import models
from models.copy_head import set_word_forms
from models.loss import (  # noqa: F401 (the fused head loss, as rl.sft.trainer has always offered it)
  LOSS_CHUNK_TOKENS,
  head_eval,
  head_losses,
  loss_chunk_length,
  weighted_head_losses,
)
from models.perf.flops import model_summary
from rl import distributed
from rl.data.chat import ChatRenderer
from rl.data.packing import BATCH_KEYS
from rl.data.tokenizer import (
  load_tokenizer,
  word_forms,
)
from rl.serve.policy import POLICY_DIR, savable, save_policy, unsavable
from rl.sft.copying import copy_stage, plot_stage
from rl.sft.data import (  # noqa: F401 (the data set-up, as rl.sft.trainer has always offered it)
  DATA_DIR,
  count_steps,
  data_config,
  data_shards,
  data_stats,
  eval_batches,
  generate_sft_set,
  get_tokenizer,
  load_sft_set,
  local_batches,
  pad_rows,
)
from rl.sft.steps import (  # noqa: F401 (the step functions, as rl.sft.trainer has always offered them)
  loss_weights,
  make_eval_step,
  make_optimizer,
  make_train_step,
  token_losses,
  turn_matches,
  weighted_positions,
)

#: The mesh axes a batch's rows are split over (the model's "act_batch" rule).
BATCH_AXES = ("data", "fsdp")
CHECKPOINT_DIR = "checkpoints"
METRICS_FILE = "metrics.jsonl"
CONFIG_FILE = "config.json"
#: The copy stage's recorded points (``rl.sft.copying``), when the config has one.
COPY_STAGE_FILE = "copy_stage.json"
COPY_STAGE_PLOT = "copy_stage.png"


# --------------------------------------------------------------------------------------------------
# State, mesh and sharding


def loss_positions(config: ml_collections.ConfigDict, stats: Mapping[str, Any]) -> int:
  """Positions per row the training step scores (``data.loss_positions``; `rl.sft.steps._losses`):
  -1 = the most loss tokens a row of the first epoch holds (``stats``, `data_stats`), rounded up
  to 128, or 0 (every position) when that is no fewer than the row's or the objective weighs
  the context tokens too."""
  k = config.data.get("loss_positions", 0)
  if k < 0:
    if config.data.context_loss_weight:
      return 0
    k = -(-max(stats["max_row_loss_tokens"], 1) // 128) * 128
  return k if 0 < k < config.data.seq_len else 0


def build_mesh(config: ml_collections.ConfigDict) -> jax.sharding.Mesh:
  m = config.mesh
  return models.make_mesh(data=m.data, fsdp=m.fsdp, tensor=m.tensor, expert=m.expert)


def _replicate_unsharded(tree, mesh):
  """Puts every leaf that is not already mesh-sharded (optimizer counters) replicated on `mesh`."""

  def put(x):
    if isinstance(getattr(x, "sharding", None), NamedSharding):
      return x
    return jax.device_put(x, NamedSharding(mesh, PartitionSpec()))

  return jax.tree.map(put, tree)


def init_state(model: models.Transformer, tx, mesh) -> tuple[Any, dict[str, Any]]:
  """The graph definition and the train state of `model`; optimizer moments take the sharding of
  their parameters (``zeros_like`` of a sharded array keeps its sharding)."""
  graphdef, params, rest = nnx.split(model, nnx.Param, ...)
  state = {
    "step": jnp.zeros((), jnp.int32),
    "params": params,
    "rest": rest,
    "opt_state": tx.init(params),
  }
  return graphdef, _replicate_unsharded(state, mesh)


def shard_batch(
  batch: Mapping[str, np.ndarray], mesh, *, whole: bool = False
) -> dict[str, jax.Array]:
  """This process's rows of a batch (`local_batches`: the whole batch on one process) as global
  arrays with rows split over the data axes of `mesh`; `whole`: `batch` is the whole global
  batch, the same on every process, of which this process passes on its own rows."""
  sharding = NamedSharding(mesh, PartitionSpec(BATCH_AXES, None))
  local = {k: np.asarray(batch[k], np.int32) for k in BATCH_KEYS}
  if whole:
    local = distributed.own_rows(local, sharding)
  return distributed.global_batch(local, sharding, len(local["tokens"]) * jax.process_count())


def check_row_layout(mesh, rows: int) -> None:
  """Each process must hold one block of the global batch's rows, process p the p-th (what
  `local_batches` loads); a mesh whose batch axes do not split that way gets a clear error."""
  sharding = NamedSharding(mesh, PartitionSpec(BATCH_AXES, None))
  p, n = jax.process_index(), jax.process_count()
  expected = (p * rows // n, (p + 1) * rows // n)
  if rows % n or distributed.row_range(sharding, (rows, 1)) != expected:
    raise ValueError(
      f"process {p} of {n}: the mesh {dict(mesh.shape)} does not give it rows {expected} of "
      f"{rows}; give each process whole slices of the data / fsdp axes"
    )


# --------------------------------------------------------------------------------------------------
# Throughput


def measure_matmul_peak(size: int = 2048, dtype: str = "float32", repeats: int = 5) -> float:
  """FLOP/s of a square matmul on all local devices together (the best of `repeats`)."""
  devices = jax.local_devices()
  # One device's mesh each: called under a training mesh (of every process's devices), a plain
  # jit would place the product on that mesh instead.
  meshes = [jax.sharding.Mesh(np.array([d]), ("one",)) for d in devices]
  xs = [jax.device_put(np.ones((size, size), jnp.dtype(dtype)), d) for d in devices]
  product = jax.jit(lambda a, b: a @ b)

  def run():
    out = []
    for mesh, x in zip(meshes, xs, strict=True):
      with jax.set_mesh(mesh):
        out.append(product(x, x))
    jax.block_until_ready(out)

  run()
  best = math.inf
  for _ in range(repeats):
    t0 = time.perf_counter()
    run()
    best = min(best, time.perf_counter() - t0)
  return 2.0 * size**3 * len(devices) / best


class MetricWriter:
  """Scalars to TensorBoard event files and to ``metrics.jsonl``; only process 0 writes."""

  def __init__(self, workdir: Path):
    self.enabled = jax.process_index() == 0
    if self.enabled:
      from tensorboardX import SummaryWriter

      self._tb = SummaryWriter(str(workdir / "tensorboard"))
      self._jsonl = open(workdir / METRICS_FILE, "a", encoding="utf-8")  # noqa: SIM115

  def write(self, step: int, scalars: Mapping[str, float]) -> None:
    if not self.enabled:
      return
    for name, value in scalars.items():
      self._tb.add_scalar(name, value, step)
    self._jsonl.write(json.dumps({"step": step, **scalars}) + "\n")
    self._jsonl.flush()

  def close(self) -> None:
    if self.enabled:
      self._tb.close()
      self._jsonl.close()


# --------------------------------------------------------------------------------------------------
# The run


#: Model fields an imported checkpoint takes from ``model.overrides``: how it runs, not its shape.
RUNTIME_FIELDS = (
  "moe_backend",
  "moe_tile",
  "moe_groups",
  "deltanet_chunk",
  "remat",
  "dtype",
  "param_dtype",
  "router_aux_loss_coef",
)


def build_model(
  config: ml_collections.ConfigDict, vocab_size: int, mesh=None, tokenizer=None
) -> tuple[models.Transformer, models.ModelConfig]:
  """The model to train: imported with `from_pretrained` from ``model.init_from`` (its shape is
  the checkpoint's; only the `RUNTIME_FIELDS` of ``model.overrides`` apply), else a random one
  of ``model.name`` with the overrides and a vocabulary of at least `vocab_size` ids. A copy
  head with ``copy_head_forms`` takes its word forms from ``tokenizer`` (required then)."""
  if config.model.init_from:
    overrides = {k: v for k, v in dict(config.model.overrides).items() if k in RUNTIME_FIELDS}
    model, cfg = models.from_pretrained(config.model.init_from, mesh=mesh, **overrides)
  else:
    cfg = model_config(config, vocab_size)
    model = models.create_model(cfg, seed=config.seed, mesh=mesh)
  if cfg.vocab_size < vocab_size:
    raise ValueError(f"model vocab {cfg.vocab_size} < the tokenizer's {vocab_size}")
  if cfg.copy_head and cfg.copy_head_forms:
    if tokenizer is None:
      raise ValueError("model.overrides.copy_head_forms needs the tokenizer's word forms")
    set_word_forms(model.copy_head, *word_forms(tokenizer, cfg.vocab_size))
  return model, cfg


def model_config(config: ml_collections.ConfigDict, vocab_size: int) -> models.ModelConfig:
  """The model config an SFT config trains from scratch, for a tokenizer of ``vocab_size``."""
  overrides = dict(config.model.overrides)
  # Round the vocabulary up so the "vocab" axis splits over any tensor width.
  overrides.setdefault("vocab_size", -(-vocab_size // 128) * 128)
  return models.get_config(config.model.name, **overrides)


def _checkpoint_manager(workdir: Path, config: ml_collections.ConfigDict):
  options = ocp.CheckpointManagerOptions(
    max_to_keep=config.checkpoint.keep, create=True, enable_async_checkpointing=False
  )
  return ocp.CheckpointManager((workdir / CHECKPOINT_DIR).absolute(), options=options)


def restore_latest(manager, state, extra: str) -> tuple[int, Any, Any]:
  """The latest checkpoint's step, state (shaped and sharded like ``state``) and its JSON item
  ``extra``; ``(0, state, None)`` when there is none."""
  step = manager.latest_step()
  if step is None:
    return 0, state, None
  state, extra_item = restore_step(manager, step, state, extra)
  print(f"resumed from step {step} in {manager.directory}")
  return step, state, extra_item


def restore_step(manager, step: int, state, extra: str | None = None) -> tuple[Any, Any]:
  """Checkpoint ``step``'s state (shaped and sharded like ``state``) and its JSON item
  ``extra`` (None without one)."""
  abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, state)
  args = {"state": ocp.args.StandardRestore(savable(abstract))}
  if extra is not None:
    args[extra] = ocp.args.JsonRestore()
  restored = manager.restore(step, args=ocp.args.Composite(**args))
  return unsavable(restored["state"], state), restored[extra] if extra is not None else None


def export_checkpoint(
  workdir: str | Path, step: int | None = None, out: str | Path | None = None
) -> Path:
  """Writes the weights of the SFT run in ``workdir`` at training checkpoint ``step`` (default:
  the latest) as a servable policy in ``out`` (default ``workdir/policy-<step>``), the format
  `save_policy` writes at the end of a run; returns ``out``. For a run that was stopped before
  its end, or to score it at an earlier step."""
  workdir = Path(workdir)
  if not (workdir / CONFIG_FILE).is_file():
    raise FileNotFoundError(f"{workdir} is not an SFT run's workdir (no {CONFIG_FILE})")
  config = ml_collections.ConfigDict(json.loads((workdir / CONFIG_FILE).read_text()))
  manager = _checkpoint_manager(workdir, config)
  steps = sorted(manager.all_steps())
  if not steps:
    raise FileNotFoundError(f"no training checkpoints in {manager.directory}")
  step = steps[-1] if step is None else int(step)
  if step not in steps:
    raise ValueError(f"no checkpoint of step {step} in {manager.directory}; there are {steps}")
  tokenizer = load_tokenizer(workdir)
  with nnx.use_eager_sharding(False):
    model, _ = build_model(config, tokenizer.vocab_size, tokenizer=tokenizer)
    tx, _ = make_optimizer(config, max(steps[-1], 1))
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    like = {"step": jnp.zeros((), jnp.int32), "params": params, "rest": rest}
    state, _ = restore_step(manager, step, dict(like, opt_state=tx.init(params)))
  out = Path(out) if out else workdir / f"{POLICY_DIR}-{step}"
  save_policy(out, nnx.merge(graphdef, state["params"], state["rest"]), tokenizer, step)
  return out


def _save(manager, step: int, state, data_iter) -> None:
  # Every process's data iterators (its own shards), merged: the same JSON item on every process.
  data_state = distributed.gather_json(data_iter.get_state())
  manager.save(
    step,
    args=ocp.args.Composite(
      state=ocp.args.StandardSave(savable(state)),
      data=ocp.args.JsonSave(data_state),
    ),
  )


def _evaluate(eval_step, state, eval_set, renderer, config, mesh) -> dict[str, float]:
  """Held-out ``eval_loss``, ``eval_accuracy`` (next-token argmax on assistant tokens) and
  ``eval_turn_match`` (``turn_matches``: the assistant turns greedy decoding reproduces from
  the oracle's history); {} without held-out trajectories."""
  if not eval_set:
    return {}
  nll = correct = n = 0.0
  matched = turns = 0
  for batch in eval_batches(eval_set, renderer, config):
    s, c, k, correct_bt = eval_step(state, shard_batch(batch, mesh))
    nll, correct, n = nll + float(s), correct + float(c), n + float(k)
    m, t = turn_matches(distributed.local_rows(correct_bt), batch["loss_mask"])
    matched, turns = matched + m, turns + t
  matched, turns = distributed.sum_over_processes(matched, turns)
  if not n:
    return {}
  return {
    "eval_loss": nll / n,
    "eval_accuracy": correct / n,
    "eval_turn_match": matched / turns if turns else 0.0,
  }


def train(
  config: ml_collections.ConfigDict,
  workdir: str | Path,
  *,
  tools: Sequence[dict[str, Any]] | None = None,
) -> dict[str, Any]:
  """Trains (or resumes training) as `config` says, in `workdir`; returns the summary.

  `tools` are the function schemas of the system turn (default: the four meta-tools).
  """
  workdir = Path(workdir)
  workdir.mkdir(parents=True, exist_ok=True)
  if config.data.batch_size % config.optim.grad_accum:
    raise ValueError(
      f"batch_size {config.data.batch_size} is not a multiple of grad_accum "
      f"{config.optim.grad_accum}"
    )
  # Process 0 generates the data (when none is given) and trains the tokenizer; the others then
  # read both from the workdir.
  for turn in (True, False):
    if distributed.is_primary() == turn:
      train_set, eval_set = load_sft_set(config, workdir)
      tokenizer = get_tokenizer(config, workdir, train_set)
      if turn:
        tokenizer.save(workdir)  # beside every checkpoint, loaded with it
        (workdir / CONFIG_FILE).write_text(config.to_json_best_effort(indent=2) + "\n")
    distributed.barrier(f"sft-data-{turn}")
  renderer = ChatRenderer(tokenizer) if tools is None else ChatRenderer(tokenizer, tools)

  mesh = build_mesh(config)
  rows_per_micro = config.data.batch_size // config.optim.grad_accum
  batch_shards = mesh.shape["data"] * mesh.shape["fsdp"]
  if rows_per_micro % batch_shards:
    raise ValueError(f"{rows_per_micro} rows per micro-batch do not split over {batch_shards}")
  check_row_layout(mesh, config.data.batch_size)
  stats = data_stats(train_set, renderer, config)
  print(
    f"{stats['trajectories']} training trajectories, median {stats['length_percentiles']['50']} "
    f"tokens; {stats['overlong_share']:.0%} longer than a {stats['seq_len']}-token row "
    f"({stats['loss_tokens_past_row_end_share']:.0%} of loss tokens past the row end); "
    f"packing efficiency {stats['packing_efficiency']:.3f}"
  )
  total_steps = count_steps(train_set, renderer, config, batches_per_epoch=stats["batches"])
  tx, schedule = make_optimizer(config, total_steps)

  with models.use_mesh(mesh):
    model, model_config = build_model(config, tokenizer.vocab_size, mesh, tokenizer)
    graphdef, state = init_state(model, tx, mesh)
    del model
    state_shardings = jax.tree.map(lambda x: x.sharding, state)
    positions = loss_positions(config, stats)
    context_weight = config.data.context_loss_weight
    copy_weight = config.data.get("pointer_loss_weight", 0.0)
    if copy_weight and not model_config.copy_head:
      raise ValueError(
        "data.pointer_loss_weight > 0 needs a model with a copy head (copy_head=True)"
      )

    def jit_step(k: int):
      step_fn = make_train_step(
        graphdef,
        tx,
        schedule,
        grad_accum=config.optim.grad_accum,
        aux_loss_coef=model_config.router_aux_loss_coef,
        context_weight=context_weight,
        loss_positions=k,
        value_weight=config.data.get("value_loss_weight", 0.0),
        copy_weight=copy_weight,
      )
      return jax.jit(step_fn, out_shardings=(state_shardings, None), donate_argnums=0)

    # The step over each row's loss positions, and (compiled when first needed) the one over
    # every position, for a batch with a row fuller than `positions`.
    steps = {positions: jit_step(positions)}
    eval_step = jax.jit(make_eval_step(graphdef))

    data_iter = iter(
      local_batches(train_set, renderer, config, epochs=config.data.num_epochs, train=True)
    )
    manager = _checkpoint_manager(workdir, config)
    start, state, data_state = restore_latest(manager, state, "data")
    if data_state is not None:
      data_iter.set_state(data_state)
    copy_points: list[dict[str, float]] = []
    if start == 0 and config.copy.steps:
      # Before the first SFT step only: a resumed run's checkpoint already holds its result.
      state, copy_points = copy_stage(
        config,
        graphdef,
        state,
        vocab_size=tokenizer.vocab_size,
        aux_loss_coef=model_config.router_aux_loss_coef,
        shard=lambda rows: shard_batch(rows, mesh, whole=True),
      )
      if jax.process_index() == 0:
        (workdir / COPY_STAGE_FILE).write_text(json.dumps(copy_points, indent=1) + "\n")
        if copy_points:
          plot_stage(workdir / COPY_STAGE_PLOT, copy_points)

    flops_per_token = model_summary(model_config, config.data.seq_len)["flops_per_token"]
    peak = measure_matmul_peak(dtype=model_config.dtype)
    writer = MetricWriter(workdir)
    initial_eval = (
      _evaluate(eval_step, state, eval_set, renderer, config, mesh) if start == 0 else {}
    )
    if initial_eval:
      writer.write(0, initial_eval)

    history: list[dict[str, float]] = []
    timed_tokens, timed_seconds = 0.0, 0.0
    last_eval = initial_eval
    bar = tqdm(
      total=total_steps,
      initial=start,
      desc="sft",
      mininterval=1.0,
      disable=not distributed.is_primary(),
    )
    step = start
    full_steps = 0  # steps over every position: a row held more loss tokens than `positions`
    batches: Iterator = data_iter
    while step < total_steps:
      if config.stop_after and step - start >= config.stop_after:
        # A simulated preemption: nothing is saved.
        print(f"stopped after step {step} without saving (stop_after)", flush=True)
        break
      try:
        host_batch = next(batches)
      except StopIteration:
        break
      t0 = time.perf_counter()
      scored = positions
      fullest = weighted_positions(host_batch, context_weight) if positions else 0
      if positions and distributed.all_processes(fullest, max) > positions:
        scored = 0
      compiles = scored not in steps
      full_steps += scored != positions
      if compiles:
        steps[scored] = jit_step(scored)
      state, metrics = steps[scored](state, shard_batch(host_batch, mesh))
      metrics = {k: float(v) for k, v in jax.device_get(metrics).items()}
      seconds = time.perf_counter() - t0
      step += 1
      computed = float(host_batch["tokens"].size) * jax.process_count()  # every process's rows
      if step > start + 1 and not compiles:  # the first step compiles
        timed_tokens, timed_seconds = timed_tokens + computed, timed_seconds + seconds
      metrics["tokens_per_s"] = computed / seconds
      metrics["mfu"] = metrics["tokens_per_s"] * flops_per_token / peak
      history.append({"step": step, "step_seconds": seconds, **metrics})
      if step % config.eval_every == 0 or step == total_steps:
        last_eval = _evaluate(eval_step, state, eval_set, renderer, config, mesh) or last_eval
        metrics.update(last_eval)
      if step % config.log_every == 0 or "eval_loss" in metrics:
        writer.write(step, metrics)
      bar.set_postfix(loss=f"{metrics['loss']:.3f}", acc=f"{metrics['accuracy']:.3f}")
      bar.update(1)
      if step % config.checkpoint.every == 0 or step == total_steps:
        _save(manager, step, state, data_iter)
    bar.close()
    killed = config.stop_after and step - start >= config.stop_after
    if not killed and manager.latest_step() != step:
      _save(manager, step, state, data_iter)
    manager.wait_until_finished()
    writer.close()
    if not killed:
      # The servable policy (model config, tokenizer, weights) that serve_policy and the
      # checkpoint agent read; training checkpoints also hold optimizer and data state.
      save_policy(workdir / POLICY_DIR, nnx.merge(graphdef, state["params"], state["rest"]),
                  tokenizer, int(step))  # fmt: skip

  tokens_per_s = timed_tokens / timed_seconds if timed_seconds else None
  return {
    "steps": step,
    "start_step": start,
    "total_steps": total_steps,
    "initial_loss": history[0]["loss"] if history else None,
    "final_loss": history[-1]["loss"] if history else None,
    "losses": [round(h["loss"], 6) for h in history],
    "initial_eval_loss": initial_eval.get("eval_loss"),
    "eval_loss": last_eval.get("eval_loss"),
    "initial_eval_turn_match": initial_eval.get("eval_turn_match"),
    "eval_turn_match": last_eval.get("eval_turn_match"),
    "eval_accuracy": last_eval.get("eval_accuracy"),
    "final_accuracy": history[-1]["accuracy"] if history else None,
    # What this process trained on: row positions (padding included), real and loss tokens.
    "tokens_seen": int(sum(h["tokens"] for h in history)),
    "loss_tokens_seen": int(sum(h["loss_tokens"] for h in history)),
    "train_seconds": round(sum(h["step_seconds"] for h in history), 1),
    "tokens_per_s": tokens_per_s,
    "mfu": tokens_per_s * flops_per_token / peak if tokens_per_s else None,
    "matmul_peak_flops": peak,
    "flops_per_token": flops_per_token,
    "copy_stage": copy_points[-1] if copy_points else None,
    "loss_positions": positions,
    "full_position_steps": full_steps,
    "train_trajectories": len(train_set),
    "data": stats,
    "packing_efficiency": stats["packing_efficiency"],
    "eval_trajectories": len(eval_set),
    "vocab_size": tokenizer.vocab_size,
    "mesh": dict(mesh.shape),
    "checkpoints": str(manager.directory),
    "policy": str(workdir / POLICY_DIR),
    "workdir": str(workdir),
  }


def get_default_config() -> ml_collections.ConfigDict:
  """The paper's SFT config (``configs/sft.py:paper``)."""
  from configs.sft import get_config

  return get_config("paper")
