"""Simosphere: a mail-and-collaboration suite (mail, documents and meeting invitations).

The mailbox belongs to one user, the first person of the seeded world: they send the mail in
"sent", write the "drafts" and own the documents they create. Messages live in threads and in
one folder ("inbox", "sent", "archive", "drafts"). Documents ("doc" or "sheet") are readable by
everyone in the workspace but editable only by their owner and the people they are shared with.
Meeting invitations are sent to invitees and can be cancelled.

Rules a mail user expects: a message has at least one recipient; a reply stays in its thread
with subject "Re: ..." and goes to the original sender (to the original recipients when the user
replies to their own message); a draft cannot be replied to or archived; a read message cannot
be marked read again, nor an archived one archived again; only the owner of a document and the
people it is shared with can edit or share it, and only supplied fields change; a meeting ends
after it starts and has at least one invitee; a cancelled invitation stays cancelled.
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta

from compoworld import Conflict, InvalidArgument, NotFound, Service, registry, tool
from compoworld.runtime.fields import Email, Limit, Offset, Text
from compoworld.runtime.query import page_of, select
from compoworld.runtime.state import supplied
from envs._world import COMPANIES, seeded
from envs.simosphere.state import (
  DRAFTS,
  ROLES,
  THREADS,
  VENDORS,
  DocKind,
  Document,
  Folder,
  Invitation,
  Message,
  SimosphereState,
  _day,
  _emails,
  _letter,
  _user,
)


@registry.register
class SimosphereService(Service):
  name = "simosphere"
  domain = "communication"
  description = "Mail, shared documents and meeting invitations in one suite."
  State = SimosphereState

  @classmethod
  def generate(cls, seed: int, size: int | None) -> SimosphereState:
    rng, w, state = seeded(cls, seed)
    me, others = w.people[0], w.people[1:]
    now = state.now
    customers = [name for name, _ in COMPANIES if name != w.company]
    total = size if size is not None else 40
    n_drafts = min(2, total // 15)
    threads = []  # (thread_id, subject, counterpart email, time after the last message)
    made = 0
    while made < total - n_drafts:
      label, subject, opener, follow_ups = rng.choice(THREADS)
      people = rng.sample(others, 3)
      fill = dict(
        invoice=f"INV-{rng.randint(1000, 9999)}",
        vendor=rng.choice(VENDORS),
        amount=f"{rng.randint(12, 240) * 100:,}",
        day=_day(now + timedelta(days=rng.randint(2, 12))),
        candidate=people[2].name,
        role=rng.choice(ROLES),
        customer=rng.choice(customers),
        ticket=rng.randint(20000, 89999),
        seats=rng.choice((40, 80, 120, 250)),
      )
      subject = subject.format(**fill)
      texts = [opener.format(**fill)] + [f.format(**fill) for f in follow_ups]
      count = min(rng.choice((1, 1, 2, 2, 3, 3, 4)), len(texts), total - n_drafts - made)
      other = people[0].email
      externals = [other] + ([people[1].email] if rng.random() < 0.4 else [])
      everyone = (me.email, *externals)
      sender = me.email if rng.random() < 0.15 else other
      to = other if sender == me.email else me.email
      tid = state.new_id("thr")
      at = now.replace(minute=0) - timedelta(days=rng.randint(3, 21), hours=rng.randint(0, 9))
      for i in range(count):
        if i:  # a follow-up answers the previous message
          previous = sender
          rest = [e for e in externals if e != previous]
          if previous != me.email and (not rest or rng.random() < 0.5):
            sender = me.email
          else:
            sender = rng.choice(rest)
          to = previous if previous != sender else me.email
        latest = i == count - 1
        if sender == me.email:
          folder, read = "sent", True
        elif rng.random() < 0.2 and not latest:
          folder, read = "archive", True
        else:
          folder, read = "inbox", rng.random() < (0.3 if latest else 0.8)
        state.messages.insert(
          Message(
            id=state.new_id("msg"),
            thread_id=tid,
            folder=folder,
            sender=sender,
            to=(to,),
            cc=tuple(e for e in everyone if e not in (sender, to)),
            subject=subject if i == 0 else f"Re: {subject}",
            body=_letter(to, texts[i], sender),
            sent_at=at,
            read=read,
            labels=(label,) if folder != "sent" else (),
          )
        )
        at += timedelta(minutes=rng.randint(20, 600))
      threads.append((tid, subject, other, at))
      made += count
    for tid, subject, other, at in rng.sample(threads, n_drafts):
      state.messages.insert(
        Message(
          id=state.new_id("msg"),
          thread_id=tid,
          folder="drafts",
          sender=me.email,
          to=(other,),
          subject=f"Re: {subject}",
          body=_letter(other, rng.choice(DRAFTS), me.email),
          sent_at=at,
          read=True,
        )
      )
    cls._generate_documents(state, rng, me.email, others)
    cls._generate_invitations(state, rng, w, customers)
    return state

  @staticmethod
  def _generate_documents(state: SimosphereState, rng: random.Random, me: str, others) -> None:
    hr, lead, analyst = rng.sample(others, 3)
    team = tuple(p.email for p in rng.sample(others, 3))
    inventory = "\n".join(
      f"{item},{rng.randint(1, 60)},{room}"
      for item, room in (
        ("Standing desk", "Floor 3"),
        ("Monitor 27in", "Floor 3"),
        ("Office chair", "Floor 2"),
        ("Projector", "Room Atlas"),
        ("Whiteboard", "Room Birch"),
        ("Laptop dock", "IT cupboard"),
      )
    )
    docs = (
      (
        "Q2 planning notes",
        "doc",
        "Q2 priorities (draft)\n1. Onboarding revamp: cut time-to-first-value to one day.\n"
        "2. Billing migration: move all plans to the new billing system.\n"
        "3. EU launch: data residency and localised pricing.\n"
        "Candidates: SSO for enterprise pilots.",
        me,
        team,
      ),
      (
        "Team handbook",
        "doc",
        "Welcome! Core hours are 10:00-16:00. Expenses over $75 need a receipt. Parental "
        "leave: 20 weeks paid for all parents. Security: rotate API keys every 90 days.",
        hr.email,
        tuple(p.email for p in rng.sample(others, 2) if p.email != hr.email),
      ),
      ("Office inventory", "sheet", "item,quantity,location\n" + inventory, me, ()),
      (
        "Hiring pipeline",
        "sheet",
        "candidate,role,stage\n"
        + "\n".join(
          f"{p.name},{rng.choice(ROLES)},{rng.choice(('screen', 'onsite', 'offer'))}"
          for p in rng.sample(others, 4)
        ),
        lead.email,
        (me,),
      ),
      (
        "Incident review: checkout latency",
        "doc",
        "Summary: checkout p95 latency rose to 4s for 40 minutes.\nRoot cause: connection "
        "pool limit lowered by a config change.\nFollow-ups: pool saturation alert; config "
        "change review.",
        analyst.email,
        (me, lead.email),
      ),
      (
        "Weekly sync notes",
        "doc",
        "Agenda: hiring update, customer escalations, budget reforecast.\nActions: send the "
        "renewal quote; book the incident review.",
        me,
        (lead.email,),
      ),
    )
    for title, kind, content, owner, shared in docs:
      state.documents.insert(
        Document(
          id=state.new_id("doc"),
          title=title,
          kind=kind,
          content=content,
          owner=owner,
          shared_with=shared,
          updated_at=state.now - timedelta(days=rng.randint(1, 30), hours=rng.randint(0, 8)),
        )
      )

  @staticmethod
  def _generate_invitations(state: SimosphereState, rng: random.Random, w, customers) -> None:
    venue = rng.choice(w.venues)
    for subject, location, online in (
      ("Q2 planning kickoff", "Online", True),
      (f"Customer workshop with {rng.choice(customers)}", f"{venue.name}, {venue.address}", False),
    ):
      iid = state.new_id("inv")
      start = state.now.replace(hour=rng.choice((10, 14))) + timedelta(days=rng.randint(2, 10))
      state.invitations.insert(
        Invitation(
          id=iid,
          subject=subject,
          start=start,
          end=start + timedelta(minutes=rng.choice((45, 60, 90))),
          location=location,
          meeting_link=f"https://meet.simosphere.example/{iid[4:]}" if online else None,
          invitees=tuple(p.email for p in rng.sample(w.people[1:], rng.randint(2, 5))),
          message="Agenda to follow. Please come prepared.",
          sent_at=state.now - timedelta(days=rng.randint(1, 5)),
        )
      )

  # --- helpers -----------------------------------------------------------------------------

  @property
  def user(self) -> str:
    """The mailbox owner's email address."""
    return _user(self.state.seed)

  def _editable(self, document_id: str) -> Document:
    doc = self.state.documents.get(document_id)
    if self.user != doc.owner and self.user not in doc.shared_with:
      raise Conflict(
        f"document '{document_id}' is owned by {doc.owner} and not shared with {self.user}; "
        "you can read it but not change it"
      )
    return doc

  # --- reads -------------------------------------------------------------------------------

  @tool(
    mutates=False, page="message", produces=("message.id", "thread.id", "person.email", "datetime")
  )
  def search_messages(
    self,
    query: str | None = None,
    folder: Folder | None = None,
    sender: Email | None = None,
    unread_only: bool = False,
  ) -> list:
    """Search the mailbox, newest first.

    Args:
      query: words that must all appear in the subject, body or sender.
      folder: only messages in this folder ("inbox", "sent", "archive" or "drafts").
      sender: only messages from this email address.
      unread_only: only unread messages.
    """
    return select(
      self.state.messages,
      eq={"folder": folder, "sender": sender and sender.lower()},
      text=query,
      fields=("subject", "body", "sender"),
      where=lambda m: not unread_only or not m.read,
      key=lambda m: (m.sent_at, m.id),
      reverse=True,
    )

  @tool(
    mutates=False,
    produces=("message.id", "thread.id", "person.email", "datetime", "text"),
  )
  def read_message(self, message_id: str) -> Message:
    """Get one message with its recipients and full body (reading does not mark it read).

    Args:
      message_id: the message's id.
    """
    return self.state.messages.get(message_id)

  @tool(mutates=False, consumes=("thread.id",), produces=("message.id", "person.email"))
  def get_thread(self, thread_id: str) -> list[Message]:
    """Get every message of a thread, drafts included, oldest first.

    Args:
      thread_id: the thread's id (the thread_id of any of its messages).
    """
    found = sorted(
      self.state.messages.filter(lambda m: m.thread_id == thread_id),
      key=lambda m: (m.sent_at, m.id),
    )
    if not found:
      raise NotFound(f"thread '{thread_id}' not found")
    return found

  @tool(mutates=False, produces=("document.id", "person.email"))
  def list_documents(self, query: str | None = None, limit: Limit = 20, offset: Offset = 0) -> dict:
    """List documents, most recently updated first, without their content.

    Args:
      query: words that must all appear in the title or content.
      limit: page size (1-100).
      offset: index of the first document to return.
    """
    return page_of(
      self.state.documents,
      text=query,
      fields=("title", "content"),
      key=lambda d: (d.updated_at, d.id),
      reverse=True,
      limit=limit,
      offset=offset,
      view=lambda d: {
        "id": d.id,
        "title": d.title,
        "kind": d.kind,
        "owner": d.owner,
        "updated_at": d.updated_at,
      },
    )

  @tool(mutates=False, produces=("document.id", "document.text", "person.email"))
  def read_document(self, document_id: str) -> Document:
    """Get one document with its content, owner and the people it is shared with.

    Args:
      document_id: the document's id.
    """
    return self.state.documents.get(document_id)

  @tool(
    mutates=False,
    page="invitation",
    produces=("invitation.id", "datetime", "location", "url", "person.email"),
  )
  def list_invitations(self) -> list:
    """List the meeting invitations the user has sent, in start order, cancelled ones included.

    Args:
    """
    return sorted(self.state.invitations, key=lambda i: (i.start, i.id))

  # --- writes: mail ------------------------------------------------------------------------

  @tool(
    mutates=True,
    consumes=("person.email", "text", "document.text"),
    produces=("message.id", "thread.id"),
  )
  def send_message(
    self, to: list[Email], subject: Text, body: str, cc: list[Email] = ()
  ) -> Message:
    """Send a new message; it starts a new thread and is filed in "sent".

    Args:
      to: recipients' email addresses (at least one).
      subject: the subject line.
      body: the message text.
      cc: addresses to copy.
    """
    recipients = _emails(to, "to")
    copied = tuple(e for e in dict.fromkeys(c.lower() for c in cc) if e not in recipients)
    return self.state.messages.insert(
      Message(
        id=self.state.new_id("msg"),
        thread_id=self.state.new_id("thr"),
        folder="sent",
        sender=self.user,
        to=recipients,
        cc=copied,
        subject=subject,
        body=body,
        sent_at=self.state.now,
        read=True,
      )
    )

  @tool(mutates=True, consumes=("message.id", "text"), produces=("message.id",))
  def reply_to_message(self, message_id: str, body: Text) -> Message:
    """Reply to a message in its thread; the reply goes to the original sender (or, when
    replying to your own message, to its original recipients) with subject "Re: ...".

    Args:
      message_id: the message to reply to.
      body: the reply text.
    """
    original = self.state.messages.get(message_id)
    if original.folder == "drafts":
      raise Conflict(f"message '{message_id}' is an unsent draft and cannot be replied to")
    subject = original.subject
    if not subject.lower().startswith("re:"):
      subject = f"Re: {subject}"
    to = original.to if original.sender == self.user else (original.sender,)
    return self.state.messages.insert(
      Message(
        id=self.state.new_id("msg"),
        thread_id=original.thread_id,
        folder="sent",
        sender=self.user,
        to=to,
        subject=subject,
        body=body,
        sent_at=self.state.now,
        read=True,
      )
    )

  @tool(mutates=True, consumes=("message.id",))
  def mark_read(self, message_id: str) -> Message:
    """Mark a message as read.

    Args:
      message_id: the message's id.
    """
    message = self.state.messages.get(message_id)
    if message.read:
      raise Conflict(f"message '{message_id}' is already read")
    return self.state.messages.update(message_id, read=True)

  @tool(mutates=True, consumes=("message.id",))
  def archive_message(self, message_id: str) -> Message:
    """Move a message to the "archive" folder.

    Args:
      message_id: the message's id.
    """
    message = self.state.messages.get(message_id)
    if message.folder == "archive":
      raise Conflict(f"message '{message_id}' is already archived")
    if message.folder == "drafts":
      raise Conflict(f"message '{message_id}' is an unsent draft and cannot be archived")
    return self.state.messages.update(message_id, folder="archive")

  # --- writes: documents -------------------------------------------------------------------

  @tool(mutates=True, consumes=("document.text",), produces=("document.id",))
  def create_document(self, title: Text, content: str, kind: DocKind = "doc") -> Document:
    """Create a document owned by the user, shared with no one yet.

    Args:
      title: the document title.
      content: the document text (for a sheet, comma-separated rows).
      kind: "doc" or "sheet".
    """
    return self.state.documents.insert(
      Document(
        id=self.state.new_id("doc"),
        title=title,
        kind=kind,
        content=content,
        owner=self.user,
        updated_at=self.state.now,
      )
    )

  @tool(mutates=True, consumes=("document.id", "document.text"))
  def update_document(
    self, document_id: str, content: str | None = None, title: Text | None = None
  ) -> Document:
    """Change a document's content or title; only supplied fields change. Only the owner and
    the people the document is shared with can edit it.

    Args:
      document_id: the document's id.
      content: the new full content (replaces the old one).
      title: the new title.
    """
    self._editable(document_id)
    changes = supplied("update_document", dict(content=content, title=title), name_fields=True)
    return self.state.documents.update(document_id, updated_at=self.state.now, **changes)

  @tool(mutates=True, consumes=("document.id", "person.email"))
  def share_document(self, document_id: str, emails: list[Email]) -> Document:
    """Give people edit access to a document; people who already have it are left as they are.
    Only the owner and the people it is shared with can share it.

    Args:
      document_id: the document's id.
      emails: email addresses to share with.
    """
    doc = self._editable(document_id)
    present = {doc.owner, *doc.shared_with}
    new = tuple(e for e in _emails(emails, "emails") if e not in present)
    if not new:
      raise Conflict(f"document '{document_id}' is already shared with every given address")
    return self.state.documents.update(
      document_id, shared_with=doc.shared_with + new, updated_at=self.state.now
    )

  # --- writes: invitations -----------------------------------------------------------------

  @tool(
    mutates=True,
    consumes=("datetime", "person.email", "location", "url"),
    produces=("invitation.id",),
  )
  def send_meeting_invitation(
    self,
    subject: Text,
    start: datetime,
    end: datetime,
    invitees: list[Email],
    location: str = "",
    meeting_link: str | None = None,
    message: str = "",
  ) -> Invitation:
    """Send a meeting invitation; repeated invitees (in any letter case) are invited once.

    Args:
      subject: what the meeting is about.
      start: start time (ISO 8601).
      end: end time (ISO 8601), after the start.
      invitees: email addresses to invite (at least one).
      location: where it happens.
      meeting_link: an http(s) video-call link, for an online meeting.
      message: a note sent with the invitation.
    """
    if end <= start:
      raise InvalidArgument(f"end ({end.isoformat()}) must be after start ({start.isoformat()})")
    people = _emails(invitees, "invitees")
    if meeting_link is not None and not meeting_link.startswith(("https://", "http://")):
      raise InvalidArgument(f"meeting_link must be an http(s) URL, got {meeting_link!r}")
    return self.state.invitations.insert(
      Invitation(
        id=self.state.new_id("inv"),
        subject=subject,
        start=start,
        end=end,
        location=location,
        meeting_link=meeting_link,
        invitees=people,
        message=message,
        sent_at=self.state.now,
      )
    )

  @tool(mutates=True, consumes=("invitation.id",))
  def cancel_invitation(self, invitation_id: str) -> Invitation:
    """Cancel a meeting invitation (it stays listed with status "cancelled").

    Args:
      invitation_id: the invitation's id.
    """
    invitation = self.state.invitations.get(invitation_id)
    if invitation.status == "cancelled":
      raise Conflict(f"invitation '{invitation_id}' is already cancelled")
    return self.state.invitations.update(invitation_id, status="cancelled")
