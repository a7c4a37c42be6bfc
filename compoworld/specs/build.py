"""The library build: specs → compiled services → adversarial validation → manifest.

``build_library`` ingests a spec file (or, with none, the hand-written library's own exported
specs), compiles every service, validates every deterministic tool, quarantines failures (served
by the world model from then on) and writes ``manifest.json``: every service and tool with its
status (deterministic / simulated / quarantined), the reason, the failing case, the domain and
the schema. A manifest built from the same specs by the same compiler is reused as it is.

``load_compiled_library`` registers the manifest's services in ``compoworld.runtime.registry`` beside
the hand-written ones. Nothing loads it implicitly: the default registry stays hand-written.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import json
import multiprocessing
import time
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from tqdm import tqdm

from compoworld.runtime.registry import Registry, registry
from compoworld.specs.compiled import CompiledService
from compoworld.specs.compiler import COMPILER_VERSION, compile_service
from compoworld.specs.ingest import ServiceSpec, read_specs
from compoworld.specs.validator import validate

MANIFEST = "manifest.json"
EXPORTED_SPECS = "exported_specs.jsonl"


def _quiet() -> None:
  # a spec property named like a pydantic attribute ("schema", "json") is aliased, not a clash
  warnings.filterwarnings(
    "ignore", message="Field name .* shadows an attribute", category=UserWarning
  )


def compile_and_validate(spec: ServiceSpec, seed: int = 0) -> dict[str, Any]:
  """One service's manifest entry: compile, validate its deterministic tools, quarantine the
  failures, and check that the quarantined build still runs."""
  _quiet()
  cls = compile_service(spec)
  deterministic = [t for t, s in cls.statuses.items() if s["status"] == "deterministic"]
  ran: dict[str, list[str]] = {}
  try:
    failures = validate(cls, spec.tools, seed=seed, only=deterministic, ran=ran)
    reasons = {t: f.reason() for t, f in failures.items()}
  except Exception as err:  # the suite could not even start (e.g. no state could be seeded)
    failures = {}
    reasons = dict.fromkeys(deterministic, f"validation could not run: {type(err).__name__}: {err}")
  if reasons:
    cls = compile_service(spec, reasons)
  tools = []
  for tool in spec.tools:
    runtime, plan = cls.tools[tool.name], cls.plans[tool.name]
    entry = {
      "name": tool.name,
      **cls.statuses[tool.name],
      "kind": plan.kind,
      "entity": plan.entity,
      "mutates": runtime.mutates,
      "produces": list(runtime.produces),
      "consumes": list(runtime.consumes),
    }
    if tool.name in deterministic:
      entry["checks"] = ran.get(tool.name, [])
    if tool.name in failures:
      entry["failing_case"] = failures[tool.name].to_json()
    tools.append(entry)
  return {
    "name": spec.name,
    "domain": spec.domain,
    "description": spec.description,
    "collections": {e.table: sorted(e.fields) for e in cls.entities.values()},
    "tools": tools,
    "spec": spec.model_dump(mode="json"),
  }


def synthesize_entry(entry: dict[str, Any], synthesizer: Any) -> None:
  """Offers a service to the LLM synthesis path; an accepted module takes the entry over."""
  verdict = synthesizer.synthesize(ServiceSpec.model_validate(entry["spec"]))
  entry["synthesis"] = verdict.to_json()
  if not verdict.accepted:
    return
  for tool in entry["tools"]:
    reason = verdict.quarantined.get(tool["name"])
    if tool["status"] == "simulated" and reason is None:
      continue  # an external effect stays simulated whoever implements the rest
    tool.update(
      status="quarantined" if reason else "deterministic",
      reason=reason or "",
      implementation="synthesized",
    )


def _chunk(specs: list[ServiceSpec], seed: int) -> list[dict[str, Any]]:
  return [compile_and_validate(s, seed) for s in specs]


def specs_digest(path: Path, salt: str = "") -> str:
  h = hashlib.sha256(f"{COMPILER_VERSION}:{salt}".encode())
  with open(path, "rb") as f:
    for block in iter(lambda: f.read(1 << 20), b""):
      h.update(block)
  return h.hexdigest()


def export_hand_written(workdir: Path, reg: Registry = registry) -> Path:
  """The hand-written services' tools as a spec file (what a clone without a corpus compiles)."""
  from compoworld.serve.mcp_export import export_corpus

  path = workdir / EXPORTED_SPECS
  export_corpus([reg.get(n) for n in reg.names() if not _compiled(reg.get(n))], path)
  return path


def _compiled(cls: type) -> bool:
  return issubclass(cls, CompiledService)


def summarize(services: list[dict[str, Any]], stats: dict[str, Any], seconds: float) -> dict:
  tools = [t for s in services for t in s["tools"]]
  count = {
    k: sum(t["status"] == k for t in tools) for k in ("deterministic", "simulated", "quarantined")
  }
  executable = sum(count.values())  # quarantined tools run too: on the world model
  return {
    "services": len(services),
    "tools": len(tools),
    "executable_tools": executable,
    "deterministic_tools": count["deterministic"],
    "simulated_tools": count["simulated"],
    "deterministic_share": round(count["deterministic"] / executable, 4) if executable else 0.0,
    "simulated_share": round((count["simulated"] + count["quarantined"]) / executable, 4)
    if executable
    else 0.0,
    "quarantined": count["quarantined"],
    "rejected_tools": stats.get("rejected_tools", 0),
    "duplicate_servers_collapsed": stats.get("duplicate_servers", 0),
    "spec_lines": stats.get("tool_lines", 0),
    "domains": {
      d: sum(s["domain"] == d for s in services) for d in sorted({s["domain"] for s in services})
    },
    "seconds": round(seconds, 2),
  }


def _offered(entry: dict[str, Any], synthesis: str, share: float) -> bool:
  """Whether a service goes to the synthesis model (see ``build_library``)."""
  if synthesis == "repair":
    return any(t["status"] == "quarantined" for t in entry["tools"])
  draw = int(hashlib.sha256(entry["name"].encode()).hexdigest()[:8], 16) / 16**8
  return draw < share


def build_library(
  specs: str | Path | None,
  workdir: str | Path,
  workers: int = 1,
  seed: int = 0,
  progress: bool = True,
  reuse: bool = True,
  synthesizer: Any = None,
  synthesis: str = "repair",
  synthesis_share: float = 1.0,
) -> dict[str, Any]:
  """Builds (or reuses) ``workdir/manifest.json`` from ``specs`` and returns the summary.

  With a ``compoworld.synthesis.synthesizer.Synthesizer``, services are also offered to the model: with
  ``synthesis="repair"`` those the compiler left with quarantined tools, with ``"llm"`` every
  service, or the share ``synthesis_share`` of them (chosen by a hash of the name, so the same
  ones every time). An accepted module replaces the compiled service, and only the tools it still
  fails stay quarantined; a rejected one leaves the compiled service as it was.

  ``specs`` None compiles the hand-written library's exported specs. Service names already taken
  by hand-written services get a suffix, so both can be loaded together.
  """
  t0 = time.perf_counter()
  workdir = Path(workdir)
  workdir.mkdir(parents=True, exist_ok=True)
  path = Path(specs) if specs is not None else export_hand_written(workdir)
  if synthesis not in ("repair", "llm") or not 0 <= synthesis_share <= 1:
    raise ValueError(
      f"synthesis is 'repair' or 'llm' and its share within [0, 1] "
      f"(got {synthesis!r}, {synthesis_share})"
    )
  model = getattr(synthesizer, "model", "")
  digest = specs_digest(path, f"{model}:{synthesis}:{synthesis_share}" if model else "")
  manifest_path = workdir / MANIFEST
  if reuse and manifest_path.exists():
    old = json.loads(manifest_path.read_text(encoding="utf-8"))
    if old.get("specs_sha256") == digest:
      return {**old["summary"], "cached": True, "seconds": round(time.perf_counter() - t0, 2)}
  reserved = [n for n in registry.names() if not _compiled(registry.get(n))]
  services, stats = read_specs(path, reserved=reserved)
  chunks = [services[i : i + 8] for i in range(0, len(services), 8)]
  bar = tqdm(total=len(services), desc="services", unit="svc", disable=not progress)
  entries: list[dict[str, Any]] = []
  if workers > 1 and len(chunks) > 1:
    ctx = multiprocessing.get_context("fork")
    with concurrent.futures.ProcessPoolExecutor(workers, mp_context=ctx) as pool:
      for chunk in pool.map(_chunk, chunks, [seed] * len(chunks)):
        entries.extend(chunk)
        bar.update(len(chunk))
  else:
    for chunk in chunks:
      entries.extend(_chunk(chunk, seed))
      bar.update(len(chunk))
  bar.close()
  if synthesizer is not None:
    chosen = [e for e in entries if _offered(e, synthesis, synthesis_share)]
    for entry in tqdm(chosen, desc="synthesis", unit="svc", disable=not progress):
      synthesize_entry(entry, synthesizer)
  summary = summarize(entries, stats, time.perf_counter() - t0)
  manifest = {
    "compiler": COMPILER_VERSION,
    "specs": str(path),
    "specs_sha256": digest,
    "summary": summary,
    "services": entries,
  }
  manifest_path.write_text(json.dumps(manifest, sort_keys=True) + "\n", encoding="utf-8")
  return {**summary, "cached": False, "manifest": str(manifest_path)}


def read_manifest(path: str | Path) -> dict[str, Any]:
  path = Path(path)
  if path.is_dir():
    path = path / MANIFEST
  if not path.exists():
    raise FileNotFoundError(
      f"no library manifest at {path}; build one with experiments.build_library"
    )
  manifest = json.loads(path.read_text(encoding="utf-8"))
  if manifest.get("compiler") != COMPILER_VERSION:
    raise ValueError(
      f"{path} was built by {manifest.get('compiler')}, this is {COMPILER_VERSION}: rebuild it"
    )
  return manifest


def load_compiled_library(
  manifest: str | Path,
  reg: Registry = registry,
  world_model: Any = None,
  names: Iterable[str] | None = None,
  progress: bool = False,
  facets: Any = None,
) -> list[str]:
  """Registers the manifest's services (all, or ``names``) in ``reg``; returns their names.

  Quarantined tools keep their quarantine; they and external-effect tools run on
  ``world_model`` (the deterministic fallback when None). With a ``FacetRegistry`` as
  ``facets``, newly loaded services get generic facets there, so walks can compose them.
  """
  _quiet()
  data = read_manifest(manifest)
  wanted = set(names) if names is not None else None
  loaded, fresh = [], []
  for entry in tqdm(data["services"], desc="load", disable=not progress):
    if wanted is not None and entry["name"] not in wanted:
      continue
    spec = ServiceSpec.model_validate(entry["spec"])
    synthesis = entry.get("synthesis") or {}
    if synthesis.get("accepted"):
      if spec.name not in reg:
        from compoworld.synthesis.synthesizer import load_synthesized  # runs it in the sandbox

        load_synthesized(synthesis["module_path"], reg, world_model)
        fresh.append(spec.name)
      loaded.append(spec.name)
      continue
    if spec.name in reg and getattr(reg.get(spec.name), "service_spec", None) == spec:
      reg.get(spec.name).world_model = world_model  # loaded before: only the world model changes
      loaded.append(spec.name)
      continue
    quarantined = {t["name"]: t["reason"] for t in entry["tools"] if t["status"] == "quarantined"}
    cls = compile_service(spec, quarantined)
    cls.world_model = world_model
    reg.register(cls)
    loaded.append(cls.name)
    fresh.append(cls.name)
  if wanted is not None and set(loaded) != wanted:
    raise KeyError(f"not in the manifest: {sorted(wanted - set(loaded))}")
  if facets is not None:
    from compoworld.specs.compiled_facets import register_facets  # imports the task author

    # generic facets come from compiled plans; a synthesized service has none to offer
    register_facets([reg.get(n) for n in fresh if _compiled(reg.get(n))], facets)
  return loaded
