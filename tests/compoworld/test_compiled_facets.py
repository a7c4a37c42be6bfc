"""Compiled services get generic facets, and the procedural author composes them into tasks."""

import collections
from pathlib import Path

import pytest

import compoworld.compose.env
import compoworld.tasks.generate
from compoworld.runtime.registry import Registry, registry
from compoworld.specs.build import build_library, load_compiled_library
from compoworld.tasks.facets import FacetRegistry, facets
from compoworld.tasks.generate import generate_one
from compoworld.tasks.task import gate_failures

DATA = Path(__file__).parent / "data"
HAND_WRITTEN = ("crm", "helpdesk", "chat", "calendar", "drive", "simosphere", "projects")


@pytest.fixture(scope="module")
def library(tmp_path_factory):
  workdir = tmp_path_factory.mktemp("lib")
  build_library(DATA / "specs.jsonl", workdir, progress=False)
  return workdir


def _own_registry(monkeypatch) -> Registry:
  """A registry of the hand-written services that tasks and environments use for this test
  (the default registry stays as it is)."""
  reg = Registry(providers=())
  for name in registry.names():
    reg.register(registry.get(name))
  monkeypatch.setattr(compoworld.compose.env, "registry", reg)
  monkeypatch.setattr(compoworld.tasks.generate, "registry", reg)
  return reg


@pytest.fixture
def world(library, monkeypatch):
  """A registry with the hand-written services and the compiled ones, and facets of a few
  hand-written services plus the compiled ones."""
  reg = _own_registry(monkeypatch)
  freg = FacetRegistry(providers=())
  facets.load()
  for table in ("sources", "lookups", "sinks"):
    for key, found in getattr(facets, table).items():
      if key[0] in HAND_WRITTEN:
        getattr(freg, table)[key] = list(found)
  for service, found in facets.revisits.items():
    if service in HAND_WRITTEN:
      freg.revisits[service] = list(found)
  names = load_compiled_library(library, reg=reg, facets=freg)
  return reg, freg, names


def test_generic_facets_come_from_the_plans(world):
  _, freg, _ = world
  assert [f.name for f in freg.sources[("notes_server", "person.email")]] == ["note_author_email"]
  assert [f.name for f in freg.sinks[("acme_crm", "money")]] == ["ACME_CRM__CREATE_CONTACT_amount"]
  assert [r.name for r in freg.revisits["notes_server"]] == ["revisit_update_note_title"]
  # external and computed tools get none: the browser's only entity is read by a lookup
  assert "headless_browser" not in freg.services()


def test_generated_tasks_compose_compiled_and_hand_written_services(world):
  _, freg, compiled = world
  rejected = collections.Counter()
  tasks = [
    generate_one(i, 0, k=3, num_distractors=2, min_walk=4, max_walk=6, reg=freg, rejected=rejected)
    for i in range(12)
  ]
  mixed = [t for t in tasks if t is not None and set(t.services) & set(compiled)]
  assert mixed, rejected
  for task in mixed:
    assert gate_failures(task) == []
    assert set(task.services) - set(compiled)  # a hand-written service in the same task
  task = mixed[0]
  assert any(c.service in compiled for c in task.reference_solution)


CORPUS = Path(__file__).resolve().parents[3] / "shared" / "mcp_specs" / "tools.jsonl"


def test_compiled_names_read_as_words():
  from compoworld.specs.compiled_facets import _article, display_name

  assert display_name("HubSpot MCP", "hubspot_mcp") == "HubSpot"
  assert display_name("google_calendar", "google_calendar_klavis") == "Google Calendar"
  assert display_name("", "notes_server") == "Notes"
  assert [_article(w) for w in ("email", "contact", "user", "hour", "unit", "order")] == [
    "an email",
    "a contact",
    "a user",
    "an hour",
    "a unit",
    "an order",
  ]


@pytest.mark.shared
@pytest.mark.slow
@pytest.mark.skipif(not CORPUS.exists(), reason="../shared/mcp_specs is absent")
def test_instructions_over_compiled_corpus_services_read_well(tmp_path, monkeypatch):
  import re

  build_library(CORPUS, tmp_path, progress=False)
  reg = _own_registry(monkeypatch)
  freg = FacetRegistry(providers=())
  compiled = load_compiled_library(tmp_path, reg=reg, facets=freg)
  with_facets = [n for n in freg.services() if n in compiled]

  def only(names):  # the facets of `names` alone
    one = FacetRegistry(providers=())
    for table in ("sources", "sinks"):
      kept = {k: v for k, v in getattr(freg, table).items() if k[0] in names}
      getattr(one, table).update(kept)
    one.revisits.update({k: v for k, v in freg.revisits.items() if k in names})
    return one

  tasks = []
  for name in with_facets:  # single-service tasks, until 50 services have one
    try:
      task = generate_one(0, 0, k=1, min_walk=2, max_walk=3, num_distractors=0, reg=only({name}))
    except ValueError:  # no walk within this one service
      continue
    tasks += [task] if task else []
    if len(tasks) == 50:
      break
  tasks += [
    t
    for i in range(100)
    if (t := generate_one(i, 0, k=2, num_distractors=0, min_walk=2, max_walk=3, reg=freg))
  ]
  used = {s for t in tasks for s in t.services}
  assert len(used) >= 50, len(used)
  raw_fields = {
    f for n in used for e in reg.get(n).entities.values() for f in e.fields if "_" in f or
    any(c.isupper() for c in f)
  }  # fmt: skip
  for task in tasks:
    text = task.instruction
    assert not re.search(r"\ba (?!us|un|ur|eu|one)[aeiou]", text, re.IGNORECASE), text  # a email
    assert not re.search(r"\ban (?:us|uni|con|[bcdfgjklmnpqrstvwz])", text, re.IGNORECASE), text
    assert not re.search(r"\bmcp\b", text, re.IGNORECASE), text  # software words, not names
    assert not any(re.search(rf"\b{re.escape(n)}\b", text) for n in used if "_" in n), text
    assert not any(re.search(rf"\b{re.escape(f)}\b", text) for f in raw_fields), text


def test_a_simulated_read_of_the_outside_is_a_source_that_answers_the_same_all_episode(monkeypatch):
  import random

  from compoworld.compose.env import ComposedEnv
  from compoworld.specs.compiled_facets import register_facets
  from compoworld.specs.compiler import compile_service
  from compoworld.specs.ingest import McpTool, ServiceSpec
  from compoworld.tasks.authoring import AuthorContext

  def tool(name, props, **extra):
    schema = {"type": "object", "properties": props, "required": list(props)}
    return McpTool(name=name, input_schema=schema, **extra)

  text = {"type": "string"}
  amount = {"type": "object", "properties": {"converted_amount": {"type": "number"}}}
  spec = ServiceSpec(
    name="fx_rates",
    source="test",
    server="fx-rates",
    title="FX Rates MCP",
    domain="finance",
    tools=(
      tool("convert_currency", {"amount": {"type": "number"}, "base": text, "quote": text},
           output_schema=amount),
      tool("create_note", {"title": text}),
    ),
  )  # fmt: skip
  cls = compile_service(spec)
  assert cls.statuses["convert_currency"]["status"] == "simulated"
  reg = _own_registry(monkeypatch)
  reg.register(cls)
  freg = FacetRegistry(providers=())
  assert register_facets([cls], freg)["sources"] >= 1
  [source] = freg.sources[("fx_rates", "money")]

  env = ComposedEnv.from_services(["fx_rates"], seed=3)
  ctx = AuthorContext(env, random.Random(0))
  found = source.fn(ctx)
  assert found.noun.startswith("the converted amount that convert currency in FX Rates gives for")
  [call] = ctx.calls
  # the agent writes something first, then asks the same question: the same answer
  agent = ComposedEnv.from_services(["fx_rates"], seed=3)
  assert agent.call_tool("fx_rates", "create_note", {"title": "t"})["ok"]
  again = agent.call_tool("fx_rates", "convert_currency", call.arguments)
  assert again["ok"] and again["data"]["converted_amount"] == found.values[0].value
