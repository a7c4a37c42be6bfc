"""GRPO configs: ``configs/grpo.py:paper`` (the paper's stage two) and ``:tiny`` (CPU, minutes).

``tiny`` without ``--init`` first trains the tiny SFT policy (``configs/sft.py:tiny``) in
``WORKDIR/sft`` and takes its generated tasks: those of its training trajectories to train on,
those of its held-out trajectories to evaluate on.
"""

import ml_collections

from configs.sft import get_config as sft_config


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  variant = arg or "paper"
  if variant not in ("tiny", "cpu", "paper"):
    raise ValueError(f"unknown GRPO config variant {variant!r}; valid: tiny, cpu, paper")
  c = ml_collections.ConfigDict()
  c.variant = variant
  c.seed = 0  # task order and rollout sampling: step s plays with seed (seed, s)
  c.num_steps = 200  # GRPO steps (one rollout batch each)
  c.stop_after = 0  # stop after this many steps of this process without saving (preemption tests)
  c.log_every = 1  # steps between metric writes
  c.init = ""  # SFT workdir or policy directory to start from (rl.serve.policy.load_policy_parts)
  c.sft_config = ""  # with no init: train this configs/sft.py variant in WORKDIR/sft first
  # How the loaded policy computes in the update ("" = as it was trained; rl.serve.policy.RUNTIME_FIELDS);
  # its parameters stay as trained. remat="full" recomputes each block in the backward pass.
  c.model_overrides = ml_collections.ConfigDict({"remat": "", "moe_backend": "", "dtype": ""})

  c.data = ml_collections.ConfigDict()
  c.data.tasks = ""  # tasks.jsonl to train on; "" = the task set the init's SFT run generated
  c.data.eval_tasks = ""  # held-out tasks.jsonl; "" = num_eval_tasks held out / SFT's held-out
  c.data.num_eval_tasks = 16  # held out of data.tasks (by data.seed) when no eval file is given
  c.data.seed = 0  # the held-out split of data.tasks
  c.data.tasks_per_step = 16  # G; with N = 8, 128 trajectories per step (not stated in the paper)
  # Tasks played per step = oversample * G; the update keeps G groups, those whose rewards differ
  # first (DAPO's dynamic sampling; rl.grpo.batches.keep_groups). 1 = every sampled group trains.
  c.data.oversample = 1
  c.data.min_length = (
    256  # shortest padded batch length (rl.grpo.batches.bucket_length: few shapes)
  )
  # fewest loss-token positions per row the update runs the LM head at (K, a power of two above
  # the longest row's count): with min_length, a floor that keeps the update's shapes fixed
  c.data.min_loss_tokens = 32

  c.rollout = ml_collections.ConfigDict()  # rl.grpo.rollout.RolloutConfig
  c.rollout.num_rollouts = 8  # N per task (paper: 8)
  c.rollout.max_turns = 32  # assistant turns per rollout
  c.rollout.max_new_tokens_per_turn = 512
  c.rollout.max_total_tokens = 16384  # prompt + everything appended, per rollout
  c.rollout.temperature = 1.0  # the trainer's log-probs use the same temperature
  c.rollout.top_p = 1.0
  # Tool calls decoded under the tools' typed grammar / with the values passed on copied from the
  # conversation (rl.decoding.modes), in training rollouts and held-out evaluation alike; the trainer's
  # log-probs stay the unconstrained policy's
  c.rollout.constrained = False
  c.rollout.grounded = False
  c.rollout.narrated = False  # with constrained: a narrated call makes the call it names
  c.rollout.min_batch = 1  # the smallest batch a turn is played in, as rollouts finish

  c.reward = ml_collections.ConfigDict()
  c.reward.name = (
    "completion_focused"  # rl.grpo.rewards.REWARDS: completion_focused, uniform, binary
  )
  c.reward.lam = 0.01  # lambda of eq. 5 (completion_focused only)
  c.reward.delta = 1e-6  # delta of eq. 6
  # b_ij from the rubric (compoworld.tasks.rubric.COUPLINGS): independent = each criterion's own check
  # (eq. 5 as the paper defines it); gated = must-not credited only when every positive passes
  c.reward.coupling = "independent"

  c.loss = ml_collections.ConfigDict()  # rl.grpo.loss.GRPOLossConfig
  c.loss.eps_low = 0.20
  c.loss.eps_high = 0.28
  c.loss.aggregation = "seq-mean-token-mean"  # eq. 8; or token-mean, seq-mean-token-sum
  c.loss.kl_coef = 0.0  # > 0 keeps a frozen reference policy (k3 estimator)
  c.loss.entropy_coef = 0.0

  c.optim = ml_collections.ConfigDict()
  c.optim.lr = 1e-5  # paper: Adam, 1e-5, constant
  c.optim.b1 = 0.9
  c.optim.b2 = 0.999
  c.optim.eps = 1e-8
  c.optim.weight_decay = 0.0
  c.optim.clip_norm = 1.0  # global gradient norm; 0 = no clipping
  c.optim.num_minibatches = 1  # optimizer steps per rollout batch, on disjoint row subsets
  c.optim.aux_loss = True  # add the model's MoE load-balancing loss (router_aux_loss_coef)
  c.optim.head_chunk = 256  # loss tokens per row through the LM head at once; 0 = all at once
  # Rows through the loss at a time, their gradients added up before the optimizer step
  # (rl.grpo.update.MicroStep): one compiled update for every batch size, one chunk's
  # activations in memory. 0 = a minibatch's rows at once.
  c.optim.micro_rows = 0
  # Skip the update of a step in which no group has a reward spread: every advantage is 0, so
  # without a KL or entropy term it would train only the MoE aux loss (DAPO drops such groups).
  c.optim.skip_without_signal = False
  # Run the update on the groups with a reward spread alone (filled with zero-advantage groups
  # to a power of two; rl.grpo.batches.signal_rows), their advantages scaled so the policy-
  # gradient term is the whole batch's. Without a KL or entropy term and with one minibatch
  # only; the MoE aux loss then sees the kept rows alone.
  c.optim.signal_groups_only = False

  c.eval = ml_collections.ConfigDict()
  c.eval.every = 0  # steps between held-out evaluations (also before training and at the end)
  c.eval.num_tasks = 0  # held-out tasks evaluated; 0 = all
  c.eval.num_rollouts = 1  # per task
  c.eval.temperature = 0.0  # 0 = greedy
  c.eval.seed = 0

  c.mesh = sft_config().mesh  # SFT's: data / fsdp / tensor / expert sizes, one may be -1

  c.checkpoint = ml_collections.ConfigDict()
  c.checkpoint.every = 20  # steps between checkpoints (and one at the end)
  c.checkpoint.keep = 3  # most recent checkpoints kept

  if variant == "cpu":
    # GRPO on the CPU learning regime's SFT policy (configs/sft.py:cpu): short single-service
    # tasks, 8 rollouts each, sampled at temperature 1 so that a group's rewards differ.
    c.sft_config = "cpu"
    c.num_steps = 12
    c.data.tasks_per_step = 4
    c.data.num_eval_tasks = 16
    # Every batch padded to the rollouts' 2,048-token budget with the head at 1,024 loss positions
    # (no row of the demo's 4 steps wrote more): one shape, compiled once. With the floors at 512
    # and 32 the shapes could change from step to step, and compiling a new one took 8-27 s.
    c.data.min_length = 2048
    c.data.min_loss_tokens = 1024
    c.rollout.num_rollouts = 8
    c.rollout.max_turns = 8
    c.rollout.max_new_tokens_per_turn = 160
    c.rollout.max_total_tokens = 2048
    # Turns played in batches of at least 8 rows: 4 steps of the demo sampled in 157 s against
    # 189 s with batches down to 1 (fewer programs to compile, each about as fast).
    c.rollout.min_batch = 8
    c.optim.lr = 2e-5
    # 32 rollouts of up to 2K tokens: without recomputing each block in the backward pass and
    # with the whole [B, K, V] head at once the update peaked at 17.8 GB (killed at 19.9 GB
    # beside other work); with both, 8.5 GB
    c.model_overrides.remat = "full"
    c.optim.head_chunk = 256
    # Rollouts under the typed grammar with grounded values, as the demo's second evaluation
    # decodes: from the 900-step CPU policy, 4 x 8 rollouts a step on the training tasks, groups
    # with a reward spread 0.50 / 0.25 / 0.00 over 3 steps against 0 / 0 / 0 decoding freely
    c.rollout.constrained = True
    c.rollout.grounded = True
    # The batch-8 demo policy had no group with a spread at 2 of its 4 steps: 25 s of update each.
    c.optim.skip_without_signal = True
    c.optim.signal_groups_only = True
    # Updates of 8, 16 or 32 rows (signal_groups_only) in chunks of 8: one compiled program for
    # all three. The demo's 4 steps (same rollouts, same gradient norms): updates 61.5 -> 39.9 s,
    # peak memory 15.0 -> 5.2 GB.
    c.optim.micro_rows = 8
    c.eval.every = 0  # before training and at the end
    c.eval.num_tasks = 0
    c.checkpoint.every = 4
  if variant == "tiny":
    c.sft_config = "tiny"
    c.num_steps = 4
    c.data.tasks_per_step = 2
    c.data.num_eval_tasks = 4
    c.data.min_length = 128
    c.rollout.num_rollouts = 4
    c.rollout.max_turns = 3
    c.rollout.max_new_tokens_per_turn = 48
    c.rollout.max_total_tokens = 2048
    c.optim.lr = 1e-4  # the tiny policy moves visibly in a few steps
    c.optim.head_chunk = 0  # a 2K vocabulary: [B, K, V] is small
    c.eval.every = 2
    c.eval.num_tasks = 4
    c.checkpoint.every = 2
  return c
