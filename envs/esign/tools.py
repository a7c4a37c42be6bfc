"""E-sign: a DocuSign-like e-signature service of templates, envelopes and signers.

An envelope carries one document (its text) to signers who sign in routing order: every signer
with the lowest routing order is sent the envelope first, signers sharing an order sign in
parallel, and the next order is sent once the current one has all signed. Templates hold
reusable documents with named roles (e.g. "Customer", "Sales approver"); some roles have a
default signer from the home company. The user (the world's first person) sends envelopes on
behalf of the company; customers, vendors and candidates sign them.

Envelope statuses: draft → sent → completed, or sent → declined (a signer refused) or sent →
voided (the sender withdrew it). Signer statuses: pending (not their turn yet) → sent (their
turn) → signed, or declined.

Rules a DocuSign user expects: signers are added to or removed from drafts only, each email
once; an envelope is sent only as a draft with at least one signer; only a signer whose turn it
is signs or declines, once; signing by the last signer completes the envelope, and one decline
ends it; only a sent envelope can be voided (a completed one is binding) or reminded, at most one
reminder a day; from a template, every role without a default signer must be filled.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from compoworld import Conflict, InvalidArgument, NotFound, Service, registry, tool
from compoworld.runtime.fields import Email, Limit, Offset, Text
from compoworld.runtime.query import page_of
from envs._world import FIRST, LAST, Contact, WorldUser, seeded
from envs.esign.state import (
  REMINDER_GAP,
  TEMPLATES,
  Envelope,
  EnvelopeStatus,
  EsignState,
  RoleSigner,
  RoutingOrder,
  Signer,
  Template,
  TemplateRole,
  _current,
  _fill,
  _route,
  _template_document,
)


@registry.register
class EsignService(WorldUser, Service):
  name = "esign"
  domain = "sales_crm"
  description = "E-signature envelopes: templates, signers in routing order, send, sign, void."
  State = EsignState

  @classmethod
  def generate(cls, seed: int, size: int | None) -> EsignState:
    rng, w, state = seeded(cls, seed)
    me, now = w.people[0], state.now
    leads = {"CEO": w.people[1]}
    for p in w.people[2:]:
      if p.title.startswith("Head of "):
        leads.setdefault(p.department, p)
    for name, description, roles in TEMPLATES:
      # A department without a head falls back to the CEO, so a default role is always filled.
      defaults = [key and leads.get(key, w.people[1]) for _, _, key in roles]
      state.templates.insert(
        Template(
          id=state.new_id("tpl"),
          name=name,
          description=description,
          document=_template_document(w.company, name, roles),
          roles=tuple(
            TemplateRole(
              id=role,
              routing_order=order,
              default_email=p.email if p else None,
              default_name=p.name if p else None,
            )
            for (role, order, _), p in zip(roles, defaults, strict=True)
          ),
          owner=me.email,
          created_at=now - timedelta(days=rng.randint(120, 400)),
        )
      )
    templates = list(state.templates)
    senders = [me, *[p for p in w.people[1:] if p.department == "Sales"][:3]]
    statuses = ("draft", "sent", "sent", "sent", "completed", "completed", "declined", "voided")
    for i in range(size if size is not None else 30):
      tpl = templates[i % len(templates)] if i < len(templates) else rng.choice(templates)
      status = statuses[i % len(statuses)] if i < 2 * len(statuses) else rng.choice(statuses)
      customer = rng.choice(w.customers)
      if tpl.name == "Vendor Agreement":
        vendor = rng.choice(w.vendors)
        party, org = vendor.contact, vendor.name
      elif tpl.name == "Offer Letter":
        first, last = rng.choice(FIRST), rng.choice(LAST)
        email = f"{first}.{last}@mail.example.com".lower()
        party = Contact(name=f"{first} {last}", email=email, title="Candidate", phone="")
        org = party.name
      else:
        party, org = rng.choice(customer.contacts), customer.name
      signers = []
      for role in tpl.roles:
        email, name = (
          (role.default_email, role.default_name)
          if role.default_email
          else (party.email, party.name)
        )
        signers.append(Signer(id=email, name=name, role=role.id, routing_order=role.routing_order))
      product = rng.choice(w.products)
      qty = rng.choice((5, 10, 25, 50, 100))
      document = _fill(tpl.document, tuple(signers))
      if tpl.name in ("Order Form", "Statement of Work"):
        document += (
          f"\n\nSchedule: {qty} x {product.name} ({product.sku}) at {w.currency} "
          f"{product.unit_price:,.2f} = {w.currency} {qty * product.unit_price:,.2f}"
        )
      # Old enough that sending, two signatures and a void all fall before now.
      created = now - timedelta(days=rng.randint(5, 60), hours=rng.randint(0, 8))
      sent = created + timedelta(hours=rng.randint(1, 30))
      env = dict(
        id=state.new_id("env"),
        title=f"{tpl.name} - {org}",
        document=document,
        template_id=tpl.id,
        sender=rng.choice(senders).email,
        message=f"Please review and sign the {tpl.name.lower()}.",
        created_at=created,
      )
      if status == "draft" and rng.random() < 0.4:
        # A custom draft nobody was added to yet: it cannot be sent until it has a signer.
        env.update(
          title=f"Amendment - {org}",
          template_id=None,
          document=f"Amendment to the agreement between {w.company} and {org}: extend the "
          "term by 12 months.",
        )
        signers = []
      signers = tuple(signers)
      if status != "draft":
        env.update(sent_at=sent, status=status)
        signers = _route(signers)
        # Sign, in order, as far as the status needs: all for completed, some otherwise.
        steps = len(signers) if status == "completed" else rng.randint(0, len(signers) - 1)
        at = sent
        for _ in range(steps):
          at += timedelta(hours=rng.randint(2, 40))
          s = _current(signers)[0]
          signers = _route(
            tuple(x.with_changes(status="signed", signed_at=at) if x is s else x for x in signers)
          )
        if status == "completed":
          env.update(completed_at=at)
        elif status == "declined":
          s = _current(signers)[0]
          reason = rng.choice(("Pricing needs another review.", "Wrong legal entity named."))
          signers = tuple(
            x.with_changes(status="declined", decline_reason=reason) if x is s else x
            for x in signers
          )
        elif status == "voided":
          env.update(voided_at=at + timedelta(hours=5), void_reason="Superseded by a new version.")
        elif rng.random() < 0.5:
          reminded = now - timedelta(hours=rng.choice((3, 10, 50, 100)))
          env.update(reminders_sent=rng.randint(1, 2), last_reminder_at=max(reminded, at))
      state.envelopes.insert(Envelope(signers=signers, **env))
    return state

  # --- helpers -----------------------------------------------------------------------------

  def _in(self, envelope_id: str, allowed: tuple[str, ...], action: str) -> Envelope:
    env = self.state.envelopes.get(envelope_id)
    if env.status not in allowed:
      extra = " (a completed envelope is legally binding)" if env.status == "completed" else ""
      raise Conflict(
        f"envelope '{envelope_id}' is {env.status}{extra}; only a {' or '.join(allowed)} "
        f"envelope can {action}"
      )
    return env

  def _signer(self, env: Envelope, email: str) -> Signer:
    found = next((s for s in env.signers if s.id == email.lower()), None)
    if found is None:
      raise NotFound(f"'{email}' is not a signer of envelope '{env.id}'")
    return found

  def _turn(self, env: Envelope, signer: Signer) -> None:
    """Raises unless it is ``signer``'s turn to act on ``env``."""
    if signer.status == "signed":
      raise Conflict(f"{signer.id} already signed envelope '{env.id}' at {signer.signed_at}")
    if signer.status == "pending":
      waiting = ", ".join(
        f"{s.id} (routing order {s.routing_order})" for s in _current(env.signers)
      )
      raise Conflict(f"it is not {signer.id}'s turn to sign; waiting for {waiting}")

  # --- reads -------------------------------------------------------------------------------

  @tool(mutates=False, produces=("template.id", "title"))
  def list_templates(self, query: str | None = None, limit: Limit = 20, offset: Offset = 0) -> dict:
    """List templates by name, with their roles (without the document text).

    Args:
      query: words that must all appear in the name or description.
      limit: page size (1-100).
      offset: index of the first template to return.
    """
    return page_of(
      self.state.templates,
      text=query,
      fields=("name", "description"),
      key=lambda t: (t.name, t.id),
      limit=limit,
      offset=offset,
      view=lambda t: t.model_dump(exclude={"document"}),
    )

  @tool(mutates=False, consumes=("template.id",), produces=("document.text", "person.email"))
  def get_template(self, template_id: str) -> Template:
    """Get one template with its document and roles.

    Args:
      template_id: the template's id.
    """
    return self.state.templates.get(template_id)

  @tool(mutates=False, produces=("envelope.id", "title", "status", "person.email", "datetime"))
  def list_envelopes(
    self,
    status: EnvelopeStatus | None = None,
    query: str | None = None,
    signer: Email | None = None,
    created_after: datetime | None = None,
    created_before: datetime | None = None,
    limit: Limit = 20,
    offset: Offset = 0,
  ) -> dict:
    """List envelopes, newest first, without their document text.

    Args:
      status: only envelopes in this status (draft, sent, completed, declined or voided).
      query: words that must all appear in the title or document.
      signer: only envelopes with this signer's email address.
      created_after: only envelopes created at or after this time (ISO 8601).
      created_before: only envelopes created before this time (ISO 8601).
      limit: page size (1-100).
      offset: index of the first envelope to return.
    """
    if created_after and created_before and created_before <= created_after:
      raise InvalidArgument("created_before must be after created_after")
    return page_of(
      self.state.envelopes,
      eq={"status": status},
      ge={"created_at": created_after},
      lt={"created_at": created_before},
      text=query,
      fields=("title", "document"),
      where=lambda e: signer is None or any(s.id == signer.lower() for s in e.signers),
      key=lambda e: (e.created_at, e.id),
      reverse=True,
      limit=limit,
      offset=offset,
      view=lambda e: e.model_dump(exclude={"document"}),
    )

  @tool(
    mutates=False,
    consumes=("envelope.id",),
    produces=("document.text", "person.email", "status", "datetime"),
  )
  def get_envelope(self, envelope_id: str) -> dict:
    """Get one envelope with its document, signers and who it is waiting for.

    Args:
      envelope_id: the envelope's id.
    """
    env = self.state.envelopes.get(envelope_id)
    return {**env.model_dump(), "waiting_for": [s.id for s in _current(env.signers)]}

  # --- writes ------------------------------------------------------------------------------

  @tool(mutates=True, consumes=("title", "document.text"), produces=("envelope.id",))
  def create_envelope(self, title: Text, document: Text, message: str = "") -> Envelope:
    """Create a draft envelope from your own document; add signers, then send it.

    Args:
      title: the envelope title (the email subject signers see).
      document: the document text to sign.
      message: a note to the signers.
    """
    return self.state.envelopes.insert(
      Envelope(
        id=self.state.new_id("env"),
        title=title,
        document=document,
        sender=self.user,
        message=message,
        created_at=self.state.now,
      )
    )

  @tool(
    mutates=True,
    consumes=("template.id", "person.email", "person.name", "title"),
    produces=("envelope.id",),
  )
  def create_envelope_from_template(
    self,
    template_id: str,
    signers: list[RoleSigner] = (),
    title: Text | None = None,
    message: str = "",
  ) -> Envelope:
    """Create a draft envelope from a template: each role gets its signer (given here, or the
    role's default signer) and its routing order; the document names the signers.

    Args:
      template_id: the template's id.
      signers: who fills each role, as {role, email, name}; roles with a default signer may be
        left out.
      title: the envelope title; "<template name> - <first signer's name>" when omitted.
      message: a note to the signers.
    """
    tpl = self.state.templates.get(template_id)
    roles = {r.id: r for r in tpl.roles}
    given = {}
    for s in signers:
      if s.role not in roles:
        raise InvalidArgument(f"signers: unknown role '{s.role}'; roles are {', '.join(roles)}")
      if s.role in given:
        raise InvalidArgument(f"signers: role '{s.role}' is given twice")
      given[s.role] = s
    filled = []
    for role in tpl.roles:
      s = given.get(role.id)
      if s is None and role.default_email is None:
        raise InvalidArgument(f"signers: role '{role.id}' has no default signer; give one")
      email, name = (s.email.lower(), s.name) if s else (role.default_email, role.default_name)
      filled.append(Signer(id=email, name=name, role=role.id, routing_order=role.routing_order))
    if len({s.id for s in filled}) < len(filled):
      raise InvalidArgument("signers: each person can fill only one role of an envelope")
    return self.state.envelopes.insert(
      Envelope(
        id=self.state.new_id("env"),
        title=title or f"{tpl.name} - {filled[0].name}",
        document=_fill(tpl.document, tuple(filled)),
        template_id=tpl.id,
        sender=self.user,
        message=message,
        signers=tuple(filled),
        created_at=self.state.now,
      )
    )

  @tool(mutates=True, consumes=("envelope.id", "person.email", "person.name"))
  def add_signer(
    self,
    envelope_id: str,
    email: Email,
    name: Text,
    routing_order: RoutingOrder | None = None,
    role: Text = "Signer",
  ) -> Envelope:
    """Add a signer to a draft envelope.

    Args:
      envelope_id: the envelope's id.
      email: the signer's email address.
      name: the signer's full name.
      routing_order: when they sign (1 first; equal orders sign in parallel); after everyone
        already on the envelope when omitted.
      role: the signer's role on the document.
    """
    env = self._in(envelope_id, ("draft",), "have signers added")
    email = email.lower()
    if any(s.id == email for s in env.signers):
      raise Conflict(f"{email} is already a signer of envelope '{envelope_id}'")
    order = routing_order or max((s.routing_order for s in env.signers), default=0) + 1
    new = Signer(id=email, name=name, role=role, routing_order=min(order, 20))
    return self.state.envelopes.update(envelope_id, signers=(*env.signers, new))

  @tool(mutates=True, consumes=("envelope.id", "person.email"))
  def remove_signer(self, envelope_id: str, email: Email) -> Envelope:
    """Remove a signer from a draft envelope.

    Args:
      envelope_id: the envelope's id.
      email: the signer's email address.
    """
    env = self._in(envelope_id, ("draft",), "have signers removed")
    signer = self._signer(env, email)
    kept = tuple(s for s in env.signers if s is not signer)
    return self.state.envelopes.update(envelope_id, signers=kept)

  @tool(mutates=True, consumes=("envelope.id",))
  def send_envelope(self, envelope_id: str) -> dict:
    """Send a draft envelope: the signers with the lowest routing order receive it first.

    Args:
      envelope_id: the envelope's id.
    """
    env = self._in(envelope_id, ("draft",), "be sent")
    if not env.signers:
      raise Conflict(f"envelope '{envelope_id}' has no signers; add at least one with add_signer")
    sent = self.state.envelopes.update(
      envelope_id, status="sent", sent_at=self.state.now, signers=_route(env.signers)
    )
    return {**sent.model_dump(), "waiting_for": [s.id for s in _current(sent.signers)]}

  @tool(mutates=True, consumes=("envelope.id", "person.email"), produces=("status",))
  def record_signature(self, envelope_id: str, email: Email) -> dict:
    """Record that a signer signed; the next routing order is then sent the envelope, and the
    last signature completes it.

    Args:
      envelope_id: the envelope's id.
      email: the signer's email address.
    """
    env = self._in(envelope_id, ("sent",), "be signed")
    signer = self._signer(env, email)
    self._turn(env, signer)
    now = self.state.now
    signers = _route(
      tuple(
        s.with_changes(status="signed", signed_at=now) if s is signer else s for s in env.signers
      )
    )
    done = all(s.status == "signed" for s in signers)
    updated = self.state.envelopes.update(
      envelope_id,
      signers=signers,
      status="completed" if done else "sent",
      completed_at=now if done else None,
    )
    return {**updated.model_dump(), "waiting_for": [s.id for s in _current(signers)]}

  @tool(mutates=True, consumes=("envelope.id", "person.email", "text"))
  def decline_envelope(self, envelope_id: str, email: Email, reason: Text) -> Envelope:
    """Record that a signer declined to sign; the envelope is then declined for everyone.

    Args:
      envelope_id: the envelope's id.
      email: the declining signer's email address.
      reason: why they declined.
    """
    env = self._in(envelope_id, ("sent",), "be declined")
    signer = self._signer(env, email)
    self._turn(env, signer)
    signers = tuple(
      s.with_changes(status="declined", decline_reason=reason) if s is signer else s
      for s in env.signers
    )
    return self.state.envelopes.update(envelope_id, signers=signers, status="declined")

  @tool(mutates=True, consumes=("envelope.id", "text"))
  def void_envelope(self, envelope_id: str, reason: Text) -> Envelope:
    """Void a sent envelope so that nobody can sign it any more.

    Args:
      envelope_id: the envelope's id.
      reason: why it is voided (shown to the signers).
    """
    self._in(envelope_id, ("sent",), "be voided")
    return self.state.envelopes.update(
      envelope_id, status="voided", voided_at=self.state.now, void_reason=reason
    )

  @tool(mutates=True, consumes=("envelope.id",), produces=("person.email",))
  def resend_reminder(self, envelope_id: str) -> dict:
    """Email a reminder to the signers whose turn it is (at most one reminder a day).

    Args:
      envelope_id: the envelope's id.
    """
    env = self._in(envelope_id, ("sent",), "get a reminder")
    now = self.state.now
    if env.last_reminder_at is not None and now - env.last_reminder_at < REMINDER_GAP:
      nxt = env.last_reminder_at + REMINDER_GAP
      raise Conflict(
        f"a reminder for envelope '{envelope_id}' was sent at {env.last_reminder_at.isoformat()}; "
        f"the next one can go out from {nxt.isoformat()}"
      )
    updated = self.state.envelopes.update(
      envelope_id, reminders_sent=env.reminders_sent + 1, last_reminder_at=now
    )
    return {
      "envelope_id": envelope_id,
      "reminded": [s.id for s in _current(env.signers)],
      "reminders_sent": updated.reminders_sent,
    }
