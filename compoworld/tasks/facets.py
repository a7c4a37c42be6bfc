"""Facets: what a procedural task author knows about one service.

A walk step visits a service, takes a value of some kind from the previous step and hands a
value of some kind to the next (paper, eq. 3). Facets are how a service can play a step:

  Source   reads a fact from s0 and hands it on               (first step, or after a Sink)
  Lookup   reads a fact *using* the incoming value            (a read-only step)
  Sink     writes with the incoming value; knows the check    (the step's rubric criterion)
  Revisit  a first read, a write that changes what was read, and a second read of the new
           value: the step pair that makes a revisit meaningful (the stale reading fails)

Facet functions run against an ``AuthorContext``: they may add the scenario's own records to s0
(``ctx.put``), and they discover what they hand on by calling the service's tools
(``ctx.call``), exactly as the reference solution will. Service libraries register facets with
the decorators below: a hand-written service keeps them beside its tools, in
``envs/<service>/facets.py``, which ``FacetRegistry.load`` finds and imports.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import pkgutil
import threading
from collections import defaultdict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from compoworld.runtime.ports import is_shared

if TYPE_CHECKING:
  from compoworld.tasks.author_context import AuthorContext


@dataclasses.dataclass
class Value:
  """One value an agent reads and later uses."""

  value: Any  # as it appears in envelopes and tool arguments
  label: str  # how a person names it: "Ava Okafor", "$1,250.00"
  number: float | None = None  # the numeric reading, for sums and thresholds


@dataclasses.dataclass
class Found:
  """What a read step hands to the next step."""

  kind: str
  noun: str  # how the instruction refers to it: "the venue of the anniversary meetup"
  values: list[Value]
  excluded: list[Value] = dataclasses.field(default_factory=list)  # must-not targets
  exclusion: str = ""  # why they are excluded: "who are marked swag-exempt"
  condition: str = ""  # a condition that holds at s0: "snow is forecast there"
  stale: Any = None  # for a revisit's second read: the value the first read saw
  answer: str = ""  # how a final answer states it, if this is the last step
  context: dict[str, Any] = dataclasses.field(default_factory=dict)  # e.g. {"date": ...}


@dataclasses.dataclass(frozen=True)
class Source:
  service: str
  kind: str
  name: str
  fn: Callable[[AuthorContext], Found | None]


@dataclasses.dataclass(frozen=True)
class Lookup:
  service: str
  kind_in: str
  kind: str
  name: str
  fn: Callable[[AuthorContext, Found], Found | None]


@dataclasses.dataclass(frozen=True)
class Sink:
  """A write that consumes one value.

  ``prepare(ctx)`` sets up and finds the write's target (a meeting, a channel; its reads are
  part of the reference solution) and returns it; ``act(ctx, target, value)`` writes through
  ``ctx.call``; ``check(ctx, target, value)`` is the rubric check that the write happened for
  ``value`` — false at s0, so it looks for records made or fields changed since s0;
  ``phrase(ctx, target, obj)`` is the instruction's verb phrase ("email {obj} to Ava");
  ``text(ctx, target, value)`` is the criterion's sentence.
  """

  service: str
  kind: str
  name: str
  prepare: Callable[[AuthorContext], Any]
  act: Callable[[AuthorContext, Any, Value], None]
  check: Callable[[AuthorContext, Any, Value], dict[str, Any]]
  phrase: Callable[[AuthorContext, Any, str], str]
  text: Callable[[AuthorContext, Any, Value], str]
  aggregates: bool = False  # takes one total of several numeric values
  single: bool = False  # sets one field: takes exactly one value, never a fan-out


@dataclasses.dataclass(frozen=True)
class Revisit:
  """``first`` reads a record and hands on ``kind`` (returning the record as the target);
  later ``change`` writes to that target with a ``kind_in`` value; ``second`` reads the
  target again and hands on ``kind_after``, with ``Found.stale`` set to what the first read
  saw in the same field."""

  service: str
  kind: str
  kind_in: str
  kind_after: str
  name: str
  first: Callable[[AuthorContext], tuple[Found, Any]]
  change: Sink  # its ``prepare`` is not used: the target comes from ``first``
  second: Callable[[AuthorContext, Any], Found]


def _import_facets(provider: str) -> None:
  """Imports ``provider`` and, if it is a package, the ``facets`` module of every subpackage
  that has one, in name order (``envs`` -> ``envs.calendar.facets``, ``envs.chat.facets``...)."""
  package = importlib.import_module(provider)
  subpackages = [m.name for m in pkgutil.iter_modules(getattr(package, "__path__", [])) if m.ispkg]
  for name in sorted(subpackages):
    module = f"{provider}.{name}.facets"
    if importlib.util.find_spec(module) is not None:
      importlib.import_module(module)


def _no_target(ctx: AuthorContext) -> None:
  """A revisit's change writes to the record its first read found, so it prepares nothing."""


class FacetRegistry:
  def __init__(self, providers: tuple[str, ...] = ("envs",)) -> None:
    self._providers, self._loaded = providers, False
    self._lock = threading.RLock()
    self._memo: dict[tuple, set[str]] = {}  # walk sampling asks the same questions often
    self.sources: dict[tuple[str, str], list[Source]] = defaultdict(list)
    self.lookups: dict[tuple[str, str], list[Lookup]] = defaultdict(list)
    self.sinks: dict[tuple[str, str], list[Sink]] = defaultdict(list)
    self.revisits: dict[str, list[Revisit]] = defaultdict(list)

  # --- registration ------------------------------------------------------------------------

  def _check(self, where: str, *kinds: str) -> None:
    bad = [k for k in kinds if not is_shared(k)]
    if bad:
      raise ValueError(f"{where}: facets link services, so kinds must be shared ports: {bad}")

  def source(self, service: str, kind: str):
    def deco(fn):
      self._check(fn.__name__, kind)
      self.sources[(service, kind)].append(Source(service, kind, fn.__name__, fn))
      self._memo.clear()
      return fn

    return deco

  def lookup(self, service: str, kind_in: str, kind: str):
    def deco(fn):
      self._check(fn.__name__, kind_in, kind)
      self.lookups[(service, kind_in)].append(Lookup(service, kind_in, kind, fn.__name__, fn))
      self._memo.clear()
      return fn

    return deco

  def add_sink(self, sink: Sink) -> Sink:
    self._check(sink.name, sink.kind)
    self.sinks[(sink.service, sink.kind)].append(sink)
    self._memo.clear()
    return sink

  def add_revisit(self, revisit: Revisit) -> Revisit:
    self._check(revisit.name, revisit.kind, revisit.kind_in, revisit.kind_after)
    self.revisits[revisit.service].append(revisit)
    self._memo.clear()
    return revisit

  def sink(
    self,
    service: str,
    kind: str,
    name: str,
    *,
    total: str | None = None,
    total_phrase: Callable[[AuthorContext, Any, str], str] | None = None,
    **fields: Any,
  ) -> Sink:
    """Registers ``Sink(service, kind, name, **fields)``: how a facet module declares a write.
    With ``total``, also registers its twin of that name, which writes one total of several
    values (``aggregates``) where the write itself takes one value; ``total_phrase`` words the
    twin's instruction where a total reads differently ("add one expense of {obj}")."""
    if total_phrase is not None and total is None:
      raise ValueError(f"{name}: total_phrase words the twin that total= names")
    sink = self.add_sink(Sink(service, kind, name, **fields))
    if total is not None:
      twin = {**fields, "single": False, "phrase": total_phrase or fields["phrase"]}
      self.add_sink(Sink(service, kind, total, **twin, aggregates=True))
    return sink

  def revisit(
    self,
    service: str,
    *,
    kind: str,
    kind_in: str,
    kind_after: str,
    name: str,
    first: Callable[[AuthorContext], tuple[Found, Any]],
    second: Callable[[AuthorContext, Any], Found],
    change: str | None = None,
    **write: Any,
  ) -> Revisit:
    """Registers a revisit whose change is the write ``Sink(service, kind_in, change, **write)``
    (``change`` names it, ``name`` by default); it needs no ``prepare``: its target is the
    record ``first`` read."""
    sink = Sink(service, kind_in, change or name, prepare=_no_target, **write)
    return self.add_revisit(Revisit(service, kind, kind_in, kind_after, name, first, sink, second))

  # --- what a step at a service can do ------------------------------------------------------

  def load(self) -> FacetRegistry:
    """Imports the providers' facet modules (once), which register their facets."""
    with self._lock:  # threads wait for the first loader instead of seeing half the facets
      if not self._loaded:
        for provider in self._providers:
          _import_facets(provider)
        self._loaded = True
    return self

  def services(self) -> set[str]:
    keys = [*self.sources, *self.lookups, *self.sinks]
    return {s for s, _ in keys} | set(self.revisits)

  def outputs(self, service: str, kind_in: str | None) -> set[str]:
    """Kinds a plain step at ``service`` can hand on, given what it receives."""
    key = ("out", service, kind_in)
    if key not in self._memo:
      self._memo[key] = self._outputs(service, kind_in)
    return self._memo[key]

  def _outputs(self, service: str, kind_in: str | None) -> set[str]:
    if kind_in is None:
      return {k for (s, k), v in self.sources.items() if s == service and v}
    out = {lk.kind for lk in self.lookups.get((service, kind_in), [])}
    if self.sinks.get((service, kind_in)):
      out |= self.outputs(service, None)
    return out

  def inputs(self, service: str) -> set[str]:
    """Kinds a step at ``service`` can receive (and then end the walk or go on)."""
    key = ("in", service, None)
    if key not in self._memo:
      self._memo[key] = self._inputs(service)
    return self._memo[key]

  def _inputs(self, service: str) -> set[str]:
    keys = [k for (s, k), v in [*self.sinks.items(), *self.lookups.items()] if s == service and v]
    return set(keys)

  def can_end(self, service: str, kind_in: str) -> bool:
    return bool(self.sinks.get((service, kind_in)) or self.lookups.get((service, kind_in)))

  def stats(self) -> dict[str, int]:
    return {
      "services": len(self.services()),
      "sources": sum(map(len, self.sources.values())),
      "lookups": sum(map(len, self.lookups.values())),
      "sinks": sum(map(len, self.sinks.values())),
      "revisits": sum(map(len, self.revisits.values())),
    }


facets = FacetRegistry()
