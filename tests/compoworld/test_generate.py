"""Walk sampling (eq. 3, and single-service K = 1 walks) and procedural task generation with its
verification gates."""

import random
import re

import pytest

from compoworld.runtime.registry import registry
from compoworld.tasks.facets import FacetRegistry, facets
from compoworld.tasks.generate import generate_tasks
from compoworld.tasks.task import gate_failures, load_tasks, save_tasks
from compoworld.tasks.walks import (
  Step,
  Walk,
  check_single_walk,
  check_walk,
  sample_walk,
  self_bridged_revisits,
  single_services,
)


@pytest.fixture(scope="module")
def batch():
  return generate_tasks(24, seed=7, progress=False)


def test_walks_satisfy_eq3():
  reg, rng, seen = facets.load(), random.Random(0), 0
  for _ in range(60):
    k, length = 5, rng.randint(7, 12)
    walk = sample_walk(reg, rng, k, length)
    if walk is None:
      continue
    seen += 1
    assert check_walk(walk, k) == [] and len(walk.steps) == length
    roles = [s.role for s in walk.steps]
    i = roles.index("revisit_first")
    assert roles[i + 1 : i + 3] == ["bridge", "revisit_second"]
    assert walk.steps[i].service == walk.steps[i + 2].service
  assert seen >= 40


def test_generation_is_deterministic_and_shardable(tmp_path, batch):
  tasks, _ = batch
  again, _ = generate_tasks(24, seed=7, progress=False)
  save_tasks(tasks, tmp_path / "a.jsonl")
  save_tasks(again, tmp_path / "b.jsonl")
  assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()
  odd, _ = generate_tasks(24, seed=7, shard_index=1, num_shards=2, progress=False)
  even, _ = generate_tasks(24, seed=7, shard_index=0, num_shards=2, progress=False)
  merged = sorted(odd + even, key=lambda t: t.meta["index"])
  assert [t.model_dump() for t in merged] == [t.model_dump() for t in tasks]
  other, _ = generate_tasks(4, seed=8, progress=False)
  assert other[0].instruction != tasks[0].instruction


def test_workers_do_not_change_the_output(batch):
  tasks, _ = batch
  parallel, _ = generate_tasks(24, seed=7, workers=2, chunk_size=6, progress=False)
  assert [t.id for t in parallel] == [t.id for t in tasks]
  assert parallel[5].model_dump() == tasks[5].model_dump()


def test_every_task_passes_the_gates_from_the_file_alone(tmp_path, batch):
  tasks, _ = batch
  save_tasks(tasks, tmp_path / "tasks.jsonl")
  loaded = load_tasks(tmp_path / "tasks.jsonl")
  assert len(loaded) == len(tasks) > 20
  for task in loaded:
    assert gate_failures(task) == [], task.id
    env = task.make_env()
    assert set(env.distractors) == set(task.distractors) and len(task.distractors) == 5
    assert task.meta["stale_substitution"]


def test_tasks_meet_eq3_and_hide_tools_and_ids(batch):
  tasks, _ = batch
  for task in tasks:
    k = len(task.services)
    assert k == 5 and 7 <= len(task.walk) <= 12 and len(set(task.walk)) == k
    assert all(a != b for a, b in zip(task.walk, task.walk[1:], strict=False))
    tool_names = {t for s in task.services for t in registry.get(s).tools}
    words = set(re.findall(r"[a-z_]+", task.instruction))
    assert not words & tool_names, words & tool_names
    args = [a for c in task.reference_solution for a in c.arguments.values()]
    ids = {a for a in args if isinstance(a, str) and re.fullmatch(r"[a-z]+_[0-9a-f]{8}", a)}
    assert ids and not any(i in task.instruction for i in ids)


def test_summary_counts(batch):
  tasks, summary = batch
  assert summary["tasks"] == len(tasks)
  assert sum(summary["walk_length_histogram"].values()) == len(tasks)
  assert summary["distinct_patterns"] == len(summary["patterns"]) >= 5
  assert summary["must_not_tasks"] == sum(
    any(c.kind == "must_not" for c in t.rubric) for t in tasks
  )


def test_the_stale_gate_fails_a_task_whose_revisit_does_not_matter(batch):
  tasks, _ = batch
  task = tasks[0].model_copy(deep=True)
  stale = task.meta["stale_substitution"]
  if stale.get("answer"):
    stale["stale_value"] = stale["fresh"]
  else:
    fresh = task.reference_solution[stale["call"]].arguments[stale["argument"]]
    stale["stale_value"] = fresh  # "stale" equal to fresh: the gate must notice
  assert "stale_value_accepted" in gate_failures(task)


def test_instructions_vary_the_order_of_independent_chains(batch):
  tasks, _ = batch
  shuffled = 0
  for task in tasks:
    order, pinned = task.meta["chain_order"], task.meta["pinned_chains"]
    assert sorted(order) == list(range(len(order))) and order[-1] == len(order) - 1
    assert [i for i in order if i in pinned] == sorted(pinned)  # the revisit keeps its order
    shuffled += order != sorted(order)
  assert shuffled >= len(tasks) // 4


def test_each_sentence_of_the_instruction_records_the_calls_it_asks_for(batch):
  """``meta["clauses"]``: the request's sentences in its order, between an opener and a
  closer, that between them ask for every call of the reference solution once, a chain's
  calls in one run; a reordered instruction states a later chain's calls first."""
  tasks, _ = batch
  reordered = 0
  for task in tasks:
    spans, text = task.meta["clauses"], task.instruction
    sentences = [text[a:b] for a, b, _, _ in spans]
    assert all(s[:1].isupper() and s[-1] in ".?" for s in sentences), sentences
    assert [a for a, *_ in spans] == sorted(a for a, *_ in spans)
    opener, closer = text[: spans[0][0]], text[spans[-1][1] :]
    assert text == opener + " ".join(sentences) + closer and opener[-2:] in (". ", "? ")
    asked = sorted(i for *_, first, last in spans for i in range(first, last))
    assert asked == list(range(len(task.reference_solution)))
    firsts = [first for *_, first, last in spans if last > first]
    reordered += firsts != sorted(firsts)
  assert reordered >= len(tasks) // 4  # as often as the chains' order changes (test above)
  golden = tasks[0]  # seed 7's first task: a sentence and the tools of its calls
  first, *_ = golden.meta["clauses"]
  tools = [c.tool for c in golden.reference_solution[first[2] : first[3]]]
  assert (golden.instruction[first[0] : first[1]], tools) == (
    'Check the customer company behind the "API returns 429 errors (Juniper quarterly '
    'planning)" ticket.',
    ["search_tickets", "get_ticket"],
  )


def test_a_crashing_facet_costs_a_candidate_not_the_run(monkeypatch):
  import collections

  import compoworld.tasks.generate as gen

  def broken(*args, **kwargs):
    raise ValueError("facet bug")

  monkeypatch.setattr(gen, "realize", broken)
  rejected = collections.Counter()
  assert gen.generate_one(0, 0, max_attempts=4, rejected=rejected) is None
  assert rejected["facet_error:ValueError"] == 4 - rejected["no_walk"] > 0


def test_single_service_walks_stay_in_one_service():
  reg, rng, seen, revisits = facets.load(), random.Random(1), 0, 0
  for _ in range(60):
    length = rng.randint(3, 6)
    walk = sample_walk(reg, rng, 1, length)
    if walk is None:
      continue
    seen += 1
    assert check_walk(walk, 1) == [] and len(walk.steps) == length
    assert len(walk.services) == 1 and walk.services[0] in single_services(reg)
    roles = [s.role for s in walk.steps]
    if walk.has_revisit:
      revisits += 1
      i = roles.index("revisit_first")
      assert roles[i + 1 : i + 3] == ["bridge", "revisit_second"]
      assert walk.steps[i].revisit == walk.steps[i + 2].revisit
    else:  # only services with no within-service revisit give plain chains
      assert not self_bridged_revisits(reg, walk.services[0]) and set(roles) == {"plain"}
  assert seen >= 50 and revisits >= seen // 3


def test_the_single_service_check_is_separate_from_eq3():
  reg, rng = facets.load(), random.Random(2)
  composed = next(w for w in (sample_walk(reg, rng, 3, 5) for _ in range(20)) if w)
  single = next(w for w in (sample_walk(reg, rng, 1, 5) for _ in range(20)) if w)
  assert check_walk(composed, 3) == [] and "covers 3 services, not K=1" in check_walk(composed, 1)
  assert "visits a service twice in a row" in check_walk(single, 2)  # eq. 3 unchanged
  broken = Walk((*single.steps[:1], Step(single.services[0], "nothing", None)))
  assert check_single_walk(broken) == [
    f"edge {single.services[0]}->{single.services[0]} carries no value"
  ]
  assert "length 1 is not greater than K=1" in check_single_walk(Walk(single.steps[:1]))


def test_single_service_tasks_pass_the_gates_and_the_oracle_scores_one():
  tasks, summary = generate_tasks(
    6, seed=11, k=1, min_walk=4, max_walk=6, num_distractors=2, progress=False
  )
  assert len(tasks) == 6 and summary["k_histogram"] == {"1": 6}
  for task in tasks:
    assert len(task.services) == 1 == task.meta["K"] and set(task.walk) == set(task.services)
    assert gate_failures(task) == [], task.id
    env, _ = task.replay()
    assert task.verify(env, task.reference_answer).score == 1.0
  assert any(t.meta["stale_substitution"] for t in tasks)  # the within-service revisit trap


def test_single_service_walks_fail_clearly_when_no_service_can_hold_one():
  import compoworld.tasks.generate as gen

  reg = FacetRegistry(providers=())
  reg.source("crm", "person.email")(lambda ctx: None)  # a read that nothing in crm consumes
  with pytest.raises(ValueError, match="K = 1"):
    sample_walk(reg, random.Random(0), 1, 4)
  with pytest.raises(ValueError, match="K = 1"):
    gen.generate_one(0, 0, k=1, reg=reg)
  with pytest.raises(ValueError, match="K >= 1"):
    gen.generate_one(0, 0, k=0)


def test_a_sinks_total_twin_aggregates_and_may_word_its_instruction_apart():
  reg = FacetRegistry(providers=())
  write = dict(prepare=lambda ctx: {}, act=lambda *a: None, check=lambda *a: {}, text=lambda *a: "")
  one = reg.sink(
    "crm",
    "money",
    "pay",
    total="pay_total",
    phrase=lambda c, t, o: f"pay {o}",
    single=True,
    **write,
  )
  twin = reg.sinks[("crm", "money")][1]
  assert (twin.name, twin.aggregates, twin.single, one.aggregates) == (
    "pay_total",
    True,
    False,
    False,
  )
  assert twin.phrase is one.phrase
  reg.sink(
    "crm",
    "money",
    "book",
    total="book_total",
    phrase=lambda c, t, o: f"book {o}",
    total_phrase=lambda c, t, o: f"book one entry for {o}",
    **write,
  )
  book, book_total = reg.sinks[("crm", "money")][2:]
  assert book.phrase(None, {}, "it") == "book it"
  assert book_total.phrase(None, {}, "it") == "book one entry for it" and book_total.aggregates
  with pytest.raises(ValueError, match="total_phrase"):
    reg.sink("crm", "money", "x", phrase=book.phrase, total_phrase=book.phrase, **write)
