"""How fast a policy shape learns in-context copying: ``python -m experiments.copy_probe
--workdir=DIR [--length=128] [--steps=300] [--config=configs/sft.py:cpu] [--config.model...]``.

Rows come from `rl.sft.copying`: with ``--pattern=span`` each holds random tokens with one random
span of ``--repeat`` tokens written twice, the loss on the second copy (after its first token,
which cannot be predicted); with ``--pattern=periodic`` one random block of ``--repeat`` tokens
is written again and again, the loss on everything after the first block. A model that can copy
drives the accuracy on it to 1; one that cannot stays at chance (about 1 / vocabulary). This is
the skill a tool-using policy needs to pass an id or a name from a reply into its next call, on
its own, with nothing else to learn: ``DIR/summary.json`` has the accuracy and loss every
``--every`` steps and ``DIR/copy_accuracy.png`` plots them. The SFT config's model and optimizer
are used as they are (``configs/sft.py``, any field settable by flag).
"""

from __future__ import annotations

import time
from pathlib import Path

import jax.numpy as jnp
import numpy as np
from absl import flags
from flax import nnx
from ml_collections import config_flags
from tqdm import tqdm

from experiments.common import run_main, write_summary
from rl.pipeline.plots import Curve, line_plot
from rl.sft import trainer as sft
from rl.sft.copying import PATTERNS, row_trainer

_CONFIG = config_flags.DEFINE_config_file("config", "configs/sft.py:cpu", "The SFT config.")
_WORKDIR = flags.DEFINE_string("workdir", "runs/copy_probe", "Where summary.json goes.")
_STEPS = flags.DEFINE_integer("steps", 300, "Optimizer steps.")
_BATCH = flags.DEFINE_integer("batch", 16, "Rows per step.")
_LENGTH = flags.DEFINE_integer("length", 128, "Tokens per row (the distance copies span).")
_REPEAT = flags.DEFINE_integer("repeat", 32, "Tokens in the span that is written twice.")
_VOCAB = flags.DEFINE_integer("vocab", 4096, "Vocabulary the random tokens come from.")
_EVERY = flags.DEFINE_integer("every", 25, "Steps between recorded points.")
_PATTERN = flags.DEFINE_enum(
  "pattern",
  "span",
  ["span", "periodic", "recall"],
  "span: one span of --repeat tokens written twice in random tokens (sparse loss); periodic: a "
  "random block of --repeat tokens repeated to fill the row, the loss on every token after the "
  "first block (dense: each target is a copy from --repeat tokens back); recall: keys each "
  "followed by a value of --repeat tokens, then the keys again in another order, the loss on the "
  "recalled values (a copy that starts after a cue).",
)


def probe(
  config,
  steps: int,
  batch: int,
  length: int,
  repeat: int,
  vocab: int,
  every: int,
  pattern: str = "span",
):
  """Trains the config's model on copy rows; the (step, accuracy, loss) points."""
  if config.model.overrides.get("copy_head_forms"):  # random ids have no words to pair
    config = config.copy_and_resolve_references()
    config.model.overrides.copy_head_forms = False
  model, model_config = sft.build_model(config, vocab)
  tx, schedule = sft.make_optimizer(config, steps)
  graphdef, params, rest = nnx.split(model, nnx.Param, ...)
  state, step = row_trainer(graphdef, params, rest, tx, schedule, model_config.router_aux_loss_coef)
  rng = np.random.default_rng(config.seed)
  points = []
  for i in tqdm(range(steps), desc="copy probe", mininterval=1.0):
    rows = PATTERNS[pattern](rng, batch, length, repeat, vocab)
    state, metrics = step(state, {k: jnp.asarray(v) for k, v in rows.items()})
    if (i + 1) % every == 0 or i + 1 == steps:
      points.append(
        {"step": i + 1, "accuracy": float(metrics["accuracy"]), "loss": float(metrics["loss"])}
      )
  return points


def main(argv):
  del argv
  config = _CONFIG.value
  start = time.time()
  with nnx.use_eager_sharding(False):
    points = probe(
      config,
      _STEPS.value,
      _BATCH.value,
      _LENGTH.value,
      _REPEAT.value,
      _VOCAB.value,
      _EVERY.value,
      _PATTERN.value,
    )
  png = Path(_WORKDIR.value) / "copy_accuracy.png"
  png.parent.mkdir(parents=True, exist_ok=True)
  line_plot(
    png,
    [Curve("accuracy on the repeat", [p["step"] for p in points], [p["accuracy"] for p in points])],
    title=f"in-context copying, {_LENGTH.value}-token rows",
    xlabel="step",
    ylabel="accuracy",
    ylim=(0.0, 1.0),
  )
  write_summary(
    _WORKDIR.value,
    {
      "points": points,
      "final_accuracy": points[-1]["accuracy"],
      "chance": round(1 / _VOCAB.value, 6),
      "length": _LENGTH.value,
      "repeat": _REPEAT.value,
      "pattern": _PATTERN.value,
      "batch": _BATCH.value,
      "steps": _STEPS.value,
      "model": dict(config.model.overrides),
      "lr": config.optim.lr,
      "seconds": round(time.time() - start, 1),
      "plot": str(png),
    },
  )


if __name__ == "__main__":
  run_main(main)
