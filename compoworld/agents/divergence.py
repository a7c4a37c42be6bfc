"""Where a failed episode leaves the oracle's path: the first tool call that differs from the
oracle's, and of what kind.

A policy that fails a task does so at some step; the pass rate alone does not say which. Walking
the episode's ``call_tool`` calls beside the oracle's (``oracle_calls``: the oracle as the SFT
data played it, e.g. without the reads nothing needs; or the task's whole reference solution),
discovery calls skipped, the first difference is one of:

- ``malformed_call``: the call's arguments are not a JSON object;
- ``skipped_step`` / ``repeated_call`` / ``other_tool``: another tool than the reference's next,
  one the reference calls later, one already called, or one it never calls;
- ``missing_argument`` / ``extra_argument``: the right tool, an argument left out or added;
- ``value_visible``: the right tool and arguments, but a value differs and the right one was
  already in the conversation (the instruction or an earlier reply): a copy or a choice gone wrong;
- ``value_unseen``: a value differs and the right one was not in the conversation yet (a read
  the agent skipped or a value it had to work out);
- ``ended_early``: a final answer before the reference's calls were all made;
- ``out_of_turns``: the episode stopped (turn or context limit) before that;
- ``after_reference``: every call was made as the oracle made it, and the task still failed (a
  wrong final answer, or a later extra call).

A policy may reach the goal by another path than the oracle's; this is the first step where it
leaves *that* path, the one its training data showed it.
``python -m experiments.failure_breakdown`` runs it over an evaluation's results.
"""

from __future__ import annotations

import difflib
import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from compoworld.agents.agent import QUOTE_PREFIX, OracleAgent
from compoworld.agents.episode import run_episode
from compoworld.agents.trajectories import tool_steps
from compoworld.jsonl import read_lines
from compoworld.tasks.task import Task, load_tasks

KINDS = (
  "malformed_call",
  "skipped_step",
  "repeated_call",
  "other_tool",
  "missing_argument",
  "extra_argument",
  "value_visible",
  "value_unseen",
  "ended_early",
  "out_of_turns",
  "after_reference",
)


def visible(value: Any, text: str) -> bool:
  """Whether ``value`` is written in ``text``: a string as it is, a number as a whole number
  (not inside a longer one), a list or object when every value in it is."""
  if isinstance(value, bool) or value is None:
    return False
  if isinstance(value, str):
    return bool(value) and value in text
  if isinstance(value, int | float):
    shown = str(int(value)) if float(value).is_integer() else str(value)
    return re.search(rf"(?<![\d.]){re.escape(shown)}(?![\d])", text) is not None
  if isinstance(value, Mapping):
    return all(visible(v, text) for v in value.values())
  if isinstance(value, Sequence):
    return all(visible(v, text) for v in value)
  return False


def oracle_calls(task: Task, **oracle_settings: Any) -> list[dict[str, Any]]:
  """The ``call_tool`` calls (``service``, ``tool``, ``arguments``) of the oracle's episode on
  ``task``, played with ``oracle_settings`` (``OracleAgent``'s ``discovery``, ``reads``,
  ``quote``); a quoting oracle's also hold the ``sentence`` of the request each one serves."""
  traj, _ = run_episode(OracleAgent(**oracle_settings), task)
  if not traj.result.success:
    raise ValueError(f"the oracle does not solve task {task.id!r} with {oracle_settings}")
  calls, sentence = [], None
  for message in traj.messages:
    sentence = quoted(_text(message)) or sentence
    for step in tool_steps([message]):
      if step["name"] == "call_tool":
        arguments = step["arguments"]
        calls.append({**arguments, "sentence": sentence} if sentence else arguments)
  return calls


def quoted(text: str) -> str | None:
  """The sentence a turn quotes (``OracleAgent(quote=True)``'s ``Next step: "..."``), if any."""
  if not text.startswith(QUOTE_PREFIX + '"') or '"\n' not in text:
    return None
  return text[len(QUOTE_PREFIX) + 1 : text.index('"\n')]


def read_results(path: str | Path) -> list[dict[str, Any]]:
  """An evaluation's ``results.jsonl`` rows (a task and its samples each)."""
  return [json.loads(line) for _, line in read_lines(path)]


def reference_calls(
  tasks_file: str | Path,
  results: Iterable[Mapping[str, Any]],
  oracle_settings: Mapping[str, Any] | None = None,
) -> dict[str, list[dict[str, Any]]]:
  """Task id → the calls the failed samples of ``results`` are compared with, for the tasks of
  ``tasks_file`` those results played: the oracle's, played with ``oracle_settings``, or with
  None the task's whole reference solution."""
  wanted = {row["task_id"] for row in results}
  tasks = [t for t in load_tasks(tasks_file) if t.id in wanted]
  if oracle_settings is None:
    return {t.id: [c.model_dump() for c in t.reference_solution] for t in tasks}
  return {t.id: oracle_calls(t, **oracle_settings) for t in tasks}


def _argument_difference(got: Mapping[str, Any], want: Mapping[str, Any]) -> str | None:
  """The first argument that differs: the reference's in its order, then the extra ones."""
  for key in list(want) + [k for k in got if k not in want]:
    if got.get(key) != want.get(key) or (key in got) != (key in want):
      return key
  return None


def _text(message: Mapping[str, Any]) -> str:
  content = message.get("content") or ""
  return content if isinstance(content, str) else json.dumps(content)


def first_divergence(
  reference: Sequence[Mapping[str, Any]], messages: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
  """The first step at which ``messages`` (an episode, OpenAI chat format) leaves ``reference``
  (calls as ``service``, ``tool``, ``arguments``): ``kind`` (one of ``KINDS``), ``step``
  (reference calls matched before it) and ``calls`` (the reference's length), with the tool,
  argument and values where they apply, and ``said``: the sentence of the request a quoting
  policy last quoted (`quoted`), where it quoted one."""
  out: dict[str, Any] = {"step": 0, "calls": len(reference)}
  seen = "\n".join(_text(m) for m in messages[:2])  # the system turn and the instruction
  matched = 0
  steps = iter(tool_steps(messages))
  for message in messages[2:]:
    if message.get("role") == "tool":
      seen += "\n" + _text(message)
      continue
    if message.get("role") != "assistant":
      continue
    if said := quoted(_text(message)):  # a quoting policy's: the sentence it is on, so far
      out["said"] = said
    if not message.get("tool_calls"):  # a final answer
      kind = "after_reference" if matched == len(reference) else "ended_early"
      return {**out, "kind": kind, "step": matched}
    for _ in message["tool_calls"]:
      step = next(steps)
      if step["name"] != "call_tool":
        continue  # list_services, list_tools, describe_tool: discovery
      call = step["arguments"]
      if not isinstance(call, dict):
        return {**out, "kind": "malformed_call", "step": matched}
      if matched == len(reference):
        return {**out, "kind": "after_reference", "step": matched, "tool": call.get("tool")}
      want = reference[matched]
      here = {**out, "step": matched, "tool": want["tool"]}
      name = (call.get("service"), call.get("tool"))
      if name != (want["service"], want["tool"]):
        names = [(r["service"], r["tool"]) for r in reference]
        kind = (
          "repeated_call"
          if name in names[:matched]
          else "skipped_step"
          if name in names[matched + 1 :]
          else "other_tool"
        )
        return {**here, "kind": kind, "got": call.get("tool"), "got_service": call.get("service")}
      got_args = call.get("arguments") or {}
      if not isinstance(got_args, dict):
        return {**here, "kind": "malformed_call"}
      key = _argument_difference(got_args, want["arguments"])
      if key is not None:
        got, wanted = got_args.get(key), want["arguments"].get(key)
        if key not in got_args:
          kind = "missing_argument"
        elif key not in want["arguments"]:
          kind = "extra_argument"
        else:
          kind = "value_visible" if visible(wanted, seen) else "value_unseen"
        return {**here, "kind": kind, "argument": key, "got": got, "want": wanted}
      matched += 1
  kind = "after_reference" if matched == len(reference) else "out_of_turns"
  return {**out, "kind": kind, "step": matched}


def breakdown(
  references: Mapping[str, Sequence[Mapping[str, Any]]],
  results: Iterable[Mapping[str, Any]],
  examples: int = 5,
) -> dict[str, Any]:
  """Every sample of ``results`` (an evaluation's ``results.jsonl`` rows) against its task's
  reference calls (``references``: task id → calls, e.g. ``oracle_calls``): how many passed, and
  the failed ones by the kind of their first divergence, each with its share of the failures
  and a few examples. Also where the failures part from the path: ``path_followed``, the mean
  share of the reference's calls made before the first divergence (a pass: 1), and ``at``, the
  failures whose divergence is at the first call, at the first call into a service the path
  has not used yet (where a composed task changes service), or later; and ``at_new_service``,
  what the failures at that change of service did there (`at_new_service`)."""
  counts: Counter[str] = Counter()
  at: Counter[str] = Counter({where: 0 for where in DIVERGENCE_AT})
  switch: Counter[str] = Counter({what: 0 for what in AT_NEW_SERVICE})
  quotes = {place: Counter({q: 0 for q in QUOTED}) for place in ("all", "new_service")}
  shown: dict[str, list[dict[str, Any]]] = {kind: [] for kind in KINDS}
  samples = passed = 0
  followed = 0.0
  for row in results:
    reference = references.get(row["task_id"])
    if reference is None:
      raise KeyError(f"task {row['task_id']!r} of the results is not in the tasks file")
    for sample in row["samples"]:
      samples += 1
      if sample.get("success"):
        passed += 1
        followed += 1.0
        continue
      where = first_divergence(reference, sample.get("messages") or [])
      counts[where["kind"]] += 1
      place = divergence_at(reference, where["step"])
      at[place] += 1
      if place == "new_service":
        switch[at_new_service(reference, where)] += 1
      if where["step"] < len(reference) and "sentence" in reference[where["step"]]:
        sentences = [c["sentence"] for c in reference if "sentence" in c]
        said = quoted_what(reference[where["step"]]["sentence"], where, sentences)
        for counted in ("all", place) if place == "new_service" else ("all",):
          quotes[counted][said] += 1
      followed += where["step"] / len(reference) if reference else 1.0
      if len(shown[where["kind"]]) < examples:
        shown[where["kind"]].append({"task_id": row["task_id"], **where})
  failed = samples - passed
  return {
    "samples": samples,
    "passed": passed,
    "failed": failed,
    "path_followed": round(followed / samples, 4) if samples else 0.0,
    "kinds": _shares(Counter({kind: counts[kind] for kind in KINDS})),
    "at": _shares(at),
    "at_new_service": _shares(switch),
    # a quoting policy's: the sentence it was on where it leaves the path (`quoted_what`)
    "quoted": {place: _shares(c) for place, c in quotes.items() if sum(c.values())},
    "examples": {kind: rows for kind, rows in shown.items() if rows},
  }


def _shares(counts: Counter[str]) -> dict[str, dict[str, float]]:
  total = sum(counts.values())
  return {
    k: {"count": n, "share": round(n / total, 4) if total else 0.0} for k, n in counts.items()
  }


#: Where on the reference path a failure first leaves it (`divergence_at`).
DIVERGENCE_AT = ("first_call", "new_service", "later", "after_reference")


def divergence_at(reference: Sequence[Mapping[str, Any]], step: int) -> str:
  """Where the divergence at ``step`` (reference calls matched before it) is on ``reference``:
  its first call, the first call into a service none of the calls before it used, a later call,
  or past its end."""
  if step >= len(reference):
    return "after_reference"
  if step == 0:
    return "first_call"
  used = {call["service"] for call in reference[:step]}
  return "new_service" if reference[step]["service"] not in used else "later"


#: What a failure at the first call into a new service did there (`at_new_service`).
AT_NEW_SERVICE = ("stayed", "new_service_other_tool", "right_tool", "other_service", "no_call")


def at_new_service(reference: Sequence[Mapping[str, Any]], where: Mapping[str, Any]) -> str:
  """What a failure whose divergence (``first_divergence``'s ``where``) is at the first call
  into a new service of ``reference`` made there: a call to a service the path had already used
  (it did not change service), another tool of the new service, the right tool with other
  arguments, a call to a service the path never uses, or no call (an early final answer, the
  episode's end, a malformed call)."""
  step = where["step"]
  if "got_service" not in where:
    # the right tool: its arguments differ, or do not parse (a call that does not: no "tool")
    right = "argument" in where or (where["kind"] == "malformed_call" and "tool" in where)
    return "right_tool" if right else "no_call"
  used = {call["service"] for call in reference[:step]}
  if where["got_service"] in used:
    return "stayed"
  if where["got_service"] == reference[step]["service"]:
    return "new_service_other_tool"
  return "other_service"


#: The sentence a quoting policy was on where it leaves the path (`quoted_what`).
QUOTED = (
  "right_sentence",
  "right_sentence_altered",
  "other_sentence",
  "not_a_sentence",
  "no_quote",
)


def quoted_what(sentence: str, where: Mapping[str, Any], sentences: Iterable[str]) -> str:
  """What a quoting policy last quoted up to the turn that leaves the path (``where``'s
  ``said``: the step of the request it was on), against the ``sentence`` the path's call there
  serves: that sentence; that sentence altered (the nearest of the path's ``sentences``, at
  least 80% alike: another opening word, a figure miscopied); another of them (or one
  altered); text near none of them; or nothing yet."""
  said = where.get("said")
  if said is None:
    return "no_quote"
  if said == sentence:
    return "right_sentence"
  alike = {s: difflib.SequenceMatcher(None, said, s).ratio() for s in {*sentences, sentence}}
  nearest = max(alike, key=lambda s: (alike[s], s == sentence))
  if alike[nearest] < 0.8:
    return "not_a_sentence"
  return "right_sentence_altered" if nearest == sentence else "other_sentence"


def markdown(
  summary: Mapping[str, Any], title: str = "Where failed episodes leave the oracle's path"
) -> str:
  """The breakdown as a table (kind, failures, share) and its examples."""
  lines = [
    f"# {title}",
    "",
    f"{summary['samples']} samples, {summary['passed']} passed, {summary['failed']} failed.",
    "",
    "| first divergence | failures | share |",
    "| --- | ---: | ---: |",
  ]
  for kind, row in summary["kinds"].items():
    if row["count"]:
      lines.append(f"| {kind} | {row['count']} | {row['share']:.2f} |")
  lines += [
    "",
    f"Share of the path's calls made before leaving it (a pass: all): "
    f"{summary['path_followed']:.3f}.",
    "",
    "| first divergence at | failures | share |",
    "| --- | ---: | ---: |",
  ]
  lines += [
    f"| {where} | {row['count']} | {row['share']:.2f} |" for where, row in summary["at"].items()
  ]
  switch = summary.get("at_new_service") or {}
  if any(row["count"] for row in switch.values()):
    lines += ["", "| at the first call into a new service, it | failures | share |"]
    lines += ["| --- | ---: | ---: |"]
    lines += [f"| {what} | {row['count']} | {row['share']:.2f} |" for what, row in switch.items()]
  names = {"all": "failures", "new_service": "at the first call into a new service"}
  for place, rows in (summary.get("quoted") or {}).items():
    lines += ["", f"| the sentence it was on ({names[place]}) | failures | share |"]
    lines += ["| --- | ---: | ---: |"]
    lines += [f"| {what} | {row['count']} | {row['share']:.2f} |" for what, row in rows.items()]
  for kind, rows in summary["examples"].items():
    lines += ["", f"## {kind}", ""]
    for r in rows:
      detail = ", ".join(
        f"{k}={json.dumps(r[k], ensure_ascii=False)[:80]}"
        for k in ("tool", "argument", "got", "got_service", "want")
        if k in r
      )
      lines.append(f"- {r['task_id']} (step {r['step']} of {r['calls']}): {detail}")
  return "\n".join(lines) + "\n"
