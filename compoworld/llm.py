"""The one way CompoWorld talks to a language model: the ``openai`` client, any compatible
endpoint. Base URL and key come from arguments or the standard ``OPENAI_BASE_URL`` /
``OPENAI_API_KEY`` environment variables, so hosted models, a local vLLM and the project's own
policy server are all the same code path."""

from __future__ import annotations

import json
import os
import re
from typing import Any

import openai


def make_client(base_url: str | None = None, api_key: str | None = None, **kwargs: Any):
  """An ``openai.OpenAI`` client; ``kwargs`` pass through (``http_client``, ``timeout``...)."""
  return openai.OpenAI(
    base_url=base_url or os.environ.get("OPENAI_BASE_URL") or None,
    api_key=api_key or os.environ.get("OPENAI_API_KEY") or "not-needed",
    **kwargs,
  )


def message_to_dict(message: Any) -> dict[str, Any]:
  """An assistant message from the client as a plain chat dict (tool calls included)."""
  out: dict[str, Any] = {"role": "assistant", "content": message.content}
  if message.tool_calls:
    out["tool_calls"] = [
      {
        "id": c.id,
        "type": "function",
        "function": {"name": c.function.name, "arguments": c.function.arguments},
      }
      for c in message.tool_calls
    ]
  return out


_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)


def extract_json(text: str | None) -> Any:
  """The JSON object in a model's reply: bare, or inside a ```json fence, or the outermost
  braces. Raises ``ValueError`` with the reason when there is none."""
  if not text or not text.strip():
    raise ValueError("the reply is empty")
  candidates = [m.group(1) for m in _FENCE.finditer(text)] + [text]
  start, end = text.find("{"), text.rfind("}")
  if 0 <= start < end:
    candidates.append(text[start : end + 1])
  error = None
  for candidate in candidates:
    try:
      return json.loads(candidate)
    except json.JSONDecodeError as err:
      error = err
  raise ValueError(f"no JSON object found in the reply ({error})")
