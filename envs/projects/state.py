"""Projects: the records, state and constants; the service and its tools are in ``tools``."""

from __future__ import annotations

from datetime import date, datetime
from typing import Literal

from compoworld import InvalidArgument, Record, ServiceState, Table

Status = Literal["todo", "in_progress", "in_review", "done"]
Priority = Literal["lowest", "low", "medium", "high", "highest"]
STATUSES: tuple[str, ...] = ("todo", "in_progress", "in_review", "done")
#: The planning-poker scale: the only story point values a task may carry.
POINTS = (1, 2, 3, 5, 8, 13, 21)
#: The board's workflow: the statuses a task may move to from each status.
TRANSITIONS = {
  "todo": ("in_progress",),
  "in_progress": ("in_review",),
  "in_review": ("done", "in_progress"),
  "done": ("in_progress",),
}


class Project(Record):
  id: str  # the project key, e.g. "OPS"
  name: str
  description: str = ""
  lead: str
  members: tuple[str, ...]
  start_date: date
  task_counter: int = 0  # the number of the project's latest task key


class Task(Record):
  id: str  # "<project key>-<n>", e.g. "OPS-12"
  project_id: str
  title: str
  description: str = ""
  reporter: str
  assignee: str | None = None
  status: Status = "todo"
  priority: Priority = "medium"
  due_date: date | None = None
  labels: tuple[str, ...] = ()
  blocked_by: tuple[str, ...] = ()
  story_points: int | None = None
  created_at: datetime
  updated_at: datetime
  resolved_at: datetime | None = None


class Comment(Record):
  task_id: str
  author: str
  body: str
  created_at: datetime


class ProjectsState(ServiceState):
  projects: Table[Project]
  tasks: Table[Task]
  comments: Table[Comment]


#: (key, name, description, labels, task titles): the lists are packed as "a b" / "a; b" strings
#: to keep the module short; TEMPLATES below unpacks them.
_TEMPLATES = (
  (
    "OPS",
    "Operations Excellence",
    "Warehouse, fulfilment and internal tooling improvements.",
    "warehouse tooling shipping quick-win",
    "Automate daily stock reconciliation; Replace label printers on line 2; Document the "
    "returns process; Set up carrier rate comparison; Audit pallet storage capacity; Migrate "
    "picking lists to handheld scanners; Reduce packing station idle time; Review courier SLA"
    " breaches; Build weekly shipments dashboard; Train new staff on safety checklist; "
    "Negotiate packaging supplier contract; Fix duplicate order notifications",
  ),
  (
    "WEB",
    "Website Relaunch",
    "New marketing site: design system, CMS migration and performance.",
    "frontend design seo content bug",
    "Design new homepage hero; Migrate blog posts to the new CMS; Implement pricing page; Set"
    " up redirects for legacy URLs; Improve Lighthouse score above 90; Add cookie consent "
    "banner; Write customer story pages; Fix broken links in footer; Localize site for "
    "Portuguese; Add structured data for products; Load test the contact form; Review "
    "accessibility audit findings",
  ),
  (
    "DATA",
    "Data Platform",
    "Warehouse, pipelines and self-serve reporting for every team.",
    "pipeline warehouse reporting infra bug",
    "Ingest CRM data into the warehouse; Backfill invoices since 2024; Add data quality "
    "checks to nightly load; Build revenue by customer model; Set up access roles for "
    "analysts; Deprecate the legacy reporting database; Alert on late pipeline runs; Document"
    " the metrics layer; Partition the events table by day; Add support tickets to the "
    "warehouse; Tune slow dashboard queries; Rotate warehouse service credentials",
  ),
  (
    "MOB",
    "Mobile App",
    "The customer app for iOS and Android: offline mode, push and releases.",
    "ios android release ux bug",
    "Implement offline order history; Add push notifications for shipments; Fix crash on "
    "login with SSO; Redesign onboarding screens; Upgrade to the latest SDK; Add dark mode; "
    "Submit 4.2 release to the stores; Instrument screen load times; Support biometric login;"
    " Fix badge count after logout; Write release notes for 4.2; Run usability test with five"
    " customers",
  ),
  (
    "SEC",
    "Security Hardening",
    "SOC 2 readiness: access reviews, secrets and incident drills.",
    "compliance secrets access audit",
    "Run quarterly access review; Enforce MFA for all admins; Move secrets to the vault; "
    "Write the incident response runbook; Enable audit logging on the file drive; Scan "
    "dependencies for CVEs; Schedule a tabletop incident drill; Collect SOC 2 evidence for "
    "change management; Review vendor security questionnaires; Rotate API keys older than 90 "
    "days; Harden laptop disk encryption policy; Close stale user accounts",
  ),
  (
    "FIN",
    "Billing Migration",
    "Move invoicing and payments to the new billing provider.",
    "billing migration finance bug",
    "Map plans to the new billing catalogue; Migrate active subscriptions; Reconcile March "
    "invoices after cut-over; Update dunning email templates; Test tax calculation for EU "
    "customers; Export payment history for audit; Switch the checkout to the new provider; "
    "Decommission the old billing cron jobs; Train finance on the new dashboard; Handle "
    "failed card retries; Verify credit notes migrate correctly; Publish the migration FAQ",
  ),
)
TEMPLATES = tuple(
  (key, name, desc, tuple(labels.split()), tuple(t.strip() for t in titles.split(";")))
  for key, name, desc, labels, titles in _TEMPLATES
)
COMMENTS = (
  "I'll pick this up after the standup.",
  "Blocked on access to the staging environment, asked IT.",
  "First draft is ready, could you take a look?",
  "Moved the due date: the vendor needs another week.",
  "Pairing on this tomorrow morning.",
  "Looks good to me, just one nit in the description.",
  "Can we split this into two tasks? It's bigger than it looks.",
  "Done on my side, waiting for review.",
  "Customer asked about this again in today's call.",
  "Added screenshots of the current behaviour.",
)
DESCRIPTIONS = (
  "Acceptance criteria are in the linked doc.",
  "Agreed in the planning meeting; see the notes for context.",
  "Requested by the customer success team.",
  "Follow-up from last sprint's retro.",
  "",
)


def _number(task_id: str) -> int:
  return int(task_id.rsplit("-", 1)[1])


def _task_order(task: Task) -> tuple[str, int]:
  return (task.project_id, _number(task.id))


def _labels(values) -> tuple[str, ...]:
  """Lower-cased, de-duplicated labels; a label is one word (Jira labels cannot hold spaces)."""
  out = tuple(dict.fromkeys(v.strip().lower() for v in values))
  bad = [v for v in out if not v or any(c.isspace() for c in v)]
  if bad:
    raise InvalidArgument(f"labels: a label is a single word without spaces, got {bad!r}")
  return out


def _points(value: int | None) -> int | None:
  if value is not None and value not in POINTS:
    raise InvalidArgument(f"story_points must be one of {', '.join(map(str, POINTS))}, got {value}")
  return value
