"""Serves one task's composed environment over MCP.

``python -m experiments.serve_mcp --tasks=FILE --task_id=ID [--transport=stdio|http --port=P
--meta_tools --token=T --max_sessions=N]``. Each MCP session plays on its own fork of s0; the resource
``compoworld://verification`` is the rubric result for the session's state. When the server
stops, ``summary.json`` in ``--workdir`` records the sessions and their rubric results; under
stdio it is printed to stderr, since stdout carries the protocol.
"""

import contextlib
import os
import sys

from absl import flags

from compoworld.serve.mcp_server import DEFAULT_MAX_SESSIONS, load_task, serve
from experiments.common import run_main, write_summary

_TASKS = flags.DEFINE_string("tasks", None, "tasks.jsonl file holding the task.", required=True)
_TASK_ID = flags.DEFINE_string("task_id", None, "Task to serve (default: the file's only task).")
_TRANSPORT = flags.DEFINE_enum("transport", "stdio", ["stdio", "http"], "MCP transport.")
_HOST = flags.DEFINE_string("host", "127.0.0.1", "HTTP bind address (non-loopback needs --token).")
_PORT = flags.DEFINE_integer("port", 8000, "HTTP port (0: any free port, printed on stderr).")
_META_TOOLS = flags.DEFINE_bool("meta_tools", False, "List the four meta-tools, not every tool.")
_TOKEN = flags.DEFINE_string(
  "token",
  os.environ.get("COMPOWORLD_MCP_TOKEN"),
  "Bearer token HTTP clients must send (default: $COMPOWORLD_MCP_TOKEN; none: no auth).",
)
_MAX_SESSIONS = flags.DEFINE_integer(
  "max_sessions",
  DEFAULT_MAX_SESSIONS,
  "HTTP sessions open at once; one more gets HTTP 503 until a session ends or idles out.",
  lower_bound=1,
)
_WORKDIR = flags.DEFINE_string("workdir", "runs/serve_mcp", "Where summary.json goes.")


def main(argv):
  del argv
  task = load_task(_TASKS.value, _TASK_ID.value)
  # The environment's token applies to HTTP only; one given on the command line is checked.
  explicit = flags.FLAGS["token"].present
  token = _TOKEN.value if _TRANSPORT.value == "http" or explicit else None
  summary = serve(
    task,
    _TRANSPORT.value,
    _META_TOOLS.value,
    _HOST.value,
    _PORT.value,
    token,
    _MAX_SESSIONS.value,
  )
  out = sys.stderr if _TRANSPORT.value == "stdio" else sys.stdout
  with contextlib.redirect_stdout(out):
    write_summary(_WORKDIR.value, summary)


if __name__ == "__main__":
  run_main(main)
