"""The policy behind an OpenAI-compatible API: ``/v1/models`` and ``/v1/chat/completions``.

A starlette app served by uvicorn, on loopback unless told otherwise (another host needs an API
key). Requests are checked before any generation; a bad one gets OpenAI's error body
``{"error": {"message", "type", "param", "code"}}`` with the status OpenAI uses (400 invalid
request, 401 bad key, 404 unknown model or route), so the ``openai`` client raises its usual
``BadRequestError`` / ``NotFoundError``. Tool calls come back as ``message.tool_calls`` with
``finish_reason="tool_calls"``. Generation runs in a worker thread, one request at a time.

``tool_choice="required"`` or a named function is decoded under the tools' grammar
(``rl.decoding.constrained``), as vLLM and SGLang do: the turn is tool calls whose names and arguments
follow the schemas (``enum``s included), and they always parse. ``"auto"`` is decoded as the
policy is configured (``Policy(constrained=...)``, off by default).
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import secrets
import sys
import threading
import time
from pathlib import Path
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from rl.serve.policy import Policy, RequestError

__all__ = ["BackgroundServer", "Policy", "create_app", "serve"]

_ROLES = ("system", "developer", "user", "assistant", "tool")
_UNSUPPORTED = {"n": 1, "stream": False}  # fields accepted only at their default value


def error_response(
  status: int, message: str, kind: str = "invalid_request_error", param=None, code=None
) -> JSONResponse:
  body = {"error": {"message": message, "type": kind, "param": param, "code": code}}
  return JSONResponse(body, status_code=status)


def _text_content(value: Any, where: str) -> str | None:
  """Message content as text: a string, null, or a list of ``{"type": "text"}`` parts."""
  if value is None or isinstance(value, str):
    return value
  if isinstance(value, list):
    parts = []
    for part in value:
      if not isinstance(part, dict) or part.get("type") != "text" or "text" not in part:
        raise RequestError(f"{where}.content: only text parts are supported", "messages")
      parts.append(str(part["text"]))
    return "".join(parts)
  raise RequestError(f"{where}.content must be a string, null or a list of text parts", "messages")


def check_messages(messages: Any) -> list[dict[str, Any]]:
  """The request's messages as the chat renderer reads them, or a ``RequestError`` saying what
  is malformed."""
  if not isinstance(messages, list) or not messages:
    raise RequestError("'messages' must be a non-empty list of message objects", "messages")
  out = []
  for i, msg in enumerate(messages):
    where = f"messages[{i}]"
    if not isinstance(msg, dict):
      raise RequestError(f"{where} must be an object, got {type(msg).__name__}", "messages")
    role = msg.get("role")
    if role not in _ROLES:
      raise RequestError(f"{where}.role is {role!r}; valid: {', '.join(_ROLES)}", "messages")
    clean = {"role": "system" if role == "developer" else role}
    clean["content"] = _text_content(msg.get("content"), where)
    calls = msg.get("tool_calls")
    if calls is not None:
      if role != "assistant" or not isinstance(calls, list):
        raise RequestError(f"{where}.tool_calls must be a list on an assistant message", "messages")
      for j, call in enumerate(calls):
        fn = call.get("function") if isinstance(call, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
          raise RequestError(f"{where}.tool_calls[{j}] needs function.name", "messages")
      clean["tool_calls"] = calls
    if role == "tool":
      clean["tool_call_id"] = msg.get("tool_call_id", "")
    if clean["content"] is None and role != "assistant":
      raise RequestError(f"{where} ({role}) needs content", "messages")
    out.append(clean)
  return out


def check_tools(tools: Any) -> list[dict[str, Any]]:
  if tools is None:
    return []
  if not isinstance(tools, list):
    raise RequestError("'tools' must be a list of function tools", "tools")
  for i, tool in enumerate(tools):
    fn = tool.get("function") if isinstance(tool, dict) else None
    if not isinstance(fn, dict) or tool.get("type", "function") != "function":
      raise RequestError(f"tools[{i}] must be {{'type': 'function', 'function': {{...}}}}", "tools")
    if not isinstance(fn.get("name"), str) or not fn["name"]:
      raise RequestError(f"tools[{i}].function needs a name", "tools")
  return tools


def _number(body: dict[str, Any], key: str, kind: type, default: Any) -> Any:
  value = body.get(key, default)
  if value is None:
    return default
  if isinstance(value, bool) or not isinstance(value, (int, float) if kind is float else int):
    raise RequestError(f"'{key}' must be a{'n integer' if kind is int else ' number'}", key)
  return kind(value)


def chat_request(body: Any) -> dict[str, Any]:
  """The keyword arguments of ``Policy.chat`` for a request body (the model checked apart)."""
  if not isinstance(body, dict):
    raise RequestError("the request body must be a JSON object")
  for key, default in _UNSUPPORTED.items():
    if body.get(key, default) not in (default, None):
      raise RequestError(f"'{key}'={body[key]!r} is not supported; use {default!r}", key)
  max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
  tool_choice = body.get("tool_choice") or "auto"
  if not (tool_choice in ("auto", "none", "required") or isinstance(tool_choice, dict)):
    raise RequestError("'tool_choice' must be auto, none, required or a function", "tool_choice")
  tools = check_tools(body.get("tools"))
  if tool_choice in ("required",) and not tools:
    raise RequestError("tool_choice='required' needs tools", "tool_choice")
  return {
    "messages": check_messages(body.get("messages")),
    "tools": tools,
    "tool_choice": tool_choice,
    "temperature": _number(body, "temperature", float, 1.0),
    "max_tokens": _number({"max_tokens": max_tokens}, "max_tokens", int, None),
    "seed": _number(body, "seed", int, 0),
    # A required call is decoded under the tools' grammar, so it always parses.
    **({"constrained": True} if tool_choice == "required" or isinstance(tool_choice, dict) else {}),
  }


def create_app(policy: Policy, model_name: str | None = None, api_key: str | None = None):
  """The ASGI app serving ``policy`` as the model ``model_name`` (default: ``policy.name``)."""
  name = model_name or policy.name
  created = int(time.time())
  card = {"id": name, "object": "model", "created": created, "owned_by": "compoworld"}
  stats = {"requests": 0, "completions": 0, "errors": 0, "completion_tokens": 0}

  def authorized(request: Request) -> bool:
    if api_key is None:
      return True
    given = request.headers.get("authorization", "")
    return secrets.compare_digest(given.encode(), f"Bearer {api_key}".encode())

  def refuse(request: Request) -> JSONResponse | None:
    stats["requests"] += 1
    if not authorized(request):
      stats["errors"] += 1
      return error_response(401, "invalid API key", "invalid_request_error", code="invalid_api_key")
    return None

  async def models(request: Request) -> JSONResponse:
    return refuse(request) or JSONResponse({"object": "list", "data": [card]})

  async def model(request: Request) -> JSONResponse:
    if (refused := refuse(request)) is not None:
      return refused
    if request.path_params["model"] != name:
      stats["errors"] += 1
      return _unknown_model(request.path_params["model"], name)
    return JSONResponse(card)

  async def completions(request: Request) -> JSONResponse:
    if (refused := refuse(request)) is not None:
      return refused
    try:
      body = json.loads(await request.body())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
      stats["errors"] += 1
      return error_response(400, f"the request body is not valid JSON: {err}")
    try:
      if not isinstance(body, dict) or not isinstance(body.get("model"), str):
        raise RequestError("'model' (a string) is required", "model")
      if body["model"] != name:
        stats["errors"] += 1
        return _unknown_model(body["model"], name)
      kwargs = chat_request(body)
      completion = await run_in_threadpool(policy.chat, **kwargs)
    except RequestError as err:
      stats["errors"] += 1
      return error_response(400, str(err), param=err.param)
    stats["completions"] += 1
    n_out = len(completion.ids)
    stats["completion_tokens"] += n_out
    return JSONResponse(
      {
        "id": f"chatcmpl-{secrets.token_hex(12)}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": name,
        "choices": [
          {
            "index": 0,
            "message": completion.message(),
            "finish_reason": completion.finish_reason,
            "logprobs": None,
          }
        ],
        "usage": {
          "prompt_tokens": completion.prompt_tokens,
          "completion_tokens": n_out,
          "total_tokens": completion.prompt_tokens + n_out,
        },
      }
    )

  async def http_error(request: Request, exc: HTTPException) -> JSONResponse:
    stats["errors"] += 1
    kind = "not_found_error" if exc.status_code == 404 else "invalid_request_error"
    return error_response(
      exc.status_code, f"{request.method} {request.url.path}: {exc.detail}", kind
    )

  async def server_error(request: Request, exc: Exception) -> JSONResponse:
    stats["errors"] += 1
    return error_response(500, f"internal error: {type(exc).__name__}: {exc}", "server_error")

  app = Starlette(
    routes=[
      Route("/v1/models", models, methods=["GET"]),
      Route("/v1/models/{model:path}", model, methods=["GET"]),
      Route("/v1/chat/completions", completions, methods=["POST"]),
    ],
    exception_handlers={HTTPException: http_error, Exception: server_error},
  )
  app.state.stats = stats
  return app


def _unknown_model(given: str, name: str) -> JSONResponse:
  return error_response(
    404,
    f"The model {given!r} does not exist; this server serves {name!r}",
    param="model",
    code="model_not_found",
  )


def is_loopback(host: str) -> bool:
  if host == "localhost":
    return True
  try:
    return ipaddress.ip_address(host).is_loopback
  except ValueError:
    return False


def _check_host(host: str, api_key: str | None) -> None:
  if not is_loopback(host) and not api_key:
    raise ValueError(f"refusing to serve on non-loopback host {host!r} without an API key")


class BackgroundServer:
  """Serves an app with uvicorn in a daemon thread (``port=0``: any free port); ``url`` is the
  OpenAI base URL (``.../v1``). A context manager: it stops the server on exit."""

  def __init__(self, app, host: str = "127.0.0.1", port: int = 0, api_key: str | None = None):
    _check_host(host, api_key)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="off")
    self.server = uvicorn.Server(config)
    self.host = host
    self._thread = threading.Thread(target=self.server.run, daemon=True)

  def __enter__(self) -> BackgroundServer:
    self._thread.start()
    deadline = time.monotonic() + 30
    while not self.server.started:
      if not self._thread.is_alive() or time.monotonic() > deadline:
        raise RuntimeError("the policy server did not start")
      time.sleep(0.01)
    port = self.server.servers[0].sockets[0].getsockname()[1]
    self.url = f"http://{_url_host(self.host)}:{port}/v1"
    return self

  def __exit__(self, *exc) -> None:
    self.server.should_exit = True
    self._thread.join(timeout=10)


def _url_host(host: str) -> str:
  return f"[{host}]" if ":" in host else host


def serve(
  checkpoint: str | Path,
  host: str = "127.0.0.1",
  port: int = 8000,
  model_name: str | None = None,
  api_key: str | None = None,
  **policy_kwargs: Any,
) -> dict[str, Any]:
  """Loads the checkpoint and serves it until Ctrl-C; returns a summary of what was served."""
  _check_host(host, api_key)
  t0 = time.perf_counter()
  policy = Policy.load(checkpoint, **policy_kwargs)
  load_seconds = time.perf_counter() - t0
  app = create_app(policy, model_name, api_key)
  name = model_name or policy.name
  print(
    f"serving {name!r} ({policy.checkpoint}) on http://{_url_host(host)}:{port}/v1",
    file=sys.stderr,
    flush=True,
  )
  # uvicorn shuts down gracefully on Ctrl-C, then raises the signal again for the caller.
  with contextlib.suppress(KeyboardInterrupt):
    uvicorn.run(app, host=host, port=port, log_level="info")
  return {
    "model": name,
    "checkpoint": str(policy.checkpoint),
    "host": host,
    "port": port,
    "max_context": policy.max_context,
    "load_seconds": round(load_seconds, 2),
    **app.state.stats,
  }
