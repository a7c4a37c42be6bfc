"""The hand-written library as a whole: its size, its domains, and the ports that link it."""

import json
import subprocess
import sys

from compoworld import DOMAINS, registry
from compoworld.runtime.ports import is_shared
from compoworld.specs.library import library_stats, manifest, port_edges


def test_library_meets_the_size_the_paper_needs():
  stats = library_stats()
  assert stats["services"] >= 30
  assert stats["tools"] >= 300
  assert stats["min_tools_per_service"] >= 8
  assert stats["read_tools"] + stats["write_tools"] == stats["tools"]
  covered = set(stats["services_by_domain"])
  for needed in ("productivity", "communication", "sales_crm", "marketing", "hr", "finance"):
    assert needed in covered
  for needed in ("support", "operations", "data_analytics", "social_media", "location_travel"):
    assert needed in covered
  assert covered <= set(DOMAINS)


def test_manifest_matches_the_registry():
  entries = manifest()
  assert [e["name"] for e in entries] == registry.names()
  for e in entries:
    cls = registry.get(e["name"])
    assert [t["name"] for t in e["tools"]] == list(cls.tools)
    assert all(t["status"] == "deterministic" for t in e["tools"])


def test_ports_link_services_both_ways():
  edges = port_edges()
  assert edges, "no producer → consumer edge between services"
  for (a, b), kinds in edges.items():
    assert a != b and kinds and all(is_shared(k) for k in kinds)
    reads = {k for s in registry.get(a).tools.values() if not s.mutates for k in s.produces}
    writes = {k for s in registry.get(b).tools.values() if s.mutates for k in s.consumes}
    assert set(kinds) <= reads & writes
  stats = library_stats()["port_coverage"]
  # every service can be entered and left by a walk
  assert stats["services_with_outgoing_edge"] == library_stats()["services"]
  assert stats["services_with_incoming_edge"] == library_stats()["services"]


def test_library_stats_script(tmp_path):
  out = subprocess.run(
    [sys.executable, "-m", "experiments.library_stats", f"--workdir={tmp_path}"],
    capture_output=True,
    text=True,
    check=True,
  )
  summary = json.loads(out.stdout.strip().splitlines()[-1])
  assert summary == json.loads((tmp_path / "summary.json").read_text())
  listed = json.loads((tmp_path / "manifest.json").read_text())
  assert summary["tools"] == sum(len(s["tools"]) for s in listed)
  assert summary["services"] == len(listed)
