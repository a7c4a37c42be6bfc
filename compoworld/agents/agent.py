"""Agents behind one interface, looked up by name.

An agent sees OpenAI-style chat messages and the four meta-tool schemas and returns one
assistant message: either ``tool_calls`` (executed by the episode runner) or a final answer in
``content``. The oracle turns a task's reference solution into a natural trajectory that
discovers services and tools through the meta-tools before calling them.
"""

from __future__ import annotations

import abc
import importlib
import json
import random
from collections.abc import Callable, Mapping
from typing import Any

import openai

from compoworld.agents.detours import TRAINED, plan_detour
from compoworld.llm import make_client, message_to_dict
from compoworld.tasks.authoring import without_connective
from compoworld.tasks.task import Task, ToolCall, needed_calls

AGENTS: dict[str, Callable[..., Agent]] = {}
# Agents that live outside this JAX-free package register when their module is first needed.
LAZY_AGENTS = {"checkpoint": "rl.serve.agent"}


def register_agent(name: str):
  def deco(cls):
    AGENTS[name] = cls
    cls.name = name
    return cls

  return deco


def load_agent(name: str) -> bool:
  """Whether an agent called ``name`` is registered, importing its module if it lives elsewhere."""
  if name not in AGENTS and name in LAZY_AGENTS:
    importlib.import_module(LAZY_AGENTS[name])
  return name in AGENTS


def make_agent(name: str, **kwargs: Any) -> Agent:
  if not load_agent(name):
    raise KeyError(f"no agent named {name!r}; agents: {', '.join(sorted(AGENTS))}")
  return AGENTS[name](**kwargs)


class Agent(abc.ABC):
  name = "agent"

  def reset(self, task: Task) -> None:  # noqa: B027 - an optional hook, not abstract
    """Called once before an episode."""

  @abc.abstractmethod
  def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
    """The next assistant message given the conversation so far: OpenAI-style, with
    ``tool_calls`` or a final answer in ``content``. An agent that wrote tool calls it cannot
    parse (a model's broken JSON) may list why under ``"malformed"``: each gets a
    ``malformed_call`` error envelope and the episode goes on instead of ending."""


def tool_call_message(content: str, name: str, arguments: dict[str, Any], call_id: str) -> dict:
  return {
    "role": "assistant",
    "content": content,
    "tool_calls": [
      {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
      }
    ],
  }


@register_agent("oracle")
class OracleAgent(Agent):
  """Replays the reference solution, discovering services and tools first as ``discovery`` says.

  ``discovery`` is ``"full"`` (``list_services`` once, then ``list_tools`` before a service's
  first call and ``describe_tool`` before a tool's first call), ``"services"`` (``list_services``
  only) or ``"none"`` (the calls alone: a policy that has learned the library need not read it
  again, and its trajectories are about 40% shorter). A ``call_tool`` call names the service and
  the tool before its arguments, so a policy decides which tool it calls before writing them.
  With ``narrate`` (the default) each call comes after a sentence that names it ("Now I'll call
  get_invoice on invoicing."); without, the call is the whole turn, and a policy trained on those
  turns writes the service and tool first in the call itself. ``reads="needed"`` plays the
  reference solution without the reads whose replies nothing after them needs
  (``compoworld.tasks.task.needed_calls``: a ``get_invoice`` after the ``list_invoices`` that
  showed the invoice whole); ``"all"`` (the default) plays every call. ``detours`` is the
  share of tasks (drawn by task id) on which one read is first played with a wrong value that
  finds nothing, then right (``compoworld.agents.detours``): the wrong turn is marked untrained,
  so a policy learns what to do after a read that finds nothing. With ``quote`` (and
  ``narrate``) the first call made for each sentence of the instruction first quotes that
  sentence (``Next step: "..."``), so a policy reads which tool comes next off the request's
  own words rather than off the services it has seen together; it needs the sentences' calls
  that the procedural author records (``task.meta["clauses"]``). ``quote="bare"`` quotes each
  sentence without the connective drawn at random to open it ("With that, post ..." ->
  "post ..."; ``compoworld.tasks.authoring.without_connective``), which a policy cannot know
  without copying it; ``True`` is ``"sentence"``, the sentence whole.
  """

  DISCOVERY = ("full", "services", "none")
  READS = ("all", "needed")
  QUOTES = ("sentence", "bare")  # what ``quote`` may name (True: "sentence")
  SETTINGS = ("discovery", "narrate", "reads", "detours", "quote")  # keyword arguments

  def __init__(
    self,
    discovery: str = "full",
    narrate: bool = True,
    reads: str = "all",
    detours: float = 0.0,
    quote: bool | str = False,
  ):
    if discovery not in self.DISCOVERY:
      raise ValueError(f"unknown discovery {discovery!r}; valid: {', '.join(self.DISCOVERY)}")
    if reads not in self.READS:
      raise ValueError(f"unknown reads {reads!r}; valid: {', '.join(self.READS)}")
    if not 0.0 <= detours <= 1.0:
      raise ValueError(f"detours is a share of tasks in [0, 1], got {detours}")
    if isinstance(quote, str) and quote not in self.QUOTES:
      raise ValueError(f"unknown quote {quote!r}; valid: {', '.join(self.QUOTES)} or a bool")
    self.discovery = discovery
    self.narrate = narrate
    self.reads = reads
    self.detours = detours
    self.quote = quote

  def reset(self, task: Task) -> None:
    steps: list[tuple[str, str, dict[str, Any], bool]] = []  # (sentence, meta-tool, args, trained)
    if self.discovery != "none":
      steps.append(
        ("I'll start by finding out which services are available.", "list_services", {}, True)
      )
    services, tools = set(), set()
    full = self.discovery == "full"
    solution = needed_calls(task) if self.reads == "needed" else task.reference_solution
    detour = None
    if self.detours and (rng := random.Random(f"detour:{task.id}")).random() < self.detours:
      detour = plan_detour(task, solution, rng)
    sentence = _sentences(task, bare=self.quote == "bare") if self.quote else None
    said = None  # the sentence quoted last
    for i, call in enumerate(solution):
      if full and call.service not in services:
        services.add(call.service)
        steps.append(
          (
            f"Let me see what the {call.service} service can do.",
            "list_tools",
            {"service": call.service},
            True,
          )
        )
      if full and (call.service, call.tool) not in tools:
        tools.add((call.service, call.tool))
        steps.append(
          (
            f"I'll check the arguments of {call.service}'s {call.tool} tool.",
            "describe_tool",
            {"service": call.service, "tool": call.tool},
            True,
          )
        )
      played = [(detour.call, False)] if detour is not None and detour.index == i else []
      quoted = ""
      if sentence is not None and (now := sentence(call)) != said:
        quoted, said = f'{QUOTE_PREFIX}"{now}"\n', now
      for c, trained in [*played, (call, True)]:
        arguments = {"service": c.service, "tool": c.tool, "arguments": c.arguments}
        text = f"{quoted}Now I'll call {c.tool} on {c.service}."
        steps.append((text, "call_tool", arguments, trained))
    self._steps = steps
    self._answer = task.reference_answer or "Done: every requested step has been completed."
    self._i = 0

  def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
    if self._i >= len(self._steps):
      return {"role": "assistant", "content": self._answer}
    content, name, arguments, trained = self._steps[self._i]
    self._i += 1
    content = content if self.narrate else ""
    message = tool_call_message(content, name, arguments, call_id=f"call_{self._i}")
    return message if trained else {**message, TRAINED: False}


#: How a quoted sentence of the request starts (``OracleAgent(quote=True)``).
QUOTE_PREFIX = "Next step: "


def _sentences(task: Task, bare: bool = False) -> Callable[[ToolCall], str]:
  """The sentence of ``task``'s instruction that asks for a reference-solution call (the call
  itself, not a copy: ``needed_calls`` and detours keep them), from ``task.meta["clauses"]``;
  ``bare``: without its opening connective (`without_connective`)."""
  spans = task.meta.get("clauses")
  if not spans:
    raise ValueError(
      f"task {task.id} records no sentences with their calls (meta.clauses): quoting needs "
      "tasks of the procedural author generated since 2026-12-07; generate them again"
    )
  of_call: dict[int, str] = {}
  for start, end, first, last in spans:
    sentence = task.instruction[start:end]
    sentence = without_connective(sentence) if bare else sentence
    for c in task.reference_solution[first:last]:
      of_call[id(c)] = sentence
  return lambda call: of_call[id(call)]


def oracle_settings(block: Mapping[str, Any]) -> dict[str, Any]:
  """``OracleAgent``'s keyword arguments that a config block sets (``discovery``, ``narrate``,
  ``reads``, ``detours``, ``quote``); those it leaves out keep the agent's defaults."""
  return {name: block[name] for name in OracleAgent.SETTINGS if name in block}


class AgentError(RuntimeError):
  """The agent could not reply (endpoint unreachable after retries, empty answer)."""


@register_agent("openai")
class OpenAIAgent(Agent):
  """Function calling with the four meta-tools on any OpenAI-compatible endpoint.

  The paper's trajectories came from DeepSeek-V4-Flash this way. ``client_kwargs`` pass through
  to ``compoworld.llm.make_client`` (``http_client``, ``timeout``, ``max_retries``).
  """

  def __init__(
    self,
    model: str,
    base_url: str | None = None,
    api_key: str | None = None,
    temperature: float = 0.0,
    max_tokens: int | None = None,
    **client_kwargs: Any,
  ):
    if not model:
      raise ValueError("OpenAIAgent needs a model name")
    self.model, self.temperature, self.max_tokens = model, temperature, max_tokens
    self.client = make_client(base_url=base_url, api_key=api_key, **client_kwargs)

  def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
    request: dict[str, Any] = {
      "model": self.model,
      "messages": messages,
      "tools": tools,
      "temperature": self.temperature,
    }
    if self.max_tokens is not None:
      request["max_tokens"] = self.max_tokens
    try:
      response = self.client.chat.completions.create(**request)
    except openai.OpenAIError as err:
      raise AgentError(f"{self.model}: {err}") from err
    if not response.choices:
      raise AgentError(f"{self.model}: the endpoint answered with no choices")
    return message_to_dict(response.choices[0].message)
