"""CompoWorld: typed, composable tool services and the cross-service tasks built on them.

This package never imports JAX: services, composition, tasks and rubrics run on any CPU host.
"""

from compoworld.domains import BUSINESS_FUNCTIONS, DOMAINS
from compoworld.env import META_TOOL_NAMES, META_TOOLS, ComposedEnv
from compoworld.envelope import (
  Conflict,
  Envelope,
  InvalidArgument,
  NotFound,
  ToolError,
  Unprocessable,
  error,
  is_error,
  ok,
)
from compoworld.registry import Registry, registry
from compoworld.service import Service
from compoworld.state import Record, ServiceState, Table
from compoworld.tools import ToolSpec, tool

__all__ = [
  "BUSINESS_FUNCTIONS",
  "DOMAINS",
  "META_TOOLS",
  "META_TOOL_NAMES",
  "ComposedEnv",
  "Conflict",
  "Envelope",
  "InvalidArgument",
  "NotFound",
  "Record",
  "Registry",
  "Service",
  "ServiceState",
  "Table",
  "ToolError",
  "ToolSpec",
  "Unprocessable",
  "error",
  "is_error",
  "ok",
  "registry",
  "tool",
]
