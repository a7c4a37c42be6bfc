"""Ingestion: MCP tool specifications in, normalized ``ServiceSpec``s out.

Reads MCP ``tools/list`` answers (``inputSchema`` or ``input_schema``) and corpus lines (one tool a
line with its ``server``, ``source`` and ``category``). Each schema is made self-contained
(``$ref`` resolved, ``allOf`` merged, ``anyOf``/``oneOf`` kept), repaired where the intent is clear
(a missing ``type: object``, ``required`` naming no property, type names like ``"int"``) and
rejected with a stated reason otherwise. Servers whose tool sets are identical collapse into one
service; source categories map onto ``compoworld.runtime.domains.DOMAINS``; tools whose effect lives
outside any local state (web search, browser, OS) are marked for simulation.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import jsonschema
from pydantic import BaseModel, ConfigDict, Field

from compoworld.jsonl import read_lines
from compoworld.runtime.domains import DOMAINS
from compoworld.specs.naming import slug, tokens


class McpTool(BaseModel):
  """One tool as a server declares it, with a self-contained, valid input schema."""

  model_config = ConfigDict(extra="forbid", frozen=True)

  name: str
  description: str = ""
  input_schema: dict[str, Any]
  annotations: dict[str, Any] = Field(default_factory=dict)
  output_schema: dict[str, Any] | None = None
  http: dict[str, Any] | None = None  # REST method and path, where the source gives them
  external: str = ""  # why the effect lives outside any local state ("" when it does not)
  repairs: tuple[str, ...] = ()  # what ingestion changed in the schema, and why


class ServiceSpec(BaseModel):
  """One server: its tools, domain, and the duplicates collapsed into it."""

  model_config = ConfigDict(extra="forbid", frozen=True)

  name: str  # a service name: an identifier without "__"
  source: str
  server: str
  title: str = ""
  category: str | None = None
  domain: str
  description: str = ""
  tools: tuple[McpTool, ...]
  aliases: tuple[str, ...] = ()  # "source:server" of identical servers collapsed into this one
  rejected: tuple[dict[str, str], ...] = ()  # {"tool", "reason"} for tools that were dropped

  def fingerprint(self) -> str:
    """Hash of the tool set (names and schemas): equal for duplicate servers."""
    body = sorted(json.dumps([t.name, t.input_schema], sort_keys=True) for t in self.tools)
    return hashlib.sha256("\n".join(body).encode()).hexdigest()[:16]


class SchemaError(ValueError):
  """An input schema that cannot be repaired; the message is the reason."""


# --- schema normalization --------------------------------------------------------------------

_TYPE_NAMES = {
  "str": "string", "text": "string", "int": "integer", "float": "number", "double": "number",
  "bool": "boolean", "dict": "object", "map": "object", "list": "array", "none": "null",
}  # fmt: skip
_JSON_TYPES = {"string", "integer", "number", "boolean", "object", "array", "null"}
_DROP_KEYS = {"$schema", "$id", "$comment", "definitions", "$defs", "examples", "title"}
_MAX_DEPTH = 12
_META = jsonschema.Draft7Validator(jsonschema.Draft7Validator.META_SCHEMA)


def _pointer(root: dict[str, Any], ref: str) -> Any:
  if not ref.startswith("#"):
    raise KeyError(ref)
  node: Any = root
  for part in ref[1:].split("/")[1:]:
    part = part.replace("~1", "/").replace("~0", "~")
    node = node[int(part)] if isinstance(node, list) else node[part]
  return node


class _Normalizer:
  def __init__(self, root: dict[str, Any]):
    self.root, self.repairs = root, []

  def repair(self, what: str) -> None:
    if what not in self.repairs:
      self.repairs.append(what)

  def node(self, node: Any, depth: int = 0, stack: tuple[str, ...] = ()) -> Any:
    if isinstance(node, bool):
      return {} if node else {"not": {}}
    if not isinstance(node, dict):
      raise SchemaError(f"a subschema is a {type(node).__name__}, not an object")
    if depth > _MAX_DEPTH:
      self.repair("schema nested deeper than 12 levels: truncated to any value")
      return {}
    ref = node.get("$ref")
    if isinstance(ref, str):
      if ref in stack:
        self.repair(f"recursive $ref {ref} replaced by any value")
        return {k: v for k, v in node.items() if k in ("description",)}
      try:
        target = _pointer(self.root, ref)
      except (KeyError, IndexError, ValueError, TypeError):
        self.repair(f"unresolvable $ref {ref} replaced by any value")
        target = {}
      merged = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
      return self.node(merged, depth + 1, (*stack, ref))
    out: dict[str, Any] = {}
    for key, value in node.items():
      if key in _DROP_KEYS:
        continue
      if key == "allOf" and isinstance(value, list):
        self.repair("allOf merged into one schema")
        for part in value:
          part = self.node(part, depth + 1, stack)
          out.setdefault("properties", {}).update(part.pop("properties", {}))
          out["required"] = [*out.get("required", []), *part.pop("required", [])]
          for k, v in part.items():
            out.setdefault(k, v)
        continue
      if key in ("anyOf", "oneOf"):
        options = [self.node(v, depth + 1, stack) for v in value if v != {"not": {}}]
        options = [o for o in options if o != {"not": {}}]
        if options:
          out[key] = options
        continue
      if key == "not":
        if value != {}:
          self.repair("'not' constraint dropped")
        continue
      if key in ("properties", "patternProperties", "$defs") and isinstance(value, dict):
        out[key] = {k: self.node(v, depth + 1, stack) for k, v in value.items()}
      elif key in ("items", "additionalProperties") and isinstance(value, (dict, bool)):
        if key == "additionalProperties" and isinstance(value, bool):
          out[key] = value
        else:
          out[key] = self.node(value, depth + 1, stack)
      elif key == "items" and isinstance(value, list):
        self.repair("tuple-form items merged into anyOf")
        out[key] = {"anyOf": [self.node(v, depth + 1, stack) for v in value]} if value else {}
      else:
        out[key] = copy.deepcopy(value)
    return self.fix_keywords(out)

  def fix_keywords(self, out: dict[str, Any]) -> dict[str, Any]:
    kind = out.get("type")
    if isinstance(kind, str) and kind not in _JSON_TYPES:
      fixed = _TYPE_NAMES.get(kind.lower())
      self.repair(f"type '{kind}' read as '{fixed}'" if fixed else f"unknown type '{kind}' dropped")
      out.pop("type")
      if fixed:
        out["type"] = fixed
    elif isinstance(kind, list):
      kinds = [_TYPE_NAMES.get(k.lower(), k) if isinstance(k, str) else k for k in kind]
      kinds = [k for k in kinds if k in _JSON_TYPES]
      if kinds != kind:
        self.repair(f"type list {kind} cleaned to {kinds}")
      out["type"] = kinds if len(kinds) > 1 else (kinds[0] if kinds else None)
      if out["type"] is None:
        out.pop("type")
    if "properties" in out and not isinstance(out["properties"], dict):
      raise SchemaError("'properties' is not an object")
    if "properties" in out and "type" not in out:
      out["type"] = "object"
    if "required" in out:
      required = out["required"]
      if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        self.repair("'required' is not a list of names: dropped")
        out.pop("required")
      else:
        names = set(out.get("properties", {}))
        keep = list(dict.fromkeys(r for r in required if r in names or not out.get("properties")))
        if keep != required:
          self.repair(f"'required' names no such property: {sorted(set(required) - names)}")
        out["required"] = keep
        if not keep:
          out.pop("required")
    if "enum" in out and (not isinstance(out["enum"], list) or not out["enum"]):
      self.repair("empty or malformed enum dropped")
      out.pop("enum")
    for bound, limit in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
      if isinstance(out.get(bound), bool):  # draft-04 spelling
        self.repair(f"draft-04 boolean {bound} rewritten for draft-07")
        if out.pop(bound) and limit in out:
          out[bound] = out.pop(limit)
    if "pattern" in out:
      try:
        re.compile(out["pattern"])
      except (re.error, TypeError):
        self.repair(f"pattern {out['pattern']!r} is not a valid regular expression: dropped")
        out.pop("pattern")
    return out


def normalize_schema(schema: Any) -> tuple[dict[str, Any], list[str]]:
  """A self-contained draft-07 object schema and the repairs made, or ``SchemaError``."""
  if schema is None:
    return {"type": "object", "properties": {}}, ["no input schema: the tool takes no arguments"]
  if not isinstance(schema, dict):
    raise SchemaError(f"the input schema is a {type(schema).__name__}, not a JSON object")
  norm = _Normalizer(schema)
  props = schema.get("properties")
  if (
    isinstance(props, dict)
    and isinstance(props.get("properties"), dict)
    and isinstance(props.get("type"), str)
  ):
    norm.repair("a whole schema was nested under 'properties': unwrapped")
    schema = norm.root = props
  out = norm.node(schema)
  if out.get("type") is None and not out.get("anyOf") and not out.get("oneOf"):
    norm.repair("missing top-level type: read as object")
    out["type"] = "object"
  if out.get("type") != "object":
    raise SchemaError(f"the arguments must be an object, the schema says {out.get('type')!r}")
  out.setdefault("properties", {})
  error = jsonschema.exceptions.best_match(_META.iter_errors(out))
  if error is not None:
    raise SchemaError(f"not a valid draft-07 schema: {error.message[:200]}")
  return out, norm.repairs


# --- external effects and domains ------------------------------------------------------------

#: A tool whose name or description says it acts on the world outside any service state.
_EXTERNAL = (
  ("browser", re.compile(r"\b(browser|navigate|screenshot|web ?page|click|hover|scroll|playwright|puppeteer|selenium|dom element|css selector)\b")),
  ("operating system", re.compile(r"\b(shell|terminal|bash|command line|execute (a |the )?command|run (a |the )?command|subprocess|process id|kill process|applescript|registry key)\b")),
  ("web search", re.compile(r"\b(search the (web|internet)|web search|google search|bing search|internet search|scrape|scraping|crawl|fetch (the )?(url|web|page|content from)|http request|download (a |the )?(url|web))\b")),
)  # fmt: skip
_EXTERNAL_CATEGORIES = {
  "browser automation": "browser",
  "browser": "browser",
  "operating system": "operating system",
  "web search & research": "web search",
  "search & scraping": "web search",
}


def external_reason(name: str, description: str, category: str | None) -> str:
  """Why a tool's effect lives outside local state ("" when nothing says so).

  Both the category and the tool's own words must agree: a weather tool in a "Web Search"
  server is still a lookup over local state, a browser tool in it is not.
  """
  text = f"{' '.join(tokens(name))} {description}".lower()
  category_reason = _EXTERNAL_CATEGORIES.get((category or "").lower())
  for reason, pattern in _EXTERNAL:
    if pattern.search(text) and (category_reason or reason != "web search"):
      return reason
  return ""


_DOMAIN_WORDS: dict[str, tuple[str, ...]] = {
  "productivity": ("productivity", "calendar", "note", "document", "file", "drive", "todo", "task", "meeting", "time", "spreadsheet", "memory", "docs", "notion", "office"),
  "communication": ("communication", "email", "mail", "chat", "message", "slack", "discord", "sms", "telegram", "whatsapp", "phone", "voice"),
  "sales_crm": ("crm", "sales", "lead", "deal", "contact", "salesforce", "hubspot", "pipeline", "e-commerce", "ecommerce", "shop", "store", "product"),
  "marketing": ("marketing", "campaign", "advertising", "newsletter", "seo", "audience", "content creation", "brand"),
  "hr": ("hr", "human resources", "recruit", "employee", "payroll", "hiring", "candidate", "job"),
  "finance": ("finance", "financial", "payment", "invoice", "accounting", "bank", "crypto", "blockchain", "stock", "trading", "wallet", "billing", "tax", "currency", "defi", "token"),
  "support": ("support", "ticket", "helpdesk", "customer service", "zendesk", "incident", "knowledge base"),
  "operations": ("inventory", "shipping", "logistics", "project management", "automation", "monitoring", "workflow", "order", "supply"),
  "data_analytics": ("database", "data", "analytics", "sql", "query", "visualization", "dashboard", "bigquery", "postgres", "mongo", "redis", "vector"),
  "software_devops": ("development", "developer", "dev tools", "code", "git", "deploy", "cloud", "devops", "api", "security", "kubernetes", "docker", "ci", "operating system", "ai/ml", "website builder", "browser"),
  "social_media": ("social", "forum", "reddit", "twitter", "community", "youtube", "instagram", "linkedin", "gaming", "entertainment", "music", "video"),
  "location_travel": ("travel", "map", "weather", "location", "flight", "hotel", "geo", "transport", "route"),
  "knowledge_search": ("search", "research", "news", "wiki", "education", "academic", "paper", "knowledge", "science", "health", "library", "dictionary", "book"),
}  # fmt: skip


_DOMAIN_PATTERNS = {
  d: re.compile(r"\b(?:" + "|".join(re.escape(w) for w in words) + ")")
  for d, words in _DOMAIN_WORDS.items()
}


def map_domain(category: str | None, server: str, descriptions: Iterable[str] = ()) -> str:
  """The project domain for a source category; the server's words decide when it is vague."""
  cat = (category or "").lower().strip()
  if cat in DOMAINS:
    return cat
  text = " ".join([server.replace("-", " ").replace("_", " "), *descriptions]).lower()
  scores = {}
  for domain, pattern in _DOMAIN_PATTERNS.items():
    # the source's own label outweighs anything the tools mention
    scores[domain] = 10 * len(pattern.findall(cat)) + min(len(pattern.findall(text)), 5)
  best = max(scores.values())
  return next(d for d in DOMAINS if scores[d] == best) if best > 0 else "productivity"


# --- reading ---------------------------------------------------------------------------------


def _tool_entries(obj: Any, where: str) -> Iterator[dict[str, Any]]:
  """Tool dicts in a ``tools/list`` answer: ``{"tools": [...]}``, ``{"result": {...}}`` or a list."""
  if isinstance(obj, dict) and "result" in obj and "tools" not in obj:
    obj = obj["result"]
  if isinstance(obj, dict) and isinstance(obj.get("tools"), list):
    obj = obj["tools"]
  if not isinstance(obj, list):
    raise ValueError(f"{where}: expected a tools/list answer ({{'tools': [...]}}) or a list")
  for i, entry in enumerate(obj):
    if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
      raise ValueError(f"{where}: tool #{i} is not an object with a 'name'")
    yield entry


def _records(path: Path) -> Iterator[dict[str, Any]]:
  """Corpus-shaped records from a .jsonl corpus, or a .json tools/list answer (one server)."""
  if path.suffix == ".jsonl":
    for lineno, line in read_lines(path):
      try:
        record = json.loads(line)
      except json.JSONDecodeError as err:
        raise ValueError(f"{path}:{lineno}: not JSON ({err.msg})") from None
      if not isinstance(record, dict) or "name" not in record:
        raise ValueError(f"{path}:{lineno}: a spec line needs at least 'name' and 'server'")
      yield record
    return
  obj = json.loads(path.read_text(encoding="utf-8"))
  servers = obj if isinstance(obj, dict) and "tools" not in obj and "result" not in obj else None
  for server, answer in (servers or {path.stem: obj}).items():
    for entry in _tool_entries(answer, f"{path}[{server}]"):
      yield {"source": "mcp", "server": server, "category": None, **entry}


def _tool(record: dict[str, Any], category: str | None) -> McpTool:
  schema = record.get("inputSchema", record.get("input_schema"))
  input_schema, repairs = normalize_schema(schema)
  meta = record.get("meta") or {}
  annotations = record.get("annotations") or meta.get("annotations") or {}
  annotations = {k: v for k, v in annotations.items() if k.endswith("Hint") and v is not None}
  output = record.get("outputSchema") or meta.get("outputSchema")
  if output is not None:
    try:
      output, _ = (
        normalize_schema(output) if output.get("type", "object") == "object" else (output, [])
      )
    except (SchemaError, AttributeError):
      output = None
  description = record.get("description") or ""
  return McpTool(
    name=record["name"],
    description=description if isinstance(description, str) else str(description),
    input_schema=input_schema,
    annotations=annotations,
    output_schema=output,
    http=meta.get("http") if isinstance(meta.get("http"), dict) else None,
    external=external_reason(record["name"], str(description), category),
    repairs=tuple(repairs),
  )


def read_specs(path: str | Path, reserved: Iterable[str] = ()) -> tuple[list[ServiceSpec], dict]:
  """Every service in a spec file, deduplicated, and ingestion statistics.

  ``reserved`` are service names already taken (the hand-written library): a compiled service
  whose server has such a name gets a ``_mcp`` suffix instead.
  """
  path = Path(path)
  if not path.exists():
    raise FileNotFoundError(f"no spec file at {path}")
  grouped: dict[tuple[str, str], list[dict[str, Any]]] = {}
  for record in _records(path):
    server = record.get("server")
    if not isinstance(server, str) or not server:
      raise ValueError(f"{path}: tool {record.get('name')!r} has no 'server'")
    grouped.setdefault((str(record.get("source") or "mcp"), server), []).append(record)
  taken, specs, by_print = set(reserved), [], {}
  stats = {"tool_lines": 0, "servers": len(grouped), "duplicate_servers": 0, "rejected_tools": 0}
  for (source, server), records in grouped.items():
    stats["tool_lines"] += len(records)
    category = records[0].get("category")
    tools, rejected, seen = [], [], set()
    for record in records:
      if record["name"] in seen:
        rejected.append({"tool": record["name"], "reason": "duplicate tool name in the server"})
        continue
      seen.add(record["name"])
      try:
        tools.append(_tool(record, category))
      except SchemaError as err:
        rejected.append({"tool": record["name"], "reason": str(err)})
    stats["rejected_tools"] += len(rejected)
    if not tools:
      continue
    meta = records[0].get("meta") or {}
    title = meta.get("server_name") or server.split("/")[-1]
    spec = ServiceSpec(
      name="pending",
      source=source,
      server=server,
      title=str(title),
      category=category,
      domain=map_domain(category, server, [t.description for t in tools[:10]]),
      description=_service_description(title, tools),
      tools=tuple(tools),
      rejected=tuple(rejected),
    )
    first = by_print.get(spec.fingerprint())
    if first is not None:  # identical tool set: one service, the other server an alias
      stats["duplicate_servers"] += 1
      specs[first] = specs[first].model_copy(
        update={"aliases": (*specs[first].aliases, f"{source}:{server}")}
      )
      continue
    name = _unique(slug(server.split("/")[-1]), source, taken)
    taken.add(name)
    by_print[spec.fingerprint()] = len(specs)
    specs.append(spec.model_copy(update={"name": name}))
  stats["services"] = len(specs)
  stats["tools"] = sum(len(s.tools) for s in specs)
  return specs, stats


def _unique(name: str, source: str, taken: set[str]) -> str:
  for candidate in (name, f"{name}_{slug(source)}", f"{name}_mcp"):
    if candidate not in taken:
      return candidate
  i = 2
  while f"{name}_{i}" in taken:
    i += 1
  return f"{name}_{i}"


def _service_description(title: str, tools: list[McpTool]) -> str:
  first = next((t.description for t in tools if t.description), "")
  first = first.strip().split("\n")[0][:160]
  return f"{title}: {first}" if first else f"{title} ({len(tools)} tools)"
