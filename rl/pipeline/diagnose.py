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

from rl.data.chat import IM_END, TOOL_CALL, ChatRenderer, assistant_body, conversation_turns

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
  """Greedy argmax of one padded row, jitted once per row length."""

  def __init__(self, model, pad_id: int):
    self.graphdef, self.state = nnx.split(model)
    self.pad_id = pad_id
    self._fwd = jax.jit(lambda state, t: nnx.merge(self.graphdef, state)(t).argmax(-1))

  def argmax(self, ids: Sequence[int], row: int) -> np.ndarray:
    tokens = np.full((1, row), self.pad_id, np.int32)
    tokens[0, : len(ids)] = ids
    return np.asarray(self._fwd(self.state, jnp.asarray(tokens)))[0, : len(ids)]


def diagnose(
  model, renderer: ChatRenderer, records: Sequence[dict[str, Any]], max_len: int = 2048,
  examples: int = 20, progress: bool = False,
) -> dict[str, Any]:  # fmt: skip
  """The breakdown (see the module docstring) over ``records``' assistant turns that fit in
  ``max_len`` tokens; ``examples`` copied values the policy missed are listed with what it wrote.
  """
  scorer = _Scorer(model, renderer.tokenizer.pad_id)
  counts: collections.Counter = collections.Counter()
  values: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
  missed: list[dict[str, str]] = []
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
    pred = scorer.argmax(ids, max_len)
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
        if copied and not hit and len(missed) < examples:
          sel = (spans[:, 0] < j + len(text)) & (spans[:, 1] > j)
          wrote = renderer.decode(pred[start - 1 : start - 1 + len(target)][sel])
          missed.append({"value": text, "wrote": wrote})
  calls, turns = max(counts["calls"], 1), max(counts["turns"], 1)
  return {
    "turns": counts["turns"],
    "turn_match": counts["turns_matched"] / turns,
    "calls": counts["calls"],
    **{f"{part}_match": counts[f"{part}_matched"] / calls for part in PARTS},
    "final_turns": counts["final"],
    "final_match": counts["final_matched"] / max(counts["final"], 1),
    "values": {k: {"reproduced": v[0], "total": v[1], "share": v[0] / v[1]} for k, v in sorted(values.items())},
    "missed_copies": missed,
  }  # fmt: skip


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
