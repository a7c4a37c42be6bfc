import pytest
from pydantic import ValidationError

from compoworld import ComposedEnv
from compoworld.tasks.rubric import (
  COUPLINGS,
  Criterion,
  VerifyResult,
  compare,
  couple,
  evaluate,
  verify,
)


@pytest.fixture(scope="module")
def env():
  return ComposedEnv.from_services(["calendar"], seed=2)


@pytest.fixture(scope="module")
def event(env):
  return next(iter(env.services["calendar"].state.events))


def rec(event, field, value, cmp="eq"):
  return {
    "op": "record",
    "service": "calendar",
    "collection": "events",
    "id": event.id,
    "field": field,
    "cmp": cmp,
    "value": value,
  }


def test_record_checks_compare_json_forms(env, event):
  assert evaluate(rec(event, "title", event.title), env)
  assert not evaluate(rec(event, "title", event.title + "x"), env)
  assert evaluate(rec(event, "start", event.start.isoformat()), env)  # datetimes as ISO text
  assert evaluate(rec(event, "start", "2000-01-01T00:00:00", "gt"), env)
  assert evaluate(rec(event, "attendees.id", event.attendees[0].id, "contains"), env)
  assert not evaluate(rec(event, "attendees.id", "nobody@example.com", "contains"), env)
  assert not evaluate({**rec(event, "title", event.title), "id": "evt_missing"}, env)
  assert not evaluate({**rec(event, "title", event.title), "service": "nope"}, env)


def test_exists_count_and_logic(env, event):
  where = [{"field": "title", "value": event.title}]
  n = sum(e.title == event.title for e in env.services["calendar"].state.events)
  exists = {"op": "exists", "service": "calendar", "collection": "events", "where": where}
  assert evaluate(exists, env)
  assert not evaluate({**exists, "op": "not_exists"}, env)
  count = {"op": "count", "service": "calendar", "collection": "events", "where": where}
  assert evaluate({**count, "value": n}, env)
  assert not evaluate({**count, "value": n + 1}, env)
  assert evaluate({**count, "cmp": "ge", "value": 1}, env)
  yes, no = rec(event, "title", event.title), rec(event, "title", "zz")
  assert evaluate({"op": "all", "checks": [yes, yes]}, env)
  assert not evaluate({"op": "all", "checks": [yes, no]}, env)
  assert evaluate({"op": "any", "checks": [no, yes]}, env)
  assert evaluate({"op": "not", "check": no}, env)


def test_answer_checks(env):
  check = {"op": "answer", "cmp": "approx", "value": 1250.5, "tolerance": 0.01}
  assert evaluate(check, env, "The total is $1,250.50.")
  assert not evaluate(check, env, "The total is 1,200.")
  assert not evaluate(check, env, None)
  assert evaluate({"op": "answer", "value": "snow"}, env, "Snow is expected")


@pytest.mark.parametrize(
  "actual,cmp,expected,result",
  [
    (3, "lt", 4, True),
    ("b", "ge", "a", True),
    (["x", "Y"], "icontains", "y", True),
    ("Hello", "icontains", "ELL", True),
    ("Hello", "not_contains", "bye", True),
    ("a", "in", ["a", "b"], True),
    ("abc", "startswith", "ab", True),
    (None, "gt", 1, False),
  ],
)
def test_compare(actual, cmp, expected, result):
  assert compare(actual, cmp, expected) is result


def test_must_not_is_credited_only_when_positives_pass(env, event):
  positive = Criterion(id="p", text="t", check=rec(event, "title", "zz"))
  must_not = Criterion(
    id="m", text="t", kind="must_not", check={"op": "not", "check": rec(event, "title", "zz")}
  )
  res = verify([positive, must_not], env)
  assert res.criteria == [False, False] and not res.success and res.ids == ["p", "m"]
  positive = Criterion(id="p", text="t", check=rec(event, "title", event.title))
  res = verify([positive, must_not], env)
  assert res.criteria == [True, True] and res.success and res.score == 1.0


def test_coupling_golden_values(env, event):
  """2 positives and 1 must-not; the second positive fails and the must-not check holds."""
  rubric = [
    Criterion(id="p1", text="t", check=rec(event, "title", event.title)),
    Criterion(id="p2", text="t", check=rec(event, "title", "zz")),
    Criterion(
      id="m", text="t", kind="must_not", check={"op": "not", "check": rec(event, "title", "zz")}
    ),
  ]
  res = verify(rubric, env)
  assert res.raw == [True, False, True]
  assert res.passed("independent") == [True, False, True]  # b = [1, 0, 1]
  assert res.passed("gated") == res.criteria == [True, False, False]  # b = [1, 0, 0]
  # the verdict and the score keep the gated form
  assert not res.success and res.score == pytest.approx(1 / 3)
  kinds = ["positive", "positive", "must_not"]
  assert couple([1, 0, 1], kinds, "independent") == [True, False, True]
  assert couple([1, 0, 1], kinds, "gated") == [True, False, False]
  assert couple([1, 1, 1], kinds, "gated") == [True, True, True]
  assert COUPLINGS == ("independent", "gated")


def test_unknown_coupling_is_rejected(env, event):
  res = verify([Criterion(id="p", text="t", check=rec(event, "title", event.title))], env)
  with pytest.raises(ValueError, match="unknown rubric coupling 'both'; valid: independent, gated"):
    res.passed("both")
  with pytest.raises(ValueError, match="valid: independent, gated"):
    couple([True], ["positive"], "")


def test_results_stored_without_raw_still_load():
  old = {"criteria": [True, False], "success": False, "ids": ["a", "b"]}
  res = VerifyResult.model_validate(old)
  assert res.raw is None and res.passed("gated") == [True, False]
  with pytest.raises(ValueError, match="raw"):
    res.passed("independent")


def test_checks_are_validated_data_not_code():
  with pytest.raises(ValidationError):
    Criterion(id="x", text="t", check={"op": "eval", "code": "1"})
  with pytest.raises(ValidationError):
    Criterion(id="x", text="t", check={"op": "record", "service": "s"})
