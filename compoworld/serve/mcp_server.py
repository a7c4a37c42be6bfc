"""A task's composed environment served over MCP with the official ``mcp`` SDK (no JAX).

``tools/list`` is either every namespaced tool ``service__tool`` of E_C with the exact argument
JSON Schema the runtime validates against and the MCP annotations of
``compoworld.serve.mcp_export.tool_annotations`` (the rule the export uses too), or, in
meta-tool mode, the paper's four meta-tools. ``tools/call`` returns the envelope as structured
content (and as JSON text, the bytes an episode shows an agent); error envelopes set ``isError``.

Every MCP session plays on its own fork of s0. Where a session lives depends on the transport:
one stdio process or one in-process ``mcp.Client`` is one session (the server lifespan is entered
per connection there), and over HTTP a session is an ``Mcp-Session-Id``. Protocol 2026-07-28
has no sessions, so over HTTP ``server/discover`` advertises the handshake versions only and
clients open a session instead (go-sdk's stateful servers do the same).

Over HTTP at most ``max_sessions`` sessions are open at once: the SDK answers a request that
would open another with HTTP 503 and a JSON-RPC error ("Too many open sessions"), and a session
idle for ``session_idle_timeout`` ends, which makes room again.

Resources: ``compoworld://task`` (id and instruction), ``compoworld://verification`` (the rubric
result v for this session's state), ``compoworld://verification?answer=...`` (the same with the
agent's final answer) and ``compoworld://tools/{service}/{tool}`` (what the meta-tool
``describe_tool`` returns). The prompt ``task`` is the instruction as a user message.
``completion/complete`` suggests service and tool names for the tool template's arguments, the
``service`` and ``tool`` the meta-tools take.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hmac
import ipaddress
import json
import sys
import time
import urllib.parse
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import uvicorn
from mcp.server import Server, ServerRequestContext
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.stdio import stdio_server
from mcp.server.streamable_http_manager import DEFAULT_SESSION_IDLE_TIMEOUT
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, INVALID_REQUEST
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from compoworld.compose.env import META_TOOLS, SEP, ComposedEnv
from compoworld.runtime.envelope import Envelope
from compoworld.serve.mcp_export import tool_annotations
from compoworld.tasks.task import Task, load_tasks

TASK_URI = "compoworld://task"
VERIFY_URI = "compoworld://verification"
VERIFY_TEMPLATE = VERIFY_URI + "{?answer}"
_TOOLS_URI = "compoworld://tools/"
TOOL_TEMPLATE = _TOOLS_URI + "{service}/{tool}"
DEFAULT_MAX_SESSIONS = 256
_MAX_COMPLETIONS = 100  # the most values one completion result may carry (MCP spec)
_JSON = "application/json"
#: What resources/list and resources/templates/list offer: (name, URI or template, description).
_RESOURCES = (
  ("task", TASK_URI, "The task's id and instruction."),
  (
    "verification",
    VERIFY_URI,
    "The rubric result for this session's current state (no final answer).",
  ),
)
_TEMPLATES = (
  (
    "verification_with_answer",
    VERIFY_TEMPLATE,
    "The rubric result for this session's state and the agent's final answer.",
  ),
  (
    "tool",
    TOOL_TEMPLATE,
    "A tool's description and input JSON Schema, as describe_tool gives them.",
  ),
)

# The meta-tools: three reads, and call_tool, which may run any tool, destructive ones included.
_READ = types.ToolAnnotations(read_only_hint=True, destructive_hint=False, open_world_hint=False)
_WRITE = types.ToolAnnotations(read_only_hint=False, destructive_hint=True, open_world_hint=False)


def load_task(path: str | Path, task_id: str | None = None) -> Task:
  """Task ``task_id`` of a ``tasks.jsonl`` file (or its only task when ``task_id`` is None)."""
  if not Path(path).is_file():
    raise FileNotFoundError(f"no tasks file at {path}")
  tasks = load_tasks(path)
  if not tasks:
    raise ValueError(f"{path} holds no tasks")
  if task_id is None:
    if len(tasks) > 1:
      raise ValueError(f"{path} holds {len(tasks)} tasks; choose one with a task id")
    return tasks[0]
  for task in tasks:
    if task.id == task_id:
      return task
  ids = [t.id for t in tasks]
  shown = ", ".join(ids[:10]) + (f", ... ({len(ids)} in all)" if len(ids) > 10 else "")
  raise ValueError(f"no task {task_id!r} in {path}; its tasks: {shown}")


def mcp_tools(env: ComposedEnv, meta_tools: bool = False) -> list[types.Tool]:
  """The MCP tool list of ``env``: namespaced tools, or the four meta-tools.

  Services come in ``list_services``' seeded shuffle, so the order does not give away which
  services are the task's and which are distractors.
  """
  if meta_tools:
    return [
      types.Tool(
        name=t["function"]["name"],
        description=t["function"]["description"],
        input_schema=t["function"]["parameters"],
        annotations=_WRITE if t["function"]["name"] == "call_tool" else _READ,
      )
      for t in META_TOOLS
    ]
  return [
    types.Tool(
      name=f"{svc.name}{SEP}{spec.name}",
      description=spec.description,
      input_schema=spec.input_schema,
      annotations=types.ToolAnnotations.model_validate(tool_annotations(svc, spec)),
    )
    for svc in (env.services[s["name"]] for s in env.list_services()["data"])
    for spec in svc.tools.values()
  ]


@dataclasses.dataclass
class _Session:
  """One MCP session's environment (a fork of s0) and what happened in it."""

  number: int
  env: ComposedEnv
  last_used: float
  tool_calls: int = 0
  error_envelopes: int = 0


class _Sessions:
  """The sessions of one server lifespan: one for a stdio or in-process connection, one per
  ``Mcp-Session-Id`` over HTTP, where the lifespan is the whole app's."""

  def __init__(self, owner: EnvServer):
    self._owner = owner
    self.by_key: dict[str, _Session] = {}

  def get(self, key: str) -> _Session:
    now = time.monotonic()
    session = self.by_key.get(key)
    if session is None:
      # A session its client ends (DELETE) lets its environment go at once (``http_app``), but
      # the SDK ends an HTTP session idle for its timeout without a hook; an environment idle
      # for twice as long belongs to no live session any more. Only a new session grows the
      # table, so that is when it is pruned.
      limit = 2 * self._owner.session_idle_timeout
      for k in [k for k, s in self.by_key.items() if now - s.last_used > limit]:
        self._owner._close(self.by_key.pop(k))
      session = self.by_key[key] = self._owner._open(now)
    session.last_used = now
    return session


class _StaticToken:
  """A TokenVerifier for one shared bearer token (compared in constant time)."""

  def __init__(self, token: str):
    self._token = token.encode()

  async def verify_token(self, token: str) -> AccessToken | None:
    if hmac.compare_digest(token.encode(), self._token):
      return AccessToken(token=token, client_id="compoworld", scopes=[])
    return None


class EnvServer:
  """An MCP server for one task: ``self.server`` is the SDK ``Server`` (``mcp.Client(x.server)``
  connects to it in memory); ``serve_stdio`` and ``serve_http`` put it on a transport."""

  def __init__(
    self,
    task: Task,
    meta_tools: bool = False,
    session_idle_timeout: float = DEFAULT_SESSION_IDLE_TIMEOUT,
    max_sessions: int = DEFAULT_MAX_SESSIONS,
  ):
    self.task, self.meta_tools = task, meta_tools
    self.session_idle_timeout, self.max_sessions = session_idle_timeout, max_sessions
    self.s0 = task.make_env()
    self.tools = mcp_tools(self.s0, meta_tools)
    self._tool_names = {t.name for t in self.tools}
    self.tool_calls = self.error_envelopes = 0
    self._opened: int = 0
    self._closed: list[dict[str, Any]] = []  # reports of sessions that ended
    self._live: list[_Sessions] = []
    self.server: Server[_Sessions] = Server(
      "compoworld",
      title=f"CompoWorld task {task.id}",
      instructions=(
        "Tools of a composed environment of simulated services; every call returns a JSON "
        'envelope {"ok", "status", "data" | "error"}. The task is the prompt "task" and the '
        f"resource {TASK_URI}."
      ),
      lifespan=self._lifespan,
      on_list_tools=self._list_tools,
      on_call_tool=self._call_tool,
      on_list_resources=self._list_resources,
      on_list_resource_templates=self._list_resource_templates,
      on_read_resource=self._read_resource,
      on_list_prompts=self._list_prompts,
      on_get_prompt=self._get_prompt,
      on_completion=self._complete,
    )
    entry = self.server.get_request_handler("server/discover")
    assert entry is not None
    self._default_discover = entry.handler
    self.server.add_request_handler("server/discover", types.RequestParams, self._discover)

  # --- sessions ------------------------------------------------------------------------------

  @contextlib.asynccontextmanager
  async def _lifespan(self, server: Server[_Sessions]) -> AsyncIterator[_Sessions]:
    del server
    sessions = _Sessions(self)
    self._live.append(sessions)
    try:
      yield sessions
    finally:  # the connection (stdio, in-process) or the app (HTTP) is done
      self._live.remove(sessions)
      for session in sessions.by_key.values():
        self._close(session)

  def _open(self, now: float) -> _Session:
    self._opened += 1
    return _Session(number=self._opened, env=self.s0.fork(), last_used=now)

  def _close(self, session: _Session) -> None:
    """Keeps a small report of a finished session and lets its environment go."""
    self._closed.append(self._report(session))

  def _release(self, key: str) -> None:
    """Closes the environment of HTTP session ``key``, if it has one."""
    for sessions in self._live:
      if (session := sessions.by_key.pop(key, None)) is not None:
        self._close(session)

  def _report(self, session: _Session) -> dict[str, Any]:
    result = self.task.verify(session.env, None)
    return {
      "session": session.number,
      "tool_calls": session.tool_calls,
      "error_envelopes": session.error_envelopes,
      "score": result.score,
      "success": result.success,
      "state_hash": session.env.state_hash(),
    }

  def _session(self, ctx: ServerRequestContext[_Sessions, Any]) -> _Session:
    if ctx.request is None:  # stdio or in-process: the connection is the session
      return ctx.lifespan_context.get("")
    key = ctx.request.headers.get("mcp-session-id")
    if key is None:
      raise MCPError(
        INVALID_REQUEST,
        "this server keeps one environment state per MCP session and this HTTP request has "
        "none: connect with the initialize handshake (protocol 2025-11-25 or earlier), which "
        "opens an Mcp-Session-Id session",
      )
    return ctx.lifespan_context.get(key)

  async def _discover(
    self, ctx: ServerRequestContext[_Sessions, Any], params: types.RequestParams
  ) -> types.DiscoverResult:
    result = await self._default_discover(ctx, params)
    if ctx.request is not None:
      # 2026-07-28 HTTP has no sessions; advertising only handshake versions makes clients
      # fall back to initialize, which opens an Mcp-Session-Id session (see module docstring).
      result = result.model_copy(update={"supported_versions": list(HANDSHAKE_PROTOCOL_VERSIONS)})
    return result

  # --- tools ---------------------------------------------------------------------------------

  async def _list_tools(
    self, ctx: ServerRequestContext[_Sessions, Any], params: types.PaginatedRequestParams | None
  ) -> types.ListToolsResult:
    return types.ListToolsResult(tools=self.tools)

  async def _call_tool(
    self, ctx: ServerRequestContext[_Sessions, Any], params: types.CallToolRequestParams
  ) -> types.CallToolResult:
    name = params.name
    if name not in self._tool_names:
      # An unknown tool is a protocol error (MCP spec); bad arguments are an error envelope
      # the agent can read and correct (SEP-1303), as everywhere in CompoWorld.
      raise MCPError(INVALID_PARAMS, f"Unknown tool: {name!r}; tools/list names the tools")
    session = self._session(ctx)
    if self.meta_tools:
      out = session.env.call_meta(name, params.arguments)
    else:
      service, _, tool = name.partition(SEP)
      out = session.env.call_tool(service, tool, params.arguments)
    session.tool_calls += 1
    session.error_envelopes += not out["ok"]
    self.tool_calls += 1
    self.error_envelopes += not out["ok"]
    return envelope_result(out)

  # --- resources and the prompt --------------------------------------------------------------

  async def _list_resources(
    self, ctx: ServerRequestContext[_Sessions, Any], params: types.PaginatedRequestParams | None
  ) -> types.ListResourcesResult:
    return types.ListResourcesResult(
      resources=[
        types.Resource(name=name, uri=uri, description=about, mime_type=_JSON)
        for name, uri, about in _RESOURCES
      ]
    )

  async def _list_resource_templates(
    self, ctx: ServerRequestContext[_Sessions, Any], params: types.PaginatedRequestParams | None
  ) -> types.ListResourceTemplatesResult:
    return types.ListResourceTemplatesResult(
      resource_templates=[
        types.ResourceTemplate(name=name, uri_template=uri, description=about, mime_type=_JSON)
        for name, uri, about in _TEMPLATES
      ]
    )

  async def _read_resource(
    self, ctx: ServerRequestContext[_Sessions, Any], params: types.ReadResourceRequestParams
  ) -> types.ReadResourceResult:
    uri = str(params.uri)
    if uri == TASK_URI:
      data: dict[str, Any] = {"id": self.task.id, "instruction": self.task.instruction}
    elif uri.split("?", 1)[0] == VERIFY_URI:
      data = self._verification(self._session(ctx), _answer_of(uri))
    elif uri.startswith(_TOOLS_URI):
      service, _, tool = uri.removeprefix(_TOOLS_URI).partition("/")
      out = self.s0.describe_tool(service, tool)  # a schema does not depend on the state
      if not out["ok"]:
        raise MCPError(INVALID_PARAMS, f"no resource {uri!r}: {out['error']['message']}")
      data = out["data"]
    else:
      raise MCPError(
        INVALID_PARAMS,
        f"no resource {uri!r}; resources: {TASK_URI}, {VERIFY_TEMPLATE}, {TOOL_TEMPLATE}",
      )
    return types.ReadResourceResult(
      contents=[types.TextResourceContents(uri=uri, mime_type=_JSON, text=json.dumps(data))]
    )

  def _verification(self, session: _Session, answer: str | None) -> dict[str, Any]:
    result = self.task.verify(session.env, answer)
    return {
      "task_id": self.task.id,
      "success": result.success,
      "score": result.score,
      "criteria": result.criteria,
      "ids": result.ids,
      "state_hash": session.env.state_hash(),
    }

  async def _list_prompts(
    self, ctx: ServerRequestContext[_Sessions, Any], params: types.PaginatedRequestParams | None
  ) -> types.ListPromptsResult:
    return types.ListPromptsResult(
      prompts=[types.Prompt(name="task", description="The task instruction, as the user gives it.")]
    )

  async def _get_prompt(
    self, ctx: ServerRequestContext[_Sessions, Any], params: types.GetPromptRequestParams
  ) -> types.GetPromptResult:
    if params.name != "task":
      raise MCPError(INVALID_PARAMS, f"no prompt {params.name!r}; prompts: task")
    text = types.TextContent(type="text", text=self.task.instruction)
    return types.GetPromptResult(
      description=f"CompoWorld task {self.task.id}",
      messages=[types.PromptMessage(role="user", content=text)],
    )

  # --- completions ---------------------------------------------------------------------------

  async def _complete(
    self, ctx: ServerRequestContext[_Sessions, Any], params: types.CompleteRequestParams
  ) -> types.CompleteResult:
    """The values of one argument of a prompt or resource template that start with what the
    client has typed. An unknown prompt, template or argument is invalid params (MCP spec)."""
    ref, argument = params.ref, params.argument
    if isinstance(ref, types.PromptReference):
      if ref.name != "task":
        raise MCPError(INVALID_PARAMS, f"no prompt {ref.name!r}; prompts: task")
      what, choices = "the prompt 'task'", {}
    elif ref.uri == TOOL_TEMPLATE:
      given = params.context.arguments if params.context and params.context.arguments else {}
      what = "the resource template " + TOOL_TEMPLATE
      choices = {"service": sorted(self.s0.services), "tool": self._tool_choices(given)}
    elif ref.uri == VERIFY_TEMPLATE:
      what, choices = "the resource template " + VERIFY_TEMPLATE, {"answer": []}  # free text
    else:
      raise MCPError(
        INVALID_PARAMS,
        f"no resource template {ref.uri!r}; templates: {VERIFY_TEMPLATE}, {TOOL_TEMPLATE}",
      )
    if argument.name not in choices:
      names = ", ".join(choices) or "none"
      raise MCPError(
        INVALID_PARAMS, f"{what} has no argument {argument.name!r}; its arguments: {names}"
      )
    values = [v for v in choices[argument.name] if v.startswith(argument.value)]
    return types.CompleteResult(
      completion=types.Completion(
        values=values[:_MAX_COMPLETIONS],
        total=len(values),
        has_more=len(values) > _MAX_COMPLETIONS,
      )
    )

  def _tool_choices(self, given: dict[str, str]) -> list[str]:
    """The tool names of the service already chosen, or of every service when none is."""
    if "service" not in given:
      return sorted({tool for svc in self.s0.services.values() for tool in svc.tools})
    service = self.s0.services.get(given["service"])
    return [] if service is None else sorted(service.tools)

  # --- transports ----------------------------------------------------------------------------

  async def serve_stdio(self) -> None:
    """Serves one client over this process's stdin and stdout until it disconnects."""
    async with stdio_server() as (read_stream, write_stream):
      await self.server.run(read_stream, write_stream, self.server.create_initialization_options())

  def http_app(self, host: str = "127.0.0.1", token: str | None = None) -> Any:
    """The Streamable HTTP ASGI app at ``/mcp``; with ``token``, requests need
    ``Authorization: Bearer <token>`` (401 otherwise)."""
    auth = verifier = None
    if token is not None:
      if not token:
        raise ValueError("the bearer token must not be empty")
      # The SDK's bearer middleware is configured through OAuth settings; with no
      # authorization server and no resource URL, the issuer is never advertised or used.
      auth = AuthSettings(issuer_url=f"http://{_url_host(host)}", resource_server_url=None)
      verifier = _StaticToken(token)
    app = self.server.streamable_http_app(
      host=host,
      auth=auth,
      token_verifier=verifier,
      session_idle_timeout=self.session_idle_timeout,
      max_sessions=self.max_sessions,
    )

    async def releasing(scope: Any, receive: Any, send: Any) -> None:
      """``app``; a session's environment goes as soon as its client ends the session
      (DELETE), so the environments held are the live sessions' (``max_sessions`` at most) and
      those of sessions that idled out within the last timeout."""
      key = None
      if scope["type"] == "http" and scope["method"] == "DELETE":
        key = dict(scope["headers"]).get(b"mcp-session-id")
      if key is None:
        await app(scope, receive, send)
        return

      async def watch(message: dict[str, Any]) -> None:
        # Success: the SDK ended a live session for its own credential. Released before the
        # response goes out, so the client's next request finds it gone.
        if message["type"] == "http.response.start" and message["status"] < 300:
          self._release(key.decode("latin-1"))
        await send(message)

      await app(scope, receive, watch)

    return releasing

  async def serve_http(
    self,
    host: str = "127.0.0.1",
    port: int = 8000,
    token: str | None = None,
    ready: Callable[[str], None] | None = None,
    stop: anyio.Event | None = None,
  ) -> None:
    """Serves Streamable HTTP until interrupted or ``stop`` is set; ``ready`` gets the endpoint
    URL once bound (``port=0`` picks a free port)."""
    if not _is_loopback(host) and not token:
      raise ValueError(f"refusing to serve on non-loopback host {host!r} without a bearer token")
    app = self.http_app(host, token)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)

    async def announce() -> None:
      while not server.started:
        await anyio.sleep(0.01)
      bound = server.servers[0].sockets[0].getsockname()[1]
      url = f"http://{_url_host(host)}:{bound}/mcp"
      print(f"serving MCP on {url}", file=sys.stderr, flush=True)
      if ready is not None:
        ready(url)
      if stop is not None:
        await stop.wait()
        server.should_exit = True

    async with anyio.create_task_group() as tg:
      tg.start_soon(announce)
      await server.serve()
      tg.cancel_scope.cancel()

  def summary(self) -> dict[str, Any]:
    """Counts over every session served and each session's rubric result (without a final
    answer) for its last state, in the order the sessions opened."""
    live = [self._report(s) for sessions in self._live for s in sessions.by_key.values()]
    return {
      "task_id": self.task.id,
      "mode": "meta_tools" if self.meta_tools else "namespaced",
      "tools": len(self.tools),
      "sessions_opened": self._opened,
      "tool_calls": self.tool_calls,
      "error_envelopes": self.error_envelopes,
      "sessions": sorted(self._closed + live, key=lambda r: r["session"]),
    }


def envelope_result(out: Envelope) -> types.CallToolResult:
  """An envelope as an MCP tool result: structured, as JSON text, ``isError`` when not ok."""
  return types.CallToolResult(
    content=[types.TextContent(type="text", text=json.dumps(out))],
    structured_content=out,
    is_error=not out["ok"],
  )


def serve(
  task: Task,
  transport: str = "stdio",
  meta_tools: bool = False,
  host: str = "127.0.0.1",
  port: int = 8000,
  token: str | None = None,
  max_sessions: int = DEFAULT_MAX_SESSIONS,
) -> dict[str, Any]:
  """Serves ``task`` until the client leaves (stdio) or Ctrl-C (SIGINT, http); returns the
  summary. ``max_sessions`` bounds the sessions open at once over HTTP."""
  if transport not in ("stdio", "http"):
    raise ValueError(f"transport must be 'stdio' or 'http', got {transport!r}")
  if transport == "stdio" and token is not None:
    raise ValueError("a bearer token applies to --transport=http only")
  env_server = EnvServer(task, meta_tools=meta_tools, max_sessions=max_sessions)
  t0 = time.perf_counter()
  if transport == "stdio":
    anyio.run(env_server.serve_stdio)
  else:
    # uvicorn shuts down gracefully on Ctrl-C, then raises the signal again for the caller.
    with contextlib.suppress(KeyboardInterrupt):
      anyio.run(lambda: env_server.serve_http(host, port, token))
  return {
    **env_server.summary(),
    "transport": transport,
    "seconds": round(time.perf_counter() - t0, 2),
  }


def _answer_of(uri: str) -> str | None:
  query = urllib.parse.urlsplit(uri).query
  values = urllib.parse.parse_qs(query, keep_blank_values=True).get("answer")
  return values[0] if values else None


def _is_loopback(host: str) -> bool:
  if host == "localhost":
    return True
  try:
    return ipaddress.ip_address(host).is_loopback
  except ValueError:
    return False


def _url_host(host: str) -> str:
  return f"[{host}]" if ":" in host else host
