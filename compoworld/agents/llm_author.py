"""The LLM task author: the paper's explore, design, probe and submit phases.

explore  the model uses the four meta-tools (and a record viewer) on a sandbox copy of E_C;
design   it answers with one JSON scenario: s0 patches, instruction, solution, rubric (the same
         declarative DSL as every task), final answer, and which argument a revisit refreshes;
probe    the solution runs on s0; errors go back to the model;
submit   the same gates as the procedural author decide; failures go back to the model,
         within a bounded number of revisions.
"""

from __future__ import annotations

import json
import random
from typing import Any

from pydantic import ValidationError
from pydantic_core import to_jsonable_python

from compoworld.agents.episode import parse_arguments
from compoworld.compose.env import META_TOOLS, ComposedEnv
from compoworld.llm import extract_json, message_to_dict
from compoworld.tasks.authoring import AuthoringError, business_functions
from compoworld.tasks.task import InitialState, Patch, Task, ToolCall, apply_patch, gate_failures
from compoworld.tasks.walks import Walk

SAMPLE_TOOL = {
  "type": "function",
  "function": {
    "name": "sample_records",
    "description": "Author-only: show a service's collections and a few records of one of "
    "them, to learn the record format for s0 patches.",
    "parameters": {
      "type": "object",
      "properties": {
        "service": {"type": "string"},
        "collection": {"type": "string", "description": "Omit to list the collections."},
        "limit": {"type": "integer", "minimum": 1, "maximum": 10},
      },
      "required": ["service"],
      "additionalProperties": False,
    },
  },
}

SYSTEM = """\
You write training tasks for tool-using agents. A task composes several services: the agent
must carry information from one service to the next, in the order of a given walk. You explore
the services in a sandbox with tools, then write the scenario as one JSON object."""

DESIGN = """\
Now write the scenario as ONE JSON object with these keys:
- "instruction": the user's request in natural language. It must not name tools or ids; the
  agent discovers them. Follow the walk: each edge passes a value of the named kind.
- "patches": edits of the initial state, each {"service", "op": "put"|"update"|"delete"|"set",
  "collection", "id", "record", "fields"} ("put" takes a full record, "update" an id and fields,
  "set" scalar state fields).
- "solution": the reference tool calls, each {"service", "tool", "arguments"}.
- "answer": the final answer text if the request asks for a fact, else null.
- "rubric": criteria {"id", "text", "kind": "positive"|"must_not", "check"}; checks are JSON:
  {"op": "record", "service", "collection", "id", "field", "cmp", "value"},
  {"op": "exists"|"not_exists"|"count", "service", "collection", "where": [{"field", "cmp",
  "value"}], ("cmp", "value" for count)}, {"op": "answer", "cmp", "value"},
  {"op": "all"|"any", "checks": [...]}, {"op": "not", "check": {...}};
  cmp is one of eq ne lt le gt ge contains icontains not_contains in startswith approx.
  No criterion may already hold before the solution runs.
- "stale": {"call": i, "argument": name, "stale_value": v}: in solution call i, the argument
  whose value the agent must re-read at the revisit, and the value it had at the first read.
The walk (services in visit order, and the kind passed on each edge):
{walk}"""


class LLMAuthor:
  """Authors tasks through any OpenAI-compatible chat endpoint."""

  def __init__(
    self,
    client: Any,
    model: str,
    max_revisions: int = 3,
    max_explore_turns: int = 12,
    temperature: float = 0.7,
  ):
    self.client, self.model = client, model
    self.max_revisions, self.max_explore_turns = max_revisions, max_explore_turns
    self.temperature = temperature

  def _chat(self, messages: list[dict[str, Any]], tools: list[dict] | None = None) -> dict:
    kwargs = {"tools": tools} if tools else {}
    reply = self.client.chat.completions.create(
      model=self.model, messages=messages, temperature=self.temperature, **kwargs
    )
    return message_to_dict(reply.choices[0].message)

  # --- explore -------------------------------------------------------------------------------

  def _sandbox_call(self, sandbox: ComposedEnv, name: str, arguments: Any) -> dict:
    if name != "sample_records":
      return sandbox.call_meta(name, arguments)
    svc = sandbox.services.get(arguments.get("service", ""))
    if svc is None:
      return {"ok": False, "status": 404, "error": {"type": "unknown_service", "message": "?"}}
    tables = svc.state.tables()
    coll = arguments.get("collection")
    if coll not in tables:
      return {"ok": True, "status": 200, "data": {"collections": sorted(tables)}}
    rows = list(tables[coll])[: int(arguments.get("limit", 3))]
    return {"ok": True, "status": 200, "data": to_jsonable_python(rows)}

  def explore(self, messages: list[dict[str, Any]], env: ComposedEnv) -> None:
    sandbox = env.fork()
    for _ in range(self.max_explore_turns):
      reply = self._chat(messages, [*META_TOOLS, SAMPLE_TOOL])
      messages.append(reply)
      calls = reply.get("tool_calls") or []
      if not calls:
        return
      for call in calls:
        args, bad = parse_arguments(call["function"].get("arguments"))
        out = bad or self._sandbox_call(sandbox, call["function"]["name"], args)
        messages.append({"role": "tool", "tool_call_id": call["id"], "content": json.dumps(out)})

  # --- design, probe, submit -------------------------------------------------------------------

  def _build(
    self, scenario: Any, walk: Walk, env: ComposedEnv, task_id: str, seed: int, meta: dict
  ) -> Task:
    if not isinstance(scenario, dict):
      raise ValueError("the scenario must be a JSON object")
    s0 = env.fork()
    patches = [Patch.model_validate(p) for p in scenario.get("patches", [])]
    for patch in patches:
      try:
        apply_patch(s0, patch)
      except Exception as err:
        raise ValueError(f"patch {patch.model_dump(exclude_none=True)} failed: {err}") from err
    solution = [ToolCall.model_validate(c) for c in scenario.get("solution", [])]
    probe = s0.fork()
    for i, call in enumerate(solution):
      out = probe.call_tool(call.service, call.tool, call.arguments)
      if not out["ok"]:
        raise ValueError(f"solution call {i} ({call.service}.{call.tool}) failed: {out['error']}")
    missing = set(walk.services) - {c.service for c in solution}
    if missing:
      raise ValueError(f"the solution never uses {sorted(missing)}; follow the walk")
    domains = sorted({env.services[s].domain for s in walk.services})
    return Task(
      id=task_id,
      instruction=scenario.get("instruction", ""),
      services=walk.services,
      distractors=list(env.distractors),
      walk=walk.visits,
      edges=[(a, b) for a, b, _ in walk.edges],
      initial_state=InitialState(seed=seed, patches=patches, hash=s0.state_hash()),
      reference_solution=solution,
      reference_answer=scenario.get("answer"),
      goal_hash=probe.state_hash(),
      rubric=scenario.get("rubric", []),
      meta={
        **meta,
        "author": f"llm:{self.model}",
        "K": len(walk.services),
        "L": len(walk.steps),
        "edge_kinds": [k for _, _, k in walk.edges],
        "domains": domains,
        "business_functions": business_functions(domains),
        "patterns": ["llm"],
        "stale_substitution": scenario.get("stale"),
      },
    )

  def realize(
    self,
    walk: Walk,
    env: ComposedEnv,
    rng: random.Random,
    task_id: str,
    seed: int,
    meta: dict[str, Any],
  ) -> Task:
    """Runs the four phases; raises ``AuthoringError`` when no revision passes the gates."""
    del rng  # the model's sampling is the randomness here
    walk_text = "\n".join(f"{i + 1}. {a} --({k})--> {b}" for i, (a, b, k) in enumerate(walk.edges))
    messages: list[dict[str, Any]] = [
      {"role": "system", "content": SYSTEM},
      {
        "role": "user",
        "content": f"Services: {', '.join(walk.services)}. Walk:\n{walk_text}\n"
        "Explore them with the tools; reply without a tool call when you are ready.",
      },
    ]
    self.explore(messages, env)
    messages.append({"role": "user", "content": DESIGN.replace("{walk}", walk_text)})
    feedback = "unknown"
    for _ in range(self.max_revisions + 1):
      reply = self._chat(messages)
      messages.append(reply)
      try:
        task = self._build(extract_json(reply.get("content")), walk, env, task_id, seed, meta)
        failures = gate_failures(task)
      except (ValueError, ValidationError, LookupError, TypeError) as err:
        feedback, failures = str(err), None
      if failures == []:
        return task
      if failures:
        feedback = "the task failed these verification gates: " + ", ".join(failures)
      messages.append({"role": "user", "content": f"Revise the JSON: {feedback}"})
    raise AuthoringError("llm_revisions_exhausted", feedback[:200])
