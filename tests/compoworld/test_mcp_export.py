"""Every service, hand-written or compiled, answers MCP ``tools/list``."""

import json
from pathlib import Path

import jsonschema
import mcp.types
import pytest

from compoworld.runtime.registry import registry
from compoworld.serve import mcp_server
from compoworld.serve.mcp_export import export_corpus, mcp_tools, tool_annotations, tools_list
from compoworld.specs.compiler import compile_service
from compoworld.specs.ingest import read_specs
from compoworld.tasks.generate import generate_tasks
from envs.scenarios import community_meetup

DATA = Path(__file__).parent / "data"


@pytest.mark.parametrize("name", registry.names())
def test_every_hand_written_service_exports_a_valid_tools_list(name):
  cls = registry.get(name)
  answer = tools_list(cls)
  parsed = mcp.types.ListToolsResult.model_validate(answer)  # the MCP SDK's own model
  assert [t.name for t in parsed.tools] == list(cls.tools)
  for tool, spec in zip(answer["tools"], cls.tools.values(), strict=True):
    jsonschema.Draft7Validator.check_schema(tool["inputSchema"])
    assert tool["inputSchema"]["type"] == "object"
    assert tool["annotations"]["readOnlyHint"] is (not spec.mutates)


def test_compiled_services_export_the_schemas_they_were_compiled_from():
  specs, _ = read_specs(DATA / "specs.jsonl")
  spec = next(s for s in specs if s.name == "acme_crm")
  cls = compile_service(spec)
  answer = tools_list(cls)
  assert [t["inputSchema"] for t in answer["tools"]] == [t.input_schema for t in spec.tools]
  assert mcp_tools(cls) == list(spec.tools)
  assert answer["tools"][1]["annotations"]["readOnlyHint"] is True  # the get


def test_export_corpus_round_trips_through_ingestion(tmp_path):
  services = [registry.get("crm"), registry.get("helpdesk")]
  n = export_corpus(services, tmp_path / "out.jsonl")
  assert n == len(services[0].tools) + len(services[1].tools)
  line = json.loads((tmp_path / "out.jsonl").read_text().splitlines()[0])
  assert (line["source"], line["server"], line["category"]) == ("compoworld", "crm", "sales_crm")
  specs, stats = read_specs(tmp_path / "out.jsonl", reserved=["crm", "helpdesk"])
  assert [s.name for s in specs] == ["crm_compoworld", "helpdesk_compoworld"]
  assert [s.domain for s in specs] == ["sales_crm", "support"]  # categories are our domains
  assert stats["rejected_tools"] == 0 and stats["tools"] == n
  crm_tools = {t.name: t for t in specs[0].tools}
  for name, spec in registry.get("crm").tools.items():
    assert crm_tools[name].input_schema == {"properties": {}, **spec.input_schema}
    assert crm_tools[name].annotations["readOnlyHint"] is (not spec.mutates)


# --- annotations -------------------------------------------------------------------------------


def test_annotations_follow_mcp_semantics():
  """Reads are read-only; writes that only add are not destructive; changing or removing is."""
  want = {
    "list_events": (True, False),
    "create_event": (False, False),
    "add_attendees": (False, False),
    "update_event": (False, True),
    "cancel_event": (False, True),
    "remove_attendee": (False, True),
  }
  calendar = registry.get("calendar")
  for name, (read_only, destructive) in want.items():
    got = tool_annotations(calendar, calendar.tools[name])
    assert got == {
      "readOnlyHint": read_only,
      "destructiveHint": destructive,
      "openWorldHint": False,
    }, name
  forum = registry.get("forum")
  assert tool_annotations(forum, forum.tools["vote"])["destructiveHint"] is True  # no known verb


def test_a_compiled_service_keeps_its_declared_destructive_hint():
  specs, _ = read_specs(DATA / "specs.jsonl")
  spec = next(s for s in specs if s.name == "acme_crm")
  create = next(t for t in spec.tools if t.name == "ACME_CRM__CREATE_CONTACT")
  assert tools_list(compile_service(spec))["tools"][0]["annotations"]["destructiveHint"] is False
  marked = create.model_copy(update={"annotations": {"destructiveHint": True}})
  spec = spec.model_copy(update={"tools": (marked, *spec.tools[1:])})
  assert tools_list(compile_service(spec))["tools"][0]["annotations"]["destructiveHint"] is True


@pytest.mark.parametrize("task", ["meetup", "generated"])
def test_the_mcp_server_lists_the_annotations_the_export_gives(task):
  """One rule for both: every tool of the task's services, distractors included."""
  task = (
    community_meetup(0) if task == "meetup" else generate_tasks(1, seed=3, progress=False)[0][0]
  )
  served = {t.name: t.annotations for t in mcp_server.mcp_tools(task.make_env())}
  services = task.services + task.distractors
  assert len(services) >= 3
  n = 0
  for service in services:
    for tool in tools_list(registry.get(service))["tools"]:
      got = served[f"{service}__{tool['name']}"].model_dump(by_alias=True, exclude_none=True)
      assert got == tool["annotations"], tool["name"]
      n += 1
  assert n == len(served)
  kinds = {(a.read_only_hint, a.destructive_hint) for a in served.values()}
  assert kinds == {(True, False), (False, False), (False, True)}
