"""Speed of the service runtime: call latency, fork and hash of a joint state.

Baselines are measured in the same run (a deep copy and a full JSON dump of the same states,
the way environments without copy-on-write fork and hash), so ratios survive a noisy machine.
"""

from __future__ import annotations

import copy
import hashlib
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tqdm import tqdm

from compoworld.compose.env import ComposedEnv
from compoworld.runtime.registry import registry
from compoworld.specs.ingest import McpTool, ServiceSpec

DEFAULT_SERVICES = ("calendar", "simosphere", "chat", "forum", "geo")


def _timings_us(fn: Callable[[int], Any], n: int, desc: str) -> list[float]:
  out = []
  for i in tqdm(range(n), desc=desc, leave=False, mininterval=0.5):
    t0 = time.perf_counter_ns()
    fn(i)
    out.append((time.perf_counter_ns() - t0) / 1e3)
  return out


def _p(values: list[float], q: float) -> float:
  return sorted(values)[min(len(values) - 1, int(q * len(values)))]


def _cold_hash(env: ComposedEnv) -> str:
  twin = env.fork()
  for svc in twin.services.values():
    for table in svc.state.tables().values():
      table._digest = None  # drop the cached digests: measure hashing from scratch
  return twin.state_hash()


def _records(svc) -> int:
  return sum(len(t) for t in svc.state.tables().values())


def sized_env(services: tuple[str, ...], records: int, seed: int = 0) -> ComposedEnv:
  """A joint state whose services each hold about ``records`` records in all.

  A service's ``size`` scales its main collection; dependent collections (a place's 14
  forecasts, a post's comments) come on top, so the size is calibrated per service.
  """
  sizes = {}
  for name in services:
    probe = registry.get(name).create(seed=seed, size=records)
    sizes[name] = max(1, round(records * records / _records(probe)))
  return ComposedEnv(
    {n: registry.get(n).create(seed=seed, size=sizes[n]) for n in services}, seed=seed
  )


def bench_env(
  services: tuple[str, ...] = DEFAULT_SERVICES,
  records: int = 1000,
  calls: int = 5000,
  repeats: int = 50,
  seed: int = 0,
) -> dict[str, Any]:
  """Measures the runtime on ``services`` holding about ``records`` records each."""
  env = sized_env(services, records, seed)
  cal = env.services["calendar"]
  ids = cal.state.events.ids()
  reads = _timings_us(
    lambda i: env.call_tool("calendar", "get_event", {"event_id": ids[i % len(ids)]}),
    calls,
    "read calls",
  )
  writes = _timings_us(
    lambda i: env.call_tool(
      "calendar", "update_event", {"event_id": ids[i % len(ids)], "title": f"Sync {i}"}
    ),
    calls,
    "write calls",
  )
  assert env.call_tool("calendar", "get_event", {"event_id": ids[0]})["ok"]
  fork_ms = [t / 1e3 for t in _timings_us(lambda i: env.fork(), repeats * 10, "fork")]
  hash_ms = [t / 1e3 for t in _timings_us(lambda i: _cold_hash(env), repeats, "hash")]

  def write_then_hash(i: int) -> None:
    env.call_tool("calendar", "update_event", {"event_id": ids[i], "title": f"Hash {i}"})
    env.state_hash()

  incr_ms = [t / 1e3 for t in _timings_us(write_then_hash, repeats, "write + hash")]
  states = [s.state for s in env.services.values()]
  deepcopy_ms = [t / 1e3 for t in _timings_us(lambda i: copy.deepcopy(states), 5, "deepcopy")]
  dump_ms = [
    t / 1e3
    for t in _timings_us(
      lambda i: hashlib.sha256(b"".join(s.model_dump_json().encode() for s in states)),
      5,
      "json dump hash",
    )
  ]
  n_records = sum(_records(s) for s in env.services.values())
  fork_med, hash_med = statistics.median(fork_ms), statistics.median(hash_ms)
  return {
    "services": list(services),
    "records_per_service": records,
    "records_total": n_records,
    "read_us_median": round(statistics.median(reads), 2),
    "read_us_p99": round(_p(reads, 0.99), 2),
    "write_us_median": round(statistics.median(writes), 2),
    "write_us_p99": round(_p(writes, 0.99), 2),
    "read_calls_per_s": round(1e6 / statistics.mean(reads)),
    "write_calls_per_s": round(1e6 / statistics.mean(writes)),
    "fork_ms": round(fork_med, 4),
    "hash_ms": round(hash_med, 3),
    "write_and_rehash_ms": round(statistics.median(incr_ms), 3),
    "baseline_deepcopy_ms": round(statistics.median(deepcopy_ms), 2),
    "baseline_json_hash_ms": round(statistics.median(dump_ms), 2),
    "fork_speedup_vs_deepcopy": round(statistics.median(deepcopy_ms) / fork_med),
    "hash_speedup_vs_json_dump": round(statistics.median(dump_ms) / hash_med, 1),
    "targets_met": {
      "read_us_median<=50": statistics.median(reads) <= 50,
      "write_us_median<=100": statistics.median(writes) <= 100,
      "fork_ms<=1": fork_med <= 1,
      "hash_ms<=10": hash_med <= 10,
    },
  }


def _object(props: dict[str, Any], required: list[str]) -> dict[str, Any]:
  return {"type": "object", "properties": props, "required": required}


#: The spec of ``compoworld.synthesis.synthesizer.example_module``'s service, as if it had been synthesized.
NOTES_SPEC = ServiceSpec(
  name="notes",
  source="bench",
  server="notes",
  domain="productivity",
  description="Personal notes.",
  tools=(
    McpTool(
      name="create_note",
      description="Create a note.",
      input_schema=_object({"title": {"type": "string"}, "body": {"type": "string"}}, ["title"]),
    ),
    McpTool(
      name="get_note",
      description="Read one note.",
      input_schema=_object({"note_id": {"type": "string"}}, ["note_id"]),
      annotations={"readOnlyHint": True},
    ),
  ),
)


def bench_sandboxed(calls: int = 2000, forks: int = 500) -> dict[str, Any]:
  """What a synthesized service costs at use time, its module in the sandbox and its state
  here (``compoworld.synthesis.sandboxed``): the child's start, a read and a write through the channel,
  a fork, and a fork's first write. Where the sandbox cannot run, says why instead."""
  from compoworld.synthesis.sandbox import unavailable_reason
  from compoworld.synthesis.sandboxed import ModuleHost, proxy_class
  from compoworld.synthesis.synthesizer import example_module

  reason = unavailable_reason()
  if reason is not None:
    return {"sandboxed_unavailable": reason}
  with tempfile.TemporaryDirectory() as tmp:
    path = Path(tmp) / "notes.py"
    path.write_text(example_module(), encoding="utf-8")
    host = ModuleHost("notes", path)
    t0 = time.perf_counter()
    host.describe()
    start_ms = (time.perf_counter() - t0) * 1e3
    svc = proxy_class(host, NOTES_SPEC).create(seed=0)
    note = svc.call("create_note", {"title": "First"})["data"]["id"]
    reads = _timings_us(lambda i: svc.call("get_note", {"note_id": note}), calls, "sandboxed reads")
    writes = _timings_us(
      lambda i: svc.call("create_note", {"title": f"Note {i}"}), calls, "sandboxed writes"
    )
    fork_us = _timings_us(lambda i: svc.fork(), forks, "sandboxed forks")
    fork_write = _timings_us(
      lambda i: svc.fork().call("create_note", {"title": f"Fork {i}"}), forks, "fork + write"
    )
    host.close()
  read_ms, write_ms = statistics.median(reads) / 1e3, statistics.median(writes) / 1e3
  return {
    "sandboxed_start_ms": round(start_ms, 1),
    "sandboxed_read_ms_median": round(read_ms, 3),
    "sandboxed_read_ms_p99": round(_p(reads, 0.99) / 1e3, 3),
    "sandboxed_write_ms_median": round(write_ms, 3),
    "sandboxed_write_ms_p99": round(_p(writes, 0.99) / 1e3, 3),
    "sandboxed_fork_ms_median": round(statistics.median(fork_us) / 1e3, 4),
    "sandboxed_fork_then_write_ms_median": round(statistics.median(fork_write) / 1e3, 3),
    "sandboxed_records": len(svc.state.table("notes")),
    "sandboxed_targets_met": {"call_ms_median<=2": max(read_ms, write_ms) <= 2},
  }
