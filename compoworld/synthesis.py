"""The LLM synthesis path: a model writes a service module and its tests; a sandbox judges it.

``Synthesizer.synthesize(spec)`` prompts an OpenAI-compatible model (through
``compoworld.llm.make_client``) to implement ``spec`` against the project's service API, then runs
the module, the module's own tests and the independent adversarial suite in a child process with
a timeout, a memory limit and no network (``compoworld.sandbox_runner``). Problems go back to the
model for a bounded number of revisions. The verdict: the module is accepted (saved under the
library, with the tools that failed the suite quarantined) or all its tools are quarantined.
Generated code is imported into this process only by ``load_synthesized``, and only once
accepted.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from compoworld.domains import DOMAINS
from compoworld.registry import Registry, registry
from compoworld.service import Service
from compoworld.specs import ServiceSpec
from compoworld.world_model import simulate

_REPO = Path(__file__).resolve().parent.parent
_RUNNER = Path(__file__).resolve().parent / "sandbox_runner.py"
_FENCE = re.compile(r"```(?:python|py)?\s*\n(.*?)```", re.DOTALL)

_API = '''from compoworld import Service, ServiceState, Table, Record, tool, NotFound, InvalidArgument, Conflict
from compoworld.query import paginate


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
  """Runs a generated module in the sandbox; returns its report (see ``sandbox_runner``)."""
  with tempfile.TemporaryDirectory(prefix="synth_") as tmp:
    work = Path(tmp)
    (work / "service.py").write_text(module, encoding="utf-8")
    if tests:
      (work / "tests.py").write_text(tests, encoding="utf-8")
    (work / "spec.json").write_text(spec.model_dump_json(), encoding="utf-8")
    cmd = [
      sys.executable,
      "-I",
      str(_RUNNER),
      str(work),
      str(_REPO),
      str(memory_mb),
      str(int(timeout) + 1),
    ]
    try:
      proc = subprocess.run(
        cmd,
        cwd=work,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={"PATH": "/usr/bin:/bin"},
      )
    except subprocess.TimeoutExpired:
      return {"ok": False, "error": f"timed out after {timeout:g} s", "tools": {}, "tests": {}}
  lines = proc.stdout.strip().splitlines()
  try:
    return json.loads(lines[-1])
  except (IndexError, json.JSONDecodeError):
    tail = (proc.stderr or proc.stdout)[-400:].strip()
    return {
      "ok": False,
      "error": f"the sandbox died (exit {proc.returncode}): {tail}",
      "tools": {},
      "tests": {},
    }


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
      {"role": "system", "content": _SYSTEM.format(api=_API.format(domains=", ".join(DOMAINS)))},
      {"role": "user", "content": user},
    ]

  def synthesize(self, spec: ServiceSpec) -> Verdict:
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
    record = {**verdict.to_json(), "spec": spec.model_dump(mode="json")}
    (self.library_dir / f"{spec.name}.json").write_text(
      json.dumps(record, indent=1), encoding="utf-8"
    )
    return verdict


def load_synthesized(
  path: str | Path, reg: Registry = registry, world_model: Any = None
) -> type[Service]:
  """Imports an accepted module (its ``.json`` verdict beside it) and registers its service;
  quarantined tools are rerouted to the world model."""
  path = Path(path)
  record = json.loads(path.with_suffix(".json").read_text(encoding="utf-8"))
  if not record.get("accepted"):
    raise ValueError(f"{path} was not accepted by the sandbox; it is never imported")
  spec = ServiceSpec.model_validate(record["spec"])
  module_spec = importlib.util.spec_from_file_location(f"compoworld_synthesized.{spec.name}", path)
  module = importlib.util.module_from_spec(module_spec)
  module_spec.loader.exec_module(module)
  cls = next(
    v
    for v in vars(module).values()
    if isinstance(v, type) and issubclass(v, Service) and getattr(v, "name", None) == spec.name
  )
  by_name = {t.name: t for t in spec.tools}
  cls.world_model = world_model
  for name in record["quarantined"]:
    if name in cls.tools:
      cls.tools[name] = dataclasses.replace(cls.tools[name], method=_simulated(by_name[name]))
  reg.register(cls)
  return cls


def _simulated(tool):
  def method(self, **arguments: Any) -> Any:
    return simulate(self, tool, arguments)

  return method
