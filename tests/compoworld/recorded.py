"""A recorded OpenAI-compatible endpoint for the tests of what talks to a model: canned chat
completions over a mock transport, so nothing leaves the machine."""

from __future__ import annotations

import json
from typing import Any

import httpx2

from compoworld.llm import make_client

URL = "http://recorded.test/v1"


def completion(message: dict[str, Any] | str) -> dict[str, Any]:
  """A chat completion whose one choice is ``message`` (a string: the assistant's content)."""
  if isinstance(message, str):
    message = {"role": "assistant", "content": message}
  return {
    "id": "rec",
    "object": "chat.completion",
    "created": 0,
    "model": "recorded",
    "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
  }


class Recorded:
  """A fake endpoint: answers requests in order and keeps what it was sent."""

  def __init__(self, answers):
    self.answers, self.requests = list(answers), []

  def __call__(self, request):
    self.requests.append(json.loads(request.content))
    return httpx2.Response(200, json=completion(self.answers.pop(0)))


def mock_http(handler) -> httpx2.Client:
  """An HTTP client whose every request ``handler`` answers."""
  return httpx2.Client(transport=httpx2.MockTransport(handler))


def client_for(handler):
  """A model client for the endpoint ``handler`` plays."""
  return make_client(base_url=URL, api_key="k", http_client=mock_http(handler))
