"""Trajectory collection: the OpenAI agent on recorded answers, the v = 1 filter, shards, the
script."""

import json
import subprocess
import sys

import httpx2
import pytest

from compoworld.agents.agent import AGENTS, AgentError, OpenAIAgent, OracleAgent
from compoworld.agents.episode import run_episode
from compoworld.agents.trajectories import collect_trajectories, load_trajectories, tool_steps
from compoworld.compose.env import META_TOOLS
from compoworld.tasks.generate import generate_tasks
from compoworld.tasks.task import save_tasks
from tests.compoworld.recorded import URL, Recorded, mock_http


@pytest.fixture(scope="module")
def tasks():
  tasks, _ = generate_tasks(4, seed=0, progress=False, k=2, min_walk=3, max_walk=3)
  assert len(tasks) == 4
  return tasks


def recorded_agent(handler, **kwargs):
  return OpenAIAgent(
    model="recorded-model",
    base_url=URL,
    api_key="k",
    http_client=mock_http(handler),
    **kwargs,
  )


def oracle_replies(task):
  """What a model that solves ``task`` answers: the oracle's assistant messages."""
  traj, _ = run_episode(OracleAgent(), task)
  assert traj.result.success
  return [m for m in traj.messages if m["role"] == "assistant"]


def test_openai_agent_solves_a_task_with_recorded_answers(tasks):
  task = tasks[0]
  replies = oracle_replies(task)
  recorded = Recorded(replies)
  traj, _ = run_episode(recorded_agent(recorded, temperature=0.3), task)
  assert traj.result.success and traj.agent == "openai"
  assert traj.final_answer == replies[-1]["content"]
  assert len(recorded.requests) == len(replies) == traj.turns
  first, last = recorded.requests[0], recorded.requests[-1]
  assert first["model"] == "recorded-model" and first["temperature"] == 0.3
  assert first["tools"] == META_TOOLS
  assert [m["role"] for m in first["messages"]] == ["system", "user"]
  # the endpoint saw every earlier call and the envelope it returned
  assert last["messages"] == traj.messages[:-1]
  assert json.loads(last["messages"][-1]["content"])["ok"]


def test_openai_agent_errors_are_agent_errors():
  agent = recorded_agent(
    lambda request: httpx2.Response(503, json={"error": "down"}), max_retries=0
  )
  with pytest.raises(AgentError, match="recorded-model"):
    agent.act([{"role": "user", "content": "hi"}], META_TOOLS)
  with pytest.raises(ValueError, match="model name"):
    OpenAIAgent(model="")


class QuitsOnOddTasks(OracleAgent):
  """The oracle, except that on odd task indices it answers at once (and fails the rubric)."""

  def reset(self, task):
    super().reset(task)
    if int(task.id[-1]) % 2:
      self._steps = []


def test_only_successful_trajectories_are_kept(tasks, tmp_path, monkeypatch):
  monkeypatch.setitem(AGENTS, "quitter", QuitsOnOddTasks)
  summary = collect_trajectories(tasks, tmp_path, agent="quitter", workers=2, progress=False)
  everything = load_trajectories(tmp_path / "trajectories.jsonl")
  kept = load_trajectories(tmp_path / "sft.jsonl")
  assert [r["task_id"] for r in everything] == [t.id for t in tasks]
  assert [r["task_id"] for r in kept] == [tasks[0].id, tasks[2].id]
  assert all(r["success"] and r["result"]["success"] and r["score"] == 1.0 for r in kept)
  failed = [r for r in everything if not r["success"]]
  assert len(failed) == 2 and all(r["turns"] == 1 and r["score"] < 1.0 for r in failed)
  assert summary["kept"] == 2 and summary["rejected"] == 2 and summary["tasks"] == 4
  assert summary["rejected_reasons"] == {"verification_failed": 2}
  assert summary["success_rate"] == 0.5


def test_records_carry_calls_and_envelopes(tasks, tmp_path):
  collect_trajectories(tasks[:1], tmp_path, progress=False)
  (record,) = load_trajectories(tmp_path / "trajectories.jsonl")
  assert record["agent"] == "oracle" and record["model"] is None
  assert len(record["calls"]) == record["tool_calls"] == record["turns"] - 1
  first, last = record["calls"][0], record["calls"][-1]
  assert first["name"] == "list_services" and first["arguments"] == {}
  assert first["envelope"]["ok"] and isinstance(first["envelope"]["data"], list)
  assert last["name"] == "call_tool" and last["arguments"] == {
    "service": tasks[0].reference_solution[-1].service,
    "tool": tasks[0].reference_solution[-1].tool,
    "arguments": tasks[0].reference_solution[-1].arguments,
  }


def test_tool_steps_pair_calls_with_results_in_order():
  calls = [
    {"id": "x", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}},
    {"id": "x", "type": "function", "function": {"name": "g", "arguments": "{bad"}},
  ]  # a reused id: pairing is by position
  messages = [
    {"role": "user", "content": "u"},
    {"role": "assistant", "content": "", "tool_calls": calls},
    {"role": "tool", "tool_call_id": "x", "content": '{"ok": true, "status": 200, "data": 1}'},
    {"role": "tool", "tool_call_id": "x", "content": '{"ok": false, "status": 400}'},
  ]
  assert tool_steps(messages) == [
    {"id": "x", "name": "f", "arguments": {"a": 1}, "envelope": json.loads(messages[2]["content"])},
    {"id": "x", "name": "g", "arguments": "{bad", "envelope": json.loads(messages[3]["content"])},
  ]


def test_agent_errors_are_counted_not_raised(tasks, tmp_path):
  kwargs = {
    "model": "down",
    "base_url": URL,
    "api_key": "k",
    "max_retries": 0,
    "http_client": mock_http(lambda r: httpx2.Response(500, json={})),
  }
  summary = collect_trajectories(
    tasks[:2], tmp_path, agent="openai", agent_kwargs=kwargs, progress=False
  )
  assert summary["trajectories"] == 0 and summary["kept"] == 0
  assert summary["rejected_reasons"] == {"agent_error": 2}
  assert sorted(summary["agent_errors"]) == [tasks[0].id, tasks[1].id]
  assert (tmp_path / "sft.jsonl").read_text() == ""


def test_shards_partition_the_tasks(tasks, tmp_path):
  ids = []
  for shard in range(3):
    summary = collect_trajectories(
      tasks, tmp_path / str(shard), shard_index=shard, num_shards=3, progress=False
    )
    ids += [r["task_id"] for r in load_trajectories(tmp_path / str(shard) / "trajectories.jsonl")]
    assert summary["tasks"] == len(tasks[shard::3])
  assert sorted(ids) == sorted(t.id for t in tasks)
  with pytest.raises(ValueError, match="shard_index 3"):
    collect_trajectories(tasks, tmp_path, shard_index=3, num_shards=3)
  with pytest.raises(KeyError, match="no agent named 'nobody'"):
    collect_trajectories(tasks, tmp_path, agent="nobody")


def test_collect_trajectories_script(tasks, tmp_path):
  save_tasks(tasks[:2], tmp_path / "tasks.jsonl")
  out = subprocess.run(
    [
      sys.executable,
      "-m",
      "experiments.collect_trajectories",
      f"--tasks={tmp_path / 'tasks.jsonl'}",
      "--agent=oracle",
      f"--workdir={tmp_path / 'run'}",
    ],
    capture_output=True,
    text=True,
    check=True,
  )
  summary = json.loads(out.stdout.strip().splitlines()[-1])
  assert summary["kept"] == 2 and summary["rejected"] == 0
  assert json.loads((tmp_path / "run" / "summary.json").read_text()) == summary
  assert len(load_trajectories(tmp_path / "run" / "sft.jsonl")) == 2
  subprocess.run(  # the quoting oracle (OracleAgent quote)
    [
      sys.executable,
      "-m",
      "experiments.collect_trajectories",
      f"--tasks={tmp_path / 'tasks.jsonl'}",
      "--discovery=none",
      "--quote",
      f"--workdir={tmp_path / 'quoted'}",
    ],
    capture_output=True,
    check=True,
  )
  for row in load_trajectories(tmp_path / "quoted" / "sft.jsonl"):
    first = next(m for m in row["messages"] if m["role"] == "assistant")
    assert first["content"].startswith('Next step: "'), first
  argv = [sys.executable, "-m", "experiments.collect_trajectories"]
  argv += [f"--tasks={tmp_path / 'tasks.jsonl'}", "--discovery=none", "--quote"]
  subprocess.run([*argv, "--quote_form=bare", f"--workdir={tmp_path / 'bare'}"], check=True)
  quotes = {
    form: [
      m["content"].partition('"\n')[0]
      for row in load_trajectories(tmp_path / form / "sft.jsonl")
      for m in row["messages"]
      if m["role"] == "assistant" and m["content"].startswith('Next step: "')
    ]
    for form in ("quoted", "bare")
  }
  assert len(quotes["bare"]) == len(quotes["quoted"]) and quotes["bare"] != quotes["quoted"]
  assert not any(
    q.startswith(('Next step: "With that,', 'Next step: "Then ')) for q in quotes["bare"]
  )


def test_episodes_cut_by_max_turns_are_rejected(tasks, tmp_path):
  summary = collect_trajectories(tasks[:2], tmp_path, max_turns=3, progress=False)
  assert summary["rejected_reasons"] == {"no_final_answer": 2} and summary["kept"] == 0
  assert all(r["turns"] == 3 for r in load_trajectories(tmp_path / "trajectories.jsonl"))


@pytest.mark.parametrize("discovery", ["full", "services", "none"])
def test_oracle_discovery_levels_all_solve_and_name_the_tool_before_its_arguments(tasks, discovery):
  names = []
  for task in tasks:
    traj, _ = run_episode(OracleAgent(discovery=discovery), task)
    assert traj.result.success, (discovery, task.id)
    calls = [c["function"] for m in traj.messages for c in m.get("tool_calls") or []]
    names.append([c["name"] for c in calls])
    for fn in calls:
      if fn["name"] == "call_tool":
        assert list(json.loads(fn["arguments"])) == ["service", "tool", "arguments"]
    assert sum(n == "call_tool" for n in names[-1]) == len(task.reference_solution)
  flat = {n for row in names for n in row}
  expected = {
    "full": {"list_services", "list_tools", "describe_tool", "call_tool"},
    "services": {"list_services", "call_tool"},
    "none": {"call_tool"},
  }
  assert flat == expected[discovery]
  with pytest.raises(ValueError, match="valid: full, services, none"):
    OracleAgent(discovery="some")


def test_an_unnarrated_oracle_makes_the_same_calls_with_the_call_as_the_whole_turn(tasks):
  """``narrate=False``: every tool-calling turn has empty content, the calls and the verdict are
  the narrated oracle's, and the rendered turn starts with the call."""
  from rl.data.chat import TOOL_CALL, assistant_body

  for task in tasks[:3]:
    narrated, _ = run_episode(OracleAgent(discovery="none"), task)
    plain, _ = run_episode(OracleAgent(discovery="none", narrate=False), task)
    assert plain.result.success and narrated.result.success
    calling = [m for m in plain.messages if m.get("tool_calls")]
    assert calling and all(m["content"] == "" for m in calling)
    assert all(assistant_body(m).startswith(TOOL_CALL) for m in calling)
    assert any(m["content"] for m in narrated.messages if m.get("tool_calls"))

    def calls(traj):
      return [c["function"] for m in traj.messages for c in m.get("tool_calls") or []]

    assert calls(plain) == calls(narrated)


def test_a_quoting_oracle_quotes_each_sentence_before_its_first_call(tasks):
  """``quote=True``: the first call made for each sentence of the request opens with that
  sentence, quoted whole; the calls and the verdict are the plain oracle's; a task without
  recorded sentences (an LLM author's, or one saved before they were) is a clear error."""
  from compoworld.agents.agent import QUOTE_PREFIX

  for task in tasks:
    plain, _ = run_episode(OracleAgent(discovery="none"), task)
    quoting, _ = run_episode(OracleAgent(discovery="none", quote=True), task)
    assert quoting.result.success
    calling = [m for m in quoting.messages if m.get("tool_calls")]
    assert [m["tool_calls"] for m in calling] == [
      m["tool_calls"] for m in plain.messages if m.get("tool_calls")
    ]
    quoted = [m["content"] for m in calling if m["content"].startswith(QUOTE_PREFIX)]
    spans = task.meta["clauses"]
    with_calls = [task.instruction[a:b] for a, b, first, last in spans if last > first]
    assert sorted(q[len(QUOTE_PREFIX) + 1 : q.index('"\n')] for q in quoted) == sorted(with_calls)
    for a, b, first, last in spans:  # the quote stands at the sentence's first call
      if last > first:
        call = json.loads(calling[first]["tool_calls"][0]["function"]["arguments"])
        assert call["tool"] == task.reference_solution[first].tool
        assert calling[first]["content"] == (
          f'{QUOTE_PREFIX}"{task.instruction[a:b]}"\nNow I\'ll call {call["tool"]} on '
          f"{call['service']}."
        )
  bare = tasks[0].model_copy(
    update={"meta": {k: v for k, v in tasks[0].meta.items() if k != "clauses"}}
  )
  with pytest.raises(ValueError, match="records no sentences"):
    OracleAgent(quote=True).reset(bare)
  with pytest.raises(ValueError, match="unknown quote 'clause'"):
    OracleAgent(quote="clause")


def test_a_bare_quote_leaves_out_the_sentences_opening_connective(tasks):
  """``quote="bare"``: the same turns as ``quote=True`` but each quote without the connective
  drawn at random to open its sentence ("With that, post ..." -> "post ..."); a sentence that
  opens otherwise ("Find ...", "Also ...") is quoted whole."""
  from compoworld.agents.agent import QUOTE_PREFIX
  from compoworld.tasks.authoring import CONNECTIVES, without_connective

  assert without_connective("With that, post it.") == "post it."
  assert without_connective("Then post it.") == "post it."
  assert without_connective("Thenceforth post it.") == "Thenceforth post it."
  assert without_connective("Also find it. Next, post it.") == "Also find it. Next, post it."
  stripped = 0
  for task in tasks:
    whole, _ = run_episode(OracleAgent(discovery="none", quote="sentence"), task)
    bare, _ = run_episode(OracleAgent(discovery="none", quote="bare"), task)
    assert bare.result.success
    for a, b in zip(whole.messages, bare.messages, strict=True):
      assert a.get("tool_calls") == b.get("tool_calls")
      if a["role"] != "assistant" or not a["content"].startswith(QUOTE_PREFIX):
        assert a == b
        continue
      sentence, rest = a["content"][len(QUOTE_PREFIX) + 1 :].split('"\n')
      opens = next((c for c in CONNECTIVES if sentence.startswith(f"{c} ")), None)
      quote = sentence[len(opens) + 1 :] if opens else sentence
      assert b["content"] == f'{QUOTE_PREFIX}"{quote}"\n{rest}'
      stripped += opens is not None
  assert stripped >= len(tasks)  # each composed task has connectives to leave out
