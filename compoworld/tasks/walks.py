"""Environment walks (paper, eq. 3) over the services' facets.

A walk (E_i1, ..., E_iL) covers its service set C, never visits the same service twice in a
row, and has L > K, so some service is visited again. Every edge carries a value of a shared
port kind from a step that can produce it to a step that can consume it. Every walk holds one
meaningful revisit: service S is read, a bridge service B turns what was read into a new
value, and S is written with it and read again — the value of the first read is then stale.

Single-service walks (K = 1, the "single" arm of section 5.3.2) are not eq. 3 walks: all L >= 2
steps are at one service S, and only there may a service be visited several times in a row.
Edges still carry a shared port kind from a step that produces it to a step that consumes it.
If S has a *within-service revisit* (a Revisit whose ``kind_in`` S itself can produce from its
``kind``), the walk holds the same macro with S as its own bridge: read, change with a value S
derived from the read, read again, and write with the new value (the stale-value trap). If S
has none (``self_bridged_revisits`` is empty for 13 of the 31 hand-written services; forum
cannot even chain), the walk is a plain chain of dependent steps in S with no revisit.
``check_single_walk`` is the K = 1 check, to which ``check_walk`` hands K = 1; eq. 3's checks
for K >= 2 are unchanged.
"""

from __future__ import annotations

import dataclasses
import itertools
import random

from compoworld.tasks.facets import FacetRegistry, Revisit


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
  def has_revisit(self) -> bool:
    return any(s.role == "revisit_first" for s in self.steps)

  @property
  def edges(self) -> list[tuple[str, str, str]]:
    return [
      (a.service, b.service, a.kind_out or "")
      for a, b in zip(self.steps, self.steps[1:], strict=False)
    ]


def check_walk(walk: Walk, k: int) -> list[str]:
  """Violations of eq. 3 (empty when the walk is valid); for K = 1, ``check_single_walk``."""
  if k == 1:
    return check_single_walk(walk)
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


def check_single_walk(walk: Walk) -> list[str]:
  """Violations of the K = 1 walk (empty when valid): one service, at least two steps, every
  edge carries a value, and a revisit, if any, is the whole macro at that service (first read,
  the service as its own bridge, second read of the same Revisit). Consecutive visits of the
  service are what K = 1 is made of, so they are not checked; eq. 3 walks keep ``check_walk``."""
  v, steps = walk.visits, walk.steps
  problems = []
  if len(set(v)) != 1:
    problems.append(f"covers {len(set(v))} services, not K=1")
  if len(v) < 2:
    problems.append(f"length {len(v)} is not greater than K=1")
  for a, b in itertools.pairwise(steps):
    if a.kind_out is None or a.kind_out != b.kind_in:
      problems.append(f"edge {a.service}->{b.service} carries no value")
  roles = [s.role for s in steps]
  if roles.count("revisit_first") > 1:
    problems.append("more than one revisit")
  if "revisit_first" in roles:
    i = roles.index("revisit_first")
    macro = steps[i : i + 3]
    if [s.role for s in macro] != ["revisit_first", "bridge", "revisit_second"]:
      problems.append("revisit is not read, bridge, read again")
    elif macro[0].revisit != macro[2].revisit or not macro[0].revisit:
      problems.append("revisit reads two different records")
  elif any(r != "plain" for r in roles):
    problems.append("revisit roles without a revisit")
  return problems


def self_bridged_revisits(reg: FacetRegistry, service: str) -> list[Revisit]:
  """The Revisits ``service`` can host with itself as the bridge (a K = 1 walk's revisit): the
  service can turn what the first read hands on (``kind``) into what the change takes
  (``kind_in``). Empty: K = 1 walks at ``service`` are plain chains of dependent steps."""
  return [r for r in reg.revisits.get(service, []) if r.kind_in in reg.outputs(service, r.kind)]


def single_services(reg: FacetRegistry, services: list[str] | None = None) -> list[str]:
  """The services of ``services`` (default: all) that a K = 1 walk can run in: they have a
  source to start from and some step that takes a value of that kind."""
  pool = sorted(services if services is not None else reg.services())
  return [s for s in pool if self_bridged_revisits(reg, s) or _chains(reg, s)]


def _chains(reg: FacetRegistry, service: str) -> bool:
  return any(reg.can_end(service, kind) for kind in reg.outputs(service, None))


class _Search:
  """Randomised depth-first search for a walk with the revisit macro at position ``p`` (no
  revisit when ``rv`` is None). ``repeat`` lets a service follow itself (K = 1 walks only)."""

  def __init__(
    self, reg, rng, services, k, length, p, rv: Revisit | None, bridge: str, budget, repeat=False
  ):
    self.reg, self.rng, self.services = reg, rng, services
    self.k, self.length, self.p, self.rv, self.bridge = k, length, p, rv, bridge
    self.budget, self.repeat = budget, repeat

  def fixed(self, i: int, kind_in: str | None) -> Step | None:
    """The step at a revisit position, or None if ``i`` is free."""
    rv, last = self.rv, i == self.length - 1
    if rv is None:
      return None
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
      if not step.service or (step.service == prev and not self.repeat):
        return None
      return self.run([*steps, step], step.kind_out)
    candidates = [s for s in self.services if s != prev or self.repeat]
    if i + 1 == self.p and not self.repeat:
      candidates = [s for s in candidates if s != self.rv.service]
    self.rng.shuffle(candidates)
    last = i == self.length - 1
    for svc in candidates:
      if kind_in is not None and kind_in not in self.reg.inputs(svc):
        continue
      # The refreshed value must be *written* somewhere: a lookup would only read with it, and
      # an agent that used the stale value would then fail no criterion.
      if self.rv is not None and i == self.p + 3 and not self.reg.sinks.get((svc, kind_in)):
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
  revisit and bridge admits none (callers draw again). ``k`` = 1: ``sample_single_walk``."""
  if k == 1:
    return sample_single_walk(reg, rng, length, services, budget)
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


def sample_single_walk(
  reg: FacetRegistry,
  rng: random.Random,
  length: int,
  services: list[str] | None = None,
  budget: int = 400,
) -> Walk | None:
  """A random K = 1 walk of ``length`` steps at one service of ``services``, or None if this
  draw admits none (callers draw again).

  The service is drawn uniformly from ``single_services``; it hosts the revisit macro as its
  own bridge when it can (``self_bridged_revisits``), else the walk is a chain of dependent
  steps.
  Raises ValueError when no service of ``services`` can hold a K = 1 walk at all, so that a
  caller never retries a draw that cannot succeed.
  """
  pool = single_services(reg, services)
  if not pool:
    asked = sorted(services) if services is not None else "the facet registry"
    raise ValueError(
      f"no service of {asked} can hold a single-service (K = 1) walk: each needs a source and a "
      "step of the same service that takes the kind it reads"
    )
  if length < 2:
    return None
  service = rng.choice(pool)
  revisits = self_bridged_revisits(reg, service)
  if revisits and length >= 3:
    rv, p = rng.choice(revisits), rng.randint(0, length - 3)
  else:
    rv, p = None, -1
  steps = _Search(reg, rng, [service], 1, length, p, rv, service, budget, repeat=True).run([], None)
  return Walk(tuple(steps)) if steps else None
