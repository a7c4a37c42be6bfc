"""The paper's experiments: ``configs/experiments.py:env_scaling``, ``:single_vs_composed`` and
``:reweighting``; ``:<name>_test`` runs each in a few minutes (the scripts' end-to-end check).

Defaults run the CPU learning regime's recipe (configs/sft.py:cpu) on the tasks each question
needs, sized for about an hour per seed on 2 CPU cores: ``env_scaling`` (K = 1, services as the
compositions) took 27-34 min a seed on 2026-12-05 (``--config.budget=epochs``: 84 min for three
seeds; 17-19 min a seed on 2026-12-06, with rows packed over 256 open ones),
``single_vs_composed`` (K = 2 vs K = 1, 4K rows) 41 min for seed 0 alone on 2026-12-07, 61
and 72 min for seeds 1 and 2 beside other runs; ``reweighting`` 11-13 min a seed from a given SFT policy (8-9 min with the
update in chunks of 8 rows, 2026-12-06; 6 GRPO steps of
2 x 8 rollouts per reward, README; 29 min a seed for 12 steps of 4 x 8 rollouts and two
rewards, 2026-12-07). On an accelerator scale them up by flag, e.g.
``--config.sizes=100,500,1000,3000 --config.tasks.num_tasks=8000`` (the paper's sizes) with
``--config.sft.model.name=small --config.sft.data.seq_len=4096`` and so on for the recipe.
"""

import ml_collections

from configs import demo

EXPERIMENTS = ("env_scaling", "single_vs_composed", "reweighting")


def _composed_regime(c: ml_collections.ConfigDict) -> None:
  """The CPU regime's recipe (configs/sft.py:cpu) on composed tasks: K = 2 tasks (walks of 3
  calls over ~80 service pairs) held out by pair (pairs whose facets and tools other pairs
  show: compoworld.tasks.splits), every training task spread round-robin over
  the pairs, 4K-token rows (the trajectories run to ~2.3K tokens, twice the K = 1 ones) and one
  tokenizer per seed; held-out tasks decoded under the typed grammar with grounded strings.
  ``c`` holds configs/demo.py:tiny's trajectories and SFT recipe."""
  c.sft.data.seq_len = 4096
  c.sft.data.batch_size = 2  # the same 8K tokens a step as the regime's 4 x 2,048
  c.sft.data.num_epochs = 1
  c.tasks.num_services = 2
  c.tasks.min_walk = c.tasks.max_walk = 2  # K = 2 walks come out 3 calls long
  c.tasks.num_distractors = 0
  c.tasks.num_tasks = 3000
  c.split.eval_fraction = 0.1  # of the service pairs
  c.one_per_composition = False
  c.tokenizer_trajectories = 2000
  c.eval.max_context = 4096
  c.eval.max_turns = 16
  c.eval.max_tasks = 60
  c.eval.decoding = "constrained+grounded"


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  arg = arg or "env_scaling"
  name, test = arg.removesuffix("_test"), arg.endswith("_test")
  if name not in EXPERIMENTS:
    raise ValueError(f"unknown experiment {arg!r}; valid: {', '.join(EXPERIMENTS)} (+ _test)")
  base = demo.get_config("test" if test else "tiny")
  c = ml_collections.ConfigDict()
  c.experiment = name
  c.tasks = base.tasks  # generation: K, walk lengths, distractors (num_tasks per arm and seed)
  c.split = base.split
  c.split.mode = "composition"  # held-out service sets (every arm's tasks have K >= 2)
  c.trajectories = base.trajectories  # the oracle's discovery calls, as the recipe's
  c.eval = base.eval  # the checkpoint agent on the held-out tasks
  c.eval.max_tasks = 16  # held-out tasks evaluated (the first of the split)
  c.sft = base.sft  # the recipe, the same for every arm (configs/sft.py:tiny)

  if name == "env_scaling" and not test:
    # The CPU regime's tasks and recipe (configs/demo.py:tiny): K = 1, L = 2, 2K rows, batch 4.
    # With K = 1 the compositions are the services: a size-n arm trains on the tasks of n of
    # them, every arm is scored on the same held-out instances of all of them
    # (rl.pipeline.sft_experiments.service_scaling).
    c.split.mode = "instances"
    c.split.eval_fraction = 0.01  # 60 of 6,000 tasks held out
    c.eval.max_context = c.sft.data.seq_len
    c.eval.max_turns = 12  # the oracle needs ~4
    c.eval.max_tasks = 60
    c.eval.decoding = "constrained+grounded"  # rl.decoding.modes.DECODINGS
    c.sizes = (3, 10, 30)  # services trained on (of 30 with K = 1 tasks)
    # "steps": every arm `steps` optimizer steps (equal training length, the smaller arms
    # repeating their tasks); "epochs": one epoch over each arm's tasks (~200 a service).
    c.budget = "steps"
    c.steps = 600
    c.tokenizer_trajectories = 2000  # the shared tokenizer's training text
  elif name == "env_scaling":
    # Each trajectory from a distinct composition: K = 3 gives ~155 distinct service sets in 200
    # tasks (K = 2 saturates near 80), enough for the largest size after the held-out split.
    c.sizes = (16, 32, 64, 128)  # trajectories trained on (paper: 100, 500, 1K, 3K)
    c.tasks.num_services = 3
    c.tasks.min_walk = 4
    c.tasks.max_walk = 5
    c.tasks.num_tasks = 240
    c.split.eval_fraction = 0.1
  elif name == "single_vs_composed" and not test:
    # The composed arm as _composed_regime; the single arm: K = 1 tasks (walks of 2 calls) of the
    # services the composed arm trains on, held out by instance. Both arms are scored on both
    # held-out sets.
    _composed_regime(c)
    c.single_k = 1
    c.held_out_single = True
    c.single_tasks = 3000
    c.single_eval_fraction = 0.03
    c.budget = 2000  # trajectories per arm
    # > 0: a third arm, "mixed": the same budget, this share of it the composed arm's trajectories
    # and the rest the single arm's (e.g. 0.5), scored on all three held-out sets; added to
    # seeds saved before (rl.pipeline.sft_experiments.single_vs_composed). 0: no mixed arm.
    c.mixed_share = 0.0
    # An oracle discovery setting other than the recipe's ("none"), e.g. "services": another
    # arm, "discovery", trains on the composed arm's tasks played with those calls (one
    # list_services first: the episode's services stand in the context) and is scored as the
    # others; added to seeds saved before. "": no such arm.
    c.discovery_arm = ""
    # "sentence": another arm, "quote", trains on the composed arm's tasks played by an oracle
    # that quotes each sentence of the request before its first call for it (OracleAgent
    # quote), scored as the others; "bare": an arm "quote_bare" whose quotes leave out the
    # connective drawn at random to open a sentence ("With that, post ..." -> "post ...");
    # "sentence,bare": both. Added to seeds saved before. "": no such arm.
    c.quote_arm = ""
  elif name == "single_vs_composed":
    # The "single" arm trains on single-service tasks (K = 1 walks: every step in one service,
    # with that service as its own revisit bridge where it can be; compoworld/tasks/walks.py), the
    # same walk lengths and distractors, spread round-robin over the ~30 services; set
    # --config.single_k=2 for the least composed eq. 3 tasks instead.
    c.single_k = 1  # K of the "single" arm's tasks
    c.budget = 48  # trajectories per arm
    c.tasks.num_services = 4  # K of the composed arm and of the held-out tasks
    c.tasks.min_walk = 5
    c.tasks.max_walk = 6
    c.tasks.num_tasks = 200  # per arm: 48 distinct K = 4 service sets after the held-out split
    c.split.eval_fraction = 0.1
  else:
    c.rewards = ("completion_focused", "uniform", "binary")  # rl.grpo.rewards names, one arm each
    c.grpo = base.grpo  # configs/grpo.py:cpu (tiny when _test); init is each seed's SFT policy
    c.tasks.num_services = 2  # held-out service sets need K >= 2
    c.tasks.min_walk = c.tasks.max_walk = 3
    c.grpo.num_steps = 20  # GRPO steps per arm
    c.eval_every = 5  # GRPO steps between held-out evaluations (rollout engine, greedy)
    if not test:
      # Rewards differ only on tasks of several criteria: the K = 2 tasks of _composed_regime
      # (2-3 criteria each), an SFT policy per seed on 2,000 of their trajectories, then GRPO
      # (configs/grpo.py:cpu) with 4K-token rollouts, held out by service pair.
      _composed_regime(c)
      c.sft_trajectories = 2000
      c.grpo.rollout.max_total_tokens = 4096
      c.grpo.rollout.max_turns = 12  # the composed oracle needs ~8
      c.grpo.data.min_length = 4096
      c.grpo.num_steps = 10
      c.grpo.eval.num_tasks = 16
    # A trained SFT policy to start every seed's arms from (its workdir or policy directory),
    # with the task files to train and evaluate on, instead of each seed's own data and SFT run:
    # the seeds then vary the task order and the rollouts' sampling.
    c.init = ""
    c.train_tasks = ""  # tasks.jsonl (required with init)
    c.eval_tasks = ""  # held-out tasks.jsonl (required with init)
    # With init: keep the tasks of at least this many rubric criteria (of both files); on a task
    # of one criterion the three rewards are the same number. 0 = every task.
    c.min_criteria = 0

  if test:  # demo.py:test's SFT and evaluation, a few tasks
    c.tasks.num_tasks = 40
    c.eval.max_tasks = 2
    if name == "env_scaling":
      c.sizes = (4, 8)
      c.tasks.num_tasks = 24
      c.split.eval_fraction = 0.15
    elif name == "single_vs_composed":
      c.budget = 4
      c.tasks.num_tasks = 16
      c.split.eval_fraction = 0.2
    else:
      c.eval_every = 1
      c.grpo.num_steps = 2
  return c
