"""Where a policy loses: a teacher-forced breakdown of its held-out turns.

For each assistant turn of reference trajectories (the oracle's), the policy is conditioned on
the true history and its greedy argmax is compared with every target token, as the SFT turn
match does (``rl.sft.trainer.turn_matches``), but split by what the turn is made of:

- ``sentence``: the text before the first ``<tool_call>`` ("Now I'll call get_invoice on ...");
- ``header``: the call up to its tool's arguments (``{"name": "call_tool", "arguments":
  {"service": ..., "tool": ..., "arguments": ``): which service and tool;
- ``arguments``: the tool's arguments and the end of the turn;
- ``final``: a turn with no call (the final answer).

Each argument value (a JSON leaf) is also scored on its own, grouped by whether its text appears
in the conversation before the turn (``copied``: a value the policy has to copy from the
instruction or a tool reply) or not (``written``: a constant, a reformatted date, a sum), and by
JSON type. A value is reproduced when every token overlapping it is the argmax.

With a copy head (`models.copy_head`), ``copy_start`` looks at each copied value's first token,
where the copy is chosen: how often the gate is open (g > 1/2), the pointer's top position and
the LM head alone name the right token, and the mixture is right with the gate open or closed;
and whether the token stands earlier in the context as the next token of some position (what a
pointer over tokens can copy: ``token_in_context``) or does in its other form, with or without
its leading space (what a pointer over words, ``copy_head_forms``, can: ``word_in_context``).
With ``copy_head_match_gate``, ``match_gate`` is the gate's mean share of the match bonus at the
copied values' first tokens, at their later tokens (a copy continued) and at every other token
of the turns that call a tool.
"""

from __future__ import annotations

import collections
import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from tqdm import tqdm

from models.copy_head import pointer_weights
from models.model import lm_head
from rl.data.chat import IM_END, TOOL_CALL, ChatRenderer, assistant_body, conversation_turns
from rl.data.tokenizer import word_forms

PARTS = ("sentence", "header", "arguments")
_ARGS_MARK = '"arguments": '


def value_leaves(value: Any) -> Iterable[Any]:
  """The scalar values inside a JSON value (not None, not booleans), depth first."""
  if isinstance(value, dict):
    for v in value.values():
      yield from value_leaves(v)
  elif isinstance(value, list):
    for v in value:
      yield from value_leaves(v)
  elif value is not None and not isinstance(value, bool):
    yield value


def _inner_arguments(message: dict[str, Any]) -> Any:
  """The arguments of a call_tool call (the tool's own), else the call's arguments."""
  fn = message["tool_calls"][0].get("function", {})
  args = fn.get("arguments")
  args = json.loads(args) if isinstance(args, str) else (args or {})
  return args.get("arguments", args) if isinstance(args, dict) else args


class _Scorer:
  """Greedy argmax of one padded row, jitted once per row length; with a copy head also, at
  each position, its gate g, the LM head's own argmax and the token after the position the
  pointer weighs most (with word forms, in the form its gate prefers)."""

  def __init__(self, model, pad_id: int):
    self.graphdef, self.state = nnx.split(model)
    self.pad_id = pad_id
    self.copy_head = bool(getattr(getattr(model, "config", None), "copy_head", False))
    self._fwd = jax.jit(self._parts)

  def _parts(self, state, tokens_bt):
    model = nnx.merge(self.graphdef, state)
    if not self.copy_head:
      return {"argmax": model(tokens_bt).argmax(-1)}
    out = model.forward(tokens_bt)
    pointer = out.pointer
    weights_bts, _ = pointer_weights(pointer)
    pointed_bt = jnp.take_along_axis(pointer.values_bs, weights_bts.argmax(-1), axis=1)
    if pointer.form_bk is not None:  # a word: the form its gate prefers
      pointed_bt = jnp.where(pointer.form_bk > 0, pointer.spaced_v[pointed_bt], pointed_bt)
    parts = {
      "argmax": out.logits.argmax(-1),
      "gate": jax.nn.sigmoid(pointer.gate_bk),
      "lm_head": lm_head(out.hidden, model.head_weight()).argmax(-1),
      "pointer": pointed_bt,
    }
    if pointer.match_gate_bk is not None:
      parts["match_gate"] = pointer.match_gate_bk
    return parts

  def score(self, ids: Sequence[int], row: int) -> dict[str, np.ndarray]:
    tokens = np.full((1, row), self.pad_id, np.int32)
    tokens[0, : len(ids)] = ids
    parts = self._fwd(self.state, jnp.asarray(tokens))
    return {k: np.asarray(v)[0, : len(ids)] for k, v in parts.items()}


def diagnose(
  model, renderer: ChatRenderer, records: Sequence[dict[str, Any]], max_len: int = 2048,
  examples: int = 20, progress: bool = False,
) -> dict[str, Any]:  # fmt: skip
  """The breakdown (see the module docstring) over ``records``' assistant turns that fit in
  ``max_len`` tokens; ``examples`` copied values the policy missed are listed with what it wrote.
  """
  scorer = _Scorer(model, renderer.tokenizer.pad_id)
  plain_v = word_forms(renderer.tokenizer)[0] if scorer.copy_head else None
  counts: collections.Counter = collections.Counter()
  values: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
  starts: collections.Counter = collections.Counter()  # the copy head at copied values' starts
  missed: list[dict[str, str]] = []
  match_gate: dict[str, list[float]] = collections.defaultdict(list)  # by where in a turn
  for record in tqdm(records, desc="diagnose", mininterval=1.0, disable=not progress):
    conv = renderer.conversation()
    turns: list[tuple[int, dict[str, Any], str]] = []  # (where its ids start, message, context)
    context = ""
    for turn in conversation_turns(record["messages"], renderer.tools):
      if turn[0]["role"] == "assistant":
        turns.append((len(conv.prompt_ids()), turn[0], context))
      elif turn[0]["role"] in ("user", "tool"):
        context += "".join(m.get("content") or "" for m in turn)
      conv.append(turn)
    ids = conv.ids[:max_len]
    scored = scorer.score(ids, max_len)
    pred = scored["argmax"]
    for start, message, before in turns:
      body = assistant_body(message)
      target = renderer.encode_text(body + IM_END)
      if start + len(target) > len(ids):
        break
      ok = pred[start - 1 : start - 1 + len(target)] == np.asarray(target)
      ends = np.cumsum([len(renderer.decode([t])) for t in target])
      spans = np.stack([ends - [len(renderer.decode([t])) for t in target], ends], 1)

      def reproduced(a: int, b: int, spans=spans, ok=ok) -> bool:
        hit = (spans[:, 0] < b) & (spans[:, 1] > a)
        return bool(ok[hit].all())

      counts["turns"] += 1
      counts["turns_matched"] += int(ok.all())
      where = np.full(len(target), "other", object)  # each target token: in a copy or not
      if not message.get("tool_calls"):
        counts["final"] += 1
        counts["final_matched"] += int(ok.all())
        continue
      call = body.index(TOOL_CALL)
      inner = body.find(_ARGS_MARK, body.find(_ARGS_MARK, call) + 1)
      inner = inner if inner >= 0 else body.find(_ARGS_MARK, call)
      counts["calls"] += 1
      bounds = {"sentence": (0, call), "header": (call, inner), "arguments": (inner, len(body) + 1)}
      for part, (a, b) in bounds.items():
        counts[f"{part}_matched"] += reproduced(a, b)
      at = inner
      for value in value_leaves(_inner_arguments(message)):
        text = json.dumps(value, ensure_ascii=False)
        j = body.find(text, at)
        if j < 0:
          continue
        at = j + len(text)
        copied = str(value) in before
        kind = ("copied_" if copied else "written_") + (
          "string" if isinstance(value, str) else "number"
        )
        hit = reproduced(j, j + len(text))
        values[kind][0] += int(hit)
        values[kind][1] += 1
        if copied and scorer.copy_head:
          first = j + int(isinstance(value, str))  # the value's first character, past a quote
          k = int(np.flatnonzero((spans[:, 0] <= first) & (spans[:, 1] > first))[0])
          last = int(np.flatnonzero(spans[:, 0] < j + len(text))[-1])
          where[k], where[k + 1 : last + 1] = "copy_start", "copy_continue"
          q = start - 1 + k
          _count_copy_start(starts, scored, q, target[k])
          starts["token_in_context"] += int(target[k] in ids[1 : q + 1])
          starts["word_in_context"] += int(plain_v[target[k]] in plain_v[ids[1 : q + 1]])
        if copied and not hit and len(missed) < examples:
          sel = (spans[:, 0] < j + len(text)) & (spans[:, 1] > j)
          wrote = renderer.decode(pred[start - 1 : start - 1 + len(target)][sel])
          missed.append({"value": text, "wrote": wrote})
      if "match_gate" in scored:
        for k, kind in enumerate(where):
          match_gate[kind].append(float(scored["match_gate"][start - 1 + k]))
  calls, turns = max(counts["calls"], 1), max(counts["turns"], 1)
  copy_start = {}
  if starts["values"]:
    copy_start = {"values": starts["values"]}
    copy_start |= {k: starts[k] / starts["values"] for k in _START_KEYS}
    for gate in ("open", "closed"):
      n = starts[gate]
      copy_start[f"right_when_{gate}"] = starts[f"right_{gate}"] / n if n else None
  return {
    "turns": counts["turns"],
    "turn_match": counts["turns_matched"] / turns,
    "calls": counts["calls"],
    **{f"{part}_match": counts[f"{part}_matched"] / calls for part in PARTS},
    "final_turns": counts["final"],
    "final_match": counts["final_matched"] / max(counts["final"], 1),
    "values": {k: {"reproduced": v[0], "total": v[1], "share": v[0] / v[1]} for k, v in sorted(values.items())},
    "missed_copies": missed,
    "copy_start": copy_start,
    "match_gate": {kind: float(np.mean(g)) for kind, g in sorted(match_gate.items())},
  }  # fmt: skip


_START_KEYS = ("right", "gate_open", "pointer_right", "lm_head_right")
_START_KEYS += ("token_in_context", "word_in_context")


def _count_copy_start(starts: collections.Counter, scored, q: int, target: int) -> None:
  """Counts, at query position ``q`` whose target is a copied value's first token: the mixture's
  argmax right, the gate open (g > 1/2), each part's argmax right, and right by the gate."""
  right = int(scored["argmax"][q] == target)
  gate = "open" if scored["gate"][q] > 0.5 else "closed"
  starts["values"] += 1
  starts["right"] += right
  starts["gate_open"] += int(gate == "open")
  starts["pointer_right"] += int(scored["pointer"][q] == target)
  starts["lm_head_right"] += int(scored["lm_head"][q] == target)
  starts[gate] += 1
  starts[f"right_{gate}"] += right


def diagnose_policy(
  policy_dir: str | Path, trajectories: str | Path, num: int = 0, max_len: int = 0
) -> dict[str, Any]:
  """`diagnose` of the exported policy in ``policy_dir`` on the first ``num`` (0: all)
  trajectories of a JSONL file; ``max_len`` 0 takes the length the policy was trained at
  (its SFT config beside it), else 4096."""
  from compoworld.agents.trajectories import load_trajectories
  from rl.serve.policy import load_policy_parts

  model, tokenizer, path = load_policy_parts(policy_dir)
  records = load_trajectories(trajectories)
  records = records[:num] if num else records
  if not max_len:
    sft_config = Path(policy_dir).parent / "config.json"
    trained = json.loads(sft_config.read_text())["data"]["seq_len"] if sft_config.is_file() else 0
    max_len = trained or 4096
  out = diagnose(model, ChatRenderer(tokenizer), records, max_len=max_len, progress=True)
  return {"policy": str(path), "trajectories": str(trajectories), "records": len(records),
          "max_len": max_len, **out}  # fmt: skip
