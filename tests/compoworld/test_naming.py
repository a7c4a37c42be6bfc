"""Reading a tool's role from its name, annotations and schema."""

import pytest

from compoworld.specs.naming import (
  common_prefix,
  field_name,
  id_entity,
  past,
  role_of,
  singular,
  tokens,
)

OBJ = {"type": "object", "properties": {}}


def schema(**props):
  return {"type": "object", "properties": props}


def test_tokens_split_every_convention():
  assert tokens("ACTIVE_CAMPAIGN__CREATE_CONTACT") == ["active", "campaign", "create", "contact"]
  assert tokens("getPullRequest") == ["get", "pull", "request"]
  assert tokens("list-npm-package-versions") == ["list", "npm", "package", "versions"]
  assert tokens("HTMLParser2") == ["html", "parser", "2"]


@pytest.mark.parametrize(
  ("word", "one"),
  [
    ("entries", "entry"),
    ("boxes", "box"),
    ("issues", "issue"),
    ("status", "status"),
    ("news", "news"),
  ],
)
def test_singular(word, one):
  assert singular(word) == one


def test_id_arguments_name_their_entity():
  assert id_entity("contact_id") == "contact"
  assert id_entity("listEntryId") == "list_entry"
  assert id_entity("id") == ""
  assert id_entity("ids") is None and id_entity("video") is None


@pytest.mark.parametrize(
  ("name", "props", "kind", "entity", "own"),
  [
    ("create_issue", {"title": {"type": "string"}}, "create", "issue", None),
    ("getIssue", {"issue_id": {"type": "string"}}, "get", "issue", "issue_id"),
    ("list_issues", {"limit": {"type": "integer"}}, "list", "issue", None),
    ("get_users", {}, "list", "user", None),  # a plural read is a collection read
    ("search_repositories", {"q": {"type": "string"}}, "search", "repository", None),
    ("get_weather", {"city": {"type": "string"}}, "search", "weather", None),
    ("update_task", {"task_id": {"type": "string"}}, "update", "task", "task_id"),
    ("close_ticket", {"id": {"type": "integer"}}, "action", "ticket", "id"),
    ("delete_file", {"file_id": {"type": "string"}}, "delete", "file", "file_id"),
    ("send_message", {"text": {"type": "string"}}, "send", "message", None),
    ("get_chat_message", {"chat_id": {}, "message_id": {}}, "get", "chat_message", "message_id"),
    ("reply_to_forum", {"text": {}}, "send", "forum", None),  # prepositions are not nouns
    ("planets", {"id": {"type": "integer"}}, "get", "planet", "id"),  # a noun-named read
    ("calculate_tax", {"amount": {"type": "number"}}, "compute", "tax", None),
    ("get_file", {"include_id": {"type": "boolean"}}, "search", "file", None),  # a flag, not an id
  ],
)
def test_roles(name, props, kind, entity, own):
  role = role_of(name, schema(**props))
  assert (role.kind, role.entity) == (kind, entity)
  assert (role.id_arg.key if role.id_arg else None) == own


def test_nested_rest_arguments_and_server_prefix():
  s = {
    "type": "object",
    "properties": {
      "path": {
        "type": "object",
        "properties": {"list_id": {"type": "integer"}, "contact_id": {"type": "integer"}},
        "required": ["list_id", "contact_id"],
      }
    },
    "required": ["path"],
  }
  role = role_of("ACME__UPDATE_CONTACT", s, strip=("acme",))
  assert (role.kind, role.entity, role.id_arg.path) == ("update", "contact", ("path", "contact_id"))
  assert [(a.path, e) for a, e in role.refs] == [(("path", "list_id"), "list")]
  assert role.id_arg.required


def test_annotations_override_the_name():
  assert role_of("create_report", OBJ, {"readOnlyHint": True}).kind == "search"
  assert role_of("frobnicate", schema(job_id={}), {"destructiveHint": True}).kind == "action"


def test_common_prefix_stops_at_the_verb():
  assert common_prefix(["ACME__CREATE_X", "ACME__GET_X"]) == ("acme",)
  assert common_prefix(["get_a", "get_b"]) == ()
  assert common_prefix(["only_one"]) == ()


def test_field_names_and_past_tense():
  assert field_name("firstName") == "firstName"
  assert field_name("$filter") == "filter"
  assert field_name("json") == "json_"  # a pydantic attribute
  assert field_name("2fa") == "f_2_fa"
  assert [past(v) for v in ("close", "approve", "cancel", "stop", "reopen")] == [
    "closed", "approved", "canceled", "stopped", "open",
  ]  # fmt: skip
