"""The procedural author: turns a walk into a verified-ready task (paper, section 4.2).

design: facets add the scenario's own records to s0; probe: they discover what they hand on by
calling tools, and those calls are the reference solution; each write brings its rubric
criterion; the instruction is assembled from the facets' phrases. No LLM, no global state:
the same (walk, seed) gives the same task, byte for byte.
"""

from __future__ import annotations

import random
import re
from typing import Any

from compoworld.compose.env import ComposedEnv
from compoworld.runtime.domains import BUSINESS_FUNCTIONS
from compoworld.tasks.author_context import AuthorContext, AuthoringError
from compoworld.tasks.facets import FacetRegistry, Found, Revisit, Sink, Value
from compoworld.tasks.rubric import all_of
from compoworld.tasks.task import InitialState, Task, ToolCall, apply_patch
from compoworld.tasks.walks import Walk

__all__ = ["AuthorContext", "AuthoringError", "realize"]  # the context lives below the facets

GENERATOR_VERSION = "procedural-1"

_DOMAIN_FUNCTION = {
  "sales_crm": "sales",
  "marketing": "marketing",
  "hr": "hr",
  "finance": "finance",
  "support": "support",
  "operations": "operations",
}


def business_functions(domains: list[str]) -> list[str]:
  """The AutomationBench business functions a task touches ("productivity" for the rest)."""
  return sorted(
    {_DOMAIN_FUNCTION.get(d, "productivity") for d in domains}
    & {*BUSINESS_FUNCTIONS, "productivity"}
  )


_OPENERS = (
  "Hi! I need a hand with something.",
  "Could you take care of this for me?",
  "Quick request, please.",
  "I'm swamped today, so please handle the following.",
  "Here's what I need done.",
)
_FIND = ("Find", "Look up", "Check", "Pull up", "Figure out")
#: The words that open a sentence after the first of its chain, drawn at random.
CONNECTIVES = ("Then", "After that,", "Next,", "Once you have that,", "With that,")
_CONNECTIVE = re.compile(rf"^(?:{'|'.join(map(re.escape, CONNECTIVES))}) +")
_CLOSERS = ("Thanks!", "Thank you.", "Let me know when it's done.", "", "Appreciate it.")


_PRONOUNS = {
  "datetime": "that time",
  "date": "that date",
  "url": "that link",
  "location": "that address",
  "address": "that address",
  "money": "that amount",
  "quantity": "that quantity",
  "number": "that number",
}


def without_connective(sentence: str) -> str:
  """``sentence`` without the connective (`CONNECTIVES`) drawn at random to open it, if it has
  one: "With that, post a journal entry ..." -> "post a journal entry ..."."""
  return _CONNECTIVE.sub("", sentence, count=1)


def _pronoun(kind: str) -> str:
  """How the sentence after a read refers to what was read."""
  return "them" if kind.startswith("person.") else _PRONOUNS.get(kind, "it")


def _cap(text: str) -> str:
  return text[:1].upper() + text[1:]


class _Writer:
  """Accumulates the instruction, the rubric and the final answer while a walk is realised."""

  def __init__(self, ctx: AuthorContext):
    self.ctx = ctx
    self.clauses: list[str] = []
    self.said_at: list[int] = []  # how many calls were made when each clause was said
    self.criteria: list[dict[str, Any]] = []
    self.answers: list[str] = []
    self.answer_checks: list[dict[str, Any]] = []
    self.patterns: list[str] = []  # kinds of cross-service dependency, e.g. "must_not:person.email"
    self.facets: list[str] = []  # which facets realised them
    self.segments: list[dict[str, Any]] = []  # where each independent chain starts

  def criterion(self, text: str, check: dict[str, Any], kind: str = "positive") -> None:
    self.criteria.append(
      {"id": f"c{len(self.criteria) + 1}", "text": text, "kind": kind, "check": check}
    )

  def say(self, sentence: str) -> None:
    """A clause of the instruction: it asks for the calls made since the clause before it."""
    self.clauses.append(_cap(sentence.strip()))
    self.said_at.append(len(self.ctx.calls))

  def calls_of(self, clause: int) -> tuple[int, int]:
    """The reference solution's calls (start, end) that ``clause`` asks for; the last clause
    also holds any call made after it was said."""
    start = self.said_at[clause - 1] if clause else 0
    last = clause == len(self.clauses) - 1
    return start, len(self.ctx.calls) if last else self.said_at[clause]

  def segment(self) -> None:
    """Starts an independent chain: a fresh read that needs nothing said before it."""
    self.segments.append({"clause": len(self.clauses), "call": len(self.ctx.calls), "pin": False})

  def pin(self) -> None:
    """The current chain keeps its place relative to other pinned chains (the revisit)."""
    self.segments[-1]["pin"] = True


def _apply_sink(w: _Writer, sink: Sink, found: Found, target: Any = None) -> None:
  ctx = w.ctx
  if target is None:
    target = sink.prepare(ctx)
  if sink.aggregates:
    total = round(sum(v.number or 0.0 for v in found.values), 2)
    targets = [Value(total, f"{total:,.2f}", total)]
    obj, shape = f"the total of {found.noun}", "aggregate"
  else:
    # a value listed twice would make one of its two writes redundant (the drop-a-write gate)
    targets = list({repr(v.value): v for v in found.values}.values())
    if sink.single and len(targets) > 1:
      raise AuthoringError("sink_takes_one_value", f"{sink.service}.{sink.name}")
    obj = _pronoun(found.kind) if len(targets) == 1 else "each of them"
    shape = "relay" if len(targets) == 1 else "fan_out"
  for value in targets:
    sink.act(ctx, target, value)
  checks = [sink.check(ctx, target, v) for v in targets]
  w.criterion(
    " ".join(sink.text(ctx, target, v) for v in targets),
    checks[0] if len(checks) == 1 else all_of(*checks),
  )
  phrase = sink.phrase(ctx, target, obj)
  if found.excluded and not sink.aggregates:
    shape = "must_not"
    w.criterion(
      f"Nothing was done for {', '.join(v.label for v in found.excluded)} ({found.exclusion}).",
      {
        "op": "not",
        "check": {"op": "any", "checks": [sink.check(ctx, target, v) for v in found.excluded]},
      },
      kind="must_not",
    )
    phrase = f"{phrase}, but leave out anyone {found.exclusion}"
  if found.condition:
    shape = "conditional"
    w.say(f"If {found.condition}, {phrase}.")
  else:
    w.say(f"{ctx.choice(CONNECTIVES)} {phrase}.")
  w.patterns.append(f"{shape}:{found.kind}")
  w.facets.append(f"{sink.service}.{sink.name}")


def _report(w: _Writer, found: Found) -> None:
  """The walk ends on a read: the final answer must state what was found."""
  value = found.values[0]
  w.say(f"Finally, tell me {found.noun}.")
  w.answers.append(found.answer or f"{_cap(found.noun)}: {value.label}.")
  if value.number is not None:
    check = {"op": "answer", "cmp": "approx", "value": value.number, "tolerance": 0.01}
  else:
    check = {"op": "answer", "cmp": "icontains", "value": value.label}
  w.criterion(f"The final answer states {found.noun} ({value.label}).", check)
  w.patterns.append(f"answer:{found.kind}")


def _sink_for(
  reg: FacetRegistry, ctx: AuthorContext, service: str, kind: str, found: Found
) -> Sink:
  """A sink of ``service`` for ``kind`` that can take what was found (one value or several)."""
  sinks = reg.sinks.get((service, kind), [])
  if len(found.values) > 1:
    sinks = [s for s in sinks if not s.single] or sinks
  return ctx.choice(sinks)


def _revisit(reg: FacetRegistry, service: str, name: str) -> Revisit:
  return next(r for r in reg.revisits[service] if r.name == name)


def _need(found: Found | None, where: str) -> Found:
  if found is None or not found.values:
    raise AuthoringError("facet_found_nothing", where)
  return found


def _renderings(fresh: Any, stale: Any) -> list[tuple[str, str]]:
  """How a value may appear inside a text argument, paired with the stale value written the
  same way (a link in a message body, an amount in a note)."""
  if isinstance(fresh, bool) or fresh is None:
    return []
  if isinstance(fresh, (int, float)):
    old = stale if isinstance(stale, (int, float)) else 0
    shown = [(f"{fresh:,.2f}", f"{old:,.2f}"), (f"{fresh:.2f}", f"{old:.2f}")]
    # a bare "3" matches too much text to stand for a value; longer numerals are specific
    return [*shown, (str(fresh), str(old))] if len(str(fresh)) >= 2 else shown
  return [(str(fresh), "" if stale is None else str(stale))]


def _substitute(arg: Any, fresh: Any, stale: Any) -> tuple[bool, Any]:
  """``arg`` with every appearance of ``fresh`` (as a whole value, inside text, or nested in
  lists and objects) written as ``stale``, and whether anything changed."""
  if arg == fresh and type(arg) is type(fresh):
    return True, stale
  if isinstance(arg, str):
    for shown, old in _renderings(fresh, stale):
      if shown and shown in arg:
        return True, arg.replace(shown, old)
    return False, arg
  if isinstance(arg, list):
    parts = [_substitute(a, fresh, stale) for a in arg]
    return any(c for c, _ in parts), [v for _, v in parts]
  if isinstance(arg, dict):
    parts = {k: _substitute(v, fresh, stale) for k, v in arg.items()}
    return any(c for c, _ in parts.values()), {k: v for k, (_, v) in parts.items()}
  return False, arg


def _stale_substitution(
  env: ComposedEnv, calls: list[ToolCall], start: int, fresh: Any, stale: Any
) -> dict[str, Any] | None:
  """The first write at or after ``start`` whose arguments carry ``fresh``, with ``stale`` in
  its place: replaying that makes an agent that skipped the revisit. Reads are passed over: a
  stale value that only reaches a search changes nothing the rubric can see."""
  for i in range(start, len(calls)):
    spec = env.services[calls[i].service].spec(calls[i].tool)
    if spec is None or not spec.mutates:
      continue
    for name, arg in calls[i].arguments.items():
      changed, value = _substitute(arg, fresh, stale)
      if changed:
        return {"call": i, "argument": name, "stale_value": value}
  return None


def _facts(data: Any) -> Any:
  """Read output without bookkeeping timestamps (``*_at``, ``ts``), which follow the logical
  clock and so the order of writes, not the facts a step hands on."""
  if isinstance(data, dict):
    return {k: _facts(v) for k, v in data.items() if not (k.endswith("_at") or k == "ts")}
  if isinstance(data, list):
    return [_facts(v) for v in data]
  return data


def _reordered_clauses(
  w: _Writer, s0: ComposedEnv, ctx: AuthorContext
) -> tuple[list[int], list[int]]:
  """The instruction's sentences (indices into ``w.clauses``) with its independent chains in a
  shuffled order, and that order of the chains.

  The revisit's chains keep their relative order and the last chain stays last (it may hold
  the final question). A new order is used only if replaying the probe's calls chain by chain
  in that order reads exactly what the probe read, so the request stays solvable as written.
  """
  segs = w.segments
  bounds = [
    (seg, nxt["clause"] if nxt else len(w.clauses), nxt["call"] if nxt else len(ctx.calls))
    for seg, nxt in zip(segs, [*segs[1:], None], strict=True)
  ]
  movable = [b for b in bounds[:-1] if not b[0]["pin"]]
  fixed = [b for b in bounds[:-1] if b[0]["pin"]]
  order = list(fixed)
  for b in movable:
    order.insert(ctx.rng.randint(0, len(order)), b)
  order.append(bounds[-1])
  walk_order = list(range(len(bounds)))
  as_said = list(range(len(w.clauses)))
  if [b[0]["call"] for b in order] == [b[0]["call"] for b in bounds]:
    return as_said, walk_order
  env = s0.fork()
  for seg, _, end in order:
    for i in range(seg["call"], end):
      c = ctx.calls[i]
      out = env.call_tool(c.service, c.tool, c.arguments)
      if not out["ok"]:
        return as_said, walk_order
      is_read = not env.services[c.service].spec(c.tool).mutates
      if is_read and _facts(out["data"]) != _facts(ctx.outputs[i]):
        return as_said, walk_order  # a chain reads what another writes: keep the walk's order
  clauses = [c for seg, end, _ in order for c in range(seg["clause"], end)]
  return clauses, [bounds.index(b) for b in order]


def _instruction(w: _Writer, order: list[int]) -> tuple[str, list[list[int]]]:
  """The instruction: an opener, the clauses in ``order``, a closer; and where each clause
  stands in it with the calls it asks for, ``[char_start, char_end, call_start, call_end]``."""
  ctx = w.ctx
  parts, spans = [ctx.choice(_OPENERS)], []
  for i, clause in enumerate(order):
    text = w.clauses[clause]
    if i == 0 and text.startswith("Also "):
      text = _cap(text[len("Also ") :])
    at = sum(len(p) + 1 for p in parts if p)
    parts.append(text)
    spans.append([at, at + len(text), *w.calls_of(clause)])
  parts.append(ctx.choice(_CLOSERS))
  return " ".join(part for part in parts if part), spans


def realize(
  walk: Walk,
  reg: FacetRegistry,
  env: ComposedEnv,
  rng: random.Random,
  task_id: str,
  initial_seed: int,
  meta: dict[str, Any],
) -> Task:
  """Turns ``walk`` into a task over ``env`` (s0, distractors included)."""
  base = env.fork()
  ctx = AuthorContext(env, rng)
  w = _Writer(ctx)
  found: Found | None = None
  revisit_target: Any = None
  revisit_value: tuple[int, Any, Any] | None = None
  for i, step in enumerate(walk.steps):
    last = i == len(walk.steps) - 1
    where = f"step {i} ({step.service})"
    if step.role == "revisit_first":
      if step.kind_in is not None:
        incoming = _need(found, where)
        _apply_sink(w, _sink_for(reg, ctx, step.service, step.kind_in, incoming), incoming)
      w.segment()
      w.pin()
      rv = _revisit(reg, step.service, step.revisit)
      first, revisit_target = rv.first(ctx)
      found = _need(first, where)
      w.say(f"{ctx.choice(_FIND)} {found.noun}.")
      w.patterns.append(f"revisit:{rv.kind}->{rv.kind_in}->{rv.kind_after}")
      w.facets.append(f"{rv.service}.{rv.name}")
    elif step.role == "revisit_second":
      w.pin()
      rv = _revisit(reg, step.service, step.revisit)
      _apply_sink(w, rv.change, _need(found, where), target=revisit_target)
      found = _need(rv.second(ctx, revisit_target), where)
      if found.stale == found.values[0].value:
        raise AuthoringError("revisit_not_stale", where)
      revisit_value = (len(ctx.calls), found.values[0], found.stale)
      if not last:
        w.say(f"After that, get {found.noun}.")
    elif step.kind_in is None:
      w.segment()
      src = ctx.choice(reg.sources.get((step.service, step.kind_out or ""), []))
      found = _need(src.fn(ctx), where)
      w.say(f"{ctx.choice(_FIND)} {found.noun}.")
    else:
      incoming = _need(found, where)
      after_revisit = i > 0 and walk.steps[i - 1].role == "revisit_second"
      lookups = [
        lk
        for lk in reg.lookups.get((step.service, step.kind_in), [])
        if (last or lk.kind == step.kind_out) and not after_revisit
      ]
      can_write = bool(reg.sinks.get((step.service, step.kind_in))) and (
        last or bool(reg.sources.get((step.service, step.kind_out or "")))
      )
      if not lookups and not can_write:
        raise AuthoringError("step_unrealizable", where)
      if lookups and (not can_write or rng.random() < 0.5):
        lk = ctx.choice(lookups)
        found = _need(lk.fn(ctx, incoming), where)
        w.say(f"{ctx.choice(CONNECTIVES)} use it to find {found.noun}.")
        w.patterns.append(f"lookup:{lk.kind_in}->{lk.kind}")
        w.facets.append(f"{lk.service}.{lk.name}")
      else:
        _apply_sink(w, _sink_for(reg, ctx, step.service, step.kind_in, incoming), incoming)
        found = None
        if not last:
          w.segment()
          src = ctx.choice(reg.sources.get((step.service, step.kind_out or ""), []))
          found = _need(src.fn(ctx), where)
          w.say(f"Also {ctx.choice(_FIND).lower()} {found.noun}.")
    if last and found is not None:
      _report(w, found)
  substitution: dict[str, Any] | None = None
  if revisit_value is not None:
    start, fresh, stale = revisit_value
    substitution = _stale_substitution(env, ctx.calls, start, fresh.value, stale)
    if substitution is None:
      if not any(fresh.label in a for a in w.answers):
        raise AuthoringError("revisit_unused")
      substitution = {"answer": True, "fresh": fresh.label, "stale_value": str(stale)}
  elif walk.has_revisit or len(walk.services) > 1:
    # only a single-service walk at a service with no within-service revisit (walks.py) is a
    # plain chain of dependent steps; every other task holds the stale-value trap
    raise AuthoringError("no_revisit")
  if not w.criteria:
    raise AuthoringError("no_criteria")
  domains = sorted({env.services[s].domain for s in walk.services})
  s0 = ComposedEnv(dict(base.services), task_services=walk.services, seed=env.seed)
  for patch in ctx.patches:
    apply_patch(s0, patch)
  order, chain_order = _reordered_clauses(w, s0, ctx)
  instruction, clause_spans = _instruction(w, order)
  task = Task(
    id=task_id,
    instruction=instruction,
    services=walk.services,
    distractors=list(env.distractors),
    walk=walk.visits,
    edges=[(a, b) for a, b, _ in walk.edges],
    initial_state=InitialState(seed=initial_seed, patches=ctx.patches, hash=s0.state_hash()),
    reference_solution=ctx.calls,
    reference_answer=" ".join(w.answers) if w.answers else None,
    goal_hash=env.state_hash(),
    rubric=w.criteria,
    meta={
      **meta,
      "generator": GENERATOR_VERSION,
      "author": "procedural",
      "K": len(walk.services),
      "L": len(walk.steps),
      "edge_kinds": [k for _, _, k in walk.edges],
      "patterns": w.patterns,
      "facets": w.facets,
      "domains": domains,
      "business_functions": business_functions(domains),
      "stale_substitution": substitution,
      # the instruction's independent chains, in the order it states them (walk order = sorted)
      "chain_order": chain_order,
      "pinned_chains": [i for i, seg in enumerate(w.segments) if seg["pin"]],
      # each sentence of the request, in its order: [char_start, char_end) in the instruction
      # and the reference solution's calls [call_start, call_end) that it asks for
      "clauses": clause_spans,
    },
  )
  return task
