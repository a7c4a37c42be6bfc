"""Rollout throughput with the environment in the loop, cached decoding against recomputing the
prefix, and the sampler on the SFT benchmark's reference shape (issue 7).

``python -m experiments.bench_rollout --workdir=DIR``: 16 tasks x 8 rollouts on the tiny SFT
shape (random weights; sampled, and with the oracle's text scripted), generated tokens/s, tool
calls/s and the share of time in the environment; batch 8 x 64-token prompts x 128 new tokens
with and without the cache; the same sampler shape on the reference model (vocab 8192, hidden
256, 4 layers, 8 experts top-2). Writes ``DIR/summary.json``; ``sampler_reference.peer`` is
Tunix's figure for the same sampler shape from the last ``make bench-peers``
(``runs/bench_peers/summary.json``, with ours from that same run), when there is one.
"""

from absl import flags

from experiments.common import run_main, write_summary
from experiments.peers.summary import peer_figure
from models.config import MOE_BACKENDS
from rl.grpo.rollout_bench import run_benchmarks
from rl.sft.bench import REFERENCE_SHAPE

_WORKDIR = flags.DEFINE_string("workdir", "runs/bench_rollout", "Where summary.json goes.")
_TASKS = flags.DEFINE_integer("num_tasks", 16, "Tasks (groups) per rollout batch.")
_ROLLOUTS = flags.DEFINE_integer("num_rollouts", 8, "Rollouts per task.")
_TURNS = flags.DEFINE_integer("max_turns", 4, "Assistant turns per rollout.")
_TURN_TOKENS = flags.DEFINE_integer("turn_tokens", 64, "Sampled tokens per turn at most.")
_TOTAL = flags.DEFINE_integer("max_total_tokens", 4096, "Tokens per rollout at most.")
_BATCH = flags.DEFINE_integer("batch", 8, "Sampler benchmark: rows.")
_PROMPT = flags.DEFINE_integer("prompt_len", 64, "Sampler benchmark: prompt tokens.")
_NEW = flags.DEFINE_integer("new_tokens", 128, "Sampler benchmark: new tokens per row.")
_REPEATS = flags.DEFINE_integer("repeats", 3, "Timed repeats of each sampler measurement.")
_BACKEND = flags.DEFINE_enum("moe_backend", "sort", list(MOE_BACKENDS), "Reference MoE kernel.")


def main(argv):
  del argv
  summary = run_benchmarks(
    num_tasks=_TASKS.value,
    num_rollouts=_ROLLOUTS.value,
    max_turns=_TURNS.value,
    turn_tokens=_TURN_TOKENS.value,
    max_total_tokens=_TOTAL.value,
    batch=_BATCH.value,
    prompt_len=_PROMPT.value,
    new_tokens=_NEW.value,
    repeats=_REPEATS.value,
    moe_backend=_BACKEND.value,
  )
  sizes = {"batch_size": _BATCH.value, "prompt_len": _PROMPT.value, "new_tokens": _NEW.value}
  summary["sampler_reference"]["peer"] = peer_figure(
    "sampler", config=sizes, model_shape=REFERENCE_SHAPE
  )
  write_summary(_WORKDIR.value, summary)


if __name__ == "__main__":
  run_main(main)
