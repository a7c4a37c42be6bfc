"""The library build: manifest, summary, cache, quarantine, and loading into a registry."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from compoworld.runtime.registry import Registry, registry
from compoworld.specs import compiler
from compoworld.specs.build import build_library, load_compiled_library, read_manifest
from compoworld.specs.compiled import CompiledService
from compoworld.specs.validator import validate

DATA = Path(__file__).parent / "data"
ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT.parent / "shared" / "mcp_specs" / "tools.jsonl"


@pytest.fixture(scope="module")
def built(tmp_path_factory):
  workdir = tmp_path_factory.mktemp("lib")
  return workdir, build_library(DATA / "specs.jsonl", workdir, progress=False)


def test_summary_counts(built):
  _, summary = built
  # 4 services (a duplicate collapsed), 15 tools (1 rejected); navigate and take_screenshot
  # act outside local state and no formula in the spec computes convert_markdown, so 12 of 15
  # executable tools are deterministic
  assert {k: summary[k] for k in ("services", "tools", "executable_tools", "quarantined")} == {
    "services": 4,
    "tools": 15,
    "executable_tools": 15,
    "quarantined": 0,
  }
  assert summary["deterministic_share"] == round(12 / 15, 4)
  assert summary["simulated_share"] == round(3 / 15, 4)
  assert (summary["rejected_tools"], summary["duplicate_servers_collapsed"]) == (1, 1)
  assert summary["cached"] is False and summary["seconds"] > 0


def test_manifest_lists_every_tool_with_status_reason_domain_and_schema(built):
  workdir, _ = built
  manifest = read_manifest(workdir)
  services = {s["name"]: s for s in manifest["services"]}
  browser = {t["name"]: t for t in services["headless_browser"]["tools"]}
  assert browser["navigate"]["status"] == "simulated"
  assert browser["navigate"]["reason"] == "external effect: browser"
  assert browser["get_weather"] == {
    **browser["get_weather"],
    "status": "deterministic",
    "reason": "",
    "kind": "lookup",
  }
  # which property checks each deterministic tool was put to
  assert "checks" not in browser["navigate"]
  notes = {t["name"]: t for t in services["notes_server"]["tools"]}
  assert {"valid_call", "no_raise", "create_get", "create_writes"} <= set(
    notes["create_note"]["checks"]
  )
  assert {"update_get", "update_fields"} <= set(notes["update_note"]["checks"])
  assert {"list_after_create", "read_only"} <= set(notes["list_notes"]["checks"])
  assert services["acme_crm"]["domain"] == "sales_crm"
  schemas = {t["name"]: t["input_schema"] for t in services["acme_crm"]["spec"]["tools"]}
  assert schemas["ACME_CRM__GET_CONTACT"]["required"] == ["path"]
  assert services["acme_crm"]["spec"]["rejected"][0]["tool"] == "ACME_CRM__BROKEN"


def test_same_specs_reuse_the_manifest_and_changed_specs_rebuild(built, tmp_path):
  workdir = tmp_path / "lib"
  shutil.copytree(built[0], workdir)
  again = build_library(DATA / "specs.jsonl", workdir, progress=False)
  assert again["cached"] is True and again["services"] == built[1]["services"]
  changed = tmp_path / "specs.jsonl"
  lines = (DATA / "specs.jsonl").read_text().splitlines()
  changed.write_text("\n".join(lines[:8]) + "\n")  # just the notes server
  rebuilt = build_library(changed, workdir, progress=False)
  assert rebuilt["cached"] is False and rebuilt["services"] == 1


def test_loading_registers_compiled_services(built, tmp_path):
  workdir, _ = built
  reg = Registry(providers=())
  names = load_compiled_library(workdir, reg=reg)
  assert sorted(names) == ["acme_crm", "headless_browser", "notes_server", "refs"]
  cls = reg.get("notes_server")
  assert issubclass(cls, CompiledService) and reg.by_domain("sales_crm") == ["acme_crm"]
  assert load_compiled_library(workdir, reg=reg) == names  # loading again changes nothing
  assert "notes_server" not in registry  # the default registry is never touched implicitly
  with pytest.raises(KeyError, match="not in the manifest"):
    load_compiled_library(workdir, reg=Registry(providers=()), names=["nope"])
  with pytest.raises(FileNotFoundError, match="no library manifest"):
    load_compiled_library(tmp_path, reg=Registry(providers=()))


def test_the_default_registry_holds_both_once_loaded(built):
  # in a child process: the default registry of this one must stay hand-written
  code = (
    "import sys; from compoworld import registry, ComposedEnv; "
    "from compoworld.specs.build import load_compiled_library; "
    "load_compiled_library(sys.argv[1]); "
    "env = ComposedEnv.from_services(['notes_server', 'calendar'], seed=1); "
    "print(len(registry.names()), env.call('notes_server__list_folders', {})['ok'])"
  )
  out = subprocess.run(
    [sys.executable, "-c", code, str(built[0])],
    cwd=ROOT,
    capture_output=True,
    text=True,
    check=True,
  )
  assert out.stdout.split() == [str(len(registry.names()) + 4), "True"]


def test_quarantine_from_the_manifest_is_kept_on_load(built, tmp_path):
  workdir, _ = built
  manifest = json.loads((workdir / "manifest.json").read_text())
  notes = next(s for s in manifest["services"] if s["name"] == "notes_server")
  tool = next(t for t in notes["tools"] if t["name"] == "create_note")
  tool.update(status="quarantined", reason="create_get: expected ...")
  (tmp_path / "manifest.json").write_text(json.dumps(manifest))
  reg = Registry(providers=())
  load_compiled_library(tmp_path, reg=reg, names=["notes_server"])
  cls = reg.get("notes_server")
  assert cls.statuses["create_note"]["status"] == "quarantined"
  out = cls.create(seed=0).call("create_note", {"title": "T", "folder_id": "f"})
  assert out["ok"] and out["data"]["simulated"] is True  # served by the (fallback) world model


def test_experiment_prints_the_summary_last(tmp_path):
  out = subprocess.run(
    [sys.executable, "-m", "experiments.build_library", f"--specs={DATA / 'specs.jsonl'}",
     f"--workdir={tmp_path}", "--workers=1"],
    cwd=ROOT, capture_output=True, text=True, check=True, timeout=120,
  )  # fmt: skip
  summary = json.loads(out.stdout.strip().splitlines()[-1])
  for key in ("services", "tools", "executable_tools", "deterministic_share", "simulated_share",
              "quarantined", "seconds"):  # fmt: skip
    assert key in summary
  assert json.loads((tmp_path / "summary.json").read_text()) == summary
  assert "services:" in out.stderr  # the progress bar


@pytest.mark.slow
def test_without_specs_the_hand_written_library_compiles_from_its_own_export(tmp_path):
  summary = build_library(None, tmp_path, progress=False)
  hand_written = registry.names()
  assert summary["services"] == len(hand_written)
  assert summary["tools"] == sum(len(registry.get(n).tools) for n in hand_written)
  # none quarantined; what the compiler cannot derive from a spec (a report's figures, an
  # action whose id argument it cannot tie to its record) is labelled simulated, with the reason
  assert summary["quarantined"] == 0 and 0.75 < summary["deterministic_share"] < 1
  reasons = {
    t["reason"].split(":")[0]
    for s in read_manifest(tmp_path)["services"]
    for t in s["tools"]
    if t["status"] != "deterministic"
  }
  assert reasons <= {compiler._UNDERIVABLE, compiler._UNDESCRIBED, compiler._UNNAMED}, reasons
  names = load_compiled_library(tmp_path, reg=Registry())
  assert sorted(names) == sorted(f"{n}_compoworld" for n in hand_written)


@pytest.mark.shared
@pytest.mark.slow
@pytest.mark.skipif(not CORPUS.exists(), reason="../shared/mcp_specs is absent")
def test_a_corpus_slice_builds_and_every_deterministic_tool_passes(tmp_path):
  lines = CORPUS.read_text(encoding="utf-8").splitlines()[:1200]
  (tmp_path / "slice.jsonl").write_text("\n".join(lines) + "\n")
  summary = build_library(tmp_path / "slice.jsonl", tmp_path, progress=False)
  assert summary["services"] >= 100 and summary["quarantined"] <= 0.02 * summary["tools"]
  reg = Registry(providers=())
  manifest = read_manifest(tmp_path)
  picked = [s["name"] for s in manifest["services"][:25]]
  load_compiled_library(tmp_path, reg=reg, names=picked)
  for entry in manifest["services"][:25]:
    cls = reg.get(entry["name"])
    deterministic = [t["name"] for t in entry["tools"] if t["status"] == "deterministic"]
    assert validate(cls, cls.service_spec.tools, only=deterministic) == {}
