"""Every service, hand-written or compiled, answers MCP ``tools/list``."""

import json
from pathlib import Path

import jsonschema
import mcp.types
import pytest

from compoworld.compiler import compile_service
from compoworld.mcp_export import export_corpus, mcp_tools, tools_list
from compoworld.registry import registry
from compoworld.specs import read_specs

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
