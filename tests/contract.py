"""Assertions shared by service tests: envelopes, and atomic failure on every error path."""

from __future__ import annotations

from typing import Any

from compoworld import Service


def call_ok(svc: Service, tool: str, arguments: dict[str, Any] | None = None) -> Any:
  """Calls a tool, asserts success, returns ``data``."""
  env = svc.call(tool, arguments or {})
  assert env["ok"] is True and env["status"] == 200, env
  assert set(env) == {"ok", "status", "data"}
  return env["data"]


def call_fails(
  svc: Service, tool: str, arguments: dict[str, Any] | None, status: int, *needles: str
) -> dict[str, Any]:
  """Calls a tool, asserts the error status, that the message names each needle, and that
  the state is byte-for-byte unchanged (the atomicity contract)."""
  before = svc.state.model_dump_json()
  before_hash = svc.state_hash()
  env = svc.call(tool, arguments)
  assert env["ok"] is False and env["status"] == status, env
  assert set(env) == {"ok", "status", "error"} and set(env["error"]) == {"type", "message"}
  for needle in needles:
    assert needle in env["error"]["message"], (needle, env)
  assert svc.state.model_dump_json() == before, "a failed call changed the state"
  assert svc.state_hash() == before_hash
  return env["error"]
