"""Training: tokenizer and chat rendering, grain pipelines, SFT, rollouts, rewards, GRPO."""
