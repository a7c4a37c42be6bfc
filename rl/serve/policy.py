"""The policy as a chat model: a checkpoint, its tokenizer and the project's chat format.

A served checkpoint is a directory laid out as::

  DIR/config.json              the model config: ``dataclasses.asdict(ModelConfig)``
  DIR/tokenizer.model          the tokenizer (``rl.data.tokenizer.load_tokenizer``): the project's
  (or DIR/tokenizer.json)      SentencePiece model, or an imported checkpoint's Hugging Face one
  DIR/checkpoints/<step>/      an Orbax checkpoint of ``nnx.state(model)``; the largest step is
                               served (a training run's workdir)

or with the Orbax checkpoint of ``nnx.state(model)`` in ``DIR`` itself (config and tokenizer beside
it). ``save_policy`` writes the first layout. ``Policy.chat`` renders OpenAI-style messages with
``rl.data.chat.ChatRenderer``, generates with the model's ``prefill`` / ``decode_step`` caches up to
``<|im_end|>`` or a token budget, and parses the turn into content or tool calls.

With ``constrained=True`` (the policy's default, or per ``chat`` call) a turn that may call tools
is decoded under the grammar of ``rl.decoding.constrained``: each step's logits are masked to the tokens
that keep the turn a valid prefix of content and tool calls whose names and arguments follow the
tools' JSON Schemas, so every call parses. ``tool_choice="required"`` or a named function
constrains the forced call and any after it; ``"auto"`` leaves content free until ``<tool_call>``.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import shutil
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp
from flax import nnx

from models import ModelConfig, Transformer, abstract_model, decode_step, prefill
from models.decode import take_rows
from rl import distributed
from rl.data.chat import IM_END, TOOL_CALL, ChatRenderer, ParsedAssistant
from rl.data.tokenizer import TOKENIZER_FILES, Tokenizer, load_tokenizer
from rl.decoding.arguments import ArgumentConstraint, Schemas
from rl.decoding.constrained import Constraint, TokenConstraint, ToolCallGrammar, Vocabulary
from rl.decoding.narration import NarratedConstraint, instruction_sentences

CONFIG_FILE = "config.json"
CHECKPOINTS_DIR = "checkpoints"
#: Files Orbax writes at the top of every checkpoint it saves.
_ORBAX_MARKERS = ("_CHECKPOINT_METADATA", "_METADATA")


class RequestError(ValueError):
  """A request the policy cannot serve; ``param`` names the offending field."""

  def __init__(self, message: str, param: str | None = None):
    super().__init__(message)
    self.param = param


class ContextFull(RequestError):
  """The conversation leaves no room for another generated token."""


# --- checkpoints -----------------------------------------------------------------------------


def config_to_json(config: ModelConfig) -> dict[str, Any]:
  return dataclasses.asdict(config)


def config_from_json(data: dict[str, Any]) -> ModelConfig:
  fields = {f.name for f in dataclasses.fields(ModelConfig)}
  unknown = sorted(set(data) - fields)
  if unknown:
    raise ValueError(
      f"{CONFIG_FILE}: unknown ModelConfig fields {unknown}; valid: {sorted(fields)}"
    )
  return ModelConfig(**data)


def _is_orbax(path: Path) -> bool:
  return any((path / marker).exists() for marker in _ORBAX_MARKERS)


def _is_orbax_item(path: Path) -> bool:
  """A checkpoint of one item (``nnx.state(model)``), not a manager's composite of items."""
  return (path / "_METADATA").exists()


def _latest_step(directory: Path) -> Path | None:
  steps = [p for p in directory.iterdir() if p.is_dir() and p.name.isdigit()]
  return max(steps, key=lambda p: int(p.name)) if steps else None


#: Where a training run exports its servable policy inside its workdir.
POLICY_DIR = "policy"


def find_checkpoint(directory: str | Path) -> Path:
  """The Orbax checkpoint to serve from ``directory``: the latest ``checkpoints/<step>``, the
  latest ``<step>``, or ``directory`` itself."""
  directory = Path(directory)
  if not directory.is_dir():
    raise FileNotFoundError(f"checkpoint directory {str(directory)!r} does not exist")
  if (directory / POLICY_DIR).is_dir():
    directory = directory / POLICY_DIR  # an SFT/GRPO workdir: the policy exported at its end
  for parent in (directory / CHECKPOINTS_DIR, directory):
    step = _latest_step(parent) if parent.is_dir() else None
    if step is not None and _is_orbax(step / "state") and not _is_orbax_item(step):
      # A training checkpoint (weights with optimizer and data state, one item each).
      raise FileNotFoundError(
        f"{directory} holds training checkpoints ({step}) but no exported policy: a training "
        f"run writes its servable policy to {POLICY_DIR}/ in its workdir when it finishes; "
        f"`python -m experiments.export_policy --workdir=RUN [--step=N]` exports one from an "
        f"SFT run's checkpoint"
      )
    if step is not None and _is_orbax(step):
      return step
  if _is_orbax(directory):
    return directory
  raise FileNotFoundError(
    f"no Orbax checkpoint in {directory}: expected {CHECKPOINTS_DIR}/<step>/ (a training run's "
    "workdir), <step>/, or the checkpoint itself"
  )


def _beside(checkpoint: Path, *names: str) -> Path:
  """The first of ``names`` in the checkpoint's directory or up to two above it
  (``DIR/checkpoints/<step>``), nearest first."""
  for d in (checkpoint, checkpoint.parent, checkpoint.parent.parent):
    for name in names:
      if (d / name).is_file():
        return d / name
  raise FileNotFoundError(
    f"no {' or '.join(names)} in {checkpoint} or the two directories above it"
  )


def savable(tree: Any) -> Any:
  """``tree`` with its zero-size arrays as None, which Orbax saves as nothing: it refuses to save
  a zero-size array, and a model with ``full_attention_interval=1`` has an empty DeltaNet stack
  in every block. `unsavable` puts them back after a restore."""
  return jax.tree.map(lambda x: None if getattr(x, "size", 1) == 0 else x, tree)


def unsavable(restored: Any, like: Any) -> Any:
  """A tree restored into a `savable` target, with the zero-size arrays of ``like`` (the tree
  it was made from: arrays or shape-dtype structs) back in place as zeros."""
  return jax.tree.map(
    lambda r, x: jnp.zeros(x.shape, x.dtype) if r is None else r,
    restored,
    like,
    is_leaf=lambda x: x is None,
  )


def save_policy(
  directory: str | Path,
  model: Transformer,
  tokenizer: Tokenizer,
  step: int = 0,
) -> Path:
  """Writes ``config.json``, the tokenizer (``tokenizer.model`` or ``tokenizer.json``) and
  ``checkpoints/<step>/``; returns the latter."""
  directory = Path(directory).absolute()
  if not hasattr(tokenizer, "save"):
    raise TypeError(f"{type(tokenizer).__name__} cannot be saved beside a checkpoint")
  path = directory / CHECKPOINTS_DIR / str(step)
  if jax.process_index() == 0:  # in a multi-process run every process saves its shards below
    directory.mkdir(parents=True, exist_ok=True)
    (directory / CONFIG_FILE).write_text(json.dumps(config_to_json(model.config), indent=2) + "\n")
    tokenizer.save(directory)
    if path.exists():  # a run restarted after it ended exports the same step again
      shutil.rmtree(path)
  distributed.barrier(f"save_policy {path}")
  with ocp.StandardCheckpointer() as checkpointer:
    checkpointer.save(path, savable(nnx.state(model)))
  return path


#: Model config fields a loaded policy may change: how it computes, not what its parameters are.
RUNTIME_FIELDS = ("remat", "moe_backend", "moe_tile", "moe_groups", "dtype", "deltanet_chunk")


def load_policy_parts(
  directory: str | Path, overrides: dict[str, Any] | None = None
) -> tuple[Transformer, Tokenizer, Path]:
  """The model and tokenizer of the checkpoint ``find_checkpoint(directory)`` finds;
  ``overrides`` replace `RUNTIME_FIELDS` of its model config (e.g. ``remat`` for training)."""
  path = find_checkpoint(Path(directory).absolute())
  config = config_from_json(json.loads(_beside(path, CONFIG_FILE).read_text()))
  if overrides:
    if bad := sorted(set(overrides) - set(RUNTIME_FIELDS)):
      raise ValueError(
        f"a loaded policy's {bad} cannot change (its parameters would); "
        f"only {', '.join(RUNTIME_FIELDS)} can"
      )
    config = dataclasses.replace(config, **overrides)
  tokenizer = load_tokenizer(_beside(path, *TOKENIZER_FILES).parent)
  if tokenizer.vocab_size > config.vocab_size:
    raise ValueError(
      f"the tokenizer has {tokenizer.vocab_size} ids but the model only {config.vocab_size}"
    )
  graphdef, target = nnx.split(abstract_model(config))
  # Restored whole onto this process's first device, however many devices and processes saved
  # it (without a sharding, Orbax refuses a checkpoint written by several processes).
  device = jax.sharding.SingleDeviceSharding(jax.local_devices()[0])
  target = jax.tree.map(
    lambda x: (
      jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=device)
      if isinstance(x, jax.ShapeDtypeStruct)
      else x
    ),
    target,
  )
  with ocp.StandardCheckpointer() as checkpointer:
    state = unsavable(checkpointer.restore(path, savable(target)), target)
  return nnx.merge(graphdef, state), tokenizer, path


# --- generation ------------------------------------------------------------------------------


#: A JSON string's closing quote, as a byte.
_QUOTE = 0x22

_take_rows = jax.jit(take_rows)


def _logsumexp(x: np.ndarray) -> float:
  m = float(np.max(x))
  return m + float(np.log(np.sum(np.exp(x - m))))


def _bucket(n: int, least: int) -> int:
  return max(least, 1 << (n - 1).bit_length())


@dataclasses.dataclass(frozen=True)
class Completion:
  """One generated assistant turn."""

  ids: list[int]  # generated ids, forced prefix included, <|im_end|> included when reached
  text: str
  parsed: ParsedAssistant | None  # None when tool calls were not asked for (tool_choice="none")
  finish_reason: str  # "stop", "tool_calls" or "length"
  prompt_tokens: int

  def message(self) -> dict[str, Any]:
    """The turn as an OpenAI assistant message. A turn that does not parse (bad tool-call JSON)
    comes back whole as content, as OpenAI-compatible servers do."""
    if self.parsed is None:
      return {"role": "assistant", "content": self.text.removesuffix(IM_END)}
    if self.parsed.tool_calls:
      msg = self.parsed.to_message(call_id_prefix=f"call_{abs(hash(tuple(self.ids))) % 10**8}")
      msg["content"] = msg["content"] or None
      return msg
    if self.parsed.errors:
      return {"role": "assistant", "content": self.text.removesuffix(IM_END)}
    return {"role": "assistant", "content": self.parsed.content}


class Policy:
  """A model and tokenizer that answer chat requests in the project's chat format.

  ``max_context`` bounds prompt plus generated tokens; a request without ``max_tokens`` gets
  ``default_max_tokens`` or what the context has left. Prompts and caches are padded to powers
  of two from ``min_bucket``, so each bucket compiles once (``min_bucket=max_context``: one shape
  ever). Generation holds a lock: one request at a time per policy. ``constrained`` is whether
  ``chat`` decodes tool calls under their schemas' grammar when a call does not say.
  """

  def __init__(
    self,
    model: Transformer,
    tokenizer: Tokenizer,
    *,
    max_context: int = 8192,
    default_max_tokens: int = 1024,
    min_bucket: int = 64,
    name: str = "policy",
    constrained: bool = False,
    grounded: bool = False,
  ):
    if tokenizer.vocab_size > model.config.vocab_size:
      raise ValueError(
        f"the tokenizer has {tokenizer.vocab_size} ids but the model only {model.config.vocab_size}"
      )
    self.model, self.tokenizer, self.name = model, tokenizer, name
    if max_context < 2 or default_max_tokens < 1 or min_bucket < 1:
      raise ValueError("max_context >= 2, default_max_tokens >= 1 and min_bucket >= 1 are needed")
    self.max_context, self.default_max_tokens = max_context, default_max_tokens
    self.min_bucket = min_bucket
    self.renderer = ChatRenderer(tokenizer)
    self.constrained, self.grounded = constrained, grounded
    self._vocab: Vocabulary | None = None
    self._grammars: OrderedDict[str, TokenConstraint] = OrderedDict()
    self._lock = threading.Lock()
    graphdef, state = nnx.split(model)
    self._state = state

    @functools.partial(jax.jit, static_argnames=("max_len",))
    def _prefill(state, tokens_bt, lengths_b, max_len):
      return prefill(nnx.merge(graphdef, state), tokens_bt, lengths_b, max_len)

    @jax.jit
    def _decode(state, tokens_b, cache):
      return decode_step(nnx.merge(graphdef, state), tokens_b, cache)

    self._prefill, self._decode = _prefill, _decode

  @classmethod
  def load(cls, directory: str | Path, **kwargs: Any) -> Policy:
    """The policy of a checkpoint directory (see the module docstring for the layout)."""
    model, tokenizer, path = load_policy_parts(directory)
    kwargs.setdefault("name", Path(directory).absolute().name)
    policy = cls(model, tokenizer, **kwargs)
    policy.checkpoint = path
    return policy

  # -- the pieces, overridable (tests script ``generate``) --

  def prompt(
    self,
    messages: Sequence[dict[str, Any]],
    tools: Sequence[dict[str, Any]] = (),
    tool_choice: Any = "auto",
  ) -> tuple[list[int], list[int]]:
    """The prompt ids, and the ids the turn is forced to start with (``tool_choice``)."""
    forced = ""
    if tool_choice == "none":
      tools = ()
    elif tool_choice == "required":
      forced = f"{TOOL_CALL}\n"
    elif isinstance(tool_choice, dict):
      name = (tool_choice.get("function") or {}).get("name")
      names = [t.get("function", {}).get("name") for t in tools]
      if name not in names:
        raise RequestError(f"tool_choice names {name!r}, not one of tools {names}", "tool_choice")
      forced = f'{TOOL_CALL}\n{{"name": {json.dumps(name)}, "arguments": '
    renderer = ChatRenderer(self.tokenizer, tools) if list(tools) != self.renderer.tools else None
    conv = (renderer or self.renderer).conversation(messages)
    return conv.prompt_ids(), self.renderer.encode_text(forced)

  def vocabulary(self) -> Vocabulary:
    """Each token id's bytes and special symbols, for the decoding constraints (built once)."""
    if self._vocab is None:
      self._vocab = Vocabulary.from_tokenizer(self.tokenizer, self.renderer.special_ids)
    return self._vocab

  def constraint(
    self, tools: Sequence[dict[str, Any]], tool_choice: Any, forced: Sequence[int] = ()
  ) -> Constraint:
    """A fresh grammar constraint for one turn calling ``tools`` (``required`` or a named
    function: the turn is calls only, of that function if named), after the ``forced`` ids.
    Grammars and their per-state masks are cached per tool set."""
    if isinstance(tool_choice, dict):
      name = (tool_choice.get("function") or {}).get("name")
      tools = [t for t in tools if t.get("function", t).get("name") == name]
    key = json.dumps(list(tools), sort_keys=True)
    if key not in self._grammars:
      self._grammars[key] = TokenConstraint(ToolCallGrammar(tools), self.vocabulary())
      while len(self._grammars) > 8:
        self._grammars.popitem(last=False)
    self._grammars.move_to_end(key)
    mode = "auto" if tool_choice == "auto" else "required"
    return self._grammars[key].start(mode, forced)

  def generate(
    self,
    prompt_ids: Sequence[int],
    max_tokens: int,
    temperature: float = 0.0,
    seed: int = 0,
    constraint: Constraint | None = None,
    copy_beam: int = 0,
  ) -> list[int]:
    """Up to ``max_tokens`` ids after ``prompt_ids``, stopping after ``<|im_end|>``; greedy at
    temperature 0, else sampled from softmax(logits / temperature). With a ``constraint``, each
    step samples only among the tokens it allows (given the tokens left), and advances it.

    With ``copy_beam`` = W > 1, greedy decoding and a constraint that grounds values
    (`rl.decoding.arguments.ArgumentConstraint`), each grounded value is chosen whole: a beam
    search of width W over its tokens, from its first token to the one that closes it, keeps the
    copy of highest total log-probability (`_copy_beam`) instead of the one the first token
    commits to."""
    n = len(prompt_ids)
    tokens = np.zeros((1, _bucket(n, self.min_bucket)), np.int32)
    tokens[0, :n] = prompt_ids
    max_len = _bucket(max(tokens.shape[1], n + max_tokens), self.min_bucket)
    rng = np.random.default_rng(seed)
    out: list[int] = []
    with self._lock:
      logits, cache = self._prefill(self._state, tokens, jnp.array([n], jnp.int32), max_len)
      while True:
        logits_v = np.asarray(logits[0], np.float64)[: self.tokenizer.vocab_size]
        if (
          copy_beam > 1
          and temperature == 0
          and getattr(constraint, "grounding", False)
          and not constraint.scanner.value
        ):
          found = self._copy_beam(logits_v, cache, constraint, max_tokens - len(out), copy_beam)
          if found is not None:  # else no value closes within the budget: greedy, as without
            ids, logits, cache = found
            out += ids
            for token in ids:
              constraint.advance(token)
            if ids[-1] == self.renderer.im_end_id or len(out) >= max_tokens:
              return out
            continue
        left = max_tokens - len(out) - 1  # tokens after this one
        if temperature == 0:  # greedy: a constraint finds its best token without a whole mask
          token = (
            int(np.argmax(logits_v)) if constraint is None else constraint.best(logits_v, left)
          )
        else:
          if constraint is not None:
            logits_v = np.where(constraint.allowed(left), logits_v, -np.inf)
          z = logits_v / temperature
          p = np.exp(z - z.max())
          token = int(rng.choice(len(p), p=p / p.sum()))
        out.append(token)
        if constraint is not None:
          constraint.advance(token)
        if token == self.renderer.im_end_id or len(out) >= max_tokens:
          return out
        logits, cache = self._decode(self._state, jnp.array([token], jnp.int32), cache)

  def _copy_beam(
    self, logits_v: np.ndarray, cache, constraint, budget: int, width: int
  ) -> tuple[list[int], jax.Array, Any] | None:
    """The ids of the grounded value ``constraint`` is at the start of (up to the one that
    closes it), chosen by a beam search of ``width`` over the model's log-probabilities among
    the ids the constraint allows, with ``budget`` ids left; with the logits and the cache
    after them (batch 1). Best-first: it stops once a closed value scores at least as high as
    every open beam (a longer beam only loses log-probability), so with ``width`` beams or
    fewer in play the value found is the most probable one. None when no value closes within
    the budget."""
    vocab = self.tokenizer.vocab_size
    im_end = self.renderer.im_end_id
    beams = [(0.0, [], constraint.copy())]  # (log-probability, ids, constraint) of open beams
    rows_v = logits_v[None]  # each open beam's next logits
    rows = cache  # their caches, one row each
    best = None  # (log-probability, ids, logits, cache) of the best closed value
    while beams:
      scored = []
      for j, (logp, ids, c) in enumerate(beams):
        lp = rows_v[j] - _logsumexp(rows_v[j])
        lp = np.where(c.allowed(budget - len(ids) - 1), lp, -np.inf)
        for token in np.argsort(-lp)[:width]:
          if np.isfinite(lp[token]):
            scored.append((logp + float(lp[token]), j, int(token)))
      scored = sorted(scored, key=lambda x: -x[0])[:width]
      if not scored or (best is not None and best[0] >= scored[0][0]):
        break
      grown = []
      for logp, j, token in scored:
        c = beams[j][2].copy()
        c.advance(token)
        grown.append((logp, beams[j][1] + [token], c, j))
      # One decode step for every grown beam, padded to `width` rows (one compiled shape).
      index = np.array([g[3] for g in grown] + [0] * (width - len(grown)), np.int32)
      tokens = np.array([g[1][-1] for g in grown] + [0] * (width - len(grown)), np.int32)
      logits_w, cache_w = self._decode(self._state, tokens, _take_rows(rows, index))
      logits_w = np.asarray(logits_w, np.float64)[:, :vocab]
      keep = []  # the grown beams still open
      for k, (logp, ids, c, _) in enumerate(grown):
        closed = not c.grounding or _QUOTE in self._token_text(ids[-1])
        if closed or ids[-1] == im_end or len(ids) >= budget:
          if best is None or logp > best[0]:
            best = (logp, ids, logits_w[k], _take_rows(cache_w, np.array([k], np.int32)))
        else:
          keep.append(k)
      beams = [grown[k][:3] for k in keep]
      if keep:
        rows_v = logits_w[keep]
        rows = _take_rows(cache_w, np.array(keep + keep[:1] * (width - len(keep)), np.int32))
    if best is None:
      return None
    return best[1], jnp.asarray(best[2][None]), best[3]

  def _token_text(self, token: int) -> bytes:
    return bytes(s for s in self.vocabulary().symbols[token] if s < 256)

  def chat(
    self,
    messages: Sequence[dict[str, Any]],
    tools: Sequence[dict[str, Any]] = (),
    tool_choice: Any = "auto",
    temperature: float = 0.0,
    max_tokens: int | None = None,
    seed: int = 0,
    constrained: bool | None = None,
    grammar_tools: Sequence[dict[str, Any]] | None = None,
    fit: bool = False,
    grounded: bool | None = None,
    schemas: Schemas | None = None,
    copy_beam: int = 0,
    narrations: Sequence[tuple[str, str]] | None = None,
    held_quotes: bool = False,
  ) -> Completion:
    """The next assistant turn for an OpenAI-style conversation; ``constrained`` (default: the
    policy's) decodes it under the tools' grammar when it may call tools: the grammar of
    ``grammar_tools`` when given (e.g. ``tools`` with enums, `rl.decoding.constrained.tools_with_enums`),
    while the prompt still shows ``tools``. A ``max_tokens`` the context cannot hold is a
    `RequestError`, or with ``fit`` (an agent's episode, as a rollout's turn budget) shortened to
    what the context leaves. What ``call_tool`` passes on is typed by the called tool's input
    schema from ``schemas`` (``(service, tool)`` → schema) and, with ``grounded`` (default: the
    policy's), its strings are copied from the conversation (`rl.decoding.arguments`); over the grammar
    when ``constrained``. ``copy_beam`` > 1 chooses each grounded value whole, greedy decoding
    (``generate``). With ``narrations`` (``(service, tool)`` pairs) and a constraint, a turn
    that starts "Now I'll call " names one of them and makes that call; with ``held_quotes`` a
    quote of the request (``Next step: "..."``) is one of its first user turn's sentences,
    whole (`rl.decoding.narration`; measured worse than a free quote, README)."""
    if max_tokens is not None and max_tokens < 1:
      raise RequestError(f"max_tokens must be at least 1, got {max_tokens}", "max_tokens")
    if temperature < 0:
      raise RequestError(f"temperature must be >= 0, got {temperature}", "temperature")
    try:
      prompt, forced = self.prompt(messages, tools, tool_choice)
    except (ValueError, TypeError, AttributeError, KeyError) as err:
      if isinstance(err, RequestError):
        raise
      raise RequestError(f"messages do not render in the chat format: {err}", "messages") from err
    budget = self.max_context - len(prompt) - len(forced)
    if budget < 1:
      raise ContextFull(
        f"the prompt is {len(prompt) + len(forced)} tokens; the context is {self.max_context}",
        "messages",
      )
    if max_tokens is None:
      max_tokens = min(self.default_max_tokens, budget)
    if fit:
      max_tokens = min(max_tokens, budget)
    if max_tokens > budget:
      raise RequestError(
        f"max_tokens={max_tokens} does not fit: the prompt is {len(prompt) + len(forced)} tokens "
        f"and the context {self.max_context}, so at most {max(budget, 0)} can be generated",
        "max_tokens",
      )
    constrained = self.constrained if constrained is None else constrained
    extra = {}
    if constrained and tools and tool_choice != "none":
      try:
        extra["constraint"] = self.constraint(grammar_tools or tools, tool_choice, forced)
      except ValueError as err:
        raise RequestError(f"tools cannot be decoded under their grammar: {err}", "tools") from err
    grounded = self.grounded if grounded is None else grounded
    if (grounded or schemas) and tools and tool_choice != "none":
      extra["constraint"] = ArgumentConstraint(
        self.vocabulary(),
        self.renderer.decode(prompt).encode(),
        inner=extra.get("constraint"),
        ground=grounded,
        schemas=schemas,
        forced=forced,
        composed=self.tokenizer.chat_composed,
      )
    if narrations and "constraint" in extra and tool_choice == "auto" and not forced:
      # with held_quotes a quote of the request is one of its sentences, whole
      sentences = instruction_sentences(messages) if held_quotes else ()
      extra["constraint"] = NarratedConstraint(
        extra["constraint"], self.vocabulary(), narrations, sentences
      )
    if copy_beam < 0:
      raise RequestError(f"copy_beam must be >= 0, got {copy_beam}", "copy_beam")
    if copy_beam > 1 and "constraint" in extra:
      extra["copy_beam"] = copy_beam
    generated = self.generate(prompt + forced, max_tokens, temperature, seed, **extra)
    ids = forced + generated
    text = self.renderer.decode(ids)
    ended = bool(generated) and generated[-1] == self.renderer.im_end_id
    parsed = self.renderer.parse_assistant(ids) if tools and tool_choice != "none" else None
    if parsed is not None and parsed.tool_calls and not parsed.errors:
      reason = "tool_calls"
    else:
      reason = "stop" if ended else "length"
    return Completion(ids, text, parsed, reason, len(prompt))
