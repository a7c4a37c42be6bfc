"""The chat format for multi-turn tool use: rendering to token ids plus a loss mask, appending
turn by turn, and parsing what the model generates back into tool calls.

The format is Qwen's (Hermes-style JSON tool calls), so an imported Qwen checkpoint sees the
template it was trained on::

  <|im_start|>system
  {system prompt}

  # Tools
  ...<tools>
  {one OpenAI function schema per line}
  </tools>...<|im_end|>
  <|im_start|>user
  {instruction}<|im_end|>
  <|im_start|>assistant
  {content}
  <tool_call>
  {"name": "call_tool", "arguments": {...}}
  </tool_call><|im_end|>
  <|im_start|>user
  <tool_response>
  {envelope}
  </tool_response><|im_end|>
  <|im_start|>assistant
  {final answer}<|im_end|>

The loss mask is 1 exactly on what the model generates: the assistant body and its
``<|im_end|>``. The ``<|im_start|>assistant\\n`` header is the generation prompt and the newline
after ``<|im_end|>`` is added by the engine, so both are 0, as are system, user and tool turns.

A conversation is a sequence of turns: one system, user or assistant message, or the tool
messages that answer one assistant message (rendered as one user turn, as Qwen does). Each turn
is tokenized on its own, so rendering a whole trajectory and appending turns during a rollout
give the same ids by construction: nothing is ever re-rendered or re-tokenized.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np

from compoworld.agents.detours import TRAINED
from compoworld.compose.env import META_TOOLS
from rl.data.tokenizer import CHAT_REPLIES, CHAT_SYSTEMS, Tokenizer, require_tokens

IM_START, IM_END = "<|im_start|>", "<|im_end|>"
TOOL_CALL, TOOL_CALL_END = "<tool_call>", "</tool_call>"
TOOL_RESPONSE, TOOL_RESPONSE_END = "<tool_response>", "</tool_response>"
#: Reserved in every tokenizer the renderer is used with; each must be a single id.
SPECIAL_TOKENS = (IM_START, IM_END, TOOL_CALL, TOOL_CALL_END, TOOL_RESPONSE, TOOL_RESPONSE_END)
_SPECIAL_RE = re.compile("(" + "|".join(re.escape(s) for s in SPECIAL_TOKENS) + ")")

_TOOLS_PREAMBLE = (
  "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
  "You are provided with function signatures within <tools></tools> XML tags:\n<tools>"
)
_TOOLS_POSTAMBLE = (
  "\n</tools>\n\nFor each function call, return a json object with function name and arguments "
  f"within {TOOL_CALL}{TOOL_CALL_END} XML tags:\n{TOOL_CALL}\n"
  '{"name": <function-name>, "arguments": <args-json-object>}\n' + TOOL_CALL_END
)


#: The whole system turn of the ``"brief"`` system format (rl.data.tokenizer.CHAT_SYSTEMS): what a
#: policy trained here on this format sees in place of the system prompt and tool schemas.
BRIEF_SYSTEM = (
  "Complete the user's request with the tools list_services, list_tools, describe_tool and "
  "call_tool(service, tool, arguments)."
)


def split_special(text: str) -> list[str]:
  """``text`` split around special tokens: ``[text, special, text, ..., special, text]``."""
  return _SPECIAL_RE.split(text)


#: A turn as text segments, each marked trainable (loss 1) or not.
Segments = list[tuple[str, bool]]


# --- turns as text -------------------------------------------------------------------------


def group_turns(messages: Sequence[dict[str, Any]]) -> list[list[dict[str, Any]]]:
  """Splits messages into turns: each message alone, except consecutive tool messages."""
  turns: list[list[dict[str, Any]]] = []
  for msg in messages:
    if msg.get("role") == "tool" and turns and turns[-1][0].get("role") == "tool":
      turns[-1].append(msg)
    else:
      turns.append([msg])
  return turns


def _text(value: Any) -> str:
  if value is None:
    return ""
  return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def tool_call_text(name: str, arguments: Any) -> str:
  """One call in the format's JSON; string arguments (as OpenAI sends them) go in verbatim."""
  args = arguments if isinstance(arguments, str) and arguments.strip() else _text(arguments or {})
  return f'{TOOL_CALL}\n{{"name": {json.dumps(name, ensure_ascii=False)}, "arguments": {args}}}\n{TOOL_CALL_END}'


def assistant_body(message: dict[str, Any]) -> str:
  """What the model generates for ``message``, up to but excluding ``<|im_end|>``."""
  parts = [_text(message.get("content"))]
  for call in message.get("tool_calls") or []:
    fn = call.get("function", call)
    if parts[-1]:
      parts.append("\n")
    parts.append(tool_call_text(fn.get("name", ""), fn.get("arguments")))
  return "".join(parts)


def _ids_last(value: Any) -> Any:
  if isinstance(value, list):
    return [_ids_last(v) for v in value]
  if not isinstance(value, dict):
    return value
  order = sorted(value, key=lambda k: k == "id" or k.endswith("_id"))  # stable: ids last
  return {k: _ids_last(value[k]) for k in order}


def reply_text(content: Any, replies: str = "as_sent") -> str:
  """A tool reply as the chat format writes it (rl.data.tokenizer.CHAT_REPLIES): as sent, or
  with every object's ``id`` and ``*_id`` keys after its other keys (``"ids_last"``; the same
  JSON value, written as the episode writes envelopes). Text that is not JSON stays as sent."""
  text = _text(content)
  if replies == "as_sent":
    return text
  try:
    value = json.loads(text)
  except ValueError:
    return text
  return json.dumps(_ids_last(value))


def system_text(content: str | None, tools: Sequence[dict[str, Any]]) -> str:
  text = _text(content)
  if tools:
    lines = "".join("\n" + json.dumps(t, ensure_ascii=False) for t in tools)
    text = (text + "\n\n" if text else "") + _TOOLS_PREAMBLE + lines + _TOOLS_POSTAMBLE
  return text


def turn_segments(
  turn: Sequence[dict[str, Any]],
  tools: Sequence[dict[str, Any]],
  system: str = "full",
  replies: str = "as_sent",
) -> Segments:
  """The text of one turn, split where the loss mask changes; ``system`` and ``replies`` are the
  system turn's and the tool replies' formats (rl.data.tokenizer.CHAT_SYSTEMS, CHAT_REPLIES)."""
  role = turn[0].get("role")
  if role == "tool":
    responses = "".join(
      f"\n{TOOL_RESPONSE}\n{reply_text(m.get('content'), replies)}\n{TOOL_RESPONSE_END}"
      for m in turn
    )
    return [(f"{IM_START}user{responses}{IM_END}\n", False)]
  if len(turn) != 1:
    raise ValueError(f"a {role!r} turn is one message, got {len(turn)}")
  msg = turn[0]
  if role == "assistant":  # a turn marked untrained (an oracle's detour) is context only
    trained = msg.get(TRAINED, True) is not False
    return [
      (f"{IM_START}assistant\n", False),
      (assistant_body(msg) + IM_END, trained),
      ("\n", False),
    ]
  if role == "system":
    body = BRIEF_SYSTEM if system == "brief" else system_text(msg.get("content"), tools)
    return [(f"{IM_START}system\n{body}{IM_END}\n", False)]
  if role == "user":
    return [(f"{IM_START}user\n{_text(msg.get('content'))}{IM_END}\n", False)]
  raise ValueError(f"unknown message role {role!r}; roles: system, user, assistant, tool")


def conversation_turns(
  messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]]
) -> list[list[dict[str, Any]]]:
  """The turns of ``messages``; a system turn is added for the tool schemas when missing."""
  turns = group_turns(messages)
  if tools and (not turns or turns[0][0].get("role") != "system"):
    turns.insert(0, [{"role": "system", "content": None}])
  return turns


def render_text(messages: Sequence[dict[str, Any]], tools=META_TOOLS) -> str:
  """The whole conversation as text (for reading, and as the tokenizer's corpus)."""
  return "".join(
    text for turn in conversation_turns(messages, tools) for text, _ in turn_segments(turn, tools)
  )


# --- parsing -------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ParsedAssistant:
  """What one generated assistant turn says.

  ``kind`` is ``"tool_calls"``, ``"final"`` (a final answer in ``content``) or ``"malformed"``
  (``errors`` says why; well-formed calls of the same turn are still in ``tool_calls``).
  """

  content: str
  tool_calls: list[dict[str, Any]]  # [{"name": str, "arguments": dict}]
  errors: list[str]
  ended: bool  # the text ended with <|im_end|> (else generation was cut off)

  @property
  def kind(self) -> Literal["tool_calls", "final", "malformed"]:
    if self.errors:
      return "malformed"
    return "tool_calls" if self.tool_calls else "final"

  def to_message(self, call_id_prefix: str = "call") -> dict[str, Any]:
    """The turn as an OpenAI-style assistant message (what ``run_episode`` records)."""
    msg: dict[str, Any] = {"role": "assistant", "content": self.content}
    if self.tool_calls:
      msg["tool_calls"] = [
        {
          "id": f"{call_id_prefix}_{i}",
          "type": "function",
          "function": {"name": c["name"], "arguments": json.dumps(c["arguments"])},
        }
        for i, c in enumerate(self.tool_calls, 1)
      ]
    return msg


def _parse_call(text: str, n: int) -> tuple[dict[str, Any] | None, str | None]:
  try:
    value = json.loads(text)
  except json.JSONDecodeError as err:
    return None, f"tool call {n} is not valid JSON: {err}"
  if not isinstance(value, dict):
    return None, f"tool call {n} must be a JSON object, got {type(value).__name__}"
  name, arguments = value.get("name"), value.get("arguments", {})
  if not isinstance(name, str) or not name:
    return None, f"tool call {n} has no string 'name'"
  if isinstance(arguments, str):  # some models double-encode arguments
    try:
      arguments = json.loads(arguments)
    except json.JSONDecodeError as err:
      return None, f"tool call {n} ({name}): 'arguments' is not valid JSON: {err}"
  if not isinstance(arguments, dict):
    return None, f"tool call {n} ({name}): 'arguments' must be a JSON object"
  return {"name": name, "arguments": arguments}, None


def parse_assistant(text: str) -> ParsedAssistant:
  """Parses generated assistant text (everything after the ``<|im_start|>assistant\\n`` prompt).

  Content is the text before the first ``<tool_call>``; after it only whitespace may separate
  calls. Anything else (an unclosed call, bad JSON, a call without a name, other special tokens,
  stray text between calls) is reported in ``errors``.
  """
  ended = text.endswith(IM_END)
  if ended:
    text = text[: -len(IM_END)]
  parts = split_special(text)  # [text, special, text, special, ..., text]
  content, calls, errors = parts[0], [], []
  i, n = 1, 0
  while i < len(parts):
    special, after = parts[i], parts[i + 1]
    if special != TOOL_CALL:
      errors.append(f"unexpected {special} in an assistant turn")
      i += 2
      continue
    n += 1
    if i + 2 >= len(parts) or parts[i + 2] != TOOL_CALL_END:
      errors.append(f"tool call {n} has no closing {TOOL_CALL_END}")
      i += 2
      continue
    call, err = _parse_call(after, n)
    if call is not None:
      calls.append(call)
    else:
      errors.append(err)
    if parts[i + 3].strip():
      errors.append(f"unexpected text after tool call {n}: {parts[i + 3].strip()[:80]!r}")
    i += 4
  if calls or errors:
    content = content.removesuffix("\n")  # the separator the renderer puts before a call
  return ParsedAssistant(content=content, tool_calls=calls, errors=errors, ended=ended)


# --- token ids -----------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Rendered:
  """Token ids and the loss mask over them (1 on assistant-generated tokens)."""

  ids: np.ndarray  # [N] int32
  loss_mask: np.ndarray  # [N] int32

  def __len__(self) -> int:
    return len(self.ids)


class ChatRenderer:
  """Turns conversations into token ids plus a loss mask, with ``tokenizer``'s ids.

  ``tools`` are the function schemas shown in the system turn (the four meta-tools). ``system``
  and ``replies`` are the system turn's and the tool replies' formats
  (rl.data.tokenizer.CHAT_SYSTEMS, CHAT_REPLIES); None = the tokenizer's own
  (``tokenizer.chat_system`` and ``chat_replies``, saved beside it), so a policy is always shown
  the format it was trained on.
  """

  def __init__(
    self,
    tokenizer: Tokenizer,
    tools: Sequence[dict[str, Any]] = META_TOOLS,
    system: str | None = None,
    replies: str | None = None,
  ):
    self.tokenizer = tokenizer
    self.tools = list(tools)
    self.system = system or getattr(tokenizer, "chat_system", "full")
    if self.system not in CHAT_SYSTEMS:
      raise ValueError(f"unknown chat system format {self.system!r}; valid: {CHAT_SYSTEMS}")
    self.replies = replies or getattr(tokenizer, "chat_replies", "as_sent")
    if self.replies not in CHAT_REPLIES:
      raise ValueError(f"unknown chat reply format {self.replies!r}; valid: {CHAT_REPLIES}")
    require_tokens(tokenizer, SPECIAL_TOKENS)  # names every missing one
    self.special_ids: dict[str, int] = {t: tokenizer.token_to_id(t) for t in SPECIAL_TOKENS}
    self._special_by_id = {i: t for t, i in self.special_ids.items()}
    self.im_end_id = self.special_ids[IM_END]
    #: What the policy is given before it speaks, and what follows its <|im_end|>.
    self.generation_prompt = self.encode_text(f"{IM_START}assistant\n")
    self.turn_separator = self.encode_text("\n")

  def encode_text(self, text: str) -> list[int]:
    """Ids of ``text``; special-token strings always become their reserved ids."""
    ids: list[int] = []
    for k, part in enumerate(split_special(text)):
      if k % 2:
        ids.append(self.special_ids[part])
      elif part:
        ids.extend(self.tokenizer.encode(part))
    return ids

  def decode(self, ids: Sequence[int]) -> str:
    """Text of ``ids``, special tokens written out."""
    out, run = [], []
    for i in (int(x) for x in ids):
      if i in self._special_by_id:
        out.append(self.tokenizer.decode(run))
        out.append(self._special_by_id[i])
        run = []
      else:
        run.append(i)
    out.append(self.tokenizer.decode(run))
    return "".join(out)

  def render_turn(
    self, turn: dict[str, Any] | Sequence[dict[str, Any]]
  ) -> tuple[list[int], list[int]]:
    """Ids and loss mask of one turn: a message, or the tool messages of one assistant turn."""
    turn = [turn] if isinstance(turn, dict) else list(turn)
    ids: list[int] = []
    mask: list[int] = []
    for text, trainable in turn_segments(turn, self.tools, self.system, self.replies):
      piece = self.encode_text(text)
      ids += piece
      mask += [int(trainable)] * len(piece)
    return ids, mask

  def render(self, messages: Sequence[dict[str, Any]]) -> Rendered:
    """A whole conversation (as ``compoworld.agents.episode.run_episode`` records it)."""
    conv = self.conversation()
    for turn in conversation_turns(messages, self.tools):
      conv.append(turn)
    return conv.rendered()

  def conversation(self, messages: Sequence[dict[str, Any]] = ()) -> Conversation:
    """An incremental conversation, started with ``messages`` (system and user, usually)."""
    conv = Conversation(self)
    for turn in conversation_turns(messages, self.tools) if messages else []:
      conv.append(turn)
    return conv

  def parse_assistant(self, generated: str | Sequence[int]) -> ParsedAssistant:
    """Parses a generated assistant turn given as text or as token ids."""
    return parse_assistant(generated if isinstance(generated, str) else self.decode(generated))


class Conversation:
  """A conversation that only grows: the rollout engine's view of one trajectory.

  ``prompt_ids()`` is what the policy is conditioned on before it speaks; its generated ids go
  in unchanged with ``append_generated``; tool results follow with ``append``. At every step
  ``ids`` is a prefix of ``renderer.render(messages)`` of the final messages.
  """

  def __init__(self, renderer: ChatRenderer):
    self.renderer = renderer
    self.ids: list[int] = []
    self.loss_mask: list[int] = []
    self.messages: list[dict[str, Any]] = []

  def _extend(self, ids: Sequence[int], mask: Sequence[int]) -> None:
    self.ids.extend(ids)
    self.loss_mask.extend(mask)

  def append(self, turn: dict[str, Any] | Sequence[dict[str, Any]]) -> None:
    """Appends one turn; all tool messages answering one assistant turn come as one list."""
    turn = [turn] if isinstance(turn, dict) else list(turn)
    if turn[0].get("role") == "tool" and self.messages and self.messages[-1]["role"] == "tool":
      raise ValueError(
        "tool messages answering one assistant turn must be appended together, as one list"
      )
    self._extend(*self.renderer.render_turn(turn))
    self.messages.extend(turn)

  def prompt_ids(self) -> list[int]:
    """The ids the policy sees before generating the next assistant turn."""
    return self.ids + self.renderer.generation_prompt

  def append_generated(self, generated: Sequence[int]) -> ParsedAssistant:
    """Appends the policy's own ids for one assistant turn (ending with ``<|im_end|>`` unless
    cut off) and returns them parsed; the message recorded is the parsed one."""
    generated = [int(i) for i in generated]
    parsed = self.renderer.parse_assistant(generated)
    prompt, newline = self.renderer.generation_prompt, self.renderer.turn_separator
    mask = [0] * len(prompt) + [1] * len(generated) + [0] * len(newline)
    self._extend(prompt + generated + newline, mask)
    self.messages.append(parsed.to_message(call_id_prefix=f"call_{len(self.messages)}"))
    return parsed

  def rendered(self) -> Rendered:
    return Rendered(
      ids=np.asarray(self.ids, dtype=np.int32), loss_mask=np.asarray(self.loss_mask, dtype=np.int32)
    )
