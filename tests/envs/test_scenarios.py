"""The Appendix D meetup task: gates, oracle through meta-tools, and its traps."""

import json

import pytest

from compoworld.agents.agent import OracleAgent
from compoworld.agents.episode import render_transcript, run_episode
from compoworld.tasks.task import ToolCall, gate_failures, load_tasks, save_tasks
from envs.scenarios import community_meetup


@pytest.fixture(scope="module")
def task():
  return community_meetup(0)


def test_task_passes_every_gate(task):
  assert gate_failures(task) == []


def test_reference_reaches_goal_and_s0_fails(task):
  env, outputs = task.replay()
  assert all(o["ok"] for o in outputs)
  assert env.state_hash() == task.goal_hash
  assert task.verify(env, task.reference_answer).success
  s0 = task.verify(task.make_env())
  assert not s0.success and not any(s0.criteria)


def test_dropping_any_single_write_fails_a_criterion(task):
  writes = task.write_indices()
  assert [task.reference_solution[i].tool for i in writes] == [
    "move_event_online",
    "send_meeting_invitation",
    "reply_to_comment",
    "reply_to_comment",
  ]
  for i in writes:
    env, _ = task.replay(calls=task.reference_solution[:i] + task.reference_solution[i + 1 :])
    assert not task.verify(env).success, f"write {i} was not needed"


def test_must_not_catches_reply_to_exempt_volunteer(task):
  env, _ = task.replay()
  comments = [p.record for p in task.initial_state.patches if p.collection == "comments"]
  roster = next(
    p.record["content"]
    for p in task.initial_state.patches
    if p.collection == "documents" and "roster" in p.record["title"].lower()
  )
  exempt = {line.split(" | ")[2] for line in roster.splitlines()[1:] if line.endswith("| yes")}
  target = next(c for c in comments if c["author"] in exempt and "pin" in c["body"])
  out = env.call_tool(
    "forum", "reply_to_comment", {"comment_id": target["id"], "body": "Your pin is reserved"}
  )
  assert out["ok"]
  result = task.verify(env)
  assert task.rubric[-1].kind == "must_not"
  assert result.criteria == [True, True, True, False] and not result.success


def test_stale_meeting_link_fails(task):
  stale = task.meta["stale_substitution"]
  calls = [c.model_copy(deep=True) for c in task.reference_solution]
  calls[stale["call"]].arguments["meeting_link"] = stale["stale_value"]
  env, _ = task.replay(calls=calls)
  result = task.verify(env)
  assert not result.success and result.ids[result.criteria.index(False)] == (
    "confirmed_volunteers_invited"
  )


def test_same_seed_same_task_file(tmp_path):
  save_tasks([community_meetup(1)], tmp_path / "a.jsonl")
  save_tasks([community_meetup(1)], tmp_path / "b.jsonl")
  assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()
  (loaded,) = load_tasks(tmp_path / "a.jsonl")
  assert loaded.make_env().state_hash() == loaded.initial_state.hash
  assert gate_failures(loaded) == []


def test_oracle_solves_it_through_meta_tools_only(task):
  traj, _ = run_episode(OracleAgent(), task)
  calls = [
    (c["function"]["name"], json.loads(c["function"]["arguments"]))
    for m in traj.messages
    if m["role"] == "assistant"
    for c in m.get("tool_calls") or []
  ]
  assert {name for name, _ in calls} == {
    "list_services",
    "list_tools",
    "describe_tool",
    "call_tool",
  }
  assert calls[0][0] == "list_services"
  # every service's tools are listed and every tool described before its first call
  for i, (name, args) in enumerate(calls):
    if name == "call_tool":
      earlier = calls[:i]
      assert ("list_tools", {"service": args["service"]}) in earlier
      assert ("describe_tool", {"service": args["service"], "tool": args["tool"]}) in earlier
  assert traj.result.success and traj.tool_errors == 0
  assert traj.final_answer == task.reference_answer
  md = render_transcript(traj, task)
  assert "[PASS] no_reply_to_exempt" in md and "Success: True" in md


def test_materialising_a_changed_library_is_detected(task):
  broken = task.model_copy(deep=True)
  broken.initial_state.hash = "0" * 32
  with pytest.raises(ValueError, match="hash"):
    broken.make_env()


def test_bad_reference_call_is_reported_by_gates(task):
  bad = task.model_copy(deep=True)
  bad.reference_solution.insert(0, ToolCall(service="calendar", tool="get_event", arguments={}))
  assert "probe_error_at_call_0" in gate_failures(bad)
