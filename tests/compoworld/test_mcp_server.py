"""The MCP server, driven by the SDK's own client: in memory, over stdio, over HTTP."""

import json
import os
import signal
import subprocess
import sys
import types
import urllib.parse
from pathlib import Path

import anyio
import httpx2
import mcp
import mcp_types
import pytest
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from compoworld.agents.agent import OracleAgent
from compoworld.agents.episode import run_episode
from compoworld.compose.env import META_TOOLS
from compoworld.runtime.registry import registry
from compoworld.serve import mcp_server
from compoworld.serve.mcp_export import tool_annotations
from compoworld.serve.mcp_server import (
  TOOL_TEMPLATE,
  VERIFY_TEMPLATE,
  VERIFY_URI,
  EnvServer,
  load_task,
)
from compoworld.tasks.generate import generate_tasks
from compoworld.tasks.task import save_tasks
from envs.scenarios import community_meetup

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def meetup():
  return community_meetup(0)


@pytest.fixture(scope="module")
def generated():
  """Two procedurally generated tasks; the second one's rubric checks a final answer."""
  tasks, _ = generate_tasks(2, seed=0, progress=False)
  return tasks


@pytest.fixture(scope="module")
def meetup_file(meetup, tmp_path_factory):
  path = tmp_path_factory.mktemp("tasks") / "tasks.jsonl"
  save_tasks([meetup], path)
  return path


def run(fn, *args):
  return anyio.run(fn, *args)


async def verification(client, answer=None):
  uri = (
    VERIFY_URI if answer is None else f"{VERIFY_URI}?{urllib.parse.urlencode({'answer': answer})}"
  )
  read = await client.read_resource(uri)
  return json.loads(read.contents[0].text)


async def replay(client, task):
  """The task's reference solution as namespaced MCP calls; returns the results."""
  return [
    await client.call_tool(f"{c.service}__{c.tool}", c.arguments) for c in task.reference_solution
  ]


# --- tools/list ------------------------------------------------------------------------------


def test_tools_list_is_every_namespaced_tool_with_its_exact_schema(meetup):
  server = EnvServer(meetup)

  async def main():
    async with mcp.Client(server.server) as client:
      return (await client.list_tools()).tools

  tools = run(main)
  services = meetup.services + meetup.distractors
  expected = {
    f"{s}__{name}": spec for s in services for name, spec in registry.get(s).tools.items()
  }
  assert len(tools) == len(expected) == sum(len(registry.get(s).tools) for s in services)
  assert {t.name for t in tools} == set(expected)
  for t in tools:
    spec = expected[t.name]
    assert t.input_schema == spec.input_schema
    assert t.description == spec.description
    assert t.annotations.read_only_hint is (not spec.mutates)
    service = registry.get(t.name.split("__")[0])
    want = tool_annotations(service, spec)  # the rule the export uses (tested there)
    assert t.annotations.model_dump(by_alias=True, exclude_none=True) == want
  # Grouped by service in list_services' shuffled order, which hides the distractors.
  order = [t.name.split("__")[0] for t in tools]
  shuffled = [s["name"] for s in meetup.make_env().list_services()["data"]]
  assert list(dict.fromkeys(order)) == shuffled
  assert set(shuffled) == set(services)


def test_meta_tool_mode_lists_the_four_meta_tools(meetup):
  server = EnvServer(meetup, meta_tools=True)

  async def main():
    async with mcp.Client(server.server) as client:
      return (await client.list_tools()).tools

  tools = run(main)
  assert [t.name for t in tools] == ["list_services", "list_tools", "describe_tool", "call_tool"]
  for t, meta in zip(tools, META_TOOLS, strict=True):
    assert t.input_schema == meta["function"]["parameters"]
  assert [t.annotations.read_only_hint for t in tools] == [True, True, True, False]
  assert [t.annotations.destructive_hint for t in tools] == [False, False, False, True]


# --- tools/call ------------------------------------------------------------------------------


def test_call_returns_the_envelope_and_flags_errors(meetup):
  server = EnvServer(meetup)
  local = meetup.make_env()

  async def main():
    async with mcp.Client(server.server) as client:
      found = await client.call_tool("calendar__list_events", {"query": "anniversary meetup"})
      missing = await client.call_tool("calendar__get_event", {"event_id": "evt_missing"})
      bad = await client.call_tool("calendar__get_event", {})
      with pytest.raises(MCPError) as unknown:
        await client.call_tool("calendar__no_such_tool", {})
      return found, missing, bad, unknown.value

  found, missing, bad, unknown = run(main)
  want = local.call_tool("calendar", "list_events", {"query": "anniversary meetup"})
  assert want["ok"] and want["data"]["items"]
  assert found.is_error is False
  assert found.structured_content == want
  assert json.loads(found.content[0].text) == want
  assert missing.is_error is True
  assert missing.structured_content == {
    "ok": False,
    "status": 404,
    "error": {"type": "not_found", "message": "event 'evt_missing' not found"},
  }
  assert bad.is_error is True
  assert bad.structured_content["status"] == 400
  assert "event_id" in bad.structured_content["error"]["message"]
  assert unknown.code == INVALID_PARAMS
  assert "calendar__no_such_tool" in unknown.message


def test_reference_solution_over_mcp_reaches_the_goal_and_verifies(generated):
  task = next(t for t in generated if t.reference_answer is not None)
  server = EnvServer(task)

  async def main():
    async with mcp.Client(server.server) as client:
      before = await verification(client)
      results = await replay(client, task)
      no_answer = await verification(client)
      answered = await verification(client, task.reference_answer)
      return before, results, no_answer, answered

  before, results, no_answer, answered = run(main)
  assert not any(before["criteria"])  # gate: no criterion holds at s0
  assert before["state_hash"] == task.initial_state.hash
  assert [r.is_error for r in results] == [False] * len(task.reference_solution)
  assert answered["success"] is True and answered["score"] == 1.0
  assert answered["state_hash"] == no_answer["state_hash"] == task.goal_hash
  assert no_answer["success"] is False  # the answer criterion needs the final answer
  assert answered["ids"] == [c.id for c in task.rubric]


def test_oracle_solves_the_meetup_through_the_meta_tools_over_mcp(meetup):
  """The episode loop with MCP in place of the env: same verdict, same final state."""
  server = EnvServer(meetup, meta_tools=True)
  local, local_env = run_episode(OracleAgent(), meetup)

  async def main():
    agent = OracleAgent()
    agent.reset(meetup)
    messages = [{"role": "user", "content": meetup.instruction}]
    async with mcp.Client(server.server) as client:
      while True:
        reply = agent.act(messages, META_TOOLS)
        messages.append(reply)
        if not reply.get("tool_calls"):
          return messages, await verification(client, reply["content"])
        for call in reply["tool_calls"]:
          args = json.loads(call["function"]["arguments"])
          result = await client.call_tool(call["function"]["name"], args)
          messages.append(
            {"role": "tool", "tool_call_id": call["id"], "content": result.content[0].text}
          )

  messages, verdict = run(main)
  assert local.result.success is True
  assert verdict["success"] is True
  assert verdict["state_hash"] == local_env.state_hash()
  # The tool messages carry the bytes an in-process episode shows the agent.
  assert [m["content"] for m in messages if m["role"] == "tool"] == [
    m["content"] for m in local.messages if m["role"] == "tool"
  ]


# --- sessions --------------------------------------------------------------------------------


def test_every_session_plays_on_its_own_fork_of_s0(meetup):
  server = EnvServer(meetup)
  s0_hash = meetup.make_env().state_hash()
  writes = [c for c in meetup.reference_solution if registry.get(c.service).tools[c.tool].mutates]

  async def main():
    async with mcp.Client(server.server) as a, mcp.Client(server.server, mode="legacy") as b:
      for call in writes:
        await a.call_tool(f"{call.service}__{call.tool}", call.arguments)
      versions = a.session.protocol_version, b.session.protocol_version
      return await verification(a), await verification(b), versions

  after_a, after_b, versions = run(main)
  assert versions == ("2026-07-28", "2025-11-25")  # both protocol eras
  assert writes
  assert after_a["state_hash"] != s0_hash
  assert after_b["state_hash"] == s0_hash
  assert server.s0.state_hash() == s0_hash
  summary = server.summary()
  assert summary["sessions_opened"] == 2
  assert summary["tool_calls"] == len(writes)
  assert [s["tool_calls"] for s in summary["sessions"]] == [len(writes), 0]
  assert [s["state_hash"] for s in summary["sessions"]] == [after_a["state_hash"], s0_hash]


def test_idle_http_sessions_are_pruned_when_a_new_one_opens(meetup, monkeypatch):
  clock = [0.0]
  monkeypatch.setattr(mcp_server, "time", types.SimpleNamespace(monotonic=lambda: clock[0]))
  server = EnvServer(meetup, session_idle_timeout=100)

  async def main():
    async with server.server.lifespan(server.server) as sessions:  # an HTTP app's lifespan
      a = sessions.get("a")
      clock[0] = 10.0
      sessions.get("b")
      clock[0] = 205.0  # a idle 205 > 2 x 100; b idle 195, kept
      sessions.get("c")
      kept = sorted(sessions.by_key)
      clock[0] = 206.0
      again = sessions.get("a")
      return a, kept, again, server.summary()

  a, kept, again, summary = run(main)
  assert kept == ["b", "c"]
  assert again is not a and again.number == 4
  assert summary["sessions_opened"] == 4
  assert [r["session"] for r in summary["sessions"]] == [1, 2, 3, 4]
  assert [r["session"] for r in server.summary()["sessions"]] == [1, 2, 3, 4]  # after close


def test_task_resource_and_prompt_and_unknown_resource(meetup):
  server = EnvServer(meetup)

  async def main():
    async with mcp.Client(server.server) as client:
      task = json.loads((await client.read_resource("compoworld://task")).contents[0].text)
      prompt = await client.get_prompt("task")
      listed = [r.uri for r in (await client.list_resources()).resources]
      with pytest.raises(MCPError) as err:
        await client.read_resource("compoworld://nothing")
      return task, prompt, listed, err.value

  task, prompt, listed, err = run(main)
  assert task == {"id": "meetup-0", "instruction": meetup.instruction}
  assert prompt.messages[0].role == "user"
  assert prompt.messages[0].content.text == meetup.instruction
  assert listed == ["compoworld://task", VERIFY_URI]
  assert err.code == INVALID_PARAMS


def test_tool_resource_is_describe_tool_and_completion_suggests_its_names(meetup):
  server = EnvServer(meetup, meta_tools=True)
  tool_ref = mcp_types.ResourceTemplateReference(type="ref/resource", uri=TOOL_TEMPLATE)

  async def main():
    async with mcp.Client(server.server) as client:
      capable = client.session.server_capabilities.completions is not None
      read = await client.read_resource("compoworld://tools/calendar/get_event")
      values = [
        (await client.complete(ref, {"name": name, "value": typed}, given)).completion.values
        for ref, name, typed, given in [
          (tool_ref, "service", "c", None),
          (tool_ref, "tool", "get_", {"service": "calendar"}),
          (tool_ref, "tool", "get_e", None),  # no service chosen yet: every service's tools
          (tool_ref, "tool", "", {"service": "nope"}),
          (mcp_types.ResourceTemplateReference(type="ref/resource", uri=VERIFY_TEMPLATE),
           "answer", "", None),
        ]
      ]  # fmt: skip
      errors = []
      for ref, name in [
        (mcp_types.PromptReference(type="ref/prompt", name="test_prompt_with_arguments"), "arg1"),
        (mcp_types.PromptReference(type="ref/prompt", name="task"), "arg1"),  # takes none
        (mcp_types.ResourceTemplateReference(type="ref/resource", uri="test://{id}"), "id"),
        (tool_ref, "arguments"),
      ]:
        with pytest.raises(MCPError) as err:
          await client.complete(ref, {"name": name, "value": ""})
        errors.append(err.value)
      return capable, json.loads(read.contents[0].text), values, errors

  capable, described, values, errors = run(main)
  assert capable
  assert described == server.s0.describe_tool("calendar", "get_event")["data"]
  calendar = registry.get("calendar").tools
  every = {t for name in server.s0.services for t in registry.get(name).tools}
  assert values == [
    ["calendar", "chat"],
    sorted(t for t in calendar if t.startswith("get_")),
    sorted(t for t in every if t.startswith("get_e")),
    [],
    [],
  ]
  assert values[1] and values[2]  # the prefixes match something
  assert [e.code for e in errors] == [INVALID_PARAMS] * 4
  assert "its arguments: service, tool" in str(errors[3])


# --- load_task -------------------------------------------------------------------------------


def test_load_task_errors_name_what_is_wrong(meetup, generated, tmp_path):
  path = tmp_path / "tasks.jsonl"
  save_tasks([meetup, *generated], path)
  assert load_task(path, "meetup-0").id == "meetup-0"
  with pytest.raises(ValueError, match=r"no task 'nope' in .*meetup-0, t0-000000, t0-000001"):
    load_task(path, "nope")
  with pytest.raises(ValueError, match="holds 3 tasks"):
    load_task(path)
  with pytest.raises(FileNotFoundError, match="no tasks file"):
    load_task(tmp_path / "missing.jsonl", "meetup-0")
  one = tmp_path / "one.jsonl"
  save_tasks([meetup], one)
  assert load_task(one).id == "meetup-0"


# --- transports ------------------------------------------------------------------------------


def test_stdio_subprocess_serves_the_task_and_writes_its_summary(meetup, meetup_file, tmp_path):
  params = mcp.StdioServerParameters(
    command=sys.executable,
    args=[
      "-m",
      "experiments.serve_mcp",
      f"--tasks={meetup_file}",
      "--task_id=meetup-0",
      f"--workdir={tmp_path}",
    ],
    cwd=REPO,
  )

  async def main():
    async with mcp.Client(params) as client:
      tools = (await client.list_tools()).tools
      results = await replay(client, meetup)
      return tools, results, await verification(client, meetup.reference_answer)

  tools, results, verdict = run(main)
  assert len(tools) == len(EnvServer(meetup).tools)
  assert not any(r.is_error for r in results)
  assert verdict["success"] is True
  summary = json.loads((tmp_path / "summary.json").read_text())
  assert summary["transport"] == "stdio"
  assert summary["sessions_opened"] == 1
  assert summary["tool_calls"] == len(meetup.reference_solution)
  assert summary["sessions"][0]["success"] is True  # the meetup rubric reads state only


async def _with_http_server(server, token, body):
  """Runs ``server`` on a free loopback port while ``body(url)`` runs, then stops it."""
  urls, stop = [], anyio.Event()
  async with anyio.create_task_group() as tg:
    tg.start_soon(lambda: server.serve_http("127.0.0.1", 0, token, urls.append, stop))
    with anyio.fail_after(10):
      while not urls:
        await anyio.sleep(0.01)
    try:
      return await body(urls[0])
    finally:
      stop.set()


def test_http_without_token_gives_each_client_its_own_session(meetup):
  server = EnvServer(meetup)
  write = next(
    c for c in meetup.reference_solution if registry.get(c.service).tools[c.tool].mutates
  )

  async def body(url):
    assert url.startswith("http://127.0.0.1:")
    async with mcp.Client(url) as a, mcp.Client(url) as b:
      wrote = await a.call_tool(f"{write.service}__{write.tool}", write.arguments)
      views = await verification(a), await verification(b)
      version = a.session.protocol_version
    async with mcp.Client(url, mode="2026-07-28") as modern:  # sessionless: lists, cannot act
      listed = await modern.list_tools()
      with pytest.raises(MCPError, match="one environment state per MCP session"):
        await modern.call_tool(f"{write.service}__{write.tool}", write.arguments)
    return wrote, *views, version, listed

  wrote, after_a, after_b, version, listed = run(_with_http_server, server, None, body)
  assert len(listed.tools) == len(server.tools)
  assert wrote.is_error is False
  assert after_a["state_hash"] != after_b["state_hash"] == server.s0.state_hash()
  assert version == "2025-11-25"  # discover steers HTTP clients to a session
  assert server.summary()["sessions_opened"] == 2


def test_http_with_token_refuses_requests_without_it(meetup):
  server = EnvServer(meetup)
  ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
  headers = {"Accept": "application/json, text/event-stream"}

  async def body(url):
    async with httpx2.AsyncClient() as http:
      none = await http.post(url, json=ping, headers=headers)
      wrong = await http.post(url, json=ping, headers={**headers, "Authorization": "Bearer nope"})
    authed = httpx2.AsyncClient(headers={"Authorization": "Bearer s3cret"})
    async with authed, mcp.Client(streamable_http_client(url, http_client=authed)) as client:
      tools = (await client.list_tools()).tools
      result = await client.call_tool("calendar__get_event", {"event_id": "evt_missing"})
    return none, wrong, tools, result

  none, wrong, tools, result = run(_with_http_server, server, "s3cret", body)
  assert none.status_code == wrong.status_code == 401
  assert none.headers["www-authenticate"].startswith("Bearer")
  assert len(tools) == len(server.tools)
  assert result.is_error is True and result.structured_content["status"] == 404


def test_http_answers_503_to_one_session_beyond_max_sessions(meetup):
  server = EnvServer(meetup, max_sessions=2)
  initialize = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
      "protocolVersion": "2025-11-25",
      "capabilities": {},
      "clientInfo": {"name": "one-too-many", "version": "0"},
    },
  }
  headers = {"Accept": "application/json, text/event-stream"}

  async def body(url):
    async with httpx2.AsyncClient() as http:
      async with mcp.Client(url) as a, mcp.Client(url) as b:
        refused = await http.post(url, json=initialize, headers=headers)
        still = await a.call_tool("calendar__get_event", {"event_id": "evt_missing"})
        await b.list_tools()
        held = [len(sessions.by_key) for sessions in server._live]  # a's environment
      released = [len(sessions.by_key) for sessions in server._live]
      async with mcp.Client(url) as c:  # a and b ended their sessions (DELETE): room again
        again = await c.list_tools()
    return refused, still, again, held, released

  refused, still, again, held, released = run(_with_http_server, server, None, body)
  assert held == [1] and released == [0]  # an ended session's environment goes at once
  assert server.summary()["sessions"][0]["tool_calls"] == 1
  assert refused.status_code == 503
  error = refused.json()
  assert error["jsonrpc"] == "2.0" and error["id"] is None
  assert error["error"]["message"] == "Too many open sessions"
  assert still.structured_content["status"] == 404  # the open sessions keep working
  assert len(again.tools) == len(server.tools)


def test_http_refuses_non_loopback_without_token(meetup):
  server = EnvServer(meetup)
  with pytest.raises(ValueError, match="non-loopback"):
    run(lambda: server.serve_http("0.0.0.0", 0, None))


def test_http_cli_serves_until_interrupted_and_prints_its_summary(meetup_file, tmp_path):
  cmd = [sys.executable, "-m", "experiments.serve_mcp", f"--tasks={meetup_file}", "--port=0"]
  cmd += ["--transport=http", "--meta_tools", f"--workdir={tmp_path}"]
  env = {**os.environ, "COMPOWORLD_MCP_TOKEN": "tok"}
  proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
  try:
    line = ""
    while "serving MCP on" not in line:
      line = proc.stderr.readline().decode()
      assert line, "the server exited before it was ready"
    url = line.split("serving MCP on ")[1].strip()

    async def main():
      authed = httpx2.AsyncClient(headers={"Authorization": "Bearer tok"})
      async with authed, mcp.Client(streamable_http_client(url, http_client=authed)) as client:
        return await client.call_tool("list_services", {})

    result = run(main)
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=30)
  finally:
    proc.kill()
  assert result.is_error is False
  assert {s["name"] for s in result.structured_content["data"]} == {
    "simosphere", "calendar", "geo", "forum", "chat"
  }  # fmt: skip
  assert proc.returncode == 0
  summary = json.loads(out.decode().strip().splitlines()[-1])
  assert summary == json.loads((tmp_path / "summary.json").read_text())
  assert summary["transport"] == "http" and summary["mode"] == "meta_tools"
  assert summary["tools"] == 4 and summary["tool_calls"] == 1 and summary["sessions_opened"] == 1


def test_conformance_run_without_npx_or_registry_says_why_and_passes_only_when_asked(tmp_path):
  """``make test`` runs the conformance suite with --skip_if_unavailable; ``make conformance``
  does not, and fails."""
  failing = tmp_path / "bin"
  failing.mkdir()
  (failing / "npx").write_text("#!/bin/sh\necho 'npm error code EAI_AGAIN' >&2\nexit 1\n")
  (failing / "npx").chmod(0o755)
  cmd = [sys.executable, "-m", "experiments.mcp_conformance", f"--workdir={tmp_path}"]
  runs = [
    subprocess.run(cmd + flag, cwd=REPO, env={**os.environ, "PATH": path}, capture_output=True)
    for path, flag in [
      (str(tmp_path), ["--skip_if_unavailable"]),  # no npx at all
      (str(failing), ["--skip_if_unavailable"]),
      (str(failing), []),
    ]
  ]
  assert [r.returncode for r in runs] == [0, 0, 1]
  assert b"conformance: skipped: npx is not on the PATH" in runs[0].stdout
  assert b"skipped: npx could not fetch" in runs[1].stdout and b"EAI_AGAIN" in runs[1].stdout
  assert b"npx could not fetch" in runs[2].stderr
  assert "EAI_AGAIN" in json.loads((tmp_path / "summary.json").read_text())["skipped"]
