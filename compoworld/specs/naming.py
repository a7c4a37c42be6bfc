"""What a tool does, read from its name, annotations and schema alone.

``role_of`` splits a tool name into words (``ACTIVE_CAMPAIGN__CREATE_CONTACT``,
``getPullRequest``, ``list-issues``), finds its verb and the entity it acts on, and the
arguments that name a record by id. Both the compiler (to choose an implementation) and the
adversarial validator (to choose test cases) read specs through this one function, and neither
looks at the other's code.
"""

from __future__ import annotations

import dataclasses
import keyword
import re
from collections.abc import Iterator
from typing import Any

_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")

#: verb → kind of operation. Kinds: create, send, get, list, search, update, delete, action
#: (a state change such as close or approve) and compute (a read that derives a result).
VERBS: dict[str, str] = {}
for _kind, _words in {
  "create": "create add new insert register make upload book schedule save store log record put write import generate_new",
  "send": "send post reply comment invite share notify message email tweet forward broadcast",
  "get": "get read fetch retrieve show view describe load download open lookup inspect info detail details see",
  "list": "list all browse enumerate",
  "search": "search find query filter discover explore match",
  "update": "update edit set modify change rename patch move assign replace configure upsert adjust tag label mark toggle reschedule rate",
  "delete": "delete remove destroy purge clear drop erase trash unlink uninstall revoke unsubscribe",
  "action": "close reopen approve reject cancel archive unarchive complete finish resolve start stop pause resume lock unlock merge enable disable activate deactivate accept decline void submit confirm block unblock mute unmute pin unpin star unstar follow unfollow like unlike restore suspend publish unpublish release acknowledge ack escalate snooze subscribe join leave sign refund capture freeze unfreeze retry terminate restart",
  "compute": "calculate compute convert analyze analyse translate summarize validate check estimate predict evaluate count format parse render explain compare recommend suggest extract transform encode decode hash test ping verify preview simulate",
}.items():
  for _w in _words.split():
    VERBS[_w] = _kind

WRITE_KINDS = frozenset({"create", "send", "update", "delete", "action"})

#: Status a state action leaves its record in, where the plain "+ed" rule is wrong.
_PAST = {
  "reopen": "open", "resume": "active", "activate": "active", "deactivate": "inactive",
  "stop": "stopped", "submit": "submitted", "unpin": "unpinned", "pin": "pinned",
  "star": "starred", "unstar": "unstarred", "ack": "acknowledged", "snooze": "snoozed",
  "begin": "started", "void": "voided", "freeze": "frozen", "unfreeze": "active",
  "sign": "signed", "leave": "left", "join": "joined", "finish": "finished",
  "unblock": "active", "unmute": "active", "unlock": "unlocked", "restart": "active",
}  # fmt: skip

_STOP = {
  "a", "an", "the", "all", "single", "one", "new", "my", "your", "current", "specific",
  "given", "details", "detail", "info", "information", "data", "list", "by", "api", "v1", "v2",
}  # fmt: skip
_PREPOSITIONS = {
  "by", "for", "from", "in", "on", "of", "to", "with", "at", "into", "using", "via", "within",
  "about", "under", "and", "or", "as",
}  # fmt: skip
_ID_WORDS = {"id", "ids", "uuid", "gid"}
_PAGING = {
  "limit", "offset", "page", "per_page", "page_size", "pagesize", "perpage", "max_results",
  "maxresults", "num_results", "numresults", "count", "top", "size", "cursor", "after",
  "before", "page_token", "pagetoken", "next_token", "start", "skip", "first", "last",
}  # fmt: skip
_QUERY = {"query", "q", "keyword", "keywords", "search", "term", "search_term", "text_query"}


def tokens(name: str) -> list[str]:
  """Lower-case words of an identifier in any case convention."""
  return [w.lower() for w in _WORD.findall(name)]


def norm(name: str) -> str:
  """An identifier as lower snake case words, to compare names across conventions
  (``startDateTime`` and ``start_date_time``)."""
  return "_".join(tokens(name))


def slug(text: str) -> str:
  """A service or field name: lower snake case, an identifier without ``__``."""
  out = "_".join(tokens(text)) or "x"
  if out[0].isdigit():
    out = f"s_{out}"
  return out


def singular(word: str) -> str:
  if len(word) <= 3 or word.endswith(("ss", "us", "is", "data", "news", "status")):
    return word
  if word.endswith("ies"):
    return word[:-3] + "y"
  if word.endswith(("sses", "xes", "ches", "shes", "zes")):
    return word[:-2]
  return word[:-1] if word.endswith("s") else word


def field_name(key: str) -> str:
  """A record field name for a JSON property: the key itself when it is a safe identifier."""
  if key.isidentifier() and not keyword.iskeyword(key) and not key.startswith(("_", "model_")):
    return key if key not in _RESERVED_FIELDS else f"{key}_"
  name = "_".join(tokens(key)) or "field"
  if name[0].isdigit() or keyword.iskeyword(name) or name in _RESERVED_FIELDS:
    name = f"f_{name}"
  return name


#: Names a pydantic record cannot use as fields (its own attributes).
_RESERVED_FIELDS = {
  "copy", "dict", "json", "schema", "construct", "validate", "fields", "parse_obj", "parse_raw",
  "parse_file", "from_orm", "update_forward_refs", "schema_json", "with_changes",
}  # fmt: skip


def past(verb: str) -> str:
  if verb in _PAST:
    return _PAST[verb]
  if verb.endswith("e"):
    return f"{verb}d"
  if verb.endswith("y") and verb[-2] not in "aeiou":
    return f"{verb[:-1]}ied"
  return f"{verb}ed"


def is_paging(arg: str) -> bool:
  return "_".join(tokens(arg)) in _PAGING


def is_query(arg: str) -> bool:
  return "_".join(tokens(arg)) in _QUERY


def id_entity(arg: str) -> str | None:
  """For an argument naming a record by id, the entity ("" = the tool's own); else None."""
  words = tokens(arg)
  if not words or words[-1] not in _ID_WORDS or words[-1] == "ids":
    return None
  return "_".join(singular(w) for w in words[:-1])


#: Words around a field's name that say what an argument does to the field, not which field:
#: ``updated_summary`` sets ``summary``, ``attendees_to_add`` adds to ``attendees``,
#: ``max_start_datetime`` bounds ``start_datetime`` from above.
_SET_WORDS = (("updated",), ("new",), ("update",))
_ADD_WORDS, _REMOVE_WORDS = (("to", "add"), ("add",)), (("to", "remove"), ("remove",))
_LOW_WORDS = (("min",), ("after",), ("since",), ("from",), ("start",), ("gte",), ("gt",))
_HIGH_WORDS = (("max",), ("before",), ("until",), ("to",), ("end",), ("lte",), ("lt",))


@dataclasses.dataclass(frozen=True)
class Target:
  """What an argument does to a record field: ``op`` is set (or, for reads, equals), add or
  remove (items of a list field), min or max (a range bound on a read)."""

  field: str
  op: str


def targets(key: str, reads: bool) -> list[Target]:
  """The readings of an argument name: the plain one (the key itself, ``set``) first, then
  those with the words around a field's name taken off. A reader takes the first whose field
  the record has."""
  words = tokens(key)
  found: list[Target] = [Target(field_name(key), "set")]

  def strip(affixes, op, prefix_only=False):
    for affix in affixes:
      n = len(affix)
      if len(words) > n and tuple(words[:n]) == affix:
        found.append(Target("_".join(words[n:]), op))
      if not prefix_only and len(words) > n and tuple(words[-n:]) == affix:
        found.append(Target("_".join(words[:-n]), op))

  if reads:
    strip(_LOW_WORDS, "min")
    strip(_HIGH_WORDS, "max")
  else:
    strip(_ADD_WORDS, "add")
    strip(_REMOVE_WORDS, "remove")
    strip(_SET_WORDS, "set", prefix_only=True)
  return found


@dataclasses.dataclass(frozen=True)
class Arg:
  """One leaf argument, possibly inside nested objects (``path``)."""

  path: tuple[str, ...]
  schema: dict[str, Any]
  required: bool

  @property
  def key(self) -> str:
    return self.path[-1]


def leaf_args(schema: dict[str, Any], max_depth: int = 4) -> Iterator[Arg]:
  """The schema's properties, descending into plain nested objects (REST ``body``/``path``)."""

  def walk(node: dict[str, Any], prefix: tuple[str, ...], required: bool) -> Iterator[Arg]:
    req = set(node.get("required", []))
    for key, sub in node.get("properties", {}).items():
      path = (*prefix, key)
      nested = sub.get("type") == "object" and sub.get("properties")
      if nested and len(path) < max_depth:
        yield from walk(sub, path, required and key in req)
      else:
        yield Arg(path, sub, required and key in req)

  yield from walk(schema, (), True)


def schema_at(schema: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
  """The JSON Schema of the argument at ``path`` (``{}`` where the schema does not say)."""
  return next((a.schema for a in leaf_args(schema) if a.path == path), {})


def _same_entity(named: str, entity: str) -> bool:
  """``message_id`` names the record of ``get_chat_message``; ``chat_id`` only its parent."""
  return named == entity or entity.endswith(f"_{named}")


def _scalar_id(arg: Arg) -> bool:
  """An id is a string or a number; a boolean ``include_id`` flag is not one."""
  kind = arg.schema.get("type")
  return kind in (None, "string", "integer", "number") and "enum" not in arg.schema


@dataclasses.dataclass(frozen=True)
class Role:
  """A tool's operation, read from its spec."""

  kind: str  # create | send | get | list | search | update | delete | action | compute
  verb: str
  entity: str  # the record kind it acts on, e.g. "pull_request"
  id_arg: Arg | None  # the argument naming the tool's own record, if any
  refs: tuple[tuple[Arg, str], ...]  # (argument, entity) for ids of other records

  @property
  def mutates(self) -> bool:
    return self.kind in WRITE_KINDS


def role_of(
  name: str,
  schema: dict[str, Any],
  annotations: dict[str, Any] | None = None,
  strip: tuple[str, ...] = (),
) -> Role:
  """The tool's role. ``strip`` are name words shared by the whole server (its prefix)."""
  words = tokens(name)
  while strip and words[: len(strip)] == list(strip) and len(words) > len(strip):
    words = words[len(strip) :]
  verb_at = next((i for i, w in enumerate(words) if w in VERBS), None)
  verb = words[verb_at] if verb_at is not None else ""
  kind = VERBS.get(verb, "")
  if verb_at is not None:
    rest = words[verb_at + 1 :] or words[:verb_at]
  else:
    rest = words
  nouns = []
  for w in rest:
    if w in _PREPOSITIONS:
      if nouns:
        break
      continue
    if w not in _STOP and w != verb and not w.isdigit():
      nouns.append(w)
  if verb == "all" or (kind == "get" and rest and rest[0] == "all"):
    kind = "list"
  if kind == "get" and nouns and rest and rest[-1].endswith("s") and singular(rest[-1]) != rest[-1]:
    kind = "list"  # get_users, getIssues: a collection read
  args = list(leaf_args(schema))
  ids = [(a, id_entity(a.key)) for a in args if id_entity(a.key) is not None and _scalar_id(a)]
  entity = "_".join(singular(w) for w in nouns[-3:]) if nouns else ""
  own = next((a for a, e in ids if e == "" or (entity and _same_entity(e, entity))), None)
  if own is None and ids and (not entity or (verb_at is None and len(nouns) == 1)):
    # no noun, or a lone unknown word that is likely the verb ("frobnicate(job_id)")
    own, entity = ids[-1][0], ids[-1][1]  # get_by_id(user_id): the tool's record is a user
  if not entity:
    entity = "record"
  if not kind:  # no verb we know: a noun-named read ("planets", "specie"), unless hinted
    hints = annotations or {}
    if hints.get("destructiveHint") is True and own is not None:
      kind = "action"
    elif verb_at is None and own is not None:
      kind = "get"
    else:
      kind = "compute"
  if kind == "get" and own is None:
    kind = "search" if any(a for a in args if not is_paging(a.key)) else "list"
  if kind in ("update", "delete", "action") and own is None:
    kind = "compute" if kind == "action" else kind
  if (annotations or {}).get("readOnlyHint") is True and kind in WRITE_KINDS:
    kind = "get" if own is not None else "search"
  refs = tuple((a, e) for a, e in ids if a is not own and e)
  return Role(kind, verb, entity, own, refs)


def parent_ref(name: str, refs: tuple[tuple[Arg, str], ...]) -> tuple[Arg, str] | None:
  """Of a tool's id arguments, the one naming the record it acts on through another
  (``add_attendees_to_event(calendar_id, event_id)``: the event): the entity named last in the
  tool's name, else the first."""
  words = tokens(name)

  def last_seen(ref: tuple[Arg, str]) -> int:
    return max((i for i, w in enumerate(words) if w in ref[1].split("_")), default=-1)

  return max(refs, key=last_seen, default=None) if refs else None


def common_prefix(names: list[str]) -> tuple[str, ...]:
  """Name words every tool of a server starts with (``ACTIVE_CAMPAIGN__``), kept short of the
  whole name."""
  if len(names) < 2:
    return ()
  split = [tokens(n) for n in names]
  prefix = []
  for group in zip(*split, strict=False):
    if len(set(group)) != 1 or group[0] in VERBS:
      break
    prefix.append(group[0])
  return tuple(prefix)
