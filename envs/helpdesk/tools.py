"""Helpdesk: a Zendesk-like support desk of tickets, comments, agents, requesters and macros.

Requesters are the contacts of the world's customer companies (their organization is the
customer); agents are the home company's Support staff plus the user the agent works for (an
admin). A ticket has a subject, a description (the requester's first message), a priority
(low, normal, high, urgent), a status and an optional assignee. Statuses move new → open →
pending → solved → closed: pending and open swap freely, a solved ticket can be reopened or
closed, a closed ticket never changes again. Every ticket has a resolution SLA target computed
from its priority (``SLA_HOURS``); it is breached when the ticket is not solved by then.
Comments are public replies or internal notes, written by an agent or by the ticket's
requester. Macros are named bundles of changes (status, priority, tags, a canned reply).

Rules a Zendesk user expects: solving needs an assignee and a public agent reply as the latest
public comment (the resolution); a closed ticket is immutable; only active agents can be
assigned; a status cannot go back to "new", and only a solved ticket can be closed; assigning a
new ticket or replying to it opens it; a requester's reply to a pending or solved ticket reopens
it; end users cannot write internal notes; a ticket cannot be merged into itself or into (or
from) a closed ticket; a retired macro cannot be applied.
"""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

from compoworld import Conflict, InvalidArgument, NotFound, Service, registry, tool
from compoworld.runtime.fields import Email, Limit, Offset, Text
from compoworld.runtime.query import page_of, select
from envs._world import WorldUser, world
from envs.helpdesk.data import HelpdeskData
from envs.helpdesk.state import (
  SLA_HOURS,
  TRANSITIONS,
  Agent,
  Channel,
  Comment,
  HelpdeskState,
  Macro,
  Priority,
  Status,
  Ticket,
  _breached,
  _first,
  _tags,
)


@registry.register
class HelpdeskService(HelpdeskData, WorldUser, Service):
  name = "helpdesk"
  domain = "support"
  description = "Support tickets with SLAs, comments, agents, requesters and macros."
  State = HelpdeskState

  # --- helpers -----------------------------------------------------------------------------

  def _fresh(self, ticket: Ticket) -> Ticket:
    """The ticket with its SLA breach flag as of now (the stored one is as of its last write)."""
    breached = _breached(ticket, self.state.now)
    return ticket if breached == ticket.sla_breached else ticket.with_changes(sla_breached=breached)

  def _live(self, ticket_id: str) -> Ticket:
    ticket = self.state.tickets.get(ticket_id)
    if ticket.status == "closed":
      raise Conflict(f"ticket '{ticket_id}' is closed; closed tickets cannot be changed")
    return ticket

  def _assignable(self, email: str) -> Agent:
    email = email.lower()
    agent = self.state.agents.find(email)
    if agent is None:
      if email in self.state.requesters:
        raise Conflict(f"'{email}' is an end user (requester), not an agent; assign an agent")
      if world(self.state.seed).person(email) is not None:
        raise Conflict(f"'{email}' is an employee but not a helpdesk agent; assign an agent")
      raise NotFound(f"agent '{email}' not found")
    if not agent.active:
      raise Conflict(f"agent '{email}' is deactivated and cannot be assigned tickets")
    return agent

  def _comments(self, ticket_id: str) -> list[Comment]:
    found = self.state.comments.filter(lambda c: c.ticket_id == ticket_id)
    return sorted(found, key=lambda c: (c.created_at, c.id))

  def _comment(self, ticket: Ticket, author: str, body: str, public: bool) -> Comment:
    role = "end_user" if author == ticket.requester else "agent"
    return self.state.comments.insert(
      Comment(
        id=self.state.new_id("cmt"),
        ticket_id=ticket.id,
        author=author,
        author_role=role,
        body=body,
        public=public,
        created_at=self.state.now,
      )
    )

  def _change(self, ticket: Ticket, **changes) -> Ticket:
    """Applies status/priority/assignee/tags changes under the workflow rules."""
    now = self.state.now
    assignee = changes.get("assignee", ticket.assignee)
    status = changes.get("status", ticket.status)
    if status != ticket.status:
      if status not in TRANSITIONS[ticket.status]:
        allowed = ", ".join(TRANSITIONS[ticket.status]) or "none"
        raise Conflict(
          f"ticket '{ticket.id}' cannot go from {ticket.status} to {status}; allowed: {allowed}"
        )
      if status == "solved":
        public = [c for c in self._comments(ticket.id) if c.public]
        if not public or public[-1].author_role != "agent":
          raise Conflict(
            f"cannot solve without a resolution: ticket '{ticket.id}' needs a public agent "
            "reply as its latest public comment; add one with add_comment first"
          )
        changes["solved_at"] = now
      elif ticket.status == "solved":
        changes["solved_at"] = None  # reopened
    elif status == "new" and assignee is not None:
      changes["status"] = status = "open"  # an assigned ticket is being worked on
    if status == "solved" and assignee is None:
      raise Conflict(f"ticket '{ticket.id}' needs an assignee to be solved; assign an agent")
    if "priority" in changes:
      changes["sla_due_at"] = ticket.created_at + timedelta(hours=SLA_HOURS[changes["priority"]])
    new = ticket.with_changes(updated_at=now, **changes)
    return self.state.tickets.update(
      ticket.id, updated_at=now, sla_breached=_breached(new, now), **changes
    )

  # --- reads -------------------------------------------------------------------------------

  @tool(
    mutates=False,
    page="ticket",
    consumes=("person.email", "company.name", "status", "priority"),
    produces=("ticket.id", "person.email", "company.name", "status", "priority", "datetime"),
  )
  def search_tickets(
    self,
    query: str | None = None,
    status: Status | None = None,
    priority: Priority | None = None,
    assignee: Email | None = None,
    unassigned: bool = False,
    requester: Email | None = None,
    organization: str | None = None,
    tag: str | None = None,
    breached: bool | None = None,
  ) -> list:
    """Search tickets, newest first.

    Args:
      query: words that must all appear in the subject or description.
      status: only tickets in this status (new, open, pending, solved, closed).
      priority: only tickets of this priority (low, normal, high, urgent).
      assignee: only tickets assigned to this agent's email.
      unassigned: only tickets with no assignee.
      requester: only tickets from this requester's email.
      organization: only tickets of this customer organization (exact name, any case).
      tag: only tickets with this tag.
      breached: true for tickets past their SLA target, false for those within it.
    """
    if assignee is not None:
      assignee = self.state.agents.get(assignee.lower()).id
    if requester is not None:
      requester = self.state.requesters.get(requester.lower()).id
    want_tag = _tags((tag,), "tag")[0] if tag is not None else None
    return select(
      map(self._fresh, self.state.tickets),
      eq={
        "status": status,
        "priority": priority,
        "assignee": assignee,
        "requester": requester,
        "sla_breached": breached,
      },
      same={"organization": organization},
      text=query,
      fields=("subject", "description"),
      where=lambda t: (
        (not unassigned or t.assignee is None) and (want_tag is None or want_tag in t.tags)
      ),
      key=lambda t: (t.created_at, t.id),
      reverse=True,
    )

  @tool(
    mutates=False,
    consumes=("ticket.id",),
    produces=("ticket.id", "person.email", "company.name", "text", "datetime", "status"),
  )
  def get_ticket(self, ticket_id: str) -> dict:
    """Get one ticket with its comments (public replies and internal notes), oldest first.

    Args:
      ticket_id: the ticket's id.
    """
    ticket = self._fresh(self.state.tickets.get(ticket_id))
    return {**dict(ticket), "comments": self._comments(ticket_id)}

  @tool(mutates=False, produces=("person.email", "person.name", "company.name", "person.phone"))
  def list_requesters(
    self,
    query: str | None = None,
    organization: str | None = None,
    limit: Limit = 20,
    offset: Offset = 0,
  ) -> dict:
    """List requesters (customer contacts) by name, with their count of unsolved tickets.

    Args:
      query: words that must all appear in the name, email or organization.
      organization: only requesters of this organization (exact name, any case).
      limit: page size (1-100).
      offset: index of the first requester to return.
    """
    unsolved = Counter(
      t.requester for t in self.state.tickets if t.status in ("new", "open", "pending")
    )
    return page_of(
      self.state.requesters,
      same={"organization": organization},
      text=query,
      fields=("name", "id", "organization"),
      key=lambda r: (r.name, r.id),
      limit=limit,
      offset=offset,
      view=lambda r: {**dict(r), "unsolved_tickets": unsolved[r.id]},
    )

  @tool(mutates=False, produces=("person.email", "person.name", "employee.id", "number"))
  def list_agents(self, include_inactive: bool = False) -> list[dict]:
    """List the helpdesk agents with their count of unsolved assigned tickets.

    Args:
      include_inactive: also list deactivated agents.
    """
    load = Counter(t.assignee for t in self.state.tickets if t.status in ("new", "open", "pending"))
    return [
      {**dict(a), "unsolved_tickets": load[a.id]}
      for a in sorted(self.state.agents, key=lambda a: a.name)
      if a.active or include_inactive
    ]

  @tool(mutates=False, produces=("macro.id", "title"))
  def list_macros(self, include_inactive: bool = False) -> list[Macro]:
    """List macros: named bundles of ticket changes and a canned reply.

    Args:
      include_inactive: also list retired macros.
    """
    return [m for m in self.state.macros if m.active or include_inactive]

  @tool(mutates=False, consumes=("person.email",), produces=("number", "percentage", "ticket.id"))
  def sla_report(self, organization: str | None = None, assignee: Email | None = None) -> dict:
    """Report SLA compliance per priority: tickets, unsolved, breached and the breach rate.

    Args:
      organization: only tickets of this customer organization (exact name, any case).
      assignee: only tickets assigned to this agent's email.
    """
    tickets = [self._fresh(t) for t in self.state.tickets if t.merged_into is None]
    if organization is not None:
      tickets = [t for t in tickets if t.organization.lower() == organization.lower()]
      if not any(r.organization.lower() == organization.lower() for r in self.state.requesters):
        raise NotFound(f"organization '{organization}' not found")
    if assignee is not None:
      email = self.state.agents.get(assignee.lower()).id
      tickets = [t for t in tickets if t.assignee == email]

    def row(group: list[Ticket]) -> dict:
      breached = sum(t.sla_breached for t in group)
      return {
        "tickets": len(group),
        "unsolved": sum(t.status in ("new", "open", "pending") for t in group),
        "breached": breached,
        "breach_rate": round(100 * breached / len(group), 1) if group else 0.0,
      }

    return {
      "as_of": self.state.now,
      "targets_hours": SLA_HOURS,
      **row(tickets),
      "by_priority": [
        {"priority": p, **row([t for t in tickets if t.priority == p])} for p in SLA_HOURS
      ],
      "breached_unsolved": sorted(
        t.id for t in tickets if t.sla_breached and t.status in ("new", "open", "pending")
      ),
    }

  # --- writes ------------------------------------------------------------------------------

  @tool(
    mutates=True,
    consumes=("person.email", "title", "text", "priority"),
    produces=("ticket.id", "datetime"),
  )
  def create_ticket(
    self,
    subject: Text,
    description: Text,
    requester_email: Email,
    priority: Priority = "normal",
    tags: list[str] = (),
    assignee: Email | None = None,
    channel: Channel = "web",
  ) -> Ticket:
    """Open a ticket on behalf of a requester; its SLA target follows from the priority.

    Args:
      subject: the ticket subject.
      description: the requester's request, in their words.
      requester_email: the requester's email (an existing customer contact).
      priority: low, normal, high or urgent.
      tags: tags to set (lower-cased; spaces become underscores).
      assignee: an active agent's email; an assigned ticket starts "open", otherwise "new".
      channel: where the request came in: email, web, phone or chat.
    """
    req = self.state.requesters.get(requester_email.lower())
    agent = self._assignable(assignee) if assignee is not None else None
    now = self.state.now
    return self.state.tickets.insert(
      Ticket(
        id=self.state.new_id("tkt"),
        subject=subject,
        description=description,
        requester=req.id,
        organization=req.organization,
        priority=priority,
        status="open" if agent else "new",
        assignee=agent.id if agent else None,
        tags=_tags(tags),
        channel=channel,
        created_at=now,
        updated_at=now,
        sla_due_at=now + timedelta(hours=SLA_HOURS[priority]),
      )
    )

  @tool(mutates=True, consumes=("ticket.id", "status", "priority", "person.email"))
  def update_ticket(
    self,
    ticket_id: str,
    status: Status | None = None,
    priority: Priority | None = None,
    assignee: Email | None = None,
    unassign: bool = False,
    tags: list[str] | None = None,
    add_tags: list[str] = (),
    remove_tags: list[str] = (),
  ) -> Ticket:
    """Change a ticket's status, priority, assignee or tags; only supplied fields change.

    Solving needs an assignee and a public agent reply as the latest public comment. A changed
    priority moves the SLA target (counted from the ticket's creation).

    Args:
      ticket_id: the ticket's id.
      status: new status: open, pending, solved or closed (closing only from solved).
      priority: new priority.
      assignee: an active agent's email to assign.
      unassign: remove the assignee.
      tags: the full new tag list (replaces the old one).
      add_tags: tags to add.
      remove_tags: tags to remove.
    """
    ticket = self._live(ticket_id)
    if assignee is not None and unassign:
      raise InvalidArgument("update_ticket: give either assignee or unassign, not both")
    changes: dict = {}
    if status is not None:
      changes["status"] = status
    if priority is not None:
      changes["priority"] = priority
    if assignee is not None:
      changes["assignee"] = self._assignable(assignee).id
    if unassign:
      changes["assignee"] = None
    if tags is not None or add_tags or remove_tags:
      drop = set(_tags(remove_tags, "remove_tags"))
      base = (_tags(tags) if tags is not None else ticket.tags) + _tags(add_tags, "add_tags")
      changes["tags"] = tuple(t for t in dict.fromkeys(base) if t not in drop)
    if not changes:
      raise InvalidArgument("update_ticket: supply at least one field to change")
    return self._change(ticket, **changes)

  @tool(mutates=True, consumes=("ticket.id", "text", "person.email"), produces=("comment.id",))
  def add_comment(
    self, ticket_id: str, body: Text, public: bool = True, author: Email | None = None
  ) -> Comment:
    """Add a public reply or an internal note to a ticket.

    An agent's public reply opens a new ticket; the requester's reply reopens a pending or
    solved ticket. End users can only write public replies.

    Args:
      ticket_id: the ticket's id.
      body: the comment text.
      public: true for a reply the requester sees, false for an internal note.
      author: the author's email: an active agent or the ticket's requester (default: you).
    """
    ticket = self._live(ticket_id)
    who = (author or self.user).lower()
    if who == ticket.requester:
      if not public:
        raise Conflict("end users cannot write internal notes; use public=true")
    elif who in self.state.agents:
      if not self.state.agents.get(who).active:
        raise Conflict(f"agent '{who}' is deactivated and cannot comment")
    elif who in self.state.requesters:
      raise Conflict(f"'{who}' is not the requester of ticket '{ticket_id}' and cannot comment")
    else:
      raise NotFound(f"author '{who}' not found among agents and requesters")
    comment = self._comment(ticket, who, body, public)
    reopens = who == ticket.requester and ticket.status in ("pending", "solved")
    opens = who != ticket.requester and public and ticket.status == "new"
    if reopens or opens:
      self._change(ticket, status="open")
    else:
      self.state.tickets.update(ticket_id, updated_at=self.state.now)
    return comment

  @tool(mutates=True, consumes=("ticket.id", "macro.id"))
  def apply_macro(self, ticket_id: str, macro_id: str) -> dict:
    """Apply a macro to a ticket: its reply is posted first (as you), then its changes are made
    under the usual rules.

    Args:
      ticket_id: the ticket's id.
      macro_id: the macro's id.
    """
    ticket = self._live(ticket_id)
    macro = self.state.macros.get(macro_id)
    if not macro.active:
      raise Conflict(f"macro '{macro_id}' ({macro.title}) is retired and cannot be applied")
    if macro.comment:
      first = _first(self.state.requesters.get(ticket.requester).name)
      body = macro.comment.replace("{{requester.first_name}}", first)
      self._comment(ticket, self.user, body, macro.public)
    changes: dict = {"tags": tuple(dict.fromkeys(ticket.tags + macro.add_tags))}
    if macro.assign_to_me:
      changes["assignee"] = self._assignable(self.user).id
    if macro.priority is not None:
      changes["priority"] = macro.priority
    if macro.status is not None:
      changes["status"] = macro.status
    updated = self._change(ticket, **changes)
    return {"ticket": updated, "comments": self._comments(ticket_id)}

  @tool(mutates=True, consumes=("ticket.id",))
  def merge_tickets(self, source_id: str, target_id: str) -> dict:
    """Merge a duplicate ticket into another: the source is closed with a note pointing to
    the target, and the target gets an internal note with the source's request.

    Args:
      source_id: the duplicate ticket to close.
      target_id: the ticket to keep.
    """
    if source_id == target_id:
      raise Conflict(f"ticket '{source_id}' cannot be merged into itself")
    target = self.state.tickets.get(target_id)
    source = self.state.tickets.get(source_id)
    for which, t in (("source", source), ("target", target)):
      if t.status == "closed":
        raise Conflict(f"{which} ticket '{t.id}' is closed; only open tickets can be merged")
    self._comment(source, self.user, f"Closed and merged into ticket {target_id}.", False)
    self._comment(
      target,
      self.user,
      f"Merged from ticket {source_id} ({source.subject}) by {source.requester}: "
      f"{source.description}",
      False,
    )
    now = self.state.now
    closed = self.state.tickets.update(
      source_id,
      status="closed",
      merged_into=target_id,
      tags=tuple(dict.fromkeys((*source.tags, "merged"))),
      solved_at=source.solved_at or now,
      updated_at=now,
    )
    self.state.tickets.update(source_id, sla_breached=_breached(closed, now))
    kept = self.state.tickets.update(target_id, updated_at=now)
    return {"source": self.state.tickets.get(source_id), "target": kept}
