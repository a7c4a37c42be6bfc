"""Tasks x = (u, s0, G, g, v) (paper, section 4.2), stored one JSON object per line.

``s0`` is stored compactly: the shared generator seed (and size) plus the scenario's own patches
(records put, updated or deleted, scalars set), materialised on load and checked against a
stored content hash. ``g`` is stored as the hash of the state the reference solution reaches.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from compoworld.compose.env import ComposedEnv
from compoworld.jsonl import read_lines, write_lines
from compoworld.runtime.envelope import Envelope
from compoworld.tasks.rubric import Criterion, VerifyResult, verify

FORMAT_VERSION = 1


class _Strict(BaseModel):
  model_config = ConfigDict(extra="forbid")


class Patch(_Strict):
  """One edit of a generated state: put/update/delete a record, or set a scalar field."""

  service: str
  op: Literal["put", "update", "delete", "set"]
  collection: str | None = None
  id: str | None = None
  record: dict[str, Any] | None = None
  fields: dict[str, Any] | None = None


class InitialState(_Strict):
  seed: int
  size: int | None = None
  patches: list[Patch] = Field(default_factory=list)
  hash: str = ""


class ToolCall(_Strict):
  service: str
  tool: str
  arguments: dict[str, Any] = Field(default_factory=dict)


class Task(_Strict):
  """One verified cross-service task, as stored in ``tasks.jsonl``."""

  id: str
  instruction: str
  services: list[str]
  distractors: list[str] = Field(default_factory=list)
  walk: list[str]
  edges: list[tuple[str, str]]
  initial_state: InitialState
  reference_solution: list[ToolCall]
  reference_answer: str | None = None
  goal_hash: str = ""
  rubric: list[Criterion]
  meta: dict[str, Any] = Field(default_factory=dict)

  def make_env(self, check_hash: bool = True) -> ComposedEnv:
    """The composed environment in state s0, distractors included."""
    s0 = self.initial_state
    env = ComposedEnv.from_services(
      self.services, seed=s0.seed, distractors=self.distractors, size=s0.size
    )
    for patch in s0.patches:
      apply_patch(env, patch)
    if check_hash and s0.hash and env.state_hash() != s0.hash:
      raise ValueError(
        f"task {self.id}: materialised s0 hash {env.state_hash()} != stored {s0.hash}; "
        "the service library changed since the task was written"
      )
    return env

  def verify(self, env: ComposedEnv, final_answer: str | None = None) -> VerifyResult:
    return verify(self.rubric, env, final_answer)

  def replay(
    self, env: ComposedEnv | None = None, calls: Iterable[ToolCall] | None = None
  ) -> tuple[ComposedEnv, list[Envelope]]:
    """Runs ``calls`` (default: the reference solution) from s0; returns the env and envelopes."""
    env = env if env is not None else self.make_env()
    calls = self.reference_solution if calls is None else calls
    return env, [env.call_tool(c.service, c.tool, c.arguments) for c in calls]

  def write_indices(self, env: ComposedEnv | None = None) -> list[int]:
    """Positions of the reference calls whose tool mutates state."""
    env = env if env is not None else self.make_env(check_hash=False)
    return [
      i
      for i, c in enumerate(self.reference_solution)
      if (spec := env.services[c.service].spec(c.tool)) is not None and spec.mutates
    ]


def apply_patch(env: ComposedEnv, patch: Patch) -> None:
  """Applies one s0 patch directly to the state (not through tools: s0 is authored, not acted)."""
  state = env.services[patch.service].state
  if patch.op == "set":
    for name, value in (patch.fields or {}).items():
      setattr(state, name, value)
    return
  table = state.table(patch.collection or "")
  if patch.op == "put":
    record = table.record_type.model_validate(patch.record)
    if record.id in table:
      table.delete(record.id)
    table.insert(record)
  elif patch.op == "update":
    table.update(patch.id or "", **(patch.fields or {}))
  else:
    table.delete(patch.id or "")


def load_tasks(path: str | Path) -> list[Task]:
  """Reads a ``tasks.jsonl`` file; errors name the line that is wrong."""
  tasks = []
  for lineno, line in read_lines(path):
    try:
      tasks.append(Task.model_validate_json(line))
    except ValueError as err:
      raise ValueError(f"{path}:{lineno}: not a valid task: {err}") from err
  return tasks


def save_tasks(tasks: Iterable[Task], path: str | Path) -> None:
  """Writes tasks as canonical JSON lines (sorted keys: same tasks, same bytes)."""
  Path(path).parent.mkdir(parents=True, exist_ok=True)
  write_lines((task.model_dump(mode="json") for task in tasks), path)


def gate_failures(task: Task) -> list[str]:
  """The verification gates every emitted task must pass; returns the reasons it fails.

  probe runs with no error envelope; v(g) = 1; the probe writes no id, key or email address it
  has not been shown (``unshown_values``); no criterion already credited at s0; dropping
  any single write of the probe fails some criterion; replacing the revisited value with its
  stale reading (``meta["stale_substitution"]``) fails some criterion.
  """
  reasons = []
  s0_env = task.make_env()  # materialised once; every replay below runs on a fork of it
  if any(task.verify(s0_env, None).criteria):
    reasons.append("criterion_true_at_s0")
  writes = task.write_indices(s0_env)
  # One pass over the probe, keeping a fork of the state just before each write, so that
  # dropping write i replays only the calls after it.
  env, outputs, before = s0_env.fork(), [], {}
  for i, c in enumerate(task.reference_solution):
    if i in writes:
      before[i] = env.fork()
    outputs.append(env.call_tool(c.service, c.tool, c.arguments))
  bad = [i for i, o in enumerate(outputs) if not o["ok"]]
  if bad:
    reasons.append(f"probe_error_at_call_{bad[0]}")
  if not task.verify(env, task.reference_answer).success:
    reasons.append("reference_not_accepted")
  if unshown := unshown_values(task.instruction, task.reference_solution, outputs):
    reasons.append(f"unshown_value_at_call_{unshown[0][0]}")
  if task.goal_hash and env.state_hash() != task.goal_hash:
    reasons.append("goal_hash_mismatch")
  for i in writes:
    dropped, _ = task.replay(before[i], calls=task.reference_solution[i + 1 :])
    if task.verify(dropped, task.reference_answer).success:
      reasons.append(f"write_{i}_not_needed")
  stale = task.meta.get("stale_substitution")
  if stale and stale.get("answer"):
    answer = (task.reference_answer or "").replace(stale["fresh"], stale["stale_value"])
    if task.verify(env, answer).success:
      reasons.append("stale_value_accepted")
  elif stale:
    calls = [c.model_copy(deep=True) for c in task.reference_solution]
    calls[stale["call"]].arguments[stale["argument"]] = stale["stale_value"]
    staled, _ = task.replay(s0_env.fork(), calls=calls)
    if task.verify(staled, task.reference_answer).success:
      reasons.append("stale_value_accepted")
  return reasons


#: Arguments that size or step through a page: the caller picks them, no reply needs to show them.
_PAGING = frozenset({"limit", "offset", "page", "page_size", "per_page", "max_results", "cursor"})


def _keyed_scalars(value: Any, key: str = "") -> Iterable[tuple[str, Any]]:
  """The strings and numbers in an argument value, nested lists and objects walked (paging
  arguments left out), each with the name of the argument (or nested key) it is passed under."""
  if isinstance(value, dict):
    for k, v in value.items():
      if k not in _PAGING:
        yield from _keyed_scalars(v, k)
  elif isinstance(value, list):
    for v in value:
      yield from _keyed_scalars(v, key)
  elif isinstance(value, str | int | float) and not isinstance(value, bool):
    yield key, value


def _scalars(value: Any) -> Iterable[Any]:
  """``_keyed_scalars`` without the names."""
  return (v for _, v in _keyed_scalars(value))


def _forms(value: Any) -> list[str]:
  """How a text may write ``value``: a string as itself or JSON-escaped; a number in JSON, as
  an integer when it is one, and with thousands separators ("13,600.00"); a timestamp also as
  "2026-03-04 09:00"."""
  if isinstance(value, str):
    forms = [value, json.dumps(value)[1:-1]]
    if m := re.fullmatch(r"(\d{4}-\d\d-\d\d)T(\d\d:\d\d)(?::00)?", value):
      forms.append(f"{m[1]} {m[2]}")
    return forms
  forms = [json.dumps(value), f"{value:,.2f}", f"{value:.2f}"]
  if float(value).is_integer():
    forms += [str(int(value)), f"{int(value):,}"]
  return forms


def shows(text: str, value: Any) -> bool:
  """Whether ``text`` (an instruction or a rendered tool reply) holds ``value`` verbatim in one
  of its forms, a number between non-digits."""
  if isinstance(value, str):
    return any(f in text for f in _forms(value))
  return any(re.search(rf"(?<![\w.,]){re.escape(f)}(?![\w]|[.,]\d)", text) for f in _forms(value))


#: Words that name a record or a person: an email address, or an id or key with a digit
#: ("inv_edff9e11", "INV-5945", "MOB-16").
_NAME_WORD = re.compile(
  r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+|\b[A-Za-z]+[-_][A-Za-z0-9_-]*\d[A-Za-z0-9_-]*"
)


def unshown_values(
  instruction: str, calls: list[ToolCall], outputs: list[Envelope]
) -> list[tuple[int, str, str]]:
  """What ``calls`` write that no one playing them could know: ``(call, argument, word)`` for
  each id, key or email address in a string argument that neither the instruction nor an
  earlier reply shows (an argument named ``id`` or ``*_id`` counts whole). An agent finds such
  a value by reading; a solution that writes it unread teaches guessing."""
  replies = [json.dumps(o) for o in outputs]
  found = []
  for j, call in enumerate(calls):
    texts = [instruction, *replies[:j]]
    for key, value in _keyed_scalars(call.arguments):
      if not any(shows(t, value) for t in texts):
        found += [
          (j, key, w) for w in name_words(key, value) if not any(shows(t, w) for t in texts)
        ]
  return found


def name_words(key: str, value: Any) -> list[str]:
  """The ids, keys and email addresses in an argument ``key``'s ``value`` that an agent can
  only copy, never make up: the whole value of an ``id`` or ``*_id`` argument, else each email
  address and id-like word of a string."""
  if not isinstance(value, str):
    return []
  return [value] if key == "id" or key.endswith(("_id", "_ids")) else _NAME_WORD.findall(value)


def _singles_out(instruction: str, calls: list[ToolCall], i: int, kept: set[int]) -> bool:
  """Whether read ``i`` looks records up by the instruction's words (a query, a label, a name
  of three characters or more the instruction writes), unlike a kept earlier call the same as
  it: what picks a record out, where a listing or a read by id only shows it again."""
  if any(calls[k] == calls[i] for k in kept if k < i):
    return False
  return any(
    isinstance(v, str) and len(v) > 2 and shows(instruction, v)
    for _, v in _keyed_scalars(calls[i].arguments)
  )


def _evidence(value: Any, shown: Callable[[Any], bool]) -> list[Any] | None:
  """What must stay shown for a call to copy ``value``, given whether the whole solution's
  context ``shown`` a value: the value itself; else the shown words of a multi-word string
  (copied around a template: "Agenda: " and a link); else nothing for a single word (the
  caller's own choice, like an enum value); ``None`` for a value computed from replies (a number
  no text shows, a multi-word string none of whose words is shown)."""
  if shown(value):
    return [value]
  if not isinstance(value, str):
    return None
  # Words without the punctuation a template puts around them: the name in "(Soylent
  # Grocers)", the address in "Looping in kenji.walsh@oscorplabs.com: could you ...".
  words = [w.strip(".-") for w in re.findall(r"[\w@.+-]+", value)]
  words = [w for w in words if w]
  if kept := [w for w in words if shown(w)]:
    return kept
  if len(words) <= 1 and not _NAME_WORD.search(value):
    return []
  return None


def needed_calls(task: Task) -> list[ToolCall]:
  """The reference solution without the reads whose replies nothing after them needs.

  A walk's read step (``get_invoice`` after ``list_invoices`` found the invoice) often shows
  again what an earlier reply showed in full. What each call copies (``_evidence`` of its
  argument values) and each word or figure of the reference answer is looked for verbatim in
  the instruction and the earlier replies. A read is dropped when all of it is still shown
  without that read's reply; the reads are tried in order. A read that looks records up by the
  instruction's own words (`_singles_out`) stays whenever its reply shows a value that a later
  call or the answer copies and the instruction does not state, even when a broader reply shows
  that value too: a channel's member list also holds the handle that the search found as a
  message's author, and a number in some earlier reply matches the answer by chance. A task with a value computed from
  replies keeps every read, since which replies it comes from is not known; so does one whose
  shortened solution would not pass its rubric. Reads change no state, so the replies of the
  calls kept are those of the whole solution.
  """
  calls = task.reference_solution
  s0 = task.make_env()
  writes = set(task.write_indices(s0))
  _, outputs = task.replay(s0.fork())
  replies = [json.dumps(o) for o in outputs]
  # The reference answer's figures and the words a reply shows and the instruction does not.
  answer: list[Any] = []
  for word in re.findall(r"[^\s\"'()]+", task.reference_answer or ""):
    word = word.rstrip(".,;:!?")
    if re.fullmatch(r"-?[\d,]*\d(?:\.\d+)?", word):
      answer.append(float(word.replace(",", "")))
    elif word and not shows(task.instruction, word) and any(shows(r, word) for r in replies):
      answer.append(word)
  needs = [list(_scalars(c.arguments)) for c in calls] + [answer]

  def shown(value: Any, j: int, kept: set[int]) -> bool:
    return shows(task.instruction, value) or any(shows(replies[i], value) for i in kept if i < j)

  everything = set(range(len(calls)))
  copied: list[list[Any]] = []  # per call (and the answer last): what must stay shown before it
  for j, values in enumerate(needs):
    copied.append([])
    for value in values:
      evidence = _evidence(value, lambda v, j=j: shown(v, j, everything))
      if evidence is None:
        return list(calls)
      copied[j] += evidence
  kept = set(everything)
  for i in range(len(calls)):
    if i in writes or not outputs[i]["ok"]:
      continue
    if _singles_out(task.instruction, calls, i, kept) and any(
      shows(replies[i], v) and not shows(task.instruction, v) for c in copied[i + 1 :] for v in c
    ):
      continue
    trial = kept - {i}
    users = [j for j in trial if j > i] + [len(calls)]
    if all(shown(v, j, trial) for j in users for v in copied[j]):
      kept = trial
  if kept == everything:
    return list(calls)
  lean = [calls[i] for i in sorted(kept)]
  env, _ = task.replay(s0.fork(), calls=lean)
  if not task.verify(env, task.reference_answer).success:
    return list(calls)
  # A safety net under the word matching above: the shortened solution writes nothing unread
  # that the whole one does not.
  unread = unshown_values(task.instruction, lean, [outputs[i] for i in sorted(kept)])
  return (
    list(calls) if len(unread) > len(unshown_values(task.instruction, calls, outputs)) else lean
  )
