"""Compile the service library from MCP specs:
``python -m experiments.build_library --specs=../shared/mcp_specs/tools.jsonl --workdir=DIR``.

Writes ``manifest.json`` (every service and tool with its status, reason, domain and schema) and
``summary.json`` (services, tools, executable_tools, deterministic_share, simulated_share,
quarantined, seconds). Without ``--specs`` it compiles the hand-written library's exported specs.
A manifest built from the same specs is reused unless ``--rebuild``. With
``--synthesis_model``, services left with quarantined tools are also offered to that model
(any OpenAI-compatible endpoint: ``--synthesis_base_url`` or ``OPENAI_BASE_URL``); with
``--synthesis=llm`` every service is (or ``--synthesis_share`` of them): the model writes the
state model, tools and tests, the sandbox runs them, and the same property checks judge them.
"""

import os

from absl import flags

from compoworld.llm import make_client
from compoworld.specs.build import build_library
from compoworld.synthesis.synthesizer import Synthesizer
from experiments.common import run_main, write_summary

_SPECS = flags.DEFINE_string("specs", None, "Spec file (.jsonl corpus or tools/list .json).")
_WORKDIR = flags.DEFINE_string(
  "workdir", "runs/library", "Where manifest.json and summary.json go."
)
_WORKERS = flags.DEFINE_integer("workers", os.cpu_count() or 1, "Worker processes.")
_SEED = flags.DEFINE_integer("seed", 0, "Seed of the states the validator runs on.")
_REBUILD = flags.DEFINE_bool("rebuild", False, "Ignore a manifest built from the same specs.")
_SYNTH_MODEL = flags.DEFINE_string("synthesis_model", None, "Model that rewrites failing services.")
_SYNTH_URL = flags.DEFINE_string("synthesis_base_url", None, "Its endpoint (else OPENAI_BASE_URL).")
_SYNTH_KEY = flags.DEFINE_string("synthesis_api_key", None, "Its key (else OPENAI_API_KEY).")
_SYNTHESIS = flags.DEFINE_enum(
  "synthesis",
  "repair",
  ["repair", "llm"],
  "repair: offer the model the services left with quarantined tools; llm: every service (or "
  "--synthesis_share of them) goes through the model's coding-agent path.",
)
_SHARE = flags.DEFINE_float("synthesis_share", 1.0, "With --synthesis=llm: the share of services.")


def main(argv):
  del argv
  synthesizer = None
  if _SYNTHESIS.value == "llm" and not _SYNTH_MODEL.value:
    raise ValueError("--synthesis=llm needs --synthesis_model (and an endpoint)")
  if _SYNTH_MODEL.value:
    client = make_client(base_url=_SYNTH_URL.value, api_key=_SYNTH_KEY.value)
    synthesizer = Synthesizer(client, _SYNTH_MODEL.value, f"{_WORKDIR.value}/synthesized")
  summary = build_library(
    _SPECS.value,
    _WORKDIR.value,
    workers=_WORKERS.value,
    seed=_SEED.value,
    reuse=not _REBUILD.value,
    synthesizer=synthesizer,
    synthesis=_SYNTHESIS.value,
    synthesis_share=_SHARE.value,
  )
  write_summary(_WORKDIR.value, summary)


if __name__ == "__main__":
  run_main(main)
