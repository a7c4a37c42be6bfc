"""E-sign facets: envelopes as sources of signers, order lines and decline reasons; adding
signers, sending NDAs, voiding and approval envelopes as sinks; replacing a draft's signer as
the revisit."""

from __future__ import annotations

import re
from datetime import timedelta

from compoworld.tasks.authoring import AuthorContext, AuthoringError
from compoworld.tasks.facets import Found, Value, facets
from compoworld.tasks.rubric import all_of, exists, record_is, where
from envs._facets_common import (
  amount_is,
  amount_of,
  found_one,
  found_people,
  iso,
  mentions,
  moved_to,
  name_of,
  topic,
  user_email,
)
from envs._world import world

S = "esign"
LINE = re.compile(r"^(\d+) x (.+) \((\S+)\) at (\w+) ([\d,]+\.\d\d) = \w+ ([\d,]+\.\d\d)$")


def _head(ctx: AuthorContext, department: str):
  """The head of a department (who signs for it), else the CEO."""
  w = world(ctx.env.seed)
  return next((p for p in w.people[2:] if p.title == f"Head of {department}"), w.people[1])


def _signer(email: str, name: str, role: str, order: int, status: str, **extra) -> dict:
  return {
    "id": email,
    "name": name,
    "role": role,
    "routing_order": order,
    "status": status,
    **extra,
  }


def _put_envelope(
  ctx: AuthorContext, title: str, document: str, signers: list[dict], status: str = "sent"
) -> dict:
  now = ctx.state(S).now
  created = now - timedelta(days=ctx.rng.randint(2, 4), hours=ctx.rng.randint(0, 8))
  record = {
    "id": ctx.fresh_id("env"),
    "title": title,
    "document": document,
    "sender": user_email(ctx),
    "message": "Please review and sign.",
    "status": status,
    "signers": signers,
    "created_at": iso(created),
  }
  if status != "draft":
    record["sent_at"] = iso(created + timedelta(hours=2))
  return ctx.put(S, "envelopes", record)


def _find(ctx: AuthorContext, title: str, **filters) -> dict:
  """The agent's way to an envelope: search by title, then open it."""
  hits = ctx.call(S, "list_envelopes", query=title, **filters)["items"]
  hit = next(e for e in hits if e["title"] == title)
  return ctx.call(S, "get_envelope", envelope_id=hit["id"])


def _signed_at(ctx: AuthorContext) -> str:
  return iso(ctx.state(S).now - timedelta(hours=ctx.rng.randint(3, 30)))


def _signer_at_turn(ctx: AuthorContext, email: str, name: str, role: str, signed: bool) -> dict:
  """A first-in-order signer who has signed (a few hours ago) or is being waited on."""
  status = "signed" if signed else "sent"
  return _signer(email, name, role, 1, status, signed_at=_signed_at(ctx) if signed else None)


def _order_form(
  ctx: AuthorContext, title: str, company: str, lines: int = 1, status: str = "sent"
) -> dict:
  """An order form for ``company``: the customer signs first, then the sales approver."""
  w = world(ctx.env.seed)
  org = next((c for c in w.customers if c.name == company), None)
  if org is not None:
    contact = ctx.choice(org.contacts)
    email, name = contact.email, contact.name
  else:
    slug = re.sub(r"[^a-z0-9]", "", company.lower()) or "customer"
    email, name = f"procurement@{slug}.com", f"{company} Procurement"
  rows = []
  for product in ctx.rng.sample(w.products, lines):
    qty = ctx.choice((5, 10, 20, 25, 40, 50))
    rows.append(
      f"{qty} x {product.name} ({product.sku}) at {w.currency} {product.unit_price:,.2f} = "
      f"{w.currency} {qty * product.unit_price:,.2f}"
    )
  document = (
    f"Order Form\n\nBetween {w.company} and {name} <{email}> for {company}.\n\n"
    "Products and fees as listed below; payment due 30 days from invoice.\n\nSchedule:\n"
    + "\n".join(rows)
  )
  approver = _head(ctx, "Sales")
  signers = [
    _signer(email, name, "Customer", 1, "sent" if status == "sent" else "pending"),
    _signer(approver.email, approver.name, "Sales approver", 2, "pending"),
  ]
  return _put_envelope(ctx, title, document, signers, status)


def _lines(document: str) -> list[re.Match]:
  return [m for m in map(LINE.match, document.splitlines()) if m]


def _figure(text: str) -> float:
  return float(text.replace(",", ""))


# --- sources ---------------------------------------------------------------------------------


@facets.source(S, "person.email")
def waiting_on(ctx: AuthorContext) -> Found:
  """A sent agreement; whoever it waits on (customer or internal approver) is handed on."""
  w = world(ctx.env.seed)
  org = ctx.choice(w.customers)
  contact, approver = ctx.choice(org.contacts), _head(ctx, "Operations")
  title = f"{topic(ctx)} - Statement of Work - {org.name}"
  first_signed = ctx.rng.random() < 0.5
  signers = [
    _signer_at_turn(ctx, contact.email, contact.name, "Customer", first_signed),
    _signer(
      approver.email, approver.name, "Delivery lead", 2, "sent" if first_signed else "pending"
    ),
  ]
  _put_envelope(ctx, title, f"Statement of Work for {org.name}.", signers)
  env = _find(ctx, title, status="sent")
  email = env["waiting_for"][0]
  return found_one(
    "person.email", f'the person the "{title}" e-signature envelope is waiting on', email
  )


@facets.source(S, "person.email")
def unsigned_signers(ctx: AuthorContext) -> Found:
  """A policy everybody signs in parallel: those yet to sign are handed on, not the others."""
  w = world(ctx.env.seed)
  people = ctx.rng.sample(w.people[2:], 5)
  done = [True, True, False, False, False]
  ctx.rng.shuffle(done)
  about = topic(ctx)
  title = f"{about} policy acknowledgement"
  signers = [
    _signer_at_turn(ctx, p.email, p.name, "Employee", d) for p, d in zip(people, done, strict=True)
  ]
  _put_envelope(ctx, title, f"I have read and accept the {about} policy.", signers)
  env = _find(ctx, title, status="sent")
  return found_people(
    f'the people who still have to sign the "{title}" envelope',
    [s["id"] for s in env["signers"] if s["status"] == "sent"],
    [s["id"] for s in env["signers"] if s["status"] == "signed"],
    "who already signed it",
  )


def _order_lines(ctx: AuthorContext, lines: int) -> tuple[str, list[re.Match]]:
  org = ctx.choice(world(ctx.env.seed).customers)
  title = f"{topic(ctx)} - Order Form - {org.name}"
  _order_form(ctx, title, org.name, lines)
  env = _find(ctx, title)
  return title, _lines(env["document"])


@facets.source(S, "quantity")
def order_quantities(ctx: AuthorContext) -> Found:
  """The units on each line of an order form: several numbers, so a later step can sum them."""
  title, lines = _order_lines(ctx, ctx.rng.randint(2, 3))
  return Found(
    "quantity",
    f'the quantities ordered on the "{title}" envelope',
    [Value(int(m.group(1)), m.group(1), float(m.group(1))) for m in lines],
  )


@facets.source(S, "sku")
def order_sku(ctx: AuthorContext) -> Found:
  title, lines = _order_lines(ctx, 1)
  sku = lines[0].group(3)
  return found_one("sku", f'the SKU of the product ordered on the "{title}" envelope', sku)


@facets.source(S, "money")
def order_total(ctx: AuthorContext) -> Found:
  title, lines = _order_lines(ctx, 1)
  m = lines[0]
  total = _figure(m.group(6))
  return Found(
    "money",
    f'the order total on the "{title}" envelope',
    [Value(total, f"{m.group(4)} {m.group(6)}", total)],
  )


@facets.source(S, "text")
def decline_reason(ctx: AuthorContext) -> Found:
  """A vendor declined an agreement and said why; the reason is handed on."""
  vendor = ctx.choice(world(ctx.env.seed).vendors)
  approver = _head(ctx, "Finance")
  reason = ctx.choice(
    (
      "Payment terms must be net-60, not net-45",
      "Delivery window of 14 days is too short for custom orders",
      "Liability cap needs to match the master agreement",
      "Please name our subsidiary as the contracting party",
    )
  )
  title = f"{topic(ctx)} - Vendor Agreement - {vendor.name}"
  signers = [
    _signer(vendor.contact.email, vendor.contact.name, "Vendor", 1, "declined"),
    _signer(approver.email, approver.name, "Finance approver", 2, "pending"),
  ]
  signers[0]["decline_reason"] = reason
  _put_envelope(ctx, title, f"Vendor Agreement with {vendor.name}.", signers, status="declined")
  env = _find(ctx, title, status="declined")
  said = next(s["decline_reason"] for s in env["signers"] if s["status"] == "declined")
  return found_one(
    "text", f'the reason {vendor.name} gave for declining the "{title}" envelope', said
  )


# --- lookups ---------------------------------------------------------------------------------


def _renewal(ctx: AuthorContext, company: str) -> dict:
  """That company's renewal order form, sent and waiting on the customer."""
  title = f"Renewal Order Form - {company}"
  _order_form(ctx, title, company)
  return _find(ctx, title, status="sent")


@facets.lookup(S, "company.name", "person.email")
def renewal_signer(ctx: AuthorContext, found: Found) -> Found:
  env = _renewal(ctx, str(found.values[0].value))
  email = env["waiting_for"][0]
  return found_one(
    "person.email", "the person who still has to sign that company's renewal order form", email
  )


@facets.lookup(S, "company.name", "money")
def renewal_total(ctx: AuthorContext, found: Found) -> Found:
  env = _renewal(ctx, str(found.values[0].value))
  m = _lines(env["document"])[0]
  total = _figure(m.group(6))
  return Found(
    "money",
    "the order total of that company's renewal order form",
    [Value(total, f"{m.group(4)} {m.group(6)}", total)],
  )


# --- sinks -----------------------------------------------------------------------------------


def _draft(ctx: AuthorContext) -> dict:
  """A custom draft nobody is on yet, so whoever the walk brings is a new signer."""
  about = topic(ctx)
  title = f"{about} consent form"
  _put_envelope(ctx, title, f"Consent to take part in the {about}.", [], status="draft")
  return _find(ctx, title, status="draft")


def _add_signer(ctx: AuthorContext, env: dict, v: Value) -> None:
  email = str(v.value).lower()
  ctx.call(S, "add_signer", envelope_id=env["id"], email=email, name=name_of(ctx, email))


facets.sink(
  S,
  "person.email",
  "add_signer_to_draft",
  prepare=_draft,
  act=_add_signer,
  check=lambda ctx, e, v: record_is(
    S, "envelopes", e["id"], "signers.id", str(v.value).lower(), "contains"
  ),
  phrase=lambda ctx, e, obj: f'add {obj} as a signer of the "{e["title"]}" draft envelope',
  text=lambda ctx, e, v: f'{v.label} is a signer of "{e["title"]}".',
)


def _sent(t: dict, signer: str, condition: dict) -> dict:
  """A rubric condition: an envelope titled as ``t`` says, meeting ``condition``, is out for
  ``signer`` to sign."""
  return exists(
    S,
    "envelopes",
    where("title", t["title"]),
    condition,
    where("signers.id", signer, "contains"),
    where("status", "sent"),
  )


def _nda_target(ctx: AuthorContext) -> dict:
  tpl = next(
    t
    for t in ctx.call(S, "list_templates", query="Mutual NDA")["items"]
    if t["name"] == "Mutual NDA"
  )
  return {"template": tpl, "title": f"Mutual NDA - {topic(ctx)}"}


def _send_nda(ctx: AuthorContext, t: dict, v: Value) -> None:
  email = str(v.value).lower()
  if any(r["default_email"] == email for r in t["template"]["roles"]):
    raise AuthoringError("signer_is_template_default", email)
  signer = {"role": "Counterparty", "email": email, "name": name_of(ctx, email)}
  env = ctx.call(
    S,
    "create_envelope_from_template",
    template_id=t["template"]["id"],
    signers=[signer],
    title=t["title"],
  )
  ctx.call(S, "send_envelope", envelope_id=env["id"])


facets.sink(
  S,
  "person.email",
  "send_nda",
  prepare=_nda_target,
  act=_send_nda,
  check=lambda ctx, t, v: _sent(t, str(v.value).lower(), where("template_id", t["template"]["id"])),
  phrase=lambda ctx, t, obj: (
    f'send {obj} our Mutual NDA template for signature as the counterparty, titled "{t["title"]}"'
  ),
  text=lambda ctx, t, v: f'A "{t["title"]}" NDA was sent to {v.label} for signature.',
)


def _to_void(ctx: AuthorContext) -> dict:
  org = ctx.choice(world(ctx.env.seed).customers)
  title = f"{topic(ctx)} - Order Form - {org.name}"
  _order_form(ctx, title, org.name)
  return _find(ctx, title, status="sent")


facets.sink(
  S,
  "text",
  "void_with_reason",
  prepare=_to_void,
  act=lambda ctx, e, v: ctx.call(S, "void_envelope", envelope_id=e["id"], reason=str(v.value)),
  check=lambda ctx, e, v: moved_to(S, "envelopes", e["id"], "voided", mentions("void_reason", v)),
  phrase=lambda ctx, e, obj: f'void the "{e["title"]}" envelope, giving {obj} as the reason',
  text=lambda ctx, e, v: f'"{e["title"]}" is voided with the reason "{v.label}".',
  single=True,  # an envelope is voided for one reason
)


def _approval_target(ctx: AuthorContext) -> dict:
  who, about = _head(ctx, "Finance"), topic(ctx)
  return {"title": f"{about} spend approval", "about": about, "email": who.email, "name": who.name}


def _send_approval(ctx: AuthorContext, t: dict, v: Value) -> None:
  amount = amount_of(v)
  env = ctx.call(
    S,
    "create_envelope",
    title=t["title"],
    document=f"I approve spending {amount:,.2f} on the {t['about']}.",
  )
  ctx.call(S, "add_signer", envelope_id=env["id"], email=t["email"], name=t["name"])
  ctx.call(S, "send_envelope", envelope_id=env["id"])


def _approval_check(ctx: AuthorContext, t: dict, v: Value) -> dict:
  amount = amount_of(v)
  return _sent(t, t["email"], amount_is("document", amount, 0.01))


facets.sink(
  S,
  "money",
  "spend_approval",
  total="spend_approval_for_total",
  prepare=_approval_target,
  act=_send_approval,
  check=_approval_check,
  phrase=lambda ctx, t, obj: (
    f'send {t["name"]} ({t["email"]}) an envelope titled "{t["title"]}" to approve spending {obj}'
  ),
  text=lambda ctx, t, v: f'"{t["title"]}" for {v.label} was sent to {t["name"]} to sign.',
)


# --- revisit: read a draft's customer signer, replace them, read the signer again ------------


def _customer_first(ctx: AuthorContext) -> tuple[Found, dict]:
  org = ctx.choice(world(ctx.env.seed).customers)
  title = f"{topic(ctx)} - Order Form - {org.name}"
  _order_form(ctx, title, org.name, status="draft")
  env = _find(ctx, title, status="draft")
  customer = next(s for s in env["signers"] if s["role"] == "Customer")
  target = {"id": env["id"], "title": title, "old": customer["id"]}
  return found_one(
    "person.email", f'the customer signer on the "{title}" draft envelope', customer["id"]
  ), target


def _replace(ctx: AuthorContext, t: dict, v: Value) -> None:
  email = str(v.value).lower()
  env = ctx.call(S, "get_envelope", envelope_id=t["id"])
  if any(s["id"] == email for s in env["signers"]):
    raise AuthoringError("already_a_signer", email)
  ctx.call(S, "remove_signer", envelope_id=t["id"], email=t["old"])
  ctx.call(
    S,
    "add_signer",
    envelope_id=t["id"],
    email=email,
    name=name_of(ctx, email),
    routing_order=1,
    role="Customer",
  )


def _replaced_check(ctx: AuthorContext, t: dict, v: Value) -> dict:
  return all_of(
    record_is(S, "envelopes", t["id"], "signers.id", str(v.value).lower(), "contains"),
    record_is(S, "envelopes", t["id"], "signers.id", t["old"], "not_contains"),
  )


def _customer_second(ctx: AuthorContext, t: dict) -> Found:
  env = ctx.call(S, "get_envelope", envelope_id=t["id"])
  now = next(s["id"] for s in env["signers"] if s["role"] == "Customer")
  return found_one(
    "person.email", f'the customer signer now on "{t["title"]}"', now, stale=t["old"]
  )


facets.revisit(
  S,
  kind="person.email",
  kind_in="person.email",
  kind_after="person.email",
  name="replace_customer_signer",
  first=_customer_first,
  second=_customer_second,
  change="replace_signer",
  act=_replace,
  check=_replaced_check,
  phrase=lambda ctx, t, obj: (
    f'make {obj} the customer signer of the "{t["title"]}" draft instead, still signing first'
  ),
  text=lambda ctx, t, v: f'{v.label} replaced the previous customer signer of "{t["title"]}".',
  single=True,  # a draft has one customer signer
)
