"""Environment walks (paper, eq. 3) over the services' facets.

A walk (E_i1, ..., E_iL) covers its service set C, never visits the same service twice in a
row, and has L > K, so some service is visited again. Every edge carries a value of a shared
port kind from a step that can produce it to a step that can consume it. Every walk holds one
meaningful revisit: service S is read, a bridge service B turns what was read into a new
value, and S is written with it and read again — the value of the first read is then stale.
"""

from __future__ import annotations

import dataclasses
import itertools
import random

from compoworld.facets import FacetRegistry, Revisit


@dataclasses.dataclass(frozen=True)
class Step:
  service: str
  kind_in: str | None  # what the step receives (None for the first step)
  kind_out: str | None  # what it hands on (None for the last step)
  role: str = "plain"  # "plain" | "revisit_first" | "bridge" | "revisit_second"
  revisit: str = ""  # the Revisit facet's name, for the two revisit roles


@dataclasses.dataclass(frozen=True)
class Walk:
  steps: tuple[Step, ...]

  @property
  def visits(self) -> list[str]:
    return [s.service for s in self.steps]

  @property
  def services(self) -> list[str]:
    return list(dict.fromkeys(self.visits))

  @property
  def edges(self) -> list[tuple[str, str, str]]:
    return [
      (a.service, b.service, a.kind_out or "")
      for a, b in zip(self.steps, self.steps[1:], strict=False)
    ]


def check_walk(walk: Walk, k: int) -> list[str]:
  """Violations of eq. 3 (empty when the walk is valid)."""
  v = walk.visits
  problems = []
  if len(set(v)) != k:
    problems.append(f"covers {len(set(v))} services, not K={k}")
  if any(a == b for a, b in itertools.pairwise(v)):
    problems.append("visits a service twice in a row")
  if len(v) <= k:
    problems.append(f"length {len(v)} is not greater than K={k}")
  for a, b in zip(walk.steps, walk.steps[1:], strict=False):
    if a.kind_out is None or a.kind_out != b.kind_in:
      problems.append(f"edge {a.service}->{b.service} carries no value")
  return problems


class _Search:
  """Randomised depth-first search for a walk with the revisit macro at position ``p``."""

  def __init__(self, reg, rng, services, k, length, p, rv: Revisit, bridge: str, budget):
    self.reg, self.rng, self.services = reg, rng, services
    self.k, self.length, self.p, self.rv, self.bridge = k, length, p, rv, bridge
    self.budget = budget

  def fixed(self, i: int, kind_in: str | None) -> Step | None:
    """The step at a revisit position, or None if ``i`` is free."""
    rv, last = self.rv, i == self.length - 1
    if i == self.p:
      if kind_in is not None and not self.reg.sinks.get((rv.service, kind_in)):
        return Step("", None, None)  # marks "impossible"
      return Step(rv.service, kind_in, rv.kind, "revisit_first", rv.name)
    if i == self.p + 1:
      return Step(self.bridge, rv.kind, rv.kind_in, "bridge")
    if i == self.p + 2:
      return Step(
        rv.service, rv.kind_in, None if last else rv.kind_after, "revisit_second", rv.name
      )
    return None

  def run(self, steps: list[Step], kind_in: str | None) -> list[Step] | None:
    self.budget -= 1
    if self.budget < 0:
      return None
    i = len(steps)
    distinct = {s.service for s in steps}
    if len(distinct) > self.k or len(distinct) + (self.length - i) < self.k:
      return None
    if i == self.length:
      return steps if len(distinct) == self.k else None
    prev = steps[-1].service if steps else None
    step = self.fixed(i, kind_in)
    if step is not None:
      if not step.service or step.service == prev:
        return None
      return self.run([*steps, step], step.kind_out)
    candidates = [s for s in self.services if s != prev]
    if i + 1 == self.p:
      candidates = [s for s in candidates if s != self.rv.service]
    self.rng.shuffle(candidates)
    last = i == self.length - 1
    for svc in candidates:
      if kind_in is not None and kind_in not in self.reg.inputs(svc):
        continue
      # The refreshed value must be *written* somewhere: a lookup would only read with it, and
      # an agent that used the stale value would then fail no criterion.
      if i == self.p + 3 and not self.reg.sinks.get((svc, kind_in)):
        continue
      if last:
        if kind_in is not None and self.reg.can_end(svc, kind_in):
          found = self.run([*steps, Step(svc, kind_in, None)], None)
          if found:
            return found
        continue
      outs = sorted(self.reg.outputs(svc, kind_in))
      self.rng.shuffle(outs)
      for out in outs:
        found = self.run([*steps, Step(svc, kind_in, out)], out)
        if found:
          return found
    return None


def sample_walk(
  reg: FacetRegistry,
  rng: random.Random,
  k: int,
  length: int,
  services: list[str] | None = None,
  budget: int = 400,
) -> Walk | None:
  """A random walk of ``length`` steps over exactly ``k`` services, or None if this draw of the
  revisit and bridge admits none (callers draw again)."""
  pool = sorted(services if services is not None else reg.services())
  revisits = [r for s in pool for r in reg.revisits.get(s, [])]
  if not revisits or length <= k or length < 3:
    return None
  rv = rng.choice(revisits)
  bridges = [b for b in pool if b != rv.service and rv.kind_in in reg.outputs(b, rv.kind)]
  if not bridges:
    return None
  bridge = rng.choice(bridges)
  p = rng.randint(0, length - 3)
  steps = _Search(reg, rng, pool, k, length, p, rv, bridge, budget).run([], None)
  return Walk(tuple(steps)) if steps else None
