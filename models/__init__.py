"""The Flax NNX policy: a Qwen3.5-style hybrid Gated DeltaNet / gated attention MoE."""
