"""Compiled services get generic facets, and the procedural author composes them into tasks."""

import collections
from pathlib import Path

import pytest

import compoworld.env
import compoworld.generate
from compoworld.build import build_library, load_compiled_library
from compoworld.facets import FacetRegistry, facets
from compoworld.generate import generate_one
from compoworld.registry import Registry, registry
from compoworld.tasks import gate_failures

DATA = Path(__file__).parent / "data"
HAND_WRITTEN = ("crm", "helpdesk", "chat", "calendar", "drive", "simosphere", "projects")


@pytest.fixture(scope="module")
def library(tmp_path_factory):
  workdir = tmp_path_factory.mktemp("lib")
  build_library(DATA / "specs.jsonl", workdir, progress=False)
  return workdir


@pytest.fixture
def world(library, monkeypatch):
  """A registry with the hand-written services and the compiled ones (the default registry
  stays as it is), and facets of a few hand-written services plus the compiled ones."""
  reg = Registry(providers=())
  for name in registry.names():
    reg.register(registry.get(name))
  monkeypatch.setattr(compoworld.env, "registry", reg)
  monkeypatch.setattr(compoworld.generate, "registry", reg)
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
