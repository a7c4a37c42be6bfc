"""Rollout engine: batched multi-turn generation with the environment in the loop (issue 7).

``RolloutEngine.run(tasks, seed=...)`` plays N rollouts per task, each in its own fork of the
task's s0, and returns one ``Rollout`` per trajectory (group-major order) with its tokens, loss
mask, sampling log-probabilities, tool-call counts, final answer and rubric results b_ij.

How a batch is played:

* Every rollout's trajectory is a ``rl.data.chat.Conversation``: the policy's ids go in unchanged, tool
  results are rendered turn by turn with the same renderer and appended; nothing is ever
  re-rendered or re-tokenized. Row r's model cache always holds the first ``fed[r]`` ids of it.
* Prompts are prefilled once per task and the cache is copied to the task's N rows.
* A turn is one device call: a ``lax.while_loop`` samples and feeds one token per row until every
  row has closed its turn (``<|im_end|>``) or spent its budget. Rows that are done stop updating
  their cache (masked steps) and the loop exits as soon as all are done. The loop runs the
  layers unrolled on per-layer weights and caches (``models.decode.unroll``), and, when the
  batch routes a row to every expert on average, the experts densely as two matmuls.
* Between turns the host parses each row's turn, executes its tool calls in the row's fork
  (malformed calls get an error envelope, as ``compoworld.agents.episode`` does), and appends the tool
  turn plus the next ``<|im_start|>assistant\\n`` header (loss mask 0) to the cache in fixed
  pieces of ``append_chunk`` tokens: one forward pass with the cache and a validity mask.
* Rows that finished (final answer or a budget) leave the batch: the batch is compacted to the
  next power of two of the rows still playing, so finished rollouts stop costing compute. Within
  a turn a row that has closed it is masked (its cache is frozen) until the slowest row closes
  its own; an append piece that only some rows need runs on those rows alone.
* The cache grows with the rollouts (powers of two up to ``max_total_tokens``): attention reads
  every cached position, so short trajectories do not pay for the longest possible one.

With ``constrained`` / ``grounded`` (`RolloutConfig`, as the checkpoint agent's decodings in
`rl.decoding.modes`), each row's turn is sampled under its own constraint: the typed grammar of the
meta-tools with the episode's services, and values passed on copied from the conversation. The
constraint lives on the host; the turn's loop calls back after every step (``io_callback``) for
each row's next mask, so a turn is still one device call. Without top-p filtering the mask is
the grammar's alone and each draw is checked on the host (one token walked, not the whole
vocabulary); a draw that passes on an invalid value is drawn again under the whole mask, which
together is a draw from the allowed ids. Masks only choose what is sampled: the
recorded log-probs are the unconstrained policy's, the ones the trainer recomputes.

Sampling is seeded per token: the key of row r's token at position p is
``fold_in(fold_in(key(seed), r), p)``, so rollouts do not depend on how the batch is laid out and
the same seed gives identical rollouts. The log-probability recorded for a generated token is
``log_softmax(logits / temperature)`` over the model's whole vocabulary, before top-p filtering
(what the GRPO trainer recomputes).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import time
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from compoworld.agents.episode import parse_arguments
from compoworld.agents.prompts import SYSTEM_PROMPT
from compoworld.compose.env import ComposedEnv
from compoworld.runtime.envelope import error
from compoworld.tasks.task import Task
from models.decode import take_rows
from models.model import Cache, Transformer
from rl.data.chat import ChatRenderer, Conversation, ParsedAssistant
from rl.decoding.constrained import Vocabulary
from rl.decoding.modes import TurnConstraints, episode_services
from rl.grpo.sampling import (  # noqa: F401 (the samplers, as rl.rollout has always offered them)
  CDF_BLOCK,
  Sampler,
  categorical,
  make_sampler,
  scripted_sampler,
  top_p_filter,
)
from rl.grpo.turn import Advance, Check, sample_turn  # noqa: F401 (offered here, as always)


@dataclasses.dataclass(frozen=True)
class RolloutConfig:
  num_rollouts: int = 8  # N per task (paper: 8)
  max_turns: int = 16  # assistant turns per rollout
  max_new_tokens_per_turn: int = 256
  max_total_tokens: int = 4096  # prompt + everything appended, per rollout (cache length)
  temperature: float = 1.0  # > 0; log-probs are those of softmax(logits / temperature)
  top_p: float = 1.0  # nucleus sampling; 1 = the whole tempered distribution
  # Tool calls decoded under the meta-tools' grammar, typed by each tool's schema, and/or with
  # the values passed on copied from the conversation (rl.decoding.modes): as the checkpoint agent's
  # --constrained / --grounded. The recorded log-probs stay the unconstrained model's.
  constrained: bool = False
  grounded: bool = False
  narrated: bool = False  # with constrained: a narrated call makes the call it names
  # The smallest batch a turn is played in: as rollouts finish, the rows left are compacted to
  # the next power of two from here (each batch size compiles its own programs, and on a CPU a
  # batch of 8 steps about as fast as one of 1).
  min_batch: int = 1

  def __post_init__(self):
    for name in (
      "num_rollouts", "max_turns", "max_new_tokens_per_turn", "max_total_tokens", "min_batch"
    ):  # fmt: skip
      if getattr(self, name) < 1:
        raise ValueError(f"RolloutConfig.{name} must be at least 1, got {getattr(self, name)}")
    if not self.temperature > 0:
      raise ValueError(f"RolloutConfig.temperature must be > 0, got {self.temperature}")
    if not 0 < self.top_p <= 1:
      raise ValueError(f"RolloutConfig.top_p must be in (0, 1], got {self.top_p}")


@dataclasses.dataclass
class Rollout:
  task_id: str
  group: int  # index of the task in the batch passed to run()
  index: int  # rollout index within the group (0..N-1)
  tokens: np.ndarray  # int32 [T]: the whole conversation as ids, prompt included
  loss_mask: np.ndarray  # bool [T]: True on policy-generated tokens (incl. <|im_end|>)
  logprobs: np.ndarray  # float32 [T]: log_softmax(logits / temperature)[tokens[t]]; 0 off-mask
  messages: list[dict]  # OpenAI-style messages of the episode (system, user, assistant, tool)
  final_answer: str | None
  finished: bool  # True if it ended with a final answer, False if a budget ran out
  turns: int
  tool_calls: int
  tool_errors: int  # error envelopes returned (malformed calls included)
  criteria: list[str]  # rubric criterion ids, in rubric order
  passed: np.ndarray  # bool [M]: each criterion's gated credit on the final state (its verdict)
  generated_tokens: int
  env_seconds: float  # wall time spent executing tools + verifying
  # bool [M]: each criterion's own check result (the independent b_ij); None for a rollout built
  # by hand, where `passed` stands for both forms
  raw_passed: np.ndarray | None = None


def start_conversation(renderer: ChatRenderer, task: Task) -> Conversation:
  """What every rollout of `task` starts from: the system prompt and the instruction (as
  `compoworld.agents.episode.run_episode` gives them to an agent)."""
  return renderer.conversation(
    [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": task.instruction}]
  )


def _bucket(n: int, least: int = 1) -> int:
  return max(least, 1 << max(n - 1, 0).bit_length())


@functools.partial(jax.jit, static_argnames=("graphdef",))
def append_ids(graphdef, state, cache: Cache, logits_bv, tokens_bc, count_b):
  """Appends `count_b[b]` ids of `tokens_bc` [B, C] to each row of the cache in one forward pass;
  the logits after a row's last new id replace its `logits_bv` (rows with none keep theirs)."""
  model = nnx.merge(graphdef, state)
  valid_bc = jnp.arange(tokens_bc.shape[1])[None, :] < count_b[:, None]
  out = model.forward(tokens_bc, cache=cache, valid_bt=valid_bc)
  # Only the last new position's logits are needed: the head runs on its hidden state alone
  # (the [B, C, V] logits go unused, so XLA never computes them).
  last_bv = model.logits_at(out, jnp.maximum(count_b - 1, 0)[:, None])[:, 0]
  return out.cache, jnp.where(count_b[:, None] > 0, last_bv, logits_bv)


def put_rows(cache: Cache, index_b: jax.Array, rows: Cache) -> Cache:
  """`cache` with its rows `index_b` replaced by `rows`; an index past the batch is dropped."""

  def put(axis):
    def leaf(x, y):
      at = (slice(None),) * axis + (index_b,)
      return x.at[at].set(y, mode="drop")

    return leaf

  return Cache(
    linear=jax.tree.map(put(2), cache.linear, rows.linear),
    attention=jax.tree.map(put(1), cache.attention, rows.attention),
    lengths_b=put(0)(cache.lengths_b, rows.lengths_b),
    copy=jax.tree.map(put(0), cache.copy, rows.copy),
  )


take_rows_jit = jax.jit(take_rows)
put_rows_jit = jax.jit(put_rows)


@functools.partial(jax.jit, static_argnames=("length",))
def grow_cache(cache: Cache, length: int) -> Cache:
  """The cache with room for `length` positions per row (the new KV and copy slots are zeros)."""

  def pad(x):  # [blocks, B, G, S, D]
    return jnp.pad(x, [(0, 0), (0, 0), (0, 0), (0, length - x.shape[3]), (0, 0)])

  def pad_copy(x):  # [B, S, ...]
    return jnp.pad(x, [(0, 0), (0, length - x.shape[1])] + [(0, 0)] * (x.ndim - 2))

  copy = jax.tree.map(pad_copy, cache.copy)
  return cache.replace(attention=jax.tree.map(pad, cache.attention), copy=copy)


@dataclasses.dataclass
class _Row:
  """Host-side state of one rollout."""

  task: Task
  group: int
  index: int
  row_id: int
  env: ComposedEnv
  conv: Conversation
  logprobs: list[float] = dataclasses.field(default_factory=list)  # aligned with conv.ids
  fed: int = 0  # ids of conv in the model cache
  turns: int = 0
  tool_calls: int = 0
  tool_errors: int = 0
  generated: int = 0
  final_answer: str | None = None
  finished: bool = False
  done: bool = False
  env_seconds: float = 0.0
  pending: list[int] = dataclasses.field(default_factory=list)  # ids to append before its turn


class RolloutEngine:
  """Plays N rollouts per task with `model` in the chat format of `renderer`.

  `sampler` replaces temperature / top-p sampling (tests script the policy's text with it; the
  recorded log-probs are still those of the tempered model distribution). `append_chunk` is the
  piece size tool turns and prompts are appended in; `min_batch` the smallest batch bucket (one
  compiled shape for batches up to it; default: the config's).
  """

  def __init__(
    self,
    model: Transformer,
    renderer: ChatRenderer,
    config: RolloutConfig,
    *,
    sampler: Sampler | None = None,
    append_chunk: int = 128,
    min_batch: int | None = None,
  ):
    vocab = renderer.tokenizer.vocab_size
    if vocab > model.config.vocab_size:
      raise ValueError(
        f"the tokenizer has {vocab} ids but the model only {model.config.vocab_size}"
      )
    min_batch = config.min_batch if min_batch is None else min_batch
    if append_chunk < 1 or min_batch < 1:
      raise ValueError("append_chunk and min_batch must be at least 1")
    self.model, self.renderer, self.config = model, renderer, config
    self.append_chunk, self.min_batch = append_chunk, min_batch
    self.sampler = sampler or make_sampler(config.temperature, config.top_p, vocab)
    # Room past max_total_tokens: an append piece is written whole at each row's length.
    self.max_len = config.max_total_tokens + append_chunk
    self.min_cache = min(256, self.max_len)
    self.graphdef = nnx.graphdef(model)
    # Constrained / grounded decoding: each turn's constraint per batch slot, fed on the host.
    self.constraints = None
    if config.constrained or config.grounded:
      self.constraints = TurnConstraints(
        Vocabulary.from_tokenizer(renderer.tokenizer, renderer.special_ids),
        constrained=config.constrained,
        grounded=config.grounded,
        composed=renderer.tokenizer.chat_composed,
        narrated=config.narrated,
      )
    # Masks as proposals checked draw by draw (`sample_turn`'s `check`): exact for a draw from
    # the whole tempered distribution, which top-p filtering after the mask is not.
    self.propose = self.constraints is not None and config.top_p == 1.0
    self._turn: list[Any] = []  # the constraint of each batch slot this turn (None: free)
    self._budget = np.zeros((0,), np.int32)
    self._masks = np.zeros((0, model.config.vocab_size), bool)

  # --- host side ------------------------------------------------------------------------------

  def _cache_length(self, need: int) -> int:
    """Cache positions for rows that need `need`: a power of two (each compiles once), at most
    max_total_tokens plus one append piece. Attention reads every position of the cache, so
    short rollouts should not pay for the longest possible one."""
    return min(_bucket(need, self.min_cache), self.max_len)

  def _with_room(self, cache: Cache, need: int) -> Cache:
    length = self._cache_length(need)
    return grow_cache(cache, length) if length > cache.attention.k_bgsk.shape[3] else cache

  def _append_pending(self, state, cache, logits_bv, slots: list[_Row | None]):
    """Feeds every row's pending ids, `append_chunk` at a time; returns cache and logits.

    A piece that only some rows still need runs on those rows alone (gathered into the
    smallest batch bucket that holds them, then written back): tool results differ in length
    by thousands of tokens, and a full-batch piece costs every row's attention over the cache."""
    c = self.append_chunk
    # Every row of a piece writes `c` slots at its length, also a row that has no ids left in
    # it (count 0): the last row ends at most `c` past its final length. A write that ran past
    # the cache would be clamped back onto the row's own last positions and overwrite them.
    live = [r for r in slots if r is not None]
    if any(r.pending for r in live):
      cache = self._with_room(cache, max(r.fed + len(r.pending) + c for r in live))
    longest = max((len(r.pending) for r in live), default=0)
    for start in range(0, longest, c):
      need = [s for s, r in enumerate(slots) if r is not None and len(r.pending) > start]
      size = _bucket(len(need), self.min_batch)
      sub = size < len(slots)
      order = need + [need[0]] * (size - len(need)) if sub else list(range(len(slots)))
      tokens = np.zeros((size, c), np.int32)
      count = np.zeros((size,), np.int32)
      for i, s in enumerate(order[: len(need)] if sub else order):
        r = slots[s]
        if r is not None and len(r.pending) > start:
          piece = r.pending[start : start + c]
          tokens[i, : len(piece)], count[i] = piece, len(piece)
      if not sub:
        cache, logits_bv = append_ids(self.graphdef, state, cache, logits_bv, tokens, count)
        continue
      gather = np.asarray(order, np.int32)
      part, part_logits = append_ids(
        self.graphdef, state, take_rows_jit(cache, gather), logits_bv[gather], tokens, count
      )
      # Padding rows (copies of the first) are written to an index past the batch: dropped.
      scatter = np.where(np.arange(size) < len(need), gather, len(slots)).astype(np.int32)
      cache = put_rows_jit(cache, scatter, part)
      logits_bv = logits_bv.at[scatter].set(part_logits, mode="drop")
    for r in slots:
      if r is not None:
        r.fed += len(r.pending)
        r.pending = []
    return cache, logits_bv

  def _prefill(self, state, rows: list[_Row], n: int):
    """Each group's prompt run once, then copied to its N rows; returns cache and logits."""
    firsts = rows[::n]
    slots: list[_Row | None] = list(firsts) + [None] * (
      _bucket(len(firsts), self.min_batch) - len(firsts)
    )
    for r in firsts:
      r.pending = r.conv.prompt_ids()
    need = max(-(-len(r.pending) // self.append_chunk) * self.append_chunk for r in firsts)
    cache = Cache.zeros(self.model.config, len(slots), self._cache_length(need))
    logits_bv = jnp.zeros((len(slots), self.model.config.vocab_size), jnp.float32)
    cache, logits_bv = self._append_pending(state, cache, logits_bv, slots)
    for r in rows:
      r.fed = rows[r.group * n].fed
    return cache, logits_bv

  def _start_turn(self, slots: list[_Row | None], budget: np.ndarray) -> np.ndarray:
    """Each slot's constraint for the turn about to be sampled; returns the ids each may
    sample first (bool [B, V]; every id for a free slot)."""
    vocab = self.constraints.vocab.size
    self._turn, self._budget = [], budget
    self._masks = np.ones((len(slots), self.model.config.vocab_size), bool)
    for s, r in enumerate(slots):
      c = None
      if r is not None:
        context = self.renderer.decode(r.conv.prompt_ids()).encode()
        c = self.constraints.start(self.renderer.tools, episode_services(r.task), context)
        self._masks[s] = False
        self._masks[s, :vocab] = self._mask_of(c, int(budget[s]) - 1)
      self._turn.append(c)
    return self._masks.copy()

  def _mask_of(self, c, budget: int) -> np.ndarray:
    return c.proposal(budget) if self.propose else c.allowed(budget)

  def _check(self, token_b, live_b, step) -> tuple[np.ndarray, np.ndarray]:
    """`Check` for `sample_turn`: whether each live slot's draw from its proposal is one its
    constraint allows; where not, the ids it allows (with the tokens its turn has left)."""
    token_b, live_b, step = np.asarray(token_b), np.asarray(live_b), int(step)
    vocab = self.constraints.vocab.size
    kept_b = np.ones(len(self._turn), bool)
    whole_bv = np.ones_like(self._masks)
    for s, c in enumerate(self._turn):
      if c is not None and live_b[s] and not c.admits(int(token_b[s])):
        kept_b[s] = False
        whole_bv[s] = False
        whole_bv[s, :vocab] = c.allowed(int(self._budget[s]) - step - 1)
    return kept_b, whole_bv

  def _advance(self, token_b, live_b, step) -> np.ndarray:
    """`Advance` for `sample_turn`: feeds each live slot its sampled id and returns the ids it
    may sample next (given the tokens its turn has left after that one)."""
    token_b, live_b, step = np.asarray(token_b), np.asarray(live_b), int(step)
    vocab = self.constraints.vocab.size
    for s, c in enumerate(self._turn):
      if c is not None and live_b[s]:
        c.advance(int(token_b[s]))
        self._masks[s, :vocab] = self._mask_of(c, int(self._budget[s]) - step - 2)
    return self._masks.copy()

  def _execute(self, row: _Row, parsed: ParsedAssistant) -> list[dict[str, Any]]:
    """Runs the turn's calls in the row's fork; one tool message per call, an error envelope per
    malformed call (as `compoworld.agents.episode.run_episode` answers one)."""
    assistant = row.conv.messages[-1]
    messages = []
    for call, parsed_call in zip(assistant.get("tool_calls") or [], parsed.tool_calls, strict=True):
      arguments, bad = parse_arguments(parsed_call["arguments"])
      name = parsed_call["name"]
      envelope = bad if bad is not None else row.env.call_meta(name, arguments)
      messages.append((call["id"], envelope))
    for k, message in enumerate(parsed.errors, 1):
      messages.append((f"malformed_{row.turns}_{k}", error(400, "malformed_call", message)))
    row.tool_calls += len(messages)
    row.tool_errors += sum(not env["ok"] for _, env in messages)
    return [
      {"role": "tool", "tool_call_id": call_id, "content": json.dumps(envelope)}
      for call_id, envelope in messages
    ]

  def _after_turn(self, row: _Row, ids: list[int], logps: list[float]) -> None:
    """Records a generated turn, plays its tool calls and queues the next prompt."""
    cfg = self.config
    start = len(row.conv.ids) + len(self.renderer.generation_prompt)
    parsed = row.conv.append_generated(ids)
    row.logprobs += [0.0] * (len(row.conv.ids) - len(row.logprobs))
    row.logprobs[start : start + len(ids)] = logps
    row.fed += len(ids)
    row.turns += 1
    row.generated += len(ids)
    if not parsed.ended:  # cut off by the turn or the total token budget
      row.done = True
      return
    if parsed.kind == "final":
      row.final_answer, row.finished, row.done = parsed.content, True, True
      return
    t0 = time.perf_counter()
    tool_messages = self._execute(row, parsed)
    row.env_seconds += time.perf_counter() - t0
    row.conv.append(tool_messages)
    row.logprobs += [0.0] * (len(row.conv.ids) - len(row.logprobs))
    pending = row.conv.prompt_ids()[row.fed :]
    # The next turn needs its prompt plus at least one generated id within the token budget.
    if row.turns >= cfg.max_turns or row.fed + len(pending) + 1 > cfg.max_total_tokens:
      row.done = True
      return
    row.pending = pending

  def _finish(self, row: _Row) -> Rollout:
    t0 = time.perf_counter()
    result = row.task.verify(row.env, row.final_answer)
    row.env_seconds += time.perf_counter() - t0
    n = row.fed  # what the policy saw: prompt, its own ids, tool turns; no trailing unfed ids
    mask = np.asarray(row.conv.loss_mask[:n], bool)
    return Rollout(
      task_id=row.task.id,
      group=row.group,
      index=row.index,
      tokens=np.asarray(row.conv.ids[:n], np.int32),
      loss_mask=mask,
      logprobs=np.where(mask, np.asarray(row.logprobs[:n], np.float32), 0.0).astype(np.float32),
      messages=row.conv.messages,
      final_answer=row.final_answer,
      finished=row.finished,
      turns=row.turns,
      tool_calls=row.tool_calls,
      tool_errors=row.tool_errors,
      criteria=list(result.ids),
      passed=np.asarray(result.passed("gated"), bool),
      generated_tokens=row.generated,
      env_seconds=row.env_seconds,
      raw_passed=np.asarray(result.passed("independent"), bool),
    )

  def _new_rows(self, tasks: Sequence[Task], first_group: int = 0) -> list[_Row]:
    n = self.config.num_rollouts
    rows = []
    for g, task in enumerate(tasks):
      t0 = time.perf_counter()
      s0 = task.make_env()
      forks = [s0.fork() for _ in range(n)]
      setup = (time.perf_counter() - t0) / n
      for i, env in enumerate(forks):
        conv = start_conversation(self.renderer, task)
        row = _Row(task, g, i, (first_group + g) * n + i, env, conv, env_seconds=setup)
        row.logprobs = [0.0] * len(conv.ids)
        rows.append(row)
      prompt = len(rows[-1].conv.prompt_ids())
      if prompt + 1 > self.config.max_total_tokens:
        raise ValueError(
          f"task {task.id}: the prompt is {prompt} tokens, so nothing fits in "
          f"max_total_tokens={self.config.max_total_tokens}"
        )
    return rows

  def run(
    self,
    tasks: Sequence[Task],
    *,
    seed: int,
    state: nnx.State | None = None,
    first_group: int = 0,
  ) -> list[Rollout]:
    """len(tasks) * N rollouts, group-major order (group 0's N rollouts first). Each rollout
    plays in its own fork of the task's s0. `state` = the policy parameters to sample with
    (nnx.split(model)[1] layout); None = the model's current ones. Deterministic given seed.
    `first_group`: these tasks are groups first_group, ... of a bigger batch whose other groups
    another process plays; each rollout samples as it would in the whole batch."""
    if not tasks:
      return []
    cfg = self.config
    state = state if state is not None else nnx.state(self.model)
    rows = self._new_rows(tasks, first_group)
    cache, logits_bv = self._prefill(state, rows, cfg.num_rollouts)
    key = jax.random.key(seed)
    # The cache slot of each row; after the prefill, the slot of its group's prompt.
    slot_of = {r.row_id: r.group for r in rows}
    batch = logits_bv.shape[0]
    while True:
      live = [r for r in rows if not r.done]
      if not live:
        break
      # Compact: the rows still playing, gathered into the smallest bucket that holds them.
      source = [slot_of[r.row_id] for r in live]
      size = _bucket(len(live), self.min_batch)
      if size != batch or source != list(range(len(live))):
        gather = np.asarray(source + [source[0]] * (size - len(live)), np.int32)
        cache = take_rows_jit(cache, gather)
        logits_bv = jnp.take(logits_bv, gather, axis=0)
      slots: list[_Row | None] = live + [None] * (size - len(live))
      slot_of, batch = {r.row_id: s for s, r in enumerate(live)}, size
      budget = np.zeros((size,), np.int32)
      row_ids = np.zeros((size,), np.int32)
      turn = np.zeros((size,), np.int32)
      for s, r in enumerate(live):
        budget[s] = min(cfg.max_new_tokens_per_turn, cfg.max_total_tokens - r.fed)
        row_ids[s], turn[s] = r.row_id, r.turns
      # A done row still writes (and ignores) one KV slot at its length each step.
      cache = self._with_room(cache, max(r.fed for r in live) + int(budget.max()) + 1)
      mask = self._start_turn(slots, budget) if self.constraints is not None else None
      ids, logps, counts, cache, logits_bv = sample_turn(
        self.graphdef, state, cache, logits_bv, budget, row_ids, turn, key, mask,
        sampler=self.sampler,
        steps=cfg.max_new_tokens_per_turn,
        stop_id=self.renderer.im_end_id,
        temperature=cfg.temperature,
        advance=self._advance if mask is not None else None,
        check=self._check if mask is not None and self.propose else None,
      )  # fmt: skip
      ids, logps, counts = np.asarray(ids), np.asarray(logps), np.asarray(counts)
      for s, r in enumerate(live):
        k = int(counts[s])
        self._after_turn(r, ids[s, :k].tolist(), logps[s, :k].tolist())
      if any(r.pending for r in live):
        cache, logits_bv = self._append_pending(state, cache, logits_bv, slots)
    return [self._finish(r) for r in rows]
