"""SFT configs: ``configs/sft.py:paper`` (the paper's stage one), ``:small`` and ``:tiny`` (CPU).

``tiny`` with no ``data.trajectories`` generates a small task set (two services, walks of three
calls, no distractors) and its oracle trajectories in ``WORKDIR/data`` and trains a tiny model on
8K-token rows, which hold most of those trajectories whole, on the CPU in a few minutes.
"""

import ml_collections


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  variant = arg or "paper"
  if variant not in ("tiny", "cpu", "small", "paper"):
    raise ValueError(f"unknown SFT config variant {variant!r}; valid: tiny, cpu, small, paper")
  c = ml_collections.ConfigDict()
  c.variant = variant
  c.seed = 0  # model initialisation
  c.max_steps = 0  # optimizer steps; 0 = every batch of data.num_epochs epochs
  c.stop_after = 0  # stop after this many steps of this process without saving (preemption tests)
  c.log_every = 10  # steps between metric writes (eval steps are always written)
  c.eval_every = 100  # steps between held-out evaluations (and at the end)

  c.model = ml_collections.ConfigDict()
  c.model.name = "qwen3_5_35b_a3b"  # models.CONFIGS key; vocab_size follows the tokenizer
  c.model.overrides = ml_collections.ConfigDict()  # ModelConfig fields to replace
  c.model.init_from = ""  # a transformers qwen3_5_moe directory to start from (from_pretrained)

  c.tokenizer = ml_collections.ConfigDict()
  c.tokenizer.path = ""  # dir of a tokenizer.model/.json; "" = the workdir's, else train one
  c.tokenizer.vocab_size = 8192  # when a tokenizer is trained here
  # The chat format's system turn (rl.data.tokenizer.CHAT_SYSTEMS), saved beside the tokenizer:
  # "full" (system prompt and tool schemas, Qwen's template) or "brief" (one line).
  c.tokenizer.chat_system = "full"
  # How tool replies are written (rl.data.tokenizer.CHAT_REPLIES): "as_sent" (the service's JSON)
  # or "ids_last" (each object's id keys after its other keys, so the id follows the fields that
  # pick the record out), saved beside the tokenizer as the system format is.
  c.tokenizer.chat_replies = "as_sent"

  c.data = ml_collections.ConfigDict()
  c.data.trajectories = ""  # sft.jsonl (v = 1 trajectories); "" = generate (see `generate`)
  c.data.eval_trajectories = ""  # held-out trajectories; "" = take eval_fraction of the above
  c.data.eval_fraction = 0.05  # share of the trajectories held out when no eval file is given
  c.data.seq_len = 16384  # tokens per packed row
  c.data.batch_size = 32  # global batch in rows (paper: 32)
  c.data.num_epochs = 3  # paper: three epochs
  c.data.num_packing_bins = 0  # rows packed at once (first fit); 0 = batch_size
  # Shards the trajectories are dealt into, each packed on its own, every batch B / S rows of
  # each (rl.sft.trainer.data_shards); a process loads only its own shards. 0 = one per process. Runs
  # with the same S see the same batches whatever their number of processes.
  c.data.num_shards = 0
  c.data.overlong = "truncate"  # or "drop": trajectories longer than a row
  c.data.seed = 0  # shuffling of trajectories and packed rows, and the held-out split
  # Loss weight of the tokens the assistant does not write (system, user and tool turns), next
  # to the assistant's 1; 0 = the paper's SFT. Reported losses are the assistant tokens' alone.
  c.data.context_loss_weight = 0.0
  # Weight added on the tokens of the argument values the assistant's calls pass on (next to 1
  # on every assistant token; rl.decoding.arguments.value_tokens): where a small policy copies
  # wrong. 0 = the paper's SFT.
  c.data.value_loss_weight = 0.0
  # With a copy head (models.copy_head): the weight of those value tokens' NLL under the pointer
  # path alone, -log(g copy), where the value stands earlier in the row, so the pointer, not
  # the LM head's memory, learns the copies (rl.sft.steps._losses). 0 = off.
  c.data.pointer_loss_weight = 0.0
  # Positions per row at which the LM head and the copy head's queries run in training (the
  # loss positions, gathered; rl.sft.steps._losses): 0 = every position, -1 = the most loss
  # tokens a row of the first epoch holds, rounded up to 128. A batch with a fuller row takes a
  # step over every position, so nothing is lost either way.
  c.data.loss_positions = 0

  c.generate = ml_collections.ConfigDict()  # used only when data.trajectories is ""
  c.generate.num_tasks = 3000  # paper: 3K verified trajectories
  c.generate.seed = 0
  c.generate.num_services = 5  # K
  c.generate.min_walk = 7  # walk length L bounds
  c.generate.max_walk = 12
  c.generate.num_distractors = 5
  c.generate.workers = 1  # processes generating tasks
  # The oracle's discovery calls (compoworld.agents.agent.OracleAgent): full, services or none.
  c.generate.discovery = "full"
  # Whether the oracle names each call in a sentence before it ("Now I'll call T on S.").
  c.generate.narrate = True
  # Which reads of the reference solution the oracle plays: "all", or "needed" (those whose
  # replies a later call or the answer needs; compoworld.tasks.task.needed_calls).
  c.generate.reads = "all"
  # Share of tasks on which the oracle first plays one read with a wrong value that finds
  # nothing, then the right one; the wrong turn is not trained on (compoworld.agents.detours).
  c.generate.detours = 0.0

  c.optim = ml_collections.ConfigDict()
  c.optim.lr = 1e-4  # paper: 1e-4
  c.optim.min_lr_ratio = 0.1  # cosine decays to lr * min_lr_ratio
  c.optim.warmup_steps = -1  # -1 = warmup_ratio of the run
  c.optim.warmup_ratio = 0.03
  c.optim.weight_decay = 0.01
  c.optim.b1 = 0.9
  c.optim.b2 = 0.95
  c.optim.eps = 1e-8
  c.optim.clip_norm = 1.0  # global gradient norm
  c.optim.grad_accum = 1  # micro-batches per step (batch_size must be a multiple)

  c.mesh = ml_collections.ConfigDict()  # one size may be -1: the remaining devices
  c.mesh.data = 1
  c.mesh.fsdp = -1
  c.mesh.tensor = 1
  c.mesh.expert = 1

  # A copy stage before SFT (rl.sft.copying): periodic rows of random ids, the copied block doubling
  # from min_repeat up to max_repeat ids whenever a step's accuracy reaches advance_at, with its
  # own AdamW schedule; 0 steps = none.
  c.copy = ml_collections.ConfigDict()
  c.copy.steps = 0
  c.copy.batch_size = 16
  c.copy.seq_len = 512
  c.copy.min_repeat = 16
  c.copy.max_repeat = 256
  c.copy.advance_at = 0.9
  c.copy.lr = 3e-3
  c.copy.warmup_steps = 20
  c.copy.seed = 0
  c.copy.log_every = 10

  c.checkpoint = ml_collections.ConfigDict()
  c.checkpoint.every = 200  # steps between checkpoints (and one at the end)
  c.checkpoint.keep = 3  # most recent checkpoints kept

  if variant == "small":
    c.model.name = "small"
    c.model.overrides = ml_collections.ConfigDict({"moe_backend": "sort"})
    c.data.seq_len = 4096
    c.data.batch_size = 8
    c.optim.lr = 1e-3
    c.generate.num_tasks = 500
  elif variant == "cpu":
    # The CPU learning regime (README, "A policy that learns on a CPU"): a model with enough
    # attention to copy ids and values out of tool replies, trained on thousands of short
    # single-service tasks whose oracle calls the tools without discovery.
    c.model.name = "tiny"
    c.model.overrides = ml_collections.ConfigDict(
      {
        # One layer: 1.35 s a step of 8 x 2,048 tokens in training; two layers took 3.38 s on
        # rows of the regime, also scoring the loss positions (measured apart). Per step it
        # learns as fast: at 500 steps held-out turn match
        # 0.467 (two layers 0.486), pass rate 0.12 constrained + grounded (0.12), 0.04 free
        # (0.08); at 1,000 steps on 14,000 tasks (22.6 min) 0.20 both ways (README, "One layer").
        "num_layers": 1,
        "full_attention_interval": 1,
        "d_model": 128,
        "head_dim": 32,
        "num_heads": 4,
        "num_kv_heads": 2,
        # Tied embeddings and rotary on the whole head: the copy probe learns to copy with both
        # (accuracy 0.98 in 200 steps), slowly with tying alone (0.12), not at all without tying
        # (README, "In-context copying alone").
        "partial_rotary_factor": 1.0,
        "tie_embeddings": True,
        "linear_key_head_dim": 32,
        "linear_value_head_dim": 32,
        "expert_dim": 128,
        "shared_expert_dim": 128,
        "deltanet_chunk": 64,
        "moe_backend": "sort",
        # A pointer into the context beside the LM head (models.copy_head), and its bonus for
        # keys whose tokens match the query's (induction as a prior): at 600 steps held-out turn
        # match 0.516 (0.211 without the head), pass rate constrained + grounded 0.10 (0.02)
        # (README, "The copy head with a match bonus").
        "copy_head": True,
        "copy_head_match": True,
        # Runs of 3..R matching tokens as a further bonus (models.copy_head); 0 = none.
        "copy_head_match_run": 0,
        # Copy a word in either token form, with or without its leading space (models.copy_head):
        # a name of the instruction is "▁Isla", after a JSON quote "Isla". On the demo's data,
        # copy starts right 0.94 (0.83 without), held-out pass rate c + g 20 of 57 (16), on 200
        # seed-1 tasks 0.275 (0.26) (README, "Copying a word in either form").
        "copy_head_forms": True,
        # A learnt gate on the match bonus at each query (models.copy_head), so a copy start can
        # set aside the pull towards the value a reply held under the same key: 200 seed-1
        # tasks c + g 0.275 / 0.265 -> 0.29 / 0.28 over two initialisations, free tool error
        # rate 0.58 / 0.47 -> 0.41 / 0.36 (README, "A gate on the match bonus").
        "copy_head_match_gate": True,
      }
    )
    c.tokenizer.vocab_size = 4096
    c.tokenizer.chat_system = "brief"
    c.data.seq_len = 2048
    # Batch 4: 0.65 s a step against 1.36 s for batch 8, the same time a row. At equal rows
    # (1,000 steps against 500, 7,000 tasks) held-out loss 0.066 against 0.087, turn match 0.486
    # against 0.467, the same pass rates (README, "Batch 4 instead of 8").
    c.data.batch_size = 4
    c.data.num_epochs = 1
    # First fit over 256 open rows instead of 4: packing efficiency 0.82 -> 0.93, one epoch of
    # the demo's 5,643 trajectories in 911 steps instead of 1,035, the same loss tokens
    # (README, "Packing over more open rows").
    c.data.num_packing_bins = 256
    c.data.eval_fraction = 0.05
    # Rows hold at most ~670 loss tokens of 2,048: the heads at 768 positions a row, the same
    # loss, 3.80 -> 3.38 s a step (README, "Scoring only the loss positions").
    c.data.loss_positions = -1
    c.generate.num_tasks = 3000
    c.generate.num_services = 1
    c.generate.min_walk = 2
    c.generate.max_walk = 2
    c.generate.num_distractors = 0
    c.generate.discovery = "none"
    # The reads a later call or the answer needs (a get after the list that showed the record
    # goes): 4.16 -> 3.09 calls a trajectory, median 1,459 -> 1,100 tokens.
    c.generate.reads = "needed"
    c.optim.lr = 3e-3
    c.optim.warmup_steps = 20
    c.log_every = 10
    c.eval_every = 200
    c.checkpoint.every = 200
  elif variant == "tiny":
    c.model.name = "tiny"
    # One DeltaNet and one attention layer, "sort" experts: the fastest of the hybrid on 2 CPU
    # cores (the 8-layer "tiny" model is several times slower).
    c.model.overrides = ml_collections.ConfigDict(
      {"num_layers": 2, "full_attention_interval": 2, "deltanet_chunk": 64, "moe_backend": "sort"}
    )
    c.tokenizer.vocab_size = 4096  # ~8% fewer tokens than 2048 on these trajectories
    # Two services (the least a composed task has), walks of three calls, no distractor services:
    # oracle trajectories of 5.0-11.7K tokens, median 6.7K (tool outputs and the ~600-token system
    # turn dominate). 8K rows hold ~89% of them whole and ~98% of their loss tokens; 2K rows
    # (the earlier setting) cut every one and kept ~10% of the loss tokens.
    c.data.seq_len = 8192
    c.data.batch_size = 2
    c.data.num_epochs = 1
    c.data.eval_fraction = 0.1
    c.generate.num_tasks = 64
    c.generate.num_services = 2
    c.generate.min_walk = 3
    c.generate.max_walk = 3
    c.generate.num_distractors = 0
    c.optim.lr = 6e-3  # 29 steps: 3e-3 reached a held-out loss of 4.6 from 8.3, 6e-3 lower
    c.optim.warmup_steps = 3
    c.log_every = 1
    c.eval_every = 10
    c.checkpoint.every = 10
  return c
