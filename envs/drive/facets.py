"""Drive facets: files as sources of owners, share links, collaborators and amounts; sharing and
new documents as sinks; a budget sheet whose line is updated as the revisit."""

from __future__ import annotations

import re
from datetime import timedelta

from compoworld.tasks.authoring import AuthorContext, AuthoringError
from compoworld.tasks.facets import Found, Value, facets
from compoworld.tasks.rubric import all_of, exists, record_is, where
from envs._facets_common import (
  amount_is,
  amount_of,
  colleague,
  found_one,
  found_people,
  iso,
  mentions,
  topic,
  user_email,
)
from envs._world import world
from envs.drive.state import DOC, PDF, SHEET, _link_url

S = "drive"
BUDGET_LINES = ("Venue", "Catering", "Travel", "Swag", "Speakers", "Printing", "AV rental")


def _folder(ctx: AuthorContext, name: str) -> str:
  """The id of the live folder called ``name`` (the scenario's files go into real folders)."""
  return next(f.id for f in ctx.state(S).folders if f.name == name and not f.trashed)


def _put_file(
  ctx: AuthorContext, name: str, content: str, folder: str, owner: str, mime: str, **extra
) -> dict:
  updated = ctx.state(S).now - timedelta(hours=ctx.rng.randint(2, 30))
  return ctx.put(
    S,
    "files",
    {
      "id": ctx.fresh_id("file"),
      "name": name,
      "mime_type": mime,
      "content": content,
      "size_bytes": len(content.encode()),
      "owner": owner,
      "parent_id": _folder(ctx, folder),
      "created_at": iso(updated - timedelta(days=ctx.rng.randint(1, 20))),
      "updated_at": iso(updated),
      **extra,
    },
  )


def _put_link(ctx: AuthorContext, file: dict) -> None:
  ctx.put(
    S,
    "links",
    {
      "id": ctx.fresh_id("link"),
      "item_id": file["id"],
      "url": _link_url(file["id"], False),
      "created_by": file["owner"],
      "created_at": file["updated_at"],
    },
  )


def _grant(ctx: AuthorContext, file: dict, email: str, role: str) -> None:
  ctx.put(
    S,
    "permissions",
    {
      "id": ctx.fresh_id("perm"),
      "item_id": file["id"],
      "grantee": email,
      "role": role,
      "granted_by": file["owner"],
      "granted_at": file["updated_at"],
    },
  )


def _find(ctx: AuthorContext, name: str, **filters) -> dict:
  """The agent's way to a file: search by name, then open its details."""
  hits = ctx.call(S, "search_files", name=name, **filters)["items"]
  hit = next(f for f in hits if f["name"] == name)
  return ctx.call(S, "get_file", file_id=hit["id"])


def _num(x: float) -> str:
  """An amount as a sheet cell holds it: no thousands separator, no needless decimals."""
  return f"{x:.2f}".rstrip("0").rstrip(".")


# --- sources ---------------------------------------------------------------------------------


@facets.source(S, "url")
def brief_share_link(ctx: AuthorContext) -> Found:
  """A project brief that already has a share link; the link is handed on."""
  about = topic(ctx)
  file = _put_file(
    ctx,
    f"{about} brief",
    f"{about}: goals, owners and timeline for the next quarter.",
    "Projects",
    user_email(ctx),
    DOC,
  )
  _put_link(ctx, file)
  found = _find(ctx, file["name"])
  return found_one(
    "url", f'the share link of the "{found["name"]}" document in Drive', found["link"]
  )


@facets.source(S, "person.email")
def file_owner(ctx: AuthorContext) -> Found:
  """A colleague's planning doc in a shared folder; its owner is handed on."""
  who, about = colleague(ctx), topic(ctx)
  name = f"{about} plan"
  _put_file(
    ctx,
    name,
    f"Draft plan for {about}: scope, milestones and open questions.",
    "Projects",
    who.email,
    DOC,
  )
  found = _find(ctx, name)
  return found_one("person.email", f'the owner of the "{name}" document in Drive', found["owner"])


@facets.source(S, "person.email")
def file_editors(ctx: AuthorContext) -> Found:
  """A file shared with editors and viewers: the editors are handed on, the viewers are not."""
  w, about = world(ctx.env.seed), topic(ctx)
  people = ctx.rng.sample(w.people[2:], 5)
  roles = ["editor"] * 3 + ["viewer"] * 2
  ctx.rng.shuffle(roles)
  file = _put_file(
    ctx,
    f"{about} working draft",
    f"Working draft for {about}.",
    "Projects",
    user_email(ctx),
    DOC,
  )
  for p, role in zip(people, roles, strict=True):
    _grant(ctx, file, p.email, role)
  found = _find(ctx, file["name"])
  shared = found["shared_with"]
  return found_people(
    f'the people who can edit the "{found["name"]}" document in Drive',
    [s["email"] for s in shared if s["role"] == "editor"],
    [s["email"] for s in shared if s["role"] == "viewer"],
    "who only has view access to that document",
  )


def _put_budget(ctx: AuthorContext, name: str, lines: int = 4) -> dict:
  items = ctx.rng.sample(BUDGET_LINES, lines)
  amounts = [ctx.rng.randint(8, 90) * 50 + ctx.choice((0.0, 0.0, 0.5, 0.25)) for _ in items]
  rows = ["item,amount", *[f"{i},{_num(a)}" for i, a in zip(items, amounts, strict=True)]]
  # The trailing newline ends every line, so a rubric can name one whole line.
  return _put_file(ctx, name, "\n".join(rows) + "\n", "Projects", user_email(ctx), SHEET)


def _sheet_rows(content: str) -> list[tuple[str, float]]:
  rows = [line.split(",") for line in content.splitlines()[1:] if line.strip()]
  return [(r[0], float(r[1])) for r in rows]


@facets.source(S, "money")
def budget_amounts(ctx: AuthorContext) -> Found:
  """Every amount of a small cost sheet: several numbers, so a later step can add them up."""
  name = f"{topic(ctx)} costs"
  _put_budget(ctx, name, lines=ctx.rng.randint(3, 4))
  found = _find(ctx, name)
  content = ctx.call(S, "read_file_content", file_id=found["id"])["content"]
  return Found(
    "money",
    f'the amounts listed in the "{name}" sheet in Drive',
    [Value(a, f"{a:,.2f}", a) for _, a in _sheet_rows(content)],
  )


# --- lookups ---------------------------------------------------------------------------------


def _invoice_for(ctx: AuthorContext, company: str) -> dict:
  """The newest invoice PDF for ``company`` (newer than any generated one), found by search."""
  w = world(ctx.env.seed)
  org = next((c for c in w.customers if c.name == company), None)
  contact = org.contacts[0] if org else None
  attn = f"{contact.name} <{contact.email}>" if contact else "Accounts Payable"
  product = ctx.choice(w.products)
  qty = ctx.choice((5, 10, 20, 25, 50))
  total = qty * product.unit_price
  ref = f"INV-{ctx.rng.randint(10000, 99999)}"
  content = (
    f"Invoice {ref}\nBill to: {company}, attn. {attn}\n{qty} x {product.name} ({product.sku}) "
    f"@ {w.currency} {product.unit_price:,.2f}\nTotal due: {w.currency} {total:,.2f}\n"
    f"Due date: {(ctx.state(S).now + timedelta(days=30)).date().isoformat()}"
  )
  folder = next(f for f in ctx.state(S).folders if f.name == "Invoices")
  newest = iso(ctx.state(S).now - timedelta(minutes=30))  # generated invoices are days older
  _put_file(
    ctx, f"Invoice {ref} - {company}", content, "Invoices", folder.owner, PDF, updated_at=newest
  )
  hits = ctx.call(S, "search_files", query=f"Invoice {company}", mime_type=PDF)["items"]
  hit = next(h for h in hits if h["name"].startswith("Invoice ") and company in h["name"])
  return ctx.call(S, "read_file_content", file_id=hit["id"])


_INVOICE_NOUN = "the most recent invoice PDF for that company in Drive"


@facets.lookup(S, "company.name", "money")
def invoice_total_due(ctx: AuthorContext, found: Found) -> Found:
  doc = _invoice_for(ctx, str(found.values[0].value))
  text = re.search(r"Total due: (\w+) ([\d,]+\.\d\d)", doc["content"])
  amount = float(text.group(2).replace(",", ""))
  return Found(
    "money",
    f"the total due on {_INVOICE_NOUN}",
    [Value(amount, f"{text.group(1)} {text.group(2)}", amount)],
  )


@facets.lookup(S, "company.name", "reference")
def invoice_number(ctx: AuthorContext, found: Found) -> Found:
  doc = _invoice_for(ctx, str(found.values[0].value))
  ref = doc["content"].splitlines()[0].removeprefix("Invoice ")
  return found_one("reference", f"the invoice number of {_INVOICE_NOUN}", ref)


@facets.lookup(S, "person.email", "url")
def their_copy_link(ctx: AuthorContext, found: Found) -> Found:
  """Several people keep a file of the same name; the incoming person's copy is the one."""
  email = str(found.values[0].value).lower()
  w = world(ctx.env.seed)
  others = [p.email for p in w.people[2:] if p.email != email]
  name = f"{topic(ctx)} notes"
  for owner in [email, *ctx.rng.sample(others, 2)]:
    file = _put_file(ctx, name, f"Notes kept by {owner}.", "Projects", owner, "text/plain")
    _put_link(ctx, file)
  hit = ctx.call(S, "search_files", name=name, owner=email)["items"][0]
  link = ctx.call(S, "get_file", file_id=hit["id"])["link"]
  return found_one(
    "url",
    f'the share link of the "{name}" file in Drive that they own',
    link,
    answer=f'The share link of their "{name}" file is {link}.',
  )


# --- sinks -----------------------------------------------------------------------------------


def _my_doc(ctx: AuthorContext) -> dict:
  """A fresh document of the user's with nobody else on it, found the way an agent would."""
  name = f"{topic(ctx)} proposal"
  _put_file(
    ctx,
    name,
    f"Proposal outline for {name}.",
    "Projects",
    user_email(ctx),
    DOC,
  )
  return _find(ctx, name)


def _share(ctx: AuthorContext, file: dict, v: Value) -> None:
  email = str(v.value).lower()
  if email == file["owner"]:
    raise AuthoringError("share_with_owner", email)
  ctx.call(S, "share_item", item_id=file["id"], email=email, role="editor")


facets.sink(
  S,
  "person.email",
  "share_as_editor",
  prepare=_my_doc,
  act=_share,
  check=lambda ctx, f, v: exists(
    S,
    "permissions",
    where("item_id", f["id"]),
    where("grantee", str(v.value).lower()),
    where("role", "editor"),
  ),
  phrase=lambda ctx, f, obj: f'give {obj} edit access to the "{f["name"]}" document in Drive',
  text=lambda ctx, f, v: f'{v.label} can edit "{f["name"]}".',
)


def _saved(t: dict, *conds: dict) -> dict:
  """A rubric condition: a Drive document named as ``t`` says meets ``conds``."""
  return exists(S, "files", where("name", t["name"]), *conds)


for kind in ("text", "url"):
  facets.sink(
    S,
    kind,
    f"save_{kind}_in_new_doc",
    prepare=lambda ctx: {"name": f"{topic(ctx)} memo"},
    act=lambda ctx, t, v: ctx.call(S, "create_file", name=t["name"], content=str(v.value)),
    check=lambda ctx, t, v: _saved(t, mentions("content", v), where("trashed", False)),
    phrase=lambda ctx, t, obj: f'save {obj} in a new Drive document called "{t["name"]}"',
    text=lambda ctx, t, v: f'The Drive document "{t["name"]}" holds {v.label}.',
  )


# One sink writes the amount it is handed; its twin writes the total of several amounts.
facets.sink(
  S,
  "money",
  "write_amount_in_new_doc",
  total="write_total_in_new_doc",
  prepare=lambda ctx: {"name": f"{topic(ctx)} figures"},
  act=lambda ctx, t, v: ctx.call(
    S, "create_file", name=t["name"], content=f"Amount: {_num(amount_of(v))}"
  ),
  check=lambda ctx, t, v: _saved(t, amount_is("content", amount_of(v), 0.01)),
  phrase=lambda ctx, t, obj: f'write {obj} in a new Drive document called "{t["name"]}"',
  text=lambda ctx, t, v: f'The Drive document "{t["name"]}" states {v.label}.',
)


# --- revisit: read a budget line, update it, read it again ------------------------------------


def _budget_first(ctx: AuthorContext) -> tuple[Found, dict]:
  name = f"{topic(ctx)} budget"
  _put_budget(ctx, name)
  found = _find(ctx, name)
  content = ctx.call(S, "read_file_content", file_id=found["id"])["content"]
  line, amount = ctx.choice(_sheet_rows(content))
  target = {"id": found["id"], "name": name, "line": line, "old": amount}
  return Found(
    "money",
    f'the {line} amount in the "{name}" sheet in Drive',
    [Value(amount, f"{amount:,.2f}", amount)],
  ), target


def _set_line(ctx: AuthorContext, t: dict, v: Value) -> None:
  if amount_of(v) == t["old"]:
    raise AuthoringError("same_amount", str(v.value))
  content = ctx.call(S, "read_file_content", file_id=t["id"])["content"]
  new = content.replace(
    f"\n{t['line']},{_num(t['old'])}\n", f"\n{t['line']},{_num(amount_of(v))}\n"
  )
  ctx.call(S, "update_file_content", file_id=t["id"], content=new)


def _line_check(ctx: AuthorContext, t: dict, v: Value) -> dict:
  amount = amount_of(v)
  cells = {_num(amount), f"{amount:.2f}"}
  return all_of(
    {
      "op": "any",
      "checks": [
        record_is(S, "files", t["id"], "content", f"\n{t['line']},{c}", "contains")
        for c in sorted(cells)
      ],
    },
    record_is(S, "files", t["id"], "content", f"\n{t['line']},{_num(t['old'])}\n", "not_contains"),
  )


def _budget_second(ctx: AuthorContext, t: dict) -> Found:
  content = ctx.call(S, "read_file_content", file_id=t["id"])["content"]
  amount = dict(_sheet_rows(content))[t["line"]]
  return Found(
    "money",
    f'the updated {t["line"]} amount in "{t["name"]}"',
    [Value(amount, f"{amount:,.2f}", amount)],
    stale=t["old"],
  )


facets.revisit(
  S,
  kind="money",
  kind_in="money",
  kind_after="money",
  name="update_budget_line",
  first=_budget_first,
  second=_budget_second,
  change="set_budget_line",
  act=_set_line,
  check=_line_check,
  phrase=lambda ctx, t, obj: f'set the {t["line"]} line of the "{t["name"]}" sheet to {obj}',
  text=lambda ctx, t, v: f'The {t["line"]} line of "{t["name"]}" reads {v.label}.',
  single=True,  # a sheet line holds one amount
)
