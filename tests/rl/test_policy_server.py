"""The policy server over real HTTP with the official ``openai`` client, and the policy behind it.

A tiny random model with the session tokenizer's vocabulary is saved as a checkpoint and served
on 127.0.0.1. Scripted policies (fixed generated ids, the real rendering and parsing path) prove
the tool-call conversion and the evaluation harness end to end without waiting on a compile.
"""

import json
import os
import signal
import socket
import subprocess
import sys
import time

import httpx2
import jax
import numpy as np
import openai
import pytest
from flax import nnx

from compoworld.agents.agent import make_agent
from compoworld.agents.evaluation import evaluate, resolve_agent
from compoworld.compose.env import META_TOOLS
from compoworld.llm import make_client
from models import abstract_model, get_config
from rl.data.chat import IM_END
from rl.serve.agent import PolicyAgent
from rl.serve.policy import Policy, RequestError, find_checkpoint, load_policy_parts, save_policy
from rl.serve.server import BackgroundServer, create_app

MAX_CONTEXT = 4096  # also the one prompt bucket: the real model compiles one prefill shape


def random_model(config, seed):
  """A random model without the init compile: the abstract model filled with normal(0, 0.05)."""
  graphdef, state = nnx.split(abstract_model(config))
  rng = np.random.default_rng(seed)
  state = jax.tree.map(lambda x: (0.05 * rng.standard_normal(x.shape)).astype(x.dtype), state)
  return nnx.merge(graphdef, state)


class Scripted(Policy):
  """Generates the given texts in turn (the last one repeats), recording each prompt."""

  def __init__(self, model, tokenizer, texts, **kwargs):
    super().__init__(model, tokenizer, name="scripted", **kwargs)
    self.texts, self.prompts, self.sampling, self.constraints = list(texts), [], [], []

  def generate(self, prompt_ids, max_tokens, temperature=0.0, seed=0, constraint=None):
    self.prompts.append(self.renderer.decode(prompt_ids))
    self.sampling.append({"max_tokens": max_tokens, "temperature": temperature, "seed": seed})
    self.constraints.append(constraint)
    text = self.texts.pop(0) if len(self.texts) > 1 else self.texts[0]
    return self.renderer.encode_text(text)[:max_tokens]


@pytest.fixture(scope="module")
def config(tokenizer):
  return get_config("tiny", vocab_size=tokenizer.vocab_size)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory, config, tokenizer):
  """A training run's workdir with two checkpoints; step 20 is the one to serve."""
  d = tmp_path_factory.mktemp("run")
  save_policy(d, random_model(config, seed=1), tokenizer, step=3)
  save_policy(d, random_model(config, seed=2), tokenizer, step=20)
  return d


@pytest.fixture(scope="module")
def policy(run_dir):
  return Policy.load(run_dir, max_context=MAX_CONTEXT, min_bucket=MAX_CONTEXT)


@pytest.fixture(scope="module")
def served(policy):
  with BackgroundServer(create_app(policy, model_name="tiny-policy")) as server:
    yield server


def client(url):
  return make_client(base_url=url, api_key="k", max_retries=0, timeout=120)


# --- checkpoints ---------------------------------------------------------------------------


def test_latest_checkpoint_is_served_with_its_config_and_tokenizer(run_dir, config, tokenizer):
  assert find_checkpoint(run_dir) == run_dir / "checkpoints" / "20"
  model, tok, path = load_policy_parts(run_dir)
  assert model.config == config and tok.vocab_size == tokenizer.vocab_size
  want = nnx.state(random_model(config, seed=2))
  for a, b in zip(jax.tree.leaves(nnx.state(model)), jax.tree.leaves(want), strict=True):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
  # The checkpoint directory itself also loads (config and tokenizer found above it).
  assert load_policy_parts(path)[2] == path


def test_a_loaded_policy_changes_how_it_computes_not_its_parameters(run_dir, config):
  model, _, _ = load_policy_parts(run_dir, {"remat": "full", "moe_backend": "sort"})
  assert (model.config.remat, model.config.moe_backend) == ("full", "sort")
  assert model.config.d_model == config.d_model
  with pytest.raises(ValueError, match=r"\['d_model'\] cannot change"):
    load_policy_parts(run_dir, {"d_model": 8})


def test_a_run_without_an_exported_policy_is_a_clear_error(tmp_path):
  """A workdir mid-training holds the trainer's composite checkpoints, not a servable one."""
  import orbax.checkpoint as ocp

  options = ocp.CheckpointManagerOptions(create=True, enable_async_checkpointing=False)
  with ocp.CheckpointManager(tmp_path / "checkpoints", options=options) as manager:
    state = ocp.args.StandardSave({"params": np.zeros(3)})
    manager.save(4, args=ocp.args.Composite(state=state, data=ocp.args.JsonSave({"i": 1})))
  with pytest.raises(FileNotFoundError, match=r"no exported policy: .* writes its servable policy"):
    find_checkpoint(tmp_path)


def test_missing_checkpoint_is_a_clear_error(tmp_path):
  with pytest.raises(FileNotFoundError, match="no Orbax checkpoint"):
    find_checkpoint(tmp_path)
  with pytest.raises(FileNotFoundError, match="does not exist"):
    find_checkpoint(tmp_path / "nope")


# --- the decoding loop ---------------------------------------------------------------------


class Counting(Policy):
  """Fake compiled steps: prefill's logits favour ``length % V``, each step's ``token + 1``, by
  ``margin`` (0: uniform logits)."""

  def __init__(self, *args, margin=1000.0, **kwargs):
    super().__init__(*args, **kwargs)
    v = self.model.config.vocab_size
    self.fed = []

    def prefill(state, tokens_bt, lengths_b, max_len):
      self.shapes = (tokens_bt.shape, max_len)
      return margin * np.eye(v)[[int(lengths_b[0]) % v]], 0

    def decode(state, tokens_b, cache):
      self.fed.append(int(tokens_b[0]))
      return margin * np.eye(v)[[(int(tokens_b[0]) + 1) % v]], cache + 1

    self._prefill, self._decode = prefill, decode


def test_greedy_loop_feeds_each_token_back_and_stops_at_im_end(config, tokenizer):
  p = Counting(random_model(config, 0), tokenizer, min_bucket=8)
  end = p.renderer.im_end_id
  assert end not in range(5, 9)
  assert p.generate([7] * 5, max_tokens=4) == [5, 6, 7, 8]
  assert p.fed == [5, 6, 7] and p.shapes == ((1, 8), 16)  # 5 -> bucket 8; 5 + 4 -> 16
  p.fed = []
  start = end - 2
  assert p.generate([7] * start, max_tokens=50) == [start, start + 1, end]
  assert p.fed == [start, start + 1]  # nothing is fed after <|im_end|>


def test_sampling_follows_the_logits_and_the_seed(policy):
  forced = Counting(policy.model, policy.tokenizer, min_bucket=8)
  a = forced.generate([1, 2, 3], 6, temperature=5.0, seed=1)
  assert a[0] == 3 and a[1:] == [t + 1 for t in a[:-1]]  # a margin of 200 / T: always picked
  uniform = Counting(policy.model, policy.tokenizer, min_bucket=8, margin=0.0)
  b = uniform.generate([1, 2, 3], 6, temperature=1.0, seed=1)
  assert b == uniform.generate([1, 2, 3], 6, temperature=1.0, seed=1)
  assert b != uniform.generate([1, 2, 3], 6, temperature=1.0, seed=2)
  assert uniform.generate([1, 2, 3], 6, temperature=0.0) == [0] * 6  # argmax of ties: id 0


@pytest.mark.slow  # compiles the uncached forward pass as the reference
def test_cached_greedy_decoding_matches_the_uncached_forward_pass(policy):
  """Reference: argmax of the full causal forward at each prefix (no cache, no buckets)."""
  prompt = policy.renderer.encode_text("<|im_start|>user\nWhich services?<|im_end|>\n")
  got = policy.generate(prompt, max_tokens=6)
  forward = nnx.jit(lambda model, tokens: model(tokens))
  seq, want = list(prompt), []
  for _ in range(len(got)):
    tokens = np.zeros((1, 64), np.int32)
    tokens[0, : len(seq)] = seq  # causal: the zeros after the prefix change nothing before it
    logits = np.asarray(forward(policy.model, tokens))[0, len(seq) - 1]
    want.append(int(np.argmax(logits[: policy.tokenizer.vocab_size])))
    seq.append(want[-1])
  assert got == want


# --- the API over HTTP ---------------------------------------------------------------------


def test_models_lists_the_served_model(served):
  models = client(served.url).models.list()
  assert [m.id for m in models.data] == ["tiny-policy"]
  assert client(served.url).models.retrieve("tiny-policy").id == "tiny-policy"


@pytest.mark.slow  # the first real generation compiles prefill and decode (~20 s on 2 cores)
def test_chat_completion_from_the_real_model(served, policy):
  messages = [{"role": "user", "content": "List the services."}]
  reply = client(served.url).chat.completions.create(
    model="tiny-policy", messages=messages, tools=META_TOOLS, temperature=0, max_tokens=5
  )
  choice = reply.choices[0]
  assert choice.finish_reason in ("length", "stop", "tool_calls")
  assert 1 <= reply.usage.completion_tokens <= 5
  # Greedy decoding is deterministic and the server answers what the policy itself answers.
  direct = policy.chat(messages, META_TOOLS, temperature=0, max_tokens=5)
  assert reply.usage.completion_tokens == len(direct.ids)
  assert reply.usage.prompt_tokens == direct.prompt_tokens
  assert choice.message.content == direct.message()["content"]


@pytest.fixture(scope="module")
def scripted(policy):
  call = '<tool_call>\n{"name": "list_tools", "arguments": {"service": "calendar"}}\n</tool_call>'
  p = Scripted(
    policy.model, policy.tokenizer, [f"Let me look.\n{call}{IM_END}"], max_context=MAX_CONTEXT
  )
  with BackgroundServer(create_app(p)) as server:
    yield p, server


def test_tool_calls_come_back_as_openai_tool_calls(scripted):
  p, server = scripted
  reply = client(server.url).chat.completions.create(
    model="scripted", messages=[{"role": "user", "content": "hi"}], tools=META_TOOLS
  )
  choice = reply.choices[0]
  assert choice.finish_reason == "tool_calls"
  assert choice.message.content == "Let me look."
  [call] = choice.message.tool_calls
  assert call.type == "function" and call.function.name == "list_tools"
  assert json.loads(call.function.arguments) == {"service": "calendar"}
  # The prompt was rendered in the chat format with the request's tools.
  assert '"name": "describe_tool"' in p.prompts[-1]
  assert p.prompts[-1].endswith("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n")


def test_a_named_tool_choice_forces_the_call_prefix(scripted):
  p, server = scripted
  p.texts = [f'{{"service": "crm"}}}}\n</tool_call>{IM_END}']
  choice = {"type": "function", "function": {"name": "list_tools"}}
  reply = client(server.url).chat.completions.create(
    model="scripted",
    messages=[{"role": "user", "content": "hi"}],
    tools=META_TOOLS,
    tool_choice=choice,
  )
  [call] = reply.choices[0].message.tool_calls
  assert call.function.name == "list_tools"
  assert json.loads(call.function.arguments) == {"service": "crm"}
  assert p.prompts[-1].endswith('<tool_call>\n{"name": "list_tools", "arguments": ')


def test_tool_choice_none_and_required_and_sampling_settings_reach_the_policy(scripted):
  p, server = scripted
  call = '<tool_call>\n{"name": "list_services", "arguments": {}}\n</tool_call>'
  p.texts = [f"Plain text, then {call}{IM_END}"]
  hi = [{"role": "user", "content": "hi"}]
  reply = client(server.url).chat.completions.create(
    model="scripted", messages=hi, tools=META_TOOLS, tool_choice="none", temperature=0.7,
    max_tokens=300, seed=5,
  )  # fmt: skip
  # "none": no tools in the prompt and nothing parsed: the turn comes back as text.
  assert "<tools>" not in p.prompts[-1]
  assert reply.choices[0].message.tool_calls is None
  assert reply.choices[0].message.content == f"Plain text, then {call}"
  assert reply.choices[0].finish_reason == "stop"
  assert p.sampling[-1] == {"max_tokens": 300, "temperature": 0.7, "seed": 5}
  p.texts = [f'{{"name": "list_services", "arguments": {{}}}}\n</tool_call>{IM_END}']
  reply = client(server.url).chat.completions.create(
    model="scripted", messages=hi, tools=META_TOOLS, tool_choice="required"
  )
  # "required": the turn is forced to open a tool call.
  assert p.prompts[-1].endswith("<|im_start|>assistant\n<tool_call>\n")
  assert "<tools>" in p.prompts[-1]
  assert reply.choices[0].message.tool_calls[0].function.name == "list_services"
  assert reply.choices[0].finish_reason == "tool_calls"
  assert p.sampling[-1]["temperature"] == 1.0  # OpenAI's default when a request omits it
  # "required" is decoded under the tools' grammar, past the forced <tool_call>\n; "none" not.
  assert p.constraints[-2] is None and p.constraints[-1].state[-1] == ("c", "c0", None)


def _error(server, **request):
  with pytest.raises(openai.APIStatusError) as info:
    client(server.url).chat.completions.create(**request)
  return info.value.status_code, info.value.body


def test_bad_requests_get_openai_error_bodies(scripted):
  _, server = scripted
  hi = [{"role": "user", "content": "hi"}]
  status, body = _error(server, model="gpt-9", messages=hi)
  assert status == 404 and body["code"] == "model_not_found" and body["param"] == "model"
  status, body = _error(server, model="scripted", messages=[{"role": "robot", "content": "x"}])
  assert status == 400 and body["type"] == "invalid_request_error" and body["param"] == "messages"
  assert "messages[0].role" in body["message"]
  status, body = _error(server, model="scripted", messages=[])
  assert status == 400 and body["param"] == "messages"
  status, body = _error(server, model="scripted", messages=hi, max_tokens=MAX_CONTEXT)
  assert status == 400 and body["param"] == "max_tokens" and "does not fit" in body["message"]
  status, body = _error(server, model="scripted", messages=hi, max_tokens=0)
  assert status == 400 and body["param"] == "max_tokens"
  status, body = _error(
    server,
    model="scripted",
    messages=hi,
    tools=META_TOOLS,
    tool_choice={"type": "function", "function": {"name": "nope"}},
  )
  assert status == 400 and body["param"] == "tool_choice"
  status, body = _error(server, model="scripted", messages=hi, tools=["list_services"])
  assert status == 400 and body["param"] == "tools"


def test_raw_http_errors_are_json(scripted):
  _, server = scripted
  with httpx2.Client() as http:
    r = http.post(f"{server.url}/chat/completions", content=b"{not json")
    assert r.status_code == 400 and "not valid JSON" in r.json()["error"]["message"]
    r = http.get(f"{server.url}/nowhere")
    assert r.status_code == 404 and r.json()["error"]["type"] == "not_found_error"
    r = http.post(
      f"{server.url}/chat/completions",
      json={"model": "scripted", "stream": True, "messages": [{"role": "user", "content": "x"}]},
    )
    assert r.status_code == 400 and r.json()["error"]["param"] == "stream"


def test_non_loopback_needs_an_api_key(policy):
  with pytest.raises(ValueError, match="non-loopback"):
    BackgroundServer(create_app(policy), host="0.0.0.0")


def test_api_key_is_checked(policy):
  with BackgroundServer(create_app(policy, api_key="sesame")) as server:
    with pytest.raises(openai.AuthenticationError):
      client(server.url).models.list()
    ok = make_client(base_url=server.url, api_key="sesame", max_retries=0)
    assert [m.id for m in ok.models.list().data] == [policy.name]


# --- evaluation through the server ---------------------------------------------------------


@pytest.mark.slow
def test_evaluation_harness_plays_the_real_model_over_http(served, tasks):
  kwargs = {"model": "tiny-policy", "base_url": served.url, "api_key": "k", "max_tokens": 4}
  [result] = evaluate(tasks[:1], "openai", kwargs, max_turns=3, progress=False)
  [sample] = result["samples"]
  assert sample["error"] is None and sample["result"] is not None
  assert sample["success"] is False and sample["turns"] >= 1
  replies = [m for m in sample["messages"] if m["role"] == "assistant"]
  assert len(replies) == sample["turns"]


def test_evaluation_records_tool_calls_made_through_the_server(policy, tasks):
  call = '<tool_call>\n{"name": "list_services", "arguments": {}}\n</tool_call>'
  p = Scripted(policy.model, policy.tokenizer, [call + IM_END, "I am done." + IM_END])
  with BackgroundServer(create_app(p)) as server:
    kwargs = {"model": "scripted", "base_url": server.url, "api_key": "k"}
    [result] = evaluate(tasks[:1], "openai", kwargs, max_turns=5, progress=False)
  [sample] = result["samples"]
  assert sample["tool_calls"] == 1 and sample["tool_errors"] == 0 and sample["turns"] == 2
  assert sample["final_answer"] == "I am done."
  tool_msg = next(m for m in sample["messages"] if m["role"] == "tool")
  assert json.loads(tool_msg["content"])["ok"] is True
  # The tool result went back to the policy inside <tool_response> in its next prompt.
  assert "<tool_response>" in p.prompts[-1]


def test_a_malformed_turn_of_the_checkpoint_agent_gets_an_error_envelope(policy, tasks):
  good = '<tool_call>\n{"name": "list_services", "arguments": {}}\n</tool_call>'
  broken = '<tool_call>\n{"name": "list_tools", "arguments": {"service": </tool_call>'
  texts = ["Let me look.\n" + good + "\n" + broken + IM_END, "I am done." + IM_END]
  p = Scripted(policy.model, policy.tokenizer, texts)
  [result] = evaluate(tasks[:1], lambda: PolicyAgent(policy=p), max_turns=5, progress=False)
  [sample] = result["samples"]
  # The episode went on past the broken call, as a GRPO rollout does, to the final answer.
  assert sample["turns"] == 2 and sample["final_answer"] == "I am done."
  first = sample["messages"][2]
  assert first["content"] == "Let me look." and len(first["malformed"]) == 1
  assert [c["function"]["name"] for c in first["tool_calls"]] == ["list_services"]
  envelopes = [json.loads(m["content"]) for m in sample["messages"] if m["role"] == "tool"]
  assert envelopes[0]["ok"] is True  # the well-formed call of the same turn ran
  assert envelopes[1]["error"]["type"] == "malformed_call"
  assert sample["tool_calls"] == 2 and sample["tool_errors"] == 1


def test_workers_fall_back_to_one_once_jax_runs_here(policy, tasks, caplog):
  # A worker forked from a process whose JAX runtime has started deadlocks: evaluate plays in
  # this process instead, and says so.
  p = Scripted(policy.model, policy.tokenizer, ["I am done." + IM_END])
  with caplog.at_level("WARNING"):
    results = evaluate(tasks[:2], lambda: PolicyAgent(policy=p), workers=2, progress=False)
  assert [r["task_id"] for r in results] == [t.id for t in tasks[:2]]
  assert len(p.prompts) == 2  # both episodes ran here, against this process's policy
  assert "one worker instead of 2" in caplog.text


def test_a_grounded_policy_decodes_tool_turns_under_the_argument_constraint(policy):
  from rl.decoding.arguments import ArgumentConstraint

  messages = [{"role": "user", "content": "go"}]
  grounded = Scripted(policy.model, policy.tokenizer, ["ok" + IM_END], grounded=True)
  grounded.chat(messages, META_TOOLS, max_tokens=4)
  grounded.chat(messages, META_TOOLS, max_tokens=4, grounded=False)  # per request
  grounded.chat(messages, max_tokens=4)  # no tools: nothing to ground
  assert isinstance(grounded.constraints[0], ArgumentConstraint)
  assert grounded.constraints[1:] == [None, None]
  plain = Scripted(policy.model, policy.tokenizer, ["ok" + IM_END])
  plain.chat(messages, META_TOOLS, max_tokens=4)
  assert plain.constraints == [None]


def test_a_narrated_agent_names_only_its_episodes_calls(policy, tasks):
  from rl.decoding.modes import episode_services
  from rl.decoding.narration import NarratedConstraint

  p = Scripted(policy.model, policy.tokenizer, ["ok" + IM_END])
  agent = PolicyAgent(policy=p, constrained=True, grounded=True, narrated=True)
  agent.reset(tasks[0])
  request = [{"role": "user", "content": "Find the offer. Then make it."}]
  agent.act(request, META_TOOLS)
  assert isinstance(p.constraints[-1], NarratedConstraint)
  assert p.constraints[-1].sentences == ()  # a quote of the request is free
  held = PolicyAgent(policy=p, constrained=True, grounded=True, narrated=True, held_quotes=True)
  held.reset(tasks[0])
  held.act(request, META_TOOLS)
  assert p.constraints[-1].sentences == ("Find the offer.", "Then make it.", "make it.")
  with pytest.raises(ValueError, match="needs narrated=True"):
    PolicyAgent(policy=p, constrained=True, held_quotes=True)
  assert {s for s, _ in agent._narrations()} == set(episode_services(tasks[0]))
  go, pairs = [{"role": "user", "content": "go"}], agent._narrations()
  p.chat(go, META_TOOLS, constrained=True, narrations=pairs)
  assert isinstance(p.constraints[-1], NarratedConstraint)
  p.chat(go, META_TOOLS, constrained=True, narrations=pairs, tool_choice="required")
  assert not isinstance(p.constraints[-1], NarratedConstraint)  # a forced call: no narration
  with pytest.raises(ValueError, match="narrated decoding needs constrained"):
    PolicyAgent(policy=p, grounded=True, narrated=True)


def test_near_the_end_of_the_context_the_agent_turn_gets_what_is_left(policy):
  p = Scripted(policy.model, policy.tokenizer, ["I am done." + IM_END], max_context=MAX_CONTEXT)
  messages = [{"role": "user", "content": "go"}]
  prompt = len(p.prompt(messages, META_TOOLS)[0])
  p.max_context = prompt + 3  # room for three generated ids, the agent asks for 50
  with pytest.raises(RequestError, match="does not fit"):
    p.chat(messages, META_TOOLS, max_tokens=50)  # a request (the server's 400) is not shortened
  agent = PolicyAgent(policy=p, max_tokens=50)
  msg = agent.act(messages, META_TOOLS)
  assert p.sampling[-1]["max_tokens"] == 3 and msg["role"] == "assistant"
  p.max_context = prompt  # no room at all: the episode ends with an empty turn
  assert agent.act(messages, META_TOOLS) == {"role": "assistant", "content": ""}


def test_checkpoint_agent_is_registered(run_dir, policy, tasks):
  assert resolve_agent(f"checkpoint:{run_dir}")[0] == "checkpoint"
  # the sampling temperature reaches the checkpoint agent as it does an endpoint's
  assert resolve_agent(f"checkpoint:{run_dir}", temperature=0.7)[1]["temperature"] == 0.7
  agent = make_agent("checkpoint", checkpoint_dir=run_dir, max_context=MAX_CONTEXT)
  assert (
    isinstance(agent, PolicyAgent) and agent.policy.checkpoint == run_dir / "checkpoints" / "20"
  )
  p = Scripted(
    policy.model, policy.tokenizer, ['<tool_call>\n{"name": "list_services"}\n</tool_call>']
  )
  agent = make_agent("checkpoint", policy=p)
  msg = agent.act([{"role": "user", "content": "go"}], META_TOOLS)
  assert msg["tool_calls"][0]["function"]["name"] == "list_services"
  with pytest.raises(ValueError, match="exactly one"):
    PolicyAgent()


@pytest.mark.slow  # a fresh interpreter importing JAX
def test_serve_policy_script(run_dir, tmp_path):
  with socket.socket() as sock:
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
  cmd = [
    sys.executable,
    "-m",
    "experiments.serve_policy",
    f"--checkpoint={run_dir}",
    f"--port={port}",
    "--model_name=mine",
    f"--workdir={tmp_path}",
  ]
  proc = subprocess.Popen(
    cmd,
    stdout=subprocess.PIPE,
    stderr=subprocess.PIPE,
    text=True,
    env={**os.environ, "JAX_PLATFORMS": "cpu"},
  )
  try:
    deadline, models = time.monotonic() + 60, None
    while models is None and time.monotonic() < deadline and proc.poll() is None:
      try:
        models = client(f"http://127.0.0.1:{port}/v1").models.list()
      except openai.APIConnectionError:
        time.sleep(0.2)
    assert models is not None, proc.stderr.read() if proc.poll() is not None else "no answer"
    assert [m.id for m in models.data] == ["mine"]
  finally:
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
  assert proc.returncode == 0, err
  summary = json.loads((tmp_path / "summary.json").read_text())
  assert summary["model"] == "mine" and summary["checkpoint"].endswith("checkpoints/20")
  assert summary["requests"] == 1 and summary["errors"] == 0
  assert json.loads(out.strip().splitlines()[-1]) == summary


# --- grounded values chosen whole -------------------------------------------------------------


def _copy_start(policy, context_words):
  """A prompt whose turn is forced up to the opening quote of a grounded ``query``, and the
  constraint there."""
  from rl.data.chat import TOOL_CALL
  from rl.decoding.arguments import ArgumentConstraint

  prompt = policy.renderer.encode_text(
    f"<|im_start|>user\n{context_words}<|im_end|>\n<|im_start|>assistant\n"
  )
  forced = policy.renderer.encode_text(
    f'{TOOL_CALL}\n{{"name": "call_tool", "arguments": {{"service": "s", "tool": "t", '
    '"arguments": {"query": "'
  )
  context = policy.renderer.decode(prompt).encode()
  constraint = ArgumentConstraint(policy.vocabulary(), context, ground=True, forced=forced)
  assert constraint.grounding and not constraint.scanner.value
  return prompt + forced, constraint


def test_a_wide_copy_beam_finds_the_most_probable_whole_value(policy):
  """Every closed value the constraint allows within the budget, scored by the uncached forward
  pass: a beam wider than their tree returns the best of them, where greedy decoding commits to
  its first token."""
  small = Policy(policy.model, policy.tokenizer, max_context=128, min_bucket=64)
  prefix, start = _copy_start(small, "ab cd")
  budget, quote = 4, ord('"')
  forward = nnx.jit(lambda model, tokens: model(tokens))
  vocab = small.tokenizer.vocab_size

  def logp_after(ids):
    tokens = np.zeros((1, 64), np.int32)
    tokens[0, : len(ids)] = ids
    logits = np.asarray(forward(small.model, tokens), np.float64)[0, len(ids) - 1, :vocab]
    return logits - np.log(np.exp(logits - logits.max()).sum()) - logits.max()

  closed, nodes = [], 0  # (log-probability, ids) of every closed value; open prefixes scored

  def walk(constraint, ids, logp):
    nonlocal nodes
    nodes += 1
    lp = logp_after(prefix + ids)
    for token in np.flatnonzero(constraint.allowed(budget - len(ids) - 1)):
      c = constraint.copy()
      c.advance(int(token))
      grown, score = [*ids, int(token)], logp + lp[token]
      if not c.grounding or quote in small._token_text(int(token)) or len(grown) >= budget:
        closed.append((score, grown))
      else:
        walk(c, grown, score)

  walk(start.copy(), [], 0.0)
  assert 2 <= len(closed) <= 1024  # a tree a beam of 1,024 holds whole
  best = max(closed)[1]
  got = small.generate(prefix, max_tokens=budget, constraint=start.copy(), copy_beam=1024)
  assert got[: len(best)] == best
  greedy = small.generate(prefix, max_tokens=budget, constraint=start.copy())
  by_ids = {tuple(ids): score for score, ids in closed}
  value = next(greedy[:n] for n in range(1, budget + 1) if tuple(greedy[:n]) in by_ids)
  assert by_ids[tuple(value)] <= by_ids[tuple(best)] + 1e-9
