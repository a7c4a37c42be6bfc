"""Runs one agent on one task: meta-tool calls against a composed env, then the verifier."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from compoworld.agents.agent import Agent
from compoworld.agents.prompts import SYSTEM_PROMPT
from compoworld.compose.env import META_TOOLS, ComposedEnv
from compoworld.runtime.envelope import error
from compoworld.tasks.rubric import VerifyResult
from compoworld.tasks.task import Task


@dataclasses.dataclass
class Trajectory:
  task_id: str
  agent: str
  messages: list[dict[str, Any]]
  final_answer: str | None
  result: VerifyResult
  turns: int
  tool_calls: int
  tool_errors: int

  def to_json(self) -> dict[str, Any]:
    out = dataclasses.asdict(self)
    out["result"] = self.result.model_dump()
    return out


def parse_arguments(raw: Any) -> tuple[dict[str, Any] | None, dict | None]:
  """Tool-call arguments as a dict, or an error envelope for malformed JSON."""
  if isinstance(raw, dict):
    return raw, None
  if raw is None or raw == "":
    return {}, None
  try:
    value = json.loads(raw)
  except (TypeError, json.JSONDecodeError) as err:
    return None, error(400, "malformed_call", f"tool-call arguments are not valid JSON: {err}")
  if not isinstance(value, dict):
    return None, error(400, "malformed_call", "tool-call arguments must be a JSON object")
  return value, None


def run_episode(
  agent: Agent, task: Task, env: ComposedEnv | None = None, max_turns: int = 128
) -> tuple[Trajectory, ComposedEnv]:
  """Plays ``agent`` on ``task`` from s0 (or ``env``) and verifies the final state."""
  env = env if env is not None else task.make_env()
  agent.reset(task)
  messages: list[dict[str, Any]] = [
    {"role": "system", "content": SYSTEM_PROMPT},
    {"role": "user", "content": task.instruction},
  ]
  final_answer, n_calls, n_errors, turns = None, 0, 0, 0
  for turns in range(1, max_turns + 1):
    reply = agent.act(messages, META_TOOLS)
    messages.append(reply)
    calls = reply.get("tool_calls") or []
    malformed = reply.get("malformed") or []
    if not calls and not malformed:
      final_answer = reply.get("content") or ""
      break
    answers = []
    for call in calls:
      fn = call.get("function", {})
      arguments, bad = parse_arguments(fn.get("arguments"))
      envelope = bad if bad is not None else env.call_meta(fn.get("name", ""), arguments)
      answers.append((call.get("id", ""), envelope))
    # Calls the agent wrote but could not parse (its own report, see Agent.act): an error
    # envelope each, and the episode goes on, as a training rollout does.
    for k, why in enumerate(malformed, 1):
      answers.append((f"malformed_{turns}_{k}", error(400, "malformed_call", str(why))))
    for call_id, envelope in answers:
      n_calls += 1
      n_errors += not envelope["ok"]
      messages.append({"role": "tool", "tool_call_id": call_id, "content": json.dumps(envelope)})
  result = task.verify(env, final_answer)
  traj = Trajectory(
    task_id=task.id,
    agent=agent.name,
    messages=messages,
    final_answer=final_answer,
    result=result,
    turns=turns,
    tool_calls=n_calls,
    tool_errors=n_errors,
  )
  return traj, env


def _clip(text: str, limit: int = 1200) -> str:
  return text if len(text) <= limit else text[:limit] + f" … [{len(text) - limit} more chars]"


def render_transcript(traj: Trajectory, task: Task) -> str:
  """A readable Markdown transcript: the conversation, then the rubric verdict."""
  lines = [f"# Task {task.id}", "", f"**Instruction.** {task.instruction}", ""]
  lines += [f"Services: {', '.join(task.services)}; distractors: {', '.join(task.distractors)}"]
  lines += [f"Walk: {' → '.join(task.walk)}", ""]
  for msg in traj.messages[2:]:
    role = msg["role"]
    if role == "assistant":
      if msg.get("content"):
        lines.append(f"**assistant:** {msg['content']}")
      for call in msg.get("tool_calls") or []:
        fn = call["function"]
        lines.append(f"  → `{fn['name']}({fn['arguments']})`")
    elif role == "tool":
      lines.append(f"  ← `{_clip(msg['content'])}`")
    lines.append("")
  lines += ["## Verdict", ""]
  for crit, passed in zip(task.rubric, traj.result.criteria, strict=True):
    mark = "PASS" if passed else "FAIL"
    lines.append(f"- [{mark}] {crit.id} ({crit.kind}): {crit.text}")
  lines += ["", f"Success: {traj.result.success}; score {traj.result.score:.2f}"]
  return "\n".join(lines) + "\n"
