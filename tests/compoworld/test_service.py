"""The call contract: validation, envelopes, atomicity, read-only isolation, clock, determinism."""

from __future__ import annotations

import json
import random
from typing import Literal

import pytest

from compoworld import (
  Conflict,
  InvalidArgument,
  NotFound,
  Record,
  Service,
  ServiceState,
  Table,
  ToolError,
  Unprocessable,
  tool,
)
from compoworld.runtime import envelope
from compoworld.runtime.service import CLOCK_STEP
from tests.contract import call_fails, call_ok


class Counter(Record):
  label: str
  value: int = 0
  kind: Literal["up", "down"] = "up"


class CounterState(ServiceState):
  counters: Table[Counter]


class Abort(BaseException):
  """Stands for a KeyboardInterrupt or a task cancellation."""


class ToyCounterService(Service):
  name = "toy_counter"
  domain = "operations"
  description = "Named integer counters."
  State = CounterState

  @classmethod
  def generate(cls, seed: int, size: int | None) -> CounterState:
    rng = random.Random(f"{cls.name}:{seed}")
    state = CounterState(seed=seed, counters={})
    for label in ("apples", "pears", "plums")[: size if size is not None else 3]:
      state.counters.insert(Counter(id=state.new_id("ctr"), label=label, value=rng.randint(0, 100)))
    return state

  # --- reads -------------------------------------------------------------------------------

  @tool(mutates=False)
  def list_counters(self, kind: Literal["up", "down"] | None = None) -> list[Counter]:
    """List the counters.

    Args:
      kind: only counters of this kind.
    """
    return [c for c in self.state.counters if kind is None or c.kind == kind]

  @tool(mutates=False)
  def get_counter(self, counter_id: str) -> Counter:
    """Get one counter.

    Args:
      counter_id: the counter's id.
    """
    return self.state.counters.get(counter_id)

  @tool(mutates=False)
  def peek_and_poke(self, counter_id: str) -> Counter:
    """A read-only tool that (wrongly) writes.

    Args:
      counter_id: the counter's id.
    """
    self.state.new_id("ctr")
    self.state.counters.insert(Counter(id="ctr_sneaky", label="sneaky"))
    return self.state.counters.update(counter_id, value=-1)

  @tool(mutates=False)
  def read_weird(self) -> object:
    """A read that returns something that is not JSON."""
    return object()

  # --- writes ------------------------------------------------------------------------------

  @tool(mutates=True)
  def create_counter(self, label: str, value: int = 0) -> Counter:
    """Create a counter.

    Args:
      label: its label.
      value: its starting value.
    """
    return self.state.counters.insert(
      Counter(id=self.state.new_id("ctr"), label=label, value=value)
    )

  @tool(mutates=True)
  def increment(self, counter_id: str, by: int = 1) -> Counter:
    """Add to a counter.

    Args:
      counter_id: the counter's id.
      by: how much to add.
    """
    counter = self.state.counters.get(counter_id)
    if by == 0:
      raise InvalidArgument("by must not be 0")
    return self.state.counters.update(counter_id, value=counter.value + by)

  @tool(mutates=True)
  def crash(self, counter_id: str) -> Counter:
    """Write, then fail unexpectedly.

    Args:
      counter_id: the counter's id.
    """
    self.state.counters.update(counter_id, value=12345)
    self.state.counters.insert(Counter(id=self.state.new_id("ctr"), label="half"))
    raise RuntimeError("disk on fire")

  @tool(mutates=True)
  def conflicting(self, counter_id: str) -> Counter:
    """Write, then refuse on a business rule.

    Args:
      counter_id: the counter's id.
    """
    self.state.counters.delete(counter_id)
    raise Conflict(f"counter '{counter_id}' is locked")

  @tool(mutates=True)
  def invalid_write(self, counter_id: str) -> Counter:
    """Write, then build an invalid record.

    Args:
      counter_id: the counter's id.
    """
    self.state.counters.update(counter_id, label="renamed")
    return self.state.counters.update(counter_id, value="not a number")

  @tool(mutates=True)
  def write_weird(self, counter_id: str) -> object:
    """Write, then return something that is not JSON.

    Args:
      counter_id: the counter's id.
    """
    self.state.counters.update(counter_id, value=0)
    return {"counter": counter_id, "handle": object()}

  @tool(mutates=True)
  def abort(self, counter_id: str) -> None:
    """Write, then get interrupted.

    Args:
      counter_id: the counter's id.
    """
    self.state.counters.delete(counter_id)
    raise Abort


def make(seed: int = 0) -> ToyCounterService:
  return ToyCounterService(ToyCounterService.generate(seed, None))


@pytest.fixture
def svc() -> ToyCounterService:
  return make()


def first_id(svc: ToyCounterService) -> str:
  return svc.state.counters.ids()[0]


def snapshot(svc: Service) -> tuple[str, str]:
  return svc.state_hash(), svc.state.model_dump_json()


# --- envelopes -----------------------------------------------------------------------------


def test_envelope_helpers():
  assert envelope.ok({"a": 1}) == {"ok": True, "status": 200, "data": {"a": 1}}
  assert envelope.ok() == {"ok": True, "status": 200, "data": None}
  err = envelope.error(404, "not_found", "gone")
  assert err == {"ok": False, "status": 404, "error": {"type": "not_found", "message": "gone"}}
  assert envelope.is_error(err) and not envelope.is_error(envelope.ok())
  assert envelope.is_error({}), "a malformed envelope is not a success"


@pytest.mark.parametrize(
  ("cls", "status", "type_"),
  [
    (InvalidArgument, 400, "invalid_argument"),
    (NotFound, 404, "not_found"),
    (Conflict, 409, "conflict"),
    (Unprocessable, 422, "unprocessable"),
    (ToolError, 500, "internal_error"),
  ],
)
def test_tool_errors_carry_status_and_type(cls, status, type_):
  err = cls("boom")
  assert isinstance(err, ToolError) and str(err) == "boom" and err.message == "boom"
  assert err.envelope() == {
    "ok": False,
    "status": status,
    "error": {"type": type_, "message": "boom"},
  }


def test_success_envelope_shape_and_json_data(svc):
  env = svc.call("get_counter", {"counter_id": first_id(svc)})
  assert set(env) == {"ok", "status", "data"} and env["ok"] is True and env["status"] == 200
  assert env["data"] == svc.state.counters.get(first_id(svc)).model_dump()
  assert json.loads(json.dumps(env)) == env
  listed = call_ok(svc, "list_counters")
  assert [c["id"] for c in listed] == svc.state.counters.ids()
  assert call_ok(svc, "list_counters", {"kind": "down"}) == []


def test_error_envelope_shape(svc):
  env = svc.call("get_counter", {"counter_id": "ctr_missing"})
  assert env == {
    "ok": False,
    "status": 404,
    "error": {"type": "not_found", "message": "counter 'ctr_missing' not found"},
  }


# --- argument validation -------------------------------------------------------------------


def test_missing_argument_is_400_naming_it_and_its_type(svc):
  err = call_fails(svc, "get_counter", {}, 400, "counter_id", "expected string")
  assert err == {
    "type": "invalid_argument",
    "message": "get_counter: missing required argument 'counter_id' (expected string)",
  }


def test_unknown_argument_is_400_naming_it_and_the_valid_ones(svc):
  err = call_fails(svc, "increment", {"counter_id": first_id(svc), "step": 2}, 400)
  assert err["message"] == ("increment: unknown argument 'step' (valid arguments: counter_id, by)")


@pytest.mark.parametrize(
  ("tool_name", "args", "needles"),
  [
    ("get_counter", {"counter_id": 7}, ["'counter_id'", "expected string", "got 7 (int)"]),
    ("increment", {"counter_id": "x", "by": "lots"}, ["'by'", "expected integer", "'lots'"]),
    ("increment", {"counter_id": "x", "by": 1.5}, ["'by'", "expected integer"]),
    ("list_counters", {"kind": "sideways"}, ["'kind'", "one of 'up', 'down'"]),
    ("create_counter", {"label": None}, ["'label'", "expected string", "None"]),
  ],
)
def test_ill_typed_argument_is_400_naming_it_and_the_expected_type(svc, tool_name, args, needles):
  err = call_fails(svc, tool_name, args, 400, *needles)
  assert err["type"] == "invalid_argument" and err["message"].startswith(f"{tool_name}: ")


def test_several_problems_are_all_reported(svc):
  err = call_fails(svc, "increment", {"by": "x", "extra": 1}, 400)
  msg = err["message"]
  assert "'counter_id'" in msg and "'by'" in msg and "'extra'" in msg and msg.count(";") == 2


@pytest.mark.parametrize("args", [[], ["counter_id"], "counter_id=1", 3, 1.5, True])
def test_non_dict_arguments_are_400(svc, args):
  err = call_fails(svc, "get_counter", args, 400, "arguments must be a JSON object")
  assert err["message"].endswith(f"got {type(args).__name__}")


def test_none_arguments_mean_no_arguments(svc):
  assert svc.call("list_counters", None)["status"] == 200
  assert svc.call("list_counters")["status"] == 200
  call_fails(svc, "get_counter", None, 400, "counter_id")


@pytest.mark.parametrize("name", ["nope", "", "GET_COUNTER", 5, None, ["get_counter"]])
def test_unknown_tool_is_404_listing_the_tools(svc, name):
  err = call_fails(svc, name, {}, 404, repr(name))
  assert err["type"] == "unknown_tool"
  assert err["message"].endswith(", ".join(ToyCounterService.tools))
  assert "toy_counter" in err["message"]


# --- failures are atomic -------------------------------------------------------------------


def test_tool_error_after_a_write_is_rolled_back(svc):
  cid = first_id(svc)
  err = call_fails(svc, "conflicting", {"counter_id": cid}, 409, f"counter '{cid}' is locked")
  assert err["type"] == "conflict" and cid in svc.state.counters


def test_unexpected_exception_is_500_and_rolled_back(svc):
  cid = first_id(svc)
  before = svc.state.counters.get(cid)
  seq, now = svc.state.id_seq, svc.state.now
  err = call_fails(svc, "crash", {"counter_id": cid}, 500, "crash: RuntimeError: disk on fire")
  assert err["type"] == "internal_error"
  assert svc.state.counters.get(cid) is before and len(svc.state.counters) == 3
  assert (svc.state.id_seq, svc.state.now) == (seq, now)


def test_invalid_record_is_422_and_rolled_back(svc):
  cid = first_id(svc)
  err = call_fails(svc, "invalid_write", {"counter_id": cid}, 422, "invalid_write: value:")
  assert err["type"] == "unprocessable"
  assert svc.state.counters.get(cid).label == "apples"


def test_tool_raising_not_found_midway_is_rolled_back(svc):
  call_fails(svc, "increment", {"counter_id": "ctr_none"}, 404, "ctr_none")
  call_fails(svc, "increment", {"counter_id": first_id(svc), "by": 0}, 400, "by must not be 0")


def test_non_json_return_of_a_write_is_500_and_rolled_back(svc):
  cid = first_id(svc)
  value = svc.state.counters.get(cid).value
  assert value != 0
  err = call_fails(svc, "write_weird", {"counter_id": cid}, 500, "write_weird:")
  assert err["type"] == "internal_error"
  assert svc.state.counters.get(cid).value == value


def test_non_json_return_of_a_read_is_500(svc):
  call_fails(svc, "read_weird", {}, 500, "read_weird:")


def test_base_exception_propagates_but_rolls_back(svc):
  cid = first_id(svc)
  before = snapshot(svc)
  committed = svc.state
  with pytest.raises(Abort):
    svc.call("abort", {"counter_id": cid})
  assert svc.state is committed and snapshot(svc) == before and cid in svc.state.counters


def test_a_failed_call_leaves_later_calls_working(svc):
  cid = first_id(svc)
  call_fails(svc, "crash", {"counter_id": cid}, 500)
  start = svc.state.counters.get(cid).value
  assert call_ok(svc, "increment", {"counter_id": cid, "by": 2})["value"] == start + 2
  assert svc.state.counters.get(cid).value == start + 2


# --- read-only tools -----------------------------------------------------------------------


def test_read_only_tool_that_writes_cannot_change_the_state(svc):
  cid = first_id(svc)
  before = snapshot(svc)
  committed = svc.state
  data = call_ok(svc, "peek_and_poke", {"counter_id": cid})
  assert data["value"] == -1, "the tool saw its own write on the throwaway fork"
  assert svc.state is committed and snapshot(svc) == before
  assert "ctr_sneaky" not in svc.state.counters and svc.state.id_seq == 3


def test_reads_do_not_advance_the_clock_or_change_the_hash(svc):
  before = snapshot(svc)
  for _ in range(3):
    call_ok(svc, "list_counters")
    call_ok(svc, "get_counter", {"counter_id": first_id(svc)})
  assert snapshot(svc) == before


# --- writes --------------------------------------------------------------------------------


def test_write_commits_and_advances_the_clock_by_one_step(svc):
  cid = first_id(svc)
  now, h0 = svc.state.now, svc.state_hash()
  start = svc.state.counters.get(cid).value
  data = call_ok(svc, "increment", {"counter_id": cid, "by": 5})
  assert data["value"] == start + 5 and svc.state.counters.get(cid).value == start + 5
  assert svc.state.now == now + CLOCK_STEP and svc.state_hash() != h0
  new = call_ok(svc, "create_counter", {"label": "figs", "value": "3"})
  assert new["value"] == 3 and new["id"] in svc.state.counters
  assert svc.state.now == now + 2 * CLOCK_STEP
  call_fails(svc, "increment", {"counter_id": cid, "by": 0}, 400)
  assert svc.state.now == now + 2 * CLOCK_STEP, "a failed write does not advance the clock"


def test_successful_write_replaces_the_state_with_a_fork(svc):
  old = svc.state
  old_json = old.model_dump_json()
  call_ok(svc, "increment", {"counter_id": first_id(svc)})
  assert svc.state is not old
  assert old.model_dump_json() == old_json, "the previous state object is never modified"


# --- determinism, construction, fork -------------------------------------------------------


def run_script(svc: ToyCounterService) -> list[dict]:
  cid = svc.state.counters.ids()[1]
  calls = [
    ("list_counters", {}),
    ("create_counter", {"label": "kiwis", "value": 4}),
    ("increment", {"counter_id": cid, "by": 3}),
    ("crash", {"counter_id": cid}),
    ("get_counter", {"counter_id": "nope"}),
    ("create_counter", {"label": "limes"}),
    ("conflicting", {"counter_id": cid}),
    ("list_counters", {}),
  ]
  return [svc.call(name, args) for name, args in calls]


def test_same_seed_and_calls_give_identical_envelopes_and_hashes():
  a, b = ToyCounterService.create(seed=11), ToyCounterService.create(seed=11)
  assert a.state_hash() == b.state_hash()
  envs_a, envs_b = run_script(a), run_script(b)
  assert envs_a == envs_b
  assert json.dumps(envs_a) == json.dumps(envs_b)
  assert a.state_hash() == b.state_hash() and a.state.model_dump_json() == b.state.model_dump_json()
  assert [e["status"] for e in envs_a] == [200, 200, 200, 500, 404, 200, 409, 200]
  c = ToyCounterService.create(seed=12)
  assert c.state_hash() != ToyCounterService.create(seed=11).state_hash()
  assert run_script(c)[1]["data"]["id"] != envs_a[1]["data"]["id"]


def test_create_and_generate_agree():
  assert ToyCounterService.create(seed=3).state_hash() == make(3).state_hash()
  assert len(ToyCounterService.create(seed=3, size=1).state.counters) == 1


def test_service_needs_its_own_state_type():
  with pytest.raises(TypeError, match="toy_counter needs a CounterState"):
    ToyCounterService(ServiceState())


def test_base_generate_is_abstract():
  with pytest.raises(NotImplementedError):
    Service.generate(0, None)


def test_service_fork_is_independent_and_diffable(svc):
  twin = svc.fork()
  assert type(twin) is ToyCounterService and twin.state is not svc.state
  assert twin.state_hash() == svc.state_hash() and svc.diff(twin) == {}
  cid = first_id(svc)
  call_ok(twin, "increment", {"counter_id": cid, "by": 1})
  value = svc.state.counters.get(cid).value
  assert twin.state.counters.get(cid).value == value + 1
  assert svc.diff(twin) == {
    "counters": {"updated": [{"id": cid, "fields": {"value": [value, value + 1]}}]},
    "_scalars": {"now": ["2026-03-02T09:00:00", "2026-03-02T09:01:00"]},
  }
  call_ok(svc, "create_counter", {"label": "parent only"})
  assert len(twin.state.counters) == 3 and len(svc.state.counters) == 4
