"""Executable rubrics: declarative JSON checks over the final joint state and the final answer.

A criterion is ``{"id", "text", "kind": "positive"|"must_not", "check": {...}}``. Checks are data,
never code strings; they compare the JSON form of records (datetimes as ISO strings), so a
rubric written against an envelope reads the same as one written against the state.

Check ops:
  record      a record's field compared with a value (fails if the record is missing)
  exists      some record of a collection matches every condition in ``where``
  not_exists  no record matches
  count       the number of matching records compared with a value
  answer      the agent's final answer compared with a value (text or number)
  all/any     every / some sub-check passes;  not: the sub-check fails
Comparisons (``cmp``): eq ne lt le gt ge contains icontains not_contains in startswith approx.

Coupling (``COUPLINGS``) says how the raw check results become the per-criterion indicators b_j:
  independent  each criterion's b_j is its own check result (the paper's b_ij of eq. 5; GRPO's
               default reward input)
  gated        a must-not criterion is credited only when every positive criterion passes, so
               doing nothing earns no credit for "not doing the wrong thing" (``VerifyResult
               .criteria``: the verdict ``success`` and the rubric score evaluation reports)
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic_core import to_jsonable_python

if TYPE_CHECKING:
  from compoworld.compose.env import ComposedEnv

Cmp = Literal[
  "eq", "ne", "lt", "le", "gt", "ge", "contains", "icontains", "not_contains", "in", "startswith",
  "approx",
]  # fmt: skip

_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")


class _Strict(BaseModel):
  model_config = ConfigDict(extra="forbid", frozen=True)


class Condition(_Strict):
  field: str  # a dotted path into the record's JSON form, e.g. "attendees.id"
  cmp: Cmp = "eq"
  value: Any = None
  tolerance: float = 1e-6


class RecordCheck(_Strict):
  op: Literal["record"]
  service: str
  collection: str
  id: str
  field: str
  cmp: Cmp = "eq"
  value: Any = None
  tolerance: float = 1e-6


class ExistsCheck(_Strict):
  op: Literal["exists", "not_exists"]
  service: str
  collection: str
  where: tuple[Condition, ...] = ()


class CountCheck(_Strict):
  op: Literal["count"]
  service: str
  collection: str
  where: tuple[Condition, ...] = ()
  cmp: Cmp = "eq"
  value: int


class AnswerCheck(_Strict):
  op: Literal["answer"]
  cmp: Cmp = "icontains"
  value: Any
  tolerance: float = 1e-6


class AllCheck(_Strict):
  op: Literal["all", "any"]
  checks: tuple[Check, ...]


class NotCheck(_Strict):
  op: Literal["not"]
  check: Check


Check = Annotated[
  RecordCheck | ExistsCheck | CountCheck | AnswerCheck | AllCheck | NotCheck,
  Field(discriminator="op"),
]
AllCheck.model_rebuild()
NotCheck.model_rebuild()


class Criterion(_Strict):
  id: str
  text: str
  kind: Literal["positive", "must_not"] = "positive"
  check: Check


COUPLINGS = ("independent", "gated")


def check_coupling(coupling: str) -> str:
  """``coupling`` if it names one of ``COUPLINGS``; a ValueError otherwise."""
  if coupling not in COUPLINGS:
    raise ValueError(f"unknown rubric coupling {coupling!r}; valid: {', '.join(COUPLINGS)}")
  return coupling


def couple(raw: Sequence[bool], kinds: Sequence[str], coupling: str) -> list[bool]:
  """The per-criterion indicators b_j of raw check results under ``coupling`` (module doc)."""
  check_coupling(coupling)
  raw = [bool(r) for r in raw]
  if coupling == "independent":
    return raw
  positives_pass = all(r for r, k in zip(raw, kinds, strict=True) if k == "positive")
  return [r if k == "positive" else (r and positives_pass) for r, k in zip(raw, kinds, strict=True)]


class VerifyResult(BaseModel):
  """One boolean per criterion in rubric order, and the all-pass success flag.

  ``criteria`` are the gated indicators (``success`` and ``score`` read them); ``raw`` are the
  criteria's own check results, the independent ones (None in results stored before it was kept).
  """

  criteria: list[bool]
  success: bool
  ids: list[str]
  raw: list[bool] | None = None

  @property
  def score(self) -> float:
    return sum(self.criteria) / len(self.criteria) if self.criteria else 0.0

  def passed(self, coupling: str) -> list[bool]:
    """The indicators b_j under ``coupling``: ``raw`` (independent) or ``criteria`` (gated)."""
    if check_coupling(coupling) == "gated":
      return list(self.criteria)
    if self.raw is None:
      raise ValueError("this result keeps no raw check results (stored before they were kept)")
    return list(self.raw)


# --- evaluation ------------------------------------------------------------------------------


def _path(obj: Any, path: str) -> tuple[list[Any], bool]:
  """Values at a dotted path, and whether a list was fanned out on the way
  (``attendees.id`` gives every attendee's id; ``to`` gives the one list)."""
  values, fanned = [obj], False
  parts = path.split(".")
  for i, part in enumerate(parts):
    nxt = []
    for v in values:
      if isinstance(v, dict) and part in v:
        x = v[part]
        if isinstance(x, list) and i < len(parts) - 1:
          nxt.extend(x)
          fanned = True
        else:
          nxt.append(x)
    values = nxt
  return values, fanned


def _number(x: Any) -> float | None:
  if isinstance(x, bool):
    return None
  if isinstance(x, (int, float)):
    return float(x)
  if isinstance(x, str):
    m = _NUMBER.search(x)
    if m:
      return float(m.group().replace(",", ""))
  return None


def compare(actual: Any, cmp: str, expected: Any, tolerance: float = 1e-6) -> bool:
  try:
    if cmp == "eq":
      return actual == expected
    if cmp == "ne":
      return actual != expected
    if cmp in ("lt", "le", "gt", "ge"):
      a, b = (actual, expected)
      if not isinstance(a, str) or not isinstance(b, str):
        a, b = _number(actual), _number(expected)
        if a is None or b is None:
          return False
      return {"lt": a < b, "le": a <= b, "gt": a > b, "ge": a >= b}[cmp]
    if cmp == "approx":
      # A final answer may hold several numbers (dates, counts): any of them may be the one.
      b = _number(expected)
      candidates = (
        [float(m.replace(",", "")) for m in _NUMBER.findall(actual)]
        if isinstance(actual, str)
        else [_number(actual)]
      )
      return b is not None and any(
        a is not None and math.isclose(a, b, abs_tol=tolerance) for a in candidates
      )
    if cmp == "contains":
      return expected in actual if isinstance(actual, (str, list)) else False
    if cmp == "icontains":
      if isinstance(actual, list):
        return any(str(expected).lower() == str(a).lower() for a in actual)
      return isinstance(actual, str) and str(expected).lower() in actual.lower()
    if cmp == "not_contains":
      return not compare(actual, "icontains", expected)
    if cmp == "in":
      return actual in expected
    if cmp == "startswith":
      return isinstance(actual, str) and actual.startswith(str(expected))
  except TypeError:
    return False
  raise ValueError(f"unknown comparison {cmp!r}")


def _field_passes(record: dict, field: str, cmp: str, value: Any, tolerance: float) -> bool:
  values, fanned = _path(record, field)
  if not values:
    return False
  if not fanned:
    return compare(values[0], cmp, value, tolerance)
  # A fanned-out path: "contains" asks about the whole list, other comparisons about any item.
  if cmp in ("contains", "icontains", "not_contains"):
    return compare(values, cmp, value, tolerance)
  return any(compare(v, cmp, value, tolerance) for v in values)


def _records(env: ComposedEnv, service: str, collection: str) -> list[dict]:
  svc = env.services.get(service)
  if svc is None:
    return []
  table = svc.state.tables().get(collection)
  if table is None:
    return []
  # Converting rows to JSON dominates verification; a table's digest names its content, so
  # the converted rows are reused while the table is unchanged.
  key = (table.record_type, table.digest())
  rows = _JSON_ROWS.get(key)
  if rows is None:
    rows = [to_jsonable_python(r) for r in table]
    if len(_JSON_ROWS) > 256:
      _JSON_ROWS.clear()
    _JSON_ROWS[key] = rows
  return rows


_JSON_ROWS: dict[tuple[type, str], list[dict]] = {}


def _matches(env: ComposedEnv, check: ExistsCheck | CountCheck):
  """The records of the check's collection that meet every condition (lazily)."""
  return (
    r
    for r in _records(env, check.service, check.collection)
    if all(_field_passes(r, c.field, c.cmp, c.value, c.tolerance) for c in check.where)
  )


def evaluate(check: Any, env: ComposedEnv, final_answer: str | None = None) -> bool:
  """Whether one check holds in ``env`` given the agent's final answer."""
  if isinstance(check, dict):
    check = Criterion.model_validate({"id": "_", "text": "_", "check": check}).check
  if isinstance(check, RecordCheck):
    svc = env.services.get(check.service)
    table = svc.state.tables().get(check.collection) if svc else None
    record = table.find(check.id) if table is not None else None
    if record is None:
      return False
    return _field_passes(
      to_jsonable_python(record), check.field, check.cmp, check.value, check.tolerance
    )
  if isinstance(check, ExistsCheck):
    found = next(_matches(env, check), None) is not None
    return found if check.op == "exists" else not found
  if isinstance(check, CountCheck):
    return compare(sum(1 for _ in _matches(env, check)), check.cmp, check.value)
  if isinstance(check, AnswerCheck):
    if final_answer is None:
      return False
    return compare(final_answer, check.cmp, check.value, check.tolerance)
  if isinstance(check, AllCheck):
    results = (evaluate(c, env, final_answer) for c in check.checks)
    return all(results) if check.op == "all" else any(results)
  if isinstance(check, NotCheck):
    return not evaluate(check.check, env, final_answer)
  raise TypeError(f"not a check: {check!r}")


def verify(
  rubric: list[Criterion], env: ComposedEnv, final_answer: str | None = None
) -> VerifyResult:
  """Scores a final state: each criterion's own check result (``raw``) and the gated credit
  (``criteria``: must-not criteria count only when every positive passes), which ``success``
  reads. Both forms agree on ``success``: every raw check passing is every credit given."""
  raw = [evaluate(c.check, env, final_answer) for c in rubric]
  credited = couple(raw, [c.kind for c in rubric], "gated")
  return VerifyResult(
    criteria=credited, success=bool(rubric) and all(credited), ids=[c.id for c in rubric], raw=raw
  )


# --- builders: the JSON of a check, for authors that write rubrics in Python ----------------


def where(field: str, value: Any, cmp: str = "eq") -> dict[str, Any]:
  return {"field": field, "cmp": cmp, "value": value}


def record_is(
  service: str, collection: str, id: str, field: str, value: Any, cmp: str = "eq"
) -> dict[str, Any]:
  return {
    "op": "record",
    "service": service,
    "collection": collection,
    "id": id,
    "field": field,
    "cmp": cmp,
    "value": value,
  }


def exists(service: str, collection: str, *conds: dict[str, Any]) -> dict[str, Any]:
  return {"op": "exists", "service": service, "collection": collection, "where": list(conds)}


def not_exists(service: str, collection: str, *conds: dict[str, Any]) -> dict[str, Any]:
  return {**exists(service, collection, *conds), "op": "not_exists"}


def all_of(*checks: dict[str, Any]) -> dict[str, Any]:
  return {"op": "all", "checks": list(checks)}
