"""Plays tasks with an agent and keeps the verified successes as the SFT set.

``python -m experiments.collect_trajectories --tasks=FILE --agent=oracle|openai --workdir=DIR``
writes ``DIR/trajectories.jsonl`` (every trajectory with its rubric result), ``DIR/sft.jsonl``
(v = 1 only) and ``DIR/summary.json`` (kept and rejected counts). The openai agent reads its key
from ``$OPENAI_API_KEY`` and its endpoint from ``--base_url`` or ``$OPENAI_BASE_URL``.
"""

from absl import flags

from compoworld.agents.agent import OracleAgent
from compoworld.agents.trajectories import collect_trajectories
from compoworld.tasks.task import load_tasks
from experiments.common import run_main, write_summary

_TASKS = flags.DEFINE_string("tasks", None, "tasks.jsonl to play.", required=True)
_AGENT = flags.DEFINE_enum("agent", "oracle", ["oracle", "openai"], "Who plays the tasks.")
_MODEL = flags.DEFINE_string("model", "deepseek-v4-flash", "Model name for --agent=openai.")
_BASE_URL = flags.DEFINE_string(
  "base_url", None, "OpenAI-compatible endpoint (default: $OPENAI_BASE_URL)."
)
_TEMPERATURE = flags.DEFINE_float("temperature", 0.0, "Sampling temperature for --agent=openai.")
_DISCOVERY = flags.DEFINE_enum(
  "discovery",
  "full",
  ["full", "services", "none"],
  "--agent=oracle: which discovery calls it makes before the reference solution's calls.",
)
_NARRATE = flags.DEFINE_bool(
  "narrate", True, "--agent=oracle: a sentence naming each call before it (else the call alone)."
)
_QUOTE = flags.DEFINE_bool(
  "quote",
  False,
  "--agent=oracle: quote each sentence of the request before its first call (with --narrate; "
  "tasks of the procedural author, which record their sentences' calls).",
)
_QUOTE_FORM = flags.DEFINE_enum(
  "quote_form",
  "sentence",
  list(OracleAgent.QUOTES),
  "--agent=oracle with --quote: each sentence whole, or without the connective that opens it at "
  'random ("With that, post ..." -> "post ...").',
)
_READS = flags.DEFINE_enum(
  "reads",
  "all",
  ["all", "needed"],
  "--agent=oracle: every read of the reference solution, or only those whose replies a later "
  "call or the answer needs (compoworld.tasks.task.needed_calls).",
)
_MAX_TURNS = flags.DEFINE_integer("max_turns", 128, "Assistant turns before an episode is cut.")
_SHARD_INDEX = flags.DEFINE_integer("shard_index", 0, "This process's shard of the tasks.")
_NUM_SHARDS = flags.DEFINE_integer("num_shards", 1, "How many shards split the tasks.")
_WORKERS = flags.DEFINE_integer("workers", 1, "Tasks played at once (threads).")
_WORKDIR = flags.DEFINE_string("workdir", "runs/trajectories", "Where the files go.")


def main(argv):
  del argv
  kwargs = {
    "discovery": _DISCOVERY.value,
    "narrate": _NARRATE.value,
    "reads": _READS.value,
    "quote": _QUOTE.value and _QUOTE_FORM.value,
  }
  if _AGENT.value == "openai":
    kwargs = {"model": _MODEL.value, "base_url": _BASE_URL.value, "temperature": _TEMPERATURE.value}
  summary = collect_trajectories(
    load_tasks(_TASKS.value),
    _WORKDIR.value,
    agent=_AGENT.value,
    agent_kwargs=kwargs,
    shard_index=_SHARD_INDEX.value,
    num_shards=_NUM_SHARDS.value,
    workers=_WORKERS.value,
    max_turns=_MAX_TURNS.value,
  )
  write_summary(_WORKDIR.value, summary)


if __name__ == "__main__":
  run_main(main)
