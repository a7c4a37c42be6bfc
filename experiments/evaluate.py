"""Evaluates an agent on a task file.

``python -m experiments.evaluate --agent=oracle|openai:MODEL|checkpoint:DIR --tasks=FILE
--workdir=DIR [--k=1] [--workers=1] [--base_url=URL] [--max_turns=128] [--max_tokens=N]
[--max_context=8192] [--temperature=0] [--constrained] [--grounded] [--narrated]`` writes
``DIR/results.jsonl`` (per task: every sample's trajectory and verdict), ``DIR/results.md``
(the tables), PNG plots and ``DIR/summary.json`` (pass rate, rubric score, pass^k, breakdowns,
and the split when the file came from ``experiments.split_tasks``). ``--constrained`` decodes a
checkpoint's tool calls under the tools' grammar (``rl.decoding.constrained``; what ``call_tool`` passes on
under the called tool's schema, ``rl.decoding.arguments``), so they always parse;
``--grounded`` copies the strings they pass on from the conversation (``rl.decoding.arguments``);
``--narrated`` (with ``--constrained``) holds a turn that starts "Now I'll call " to one of the
episode's tools, its service and that very call (``rl.decoding.narration``), and
``--held_quotes`` a quoting policy's quote to one of the instruction's sentences.
``openai:`` reads its key from ``$OPENAI_API_KEY`` and its endpoint from ``--base_url`` or
``$OPENAI_BASE_URL``.
"""

from absl import flags

from compoworld.agents.evaluation import MAX_TURNS, run_evaluation
from experiments.common import run_main, write_summary

_AGENT = flags.DEFINE_string("agent", "oracle", "oracle, openai:MODEL or checkpoint:DIR.")
_TASKS = flags.DEFINE_string("tasks", None, "tasks.jsonl to evaluate on.", required=True)
_WORKDIR = flags.DEFINE_string("workdir", "runs/eval", "Where the results go.")
_K = flags.DEFINE_integer("k", 1, "Samples per task, each from its own fork of s0.")
_WORKERS = flags.DEFINE_integer("workers", 1, "Tasks played at once (processes).")
_BASE_URL = flags.DEFINE_string(
  "base_url", None, "OpenAI-compatible endpoint (default: $OPENAI_BASE_URL)."
)
_TEMPERATURE = flags.DEFINE_float("temperature", 0.0, "Sampling temperature (0: greedy).")
_MAX_TURNS = flags.DEFINE_integer(
  "max_turns", MAX_TURNS, "Assistant turns before an episode is cut."
)
_MAX_TOKENS = flags.DEFINE_integer(
  "max_tokens", None, "Tokens per assistant turn (openai and checkpoint; default: the agent's)."
)
_MAX_CONTEXT = flags.DEFINE_integer(
  "max_context", 8192, "checkpoint: prompt + generated tokens; a full context ends the episode."
)
_CONSTRAINED = flags.DEFINE_bool(
  "constrained", False, "checkpoint: decode tool calls under the tools' JSON Schema grammar."
)
_GROUNDED = flags.DEFINE_bool(
  "grounded",
  False,
  "checkpoint: copy the strings tool calls pass on from the conversation (rl.decoding.arguments).",
)
_NARRATED = flags.DEFINE_bool(
  "narrated",
  False,
  "checkpoint, --constrained: a turn that starts \"Now I'll call \" names one of the episode's "
  "tools and makes that call (rl.decoding.narration).",
)
_HELD_QUOTES = flags.DEFINE_bool(
  "held_quotes",
  False,
  'checkpoint, --narrated: a quoting policy\'s quote of the request (Next step: "...") is one '
  "of the instruction's sentences, whole (rl.decoding.narration).",
)
_COPY_BEAM = flags.DEFINE_integer(
  "copy_beam",
  0,
  "checkpoint, --grounded, greedy: choose each grounded value whole by a beam search this wide "
  "(rl.serve.policy.Policy.generate); 0 = token by token.",
)


def main(argv):
  del argv
  agent_kwargs = {}
  if _MAX_TOKENS.value is not None:
    agent_kwargs["max_tokens"] = _MAX_TOKENS.value
  if _AGENT.value.startswith("checkpoint:"):
    agent_kwargs["max_context"] = _MAX_CONTEXT.value
    if _CONSTRAINED.value:
      agent_kwargs["constrained"] = True
    if _GROUNDED.value:
      agent_kwargs["grounded"] = True
    if _NARRATED.value:
      agent_kwargs["narrated"] = True
    if _HELD_QUOTES.value:
      agent_kwargs["held_quotes"] = True
    if _COPY_BEAM.value:
      agent_kwargs["copy_beam"] = _COPY_BEAM.value
  elif used := [
    f"--{f.name}" for f in (_CONSTRAINED, _GROUNDED, _NARRATED, _HELD_QUOTES, _COPY_BEAM) if f.value
  ]:
    raise ValueError(
      f"{' and '.join(used)} {'is' if len(used) == 1 else 'are'} for --agent=checkpoint:DIR "
      "(an endpoint decodes its own way)"
    )
  summary = run_evaluation(
    _TASKS.value,
    _WORKDIR.value,
    _AGENT.value,
    k=_K.value,
    workers=_WORKERS.value,
    max_turns=_MAX_TURNS.value,
    base_url=_BASE_URL.value,
    temperature=_TEMPERATURE.value,
    agent_kwargs=agent_kwargs,
  )
  write_summary(_WORKDIR.value, summary)


if __name__ == "__main__":
  run_main(main)
