"""The LLM synthesis path: a model writes a service module and its tests; a sandbox judges it.

``Synthesizer.synthesize(spec)`` prompts an OpenAI-compatible model (through
``compoworld.llm.make_client``) to implement ``spec`` against the project's service API, then
judges it with ``run_sandboxed``: the module runs only inside the bubblewrap sandbox
(``compoworld.synthesis.sandbox``), while this process drives its own tests and the independent adversarial
suite through a checked channel and writes the verdict. Problems go back to the model for a
bounded number of revisions. The verdict: the module is accepted (saved under the library, with
the tools that failed the suite quarantined) or all its tools are quarantined. Generated code
never runs in this process: ``load_synthesized`` registers a proxy whose tools run in the
sandbox. Where the sandbox cannot be set up, synthesis refuses (``SandboxUnavailable``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import tempfile
import time
from pathlib import Path
from typing import Any

from compoworld.runtime.domains import DOMAINS
from compoworld.runtime.registry import Registry, registry
from compoworld.runtime.service import Service
from compoworld.specs.ingest import ServiceSpec
from compoworld.specs.validator import validate
from compoworld.synthesis.sandbox import Limits, SandboxError, ensure_available
from compoworld.synthesis.sandboxed import ModuleHost, proxy_class

_FENCE = re.compile(r"```(?:python|py)?\s*\n(.*?)```", re.DOTALL)

#: The service API by example, shown to the model (and the module ``make bench`` sandboxes).
_API = '''from compoworld import Service, ServiceState, Table, Record, tool, NotFound, InvalidArgument, Conflict
from compoworld.runtime.query import paginate


class Note(Record):  # records are frozen pydantic models; sequences are tuples
  title: str
  body: str = ""


class NotesState(ServiceState):  # seed, now (logical clock) and id_seq are inherited
  notes: Table[Note]


class Notes(Service):
  name = "notes"
  domain = "productivity"  # one of: {domains}
  description = "Personal notes."
  State = NotesState

  @classmethod
  def generate(cls, seed: int, size: int | None) -> NotesState:
    state = NotesState(seed=seed, notes=[])
    state.notes.insert(Note(id=state.new_id("note"), title="Welcome"))
    return state

  @tool(mutates=True, produces=(), consumes=("title",))
  def create_note(self, title: str, body: str = "") -> dict:
    """Create a note.

    Args:
      title: the note's title.
      body: its text.
    """
    note = self.state.notes.insert(Note(id=self.state.new_id("note"), title=title, body=body))
    return note.model_dump()

  @tool(mutates=False)
  def get_note(self, note_id: str) -> dict:
    """Read one note.

    Args:
      note_id: the note's id.
    """
    return self.state.notes.get(note_id).model_dump()  # a missing id is a 404 NotFound
'''

_SYSTEM = """You write tool services for CompoWorld, a Python framework of typed, deterministic
tool services. The service API, by example:

```python
{api}
```

Rules: one Service subclass whose `name` is exactly the one given; one @tool method per tool of
the spec, with the same tool name (pass name="..." to @tool when it is not an identifier) and one
argument per schema property with the same name and a matching type; a Google-style docstring with
every argument under Args:; `mutates=True` only for tools that change state; errors by raising
NotFound (unknown id), InvalidArgument (bad value) or Conflict (business rule); no I/O, no
network, no wall clock, no global randomness (only random.Random(seed) in generate).
Also write tests: functions `test_*(service_cls)` that create a service with
`service_cls.create(seed=0)` and check calls with `svc.call(tool, arguments)`, which returns
{{"ok": true, "status": 200, "data": ...}} or {{"ok": false, "status": 4xx, "error": {{...}}}}.
Answer with exactly two fenced python blocks: the module first, then the tests."""


def example_module() -> str:
  """The example service module of the prompt (``notes``: create_note, get_note)."""
  return _API.format(domains=", ".join(DOMAINS))


@dataclasses.dataclass
class Verdict:
  """What the sandbox decided about one generated module."""

  service: str
  accepted: bool
  module_path: str | None  # where the accepted module was saved
  quarantined: dict[str, str]  # tool → reason
  attempts: int
  error: str = ""
  tests: dict[str, str] = dataclasses.field(default_factory=dict)

  def to_json(self) -> dict[str, Any]:
    return dataclasses.asdict(self)


def parse_answer(text: str | None) -> tuple[str, str]:
  """The module and the tests from a model's answer (two fenced python blocks)."""
  blocks = _FENCE.findall(text or "")
  if not blocks:
    raise ValueError("the answer has no fenced python block")
  return blocks[0], blocks[1] if len(blocks) > 1 else ""


def run_sandboxed(
  spec: ServiceSpec,
  module: str,
  tests: str = "",
  timeout: float = 60.0,
  memory_mb: int = 1024,
) -> dict[str, Any]:
  """Judges a generated module; returns the report this process builds from what it saw.

  The module runs only in the sandbox (``compoworld.synthesis.sandboxed.ModuleHost``), which loads it,
  runs its own tests and answers the calls of the adversarial suite; the suite, the checks of
  every answer and the verdict are this process's. Any broken rule of the channel, an early exit,
  or ``timeout`` seconds spent in all is a rejection with the reason. Raises
  ``SandboxUnavailable`` (why, and how to fix it) where the sandbox cannot run.
  """
  ensure_available()
  report: dict[str, Any] = {"ok": False, "error": "", "tools": {}, "tests": {}}
  with tempfile.TemporaryDirectory(prefix="synth_") as tmp:
    work = Path(tmp)
    (work / "service.py").write_text(module, encoding="utf-8")
    if tests:
      (work / "tests.py").write_text(tests, encoding="utf-8")
    limits = Limits(memory_mb=memory_mb, cpu_seconds=int(timeout) + 1)
    host = ModuleHost(
      spec.name,
      work / "service.py",
      work / "tests.py" if tests else None,
      limits,
      restart=False,
      timeout=timeout,
      deadline=time.monotonic() + timeout,
    )
    try:
      _judge(spec, host, report)
    except SandboxError as err:
      report.update(ok=False, error=str(err))
    finally:
      host.close()
  return report


def _judge(spec: ServiceSpec, host: ModuleHost, report: dict[str, Any]) -> None:
  described = host.describe()
  implemented = {t["name"] for t in described["tools"]}
  report["tools"] = {
    t.name: "not implemented by the module" for t in spec.tools if t.name not in implemented
  }
  report["tests"] = {name: host.test(name) for name in described["tests"]}
  failed_tests = [n for n, r in report["tests"].items() if r != "passed"]
  if failed_tests:
    report["error"] = f"its own tests fail: {', '.join(failed_tests)}"
    return
  present = [t for t in spec.tools if t.name in implemented]
  try:
    failures = validate(proxy_class(host, spec), present)
  except SandboxError:
    raise
  except Exception as err:
    report["error"] = f"the adversarial suite could not run: {type(err).__name__}: {err}"
    return
  if host.sandbox.failure is not None:  # a call broke the channel: the suite saw a 500 there
    raise SandboxError(host.sandbox.failure)
  for name, failure in failures.items():
    report["tools"][name] = failure.reason()[:500]
  # A service is there to hold state: unless one of its writes passes (any tool, for a read-only
  # spec), the world model serves it as well, and a module that fakes its answers is out.
  passing = {t.name for t in spec.tools} - set(report["tools"])
  writes = {t.name for t in spec.tools if t.annotations.get("readOnlyHint") is not True}
  if not passing or (writes and not passing & writes):
    report["error"] = f"no {'write' if writes else 'tool'} passes the adversarial suite"
    return
  report.update(ok=True, described=described)


class Synthesizer:
  """Writes services with a model, judged in the sandbox, saved under ``library_dir``."""

  def __init__(
    self,
    client: Any,
    model: str,
    library_dir: str | Path,
    revisions: int = 2,
    timeout: float = 60.0,
    memory_mb: int = 1024,
  ):
    self.client, self.model, self.revisions = client, model, revisions
    self.library_dir = Path(library_dir)
    self.timeout, self.memory_mb = timeout, memory_mb

  def _messages(self, spec: ServiceSpec) -> list[dict[str, str]]:
    tools = [
      {
        "name": t.name,
        "description": t.description,
        "input_schema": t.input_schema,
        "annotations": t.annotations,
      }
      for t in spec.tools
    ]
    user = (
      f"Implement the service `{spec.name}` (domain `{spec.domain}`): {spec.description}\n"
      f"Its tools (MCP tools/list):\n{json.dumps(tools, indent=1)}"
    )
    return [
      {"role": "system", "content": _SYSTEM.format(api=example_module())},
      {"role": "user", "content": user},
    ]

  def synthesize(self, spec: ServiceSpec) -> Verdict:
    ensure_available()  # no model call for code that could not be judged
    messages = self._messages(spec)
    report: dict[str, Any] = {"error": "no attempt", "tools": {}, "tests": {}}
    for attempt in range(1, self.revisions + 2):
      reply = self.client.chat.completions.create(
        model=self.model, messages=messages, temperature=0.0
      )
      text = reply.choices[0].message.content or ""
      try:
        module, tests = parse_answer(text)
      except ValueError as err:
        report = {"ok": False, "error": str(err), "tools": {}, "tests": {}}
      else:
        report = run_sandboxed(spec, module, tests, self.timeout, self.memory_mb)
        if report.get("ok") and not report["tools"]:
          return self._accept(spec, module, report, attempt)
      problems = report.get("error") or json.dumps(report.get("tools"))
      messages += [
        {"role": "assistant", "content": text},
        {
          "role": "user",
          "content": f"The sandbox rejected it: {problems}\nFix the module and tests.",
        },
      ]
    if report.get("ok"):  # it runs, but some tools still fail the suite: quarantine those
      return self._accept(spec, module, report, attempt)
    reason = f"synthesis failed: {report.get('error')}"
    return Verdict(
      spec.name,
      False,
      None,
      {t.name: reason for t in spec.tools},
      attempt,
      report.get("error", ""),
      report.get("tests", {}),
    )

  def _accept(
    self, spec: ServiceSpec, module: str, report: dict[str, Any], attempts: int
  ) -> Verdict:
    self.library_dir.mkdir(parents=True, exist_ok=True)
    path = self.library_dir / f"{spec.name}.py"
    path.write_text(module, encoding="utf-8")
    verdict = Verdict(
      spec.name, True, str(path), dict(report["tools"]), attempts, "", report.get("tests", {})
    )
    record = {
      **verdict.to_json(),
      "spec": spec.model_dump(mode="json"),
      "described": report["described"],
      "module_sha256": _sha256(module.encode()),
    }
    (self.library_dir / f"{spec.name}.json").write_text(
      json.dumps(record, indent=1), encoding="utf-8"
    )
    return verdict


def load_synthesized(
  path: str | Path, reg: Registry = registry, world_model: Any = None
) -> type[Service]:
  """Registers the service of an accepted module (its ``.json`` verdict beside it): a proxy
  whose tools run in the sandbox (``compoworld.synthesis.sandboxed``); the module is never imported here.
  Quarantined tools are rerouted to the world model."""
  path = Path(path)
  record = json.loads(path.with_suffix(".json").read_text(encoding="utf-8"))
  if not record.get("accepted"):
    raise ValueError(f"{path} was not accepted by the sandbox; it is never imported")
  if "described" not in record:
    raise ValueError(
      f"{path} was accepted before generated code ran only in the sandbox; synthesize it again"
    )
  if _sha256(path.read_bytes()) != record.get("module_sha256"):
    raise ValueError(f"{path} changed after the sandbox accepted it; synthesize it again")
  ensure_available()
  spec = ServiceSpec.model_validate(record["spec"])
  host = ModuleHost(spec.name, path)
  host.described = record["described"]
  cls = proxy_class(host, spec, record["quarantined"], world_model)
  reg.register(cls)
  return cls


def _sha256(data: bytes) -> str:
  return hashlib.sha256(data).hexdigest()
