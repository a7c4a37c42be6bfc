"""The service library as data: a manifest of every service and tool, and its statistics."""

from __future__ import annotations

import collections
import itertools
from typing import Any

from compoworld.runtime.ports import is_shared
from compoworld.runtime.registry import Registry, registry


def manifest(reg: Registry = registry) -> list[dict[str, Any]]:
  """Every service with its tools: mutates flag, ports, status (deterministic for hand-written)."""
  out = []
  for name in reg.names():
    cls = reg.get(name)
    out.append(
      {
        "name": name,
        "domain": cls.domain,
        "description": cls.description,
        "module": cls.__module__,
        "tools": [
          {
            "name": spec.name,
            "mutates": spec.mutates,
            "produces": list(spec.produces),
            "consumes": list(spec.consumes),
            "status": "deterministic",
          }
          for spec in cls.tools.values()
        ],
      }
    )
  return out


def port_edges(reg: Registry = registry) -> dict[tuple[str, str], list[str]]:
  """Producer → consumer service pairs and the shared port kinds that link them.

  A pair (A, B) is linked by kind k when a read tool of A produces k and a write tool of B
  consumes k: a walk may step from A to B carrying that value.
  """
  produces, consumes = collections.defaultdict(set), collections.defaultdict(set)
  for name in reg.names():
    for spec in reg.get(name).tools.values():
      if spec.mutates:
        consumes[name].update(t for t in spec.consumes if is_shared(t))
      else:
        produces[name].update(t for t in spec.produces if is_shared(t))
  edges = {}
  for a, b in itertools.permutations(reg.names(), 2):
    kinds = sorted(produces[a] & consumes[b])
    if kinds:
      edges[(a, b)] = kinds
  return edges


def library_stats(reg: Registry = registry) -> dict[str, Any]:
  entries = manifest(reg)
  tools = [t for s in entries for t in s["tools"]]
  by_domain = collections.Counter()
  services_by_domain = collections.Counter()
  for s in entries:
    by_domain[s["domain"]] += len(s["tools"])
    services_by_domain[s["domain"]] += 1
  tagged = [t for t in tools if (t["consumes"] if t["mutates"] else t["produces"])]
  kinds = collections.Counter(
    k for t in tools for k in t["produces"] + t["consumes"] if is_shared(k)
  )
  edges = port_edges(reg)
  n = len(entries)
  return {
    "services": n,
    "tools": len(tools),
    "tools_by_domain": dict(sorted(by_domain.items())),
    "services_by_domain": dict(sorted(services_by_domain.items())),
    "read_tools": sum(not t["mutates"] for t in tools),
    "write_tools": sum(t["mutates"] for t in tools),
    "min_tools_per_service": min((len(s["tools"]) for s in entries), default=0),
    "port_coverage": {
      "tools_with_ports": len(tagged),
      "fraction_of_tools": round(len(tagged) / len(tools), 3) if tools else 0.0,
      "shared_port_kinds_used": dict(sorted(kinds.items())),
      "linked_service_pairs": len(edges),
      "fraction_of_ordered_pairs_linked": round(len(edges) / (n * (n - 1)), 3) if n > 1 else 0.0,
      "services_with_outgoing_edge": len({a for a, _ in edges}),
      "services_with_incoming_edge": len({b for _, b in edges}),
    },
  }
