"""Detours: a wrong read the oracle makes and recovers from, so a policy sees what follows a
read that finds nothing.

A small policy's commonest failure is a wrong copy (README, "A policy that learns on a CPU"): it
searches for the other title the instruction names, or lists the draft posts where the
instruction asks for the published one, finds nothing, and goes on as if it had found something.
The oracle's own trajectories never show a read that finds nothing, so nothing teaches the step
after one. ``plan_detour`` picks one read of a solution and a wrong value for one of its string
arguments (another value the instruction or an earlier reply shows, another value of the
parameter's enum) such that the read finds nothing in the state it runs in: an empty page or a
404. The oracle (``OracleAgent(detours=...)``) plays that read before the right one. Its turn is
marked ``"trained": false`` (``TRAINED``), which `rl.data.chat` leaves out of the loss: the
policy learns the recovery, never the mistake. Reads change no state, so the trajectory verifies
as the plain one does.
"""

from __future__ import annotations

import dataclasses
import json
import random
import re
from collections.abc import Sequence
from typing import Any

from compoworld.runtime.envelope import Envelope
from compoworld.tasks.task import Task, ToolCall, shows

#: The message key that keeps an assistant turn out of the SFT loss when it is False.
TRAINED = "trained"
#: Values a text names: a quoted string, or a run of capitalised words or a word with a digit
#: ("Little Fern Cafe", "SO-43565").
_PHRASE = re.compile(r"\"([^\"]+)\"|\b([A-Z][\w'&-]*(?: [A-Z][\w'&-]*)*|[\w-]*\d[\w-]*)")
#: An id with a prefix ("file_2d6ea12d", "wal_a692d043"): other ids of its kind are wrong values.
_ID = re.compile(r"\b([a-z]+)_[0-9a-f]{6,}\b")
#: Wrong values tried per argument before the next argument or read is tried.
_TRIES = 8


@dataclasses.dataclass(frozen=True)
class Detour:
  """A wrong read (``call``) played before the solution's call ``index``."""

  index: int
  call: ToolCall


def finds_nothing(envelope: Envelope) -> bool:
  """Whether a read's envelope shows nothing: a 404, an empty list, or a page of no items (a
  record with an empty list field is something)."""
  if not envelope.get("ok"):
    return envelope.get("status") == 404
  data = envelope.get("data")
  if isinstance(data, dict):
    return "items" in data and not data["items"] and not data.get("total")
  return data is None or data == []


def _unique(values: Sequence[str]) -> list[str]:
  return list(dict.fromkeys(values))


def wrong_values(
  task: Task, calls: Sequence[ToolCall], value: str, prop: dict[str, Any], seen: str
) -> tuple[list[str], list[str]]:
  """Values a policy might write instead of ``value`` (a string argument whose parameter
  schema is ``prop``), as (likely, then the rest). Likely: the parameter's other enum values,
  the solution's other string arguments the instruction shows, the instruction's quoted strings,
  its names of two or more capitalised words or with a digit ("SO-43565"), and other ids of the
  same kind in ``seen`` (the replies before the call). The rest: the instruction's single
  capitalised words ("Pull", "Marketing")."""
  likely = [v for v in prop.get("enum") or () if isinstance(v, str)]
  likely += [
    v
    for c in calls
    for v in c.arguments.values()
    if isinstance(v, str) and shows(task.instruction, v)
  ]
  rest = []
  for m in _PHRASE.finditer(task.instruction):
    phrase = m[1] or m[2]
    if not re.search(r"[A-Za-z]", phrase):
      continue  # a count or an amount ("3"): no value a text or id argument is confused with
    (likely if m[1] or " " in phrase or re.search(r"\d", phrase) else rest).append(phrase)
  if m := _ID.fullmatch(value):
    likely += [i.group() for i in _ID.finditer(seen) if i[1] == m[1]]
  likely = [v for v in _unique(likely) if v != value and v.strip()]
  return likely, [v for v in _unique(rest) if v != value and v not in likely]


def plan_detour(task: Task, calls: Sequence[ToolCall], rng: random.Random) -> Detour | None:
  """One read of ``calls`` (played from the task's s0) and a wrong value for one of its string
  arguments that the instruction or an earlier reply shows, whose read finds nothing; None when
  no read has one."""
  s0 = task.make_env()
  specs = [s0.services[c.service].spec(c.tool) for c in calls]
  reads = [j for j, spec in enumerate(specs) if spec is not None and not spec.mutates]
  rng.shuffle(reads)
  for j in reads:
    env = s0.fork()
    seen = "\n".join(json.dumps(env.call_tool(c.service, c.tool, c.arguments)) for c in calls[:j])
    call = calls[j]
    props = (specs[j].input_schema or {}).get("properties") or {}
    keys = [
      k
      for k, v in call.arguments.items()
      if isinstance(v, str) and (shows(task.instruction, v) or shows(seen, v))
    ]
    rng.shuffle(keys)
    for key in keys:
      likely, rest = wrong_values(task, calls, call.arguments[key], props.get(key) or {}, seen)
      rng.shuffle(likely)
      rng.shuffle(rest)
      for wrong in (likely + rest)[:_TRIES]:
        detour = ToolCall(
          service=call.service, tool=call.tool, arguments={**call.arguments, key: wrong}
        )
        if finds_nothing(env.call_tool(detour.service, detour.tool, detour.arguments)):
          return Detour(index=j, call=detour)
  return None
