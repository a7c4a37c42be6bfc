"""Generates verified cross-service tasks.

``python -m experiments.generate_tasks --num_tasks=N --seed=S --workdir=DIR`` writes
``DIR/tasks.jsonl`` (one task per line, every gate passed) and ``DIR/summary.json``.
"""

import os

from absl import flags

from compoworld.agents.llm_author import LLMAuthor
from compoworld.llm import make_client
from compoworld.runtime.domains import DOMAINS
from compoworld.specs.build import load_compiled_library
from compoworld.tasks.facets import facets
from compoworld.tasks.generate import generate_tasks
from compoworld.tasks.task import save_tasks
from experiments.common import run_main, write_summary

_NUM_TASKS = flags.DEFINE_integer("num_tasks", 100, "Task indices to generate.")
_SEED = flags.DEFINE_integer("seed", 0, "Generation seed: same seed, same file.")
_K = flags.DEFINE_integer(
  "num_services", 5, "K: services each task composes (1: single-service tasks)."
)
_DISTRACTORS = flags.DEFINE_integer("num_distractors", 5, "Extra services the task does not need.")
_MIN_WALK = flags.DEFINE_integer("min_walk", 7, "Shortest walk length L.")
_MAX_WALK = flags.DEFINE_integer("max_walk", 12, "Longest walk length L.")
_DOMAINS = flags.DEFINE_multi_enum("domains", [], DOMAINS, "Restrict task services to domains.")
_AUTHOR = flags.DEFINE_enum("author", "procedural", ["procedural", "llm"], "Who writes scenarios.")
_LLM_MODEL = flags.DEFINE_string("llm_model", "deepseek-v4-flash", "Model name for --author=llm.")
_LLM_BASE_URL = flags.DEFINE_string(
  "llm_base_url", None, "OpenAI-compatible endpoint (default: $OPENAI_BASE_URL)."
)
_LLM_REVISIONS = flags.DEFINE_integer("llm_revisions", 3, "Revision rounds after failed gates.")
_SHARD_INDEX = flags.DEFINE_integer("shard_index", 0, "This process's shard of the indices.")
_NUM_SHARDS = flags.DEFINE_integer("num_shards", 1, "How many shards split the indices.")
_WORKERS = flags.DEFINE_integer("workers", os.cpu_count() or 1, "Local worker processes.")
_LIBRARY = flags.DEFINE_string(
  "library", None, "A compiled library (build_library's workdir or manifest) to compose too."
)
_WORKDIR = flags.DEFINE_string("workdir", "runs/tasks", "Where tasks.jsonl and summary.json go.")


def main(argv):
  del argv
  if _LIBRARY.value:
    load_compiled_library(_LIBRARY.value, facets=facets.load(), progress=True)
  author, workers = None, _WORKERS.value
  if _AUTHOR.value == "llm":
    client = make_client(base_url=_LLM_BASE_URL.value)
    author, workers = LLMAuthor(client, _LLM_MODEL.value, max_revisions=_LLM_REVISIONS.value), 1
  tasks, summary = generate_tasks(
    _NUM_TASKS.value,
    seed=_SEED.value,
    shard_index=_SHARD_INDEX.value,
    num_shards=_NUM_SHARDS.value,
    workers=workers,
    author=author,
    k=_K.value,
    num_distractors=_DISTRACTORS.value,
    min_walk=_MIN_WALK.value,
    max_walk=_MAX_WALK.value,
    domains=_DOMAINS.value or None,
  )
  save_tasks(tasks, os.path.join(_WORKDIR.value, "tasks.jsonl"))
  write_summary(_WORKDIR.value, {**summary, "author": _AUTHOR.value})


if __name__ == "__main__":
  run_main(main)
