"""A service: a typed state, a set of tools over it, and the call contract.

Subclass ``Service``, set ``name``/``domain``/``description``/``State``, write tools as methods
marked ``@tool(mutates=...)`` that read and write ``self.state``, and implement
``generate(rng, size)`` to seed realistic data. ``call`` does the rest: argument validation,
atomic execution on a fork, error envelopes, the logical clock.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar

from pydantic import ValidationError
from pydantic_core import to_jsonable_python

from compoworld.runtime import envelope
from compoworld.runtime.domains import DOMAINS
from compoworld.runtime.envelope import Envelope, ToolError
from compoworld.runtime.state import ServiceState
from compoworld.runtime.tools import (
  ToolSpec,
  build_spec,
  describe_validation_error,
  tool_options,
  unrepresentable,
)

#: How far the logical clock moves after every successful write.
CLOCK_STEP = timedelta(minutes=1)

_BASE_CACHE_SIZE = 4096  # task generation cycles through worlds x services
_BASE_STATES: dict[tuple[type, int, int | None], ServiceState] = {}


class Service:
  """Base class of every service; one instance owns one state."""

  name: ClassVar[str]
  domain: ClassVar[str]
  description: ClassVar[str]
  State: ClassVar[type[ServiceState]]
  tools: ClassVar[dict[str, ToolSpec]] = {}

  def __init_subclass__(cls, **kwargs: Any) -> None:
    super().__init_subclass__(**kwargs)
    specs = {}
    for klass in reversed(cls.__mro__):
      for value in vars(klass).values():
        if tool_options(value) is not None:
          spec = build_spec(value, cls.__name__)
          specs[spec.name] = spec
    cls.tools = specs
    if getattr(cls, "name", None) is None:
      return  # an abstract intermediate class
    if cls.domain not in DOMAINS:
      raise TypeError(f"{cls.__name__}.domain '{cls.domain}' is not one of {DOMAINS}")
    if "__" in cls.name or not cls.name.isidentifier():
      raise TypeError(f"service name '{cls.name}' must be an identifier without '__'")

  def __init__(self, state: ServiceState):
    if not isinstance(state, self.State):
      raise TypeError(f"{self.name} needs a {self.State.__name__}, got {type(state).__name__}")
    self.state = state

  # --- construction ------------------------------------------------------------------------

  @classmethod
  def generate(cls, seed: int, size: int | None) -> ServiceState:
    """A realistic initial state drawn from ``seed`` alone (same seed, same state).

    ``size`` scales the main collections; None gives the service's everyday default.
    """
    raise NotImplementedError

  @classmethod
  def create(cls, seed: int = 0, size: int | None = None) -> Service:
    """A service in its generated state; generation runs once per (seed, size) and later
    calls get an O(tables) fork of the cached state (task generation builds thousands)."""
    key = (cls, seed, size)
    base = _BASE_STATES.get(key)
    if base is None:
      base = _BASE_STATES[key] = cls.generate(seed, size)
      if len(_BASE_STATES) > _BASE_CACHE_SIZE:
        _BASE_STATES.pop(next(iter(_BASE_STATES)))
    return cls(base.fork())

  def fork(self) -> Service:
    return type(self)(self.state.fork())

  def state_hash(self) -> str:
    return self.state.content_hash()

  def diff(self, other: Service) -> dict[str, Any]:
    return self.state.diff(other.state)

  # --- the call contract -------------------------------------------------------------------

  @classmethod
  def tool_names(cls) -> list[str]:
    return list(cls.tools)

  @classmethod
  def spec(cls, tool_name: str) -> ToolSpec | None:
    return cls.tools.get(tool_name)

  def unknown_tool(self, tool_name: Any) -> Envelope:
    return envelope.error(
      404,
      "unknown_tool",
      f"service '{self.name}' has no tool {tool_name!r}; its tools are: " + ", ".join(self.tools),
    )

  def call(self, tool_name: str, arguments: dict[str, Any] | None = None) -> Envelope:
    """Runs one tool call and returns its envelope; never raises, never half-applies."""
    spec = self.tools.get(tool_name) if isinstance(tool_name, str) else None
    if spec is None:
      return self.unknown_tool(tool_name)
    if arguments is None:
      arguments = {}
    if not isinstance(arguments, dict):
      return envelope.error(
        400,
        "invalid_argument",
        f"{spec.name}: arguments must be a JSON object, got {type(arguments).__name__}",
      )
    try:
      args = spec.args_model.model_validate(arguments)
    except ValidationError as err:
      message = describe_validation_error(err, spec.input_schema, spec.name)
      return envelope.error(400, "invalid_argument", message)
    for field, value in args.__dict__.items():
      found = unrepresentable(value)
      if found is not None:
        name = spec.args_model.model_fields[field].alias or field
        path = f"{name}.{found[0]}" if found[0] else name
        message = f"{spec.name}: argument '{path}' {found[1]}"
        return envelope.error(400, "invalid_argument", message)
    # Every call runs on a fork; only a successful write is committed. Reads are discarded,
    # so a read-only tool cannot change the state even by mistake.
    kwargs = {k: _naive(v) for k, v in args.__dict__.items()}
    committed = self.state
    work = committed.fork()
    self.state = work
    try:
      result = spec.method(self, **kwargs)
      data = to_jsonable_python(result)
    except ToolError as err:
      self.state = committed
      return err.envelope()
    except ValidationError as err:
      self.state = committed
      return envelope.error(422, "unprocessable", f"{spec.name}: {_short(err)}")
    except Exception as err:
      self.state = committed
      return envelope.error(500, "internal_error", f"{spec.name}: {type(err).__name__}: {err}")
    except BaseException:
      self.state = committed  # e.g. KeyboardInterrupt or a cancellation: never half-apply
      raise
    if spec.mutates:
      work.advance(CLOCK_STEP)
    else:
      self.state = committed
    return envelope.ok(data)


def _naive(value: Any) -> Any:
  """Service clocks are naive UTC: an argument with a zone (or a Unix time, which pydantic
  reads as UTC) is converted, so comparing it with stored times cannot fail."""
  if isinstance(value, datetime) and value.tzinfo is not None:
    return value.astimezone(UTC).replace(tzinfo=None)
  if isinstance(value, list):
    return [_naive(v) for v in value]
  return value


def _short(err: ValidationError) -> str:
  parts = []
  for e in err.errors(include_url=False):
    loc = ".".join(str(p) for p in e["loc"])
    parts.append(f"{loc}: {e['msg']}" if loc else e["msg"])
  return "; ".join(parts)
