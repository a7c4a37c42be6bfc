"""Times steady-state SFT train steps on the issue's reference shape.

``python -m experiments.bench_train --workdir=DIR``: vocab 8192, hidden 256, 4 layers, 4 query /
2 KV heads of dim 64, 8 experts top-2 of width 256, untied embeddings, batch 8 x 512 tokens,
float32 (`rl.sft.bench.REFERENCE_SHAPE`). Writes to ``DIR/summary.json``: the shape, tokens/s and MFU
(against the measured matmul peak), the settings (MoE backend, fused loss chunk), and the same
figures for a baseline step timed in the same run, alternating with ours: every expert on every
token (the "loop" backend) and the loss from full float32 logits, which is how Tunix's CPU path
trains this model. On a machine shared with other work, ``speedup_vs_baseline`` is the figure
that load does not distort. ``peer`` is Tunix's figure on the same shape from the last
``make bench-peers`` (``runs/bench_peers/summary.json``, with ours from that same run), when there
is one.
``--hybrid`` keeps the model's DeltaNet layers (3 of 4); by default every layer is full attention,
as in the Qwen3-MoE the reference figure was measured on.
"""

from absl import flags

import models
from experiments.common import run_main, write_summary
from experiments.peers.summary import peer_figure
from rl.sft.bench import REFERENCE_BATCH, REFERENCE_SHAPE, benchmark, reference_model_config

_WORKDIR = flags.DEFINE_string("workdir", "runs/bench_train", "Where summary.json goes.")
_STEPS = flags.DEFINE_integer("steps", 8, "Timed steps (of each of ours and the baseline).")
_BATCH = flags.DEFINE_integer("batch_size", REFERENCE_BATCH["batch_size"], "Rows per step.")
_SEQ_LEN = flags.DEFINE_integer("seq_len", REFERENCE_BATCH["seq_len"], "Tokens per row.")
_BACKEND = flags.DEFINE_enum("moe_backend", "sort", list(models.config.MOE_BACKENDS), "MoE kernel.")
_LOSS_CHUNK = flags.DEFINE_integer(
  "loss_chunk", 0, "Time steps per chunk of the fused head loss; 0 automatic, -1 full logits."
)
_BASELINE = flags.DEFINE_bool("baseline", True, "Also time the dense baseline, alternating.")
_HYBRID = flags.DEFINE_bool("hybrid", False, "Gated DeltaNet in 3 of 4 layers.")


def main(argv):
  del argv
  interval = 4 if _HYBRID.value else 1
  config = reference_model_config(moe_backend=_BACKEND.value, full_attention_interval=interval)
  baseline = config.replace(moe_backend="loop") if _BASELINE.value else None
  summary = benchmark(
    config,
    batch_size=_BATCH.value,
    seq_len=_SEQ_LEN.value,
    steps=_STEPS.value,
    loss_chunk=_LOSS_CHUNK.value,
    baseline=baseline,
    baseline_loss_chunk=-1,
  )
  shape = {**REFERENCE_SHAPE, "full_attention_interval": interval}
  summary.update(
    shape=shape,
    reference_shape=shape == REFERENCE_SHAPE
    and (_BATCH.value, _SEQ_LEN.value) == tuple(REFERENCE_BATCH.values()),
    hybrid=_HYBRID.value,
    moe_backend=_BACKEND.value,
    remat=config.remat,
    fused_loss=_LOSS_CHUNK.value >= 0,
    baseline_settings={"moe_backend": "loop", "fused_loss": False} if baseline else None,
    peer=peer_figure(
      "sft",
      config={"batch_size": _BATCH.value, "seq_len": _SEQ_LEN.value},
      model_shape=shape,
    ),
  )
  write_summary(_WORKDIR.value, summary)


if __name__ == "__main__":
  run_main(main)
