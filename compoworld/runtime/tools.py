"""The ``@tool`` decorator: one typed, documented method is one tool.

The signature and the Google-style docstring are the single source of truth: they yield the
argument model that validates calls, the JSON Schema (an OpenAI function ``parameters`` object
and an MCP ``inputSchema``), and the description. A list tool marked ``page=`` leaves its two
paging arguments, ``limit`` and ``offset``, to the runtime, which adds them (last) and pages the
items the tool returns.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import math
import re
import typing
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from compoworld.runtime.fields import Limit, Offset
from compoworld.runtime.ports import check_ports
from compoworld.runtime.query import paginate

_TOOL_ATTR = "__compoworld_tool__"


@dataclasses.dataclass(frozen=True)
class ToolOptions:
  mutates: bool
  name: str | None
  produces: tuple[str, ...]
  consumes: tuple[str, ...]
  page: str | None = None
  page_size: int = 20
  page_view: Callable[[Any], Any] | None = None


def tool(
  fn: Callable | None = None,
  *,
  mutates: bool,
  name: str | None = None,
  produces: tuple[str, ...] = (),
  consumes: tuple[str, ...] = (),
  page: str | None = None,
  page_size: int = 20,
  page_view: Callable[[Any], Any] | None = None,
):
  """Marks a service method as a tool.

  Args:
    mutates: whether the tool may change the service state. Read-only tools run on a throwaway
      fork, so they can never change it.
    name: tool name if not the method name.
    produces: port tags of the values a read of this tool yields (e.g. ``person.email``).
    consumes: port tags of the values this tool's arguments take.
    page: makes a list tool paged, naming one of its items ("vendor"). The tool returns all
      its items, in order; the runtime adds the arguments ``limit`` (page size, ``page_size`` by
      default) and ``offset`` (the index of the first item to return) and answers with that page
      (``paginate``: the items, their total and the next page's offset).
    page_size: the default page size of a ``page`` tool.
    page_view: what a page shows of each of its items (a record without its lines); default:
      the item.
  """

  def mark(f: Callable) -> Callable:
    options = ToolOptions(
      mutates, name, tuple(produces), tuple(consumes), page, page_size, page_view
    )
    setattr(f, _TOOL_ATTR, options)
    return f

  return mark(fn) if fn is not None else mark


def tool_options(fn: Any) -> ToolOptions | None:
  return getattr(fn, _TOOL_ATTR, None)


@dataclasses.dataclass(frozen=True)
class ToolSpec:
  """Everything the runtime and the agent need to know about one tool."""

  name: str
  description: str
  summary: str
  input_schema: dict[str, Any]
  mutates: bool
  args_model: type[BaseModel]
  method: Callable
  produces: tuple[str, ...] = ()
  consumes: tuple[str, ...] = ()

  def describe(self) -> dict[str, Any]:
    return {
      "name": self.name,
      "description": self.description,
      "input_schema": self.input_schema,
      "mutates": self.mutates,
    }

  def openai_schema(self, name: str | None = None) -> dict[str, Any]:
    return {
      "type": "function",
      "function": {
        "name": name or self.name,
        "description": self.description,
        "parameters": self.input_schema,
      },
    }


_ARGS_HEADER = re.compile(r"^\s*(Args|Arguments|Parameters):\s*$")
_SECTION = re.compile(r"^\s*(Returns|Raises|Yields|Examples?|Notes?):\s*$")
_ARG_LINE = re.compile(r"^\s*(\w+)\s*(\([^)]*\))?:\s*(.*)$")


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
  """Splits a Google-style docstring into (description, {argument: description})."""
  doc = inspect.cleandoc(doc or "")
  desc_lines, args, current, section = [], {}, None, "desc"
  arg_indent = None  # indentation of the argument lines: that of the first one
  for line in doc.splitlines():
    if _ARGS_HEADER.match(line):
      section, arg_indent = "args", None
      continue
    if _SECTION.match(line):
      section = "other"
      continue
    if section == "desc":
      desc_lines.append(line)
    elif section == "args":
      m = _ARG_LINE.match(line)
      indent = len(line) - len(line.lstrip())
      if arg_indent is None and line.strip():
        arg_indent = indent
      if m and indent <= arg_indent:
        current = m.group(1)
        args[current] = m.group(3).strip()
      elif current and line.strip():
        args[current] = f"{args[current]} {line.strip()}"
  return "\n".join(desc_lines).strip(), args


def _strip_titles(node: Any) -> Any:
  if isinstance(node, dict):
    return {k: _strip_titles(v) for k, v in node.items() if k != "title" or not isinstance(v, str)}
  if isinstance(node, list):
    return [_strip_titles(v) for v in node]
  return node


def _inline_refs(node: Any, defs: dict[str, Any]) -> Any:
  if isinstance(node, dict):
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
      target = _inline_refs(defs[ref.split("/")[-1]], defs)
      extra = {k: _inline_refs(v, defs) for k, v in node.items() if k != "$ref"}
      return {**target, **extra}
    return {k: _inline_refs(v, defs) for k, v in node.items() if k != "$defs"}
  if isinstance(node, list):
    return [_inline_refs(v, defs) for v in node]
  return node


def _collapse_optional(prop: dict[str, Any]) -> dict[str, Any]:
  """``anyOf: [X, null]`` with default null reads better to an agent as an optional X."""
  options = prop.get("anyOf")
  if prop.get("default", 0) is None and isinstance(options, list) and len(options) == 2:
    rest = [o for o in options if o != {"type": "null"}]
    if len(rest) == 1:
      merged = {**rest[0], **{k: v for k, v in prop.items() if k not in ("anyOf", "default")}}
      return merged
  return prop


def json_schema_of(model: type[BaseModel]) -> dict[str, Any]:
  """A self-contained JSON Schema (no ``$ref``, no titles) for ``model``."""
  schema = model.model_json_schema()
  schema = _inline_refs(schema, schema.get("$defs", {}))
  schema = _strip_titles(schema)
  schema["properties"] = {k: _collapse_optional(v) for k, v in schema.get("properties", {}).items()}
  schema["type"] = "object"
  schema["additionalProperties"] = False
  return schema


def build_spec(method: Callable, owner: str) -> ToolSpec:
  """Builds the ToolSpec of a method marked with ``@tool``."""
  opts = tool_options(method)
  assert opts is not None
  description, arg_docs = parse_docstring(method.__doc__)
  if not description:
    raise TypeError(f"tool {owner}.{method.__name__} needs a docstring")
  hints = typing.get_type_hints(method, include_extras=True)
  fields: dict[str, Any] = {}
  for pname, param in list(inspect.signature(method).parameters.items())[1:]:
    if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
      raise TypeError(f"tool {owner}.{method.__name__}: *args/**kwargs are not allowed")
    if pname not in hints:
      raise TypeError(f"tool {owner}.{method.__name__}: argument '{pname}' needs a type")
    if pname not in arg_docs:
      raise TypeError(f"tool {owner}.{method.__name__}: document argument '{pname}' under Args:")
    default = ... if param.default is inspect.Parameter.empty else param.default
    fields[pname] = (hints[pname], Field(default, description=arg_docs[pname]))
  if opts.page is not None:
    if {"limit", "offset"} & set(fields):
      raise TypeError(f"tool {owner}.{method.__name__}: page= adds limit and offset itself")
    fields["limit"] = (Limit, Field(opts.page_size, description="page size (1-100)."))
    fields["offset"] = (Offset, Field(0, description=f"index of the first {opts.page} to return."))
    method = _paged(method, opts.page_view)
  name = opts.name or method.__name__
  check_ports(f"tool {owner}.{name}", opts.produces + opts.consumes)
  config = ConfigDict(extra="forbid", allow_inf_nan=False)
  args_model = create_model(f"{owner}_{name}_args", __config__=config, **fields)
  return ToolSpec(
    name=name,
    description=description,
    summary=description.split("\n\n")[0].replace("\n", " "),
    input_schema=json_schema_of(args_model),
    mutates=opts.mutates,
    args_model=args_model,
    method=method,
    produces=opts.produces,
    consumes=opts.consumes,
  )


def _paged(method: Callable, view: Callable[[Any], Any] | None = None) -> Callable:
  """``method`` answering with one page of the items it returns (each shown through ``view``)."""

  @functools.wraps(method)
  def page(self: Any, limit: int, offset: int, **arguments: Any) -> dict[str, Any]:
    return paginate(method(self, **arguments), limit, offset, view)

  return page


def expected_type(schema: dict[str, Any]) -> str:
  """A short human reading of a JSON Schema, for error messages."""
  if "enum" in schema:
    return "one of " + ", ".join(repr(v) for v in schema["enum"])
  if "const" in schema:
    return repr(schema["const"])
  for key in ("anyOf", "oneOf"):
    if key in schema:
      return " or ".join(expected_type(s) for s in schema[key])
  kind = schema.get("type", "any value")
  if kind == "array":
    return f"array of {expected_type(schema.get('items', {}))}"
  if "format" in schema:
    return f"{kind} ({schema['format']})"
  return str(kind)


def describe_validation_error(err: ValidationError, schema: dict[str, Any], tool_name: str) -> str:
  """One readable sentence per problem, naming the argument and the expected type."""
  props = schema.get("properties", {})
  problems = []
  for e in err.errors(include_url=False):
    loc = [str(p) for p in e["loc"]]
    arg = loc[0] if loc else "?"
    path = ".".join(loc)
    want = expected_type(props.get(arg, {}))
    if e["type"] == "missing":
      problems.append(f"missing required argument '{path}' (expected {want})")
    elif e["type"] == "extra_forbidden":
      valid = ", ".join(props) or "none"
      problems.append(f"unknown argument '{path}' (valid arguments: {valid})")
    else:
      got = e.get("input")
      problems.append(
        f"argument '{path}' expected {want}, got {got!r} ({type(got).__name__}): {e['msg']}"
      )
  return f"{tool_name}: " + "; ".join(problems)


def unrepresentable(value: Any, path: str = "") -> tuple[str, str] | None:
  """The first thing inside a validated argument value that JSON cannot carry faithfully, as
  (its path, what is wrong): NaN or an infinity (JSON has no such numbers, but Python's parser
  reads ``NaN`` and ``Infinity``, and pydantic turns the string "inf" into one), or a string
  holding a lone surrogate (a ``\\ud800`` escape: no UTF-8 encoding, so no state could be saved
  or hashed with it)."""
  if isinstance(value, float):
    return None if math.isfinite(value) else (path, f"must be a finite number, got {value!r}")
  if isinstance(value, str):
    try:
      value.encode("utf-8")
    except UnicodeEncodeError:
      return path, "must be valid Unicode text, got a lone surrogate"
    return None
  if isinstance(value, dict):
    for key in value:
      found = unrepresentable(key, f"{path}.<key>" if path else "<key>")
      if found is not None:
        return found
    items: Any = value.items()
  elif isinstance(value, (list, tuple)):
    items = enumerate(value)
  elif isinstance(value, BaseModel):
    items = value.__dict__.items()
  else:
    return None
  for key, item in items:
    found = unrepresentable(item, f"{path}.{key}" if path else str(key))
    if found is not None:
      return found
  return None
