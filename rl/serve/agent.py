"""A checkpoint as an in-process agent: ``make_agent("checkpoint", checkpoint_dir=DIR)`` after
``import rl.serve.agent`` (``compoworld`` itself never imports JAX).

Loaded policies are cached per directory, so the fresh agent the evaluation harness makes for
every sample reuses the weights and the compiled programs. ``constrained=True`` decodes every
turn's tool calls under the tools' grammar (``rl.decoding.constrained``): they always parse, name a tool
of the library and pass it only its own parameters, enums from its schema (``rl.decoding.arguments``).
``grounded=True`` copies the other strings they pass on from the conversation.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from compoworld.agents.agent import Agent, register_agent
from rl.decoding.constrained import tools_with_enums
from rl.decoding.modes import episode_services, library_schemas, service_names
from rl.decoding.narration import episode_pairs
from rl.serve.policy import ContextFull, Policy


@functools.cache
def _load(directory: str, max_context: int, default_max_tokens: int) -> Policy:
  return Policy.load(directory, max_context=max_context, default_max_tokens=default_max_tokens)


@register_agent("checkpoint")
class PolicyAgent(Agent):
  """Answers with the policy in ``checkpoint_dir`` (or a ``Policy`` given directly)."""

  def __init__(
    self,
    checkpoint_dir: str | Path | None = None,
    *,
    policy: Policy | None = None,
    temperature: float = 0.0,
    max_tokens: int | None = None,
    seed: int = 0,
    max_context: int = 8192,
    default_max_tokens: int = 1024,
    constrained: bool = False,
    grounded: bool = False,
    copy_beam: int = 0,
    narrated: bool = False,
    held_quotes: bool = False,
  ):
    if (checkpoint_dir is None) == (policy is None):
      raise ValueError("PolicyAgent needs exactly one of checkpoint_dir and policy")
    if policy is None:
      policy = _load(str(Path(checkpoint_dir).absolute()), max_context, default_max_tokens)
    self.policy, self.temperature, self.max_tokens = policy, temperature, max_tokens
    self.seed, self._turn = seed, 0
    self.constrained, self.grounded = constrained, grounded
    self.copy_beam = copy_beam  # grounded values chosen whole by a beam this wide (greedy)
    if narrated and not constrained:
      raise ValueError("narrated decoding needs constrained=True")
    self.narrated = narrated  # a narrated call makes the call it names (rl.decoding.narration)
    if held_quotes and not narrated:
      raise ValueError("held quotes are part of narrated decoding: needs narrated=True")
    self.held_quotes = held_quotes  # a quote of the request is one of its sentences, whole
    self._enums: tuple[list[str], list[str]] | None = None  # services, tools: the episode's

  def reset(self, task) -> None:
    self._turn = 0
    if self.constrained:  # the grammar names the episode's services, as list_services would
      self._enums = service_names(episode_services(task))

  def _grammar_tools(self, tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The meta-tools with service and tool names as enums: those of the episode's services
    (the library's before any episode), so constrained turns name only tools that exist there
    (the schemas the prompt shows stay as they are)."""
    if self._enums is None:
      self._enums = service_names()
    return tools_with_enums(tools, *self._enums)

  def _narrations(self) -> list[tuple[str, str]]:
    """The ``(service, tool)`` pairs a narrated call may name: the episode's services' tools."""
    services = self._enums[0] if self._enums is not None else service_names()[0]
    return episode_pairs(services, library_schemas())

  def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
    # A different seed per turn: sampled turns must not repeat one another.
    self._turn += 1
    try:
      completion = self.policy.chat(
        messages,
        tools,
        temperature=self.temperature,
        max_tokens=self.max_tokens,
        seed=self.seed * 100_003 + self._turn,
        constrained=self.constrained,
        grammar_tools=self._grammar_tools(tools) if self.constrained else None,
        fit=True,  # near the end of the context a turn gets what is left
        grounded=self.grounded,
        schemas=library_schemas() if self.constrained else None,
        copy_beam=self.copy_beam,
        narrations=self._narrations() if self.narrated else None,
        held_quotes=self.held_quotes,
      )
    except ContextFull:
      # The context is full: the episode ends here and the verifier scores the state reached,
      # as a rollout cut at its token budget is scored.
      return {"role": "assistant", "content": ""}
    parsed = completion.parsed
    if parsed is not None and parsed.errors:
      # Calls that do not parse get error envelopes and the episode goes on, as in a GRPO
      # rollout (rl.grpo.rollout); the well-formed calls of the same turn still run.
      message = parsed.to_message(call_id_prefix=f"call_{self.seed}_{self._turn}")
      return {**message, "content": message["content"] or None, "malformed": parsed.errors}
    return completion.message()
