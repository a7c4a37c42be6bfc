"""``needed_calls``: the reference solution without the reads nothing after them needs, and the
oracle that plays it (``OracleAgent(reads="needed")``)."""

import json

import pytest

from compoworld.agents.agent import OracleAgent
from compoworld.agents.episode import run_episode
from compoworld.tasks.generate import generate_tasks
from compoworld.tasks.task import (
  ToolCall,
  _evidence,
  gate_failures,
  needed_calls,
  shows,
  unshown_values,
)


@pytest.fixture(scope="module")
def tasks():
  tasks, _ = generate_tasks(24, seed=3, progress=False, k=1, min_walk=2, max_walk=2)
  return tasks


def test_shows_finds_values_in_their_written_forms():
  assert shows('{"amount_due": 183.32}', 183.32)
  assert not shows('{"amount_due": 1183.32}', 183.32)
  assert not shows('{"amount_due": 183.321}', 183.32)
  assert shows("worth 13,600.00 and due", 13600.0)
  assert shows("worth 13600 in all", 13600.0)
  assert not shows("worth 13,600.50", 13600.0)
  assert shows("for 2026-03-04 09:00 please", "2026-03-04T09:00:00")
  assert shows(json.dumps({"memo": 'the "Juniper" deal'}), 'the "Juniper" deal')


def test_needed_calls_drop_a_get_after_the_list_that_showed_the_record(tasks):
  """The golden case: a list that finds a record and a get that shows it again; the get goes,
  the list (whose reply is the only one with the id) stays, and so does every write."""
  golden = tasks[0]  # the generator is deterministic: seed 3's first task
  assert [c.tool for c in golden.reference_solution] == [
    "list_entries",
    "get_entry",
    "post_journal_entry",
  ]
  assert [c.tool for c in needed_calls(golden)] == ["list_entries", "post_journal_entry"]
  dropped = 0
  for task in tasks:
    full, lean = task.reference_solution, needed_calls(task)
    names = [(c.service, c.tool) for c in full]
    # a subsequence of the reference solution that keeps every write
    it = iter(names)
    assert all(n in it for n in [(c.service, c.tool) for c in lean])
    writes = [full[i] for i in task.write_indices()]
    assert [c for c in lean if c in writes] == writes
    env, outs = task.replay(calls=lean)
    assert all(o["ok"] for o in outs) and task.verify(env, task.reference_answer).success
    dropped += len(full) - len(lean)
  assert dropped > 0


def test_needed_calls_keep_every_value_the_whole_solution_showed(tasks):
  """Each argument value a later call copies from the instruction or a reply is still shown
  before that call once the reads are dropped."""
  for task in tasks:
    lean = needed_calls(task)
    _, outs = task.replay(calls=lean)
    _, full_outs = task.replay()
    full_replies = [json.dumps(o) for o in full_outs]
    replies = [json.dumps(o) for o in outs]
    full_pos = {id(c): i for i, c in enumerate(task.reference_solution)}
    for j, call in enumerate(lean):
      before = [task.instruction, *replies[:j]]
      full_before = [task.instruction, *full_replies[: full_pos[id(call)]]]
      for key, value in call.arguments.items():
        if key == "limit" or not isinstance(value, str | float | int):
          continue
        if any(shows(t, value) for t in full_before):
          assert any(shows(t, value) for t in before), (task.id, call.tool, key, value)


def test_needed_calls_keep_every_read_when_a_value_is_computed(tasks):
  """A figure in the answer that no reply or instruction shows is computed from replies the
  function cannot tell apart, so no read is dropped."""
  task = next(t for t in tasks if len(needed_calls(t)) < len(t.reference_solution))
  computed = task.model_copy(update={"reference_answer": "The total is 98,765.43."})
  assert needed_calls(computed) == computed.reference_solution


def test_an_oracle_playing_the_needed_reads_solves_the_tasks_in_fewer_calls(tasks):
  saved = 0
  for task in tasks[:8]:
    full, _ = run_episode(OracleAgent(discovery="none"), task)
    lean, _ = run_episode(OracleAgent(discovery="none", reads="needed"), task)
    assert full.result.success and lean.result.success
    assert lean.tool_calls == len(needed_calls(task)) <= full.tool_calls
    saved += full.tool_calls - lean.tool_calls
  assert saved > 0
  with pytest.raises(ValueError, match="valid: all, needed"):
    OracleAgent(reads="some")


def _ok(data) -> dict:
  return {"ok": True, "status": 200, "data": data}


def test_unshown_values_are_ids_keys_and_addresses_nothing_showed_before_the_call():
  found = _ok({"items": [{"id": "je_1", "reference": "INV-5945", "owner": "ana.li@acme.com"}]})
  calls = [
    ToolCall(service="ledger", tool="list_entries", arguments={"query": "Globex Delta"}),
    ToolCall(service="ledger", tool="post", arguments={"reference": "INV-5945", "memo": "Paid"}),
    ToolCall(service="helpdesk", tool="add_comment", arguments={"body": "Looping in ana.li@acme.com: look"}),
    ToolCall(service="projects", tool="search_tasks", arguments={"project_id": "MOB", "limit": 100}),
  ]  # fmt: skip
  instruction = "Find the Globex Delta invoice."
  outputs = [found, _ok({}), _ok({}), _ok({})]
  assert unshown_values(instruction, calls, outputs) == [(3, "project_id", "MOB")]
  # Without the search's reply the number and the address are guesses too.
  assert unshown_values(instruction, calls, [_ok({})] * 4) == [
    (1, "reference", "INV-5945"),
    (2, "body", "ana.li@acme.com"),
    (3, "project_id", "MOB"),
  ]
  # What the instruction gives is known; so is a value the caller writes itself.
  assert unshown_values("In MOB, file INV-5945.", calls[1:2] + calls[3:], [_ok({})] * 2) == []


def test_evidence_finds_the_words_a_template_puts_punctuation_around():
  text = 'Ask "kenji.walsh@oscorplabs.com"; the customer is "Soylent Grocers".'

  def shown(v):
    return shows(text, v)

  body = "Looping in kenji.walsh@oscorplabs.com: could you take a look?"
  assert "kenji.walsh@oscorplabs.com" in _evidence(body, shown)
  assert _evidence("Orchid review (Soylent Grocers)", shown) == ["Soylent", "Grocers"]
  assert _evidence("pending", shown) == []  # a single word of the caller's own: an enum value
  assert _evidence("SUP-1171", shown) is None  # a key no text shows: not the caller's choice


def test_the_gate_rejects_a_solution_that_writes_an_id_it_never_read(tasks):
  task = tasks[0]  # list_entries -> get_entry -> post_journal_entry (the golden case above)
  assert gate_failures(task) == []
  blind = task.model_copy(update={"reference_solution": task.reference_solution[1:]})
  assert "unshown_value_at_call_0" in gate_failures(blind)  # get_entry's id, never listed


def test_generated_tasks_and_their_needed_reads_write_nothing_unread():
  """The facets that wrote a project key, the user's address or a sought invoice number
  without reading them now read first, and the shortened solutions keep those reads."""
  tasks, stats = generate_tasks(300, seed=0, progress=False, k=1, min_walk=2, max_walk=2)
  assert not any(r.startswith("unshown") for r in stats.get("rejected", {}))
  tools = set()
  for task in tasks:
    for calls in (task.reference_solution, needed_calls(task)):
      _, outputs = task.replay(calls=calls)
      assert unshown_values(task.instruction, calls, outputs) == [], task.id
    tools |= {(c.service, c.tool) for c in task.reference_solution}
  assert {("projects", "list_projects"), ("expenses", "list_reports")} <= tools


def _demo_task(index: int):
  """Task ``index`` of the demo's distribution (seed 0, K = 1, walks of 2, no distractors)."""
  (task,), _ = generate_tasks(
    index + 1, seed=0, shard_index=index, num_shards=index + 1, progress=False,
    k=1, min_walk=2, max_walk=2, num_distractors=0,
  )  # fmt: skip
  return task


def test_needed_calls_keep_the_read_that_singles_the_value_out():
  """A broader reply showing the value too does not make the read that found it unneeded:
  #general's member list holds the handle the message search found as the asker (the oracle
  used to skip the search and pick a handle out of the list), and some earlier reply writes the
  number the SLA report answers with ("1")."""
  asker = _demo_task(2)
  assert [c.tool for c in asker.reference_solution] == [
    "list_channels", "search_messages", "find_user", "list_channels", "find_user",
    "invite_to_channel",
  ]  # fmt: skip
  assert [c.tool for c in needed_calls(asker)] == [
    "list_channels", "search_messages", "find_user", "invite_to_channel",
  ]  # fmt: skip
  handle = needed_calls(asker)[2].arguments["query"]
  _, outputs = asker.replay()
  assert shows(json.dumps(outputs[0]), handle)  # the member list shows it as well
  report = _demo_task(76)
  assert [c.tool for c in report.reference_solution] == [
    "search_tickets",
    "get_ticket",
    "sla_report",
  ]
  assert [c.tool for c in needed_calls(report)] == ["search_tickets", "sla_report"]
