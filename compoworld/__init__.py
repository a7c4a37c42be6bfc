"""CompoWorld: typed, composable tool services and the cross-service tasks built on them.

This package never imports JAX: services, composition, tasks and rubrics run on any CPU host.
Its folders:

- ``runtime``: typed state, ``@tool``, the envelope, the registry and the list-tool query.
- ``compose``: the composed environment and its four meta-tools.
- ``tasks``: tasks, rubrics, facets, walks, the procedural author, generation and splits.
- ``specs``: MCP specs in, compiled and validated services out, the world model, the library.
- ``synthesis``: services written by a model, judged and run in a sandbox.
- ``agents``: agents, episodes, evaluation, trajectories and the LLM author.
- ``serve``: a task's environment over MCP, and MCP tool JSON for every service.
- ``llm``: the one way CompoWorld talks to a language model.
- ``jsonl``: reading and writing the JSON-lines files tasks and trajectories are stored in.
"""

from compoworld.compose.env import META_TOOL_NAMES, META_TOOLS, ComposedEnv
from compoworld.runtime.domains import BUSINESS_FUNCTIONS, DOMAINS
from compoworld.runtime.envelope import (
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
from compoworld.runtime.registry import Registry, registry
from compoworld.runtime.service import Service
from compoworld.runtime.state import Record, ServiceState, Table
from compoworld.runtime.tools import ToolSpec, tool

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
