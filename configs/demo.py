"""The whole pipeline (``make demo``): ``configs/demo.py:tiny`` (default: the CPU learning
regime, ``configs/sft.py:cpu`` and ``configs/grpo.py:cpu``, on single-service tasks held out by
instance), ``:composed`` (the same regime on two-service tasks held out by composition) and
``:test`` (a few minutes: the pipeline's end-to-end test).

The SFT and GRPO stages carry their own configs as ``sft`` and ``grpo``; the pipeline points them
at the data it generates, so any of their fields can be set from the command line
(``--config.sft.max_steps=200``).
"""

import importlib.util

import ml_collections

from configs import sft


def _grpo_config(variant: str) -> ml_collections.ConfigDict:
  # configs/grpo.py may be absent from a checkout that has no GRPO trainer yet: then the GRPO
  # stage says so when it runs, and every other stage still works.
  if importlib.util.find_spec("configs.grpo") is None:
    return ml_collections.ConfigDict({"missing": True})
  from configs import grpo

  return grpo.get_config(variant)


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  variant = arg or "tiny"
  if variant not in ("tiny", "composed", "test"):
    raise ValueError(f"unknown demo config variant {variant!r}; valid: tiny, composed, test")
  c = ml_collections.ConfigDict()
  c.variant = variant
  c.seed = 0  # tasks, split and policy sampling
  # Keep compiled programs in WORKDIR/jax_cache (rl.compile_cache): each policy evaluated, and
  # each decoding, loads the prefill and decode programs the first one compiled.
  c.compilation_cache = variant != "test"

  c.library = ml_collections.ConfigDict()
  c.library.specs = ""  # an MCP spec corpus; "" = the hand-written services' own exported specs
  c.library.workers = 1  # processes compiling services
  # Compose the compiled services into the generated tasks too (beside the hand-written ones).
  # Off by default: without a corpus the compiled services are copies of the hand-written ones.
  c.library.compose = False

  regime = "tiny" if variant == "test" else "cpu"
  c.sft = sft.get_config(regime)  # data.trajectories is set to the generated train split
  c.grpo = _grpo_config(regime)  # init and tasks are set to the SFT policy and the train split

  # Tasks as the tiny SFT recipe is sized for (K, walk lengths, distractors), more of them: the
  # held-out split needs service sets to spare.
  g = c.sft.generate
  c.tasks = ml_collections.ConfigDict()
  # Task indices generated (every index yields a K = 1 task): 5,643 training tasks, one epoch of
  # their oracle trajectories (~6.2 a step of 4 x 2,048 tokens, packed over 256 open rows) is
  # 911 SFT steps; the whole demo took 16.7 min on 2 cores (README, "Demo"), 24.7 min on a
  # slower machine with 4 open rows (1,035 steps) and one evaluation worker.
  c.tasks.num_tasks = 5700
  c.tasks.num_services = g.num_services  # K
  c.tasks.min_walk = g.min_walk  # walk length L bounds
  c.tasks.max_walk = g.max_walk
  c.tasks.num_distractors = g.num_distractors
  c.tasks.workers = 2  # processes generating tasks

  c.split = ml_collections.ConfigDict()
  # What is held out (compoworld.tasks.splits): K = 1 tasks by instance (a service set cannot be held
  # out without hiding its one service), K >= 2 tasks by service set.
  c.split.mode = "instances" if g.num_services == 1 else "composition"
  c.split.eval_fraction = 0.01  # share of the tasks held out of training (57 of 5,700)

  c.trajectories = ml_collections.ConfigDict()
  c.trajectories.max_turns = 128  # the oracle's turn budget
  c.trajectories.discovery = g.discovery  # the oracle's discovery calls, as the SFT recipe's
  c.trajectories.narrate = g.narrate  # a sentence naming each call before it
  c.trajectories.reads = g.reads  # every read of the reference solution, or the needed ones
  # Share of training tasks with a wrong read first (compoworld.agents.detours); held out: none.
  c.trajectories.detours = g.detours

  c.eval = ml_collections.ConfigDict()  # the checkpoint agent on the held-out tasks
  c.eval.samples = 1  # k samples per task
  c.eval.max_turns = 16  # assistant turns before an episode is cut (the oracle needs ~5)
  c.eval.max_new_tokens = 128  # tokens per assistant turn
  c.eval.max_context = c.sft.data.seq_len  # prompt + generated, as trained; when full: episode ends
  c.eval.temperature = 0.0  # greedy
  # Processes playing the held-out tasks: spawned ones, each loading the policy through the
  # compilation cache, since this process has JAX running (compoworld.agents.evaluation.evaluate).
  c.eval.workers = 1 if variant == "test" else 2
  # Each policy is scored decoding freely and under the typed grammar with grounded strings
  # (rl.pipeline.run.DECODINGS: "free", "constrained", "grounded", "constrained+grounded").
  c.eval.decodings = ("free", "constrained+grounded")
  if variant != "test" and not c.grpo.get("missing"):
    c.grpo.num_steps = 4  # 17-44 s a step of 4 x 8 rollouts on 2 cores: 2.2 min of the demo

  if variant == "composed":
    c.tasks.num_services = 2
    c.tasks.min_walk = c.tasks.max_walk = 3
    c.split.mode = "composition"
    c.split.eval_fraction = 0.05
    c.sft.data.seq_len = 4096  # oracle trajectories of ~3-4K tokens
    c.sft.data.batch_size = 4
    c.eval.max_context = 4096
    c.eval.max_turns = 32
  if variant == "test":
    c.tasks.num_tasks = 32
    c.split.mode = "composition"
    c.split.eval_fraction = 0.1
    c.eval.max_turns = 2
    c.eval.max_new_tokens = 8
    c.eval.max_context = 2048
    c.sft.max_steps = 2
    c.sft.data.batch_size = 2
    c.sft.data.seq_len = 2048
    c.sft.tokenizer.vocab_size = 1024
    c.sft.eval_every = 2
    c.sft.checkpoint.every = 2
    if not c.grpo.get("missing"):
      c.grpo.num_steps = 2
      c.grpo.data.tasks_per_step = 1
      c.grpo.rollout.num_rollouts = 2
      c.grpo.rollout.max_turns = 2
      c.grpo.rollout.max_new_tokens_per_turn = 8
      c.grpo.eval.every = 2
      c.grpo.eval.num_tasks = 2
      c.grpo.checkpoint.every = 2
  return c
