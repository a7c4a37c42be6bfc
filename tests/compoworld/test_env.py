"""The composed environment: meta-tools, routing (eq. 1), namespacing, fork, hash, diff."""

from __future__ import annotations

import concurrent.futures
import json
import re
import sys
import time
from typing import Any

import jsonschema
import pytest
from openai.types.chat import ChatCompletionFunctionTool

import compoworld.compose.env as env_module
from compoworld import (
  META_TOOL_NAMES,
  META_TOOLS,
  ComposedEnv,
  Record,
  Registry,
  Service,
  ServiceState,
  Table,
  registry,
  tool,
)
from compoworld.runtime.registry import UnknownService
from envs.calendar import CalendarService
from tests.contract import call_ok

OPENAI_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


class Note(Record):
  text: str


class NotesState(ServiceState):
  notes: Table[Note]


class ToyNotesService(Service):
  name = "toy_notes"
  domain = "productivity"
  description = "Plain text notes."
  State = NotesState

  @classmethod
  def generate(cls, seed: int, size: int | None) -> NotesState:
    state = NotesState(seed=seed, notes={})
    for i in range(size if size is not None else 2):
      state.notes.insert(Note(id=state.new_id("note"), text=f"note {i} of seed {seed}"))
    return state

  @tool(mutates=False)
  def list_notes(self) -> list[Note]:
    """List every note."""
    return list(self.state.notes)

  @tool(mutates=True)
  def add_note(self, text: str) -> Note:
    """Write a new note.

    Args:
      text: the note's text.
    """
    return self.state.notes.insert(Note(id=self.state.new_id("note"), text=text))

  @tool(mutates=True)
  def edit_note(self, note_id: str, text: str) -> Note:
    """Replace a note's text.

    Args:
      note_id: the note's id.
      text: the new text.
    """
    return self.state.notes.update(note_id, text=text)

  @tool(mutates=True)
  def explode(self, note_id: str) -> None:
    """Delete a note, then crash.

    Args:
      note_id: the note's id.
    """
    self.state.notes.delete(note_id)
    raise ValueError("kaboom")


class Tally(Record):
  amount: float


class TallyState(ServiceState):
  tallies: Table[Tally]


class ToyTallyService(Service):
  name = "toy_tally"
  domain = "finance"
  description = "Running money tallies."
  State = TallyState

  @classmethod
  def generate(cls, seed: int, size: int | None) -> TallyState:
    return TallyState(seed=seed, tallies={"t1": {"id": "t1", "amount": float(seed)}})

  @tool(mutates=False)
  def total(self) -> float:
    """Sum of every tally."""
    return sum(t.amount for t in self.state.tallies)

  @tool(mutates=True)
  def add(self, amount: float) -> Tally:
    """Add a tally.

    Args:
      amount: how much.
    """
    return self.state.tallies.insert(Tally(id=self.state.new_id("tly"), amount=amount))


SERVICES = {"calendar": CalendarService, "toy_notes": ToyNotesService, "toy_tally": ToyTallyService}


def make_env(seed: int = 0) -> ComposedEnv:
  services = {n: cls(cls.generate(seed, None)) for n, cls in SERVICES.items()}
  return ComposedEnv(services, task_services=["calendar", "toy_notes"], seed=seed)


@pytest.fixture
def env() -> ComposedEnv:
  return make_env()


def hashes(env: ComposedEnv) -> dict[str, str]:
  return {n: s.state_hash() for n, s in env.services.items()}


def assert_error(result: dict[str, Any], status: int, type_: str, *needles: str) -> str:
  assert set(result) == {"ok", "status", "error"}, result
  assert result["ok"] is False and result["status"] == status, result
  assert set(result["error"]) == {"type", "message"} and result["error"]["type"] == type_
  for needle in needles:
    assert needle in result["error"]["message"], (needle, result)
  return result["error"]["message"]


def data(result: dict[str, Any]) -> Any:
  assert set(result) == {"ok", "status", "data"} and result["ok"] is True, result
  assert result["status"] == 200
  return result["data"]


# --- construction --------------------------------------------------------------------------


def test_task_services_and_distractors(env):
  assert env.task_services == ("calendar", "toy_notes")
  assert env.distractors == ("toy_tally",)
  assert env.seed == 0
  everything = ComposedEnv({"toy_notes": ToyNotesService.create()})
  assert everything.task_services == ("toy_notes",) and everything.distractors == ()


# --- list_services -------------------------------------------------------------------------


def test_list_services_lists_everything_with_domain_and_description(env):
  listed = data(env.list_services())
  assert sorted(s["name"] for s in listed) == sorted(SERVICES)
  for entry in listed:
    assert set(entry) == {"name", "domain", "description"}
    cls = SERVICES[entry["name"]]
    assert (entry["domain"], entry["description"]) == (cls.domain, cls.description)
  assert "toy_tally" in [s["name"] for s in listed], "distractors are listed too"


def order(env: ComposedEnv) -> list[str]:
  return [s["name"] for s in data(env.list_services())]


def test_list_services_order_is_a_seeded_shuffle():
  many = {f"toy_{i}": ToyTallyService.create() for i in range(8)}
  orders = {seed: order(ComposedEnv(many, seed=seed)) for seed in range(10)}
  for seed, names in orders.items():
    assert names == order(ComposedEnv(dict(reversed(list(many.items()))), seed=seed))
    assert sorted(names) == sorted(many)
  assert len({tuple(o) for o in orders.values()}) > 5, "the order depends on the seed"
  assert any(o != sorted(many) for o in orders.values())


# --- list_tools / describe_tool ------------------------------------------------------------


def test_list_tools(env):
  listed = data(env.list_tools("toy_notes"))
  assert listed["service"] == "toy_notes"
  assert listed["tools"] == [
    {"name": "list_notes", "description": "List every note.", "mutates": False},
    {"name": "add_note", "description": "Write a new note.", "mutates": True},
    {"name": "edit_note", "description": "Replace a note's text.", "mutates": True},
    {"name": "explode", "description": "Delete a note, then crash.", "mutates": True},
  ]
  cal = data(env.list_tools("calendar"))["tools"]
  assert [t["name"] for t in cal] == CalendarService.tool_names()
  assert all("\n" not in t["description"] for t in cal), "summaries are one line"


def test_describe_tool(env):
  described = data(env.describe_tool("calendar", "update_event"))
  spec = CalendarService.spec("update_event")
  assert set(described) == {"service", "name", "description", "input_schema", "mutates"}
  assert described == {
    "service": "calendar",
    "name": "update_event",
    "description": spec.description,
    "input_schema": spec.input_schema,
    "mutates": True,
  }
  assert "event_id" in described["input_schema"]["required"]


@pytest.mark.parametrize("tool_name", ["nope", 3, None])
def test_describe_unknown_tool_is_404_listing_tools(env, tool_name):
  msg = assert_error(
    env.describe_tool("toy_notes", tool_name), 404, "unknown_tool", repr(tool_name)
  )
  assert msg.endswith("list_notes, add_note, edit_note, explode")


@pytest.mark.parametrize("service", ["nope", "", "Calendar", 7, None, ["calendar"]])
def test_unknown_service_is_404_listing_services(env, service):
  before = env.state_hash()
  for result in (
    env.list_tools(service),
    env.describe_tool(service, "list_notes"),
    env.call_tool(service, "list_notes", {}),
  ):
    msg = assert_error(result, 404, "unknown_service", repr(service))
    assert msg.endswith("available services: calendar, toy_notes, toy_tally")
  assert env.state_hash() == before


# --- call_tool and eq. 1 -------------------------------------------------------------------


def test_call_tool_touches_only_its_service(env):
  h0 = hashes(env)
  note = data(env.call_tool("toy_notes", "add_note", {"text": "hello"}))
  assert note["text"] == "hello" and note["id"] in env.services["toy_notes"].state.notes
  h1 = hashes(env)
  assert h1["toy_notes"] != h0["toy_notes"]
  assert {n: h for n, h in h1.items() if n != "toy_notes"} == {
    n: h for n, h in h0.items() if n != "toy_notes"
  }
  event = call_ok(env.services["calendar"], "list_events", {"limit": 1})["items"][0]
  data(env.call_tool("calendar", "cancel_event", {"event_id": event["id"]}))
  h2 = hashes(env)
  assert h2["calendar"] != h1["calendar"]
  assert (h2["toy_notes"], h2["toy_tally"]) == (h1["toy_notes"], h1["toy_tally"])


def test_call_tool_failures_are_envelopes_and_atomic(env):
  before = env.state_hash()
  note_id = env.services["toy_notes"].state.notes.ids()[0]
  assert_error(env.call_tool("toy_notes", "explode", {"note_id": note_id}), 500, "internal_error")
  assert_error(env.call_tool("toy_notes", "add_note", {}), 400, "invalid_argument", "text")
  assert_error(env.call_tool("toy_notes", "add_note", ["x"]), 400, "invalid_argument")
  assert_error(env.call_tool("toy_notes", "nope", {}), 404, "unknown_tool", "add_note")
  assert env.state_hash() == before


# --- call_meta -----------------------------------------------------------------------------


def test_meta_tool_schemas():
  assert META_TOOL_NAMES == ("list_services", "list_tools", "describe_tool", "call_tool")
  assert [t["function"]["name"] for t in META_TOOLS] == list(META_TOOL_NAMES)
  required = {t["function"]["name"]: t["function"]["parameters"]["required"] for t in META_TOOLS}
  assert required == {
    "list_services": [],
    "list_tools": ["service"],
    "describe_tool": ["service", "tool"],
    "call_tool": ["service", "tool"],
  }
  for t in META_TOOLS:
    jsonschema.Draft202012Validator.check_schema(t["function"]["parameters"])
    assert ChatCompletionFunctionTool.model_validate(t).function.description


def test_call_meta_happy_paths(env):
  assert env.call_meta("list_services") == env.list_services()
  assert env.call_meta("list_services", {}) == env.list_services()
  assert env.call_meta("list_tools", {"service": "calendar"}) == env.list_tools("calendar")
  assert env.call_meta(
    "describe_tool", {"service": "toy_notes", "tool": "add_note"}
  ) == env.describe_tool("toy_notes", "add_note")
  h0 = hashes(env)
  added = data(
    env.call_meta(
      "call_tool", {"service": "toy_tally", "tool": "add", "arguments": {"amount": 2.5}}
    )
  )
  assert added["amount"] == 2.5 and hashes(env)["toy_tally"] != h0["toy_tally"]
  assert data(env.call_meta("call_tool", {"service": "toy_tally", "tool": "total"})) == 2.5


MALFORMED = [
  # (meta-tool, arguments, status, type, needles)
  ("list_services", [], 400, "invalid_argument", ["arguments must be a JSON object"]),
  ("list_tools", "calendar", 400, "invalid_argument", ["arguments must be a JSON object"]),
  ("call_tool", 5, 400, "invalid_argument", ["call_tool"]),
  (
    "list_services",
    {"service": "calendar"},
    400,
    "invalid_argument",
    ["unknown argument 'service'"],
  ),
  ("list_tools", {}, 400, "invalid_argument", ["missing required argument 'service'"]),
  ("list_tools", None, 400, "invalid_argument", ["'service'"]),
  ("describe_tool", {"service": "calendar"}, 400, "invalid_argument", ["'tool'"]),
  ("describe_tool", {"tool": "x"}, 400, "invalid_argument", ["'service'"]),
  (
    "call_tool",
    {"tool": "list_notes"},
    400,
    "invalid_argument",
    ["missing required argument 'service'"],
  ),
  ("call_tool", {"service": "toy_notes"}, 400, "invalid_argument", ["'tool'"]),
  ("list_tools", {"service": 5}, 400, "invalid_argument", ["'service' expected string"]),
  ("list_tools", {"service": None}, 400, "invalid_argument", ["'service' expected string"]),
  ("describe_tool", {"service": "calendar", "tool": ["x"]}, 400, "invalid_argument", ["'tool'"]),
  ("call_tool", {"service": {"n": 1}, "tool": "add"}, 400, "invalid_argument", ["'service'"]),
  (
    "call_tool",
    {"service": "toy_notes", "tool": "add_note", "arguments": "text=hi"},
    400,
    "invalid_argument",
    ["'arguments' expected object"],
  ),
  (
    "call_tool",
    {"service": "toy_notes", "tool": "add_note", "arguments": ["hi"]},
    400,
    "invalid_argument",
    ["'arguments' expected object"],
  ),
  (
    "call_tool",
    {"service": "toy_notes", "tool": "add_note", "args": {"text": "hi"}},
    400,
    "invalid_argument",
    ["unknown argument 'args'"],
  ),
  (
    "call_tool",
    {"service": "toy_notes", "tool": "add_note", "arguments": {}},
    400,
    "invalid_argument",
    ["add_note: missing required argument 'text'"],
  ),
  (
    "call_tool",
    {"service": "toy_notes", "tool": "add_note", "arguments": {"text": 1}},
    400,
    "invalid_argument",
    ["'text' expected string"],
  ),
  ("call_tool", {"service": "nope", "tool": "x"}, 404, "unknown_service", ["'nope'"]),
  ("call_tool", {"service": "toy_notes", "tool": "x"}, 404, "unknown_tool", ["'x'"]),
  ("describe_tool", {"service": "calendar", "tool": "x"}, 404, "unknown_tool", ["list_events"]),
  ("list_tools", {"service": "nope"}, 404, "unknown_service", ["toy_tally"]),
  (
    "call_service",
    {},
    404,
    "unknown_tool",
    ["list_services, list_tools, describe_tool, call_tool"],
  ),
  ("", {}, 404, "unknown_tool", ["meta-tools"]),
  (None, {}, 404, "unknown_tool", ["meta-tools"]),
  (["list_tools"], {}, 404, "unknown_tool", ["meta-tools"]),
  ({"name": "list_tools"}, {}, 404, "unknown_tool", ["meta-tools"]),
]


@pytest.mark.parametrize(("name", "args", "status", "type_", "needles"), MALFORMED)
def test_call_meta_malformed_input_gives_error_envelopes(env, name, args, status, type_, needles):
  before = env.state_hash()
  result = env.call_meta(name, args)
  assert_error(result, status, type_, *needles)
  assert json.loads(json.dumps(result)) == result
  assert env.state_hash() == before


def test_call_meta_tool_failure_is_rolled_back(env):
  before = env.state_hash()
  note_id = env.services["toy_notes"].state.notes.ids()[0]
  result = env.call_meta(
    "call_tool", {"service": "toy_notes", "tool": "explode", "arguments": {"note_id": note_id}}
  )
  assert_error(result, 500, "internal_error", "ValueError: kaboom")
  assert env.state_hash() == before


# --- namespaced tools ----------------------------------------------------------------------


def test_tool_schemas_are_namespaced_openai_functions(env):
  schemas = env.tool_schemas()
  names = [s["function"]["name"] for s in schemas]
  expected = [f"{n}__{t}" for n, cls in SERVICES.items() for t in cls.tools]
  assert names == expected and len(set(names)) == len(names)
  for s in schemas:
    assert OPENAI_NAME.match(s["function"]["name"]), s["function"]["name"]
    ChatCompletionFunctionTool.model_validate(s)
    service, _, tool_name = s["function"]["name"].partition("__")
    spec = SERVICES[service].spec(tool_name)
    assert s["function"]["parameters"] == spec.input_schema
    assert s["function"]["description"] == spec.description


def test_every_namespaced_name_routes_to_its_tool(env):
  for s in env.fork().tool_schemas():
    result = env.fork().call(s["function"]["name"], {"__bogus": 1})
    assert_error(result, 400, "invalid_argument", "unknown argument '__bogus'")


def test_call_routes_namespaced_names(env):
  h0 = hashes(env)
  assert data(env.call("toy_tally__total")) == 0.0
  note = data(env.call("toy_notes__add_note", {"text": "via call"}))
  assert env.services["toy_notes"].state.notes.get(note["id"]).text == "via call"
  h1 = hashes(env)
  assert h1["toy_notes"] != h0["toy_notes"] and h1["calendar"] == h0["calendar"]


@pytest.mark.parametrize(
  ("name", "type_", "needle"),
  [
    ("toy_notes", "unknown_tool", "service__tool"),
    ("toy_notes_add_note", "unknown_tool", "service__tool"),
    ("", "unknown_tool", "service__tool"),
    (None, "unknown_tool", "service__tool"),
    (42, "unknown_tool", "service__tool"),
    ("toy_notes__nope", "unknown_tool", "add_note"),
    ("toy_notes__", "unknown_tool", "add_note"),
    ("nope__add_note", "unknown_service", "toy_notes"),
    ("__add_note", "unknown_service", "toy_notes"),
  ],
)
def test_call_with_a_bad_name_is_404(env, name, type_, needle):
  before = env.state_hash()
  assert_error(env.call(name, {"text": "x"}), 404, type_, needle)
  assert env.state_hash() == before


# --- fork, hash, diff ----------------------------------------------------------------------


def test_state_hash_is_deterministic_and_content_based(env):
  assert re.fullmatch(r"[0-9a-f]{32}", env.state_hash())
  assert env.state_hash() == make_env().state_hash()
  assert env.state_hash() != make_env(seed=1).state_hash()
  reordered = ComposedEnv(dict(reversed(list(env.fork().services.items()))))
  assert reordered.state_hash() == env.state_hash()
  h0 = env.state_hash()
  env.call("toy_tally__add", {"amount": 1})
  assert env.state_hash() != h0


def test_fork_is_independent_both_ways(env):
  twin = env.fork()
  assert twin.state_hash() == env.state_hash() and env.diff(twin) == {}
  assert (twin.task_services, twin.distractors, twin.seed) == (
    env.task_services,
    env.distractors,
    env.seed,
  )
  assert all(twin.services[n] is not env.services[n] for n in env.services)
  h_env = env.state_hash()
  data(twin.call("toy_notes__add_note", {"text": "only in the fork"}))
  assert env.state_hash() == h_env and twin.state_hash() != h_env
  h_twin = twin.state_hash()
  data(env.call("toy_tally__add", {"amount": 9}))
  assert twin.state_hash() == h_twin
  assert data(twin.call("toy_tally__total")) == 0.0 and data(env.call("toy_tally__total")) == 9.0
  texts = [n["text"] for n in data(env.call("toy_notes__list_notes"))]
  assert "only in the fork" not in texts


def test_diff_after_a_write_shows_exactly_that_record(env):
  twin = env.fork()
  note_id = env.services["toy_notes"].state.notes.ids()[0]
  data(twin.call("toy_notes__edit_note", {"note_id": note_id, "text": "edited"}))
  assert env.diff(twin) == {
    "toy_notes": {
      "notes": {"updated": [{"id": note_id, "fields": {"text": ["note 0 of seed 0", "edited"]}}]},
      "_scalars": {"now": ["2026-03-02T09:00:00", "2026-03-02T09:01:00"]},
    }
  }
  added = data(twin.call("toy_tally__add", {"amount": 1.5}))
  diff = env.diff(twin)
  assert set(diff) == {"toy_notes", "toy_tally"}
  assert diff["toy_tally"]["tallies"] == {"added": [added["id"]]}
  assert diff["toy_tally"]["_scalars"]["id_seq"] == [0, 1]


def test_diff_needs_the_same_services(env):
  other = ComposedEnv({"toy_notes": ToyNotesService.create()})
  with pytest.raises(ValueError, match="different service sets"):
    env.diff(other)


# --- from_services and the registry --------------------------------------------------------


def test_public_imports_and_registry():
  from compoworld import ComposedEnv as Imported
  from compoworld import registry as imported_registry

  assert Imported is ComposedEnv and imported_registry is registry
  assert "calendar" in registry.names() and registry.names() == sorted(registry.names())
  assert registry.get("calendar") is CalendarService
  assert "calendar" in registry and len(registry) == len(registry.names())
  assert "calendar" in registry.by_domain("productivity")
  assert "toy_notes" not in registry and "toy_counter" not in registry


def test_registry_get_unknown_lists_the_names():
  with pytest.raises(UnknownService) as err:
    registry.get("no_such_service")
  assert isinstance(err.value, KeyError)
  message = str(err.value)
  assert "'no_such_service'" in message and "calendar" in message
  assert message.endswith(", ".join(registry.names()))


def test_a_private_registry():
  reg = Registry(providers=())
  assert reg.names() == [] and len(reg) == 0
  assert reg.register(ToyNotesService) is ToyNotesService
  reg.register(ToyNotesService)  # registering the same class again is harmless
  clash = type("OtherNotes", (ToyTallyService,), {"name": "toy_notes"})
  with pytest.raises(ValueError, match="'toy_notes' is already registered"):
    reg.register(clash)
  reg.register(ToyTallyService)
  assert reg.names() == ["toy_notes", "toy_tally"] and reg.by_domain("finance") == ["toy_tally"]
  reg.add_provider("tests.compoworld.no_such_provider")
  with pytest.raises(ModuleNotFoundError, match="no_such_provider"):
    reg.names()  # providers are imported lazily, on the next lookup


def test_registry_loads_once_for_threads_that_ask_at_once(monkeypatch):
  # Episodes played on threads all reach the first lookup together: none may see the
  # registry before its providers have finished registering.
  registry_module = sys.modules[
    "compoworld.runtime.registry"
  ]  # the package's `registry` is the object
  reg, imports = Registry(providers=("slow_provider",)), []

  def slow_import(module):
    imports.append(module)
    time.sleep(0.2)
    reg.register(ToyNotesService)

  monkeypatch.setattr(registry_module.importlib, "import_module", slow_import)
  with concurrent.futures.ThreadPoolExecutor(4) as pool:
    found = list(pool.map(lambda _: reg.get("toy_notes"), range(4)))
  assert found == [ToyNotesService] * 4 and imports == ["slow_provider"]


def test_from_services_builds_a_seeded_env():
  env = ComposedEnv.from_services(["calendar"], seed=2)
  assert list(env.services) == ["calendar"] and env.seed == 2
  assert env.task_services == ("calendar",) and env.distractors == ()
  assert env.state_hash() == ComposedEnv({"calendar": CalendarService.create(seed=2)}).state_hash()
  small = ComposedEnv.from_services(["calendar"], seed=2, size=4)
  assert len(small.services["calendar"].state.events) == 4


@pytest.fixture
def toy_registry(monkeypatch) -> Registry:
  reg = Registry(providers=())
  for cls in SERVICES.values():
    reg.register(cls)
  monkeypatch.setattr(env_module, "registry", reg)
  return reg


def test_from_services_with_distractors(toy_registry):
  env = ComposedEnv.from_services(["toy_notes", "calendar"], seed=3, distractors=["toy_tally"])
  assert list(env.services) == ["toy_notes", "calendar", "toy_tally"]
  assert env.task_services == ("toy_notes", "calendar") and env.distractors == ("toy_tally",)
  assert all(s.state.seed == 3 for s in env.services.values())
  assert sorted(order(env)) == sorted(SERVICES)
  again = ComposedEnv.from_services(["toy_notes", "calendar"], seed=3, distractors=["toy_tally"])
  assert order(again) == order(env) and again.state_hash() == env.state_hash()


@pytest.mark.parametrize(
  ("names", "distractors", "dupes"),
  [
    (["toy_notes", "toy_notes"], [], "['toy_notes']"),
    (["toy_notes"], ["toy_notes"], "['toy_notes']"),
    (["calendar", "toy_tally"], ["toy_tally", "calendar"], "['calendar', 'toy_tally']"),
  ],
)
def test_from_services_rejects_duplicates(toy_registry, names, distractors, dupes):
  with pytest.raises(ValueError, match=re.escape(f"services listed more than once: {dupes}")):
    ComposedEnv.from_services(names, distractors=distractors)


def test_from_services_unknown_name_lists_the_registered_ones():
  with pytest.raises(UnknownService, match="no service named 'no_such_service'; registered: "):
    ComposedEnv.from_services(["calendar", "no_such_service"])
