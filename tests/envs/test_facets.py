"""Every registered facet, in isolation: sources find something through real calls, sinks are
false at s0 and true after acting, lookups hand on a new kind, revisits make the first read
stale."""

import random
from datetime import timedelta

import pytest

from compoworld.compose.env import ComposedEnv
from compoworld.tasks.authoring import AuthorContext, AuthoringError
from compoworld.tasks.facets import Found, Value, facets
from compoworld.tasks.rubric import evaluate
from envs._world import world

REG = facets.load()
SEED = 3


def sample_value(kind: str, env: ComposedEnv) -> Value:
  """A plausible value of ``kind`` in world ``SEED``, as a previous step would hand it on."""
  w = world(SEED)
  now = next(iter(env.services.values())).state.now
  samples = {
    "person.email": w.people[5].email,
    "person.name": w.people[5].name,
    "person.handle": w.people[5].handle,
    "person.phone": w.people[5].phone,
    "employee.id": w.people[5].employee_id,
    "company.name": w.customers[0].name,
    "company.domain": w.customers[0].domain,
    "datetime": (now + timedelta(days=3, hours=5)).replace(minute=0).isoformat(),
    "date": (now + timedelta(days=3)).date().isoformat(),
    "money": 1250.5,
    "currency": "EUR",
    "number": 7,
    "quantity": 3,
    "percentage": 12.5,
    "location": w.venues[0].address,
    "address": w.venues[0].address,
    "city": w.venues[0].city,
    "url": "https://files.example.com/s/abc123",
    "text": "Budget approved for the Falcon rollout",
    "document.text": "Refunds are issued within 14 days of a return.",
    "title": "Falcon rollout",
    "sku": w.products[0].sku,
    "product.name": w.products[0].name,
    "status": "open",
    "priority": "high",
    "department": "Engineering",
    "job.title": "Software Engineer",
    "weather.condition": "snow",
    "tracking.number": "1Z999AA10123456784",
    "reference": "INV-1001",
  }
  value = samples[kind]
  number = float(value) if isinstance(value, (int, float)) else None
  return Value(value, str(value), number)


def fresh(service: str, seed: int = 0):
  env = ComposedEnv.from_services([service], seed=SEED)
  return env, AuthorContext(env, random.Random(seed))


def _ids(kind_table):
  return [f"{s}.{f.name}" for (s, _), fs in sorted(kind_table.items()) for f in fs]


SOURCES = [f for (_, _), fs in sorted(REG.sources.items()) for f in fs]
SINKS = [f for (_, _), fs in sorted(REG.sinks.items()) for f in fs]
LOOKUPS = [f for (_, _), fs in sorted(REG.lookups.items()) for f in fs]
REVISITS = [r for _, rs in sorted(REG.revisits.items()) for r in rs]


def test_every_facet_service_is_registered():
  from compoworld import registry

  assert REG.services() <= set(registry.names())
  assert len(SOURCES) >= 5 and len(SINKS) >= 5 and LOOKUPS and REVISITS


@pytest.mark.parametrize("src", SOURCES, ids=_ids(REG.sources))
def test_source_finds_values_through_calls(src):
  for seed in range(3):
    _, ctx = fresh(src.service, seed)
    try:
      found = src.fn(ctx)
    except AuthoringError as err:
      pytest.fail(f"{src.name} could not author: {err}")
    assert isinstance(found, Found) and found.kind == src.kind and found.values
    assert found.noun and ctx.calls, "the value must be discovered through tool calls"
    assert all(c.service == src.service for c in ctx.calls)
    for v in found.values + found.excluded:
      assert v.label
    assert not {v.value for v in found.values} & {v.value for v in found.excluded}


@pytest.mark.parametrize("sink", SINKS, ids=_ids(REG.sinks))
def test_sink_is_false_at_s0_and_true_after_acting(sink):
  env, ctx = fresh(sink.service)
  value = sample_value(sink.kind, env)
  target = sink.prepare(ctx)
  check = sink.check(ctx, target, value)
  assert not evaluate(check, env), "the check already holds before the write"
  before = env.state_hash()
  sink.act(ctx, target, value)
  assert env.state_hash() != before and any(
    env.services[sink.service].spec(c.tool).mutates for c in ctx.calls
  )
  assert evaluate(sink.check(ctx, target, value), env), "the write did not satisfy its check"
  assert sink.phrase(ctx, target, "it") and sink.text(ctx, target, value)


@pytest.mark.parametrize("lookup", LOOKUPS, ids=_ids(REG.lookups))
def test_lookup_hands_on_a_new_kind(lookup):
  env, ctx = fresh(lookup.service)
  incoming = Found(lookup.kind_in, "the thing", [sample_value(lookup.kind_in, env)])
  found = lookup.fn(ctx, incoming)
  assert found is not None and found.kind == lookup.kind and found.values and ctx.calls
  assert all(not env.services[c.service].spec(c.tool).mutates for c in ctx.calls)


@pytest.mark.parametrize("rv", REVISITS, ids=[f"{r.service}.{r.name}" for r in REVISITS])
def test_revisit_makes_the_first_read_stale(rv):
  env, ctx = fresh(rv.service)
  first, target = rv.first(ctx)
  assert first.kind == rv.kind and first.values
  value = sample_value(rv.kind_in, env)
  check = rv.change.check(ctx, target, value)
  assert not evaluate(check, env)
  rv.change.act(ctx, target, value)
  assert evaluate(rv.change.check(ctx, target, value), env)
  second = rv.second(ctx, target)
  assert second.kind == rv.kind_after and second.values
  assert second.stale != second.values[0].value
