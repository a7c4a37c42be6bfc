"""An argument model for a tool declared by a JSON Schema rather than by a typed signature.

The runtime validates every call with ``ToolSpec.args_model`` and reports failures as 400
envelopes naming the argument. Here each top-level property becomes one pydantic field (aliased
to the property's own name, which need not be an identifier) checked by ``jsonschema`` against
its subschema, so a compiled tool accepts exactly what its spec accepts: required properties must
be present, unknown ones are refused, and nested values follow draft-07 to the letter.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Annotated, Any

import jsonschema
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, create_model, model_validator

from compoworld.runtime.tools import ToolSpec
from compoworld.specs.ingest import McpTool

#: Keywords that constrain the arguments object as a whole, beyond each property on its own.
_WHOLE_OBJECT = (
  "anyOf",
  "oneOf",
  "allOf",
  "not",
  "dependencies",
  "minProperties",
  "maxProperties",
  "if",
)


class _Absent:
  """Default of an optional argument the caller left out (never a valid JSON value)."""

  def __repr__(self) -> str:
    return "ABSENT"

  def __copy__(self) -> _Absent:
    return self

  def __deepcopy__(self, memo: dict) -> _Absent:
    return self


ABSENT = _Absent()


def _checker(schema: dict[str, Any]):
  validator = jsonschema.Draft7Validator(schema)

  def check(value: Any) -> Any:
    error = jsonschema.exceptions.best_match(validator.iter_errors(value))
    if error is not None:
      where = "/".join(str(p) for p in error.absolute_path)
      raise ValueError(f"{where + ': ' if where else ''}{error.message[:300]}")
    return value

  return check


def args_model(model_name: str, schema: dict[str, Any]) -> tuple[type[BaseModel], dict[str, str]]:
  """The argument model of ``schema`` and the map from its field names to property names.

  A validated model holds the caller's JSON values unchanged, ``ABSENT`` for left-out optional
  properties (an explicit ``null`` is checked like any other value).
  """
  required = set(schema.get("required", []))
  fields, names = {}, {}
  for i, (prop, sub) in enumerate(schema.get("properties", {}).items()):
    field = f"a{i}"
    names[field] = prop
    kind = Annotated[Any, AfterValidator(_checker(sub))] if sub else Any
    default = ... if prop in required else ABSENT
    fields[field] = (kind, Field(default, alias=prop, description=sub.get("description")))
  config = ConfigDict(extra="forbid", populate_by_name=False, arbitrary_types_allowed=True)
  validators = {}
  whole = {k: v for k, v in schema.items() if k in _WHOLE_OBJECT}
  if whole:  # constraints across properties: oneOf alternatives, dependencies, ...
    check = _checker(whole)
    validators["whole_object"] = model_validator(mode="before")(
      lambda cls, value: check(value) if isinstance(value, dict) else value
    )
  model = create_model(model_name, __config__=config, __validators__=validators, **fields)
  return model, names


def arguments_of(values: dict[str, Any], names: dict[str, str]) -> dict[str, Any]:
  """The call's arguments under their property names, without the left-out ones."""
  return {names[k]: v for k, v in values.items() if v is not ABSENT}


def schema_tool(
  service: str,
  tool: McpTool,
  act: Callable[[Any, dict[str, Any]], Any],
  mutates: bool,
  ports: tuple[tuple[str, ...], tuple[str, ...]] = ((), ()),
  description: str = "",
) -> ToolSpec:
  """The ToolSpec of a tool its JSON Schema declares: calls are checked against the schema, and
  ``act(service, arguments)`` does the work with the arguments under their property names.
  ``description`` stands in when the spec's is empty."""
  model, names = args_model(f"{service}_{tool.name}_args", tool.input_schema)

  def method(self, **values: Any) -> Any:
    return act(self, arguments_of(values, names))

  method.__name__ = re.sub(r"\W", "_", tool.name)
  description = tool.description.strip() or description
  produces, consumes = ports
  return ToolSpec(
    name=tool.name,
    description=description,
    summary=description.split("\n\n")[0].replace("\n", " ")[:300],
    input_schema=tool.input_schema,
    mutates=mutates,
    args_model=model,
    method=method,
    produces=tuple(produces),
    consumes=tuple(consumes),
  )
