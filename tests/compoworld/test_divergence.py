"""Where failed episodes leave the oracle's path (compoworld.agents.divergence): every kind on
hand-built episodes, the oracle's own episodes on generated tasks, and the script."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from compoworld.agents.agent import OracleAgent
from compoworld.agents.divergence import (
  AT_NEW_SERVICE,
  KINDS,
  at_new_service,
  breakdown,
  divergence_at,
  first_divergence,
  markdown,
  oracle_calls,
  quoted_what,
  visible,
)
from compoworld.agents.episode import run_episode
from compoworld.tasks.generate import generate_tasks
from compoworld.tasks.task import save_tasks

ROOT = Path(__file__).resolve().parents[2]
INSTRUCTION = 'Find the "Vertex renewal prep" thread, then reply to its sender.'
REFERENCE = [
  {"service": "mail", "tool": "search", "arguments": {"query": "Vertex renewal prep"}},
  {"service": "mail", "tool": "read", "arguments": {"message_id": "msg_1"}},
  {"service": "mail", "tool": "send", "arguments": {"to": "ana@x.io", "body": "Thanks"}},
]
REPLIES = ['{"ok": true, "data": [{"id": "msg_1"}]}', '{"ok": true, "data": {"from": "ana@x.io"}}']


def episode(calls, final=None, replies=REPLIES):
  """An OpenAI-format episode: each call (a call_tool payload, a raw string, or a meta-tool as
  ``(name, arguments)``) in its own turn, answered by the next reply, then ``final``."""
  messages = [{"role": "system", "content": "sys"}, {"role": "user", "content": INSTRUCTION}]
  for i, call in enumerate(calls):
    name, args = call if isinstance(call, tuple) else ("call_tool", call)
    raw = args if isinstance(args, str) else json.dumps(args)
    messages.append(
      {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": f"c{i}", "function": {"name": name, "arguments": raw}}],
      }
    )
    reply = replies[i] if i < len(replies) else '{"ok": true, "data": null}'
    messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": reply})
  if final is not None:
    messages.append({"role": "assistant", "content": final})
  return messages


def changed(step, **arguments):
  return {**REFERENCE[step], "arguments": {**REFERENCE[step]["arguments"], **arguments}}


def kind_of(messages):
  return first_divergence(REFERENCE, messages)["kind"]


def test_the_oracles_path_is_matched_through_discovery_calls():
  messages = episode(
    [("list_services", {}), REFERENCE[0], ("describe_tool", {"service": "mail"}), *REFERENCE[1:]],
    final="Done.",
    replies=["[]", REPLIES[0], "{}", REPLIES[1]],
  )
  assert first_divergence(REFERENCE, messages) == {"step": 3, "calls": 3, "kind": "after_reference"}


@pytest.mark.parametrize(
  ("calls", "final", "kind", "step"),
  [
    ([changed(0, query="Atlas security audit")], None, "value_visible", 0),
    ([REFERENCE[0], changed(1, message_id="msg_9")], None, "value_visible", 1),
    ([REFERENCE[0], REFERENCE[1], changed(2, body="Hello")], None, "value_unseen", 2),
    ([{**REFERENCE[0], "arguments": {}}], None, "missing_argument", 0),
    ([changed(0, limit=5)], None, "extra_argument", 0),
    ([REFERENCE[0], REFERENCE[2]], None, "skipped_step", 1),
    ([REFERENCE[0], REFERENCE[0]], None, "repeated_call", 1),
    ([{**REFERENCE[0], "tool": "archive"}], None, "other_tool", 0),
    ([{**REFERENCE[0], "service": "chat"}], None, "other_tool", 0),
    ([REFERENCE[0], '{"service": "mail", "tool": "read", "argu'], None, "malformed_call", 1),
    ([{**REFERENCE[0], "arguments": "query"}], None, "malformed_call", 0),
    ([REFERENCE[0]], "Done.", "ended_early", 1),
    ([REFERENCE[0], REFERENCE[1]], None, "out_of_turns", 2),
    ([], "I can't.", "ended_early", 0),
    (REFERENCE, "Done.", "after_reference", 3),
    ([*REFERENCE, REFERENCE[2]], None, "after_reference", 3),
  ],
)
def test_each_kind_of_first_divergence(calls, final, kind, step):
  where = first_divergence(REFERENCE, episode(calls, final))
  assert (where["kind"], where["step"], where["calls"]) == (kind, step, 3)
  assert where["kind"] in KINDS


def test_a_divergence_names_the_argument_and_both_values():
  where = first_divergence(REFERENCE, episode([REFERENCE[0], changed(1, message_id="msg_9")]))
  assert where == {
    "step": 1,
    "calls": 3,
    "tool": "read",
    "kind": "value_visible",
    "argument": "message_id",
    "got": "msg_9",
    "want": "msg_1",
  }
  # the query is in the instruction; msg_1 only in the first call's reply, so before it unseen
  assert kind_of(episode([changed(0, query="x")], replies=['{"data": []}'])) == "value_visible"
  reference = [REFERENCE[1]]
  assert first_divergence(reference, episode([changed(1, message_id="m")]))["kind"] == (
    "value_unseen"
  )


def test_visible_matches_whole_numbers_and_every_value_of_a_list():
  text = 'Order 1250 units by 2026-03-18 for "Ana" (id 42.5).'
  assert visible("Ana", text) and not visible("Bo", text) and not visible("", text)
  assert visible(1250, text) and visible(1250.0, text) and visible(42.5, text)
  assert not visible(125, text) and not visible(25, text) and not visible(2.5, text)
  assert visible(["Ana", 1250], text) and not visible(["Ana", 7], text)
  assert visible({"who": "Ana", "n": 1250}, text) and not visible({"who": "Bo"}, text)
  assert not visible(True, text) and not visible(None, text)


def test_breakdown_counts_failures_by_kind_with_examples():
  results = [
    {"task_id": "a", "samples": [{"success": True, "messages": episode(REFERENCE, "Done.")}]},
    {
      "task_id": "a",
      "samples": [
        {"success": False, "messages": episode([changed(0, query="Atlas")])},
        {"success": False, "messages": episode([REFERENCE[0]], "Done.")},
        {"success": False, "messages": episode([changed(0, query="Lumen")])},
      ],
    },
  ]
  summary = breakdown({"a": REFERENCE}, results, examples=1)
  assert (summary["samples"], summary["passed"], summary["failed"]) == (4, 1, 3)
  assert summary["kinds"]["value_visible"] == {"count": 2, "share": 0.6667}
  assert summary["kinds"]["ended_early"] == {"count": 1, "share": 0.3333}
  assert sum(k["count"] for k in summary["kinds"].values()) == 3
  assert [e["got"] for e in summary["examples"]["value_visible"]] == ["Atlas"]
  # Where: two fail at the first call, one after a call (the same service); the pass follows all.
  assert summary["path_followed"] == pytest.approx((1 + 0 + 1 / 3 + 0) / 4, abs=1e-4)
  assert summary["at"]["first_call"] == {"count": 2, "share": 0.6667}
  assert summary["at"]["later"]["count"] == 1 and summary["at"]["new_service"]["count"] == 0
  with pytest.raises(KeyError, match="'b' of the results is not in the tasks file"):
    breakdown({"a": REFERENCE}, [{"task_id": "b", "samples": []}])


def test_a_divergence_is_placed_on_the_path():
  """At the first call, at the first call into a service the path has not used (a composed
  task's change of service), later, or past the end."""
  path = [
    {"service": "ledger", "tool": "get", "arguments": {}},
    {"service": "esign", "tool": "send", "arguments": {}},
    {"service": "ledger", "tool": "post", "arguments": {}},
    {"service": "esign", "tool": "get", "arguments": {}},
  ]
  got = [divergence_at(path, step) for step in range(5)]
  assert got == ["first_call", "new_service", "later", "later", "after_reference"]
  results = [
    {"task_id": "t", "samples": [{"success": False, "messages": episode([path[0]], "Done.")}]}
  ]
  summary = breakdown({"t": path}, results)
  assert summary["at"]["new_service"] == {"count": 1, "share": 1.0}
  assert summary["path_followed"] == 0.25
  assert summary["at_new_service"]["no_call"] == {"count": 1, "share": 1.0}


@pytest.mark.parametrize(
  ("call", "what"),
  [
    ({"service": "ledger", "tool": "list", "arguments": {}}, "stayed"),
    ({"service": "ledger", "tool": "send", "arguments": {}}, "stayed"),
    ({"service": "esign", "tool": "void", "arguments": {}}, "new_service_other_tool"),
    ({"service": "esign", "tool": "send", "arguments": {"to": "x"}}, "right_tool"),
    ({"service": "esign", "tool": "send", "arguments": "to x"}, "right_tool"),
    ({"service": "mail", "tool": "send", "arguments": {}}, "other_service"),
    ("not json", "no_call"),
  ],
)
def test_what_a_failure_did_where_the_path_changes_service(call, what):
  """At the first call into a new service: kept to the service before, another tool of the
  new one, the right tool with other arguments, a service the path never uses, or no call."""
  path = [
    {"service": "ledger", "tool": "get", "arguments": {}},
    {"service": "esign", "tool": "send", "arguments": {}},
  ]
  messages = episode([path[0], call], "Done.")
  assert at_new_service(path, first_divergence(path, messages)) == what
  results = [{"task_id": "t", "samples": [{"success": False, "messages": messages}]}]
  summary = breakdown({"t": path}, results)
  assert list(summary["at_new_service"]) == list(AT_NEW_SERVICE)
  assert summary["at_new_service"][what] == {"count": 1, "share": 1.0}
  assert f"| {what} | 1 | 1.00 |" in markdown(summary)


@pytest.fixture(scope="module")
def tasks():
  tasks, _ = generate_tasks(
    8, seed=0, progress=False, k=1, min_walk=2, max_walk=2, num_distractors=0
  )
  return tasks


def test_the_oracles_own_episodes_never_leave_its_path(tasks):
  for task in tasks:
    for discovery in ("none", "full"):
      traj, _ = run_episode(OracleAgent(discovery=discovery, reads="needed"), task)
      calls = oracle_calls(task, discovery="none", reads="needed")
      where = first_divergence(calls, traj.messages)
      assert where == {"step": len(calls), "calls": len(calls), "kind": "after_reference"}
  # the reads the needed-reads oracle leaves out are where a whole-reference comparison differs
  full = [[c.model_dump() for c in t.reference_solution] for t in tasks]
  needed = [oracle_calls(t, discovery="none", reads="needed") for t in tasks]
  assert any(len(f) > len(n) for f, n in zip(full, needed, strict=True))


def test_the_script_prints_and_writes_the_breakdown(tasks, tmp_path):
  save_tasks(tasks, tmp_path / "tasks.jsonl")
  rows = []
  for task in tasks[:3]:
    traj, _ = run_episode(OracleAgent(discovery="none", reads="needed"), task)
    rows.append({"task_id": task.id, "samples": [{"success": True, "messages": traj.messages}]})
  # a policy that stops after the instruction: it ends before the oracle's first call
  stop = [{"role": "system", "content": "s"}, {"role": "user", "content": tasks[3].instruction}]
  stop.append({"role": "assistant", "content": "Done."})
  rows.append({"task_id": tasks[3].id, "samples": [{"success": False, "messages": stop}]})
  (tmp_path / "eval").mkdir()
  (tmp_path / "eval" / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
  out = tmp_path / "why"
  run = subprocess.run(
    [
      sys.executable,
      "-m",
      "experiments.failure_breakdown",
      f"--results={tmp_path / 'eval'}",
      f"--tasks={tmp_path / 'tasks.jsonl'}",
      f"--workdir={out}",
    ],
    cwd=ROOT,
    capture_output=True,
    text=True,
    timeout=300,
  )
  assert run.returncode == 0, run.stderr
  assert "4 samples, 3 passed, 1 failed." in run.stdout
  assert "| ended_early | 1 | 1.00 |" in (out / "breakdown.md").read_text()
  summary = json.loads((out / "summary.json").read_text())
  assert summary["kinds"]["ended_early"]["count"] == 1
  assert summary["examples"]["ended_early"][0]["task_id"] == tasks[3].id


def test_the_script_matches_a_bare_quote_with_the_bare_oracles_sentence(tasks, tmp_path):
  """``--quote --quote_form=bare``: the path's sentences are the bare oracle's, so a policy that
  quoted a sentence without its connective and then called the wrong tool was on the right
  sentence; against the whole sentences (``--quote``) the same quote is the right one altered."""
  save_tasks(tasks, tmp_path / "tasks.jsonl")

  def played(task, quote):
    return run_episode(OracleAgent(discovery="none", reads="needed", quote=quote), task)[0]

  for task in tasks:  # the first quote that leaves out a connective
    traj, whole = played(task, "bare"), played(task, "sentence")
    differ = [
      i for i, (a, b) in enumerate(zip(traj.messages, whole.messages, strict=True)) if a != b
    ]
    if differ:
      cut = differ[0]
      break
  else:
    pytest.fail("no task has a sentence opened by a connective")
  assert traj.messages[cut]["content"].startswith('Next step: "')
  turn = json.loads(json.dumps(traj.messages[cut]))  # the quoting turn, calling another tool
  arguments = json.loads(turn["tool_calls"][0]["function"]["arguments"])
  turn["tool_calls"][0]["function"]["arguments"] = json.dumps({**arguments, "tool": "no_such"})
  messages = [*traj.messages[:cut], turn]
  row = {"task_id": task.id, "samples": [{"success": False, "messages": messages}]}
  (tmp_path / "results.jsonl").write_text(json.dumps(row) + "\n")
  found = {}
  for form in ("sentence", "bare"):
    argv = [sys.executable, "-m", "experiments.failure_breakdown", "--quote"]
    argv += [f"--results={tmp_path / 'results.jsonl'}", f"--tasks={tmp_path / 'tasks.jsonl'}"]
    argv += [f"--quote_form={form}", f"--workdir={tmp_path / form}"]
    run = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    quoted = json.loads((tmp_path / form / "summary.json").read_text())["quoted"]["all"]
    found[form] = {k for k, v in quoted.items() if v["count"]}
  assert found == {"sentence": {"right_sentence_altered"}, "bare": {"right_sentence"}}


def test_which_sentence_a_quoting_policy_was_on_where_it_left_the_path(tasks):
  """A quoting oracle's calls carry the sentence each serves; a failed episode is matched with
  the sentence it last quoted: the right one (the tool was wrong), the right one with another
  opening word, another sentence of the request, a passage near none of them, or none."""
  task = next(t for t in tasks if len({s[2] for s in t.meta["clauses"]}) > 1)
  path = oracle_calls(task, discovery="none", quote=True)
  sentences = [task.instruction[a:b] for a, b, first, last in task.meta["clauses"] if last > first]
  assert {c["sentence"] for c in path} == set(sentences)
  traj, _ = run_episode(OracleAgent(discovery="none", quote=True), task)
  turns = [i for i, m in enumerate(traj.messages) if m.get("tool_calls")]
  cut = turns[1]  # the second call goes to another tool, after the turn's own text
  other = next(s for s in sentences if s != path[1]["sentence"])
  cases = {
    "right_sentence": None,  # the turn as the oracle said it (a quote, or the one before it)
    "right_sentence_altered": f'Next step: "Also, {path[1]["sentence"]}"\nNow I\'ll call x on y.',
    "other_sentence": f'Next step: "{other}"\nNow I\'ll call x on y.',
    "not_a_sentence": 'Next step: "Do it all."\nNow I\'ll call x on y.',
  }
  rows = []
  for what, text in cases.items():
    messages = [dict(m) for m in traj.messages[: cut + 1]]
    wrong = {"service": path[1]["service"], "tool": "no_such_tool", "arguments": {}}
    messages[cut]["tool_calls"] = [
      {"id": "c", "function": {"name": "call_tool", "arguments": json.dumps(wrong)}}
    ]
    if text is not None:
      messages[cut]["content"] = text
    where = first_divergence(path, messages)
    assert where["step"] == 1 and quoted_what(path[1]["sentence"], where, sentences) == what
    rows.append({"task_id": task.id, "samples": [{"success": False, "messages": messages}]})
  plain, _ = run_episode(OracleAgent(discovery="none"), task)  # no quote anywhere
  messages = [dict(m) for m in plain.messages[: turns[1] + 1]]
  messages[turns[1]] = {**messages[turns[1]], "tool_calls": [], "content": "Done."}
  rows.append({"task_id": task.id, "samples": [{"success": False, "messages": messages}]})
  summary = breakdown({task.id: path}, rows)
  assert {k: v["count"] for k, v in summary["quoted"]["all"].items()} == dict.fromkeys(
    ("right_sentence", "right_sentence_altered", "other_sentence", "not_a_sentence", "no_quote"), 1
  )
  assert "| right_sentence | 1 | 0.20 |" in markdown(summary)
  bare = [{k: v for k, v in c.items() if k != "sentence"} for c in path]  # no quoting oracle
  assert breakdown({task.id: bare}, rows)["quoted"] == {}
