"""Weights in and out: transformers' qwen3_5_moe checkpoints (`hf`) over safetensors files
(`safetensors_io`)."""
