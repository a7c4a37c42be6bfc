"""Grammar-constrained decoding of tool calls (``rl.decoding.constrained``): the automaton on text, the
vocabulary's bytes, the constrained sampler with scripted random logits (many seeds, no compile)
and with a random tiny model, and the policy server's ``tool_choice="required"``."""

import json
import random
import re
import subprocess
import sys
from pathlib import Path

import jsonschema
import numpy as np
import pytest

from compoworld.compose.env import META_TOOLS
from models import get_config
from rl.data.chat import SPECIAL_TOKENS, parse_assistant
from rl.decoding.constrained import (
  BIG,
  SPECIAL_BASE,
  SPECIALS,
  ToolCallGrammar,
  Vocabulary,
  text_symbols,
  tools_with_enums,
)
from rl.serve.agent import PolicyAgent
from rl.serve.policy import Policy
from tests.rl.test_policy_server import client, random_model

HI = [{"role": "user", "content": "List the services, then the calendar's tools."}]
SERVICES = ["calendar", "crm", "helios_freight"]
TOOLS = ["create_event", "list_events", "find_contact"]
ENUM_TOOLS = tools_with_enums(META_TOOLS, SERVICES, TOOLS)

# A tool whose schema exercises every keyword the grammar enforces.
RICH = {
  "type": "function",
  "function": {
    "name": "book",
    "parameters": {
      "type": "object",
      "properties": {
        "room": {"enum": ["A1", "Bé", 3, None, True]},
        "count": {"type": "integer"},
        "price": {"type": "number"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "when": {
          "type": "object",
          "properties": {"day": {"type": "string"}, "late": {"type": "boolean"}},
          "required": ["day"],
          "additionalProperties": False,
        },
        "note": {"type": ["string", "null"]},
        "extra": {"type": "object", "additionalProperties": {"type": "integer"}},
      },
      "required": ["room", "when"],
      "additionalProperties": False,
    },
  },
}
RICH_PARAMS = RICH["function"]["parameters"]


def call(name, arguments, raw=None):
  args = raw if raw is not None else json.dumps(arguments, ensure_ascii=False)
  return f'<tool_call>\n{{"name": {json.dumps(name)}, "arguments": {args}}}\n</tool_call>'


def test_the_special_tokens_are_the_chat_formats():
  assert SPECIALS == SPECIAL_TOKENS


# --- the automaton on text -----------------------------------------------------------------


@pytest.mark.parametrize(
  "value",
  [
    {"room": "A1", "when": {"day": "mon"}},
    {"when": {"late": False, "day": ""}, "room": None},  # any order; enum null
    {"room": True, "when": {"day": "x"}, "count": -12, "price": 0.5e-3},
    {"room": 3, "when": {"day": "x"}, "price": -0, "tags": [], "note": None},
    {"room": "Bé", "when": {"day": 'a"b\\c\n\t\u00e9\U0001f600'}, "tags": ["x", "y"]},
    {"room": "A1", "when": {"day": "d"}, "extra": {"any key": 1, "": -7}, "note": "n"},
  ],
)
@pytest.mark.parametrize("ascii_only", [False, True])
@pytest.mark.parametrize("separators", [(", ", ": "), (",", ":")])
def test_valid_arguments_are_accepted_as_json_dumps_writes_them(value, ascii_only, separators):
  jsonschema.validate(value, RICH_PARAMS)
  g = ToolCallGrammar(schema=RICH_PARAMS)
  assert g.accepts(json.dumps(value, ensure_ascii=ascii_only, separators=separators))


@pytest.mark.parametrize(
  "text",
  [
    '{"room": "A2", "when": {"day": "x"}}',  # not in the enum
    '{"room": "a1", "when": {"day": "x"}}',
    '{"room": "A1"}',  # a required key missing
    '{"room": "A1", "when": {}}',  # a nested required key missing
    '{"room": "A1", "when": {"day": "x", "hour": 1}}',  # not a property
    '{"room": "A1", "when": {"day": "x"}, "count": 1.5}',  # integer
    '{"room": "A1", "when": {"day": "x"}, "count": 01}',  # leading zero
    '{"room": "A1", "when": {"day": "x"}, "price": 1.}',
    '{"room": "A1", "when": {"day": "x"}, "price": .5}',
    '{"room": "A1", "when": {"day": "x"}, "price": 1e}',
    '{"room": "A1", "when": {"day": "x"}, "price": +1}',
    '{"room": "A1", "when": {"day": "x"}, "tags": ["a", 1]}',
    '{"room": "A1", "when": {"day": "x"}, "tags": ["a",]}',
    '{"room": "A1", "when": {"day": "x"}, "note": false}',
    '{"room": "A1", "when": {"day": "x"}, "extra": {"k": "v"}}',
    '{"room": "A1", "when": {"day": "x\\q"}}',  # a bad escape
    '{"room": "A1", "when": {"day": "x\\u12G4"}}',
    '{"room": "A1", "when": {"day": "x\ny"}}',  # a raw control character
    '{"room": "A1", "when": {"day": "x"}},',
    '{"room": "A1", "when": {"day": "x"}',
    '["room"]',
  ],
)
def test_invalid_arguments_are_rejected(text):
  assert not ToolCallGrammar(schema=RICH_PARAMS).accepts(text)
  with pytest.raises((json.JSONDecodeError, jsonschema.ValidationError)):
    jsonschema.validate(json.loads(text), RICH_PARAMS)


@pytest.mark.parametrize(
  "text",
  [
    '{"room": 3.0, "when": {"day": "x"}}',  # the enum's literal is 3, as json.dumps writes it
    '{"room": "A1", "room": "A1", "when": {"day": "x"}}',  # a key twice
    '{"room": "A1", "when": {"day": "x<tool_call>"}}',  # a special token spelled out
    '{ "room": "A1", "when": {"day": "x"}}',  # whitespace json.dumps never writes
    '{"room":  "A1", "when": {"day": "x"}}',
    '{"room": "A1", "when": {"day": "x"}} ',
    '{"room": "A1",\n"when": {"day": "x"}}',
  ],
)
def test_the_grammar_is_stricter_than_the_schema_where_documented(text):
  jsonschema.validate(json.loads(text), RICH_PARAMS)
  assert not ToolCallGrammar(schema=RICH_PARAMS).accepts(text)


def test_prefixes_stay_alive_until_they_go_wrong():
  g = ToolCallGrammar(schema=RICH_PARAMS)
  assert g.is_prefix('{"room": "B')
  assert not g.is_prefix('{"room": "C')
  assert g.is_prefix('{"when": {"day": "\\u00')
  assert not g.is_prefix('{"roo"')
  assert g.is_prefix('{"count": 12')
  assert not g.accepts('{"count": 12')
  # A byte that starts a UTF-8 character must be followed by its continuation bytes.
  state = g.feed(g.initial("json"), text_symbols('{"room": "A1", "when": {"day": "'))
  assert g.step(state, 0xC3) is not None and g.step(g.step(state, 0xC3), 0x22) is None
  assert g.step(state, 0xFF) is None


def test_untyped_and_free_schemas_take_any_json():
  g = ToolCallGrammar(schema={})
  for value in [None, True, 0, -1.5e10, "s", [], [1, [2, {"a": None}]], {"k": {"k": []}}]:
    assert g.accepts(json.dumps(value))
  free = ToolCallGrammar(schema={"type": "object"})
  assert free.accepts('{"a": {"b": [1, "2", null]}, "a": 3}')
  assert not free.accepts("[]") and not free.accepts('{"a" 1}')


def test_the_turn_grammar():
  g = ToolCallGrammar(META_TOOLS)
  services = call("list_services", {})
  tools = call("list_tools", {"service": "crm"})
  invoke = call(
    "call_tool", {"service": "crm", "tool": "find", "arguments": {"q": ["x", {"y": 1}]}}
  )
  good = [
    f"{services}<|im_end|>",
    f"{tools}\n{invoke}<|im_end|>",
    f"Let me look.\n{services}<|im_end|>",
    "The answer is 42.<|im_end|>",
    "<|im_end|>",
  ]
  for text in good:
    assert g.accepts(text, "auto"), text
    parsed = parse_assistant(text)
    assert not parsed.errors and parsed.ended
  assert g.accepts(good[0], "required") and g.accepts(good[1], "required")
  bad = [
    "Let me look.\n" + services + "<|im_end|>",  # required: no content
    call("list_service", {}) + "<|im_end|>",
    call("list_tools", {}) + "<|im_end|>",  # service is required
    call("list_tools", {"service": 1}) + "<|im_end|>",
    call("list_services", {"x": 1}) + "<|im_end|>",
    call("list_services", {}) + " <|im_end|>",  # text after a call
    call("list_services", {}) + "\n\n" + call("list_services", {}) + "<|im_end|>",
    '<tool_call>\n{"arguments": {}, "name": "list_services"}\n</tool_call><|im_end|>',
    "<tool_call>" + call("list_services", {})[11:].lstrip("\n") + "<|im_end|>",
    "Spelled <tool_call> in text<|im_end|>",
    "<|im_start|>user<|im_end|>",
  ]
  for text in bad[1:]:
    assert not g.accepts(text, "auto"), text
  assert not g.accepts(bad[0], "required")
  # Enums given by the caller constrain the meta-tools' service and tool.
  e = ToolCallGrammar(ENUM_TOOLS)
  assert e.accepts(call("list_tools", {"service": "crm"}) + "<|im_end|>", "required")
  assert not e.accepts(call("list_tools", {"service": "bank"}) + "<|im_end|>", "required")
  ok = {"service": "crm", "tool": "find_contact", "arguments": {}}
  assert e.accepts(call("call_tool", ok) + "<|im_end|>", "required")
  assert not e.accepts(call("call_tool", {**ok, "tool": "find"}) + "<|im_end|>", "required")


def test_finish_cost_is_the_exact_distance_to_the_end():
  """Each symbol lowers the cost by at most one and some symbol by exactly one: the budget rule
  (a token only if the rest still fits) can always be met."""
  g = ToolCallGrammar([*ENUM_TOOLS, RICH])
  symbols = [*range(256), *range(SPECIAL_BASE, SPECIAL_BASE + len(SPECIALS))]
  rng = random.Random(0)
  for walk in range(25):
    state = g.initial("auto" if walk % 2 else "required")
    while g.finish_cost(state) > 0:
      cost = g.finish_cost(state)
      nexts = [n for n in (g.step(state, s) for s in symbols) if n is not None]
      costs = [g.finish_cost(n) for n in nexts]
      assert min(costs) == cost - 1 and cost < BIG
      shorter = [n for n, c in zip(nexts, costs, strict=True) if c < cost]
      state = rng.choice(shorter if rng.random() < 0.3 else nexts)
  assert g.finish_cost(g.initial("required")) == len(
    text_symbols(call("list_services", {}).replace(" ", "") + "<|im_end|>")
  )


def test_unsupported_schemas_are_clear_errors():
  with pytest.raises(ValueError, match="empty enum"):
    ToolCallGrammar(schema={"enum": []})
  with pytest.raises(ValueError, match="required keys"):
    ToolCallGrammar(schema={"properties": {"a": {}}, "required": ["b"]})
  with pytest.raises(ValueError, match="distinct"):
    ToolCallGrammar([META_TOOLS[0], META_TOOLS[0]])


# --- the vocabulary ------------------------------------------------------------------------


def test_token_bytes_join_to_the_decoded_text(tokenizer, renderer):
  vocab = Vocabulary.from_tokenizer(tokenizer, renderer.special_ids)
  assert vocab.symbols[tokenizer.pad_id] == () and vocab.symbols[1] == ()  # pad, unk
  for name, i in renderer.special_ids.items():
    assert vocab.symbols[i] == (SPECIAL_BASE + SPECIALS.index(name),)
  text = 'x\n{"service": "helios_freight", "note": "Café ✓ 😀 \\u00e9"}<tool_call>\n'
  ids = renderer.encode_text(text * 3)
  assert [s for i in ids for s in vocab.symbols[i]] == text_symbols(text * 3)
  plain = [i for i, s in enumerate(vocab.symbols) if s and s[0] < SPECIAL_BASE]
  rng = random.Random(0)
  for _ in range(200):
    ids = rng.choices(plain, k=6)
    joined = bytes(b for i in ids for b in vocab.symbols[i])
    try:
      text = joined.decode()
    except UnicodeDecodeError:  # byte pieces that are not whole characters
      continue
    assert text == tokenizer.decode(ids)


def test_a_byte_level_hf_tokenizers_bytes(tasks):
  from rl.data.chat import ChatRenderer
  from rl.data.corpus import build_corpus
  from rl.data.tokenizer import HFTokenizer
  from tests.rl.test_tokenizer import qwen_like

  hf = HFTokenizer(qwen_like(build_corpus(tasks[:1], progress=False)[:300]).to_str())
  renderer = ChatRenderer(hf)
  vocab = Vocabulary.from_tokenizer(hf, renderer.special_ids)
  assert vocab.symbols[hf.token_to_id("<|endoftext|>")] == ()  # a special added token
  text = '{"service": "crm", "note": "Café ✓ 😀"}\n<tool_call>\n'
  ids = renderer.encode_text(text)
  assert [s for i in ids for s in vocab.symbols[i]] == text_symbols(text)
  # Byte-level tokens are bytes, whole characters or not.
  lone = [i for i, s in enumerate(vocab.symbols) if len(s) == 1 and s[0] >= 0x80]
  assert len(lone) >= 64


# --- the sampler, with scripted random logits ----------------------------------------------


class RandomLogits(Policy):
  """A policy whose prefill and decode steps are fake: standard normal logits drawn from a seed
  made of the step and the token fed (an untrained model, without the compile)."""

  def __init__(self, *args, scale=3.0, **kwargs):
    super().__init__(*args, **kwargs)
    v = self.model.config.vocab_size

    def logits(step, token):
      return scale * np.random.default_rng([step, token]).standard_normal((1, v))

    self._prefill = lambda state, tokens, lengths, max_len: (logits(0, int(lengths[0])), 1)
    self._decode = lambda state, tokens, step: (logits(step, int(tokens[0])), step + 1)


@pytest.fixture(scope="module")
def fake(tokenizer):
  model = random_model(get_config("tiny", vocab_size=tokenizer.vocab_size), 0)
  return RandomLogits(model, tokenizer, max_context=4096)


def check_calls(completion, tools, name=None):
  """The turn parses into tool calls of ``tools`` whose arguments satisfy their schemas."""
  parsed = completion.parsed
  assert parsed.ended and not parsed.errors and parsed.tool_calls, completion.text
  assert completion.finish_reason == "tool_calls"
  schemas = {t["function"]["name"]: t["function"]["parameters"] for t in tools}
  for c in parsed.tool_calls:
    assert c["name"] in schemas and c["name"] == (name or c["name"])
    jsonschema.validate(c["arguments"], schemas[c["name"]])
  return parsed


def is_valid_call_turn(completion, tools):
  try:
    check_calls(completion, tools)
  except (AssertionError, jsonschema.ValidationError):
    return False
  return True


@pytest.mark.parametrize("tools", [META_TOOLS, ENUM_TOOLS, [*META_TOOLS, RICH]])
def test_constrained_random_logits_always_make_valid_calls(fake, tools):
  names = set()
  for seed in range(12):
    temperature = 0.0 if seed == 0 else 1.0
    kwargs = {"tool_choice": "required", "temperature": temperature, "seed": seed}
    c = fake.chat(HI, tools, max_tokens=96, constrained=True, **kwargs)
    parsed = check_calls(c, tools)
    names |= {x["name"] for x in parsed.tool_calls}
    if tools is ENUM_TOOLS:
      for x in parsed.tool_calls:
        assert x["arguments"].get("service", "crm") in SERVICES
        assert x["arguments"].get("tool", "list_events") in TOOLS
    # Unconstrained, the same logits make no valid call.
    assert not is_valid_call_turn(fake.chat(HI, tools, max_tokens=96, **kwargs), tools)
  assert len(names) > 1  # the grammar leaves the choice of tool to the model


def test_constrained_turns_end_within_a_small_budget(fake):
  # The shortest turn after the forced <tool_call>\n is 42 symbols: {"name":"list_services",...
  # Every budget from there on ends with a valid call.
  forced = fake.renderer.encode_text("<tool_call>\n")
  c = fake.constraint(META_TOOLS, "required", forced)
  assert c.tc.grammar.finish_cost(c.state) == 42
  for max_tokens in (42, 43, 50, 64):
    for seed in range(3):
      c = fake.chat(HI, META_TOOLS, "required", 1.0, max_tokens, seed, constrained=True)
      assert len(c.ids) <= max_tokens + 2  # + the forced <tool_call>\n
      check_calls(c, META_TOOLS)
  # Too small a budget: the grammar alone, cut at the budget.
  c = fake.chat(HI, META_TOOLS, "required", 1.0, 8, 0, constrained=True)
  assert c.finish_reason == "length" and parse_assistant(c.text).errors


def test_a_named_tool_choice_constrains_to_that_tool(fake):
  choice = {"type": "function", "function": {"name": "call_tool"}}
  for seed in range(4):
    c = fake.chat(HI, ENUM_TOOLS, choice, 1.0, 80, seed, constrained=True)
    check_calls(c, ENUM_TOOLS, name="call_tool")


# call_tool with a string to pass on: a grounded value, three containers deep as the real one's.
QUERY_TOOL = {
  "type": "function",
  "function": {
    "name": "call_tool",
    "parameters": {
      "type": "object",
      "properties": {
        "service": {"type": "string", "enum": ["crm"]},
        "arguments": {
          "type": "object",
          "properties": {
            "query": {"type": "string"},
            "ids": {"type": "array", "items": {"type": "string"}},
          },
          "required": ["query", "ids"],
        },
      },
      "required": ["service", "arguments"],
    },
  },
}


def test_grounded_calls_copy_their_string_arguments_from_the_conversation(fake):
  messages = [
    {"role": "user", "content": 'Find the "Juniper vendor onboarding" invoice inv_edff9e11.'}
  ]
  prompt = fake.renderer.decode(fake.prompt(messages, [QUERY_TOOL], "required")[0])
  copied, free = [], []
  for seed in range(8):
    for grounded, out in ((True, copied), (False, free)):
      c = fake.chat(
        messages, [QUERY_TOOL], "required", 1.0, 160, seed, constrained=True, grounded=grounded
      )
      for call in c.parsed.tool_calls:  # the calls made whole before the budget ran out
        out += [call["arguments"]["arguments"]["query"], *call["arguments"]["arguments"]["ids"]]
  # Random logits write strings into the passed-on arguments; grounded, each is a whole-word
  # copy out of the prompt (the model still picks which), ungrounded almost none is.
  words = lambda v: re.fullmatch(r"[\w#@+$(-](.*[\w)])?", v) is not None  # noqa: E731
  assert len(copied) >= 8 and all(v in prompt and words(v) for v in copied), [
    v for v in copied if not (v in prompt and words(v))
  ]
  assert sum(v in prompt for v in free) < len(free) / 4, free


def test_typed_calls_pass_the_called_tool_only_its_own_parameters(fake):
  # Each (service, tool) takes its own keys, one of them a required enum: under the typed
  # constraint every call passes a valid object, without it random logits never do.
  schemas = {
    (service, tool): {
      "type": "object",
      "properties": {
        f"{tool}_status": {"type": "string", "enum": ["open", "closed"]},
        "limit": {},  # the type of a value that is not an enum is left to the service
      },
      "required": [f"{tool}_status"],
      "additionalProperties": False,
    }
    for service in SERVICES
    for tool in TOOLS
  }
  choice = {"type": "function", "function": {"name": "call_tool"}}
  typed = untyped = 0
  for seed in range(6):
    c = fake.chat(HI, ENUM_TOOLS, choice, 1.0, 160, seed, constrained=True, schemas=schemas)
    for call in c.parsed.tool_calls:
      args = call["arguments"]
      jsonschema.validate(args["arguments"], schemas[args["service"], args["tool"]])
      typed += 1
    c = fake.chat(HI, ENUM_TOOLS, choice, 1.0, 160, seed, constrained=True)
    for call in c.parsed.tool_calls:
      args = call["arguments"]
      untyped += is_valid_args(args.get("arguments"), schemas[args["service"], args["tool"]])
  assert typed >= 6 and untyped == 0


def is_valid_args(value, schema):
  try:
    jsonschema.validate(value, schema)
  except jsonschema.ValidationError:
    return False
  return True


def test_auto_leaves_content_free_and_calls_valid(fake):
  for seed in range(6):
    c = fake.chat(HI, META_TOOLS, "auto", 1.0, 60, seed, constrained=True)
    parsed = c.parsed
    assert parsed.ended and not parsed.errors, c.text
    # With random logits <tool_call> is unlikely: some turns are content only.
    if parsed.tool_calls:
      check_calls(c, META_TOOLS)
  # "none" is never constrained (no tools in the prompt, nothing parsed).
  assert fake.chat(HI, META_TOOLS, "none", 1.0, 20, 0, constrained=True).parsed is None


def test_constraint_is_off_by_default_and_the_checkpoint_agent_turns_it_on(fake, monkeypatch):
  agent = PolicyAgent(policy=fake, constrained=True, max_tokens=60, temperature=1.0)
  for _ in range(3):
    msg = agent.act(HI, META_TOOLS)
    assert "malformed" not in msg and msg["role"] == "assistant"
  seen, generate = [], fake.generate

  def recording(*args, constraint=None, **kwargs):
    seen.append(constraint)
    return generate(*args, constraint=constraint, **kwargs)

  monkeypatch.setattr(fake, "generate", recording)
  PolicyAgent(policy=fake, max_tokens=4).act(HI, META_TOOLS)
  fake.chat(HI, META_TOOLS, "required", max_tokens=4)
  PolicyAgent(policy=fake, max_tokens=4, constrained=True).act(HI, META_TOOLS)
  assert seen[0] is None and seen[1] is None and seen[2] is not None


def test_the_checkpoint_agents_grammar_names_the_episodes_services(fake, tasks):
  from compoworld.runtime.registry import registry

  agent = PolicyAgent(policy=fake, constrained=True)

  def enums(tools):
    call = next(t for t in tools if t["function"]["name"] == "call_tool")
    props = call["function"]["parameters"]["properties"]
    return props["service"]["enum"], props["tool"]["enum"]

  assert enums(agent._grammar_tools(META_TOOLS))[0] == sorted(registry.names())
  task = next(t for t in tasks if t.distractors) if any(t.distractors for t in tasks) else tasks[0]
  agent.reset(task)
  services, tools = enums(agent._grammar_tools(META_TOOLS))
  assert services == sorted({*task.services, *task.distractors})  # what list_services lists
  assert set(tools) == {t for s in services for t in registry.get(s).tool_names()}


# --- a random tiny model, and the server ---------------------------------------------------


@pytest.fixture(scope="module")
def tiny(tokenizer):
  model = random_model(get_config("tiny", vocab_size=tokenizer.vocab_size), 2)
  return Policy(model, tokenizer, max_context=2048, min_bucket=2048, name="tiny")


@pytest.mark.slow  # compiles the tiny model's prefill and decode (~10 s on 2 cores)
def test_a_random_tiny_model_makes_valid_calls_only_when_constrained(tiny):
  for seed in range(3):
    kwargs = {"tool_choice": "required", "temperature": 1.0, "max_tokens": 80, "seed": seed}
    check_calls(tiny.chat(HI, ENUM_TOOLS, constrained=True, **kwargs), ENUM_TOOLS)
    assert not is_valid_call_turn(tiny.chat(HI, ENUM_TOOLS, **kwargs), ENUM_TOOLS)
  greedy = tiny.chat(HI, META_TOOLS, "required", 0.0, 80, constrained=True)
  check_calls(greedy, META_TOOLS)


@pytest.mark.slow
def test_the_server_constrains_tool_choice_required(tiny):
  from rl.serve.server import BackgroundServer, create_app

  with BackgroundServer(create_app(tiny)) as server:
    for choice in ("required", {"type": "function", "function": {"name": "list_tools"}}):
      reply = client(server.url).chat.completions.create(
        model="tiny", messages=HI, tools=ENUM_TOOLS, tool_choice=choice, max_tokens=60, seed=1
      )
      [message] = [c.message for c in reply.choices]
      assert reply.choices[0].finish_reason == "tool_calls" and message.tool_calls
      for c in message.tool_calls:
        schema = next(t for t in ENUM_TOOLS if t["function"]["name"] == c.function.name)
        jsonschema.validate(json.loads(c.function.arguments), schema["function"]["parameters"])
      if isinstance(choice, dict):
        assert {c.function.name for c in message.tool_calls} == {"list_tools"}


def test_evaluate_takes_constrained_for_checkpoints_only(tmp_path):
  proc = subprocess.run(
    [
      sys.executable,
      "-m",
      "experiments.evaluate",
      "--agent=oracle",
      "--constrained",
      f"--tasks={tmp_path / 'none.jsonl'}",
      f"--workdir={tmp_path}",
    ],
    cwd=Path(__file__).parents[2],
    capture_output=True,
    text=True,
    timeout=120,
  )
  assert proc.returncode != 0 and "--constrained is for --agent=checkpoint:DIR" in proc.stderr


def test_the_checkpoint_agent_names_only_library_services_and_tools(fake):
  from compoworld.runtime.registry import registry

  services = set(registry.names())
  tools = {t for s in services for t in registry.get(s).tool_names()}
  agent = PolicyAgent(policy=fake, constrained=True, max_tokens=120, temperature=1.0)
  grammar = {
    t["function"]["name"]: t["function"]["parameters"] for t in agent._grammar_tools(META_TOOLS)
  }
  assert set(grammar["call_tool"]["properties"]["service"]["enum"]) == services
  assert set(grammar["describe_tool"]["properties"]["tool"]["enum"]) == tools
  # The prompt still shows the schemas as given: only the grammar has the enums.
  assert "enum" not in json.dumps(META_TOOLS)
  for seed in range(8):
    agent.seed = seed
    msg = agent.act(HI, META_TOOLS)
    assert "malformed" not in msg
    for call in msg.get("tool_calls") or []:
      args = json.loads(call["function"]["arguments"])
      if "service" in args:
        assert args["service"] in services
      if "tool" in args:
        assert args["tool"] in tools
