"""Where an evaluation's failed episodes leave the oracle's path (compoworld.agents.divergence).

``python -m experiments.failure_breakdown --results=EVAL_DIR --tasks=TASKS.jsonl
[--discovery=none --reads=needed] --workdir=DIR`` reads ``EVAL_DIR/results.jsonl`` (or a
results file named directly), compares each failed sample's tool calls with those of the oracle
played as the SFT data played it (the CPU regime's: no discovery calls, only the reads a later
call needs; ``--path=reference``: the task's whole reference solution), and prints a table of the
first divergences by kind (a failed copy, a skipped step, an early final answer, ...), with
examples, and by where they fall on the path (its first call, the first call into a service it
has not used yet: a composed task's change of service, or later), with the mean share of the
path followed and what the failures at a change of service called there (the service before,
another tool of the new one, the right tool with other arguments, or nothing), with
``--quote`` which sentence of the request a quoting policy was on there, and writes it to
``DIR/breakdown.md``, the numbers to ``DIR/summary.json``.
"""

from pathlib import Path

from absl import flags

from compoworld.agents.agent import OracleAgent
from compoworld.agents.divergence import breakdown, markdown, read_results, reference_calls
from experiments.common import run_main, write_summary

_RESULTS = flags.DEFINE_string(
  "results", None, "An evaluation's results.jsonl, or the directory holding it.", required=True
)
_TASKS = flags.DEFINE_string(
  "tasks", None, "The tasks file the evaluation played (their reference solutions).", required=True
)
_PATH = flags.DEFINE_enum(
  "path",
  "oracle",
  ["oracle", "reference"],
  "The path compared with: the oracle's, or the task's reference solution.",
)
_DISCOVERY = flags.DEFINE_enum(
  "discovery", "none", list(OracleAgent.DISCOVERY), "--path=oracle: its discovery calls."
)
_READS = flags.DEFINE_enum("reads", "needed", list(OracleAgent.READS), "--path=oracle: its reads.")
_QUOTE = flags.DEFINE_bool(
  "quote",
  False,
  "--path=oracle: it quotes each sentence of the request (a quoting policy's episodes: which "
  "sentence it was on where it left the path; tasks that record their sentences).",
)
_QUOTE_FORM = flags.DEFINE_enum(
  "quote_form",
  "sentence",
  list(OracleAgent.QUOTES),
  "--path=oracle with --quote: each sentence whole, or without the connective that opens it at "
  'random ("With that, post ..." -> "post ...").',
)
_WORKDIR = flags.DEFINE_string(
  "workdir", "runs/failure_breakdown", "Where breakdown.md and summary.json go."
)
_EXAMPLES = flags.DEFINE_integer("examples", 5, "Examples shown for each kind.")


def main(argv):
  del argv
  results = Path(_RESULTS.value)
  if results.is_dir():
    results = results / "results.jsonl"
  if not results.exists():
    raise FileNotFoundError(f"--results: {results} does not exist")
  rows = read_results(results)
  oracle = {
    "discovery": _DISCOVERY.value,
    "reads": _READS.value,
    "quote": _QUOTE.value and _QUOTE_FORM.value,
  }
  references = reference_calls(_TASKS.value, rows, oracle if _PATH.value == "oracle" else None)
  summary = breakdown(references, rows, examples=_EXAMPLES.value)
  text = markdown(summary, title=f"Where failed episodes leave the oracle's path: {results}")
  print(text)
  workdir = Path(_WORKDIR.value)
  workdir.mkdir(parents=True, exist_ok=True)
  (workdir / "breakdown.md").write_text(text, encoding="utf-8")
  write_summary(workdir, {**summary, "results": str(results), "path": _PATH.value})


if __name__ == "__main__":
  run_main(main)
