"""The whole pipeline (``make demo``): ``configs/demo.py:tiny`` (default; 8 min of CPU time when
measured) and ``:test`` (a few minutes: the pipeline's end-to-end test).

The SFT and GRPO stages carry their own configs (``configs/sft.py:tiny``, ``configs/grpo.py:tiny``)
as ``sft`` and ``grpo``; the pipeline points them at the data it generates, so any of their fields
can be set from the command line (``--config.sft.data.num_epochs=1``).
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
  if variant not in ("tiny", "test"):
    raise ValueError(f"unknown demo config variant {variant!r}; valid: tiny, test")
  c = ml_collections.ConfigDict()
  c.variant = variant
  c.seed = 0  # tasks, split and policy sampling

  c.library = ml_collections.ConfigDict()
  c.library.specs = ""  # an MCP spec corpus; "" = the hand-written services' own exported specs
  c.library.workers = 1  # processes compiling services
  # Compose the compiled services into the generated tasks too (beside the hand-written ones).
  # Off by default: without a corpus the compiled services are copies of the hand-written ones.
  c.library.compose = False

  c.sft = sft.get_config("tiny")  # data.trajectories is set to the generated train split
  c.grpo = _grpo_config("tiny")  # init and tasks are set to the SFT policy and the train split

  # Tasks as the tiny SFT recipe is sized for (K, walk lengths, distractors), more of them: the
  # held-out split needs service sets to spare.
  g = c.sft.generate
  c.tasks = ml_collections.ConfigDict()
  c.tasks.num_tasks = 112  # task indices generated (nearly every index yields a task)
  c.tasks.num_services = g.num_services  # K
  c.tasks.min_walk = g.min_walk  # walk length L bounds
  c.tasks.max_walk = g.max_walk
  c.tasks.num_distractors = g.num_distractors
  c.tasks.workers = 1  # processes generating tasks

  c.split = ml_collections.ConfigDict()
  c.split.eval_fraction = 0.12  # share of tasks whose service set is held out of training

  c.trajectories = ml_collections.ConfigDict()
  c.trajectories.max_turns = 128  # the oracle's turn budget

  c.eval = ml_collections.ConfigDict()  # the checkpoint agent on the held-out tasks
  c.eval.samples = 1  # k samples per task
  c.eval.max_turns = 32  # assistant turns before an episode is cut (the oracle needs ~21)
  c.eval.max_new_tokens = 128  # tokens per assistant turn
  c.eval.max_context = c.sft.data.seq_len  # prompt + generated, as trained; when full: episode ends
  c.eval.temperature = 0.0  # greedy

  if variant == "test":
    c.tasks.num_tasks = 32
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
