"""The rollout engine on a tiny random model and the session's generated tasks.

A scripted sampler (the policy's text fixed per rollout and turn, sampled through the real
engine: caches, log-probs, parsing, forks, appends) proves the environment step; the real
temperature / top-p sampler proves determinism and the budgets. Every rollout's log-probs are
checked against one full forward pass over its final tokens.
"""

import json
from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from compoworld.runtime.envelope import error
from models import Cache, create_model, get_config
from rl.data.chat import IM_END, TOOL_CALL, tool_call_text
from rl.grpo.rollout import (
  RolloutConfig,
  RolloutEngine,
  categorical,
  make_sampler,
  scripted_sampler,
  start_conversation,
  top_p_filter,
)
from rl.pipeline.diagnose import value_leaves

# Tests that compile the tiny model or play rollouts: ~20-60 s each on 2 busy cores.
SLOW = pytest.mark.slow
TEMPERATURE = 0.7
SCRIPT_TOKENS = 256  # per-turn budget of the scripted engine: every scripted turn fits
SCRIPT_TOTAL = 8192  # token budget of the scripted engine: every script fits
MALFORMED = '<tool_call>\n{"name": "list_services", "arguments": {oops}\n</tool_call>'


@pytest.fixture(scope="module")
def model(tokenizer):
  # The tiny SFT shape (configs/sft.py:tiny): one DeltaNet and one attention layer.
  config = get_config(
    "tiny",
    vocab_size=tokenizer.vocab_size,
    num_layers=2,
    full_attention_interval=2,
    deltanet_chunk=64,
    moe_backend="sort",
  )
  return create_model(config, seed=0)


def call(name, **arguments):
  return tool_call_text(name, arguments)


def oracle_writes(task):
  """The reference solution's writes: from s0 they reach the goal state (reads change nothing)."""
  return [task.reference_solution[i] for i in task.write_indices()]


def oracle_turns(task):
  """The reference writes, one call_tool per turn, then the reference answer."""
  turns = [
    call("call_tool", service=c.service, tool=c.tool, arguments=c.arguments)
    for c in oracle_writes(task)
  ]
  return [*turns, task.reference_answer or "Done."]


def script_sampler(renderer, scripts):
  """A sampler that emits `scripts[row][turn]` (text, then <|im_end|>) whatever the logits."""
  ids = [[renderer.encode_text(text + IM_END) for text in turns] for turns in scripts]
  assert max(len(i) for turns in ids for i in turns) <= SCRIPT_TOKENS
  return scripted_sampler(ids, renderer.im_end_id)


@pytest.fixture(scope="module")
def played(tasks):
  """The two tasks of the scripted runs (the first has the fewest reference writes)."""
  return [tasks[1], tasks[0]]


@pytest.fixture(scope="module")
def script(played):
  """Task 0: rollout 0 plays the oracle, rollout 1 answers at once. Task 1: rollout 0 sends a
  malformed call, then a good one; rollout 1 calls a meta-tool that does not exist."""
  return [
    oracle_turns(played[0]),
    ["I can not do that."],
    [MALFORMED, call("list_services"), "Finished."],
    [call("frobnicate"), "Finished."],
  ]


@pytest.fixture(scope="module")
def scripted(model, renderer, script):
  return scripted_engine(model, renderer, script, max_turns=16)


def scripted_engine(model, renderer, script, max_turns):
  config = RolloutConfig(
    num_rollouts=2,
    max_turns=max_turns,
    max_new_tokens_per_turn=SCRIPT_TOKENS,
    max_total_tokens=SCRIPT_TOTAL,
    temperature=TEMPERATURE,
  )
  sampler = script_sampler(renderer, script)
  # Batch buckets of 2 and 4: finished rows are compacted away, and the pieces of a tool result
  # that only some rows need run on those rows alone (gathered, then written back).
  return RolloutEngine(model, renderer, config, sampler=sampler, append_chunk=64, min_batch=2)


@pytest.fixture(scope="module")
def scripted_rollouts(scripted, played):
  return scripted.run(played, seed=0)


def prompt_length(renderer, task):
  return len(start_conversation(renderer, task).prompt_ids())


PER_TURN = 12
TOTAL_SLACK = 5  # the longer prompt's rollouts may generate this many tokens in all


@pytest.fixture(scope="module")
def sampled_setup(model, renderer, tasks):
  """Real sampling; the token budget cuts the longer prompt's rollouts at TOTAL_SLACK tokens,
  the per-turn budget the other's at PER_TURN."""
  pair = sorted(tasks[:3], key=lambda t: prompt_length(renderer, t))
  short, long = pair[0], pair[-1]
  assert prompt_length(renderer, long) - prompt_length(renderer, short) > PER_TURN
  config = RolloutConfig(
    num_rollouts=2,
    max_turns=3,
    max_new_tokens_per_turn=PER_TURN,
    max_total_tokens=prompt_length(renderer, long) + TOTAL_SLACK,
    temperature=TEMPERATURE,
    top_p=0.95,
  )
  engine = RolloutEngine(model, renderer, config, append_chunk=64, min_batch=4)
  return engine, [long, short]


@pytest.fixture(scope="module")
def sampled_rollouts(sampled_setup):
  engine, tasks = sampled_setup
  return engine.run(tasks, seed=3)


@nnx.jit
def forward(model, tokens_bt):
  return model(tokens_bt)


@nnx.jit
def forward_cached(model, tokens_bt, cache, valid_bt):
  out = model.forward(tokens_bt, cache=cache, valid_bt=valid_bt)
  return out.logits, out.cache


def full_forward_logprobs(model, sequences):
  """log_softmax(logits / T) of each token given the ones before it, by uncached passes over
  the sequences right-padded to a multiple of 1024 (the model is causal: padding is inert)."""
  out = [None] * len(sequences)
  by_length = {}
  for i, s in enumerate(sequences):
    by_length.setdefault(-(-len(s) // 1024) * 1024, []).append(i)
  for length, rows in by_length.items():
    tokens_bt = np.zeros((len(rows), length + 1), np.int32)
    for b, i in enumerate(rows):
      tokens_bt[b, : len(sequences[i])] = sequences[i]
    logits_btv = forward(model, jnp.asarray(tokens_bt[:, :-1]))
    logp_btv = jax.nn.log_softmax(logits_btv.astype(jnp.float32) / TEMPERATURE, axis=-1)
    next_bt1 = jnp.asarray(tokens_bt[:, 1:, None])
    logp_bt = np.asarray(jnp.take_along_axis(logp_btv, next_bt1, axis=-1)[..., 0])
    for b, i in enumerate(rows):
      out[i] = np.concatenate([[0.0], logp_bt[b, : len(sequences[i]) - 1]])
  return out


# --- the model's cache takes multi-token appends ----------------------------------------------


@SLOW
def test_cached_chunk_appends_equal_the_full_forward_pass(model):
  """Rows of different lengths continue with chunks of different lengths (padding masked)."""
  rng = np.random.default_rng(0)
  tokens = rng.integers(0, model.config.vocab_size, size=(2, 48), dtype=np.int32)
  full = np.asarray(forward(model, jnp.asarray(tokens)))
  cache = Cache.zeros(model.config, 2, 64)
  done = np.zeros(2, np.int32)
  for counts in ([5, 16], [9, 1], [16, 12], [0, 7]):
    chunk = np.zeros((2, 16), np.int32)
    for b, n in enumerate(counts):
      chunk[b, :n] = tokens[b, done[b] : done[b] + n]
    valid = np.arange(16)[None, :] < np.asarray(counts)[:, None]
    logits, cache = forward_cached(model, jnp.asarray(chunk), cache, jnp.asarray(valid))
    for b, n in enumerate(counts):
      np.testing.assert_allclose(
        np.asarray(logits[b, :n]), full[b, done[b] : done[b] + n], atol=2e-4, rtol=1e-4
      )
    done += np.asarray(counts, np.int32)
  np.testing.assert_array_equal(np.asarray(cache.lengths_b), done)


@SLOW
def test_a_row_done_appending_keeps_its_cache_while_others_append_on(model, renderer):
  """Pieces of 64 that only row 1 still needs run on both rows (min_batch 2): row 0, with no ids
  left, writes 64 slots at its length each time. With the cache sized for the pieces' own ids
  (512 here) those writes ran past it and were clamped onto row 0's last real positions (the
  GRPO rollouts whose log-probs left the full forward pass by up to 27 nats)."""
  config = RolloutConfig(
    num_rollouts=1, max_turns=1, max_new_tokens_per_turn=8, max_total_tokens=1024
  )
  engine = RolloutEngine(model, renderer, config, append_chunk=64, min_batch=2)
  rng = np.random.default_rng(1)
  ids = [rng.integers(3, renderer.tokenizer.vocab_size, size=n).tolist() for n in (460, 520)]
  # Already in the cache: 440 and 320 ids; then row 0 appends 10 (one piece), row 1 190 (three,
  # ending at 320 + 3 x 64 = 512); then 10 more each, whose logits read every slot before them.
  split = [(440, 450), (320, 510)]
  rows = [
    SimpleNamespace(fed=0, pending=list(seq[:a])) for seq, (a, _) in zip(ids, split, strict=True)
  ]
  state = nnx.state(model)
  cache = Cache.zeros(model.config, 2, engine._cache_length(448))
  logits = jnp.zeros((2, model.config.vocab_size), jnp.float32)
  for stage in (0, 1, 2):
    for r, seq, (a, b) in zip(rows, ids, split, strict=True):
      r.pending = list(seq[[0, a, b][stage] : [a, b, len(seq)][stage]])
    cache, logits = engine._append_pending(state, cache, logits, rows)
  for b, seq in enumerate(ids):
    full = np.asarray(forward(model, jnp.asarray([seq])))[0, -1]
    np.testing.assert_allclose(
      np.asarray(logits[b]), full, atol=2e-4, rtol=1e-4, err_msg=f"row {b}"
    )


# --- the environment step, with a scripted policy ---------------------------------------------


@SLOW
def test_oracle_rollout_passes_and_its_sibling_fork_is_untouched(scripted_rollouts, played):
  oracle, idle = scripted_rollouts[0], scripted_rollouts[1]
  task = played[0]
  writes = len(oracle_writes(task))
  assert (oracle.group, oracle.index, idle.group, idle.index) == (0, 0, 0, 1)
  assert oracle.finished and oracle.turns == writes + 1
  assert oracle.tool_calls == writes and oracle.tool_errors == 0
  assert oracle.final_answer == (task.reference_answer or "Done.")
  assert oracle.criteria == [c.id for c in task.rubric]
  assert oracle.passed.all()
  # The same task's other fork saw none of the oracle's writes.
  fresh = task.verify(task.make_env(), idle.final_answer)
  np.testing.assert_array_equal(idle.passed, fresh.criteria)
  assert not idle.passed.all()
  assert idle.finished and idle.turns == 1 and idle.tool_calls == 0


@SLOW
def test_tool_envelopes_are_those_of_the_env(scripted_rollouts, played):
  oracle = scripted_rollouts[0]
  env = played[0].make_env()
  tool_messages = [m for m in oracle.messages if m["role"] == "tool"]
  for c, message in zip(oracle_writes(played[0]), tool_messages, strict=True):
    assert json.loads(message["content"]) == env.call_tool(c.service, c.tool, c.arguments)


@SLOW
def test_malformed_and_unknown_calls_get_error_envelopes(scripted_rollouts):
  malformed, unknown = scripted_rollouts[2], scripted_rollouts[3]
  tool_messages = [m for m in malformed.messages if m["role"] == "tool"]
  first = json.loads(tool_messages[0]["content"])
  assert first["ok"] is False and first["error"]["type"] == "malformed_call"
  assert "not valid JSON" in first["error"]["message"]
  assert json.loads(tool_messages[1]["content"])["ok"] is True  # then list_services works
  assert (malformed.tool_calls, malformed.tool_errors, malformed.turns) == (2, 1, 3)
  assert malformed.finished and malformed.final_answer == "Finished."
  envelope = json.loads(next(m for m in unknown.messages if m["role"] == "tool")["content"])
  assert envelope == error(404, "unknown_tool", envelope["error"]["message"])
  assert (unknown.tool_calls, unknown.tool_errors) == (1, 1)


@SLOW
def test_tokens_are_the_rendered_conversation(scripted_rollouts, renderer):
  """Observation turns and headers are exactly the renderer's ids, with loss mask 0. (A turn
  that does not parse is recorded as the message it parses to, so rollout 2 is left out.)"""
  for ro in [scripted_rollouts[i] for i in (0, 1, 3)]:
    rendered = renderer.render(ro.messages)
    n = len(ro.tokens)
    np.testing.assert_array_equal(ro.tokens, rendered.ids[:n])
    np.testing.assert_array_equal(ro.loss_mask, rendered.loss_mask[:n].astype(bool))
  oracle = scripted_rollouts[0]
  # The first tool turn follows the first assistant turn's "<|im_end|>\n", then the next header.
  first_tool = next(i for i, m in enumerate(oracle.messages) if m["role"] == "tool")
  ids, mask = renderer.render_turn(oracle.messages[first_tool])
  prefix = len(renderer.render(oracle.messages[:first_tool]).ids)
  observation = list(ids) + renderer.generation_prompt
  np.testing.assert_array_equal(oracle.tokens[prefix : prefix + len(observation)], observation)
  assert not oracle.loss_mask[prefix : prefix + len(observation)].any() and not any(mask)
  assert "tool_response" in renderer.decode(ids)


@SLOW
def test_mask_is_exactly_the_generated_tokens(scripted_rollouts, sampled_rollouts, renderer):
  for ro in scripted_rollouts:
    n = len(ro.tokens)
    assert ro.tokens.dtype == np.int32 and ro.tokens.shape == (n,)
    assert ro.loss_mask.dtype == bool and ro.loss_mask.shape == (n,)
    assert ro.logprobs.dtype == np.float32 and ro.logprobs.shape == (n,)
    assert ro.loss_mask.sum() == ro.generated_tokens
    assert (ro.logprobs[~ro.loss_mask] == 0).all() and (ro.logprobs[ro.loss_mask] < 0).all()
    # Generated ids are exactly the assistant bodies the scripts emitted.
    generated = renderer.decode(ro.tokens[ro.loss_mask])
    assert generated.count(IM_END) == ro.turns
  for ro in sampled_rollouts:
    assert ro.loss_mask.sum() == ro.generated_tokens > 0
    assert (ro.logprobs[~ro.loss_mask] == 0).all()


@SLOW
def test_logprobs_equal_a_full_forward_pass(
  model, scripted_rollouts, sampled_rollouts, constrained_rollouts
):
  """The key property for GRPO: the sampling log-probs are those the trainer recomputes, also
  when a grammar masks what is sampled (the recorded log-probs are the unconstrained policy's)."""
  rollouts = scripted_rollouts + sampled_rollouts + constrained_rollouts
  for ro, expected in zip(
    rollouts, full_forward_logprobs(model, [r.tokens for r in rollouts]), strict=True
  ):
    np.testing.assert_allclose(ro.logprobs[ro.loss_mask], expected[ro.loss_mask], atol=1e-4)


@SLOW
def test_turn_budget_stops_a_rollout(model, renderer, script, played):
  engine = scripted_engine(model, renderer, script, max_turns=1)
  rollouts = engine.run(played, seed=0)
  oracle = rollouts[0]
  assert oracle.turns == 1 and not oracle.finished and oracle.final_answer is None
  assert oracle.tool_calls == 1  # the last turn's call still ran
  assert rollouts[1].finished  # a final answer in the first turn is within the budget


# --- real sampling ------------------------------------------------------------------------------


@SLOW
def test_same_seed_same_rollouts_other_seed_others(sampled_setup, sampled_rollouts):
  engine, tasks = sampled_setup
  again = engine.run(tasks, seed=3)
  for a, b in zip(sampled_rollouts, again, strict=True):
    np.testing.assert_array_equal(a.tokens, b.tokens)
    np.testing.assert_array_equal(a.logprobs, b.logprobs)
    assert a.messages == b.messages
  other = engine.run(tasks, seed=4)
  assert any(
    not np.array_equal(a.tokens, b.tokens) for a, b in zip(sampled_rollouts, other, strict=True)
  )
  # Rollouts of one group are not copies of each other.
  assert not np.array_equal(sampled_rollouts[0].tokens, sampled_rollouts[1].tokens)


@SLOW
def test_token_budgets_cut_generation(sampled_setup, sampled_rollouts, renderer):
  engine, _tasks = sampled_setup
  config = engine.config
  for ro in sampled_rollouts:
    assert len(ro.tokens) <= config.max_total_tokens
    ended = ro.tokens[-1] == renderer.im_end_id
    if ro.group == 0:  # the long prompt: the total budget leaves TOTAL_SLACK tokens
      assert ro.generated_tokens <= TOTAL_SLACK
      if not ended:
        assert len(ro.tokens) == config.max_total_tokens and not ro.finished
    elif not ended:  # the short prompt: cut by the per-turn budget
      assert ro.generated_tokens == PER_TURN and ro.turns == 1 and not ro.finished


@pytest.mark.parametrize("block", [128, 2, 3])
def test_inverse_cdf_sampling_follows_the_distribution(block):
  """Blocks of 2 and 3 split the 5 ids across blocks, one of them partly padding."""
  n = 20000
  probs = np.asarray([0.1, 0.2, 0.3, 0.4, 0.0])
  with np.errstate(divide="ignore"):
    z_bv = jnp.broadcast_to(jnp.log(jnp.asarray(probs, jnp.float32)), (n, 5))
  ids = np.asarray(categorical(jax.random.split(jax.random.key(0), n), z_bv, block))
  frequencies = np.bincount(ids, minlength=5) / n
  assert frequencies[4] == 0  # probability 0 (a filtered id) is never drawn
  np.testing.assert_allclose(frequencies, probs, atol=0.015)  # ~4 standard deviations


def test_inverse_cdf_never_draws_a_filtered_id_of_a_large_vocabulary():
  """Top-p leaves few ids with mass across a 1,000-id vocabulary (8 blocks of 128)."""
  z_bv = jax.random.normal(jax.random.key(1), (4096, 1000)) * 3
  z_bv = top_p_filter(z_bv, 0.5)
  ids = np.asarray(categorical(jax.random.split(jax.random.key(2), 4096), z_bv))
  assert np.isfinite(np.asarray(z_bv)[np.arange(4096), ids]).all()


def test_top_p_keeps_the_smallest_set_with_enough_mass():
  logits = jnp.log(jnp.asarray([[0.5, 0.3, 0.15, 0.05], [0.25, 0.25, 0.25, 0.25]]))
  kept = np.isfinite(np.asarray(top_p_filter(logits, 0.7)))
  np.testing.assert_array_equal(kept, [[True, True, False, False], [True, True, True, True]])
  assert np.isfinite(np.asarray(top_p_filter(logits, 0.5))).sum(axis=1).tolist() == [1, 4]


@SLOW
def test_bad_configs_are_errors(model, renderer, tasks):
  with pytest.raises(ValueError, match="temperature"):
    RolloutConfig(temperature=0.0)
  with pytest.raises(ValueError, match="top_p"):
    RolloutConfig(top_p=0.0)
  engine = RolloutEngine(model, renderer, RolloutConfig(max_total_tokens=100))
  with pytest.raises(ValueError, match="prompt is"):
    engine.run(tasks[:1], seed=0)


# --- constrained and grounded decoding (rl.decoding.modes) -------------------------------------------


def call_first_sampler(call_id: int, vocab: int):
  """Tempered sampling that opens a tool call whenever the constraint allows one, so an
  untrained model's turns are calls that the grammar has to carry through."""
  base = make_sampler(TEMPERATURE, 1.0, vocab)

  def sample(logits_bv, key_b, step, row_b, turn_b):
    return base(logits_bv.at[:, call_id].add(40.0), key_b, step, row_b, turn_b)

  return sample


@pytest.fixture(scope="module")
def constrained_setup(model, renderer, tasks):
  config = RolloutConfig(
    num_rollouts=2,
    max_turns=2,
    max_new_tokens_per_turn=80,
    max_total_tokens=8192,
    temperature=TEMPERATURE,
    constrained=True,
    grounded=True,
  )
  sampler = call_first_sampler(renderer.special_ids[TOOL_CALL], renderer.tokenizer.vocab_size)
  engine = RolloutEngine(model, renderer, config, sampler=sampler, append_chunk=64, min_batch=4)
  return engine, tasks[:2]


@pytest.fixture(scope="module")
def constrained_rollouts(constrained_setup):
  engine, tasks = constrained_setup
  return engine.run(tasks, seed=5)


@SLOW
def test_constrained_grounded_rollouts_call_only_what_the_episode_offers(
  constrained_rollouts, constrained_setup, renderer
):
  """An untrained policy, made to open calls: under the grammar every call parses, calls a
  meta-tool, names the episode's services and passes on strings copied from the conversation."""
  _engine, tasks = constrained_setup
  calls = 0
  for ro in constrained_rollouts:
    task = tasks[ro.group]
    seen = ""  # the conversation's text before each assistant turn
    for m in ro.messages:
      if m["role"] != "assistant":
        seen += json.dumps(m["content"]) + (m["content"] or "")
        continue
      for call in m.get("tool_calls") or []:
        calls += 1
        name = call["function"]["name"]
        arguments = json.loads(call["function"]["arguments"])  # parses: never malformed
        assert name in {"list_services", "list_tools", "describe_tool", "call_tool"}
        if "service" in arguments:
          assert arguments["service"] in {*task.services, *task.distractors}
        if name == "call_tool":
          for text in value_leaves(arguments.get("arguments", {})):
            if isinstance(text, str):
              assert text in seen, (text, task.id)
    envelopes = [json.loads(m["content"]) for m in ro.messages if m["role"] == "tool"]
    assert all(e.get("error", {}).get("type") != "malformed_call" for e in envelopes)
  assert calls >= len(constrained_rollouts)  # every rollout called something


@SLOW
def test_constrained_rollouts_repeat_with_their_seed(constrained_setup, constrained_rollouts):
  engine, tasks = constrained_setup
  again = engine.run(tasks, seed=5)
  for a, b in zip(constrained_rollouts, again, strict=True):
    np.testing.assert_array_equal(a.tokens, b.tokens)


def test_sample_turn_needs_mask_and_callback_together(model, renderer):
  with pytest.raises(ValueError, match="mask needs an advance callback"):
    from rl.grpo.rollout import sample_turn

    graphdef, state = nnx.split(model)
    cache = Cache.zeros(model.config, 1, 16)
    logits = jnp.zeros((1, model.config.vocab_size))
    one = jnp.ones((1,), jnp.int32)
    sample_turn(
      graphdef, state, cache, logits, one, one, one, jax.random.key(0), jnp.ones_like(logits, bool),
      sampler=make_sampler(1.0), steps=1, stop_id=renderer.im_end_id, temperature=1.0,
    )  # fmt: skip


def test_a_checked_proposal_is_a_draw_from_the_allowed_ids(model, renderer):
  """`sample_turn` with a `check`: each row draws from the proposal (ids 0-7), the check rejects
  ids 0-2 and hands back the allowed ones (3-7) for a second draw. The ids drawn follow the
  tempered softmax over the allowed ids alone, as one draw under the whole mask would."""
  from rl.grpo.rollout import sample_turn

  n, v = 4096, model.config.vocab_size
  graphdef, state = nnx.split(model)
  logits = np.full((n, v), -1e9, np.float32)
  logits[:, :8] = [2.0, 1.5, 1.0, 0.0, 0.5, 1.0, -0.5, 0.2]
  proposal = np.zeros((n, v), bool)
  proposal[:, :8] = True
  allowed = np.zeros((n, v), bool)
  allowed[:, 3:8] = True
  rejected = []

  def check(token_b, active_b, step):
    kept_b = np.asarray(token_b) >= 3
    rejected.append(int((~kept_b).sum()))
    return kept_b, np.where(kept_b[:, None], True, allowed)

  def advance(token_b, active_b, step):
    return np.ones((n, v), bool)

  budget = jnp.ones((n,), jnp.int32)
  ids, *_ = sample_turn(
    graphdef, state, Cache.zeros(model.config, n, 16), jnp.asarray(logits), budget,
    jnp.arange(n, dtype=jnp.int32), jnp.zeros((n,), jnp.int32), jax.random.key(3),
    jnp.asarray(proposal), sampler=make_sampler(TEMPERATURE), steps=1,
    stop_id=renderer.im_end_id, temperature=TEMPERATURE, advance=advance, check=check,
  )  # fmt: skip
  drawn = np.asarray(ids)[:, 0]
  assert rejected[0] > n // 2  # most first draws fell on ids 0-2 and were drawn again
  z = logits[0, 3:8] / TEMPERATURE
  want = np.exp(z - z.max()) / np.exp(z - z.max()).sum()
  frequencies = np.bincount(drawn, minlength=v)[:8] / n
  assert frequencies[:3].sum() == 0
  np.testing.assert_allclose(frequencies[3:8], want, atol=0.03)  # > 4 standard deviations
