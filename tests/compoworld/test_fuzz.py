"""No input makes a tool crash (issue 21): a property-based fuzz of every tool of every registered
service, hand-written and compiled from their exported specs. Boundary and random inputs (huge,
tiny, negative, NaN, infinity, very long strings, unicode, wrong types, unknown keys, not an
object at all): each edge value in place of each argument of a valid call, then random inputs
from hypothesis. Never a 500, never an exception, and a failed call leaves the state hash
unchanged.

``COMPOWORLD_FUZZ_INPUTS`` sets the inputs per tool (default 200, the CI budget).
"""

from __future__ import annotations

import collections
import copy
import json
import os
import random
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compoworld import registry
from compoworld.runtime.service import Service
from compoworld.serve.mcp_export import mcp_tools
from compoworld.specs.build import export_hand_written
from compoworld.specs.compiler import compile_service
from compoworld.specs.ingest import McpTool, ServiceSpec, read_specs
from compoworld.specs.schema_values import example
from compoworld.specs.validator import Validator
from tests.contract import call_fails

INPUTS = int(os.environ.get("COMPOWORLD_FUZZ_INPUTS", "200"))
# Each hypothesis example draws at most this many inputs per tool: an example that draws too much
# overruns hypothesis's buffer and is thrown away, so more inputs means more examples.
DRAWS_PER_EXAMPLE = 20
# Hypothesis spends ~0.2 ms drawing one input, a call costs a tenth of that: a quarter of the
# inputs are random, the rest boundary values (the suite runs on two cores)
RANDOM = INPUTS // 4

NUMBERS = [0, -1, 1, -0.0, 0.5, 1e-9, 5e-324, 2**31, 2**53 + 1, 2**63, -(2**63) - 1, 10**30]
NUMBERS += [1e308, -1e308, float("nan"), float("inf"), float("-inf")]
STRINGS = ["", " ", "x" * 10_000, "é" * 300, "🙂" * 100, "\u202e\u0645", "\x00", "\ud800"]
STRINGS += ["a\nb", "'; DROP TABLE t; --", "../../etc/passwd", "2026-02-30T25:61:00", "-1"]
STRINGS += ["1e308", "NaN", "Infinity", "-inf", "null", "{}", "%s%n", "\\u0000"]
ODD = [None, True, False, [], {}, [1, "a", None], {"k": "v"}, [[[]]], {"": {"": []}}]
EDGES = NUMBERS + STRINGS + ODD
NOT_OBJECTS = [None, [], [{}], "arguments", 0, 1.5, True]

# Random values are drawn as flat scalars or a list of one: deeper random structure costs
# hypothesis far more per draw, and the edges above already hold the nested shapes.
SCALARS = (
  st.sampled_from(EDGES)
  | st.integers()
  | st.floats()
  | st.text(max_size=30)
  | st.sampled_from([None, True, False])
)
VALUES = SCALARS | st.lists(SCALARS, max_size=2)


def _compiled() -> list[type[Service]]:
  """The hand-written services compiled back from their exported specs."""
  with tempfile.TemporaryDirectory() as tmp:
    path = export_hand_written(Path(tmp))
    specs, _ = read_specs(path, reserved=registry.names())
  return [compile_service(spec) for spec in specs]


HAND_WRITTEN = {name: registry.get(name) for name in registry.names()}
COMPILED = {cls.name: cls for cls in _compiled()}
SERVICES = {**HAND_WRITTEN, **COMPILED}


def _bases(cls: type[Service]) -> dict[str, dict[str, Any]]:
  """A valid call of each tool, naming existing records where the service lists any."""
  validator = Validator(cls, mcp_tools(cls))
  rng = random.Random(0)
  out = {}
  for name, spec in cls.tools.items():
    valid = validator.valid_args(name) if name in validator.tools else None
    out[name] = valid if valid is not None else example(spec.input_schema, rng)
  return out


def _sweep(props: list[str], base: dict[str, Any], size: int) -> list[Any]:
  """The boundary inputs: every edge value in place of each argument of a valid call, each
  argument left out, an unknown one added, arguments that are not an object, and then (up to
  ``size``) edge values in place of two arguments at once."""
  out: list[Any] = [*NOT_OBJECTS, {}, {**base, "zz_unknown": 1}]
  out += [{k: v for k, v in base.items() if k != prop} for prop in props]
  out += [{**base, prop: value} for prop in props for value in EDGES]
  rng = random.Random(f"{props}")
  while len(props) > 1 and len(out) < size:
    a, b = rng.sample(props, 2)
    out.append({**base, a: rng.choice(EDGES), b: rng.choice(EDGES)})
  return out


def _random(props: list[str], base: dict[str, Any]):
  """Random inputs: a valid call with one argument replaced, or an object of one random value
  under an argument's name or an unknown one. (Each kept to a few draws: hypothesis pays for
  every one, and the boundary inputs already cover the combinations.)"""
  keys = st.text(max_size=8) if not props else st.sampled_from(props) | st.text(max_size=8)
  loose = st.builds(lambda k, v: {k: v}, keys, VALUES)
  if not props:
    return loose
  replaced = st.builds(lambda k, v: {**base, k: v}, st.sampled_from(props), VALUES)
  return replaced | replaced | loose


def _check(svc: Service, tool: str, arguments: Any) -> None:
  before = svc.state_hash()
  out = svc.call(tool, copy.deepcopy(arguments))
  assert out["status"] != 500, (tool, arguments, out)
  json.dumps(out, ensure_ascii=False).encode()  # an envelope any client can read
  if not out["ok"]:
    assert svc.state_hash() == before, ("a failed call changed the state", tool, arguments)


@pytest.mark.parametrize("name", sorted(SERVICES))
def test_no_input_makes_a_tool_crash(name):
  cls = SERVICES[name]
  bases = _bases(cls)
  props = {t: sorted(cls.tools[t].input_schema.get("properties", {})) for t in cls.tools}
  sweeps = {t: _sweep(props[t], bases[t], INPUTS - RANDOM) for t in cls.tools}
  checked = collections.Counter({t: len(inputs) for t, inputs in sweeps.items()})
  for tool, inputs in sweeps.items():
    svc = cls.create(seed=0)
    for arguments in inputs:
      _check(svc, tool, arguments)
  # the rest of each tool's budget (at least its random share) is random, over the examples
  budget = {t: max(INPUTS - len(sweeps[t]), RANDOM) for t in cls.tools}
  examples = -(-max(budget.values()) // DRAWS_PER_EXAMPLE)
  draws = {t: -(-budget[t] // examples) for t in cls.tools}
  strategies = {t: _random(props[t], bases[t]) for t in cls.tools}

  @settings(
    max_examples=examples,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
  )
  @given(st.data())
  def fuzz(data):
    svc = cls.create(seed=0)
    for tool, strategy in strategies.items():
      for _ in range(draws[tool]):
        _check(svc, tool, data.draw(strategy))
        checked[tool] += 1

  fuzz()
  assert min(checked.values()) >= INPUTS, checked  # no example was thrown away


@pytest.mark.parametrize(
  ("arguments", "problem"),
  [
    ({"amount": float("inf")}, "argument 'amount' expected number, got inf"),
    ({"amount": float("nan")}, "Input should be a finite number"),
    ({"amount": "-Infinity"}, "Input should be a finite number"),
    ({"amount": 1e308}, "Input should be less than or equal to 1000000000"),
    ({"reference": "\ud800"}, "argument 'reference' must be valid Unicode text"),
  ],
)
def test_numbers_must_be_finite_and_bounded(arguments, problem):
  # issue 21: an infinite or huge amount was a 500 (OverflowError) instead of a 400
  svc = HAND_WRITTEN["invoicing"].create(seed=0)
  base = _bases(type(svc))["record_payment"]
  call_fails(svc, "record_payment", {**base, **arguments}, 400, problem)


def test_nested_and_compiled_arguments_name_the_bad_number():
  svc = HAND_WRITTEN["invoicing"].create(seed=0)
  line = {"description": "x", "quantity": 1, "tax_rate": float("nan")}
  args = {**_bases(type(svc))["create_invoice"], "lines": [line]}
  call_fails(svc, "create_invoice", args, 400, "argument 'lines.0.tax_rate'")
  number = {"type": "object", "properties": {"total amount": {"type": "number"}}}
  tool = McpTool(name="add_total", description="Add a total.", input_schema=number)
  spec = ServiceSpec(name="totals", source="test", server="totals", domain="finance", tools=(tool,))
  compiled = compile_service(spec).create(seed=0)
  for value in (float("inf"), float("nan")):
    args = {"total amount": value}
    call_fails(compiled, "add_total", args, 400, "argument 'total amount' must be a finite number")
