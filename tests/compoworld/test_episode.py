import json

from compoworld.agents.agent import AGENTS, Agent, make_agent, tool_call_message
from compoworld.agents.demo import run_demo
from compoworld.agents.episode import run_episode
from compoworld.compose.benchmark import bench_env
from envs.scenarios import community_meetup


class ScriptedAgent(Agent):
  """Plays back fixed assistant messages, then gives up."""

  def __init__(self, replies):
    self.replies = list(replies)

  def act(self, messages, tools):
    return self.replies.pop(0) if self.replies else {"role": "assistant", "content": "I give up"}


def raw_call(name, arguments):
  return {
    "role": "assistant",
    "content": None,
    "tool_calls": [
      {"id": "c1", "type": "function", "function": {"name": name, "arguments": arguments}}
    ],
  }


def test_malformed_calls_become_error_envelopes_and_the_episode_goes_on():
  task = community_meetup(0)
  agent = ScriptedAgent(
    [
      raw_call("call_tool", "{not json"),
      raw_call("call_tool", "[1, 2]"),
      raw_call("teleport", "{}"),
      raw_call("call_tool", json.dumps({"service": "calendar", "tool": "get_event"})),
      tool_call_message("", "list_services", {}, "c5"),
    ]
  )
  traj, env = run_episode(agent, task)
  tool_msgs = [json.loads(m["content"]) for m in traj.messages if m["role"] == "tool"]
  assert [m["status"] for m in tool_msgs] == [400, 400, 404, 400, 200]
  assert tool_msgs[0]["error"]["type"] == "malformed_call"
  assert "event_id" in tool_msgs[3]["error"]["message"]
  assert traj.tool_calls == 5 and traj.tool_errors == 4
  assert traj.final_answer == "I give up" and not traj.result.success
  assert env.state_hash() == task.make_env().state_hash()


def test_turn_budget_stops_an_endless_agent():
  class Looper(Agent):
    def act(self, messages, tools):
      return tool_call_message("", "list_services", {}, "c")

  traj, _ = run_episode(Looper(), community_meetup(0), max_turns=3)
  assert traj.turns == 3 and traj.final_answer is None and traj.tool_calls == 3


def test_agent_registry():
  assert "oracle" in AGENTS
  assert make_agent("oracle").name == "oracle"
  try:
    make_agent("nope")
  except KeyError as err:
    assert "oracle" in str(err)
  else:
    raise AssertionError("unknown agent accepted")


def test_demo_writes_its_files(tmp_path):
  summary = run_demo(community_meetup(0), tmp_path)
  assert summary["gates_passed"] and summary["success"] and summary["score_at_s0"] == 0.0
  assert summary["changed_services"] == ["calendar", "forum", "simosphere"]
  for name in ("tasks.jsonl", "trajectories.jsonl", "transcript.md"):
    assert (tmp_path / name).stat().st_size > 0
  traj = json.loads((tmp_path / "trajectories.jsonl").read_text())
  assert traj["result"]["success"] and traj["messages"][1]["role"] == "user"


def test_benchmark_reports_every_figure():
  out = bench_env(records=50, calls=20, repeats=2)
  for key in ("read_us_median", "write_us_median", "read_calls_per_s", "fork_ms", "hash_ms"):
    assert out[key] > 0, key
  assert out["records_total"] >= 5 * 50
