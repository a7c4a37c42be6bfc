"""The one response envelope every tool call returns, and the errors tools raise.

Success: ``{"ok": true, "status": 200, "data": ...}``.
Failure: ``{"ok": false, "status": 400|404|409|422|500, "error": {"type": ..., "message": ...}}``.

Tools never build error envelopes themselves: they raise one of the ``ToolError`` subclasses
below and the runtime turns it into an envelope (and rolls the state back).
"""

from __future__ import annotations

from typing import Any

Envelope = dict[str, Any]


def ok(data: Any = None) -> Envelope:
  return {"ok": True, "status": 200, "data": data}


def error(status: int, type_: str, message: str) -> Envelope:
  return {"ok": False, "status": status, "error": {"type": type_, "message": message}}


class ToolError(Exception):
  """Base of the errors a tool may raise on purpose; carries its HTTP-like status."""

  status = 500
  type = "internal_error"

  def __init__(self, message: str):
    super().__init__(message)
    self.message = message

  def envelope(self) -> Envelope:
    return error(self.status, self.type, self.message)


class InvalidArgument(ToolError):
  """400: an argument is missing, unknown, ill-typed or out of range."""

  status = 400
  type = "invalid_argument"


class NotFound(ToolError):
  """404: an id (or tool, or service) that does not exist."""

  status = 404
  type = "not_found"


class Conflict(ToolError):
  """409: the call is well-formed but breaks a business rule in the current state."""

  status = 409
  type = "conflict"


class Unprocessable(ToolError):
  """422: the arguments are well-typed but the resulting record would be invalid."""

  status = 422
  type = "unprocessable"


def is_error(envelope: Envelope) -> bool:
  return not envelope.get("ok", False)
