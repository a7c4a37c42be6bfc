"""Serves a checkpoint behind an OpenAI-compatible API.

``python -m experiments.serve_policy --checkpoint=DIR [--port=P --host=127.0.0.1
--model_name=NAME]``. ``DIR`` holds ``config.json``, the tokenizer (``tokenizer.model`` or
``tokenizer.json``) and an Orbax checkpoint (``DIR/checkpoints/<step>/``, the latest served, or
``DIR`` itself); see ``rl.serve.policy``. Any OpenAI client then works with
``base_url=http://HOST:PORT/v1`` and ``model=NAME``. On Ctrl-C, ``summary.json`` in ``--workdir``
records what was served. Requests with ``tool_choice="required"`` or a named function are always
decoded under the tools' grammar (``rl.decoding.constrained``); ``--constrained`` does so for
``tool_choice="auto"`` too. ``--grounded`` makes the strings ``call_tool`` passes on whole-word
copies out of the conversation (``rl.decoding.arguments``).
"""

import os

from absl import flags

from experiments.common import run_main, write_summary
from rl.serve.server import serve

_CHECKPOINT = flags.DEFINE_string("checkpoint", None, "Checkpoint or run directory.", required=True)
_HOST = flags.DEFINE_string("host", "127.0.0.1", "Bind address (non-loopback needs --api_key).")
_PORT = flags.DEFINE_integer("port", 8000, "HTTP port.")
_MODEL_NAME = flags.DEFINE_string("model_name", None, "Model id (default: the directory's name).")
_API_KEY = flags.DEFINE_string(
  "api_key",
  os.environ.get("COMPOWORLD_POLICY_KEY"),
  "Bearer key clients must send (default: $COMPOWORLD_POLICY_KEY; none: no auth).",
)
_MAX_CONTEXT = flags.DEFINE_integer("max_context", 8192, "Prompt plus generated tokens, at most.")
_MAX_TOKENS = flags.DEFINE_integer("max_tokens", 1024, "Tokens generated when a request omits it.")
_CONSTRAINED = flags.DEFINE_bool(
  "constrained", False, "Decode tool calls under the tools' grammar for tool_choice=auto too."
)
_GROUNDED = flags.DEFINE_bool(
  "grounded",
  False,
  "Copy the strings call_tool passes on from the conversation (rl.decoding.arguments).",
)
_WORKDIR = flags.DEFINE_string("workdir", "runs/serve_policy", "Where summary.json goes.")


def main(argv):
  del argv
  summary = serve(
    _CHECKPOINT.value,
    _HOST.value,
    _PORT.value,
    _MODEL_NAME.value,
    _API_KEY.value,
    max_context=_MAX_CONTEXT.value,
    default_max_tokens=_MAX_TOKENS.value,
    constrained=_CONSTRAINED.value,
    grounded=_GROUNDED.value,
  )
  write_summary(_WORKDIR.value, summary)


if __name__ == "__main__":
  run_main(main)
