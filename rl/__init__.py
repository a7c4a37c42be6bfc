"""Training: the policy's data, SFT, decoding, GRPO, serving and the demo pipeline.

- ``data``: tokenizer, chat format, the tokenizer's corpus, grain packing.
- ``sft``: supervised fine-tuning (``rl.sft.train``).
- ``decoding``: free, grammar-constrained and grounded decoding of tool calls.
- ``grpo``: the rollout engine, rewards, GRPO (``rl.grpo.train``).
- ``serve``: a checkpoint as a chat model, an OpenAI-compatible server, an in-process agent.
- ``pipeline``: the demo pipeline, its report and plots, the paper's experiments.
- ``distributed``: JAX's multi-controller runtime, shared by SFT, GRPO and the policy.
"""
