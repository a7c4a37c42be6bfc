"""The @tool decorator: schemas from signatures and docstrings, and class-creation checks."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import datetime
from typing import Any, Literal

import jsonschema
import mcp.types
import pydantic
import pytest
from openai.types.chat import ChatCompletionFunctionTool

from compoworld import Record, Service, ServiceState, Table, ToolSpec, tool
from compoworld.runtime.fields import Email, Limit
from compoworld.runtime.tools import expected_type, parse_docstring
from envs.calendar import CalendarService

OPENAI_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


class Address(pydantic.BaseModel):
  """A postal address."""

  street: str
  city: str
  country: Literal["FR", "DE", "JP"] = "FR"


class Ticket(Record):
  subject: str
  requester: str
  priority: Literal["low", "high"] = "low"


class DeskState(ServiceState):
  tickets: Table[Ticket]


class DeskService(Service):
  name = "toy_desk"
  domain = "support"
  description = "A tiny help desk."
  State = DeskState

  @classmethod
  def generate(cls, seed: int, size: int | None) -> DeskState:
    return DeskState(seed=seed, tickets={})

  @tool(mutates=False, produces=("ticket.id",))
  def search_tickets(
    self,
    query: str,
    status: Literal["open", "closed"] | None = None,
    priority: Literal["low", "high"] = "low",
    limit: Limit = 20,
    since: datetime | None = None,
    tags: list[str] = (),
  ) -> list[Ticket]:
    """Search tickets by words in the subject.

    Results come newest first.

    Args:
      query: words that must all appear in the subject; a long description
        that continues on a second line.
      status: only tickets with this status.
      priority: only tickets of this priority.
      limit: page size (1-100).
      since: only tickets opened after this time (ISO 8601).
      tags: only tickets with all these tags.

    Returns:
      The matching tickets.
    """
    return []

  @tool(mutates=True, name="open_ticket", consumes=("person.email",), produces=("ticket.id",))
  def _open(
    self,
    subject: str,
    requester: Email,
    address: Address,
    cc: list[Address] = (),
    channel: Literal["email"] = "email",
    note: str | None = None,
  ) -> Ticket:
    """Open a ticket for a requester.

    Args:
      subject: one line summary.
      requester: who asked.
      address: where to send the paperwork.
      cc: other addresses to copy.
      channel: how the ticket came in.
      note: an internal note.
    """
    return self.state.tickets.insert(
      Ticket(id=self.state.new_id("tkt"), subject=subject, requester=requester)
    )

  @tool(mutates=False)
  def ping(self) -> str:
    """Check the service answers."""
    return "pong"

  def helper(self) -> None:
    """Not a tool: no decorator."""


def walk(node: Any, path: str = "$") -> Iterator[tuple[str, str, Any]]:
  """Every (path, key, value) of a JSON-like tree."""
  if isinstance(node, dict):
    for k, v in node.items():
      yield path, k, v
      yield from walk(v, f"{path}.{k}")
  elif isinstance(node, list):
    for i, v in enumerate(node):
      yield from walk(v, f"{path}[{i}]")


def all_specs() -> list[ToolSpec]:
  return [*DeskService.tools.values(), *CalendarService.tools.values()]


SPEC_IDS = [f"{s.name}" for s in all_specs()]


# --- the schema ----------------------------------------------------------------------------


def test_tools_are_collected_with_names_and_flags():
  assert list(DeskService.tools) == ["search_tickets", "open_ticket", "ping"]
  assert DeskService.tool_names() == ["search_tickets", "open_ticket", "ping"]
  search, opened = DeskService.spec("search_tickets"), DeskService.spec("open_ticket")
  assert DeskService.spec("helper") is None and DeskService.spec("_open") is None
  assert (search.mutates, opened.mutates) == (False, True)
  assert search.produces == ("ticket.id",) and search.consumes == ()
  assert opened.consumes == ("person.email",) and opened.produces == ("ticket.id",)
  assert opened.method is DeskService._open


def test_description_and_summary_come_from_the_docstring():
  spec = DeskService.spec("search_tickets")
  assert spec.description == "Search tickets by words in the subject.\n\nResults come newest first."
  assert spec.summary == "Search tickets by words in the subject."
  assert "Args" not in spec.description and "Returns" not in spec.description
  assert DeskService.spec("ping").description == "Check the service answers."


def test_schema_properties_required_and_descriptions():
  schema = DeskService.spec("search_tickets").input_schema
  assert schema["type"] == "object" and schema["additionalProperties"] is False
  assert list(schema["properties"]) == ["query", "status", "priority", "limit", "since", "tags"]
  assert schema["required"] == ["query"]
  props = schema["properties"]
  assert props["query"] == {
    "type": "string",
    "description": "words that must all appear in the subject; a long description that "
    "continues on a second line.",
  }
  assert props["limit"] == {
    "type": "integer",
    "minimum": 1,
    "maximum": 100,
    "default": 20,
    "description": "page size (1-100).",
  }
  assert props["tags"]["type"] == "array" and props["tags"]["items"] == {"type": "string"}
  assert props["since"] == {
    "type": "string",
    "format": "date-time",
    "description": "only tickets opened after this time (ISO 8601).",
  }


def test_optional_arguments_collapse_to_their_type_and_are_not_required():
  props = DeskService.spec("search_tickets").input_schema["properties"]
  assert props["status"] == {
    "type": "string",
    "enum": ["open", "closed"],
    "description": "only tickets with this status.",
  }
  assert "anyOf" not in props["status"] and "anyOf" not in props["since"]
  note = DeskService.spec("open_ticket").input_schema["properties"]["note"]
  assert note == {"type": "string", "description": "an internal note."}


def test_literal_becomes_enum_and_single_literal_const():
  props = DeskService.spec("search_tickets").input_schema["properties"]
  assert props["priority"]["enum"] == ["low", "high"] and props["priority"]["default"] == "low"
  channel = DeskService.spec("open_ticket").input_schema["properties"]["channel"]
  assert channel.get("enum", [channel.get("const")]) == ["email"]


def test_annotated_field_constraints_and_arg_description_win():
  props = DeskService.spec("open_ticket").input_schema["properties"]
  assert props["requester"]["pattern"].startswith("^")
  assert props["requester"]["description"] == "who asked."


def test_nested_models_are_inlined_without_refs_or_titles():
  schema = DeskService.spec("open_ticket").input_schema
  assert schema["required"] == ["subject", "requester", "address"]
  address = schema["properties"]["address"]
  assert address["type"] == "object"
  assert set(address["properties"]) == {"street", "city", "country"}
  assert address["properties"]["country"]["enum"] == ["FR", "DE", "JP"]
  assert address["description"] == "where to send the paperwork."
  assert schema["properties"]["cc"]["items"]["properties"]["city"] == {"type": "string"}


@pytest.mark.parametrize("spec", all_specs(), ids=SPEC_IDS)
def test_no_refs_defs_or_titles_anywhere(spec):
  for path, key, value in walk(spec.input_schema):
    assert key not in ("$ref", "$defs", "definitions"), (path, key)
    assert not (key == "title" and isinstance(value, str)), (path, key)


def test_a_property_called_title_is_kept():
  props = CalendarService.spec("create_event").input_schema["properties"]
  assert props["title"]["description"] == "the event title."
  assert props["title"]["minLength"] == 1


@pytest.mark.parametrize("spec", all_specs(), ids=SPEC_IDS)
def test_schema_is_valid_json_schema_openai_function_and_mcp_tool(spec):
  schema = spec.input_schema
  jsonschema.Draft202012Validator.check_schema(schema)
  assert schema["type"] == "object" and schema["additionalProperties"] is False
  assert isinstance(schema["properties"], dict)
  assert set(schema.get("required", [])) <= set(schema["properties"])
  for prop in schema["properties"].values():
    assert prop.get("description"), "every argument is documented"

  fn = spec.openai_schema()
  assert fn["type"] == "function" and set(fn["function"]) == {"name", "description", "parameters"}
  assert OPENAI_NAME.match(fn["function"]["name"]) and fn["function"]["description"]
  parsed = ChatCompletionFunctionTool.model_validate(fn)
  assert parsed.function.name == spec.name and parsed.function.parameters == schema
  assert spec.openai_schema("svc__x")["function"]["name"] == "svc__x"

  mcp_tool = mcp.types.Tool(name=spec.name, description=spec.description, inputSchema=schema)
  assert mcp_tool.name == spec.name and mcp_tool.input_schema == schema
  assert mcp_tool.model_dump(by_alias=True)["inputSchema"]["type"] == "object"

  assert spec.describe() == {
    "name": spec.name,
    "description": spec.description,
    "input_schema": schema,
    "mutates": spec.mutates,
  }


def test_schema_and_args_model_agree_on_instances():
  spec = DeskService.spec("search_tickets")
  validator = jsonschema.Draft202012Validator(spec.input_schema)
  good = {"query": "printer", "status": "open", "limit": 5, "tags": ["a"]}
  assert not list(validator.iter_errors(good))
  spec.args_model.model_validate(good)
  for bad in (
    {},
    {"query": "x", "bogus": 1},
    {"query": 3},
    {"query": "x", "status": "pending"},
    {"query": "x", "limit": 0},
  ):
    assert list(validator.iter_errors(bad)), bad
    with pytest.raises(pydantic.ValidationError):
      spec.args_model.model_validate(bad)


def test_tool_without_arguments_has_an_empty_object_schema():
  schema = DeskService.spec("ping").input_schema
  assert schema == {"type": "object", "properties": {}, "additionalProperties": False}


# --- class-creation checks -----------------------------------------------------------------


def _service(body: dict[str, Any]) -> type[Service]:
  ns = {"domain": "support", "description": "x", "State": DeskState, **body}
  return type("BadService", (Service,), ns)


def test_tool_without_docstring_is_rejected():
  def no_doc(self, x: int) -> int:
    return x

  with pytest.raises(TypeError, match=r"tool BadService\.no_doc needs a docstring"):
    _service({"no_doc": tool(mutates=False)(no_doc)})


def test_tool_with_undocumented_argument_is_rejected():
  def half_doc(self, x: int, y: int) -> int:
    """Adds.

    Args:
      x: the first.
    """
    return x + y

  with pytest.raises(TypeError, match=r"argument 'y' under Args"):
    _service({"half_doc": tool(mutates=False)(half_doc)})


def test_tool_with_untyped_argument_is_rejected():
  def untyped(self, x) -> int:
    """Echo.

    Args:
      x: anything.
    """
    return x

  with pytest.raises(TypeError, match=r"argument 'x' needs a type"):
    _service({"untyped": tool(mutates=False)(untyped)})


def test_tool_with_var_args_is_rejected():
  def star(self, *xs: int) -> int:
    """Sum.

    Args:
      xs: numbers.
    """
    return sum(xs)

  def kw(self, **xs: int) -> int:
    """Sum.

    Args:
      xs: numbers.
    """
    return sum(xs.values())

  for fn in (star, kw):
    with pytest.raises(TypeError, match=r"\*args/\*\*kwargs are not allowed"):
      _service({fn.__name__: tool(mutates=False)(fn)})


def _paged_service() -> type[Service]:
  def list_tickets(self, priority: Literal["low", "high"] | None = None) -> list:
    """List tickets in id order.

    Args:
      priority: only tickets of this priority.
    """
    return [t for t in self.state.tickets if priority in (None, t.priority)]

  return _service({"list_tickets": tool(mutates=False, page="ticket", page_size=2)(list_tickets)})


def test_a_paged_tool_gets_limit_and_offset_last_with_their_descriptions():
  schema = _paged_service().spec("list_tickets").input_schema
  assert list(schema["properties"]) == ["priority", "limit", "offset"]
  assert schema["properties"]["limit"] == {
    "type": "integer",
    "minimum": 1,
    "maximum": 100,
    "default": 2,
    "description": "page size (1-100).",
  }
  assert schema["properties"]["offset"] == {
    "type": "integer",
    "minimum": 0,
    "default": 0,
    "description": "index of the first ticket to return.",
  }


def test_a_paged_tool_answers_with_one_page_of_its_items():
  tickets = [Ticket(id=f"t{i}", subject="s", requester="r", priority="high") for i in range(5)]
  service = _paged_service()(DeskState(seed=0, tickets=tickets))
  out = service.call("list_tickets", {"priority": "high", "offset": 3})
  assert out["data"] == {
    "items": [dict(tickets[3]), dict(tickets[4])],
    "total": 5,
    "offset": 3,
    "next_offset": None,
  }
  assert service.call("list_tickets", {"limit": 1})["data"]["next_offset"] == 1
  assert service.call("list_tickets", {"limit": 0})["error"]["type"] == "invalid_argument"


def test_a_paged_tool_may_not_declare_its_own_limit():
  def both(self, limit: Limit = 20) -> list:
    """List.

    Args:
      limit: page size.
    """
    return []

  with pytest.raises(TypeError, match=r"page= adds limit and offset itself"):
    _service({"both": tool(mutates=False, page="x")(both)})


def test_service_class_checks_domain_and_name():
  with pytest.raises(TypeError, match="domain 'gardening' is not one of"):
    _service({"name": "toy_bad", "domain": "gardening"})
  for bad in ("toy__bad", "toy bad", "9toy"):
    with pytest.raises(TypeError, match="must be an identifier without '__'"):
      _service({"name": bad})


def test_abstract_intermediate_service_and_inherited_tools():
  class Base(Service):
    @tool(mutates=False)
    def hello(self) -> str:
      """Say hello."""
      return "hi"

  class Child(Base):
    name = "toy_child"
    domain = "support"
    description = "x"
    State = DeskState

    @tool(mutates=True)
    def bye(self) -> str:
      """Say bye."""
      return "bye"

  assert list(Base.tools) == ["hello"] and list(Child.tools) == ["hello", "bye"]
  assert Child(DeskState(tickets={})).call("hello") == {"ok": True, "status": 200, "data": "hi"}


def test_spec_is_immutable():
  spec = DeskService.spec("ping")
  with pytest.raises(AttributeError):
    spec.name = "other"


# --- docstring parsing and type readings ----------------------------------------------------


def test_parse_docstring_two_space_style():
  doc = """Do a thing.

  More detail.

  Args:
    a: first.
    b (int): second,
      continued: still b.
  Returns:
    c: not an argument.
  """
  assert parse_docstring(doc) == (
    "Do a thing.\n\nMore detail.",
    {"a": "first.", "b": "second, continued: still b."},
  )


def test_parse_docstring_four_space_style():
  doc = """Do a thing.

      Arguments:
          a: first.
          b: second
              continued.

      Raises:
          ValueError: never.
      """
  assert parse_docstring(doc) == ("Do a thing.", {"a": "first.", "b": "second continued."})


def test_parse_docstring_without_sections():
  assert parse_docstring(None) == ("", {})
  assert parse_docstring("  One line.  ") == ("One line.", {})
  assert parse_docstring("Top.\n\nParameters:\n  x: an x.") == ("Top.", {"x": "an x."})


def test_four_space_docstring_tool_is_accepted():
  def four(self, x: int) -> int:
    """Echo x.

    Args:
        x: the value.
    """
    return x

  cls = _service({"name": "toy_four", "four": tool(mutates=False)(four)})
  assert cls.spec("four").input_schema["properties"]["x"]["description"] == "the value."


@pytest.mark.parametrize(
  ("schema", "reading"),
  [
    ({"type": "string"}, "string"),
    ({"enum": ["a", "b"]}, "one of 'a', 'b'"),
    ({"const": "x"}, "'x'"),
    ({"anyOf": [{"type": "integer"}, {"type": "null"}]}, "integer or null"),
    ({"type": "array", "items": {"type": "string", "format": "email"}}, "array of string (email)"),
    ({"type": "string", "format": "date-time"}, "string (date-time)"),
    ({}, "any value"),
  ],
)
def test_expected_type_reading(schema, reading):
  assert expected_type(schema) == reading
