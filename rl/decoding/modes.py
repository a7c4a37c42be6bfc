"""How a policy's tool calls are decoded, shared by the checkpoint agent (`rl.serve.agent`) and
GRPO's batched rollouts (`rl.grpo.rollout`), so an evaluation and a training rollout read a policy the
same way.

- **constrained**: a turn that calls tools follows the meta-tools' grammar (`rl.decoding.constrained`)
  with the episode's services and their tools as enums (what ``list_services`` would list), and
  what ``call_tool`` passes on is typed by the called tool's input schema (`rl.decoding.arguments`);
- **grounded**: the strings (and numbers without a default) it passes on are copies out of the
  conversation (`rl.decoding.arguments.ArgumentConstraint`);
- **narrated** (with constrained): a turn that starts "Now I'll call " names one of the
  episode's tools and its service and then makes that very call; a quote of the request before
  it (``Next step: "..."``, a quoting policy's) is left free
  (`rl.decoding.narration.NarratedConstraint`).

``TurnConstraints(vocab, constrained=..., grounded=...).start(tools, services, context)`` is one
turn's constraint (``allowed(budget)`` / ``advance(token)``), or None when neither is asked for.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from rl.decoding.arguments import ArgumentConstraint
from rl.decoding.constrained import TokenConstraint, ToolCallGrammar, Vocabulary, tools_with_enums
from rl.decoding.narration import NarratedConstraint, episode_pairs

#: The decodings an evaluation (``eval.decodings``) or a rollout can use, as flags.
DECODINGS = {
  "free": {},
  "constrained": {"constrained": True},
  "grounded": {"grounded": True},
  "constrained+grounded": {"constrained": True, "grounded": True},
  "constrained+grounded+narrated": {"constrained": True, "grounded": True, "narrated": True},
}


def check_decodings(decodings, what: str = "decodings") -> tuple[str, ...]:
  """``decodings`` as a tuple if each is one of `DECODINGS`; a ValueError naming ``what`` (the
  setting they came from) otherwise."""
  decodings = (decodings,) if isinstance(decodings, str) else tuple(decodings)
  bad = [d for d in decodings if d not in DECODINGS]
  if bad or not decodings:
    raise ValueError(f"{what} must name some of {', '.join(DECODINGS)}; got {list(decodings)}")
  return decodings


def service_names(services: Sequence[str] | None = None) -> tuple[list[str], list[str]]:
  """``services`` (default: every service of the library) and the names of their tools, for the
  grammar's enums."""
  from compoworld.runtime.registry import registry

  services = sorted(services) if services is not None else registry.names()
  return services, sorted({t for name in services for t in registry.get(name).tool_names()})


def episode_services(task: Any) -> list[str]:
  """The services an episode of ``task`` offers: its own and its distractors."""
  return sorted({*task.services, *task.distractors})


def tool_schemas(library) -> dict[tuple[str, str], dict[str, Any]]:
  """``(service, tool)`` → input JSON Schema for every tool of a service library
  (``compoworld.runtime.registry.registry`` or any object with ``names()`` and ``get(name)``)."""
  return {
    (name, tool): spec.input_schema
    for name in library.names()
    for tool, spec in library.get(name).tools.items()
  }


_SCHEMAS: dict[tuple[str, ...], dict[tuple[str, str], dict[str, Any]]] = {}


def library_schemas() -> dict[tuple[str, str], dict[str, Any]]:
  """Every library tool's input schema: what a typed ``call_tool`` may pass it (built once per
  set of registered services)."""
  from compoworld.runtime.registry import registry

  key = tuple(registry.names())
  if key not in _SCHEMAS:
    _SCHEMAS.clear()
    _SCHEMAS[key] = tool_schemas(registry)
  return _SCHEMAS[key]


class TurnConstraints:
  """Builds each turn's decoding constraint for one vocabulary; the grammars (and their cached
  per-state masks) are kept per episode service set, the `cache` most recent."""

  def __init__(
    self,
    vocab: Vocabulary,
    *,
    constrained: bool = False,
    grounded: bool = False,
    composed: Sequence[Sequence[str]] = (),
    cache: int = 8,
    narrated: bool = False,
  ):
    if narrated and not constrained:
      raise ValueError("narrated decoding needs constrained decoding (the tools' schemas)")
    self.vocab, self.constrained, self.grounded = vocab, constrained, grounded
    self.narrated = narrated
    # Arguments the policy's data composes, written freely when grounded (the tokenizer's
    # ``chat_composed``).
    self.composed = [tuple(c) for c in composed]
    self._grammars: OrderedDict[str, TokenConstraint] = OrderedDict()
    self._cache = cache

  @property
  def active(self) -> bool:
    return self.constrained or self.grounded

  def grammar(self, tools: Sequence[dict[str, Any]], services: Sequence[str]) -> TokenConstraint:
    """The meta-tools' grammar with ``services`` and their tools as enums."""
    typed = tools_with_enums(tools, *service_names(services))
    key = json.dumps(typed, sort_keys=True)
    if key not in self._grammars:
      self._grammars[key] = TokenConstraint(ToolCallGrammar(typed), self.vocab)
      while len(self._grammars) > self._cache:
        self._grammars.popitem(last=False)
    self._grammars.move_to_end(key)
    return self._grammars[key]

  def start(
    self, tools: Sequence[dict[str, Any]], services: Sequence[str], context: bytes
  ) -> ArgumentConstraint | NarratedConstraint | None:
    """One turn's constraint (tools may be called or not: ``auto``), given the conversation's
    text so far (``context``: what grounded values are copied from); None when free."""
    if not self.active:
      return None
    inner = self.grammar(tools, services).start("auto") if self.constrained else None
    turn = ArgumentConstraint(
      self.vocab,
      context,
      inner=inner,
      ground=self.grounded,
      schemas=library_schemas() if self.constrained else None,
      composed=self.composed,
    )
    if not self.narrated:
      return turn
    return NarratedConstraint(turn, self.vocab, episode_pairs(services, library_schemas()))
