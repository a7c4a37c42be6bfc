"""Helpdesk facets: tickets as sources of customers, agents, deadlines and companies; replies,
internal notes and new tickets as sinks; hand-over and escalation revisits (the assignee and the
SLA deadline a first read saw are stale after the write)."""

from __future__ import annotations

from datetime import timedelta

from compoworld.tasks.authoring import AuthorContext
from compoworld.tasks.facets import Found, Value, facets
from compoworld.tasks.rubric import all_of, exists, record_is, where
from envs._facets_common import found_one, found_people, found_time, iso, since, topic, user_email
from envs.helpdesk.state import SLA_HOURS

S = "helpdesk"

ISSUES = (
  "Dashboards load very slowly",
  "SSO login fails for new users",
  "Cannot export reports to CSV",
  "API returns 429 errors",
  "Password reset email not arriving",
  "Firmware update failed on our gateways",
)


def _helpers(ctx: AuthorContext, n: int) -> list:
  """``n`` distinct active agents other than the user (the desk always has at least two)."""
  state = ctx.state(S)
  agents = sorted(
    (a for a in state.agents if a.active and a.id != user_email(ctx)), key=lambda a: a.id
  )
  return ctx.rng.sample(agents, n)


def _requesters(ctx: AuthorContext, n: int = 1) -> list:
  return ctx.rng.sample(sorted(ctx.state(S).requesters, key=lambda r: r.id), n)


def _put_ticket(
  ctx: AuthorContext,
  subject: str,
  requester,
  status: str = "open",
  assignee: str | None = None,
  priority: str = "normal",
  tags: tuple[str, ...] = (),
  age_hours: int | None = None,
) -> dict:
  """Adds one of the scenario's tickets, opened a few hours ago and within its SLA; a worked
  ticket gets its assignee's first reply, as the desk's own tickets do."""
  now = ctx.state(S).now
  hours = age_hours if age_hours is not None else ctx.rng.randint(2, 6)
  created = (now - timedelta(hours=hours, minutes=ctx.rng.randint(5, 50))).replace(second=0)
  solved = status in ("solved", "closed")
  tid = ctx.fresh_id("tkt")
  first = requester.name.split()[0]
  if status != "new":
    ctx.put(
      S,
      "comments",
      {
        "id": ctx.fresh_id("cmt"),
        "ticket_id": tid,
        "author": assignee,
        "author_role": "agent",
        "body": f"Hi {first}, thanks for reaching out. I'm looking into this now.",
        "public": True,
        "created_at": iso(created + timedelta(minutes=20)),
      },
    )
  due = created + timedelta(hours=SLA_HOURS[priority])
  return ctx.put(
    S,
    "tickets",
    {
      "id": tid,
      "subject": subject,
      "description": f"{subject}. This started today and affects several of our users.",
      "requester": requester.id,
      "organization": requester.organization,
      "priority": priority,
      "status": status,
      "assignee": assignee,
      "tags": list(tags),
      "channel": ctx.choice(("email", "web", "phone")),
      "created_at": iso(created),
      "updated_at": iso(created + timedelta(minutes=20 if status != "new" else 0)),
      "sla_due_at": iso(due),
      "sla_breached": False,
      "solved_at": iso(created + timedelta(minutes=40)) if solved else None,
    },
  )


def _subject(ctx: AuthorContext) -> str:
  return f"{ctx.choice(ISSUES)} ({topic(ctx)})"


def _find(ctx: AuthorContext, ticket: dict) -> dict:
  """The agent's way to a ticket: search by the words of its subject, then open it."""
  topic_words = ticket["subject"].rsplit("(", 1)[-1].rstrip(")")
  hits = ctx.call(S, "search_tickets", query=topic_words)["items"]
  hit = next(t for t in hits if t["subject"] == ticket["subject"])
  return ctx.call(S, "get_ticket", ticket_id=hit["id"])


def _scenario(ctx: AuthorContext, status: str = "open", priority: str = "normal") -> dict:
  """A worked ticket of one customer, assigned to an agent who is not the user."""
  (agent,) = _helpers(ctx, 1)
  (req,) = _requesters(ctx)
  return _find(ctx, _put_ticket(ctx, _subject(ctx), req, status, agent.id, priority))


# --- sources -------------------------------------------------------------------------------


@facets.source(S, "person.email")
def ticket_requester(ctx: AuthorContext) -> Found:
  ticket = _scenario(ctx)
  return found_one(
    "person.email",
    f'the email address of the customer who opened the "{ticket["subject"]}" support ticket',
    ticket["requester"],
  )


@facets.source(S, "person.email")
def ticket_assignee(ctx: AuthorContext) -> Found:
  ticket = _scenario(ctx)
  return found_one(
    "person.email",
    f'the email address of the support agent working on the "{ticket["subject"]}" ticket',
    ticket["assignee"],
  )


@facets.source(S, "person.email")
def incident_reporters(ctx: AuthorContext) -> Found:
  """Several customers reported one incident (a shared tag); those whose ticket is solved
  already must be left alone."""
  code = topic(ctx).split()[0]
  tag, issue = f"{code.lower()}-incident", ctx.choice(ISSUES)
  people = _requesters(ctx, 5)
  statuses = ["open", "open", "pending", "solved", ctx.choice(("new", "solved"))]
  ctx.rng.shuffle(statuses)
  agents = _helpers(ctx, 2)
  for i, (req, status) in enumerate(zip(people, statuses, strict=True)):
    assignee = None if status == "new" else agents[i % 2].id
    _put_ticket(ctx, issue, req, status, assignee, "high", (tag,), age_hours=2 + i)
  hits = ctx.call(S, "search_tickets", tag=tag, limit=50)["items"]
  going = [t["requester"] for t in hits if t["status"] in ("new", "open", "pending")]
  done = [t["requester"] for t in hits if t["status"] in ("solved", "closed")]
  noun = f'the customers who reported the {code} incident (their tickets are tagged "{tag}")'
  return found_people(noun, going, done, "whose ticket is already solved")


@facets.source(S, "datetime")
def sla_deadline(ctx: AuthorContext) -> Found:
  ticket = _scenario(ctx, priority=ctx.choice(("normal", "low")))
  due = ticket["sla_due_at"]
  return found_time(f'the SLA resolution deadline of the "{ticket["subject"]}" ticket', due)


@facets.source(S, "company.name")
def ticket_company(ctx: AuthorContext) -> Found:
  ticket = _scenario(ctx)
  org = ticket["organization"]
  return found_one(
    "company.name", f'the customer company behind the "{ticket["subject"]}" ticket', org
  )


# --- lookups -------------------------------------------------------------------------------


def _org_contacts(ctx: AuthorContext, name: str) -> list:
  return sorted(
    (r for r in ctx.state(S).requesters if r.organization.lower() == str(name).lower()),
    key=lambda r: r.id,
  )


@facets.lookup(S, "company.name", "person.email")
def latest_reporter(ctx: AuthorContext, found: Found) -> Found | None:
  """The company's contact who filed its newest ticket (one filed minutes before s0)."""
  contacts = _org_contacts(ctx, found.values[0].value)
  if not contacts:
    return None
  req = ctx.choice(contacts)
  _put_ticket(ctx, _subject(ctx), req, "new", age_hours=0)
  hits = ctx.call(S, "search_tickets", organization=req.organization, limit=1)["items"]
  email = hits[0]["requester"]
  return found_one(
    "person.email",
    f"the email address of the {req.organization} contact who opened that company's most "
    "recent support ticket",
    email,
  )


@facets.lookup(S, "company.name", "number")
def unsolved_count(ctx: AuthorContext, found: Found) -> Found | None:
  contacts = _org_contacts(ctx, found.values[0].value)
  if not contacts:
    return None
  org = contacts[0].organization
  report = ctx.call(S, "sla_report", organization=org)
  n = report["unsolved"]
  return Found(
    "number",
    f"how many unsolved support tickets {org} has",
    [Value(n, str(n), float(n))],
    answer=f"{org} has {n} unsolved support ticket{'' if n == 1 else 's'}.",
  )


# --- sinks ---------------------------------------------------------------------------------


def _comment_check(ctx: AuthorContext, ticket: dict, text: str, public: bool) -> dict:
  return exists(
    S,
    "comments",
    where("ticket_id", ticket["id"]),
    where("public", public),
    where("body", text, "icontains"),
    since(ctx, S, "created_at"),
  )


def _reply(ctx: AuthorContext, ticket: dict, v: Value) -> None:
  first = ctx.state(S).requesters.get(ticket["requester"]).name.split()[0]
  body = f"Hi {first}, here is the information you asked for: {v.value}"
  ctx.call(S, "add_comment", ticket_id=ticket["id"], body=body, public=True)


def _requester_name(ctx: AuthorContext, ticket: dict) -> str:
  return ctx.state(S).requesters.get(ticket["requester"]).name


for kind in ("text", "url"):
  facets.sink(
    S,
    kind,
    f"reply_with_{kind}",
    prepare=_scenario,
    act=_reply,
    check=lambda ctx, t, v: _comment_check(ctx, t, str(v.value), True),
    phrase=lambda ctx, t, obj: (
      f'send {obj} to {_requester_name(ctx, t)} as a public reply on the "{t["subject"]}" ticket'
    ),
    text=lambda ctx, t, v: f'The "{t["subject"]}" ticket has a public reply with {v.label}.',
  )


for kind in ("reference", "tracking.number"):
  facets.sink(
    S,
    kind,
    f"note_{kind.replace('.', '_')}",
    prepare=_scenario,
    act=lambda ctx, t, v: ctx.call(
      S, "add_comment", ticket_id=t["id"], body=f"For the record: {v.value}", public=False
    ),
    check=lambda ctx, t, v: _comment_check(ctx, t, str(v.value), False),
    phrase=lambda ctx, t, obj: f'record {obj} in an internal note on the "{t["subject"]}" ticket',
    text=lambda ctx, t, v: f'The "{t["subject"]}" ticket has an internal note with {v.label}.',
  )


facets.sink(
  S,
  "person.email",
  "loop_in_by_note",
  prepare=_scenario,
  act=lambda ctx, t, v: ctx.call(
    S,
    "add_comment",
    ticket_id=t["id"],
    body=f"Looping in {v.value}: could you take a look at this one?",
    public=False,
  ),
  check=lambda ctx, t, v: _comment_check(ctx, t, str(v.value), False),
  phrase=lambda ctx, t, obj: (
    f'leave an internal note on the "{t["subject"]}" ticket that asks {obj} to take a look, '
    "with their email address in the note"
  ),
  text=lambda ctx, t, v: f'An internal note on "{t["subject"]}" loops in {v.label}.',
)


def _contact_target(ctx: AuthorContext) -> dict:
  """A customer contact to open a ticket for, found the way an agent would."""
  (req,) = _requesters(ctx)
  hits = ctx.call(S, "list_requesters", query=req.id)["items"]
  return next(h for h in hits if h["id"] == req.id)


facets.sink(
  S,
  "title",
  "open_ticket_titled",
  prepare=_contact_target,
  act=lambda ctx, r, v: ctx.call(
    S,
    "create_ticket",
    subject=str(v.value),
    description=f"Opened on behalf of {r['name']}: {v.value}.",
    requester_email=r["id"],
  ),
  check=lambda ctx, r, v: exists(
    S,
    "tickets",
    where("subject", str(v.value)),
    where("requester", r["id"]),
    since(ctx, S, "created_at"),
  ),
  phrase=lambda ctx, r, obj: (
    f"open a support ticket for {r['name']} ({r['id']}) of {r['organization']} with {obj} "
    "as its subject"
  ),
  text=lambda ctx, r, v: f'A ticket "{v.label}" is open for {r["name"]}.',
)


def _amount_forms(x: float) -> list[str]:
  """How a person may write an amount in a reply: 1,250.50, 1250.50, 1250.5 (1,250 if whole)."""
  forms = {f"{x:,.2f}", f"{x:.2f}", str(round(x, 2))}
  if float(x).is_integer():
    forms |= {f"{x:,.0f}", f"{x:.0f}"}
  return sorted(forms)


def _refund_target(ctx: AuthorContext) -> dict:
  (agent,) = _helpers(ctx, 1)
  (req,) = _requesters(ctx)
  subject = f"Refund request ({topic(ctx)})"
  return _find(ctx, _put_ticket(ctx, subject, req, "open", agent.id, tags=("refund", "billing")))


def _refund_check(ctx: AuthorContext, t: dict, v: Value) -> dict:
  forms = [_comment_check(ctx, t, form, True) for form in _amount_forms(float(v.value))]
  return {"op": "any", "checks": forms}


facets.sink(
  S,
  "money",
  "confirm_refund_amount",
  prepare=_refund_target,
  act=lambda ctx, t, v: ctx.call(
    S,
    "add_comment",
    ticket_id=t["id"],
    body=f"Hi, we have approved a refund of {float(v.value):,.2f}. It will reach you within "
    "5-7 business days.",
    public=True,
  ),
  check=_refund_check,
  phrase=lambda ctx, t, obj: (
    f'reply publicly on the "{t["subject"]}" ticket to confirm {obj} as the approved refund'
  ),
  text=lambda ctx, t, v: f'A public reply on "{t["subject"]}" confirms a refund of {v.label}.',
  aggregates=True,
)


# --- revisits ------------------------------------------------------------------------------


def _assignee_first(ctx: AuthorContext) -> tuple[Found, dict]:
  ticket = _scenario(ctx)
  successor = next(
    a for a in _helpers(ctx, 2) if a.id != ticket["assignee"]
  )  # two distinct agents: at least one is not the current assignee
  ticket["successor"] = {"email": successor.id, "name": successor.name}
  found = found_one(
    "person.email",
    f'the email address of the agent assigned to the "{ticket["subject"]}" ticket',
    ticket["assignee"],
  )
  return found, ticket


def _hand_over(ctx: AuthorContext, t: dict, v: Value) -> None:
  ctx.call(S, "add_comment", ticket_id=t["id"], body=f"Handover: {v.value}", public=False)
  ctx.call(S, "update_ticket", ticket_id=t["id"], assignee=t["successor"]["email"])


def _assignee_second(ctx: AuthorContext, t: dict) -> Found:
  now = ctx.call(S, "get_ticket", ticket_id=t["id"])
  return found_one(
    "person.email",
    f'the email address of the agent the "{t["subject"]}" ticket is assigned to now',
    now["assignee"],
    stale=t["assignee"],
  )


for kind in ("text", "url"):
  facets.revisit(
    S,
    kind="person.email",
    kind_in=kind,
    kind_after="person.email",
    name=f"hand_over_ticket_{kind}",
    first=_assignee_first,
    second=_assignee_second,
    change="hand_over",
    act=_hand_over,
    check=lambda ctx, t, v: all_of(
      record_is(S, "tickets", t["id"], "assignee", t["successor"]["email"]),
      _comment_check(ctx, t, str(v.value), False),
    ),
    phrase=lambda ctx, t, obj: (
      f"add {obj} to that ticket as an internal note and hand the ticket over to "
      f"{t['successor']['name']} ({t['successor']['email']})"
    ),
    text=lambda ctx, t, v: (
      f'"{t["subject"]}" is assigned to {t["successor"]["name"]} with a handover note '
      f"holding {v.label}."
    ),
    single=True,
  )


def _deadline_first(ctx: AuthorContext) -> tuple[Found, dict]:
  ticket = _scenario(ctx, priority="normal")
  due = ticket["sla_due_at"]
  found = found_time(f'the SLA resolution deadline of the "{ticket["subject"]}" ticket', due)
  return found, ticket


def _escalate(ctx: AuthorContext, t: dict, v: Value) -> None:
  ctx.call(S, "add_comment", ticket_id=t["id"], body=f"Escalating: {v.value}", public=False)
  ctx.call(S, "update_ticket", ticket_id=t["id"], priority="urgent")


def _deadline_second(ctx: AuthorContext, t: dict) -> Found:
  now = ctx.call(S, "get_ticket", ticket_id=t["id"])
  due = now["sla_due_at"]
  return found_time(
    f'the new SLA resolution deadline of the "{t["subject"]}" ticket', due, stale=t["sla_due_at"]
  )


facets.revisit(
  S,
  kind="datetime",
  kind_in="text",
  kind_after="datetime",
  name="escalate_ticket",
  first=_deadline_first,
  second=_deadline_second,
  change="escalate",
  act=_escalate,
  check=lambda ctx, t, v: all_of(
    record_is(S, "tickets", t["id"], "priority", "urgent"),
    _comment_check(ctx, t, str(v.value), False),
  ),
  phrase=lambda ctx, t, obj: (
    f"add {obj} to that ticket as an internal note and raise its priority to urgent"
  ),
  text=lambda ctx, t, v: f'"{t["subject"]}" is urgent, with an internal note holding {v.label}.',
  single=True,
)
