"""Trains the project's SentencePiece tokenizer on its own corpus.

``python -m experiments.train_tokenizer --tasks=FILE --vocab_size=N --workdir=DIR`` plays the
oracle on every task, adds every tool schema of the service library, trains a byte-fallback
SentencePiece model with the chat format's special tokens reserved, and writes
``DIR/tokenizer.model`` and ``DIR/summary.json``.
"""

from absl import flags

from compoworld.tasks.task import load_tasks
from experiments.common import run_main, write_summary
from rl.data.corpus import train_tokenizer

_TASKS = flags.DEFINE_string("tasks", None, "tasks.jsonl whose trajectories form the corpus.")
_VOCAB_SIZE = flags.DEFINE_integer("vocab_size", 8192, "Vocabulary size (above ~300).")
_WORKDIR = flags.DEFINE_string("workdir", "runs/tokenizer", "Where tokenizer.model goes.")


def main(argv):
  del argv
  tasks = load_tasks(_TASKS.value) if _TASKS.value else []
  write_summary(_WORKDIR.value, train_tokenizer(tasks, _VOCAB_SIZE.value, _WORKDIR.value))


if __name__ == "__main__":
  run_main(main)
