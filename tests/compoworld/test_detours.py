"""Detours (``compoworld.agents.detours``): a wrong read that finds nothing, played before the
right one and kept out of the SFT loss."""

import json
import random

import pytest

from compoworld.agents.agent import OracleAgent
from compoworld.agents.detours import TRAINED, finds_nothing, plan_detour, wrong_values
from compoworld.agents.episode import run_episode
from compoworld.tasks.generate import generate_tasks
from compoworld.tasks.task import ToolCall, needed_calls


@pytest.fixture(scope="module")
def tasks():
  tasks, _ = generate_tasks(16, seed=5, progress=False, k=1, min_walk=2, max_walk=2)
  return tasks


def test_finds_nothing_is_an_empty_page_or_a_404():
  page = {"items": [], "total": 0, "offset": 0, "next_offset": None}
  assert finds_nothing({"ok": True, "status": 200, "data": page})
  assert finds_nothing({"ok": True, "status": 200, "data": []})
  assert finds_nothing({"ok": False, "status": 404, "error": {"type": "not_found"}})
  assert not finds_nothing({"ok": True, "status": 200, "data": {**page, "items": [{"id": "x"}]}})
  assert not finds_nothing({"ok": True, "status": 200, "data": {"id": "inv_1", "tags": []}})
  assert not finds_nothing({"ok": False, "status": 400, "error": {"type": "invalid_argument"}})


def test_wrong_values_are_the_instructions_other_names_before_its_single_words(tasks):
  instruction = (
    'Pull up the "Ember launch readiness" post for order SO-43565, then draft one about Vertex '
    "budget review in 3 places."
  )
  task = tasks[0].model_copy(update={"instruction": instruction})
  calls = [
    ToolCall(service="s", tool="t", arguments={"query": "Ember launch readiness"}),
    ToolCall(service="s", tool="w", arguments={"topic": "Vertex budget review", "n": 3}),
  ]
  seen = '{"items": [{"id": "pst_0a1b2c3d"}, {"id": "pst_99887766"}, {"id": "usr_12345678"}]}'
  likely, rest = wrong_values(task, calls, "pst_0a1b2c3d", {"enum": ["draft", "published"]}, seen)
  assert likely == [
    "draft",
    "published",
    "Ember launch readiness",
    "Vertex budget review",
    "SO-43565",
    "pst_99887766",
  ]
  # A sentence's first word and a name's first word; "3" is no name at all.
  assert rest == ["Pull", "Vertex"]
  likely, _ = wrong_values(task, calls, "Ember launch readiness", {}, seen)
  assert "Ember launch readiness" not in likely


def test_a_planned_detour_is_a_read_of_the_same_tool_that_finds_nothing(tasks):
  planned = 0
  for task in tasks:
    calls = needed_calls(task)
    detour = plan_detour(task, calls, random.Random(task.id))
    if detour is None:
      continue
    planned += 1
    right = calls[detour.index]
    assert (detour.call.service, detour.call.tool) == (right.service, right.tool)
    changed = [k for k in right.arguments if right.arguments[k] != detour.call.arguments[k]]
    assert len(changed) == 1 and detour.call.arguments.keys() == right.arguments.keys()
    env = task.make_env()
    assert not env.services[right.service].spec(right.tool).mutates
    for c in calls[: detour.index]:
      env.call_tool(c.service, c.tool, c.arguments)
    assert finds_nothing(
      env.call_tool(detour.call.service, detour.call.tool, detour.call.arguments)
    )
  assert planned >= len(tasks) // 2  # most single-service walks have a read to go wrong on


def test_the_oracle_plays_the_detour_untrained_before_the_right_call_and_still_verifies(tasks):
  detoured = 0
  for task in tasks:
    plain, _ = run_episode(OracleAgent(discovery="none", reads="needed"), task)
    traj, _ = run_episode(OracleAgent(discovery="none", reads="needed", detours=1.0), task)
    assert traj.result.success and plain.result.success
    assert all(TRAINED not in m for m in plain.messages)
    marked = [i for i, m in enumerate(traj.messages) if TRAINED in m]
    if not marked:
      assert len(traj.messages) == len(plain.messages)
      continue
    detoured += 1
    (i,) = marked
    assert traj.messages[i][TRAINED] is False and traj.messages[i]["role"] == "assistant"
    assert finds_nothing(json.loads(traj.messages[i + 1]["content"]))
    wrong = json.loads(traj.messages[i]["tool_calls"][0]["function"]["arguments"])
    right = json.loads(traj.messages[i + 2]["tool_calls"][0]["function"]["arguments"])
    assert (wrong["service"], wrong["tool"]) == (right["service"], right["tool"])
    assert wrong["arguments"] != right["arguments"]
    # The rest of the trajectory is the plain one: two more messages, the wrong turn and its reply.
    without = traj.messages[:i] + traj.messages[i + 2 :]
    strip = [{k: v for k, v in m.items() if k != "tool_call_id"} for m in without]
    assert len(strip) == len(plain.messages)
    for a, b in zip(strip, plain.messages, strict=True):
      assert a.get("content") == b.get("content") or a["role"] == "tool"
  assert detoured >= len(tasks) // 2


def test_the_detour_share_is_drawn_by_task_and_checked(tasks):
  def marked(share):
    return [
      any(
        TRAINED in m for m in run_episode(OracleAgent(reads="needed", detours=share), t)[0].messages
      )
      for t in tasks
    ]

  half = marked(0.5)
  assert half == marked(0.5)  # the same tasks each time: drawn from the task id
  assert 0 < sum(half) < sum(marked(1.0))
  assert not any(marked(0.0))
  with pytest.raises(ValueError, match="detours is a share"):
    OracleAgent(detours=1.5)
