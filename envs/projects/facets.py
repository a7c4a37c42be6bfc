"""Projects facets: board tasks as sources of people, due dates and story points; new tasks,
due dates, members and comments as sinks; the reassign-a-task revisit."""

from __future__ import annotations

from datetime import date, datetime, timedelta

from compoworld.tasks.authoring import AuthorContext, AuthoringError
from compoworld.tasks.facets import Found, Value, facets
from compoworld.tasks.rubric import exists, record_is, where
from envs._facets_common import (
  amount_is,
  employee,
  found_day,
  found_one,
  found_people,
  iso,
  mentions,
  since,
  topic,
  user_email,
)

S = "projects"

#: Pieces of work a scenario's tasks are about: "Juniper data migration: update the runbook".
STEPS = (
  "draft the plan", "update the runbook", "review the budget", "brief the stakeholders",
  "test the rollout", "write the summary", "collect the sign-offs",
)  # fmt: skip


def _project(ctx: AuthorContext, mine: bool = True, team: int = 0):
  """A project (one the user works on, unless ``mine`` is false) with at least ``team``
  members besides the user, and none of this task's tool-created tasks: a scenario task put
  there later would take the key the tool gave, so replaying s0 would number tasks
  differently."""
  me, written = user_email(ctx), ctx.scratch.get("projects_created_in", set())
  options = [
    p
    for p in sorted(ctx.state(S).projects, key=lambda p: p.id)
    if (me in p.members or not mine) and len(set(p.members) - {me}) >= team
    and p.id not in written
  ]  # fmt: skip
  return ctx.choice(options)


def _create_task(ctx: AuthorContext, project_id: str, **arguments) -> None:
  ctx.scratch.setdefault("projects_created_in", set()).add(project_id)
  ctx.call(S, "create_task", project_id=project_id, **arguments)


def _project_key(name: str) -> str:
  """The key of a scenario project on ``name``: its first word's first letters ("JUNI")."""
  return name.split()[0][:4].upper()


def _key(ctx: AuthorContext, project) -> str:
  """The agent's way to a project's key, which the instruction does not give: search the
  projects by name."""
  hits = ctx.call(S, "list_projects", query=project.name)["items"]
  return next(p["id"] for p in hits if p["id"] == project.id)


def _put_project(ctx: AuthorContext, name: str, members: list[str], start: date) -> dict:
  """Adds a scenario project on ``name``, led by the user, to s0."""
  return ctx.put(
    S,
    "projects",
    {
      "id": _project_key(name),
      "name": name.title(),
      "description": f"Everything for {name}.",
      "lead": user_email(ctx),
      "members": members,
      "start_date": start.isoformat(),
    },
  )


def _put_task(ctx: AuthorContext, project, title: str, **fields) -> dict:
  """Adds one of the scenario's tasks to ``project`` with the project's next key."""
  state = ctx.state(S)
  number = state.projects.get(project.id).task_counter + 1
  ctx.update(S, "projects", project.id, task_counter=number)
  created = state.now - timedelta(days=ctx.rng.randint(2, 12), hours=ctx.rng.randint(0, 8))
  record = {
    "id": f"{project.id}-{number}",
    "project_id": project.id,
    "title": title,
    "description": "Part of the work we agreed on in planning.",
    "reporter": user_email(ctx),
    "created_at": iso(created),
    "updated_at": iso(created),
    **fields,
  }
  if record.get("status") == "done":
    record.setdefault("resolved_at", iso(created + timedelta(days=1)))
    record["updated_at"] = record["resolved_at"]
  return ctx.put(S, "tasks", record)


def _find_task(ctx: AuthorContext, title: str) -> dict:
  """The agent's way to a task: search by its title, then open it."""
  hits = ctx.call(S, "search_tasks", query=title)["items"]
  hit = next(t for t in hits if t["title"] == title)
  return ctx.call(S, "get_task", task_id=hit["id"])


def _scenario_task(ctx: AuthorContext, **fields) -> tuple[dict, str]:
  """A distinctive task in one of the user's projects, as the agent finds it, and the
  project's name."""
  project = _project(ctx, team=1)
  title = f"{topic(ctx)}: {ctx.choice(STEPS)}"
  _put_task(ctx, project, title, **fields)
  return _find_task(ctx, title), project.name


def _assignee(ctx: AuthorContext, project) -> str:
  return ctx.choice(sorted(set(project.members) - {user_email(ctx)}))


# --- sources -------------------------------------------------------------------------------


@facets.source(S, "person.email")
def task_assignee(ctx: AuthorContext) -> Found:
  project = _project(ctx, team=1)
  title = f"{topic(ctx)}: {ctx.choice(STEPS)}"
  _put_task(ctx, project, title, assignee=_assignee(ctx, project), status="in_progress")
  task = _find_task(ctx, title)
  return found_one(
    "person.email",
    f'the person assigned to the "{title}" task in the {project.name} project',
    task["assignee"],
  )


@facets.source(S, "person.email")
def project_lead(ctx: AuthorContext) -> Found:
  project = _project(ctx, mine=False)
  hit = next(
    p for p in ctx.call(S, "list_projects", query=project.name)["items"] if p["id"] == project.id
  )
  lead = ctx.call(S, "get_project", project_id=hit["id"])["lead"]
  return found_one("person.email", f"the lead of the {project.name} project", lead)


@facets.source(S, "date")
def task_due_date(ctx: AuthorContext) -> Found:
  due = (ctx.state(S).now + timedelta(days=ctx.rng.randint(3, 20))).date()
  project = _project(ctx, team=1)
  title = f"{topic(ctx)}: {ctx.choice(STEPS)}"
  _put_task(
    ctx, project, title, assignee=_assignee(ctx, project), status="todo", due_date=due.isoformat()
  )
  task = _find_task(ctx, title)
  return found_day(
    f'the due date of the "{title}" task in the {project.name} project', task["due_date"]
  )


def _labelled_tasks(ctx: AuthorContext) -> tuple[str, object, list[dict]]:
  """A piece of work tracked with its own label: several tasks, each with a different
  assignee, some already done. Returns the label, the project and the tasks as listed."""
  project = _project(ctx, mine=False, team=3)
  name = topic(ctx)
  label = name.split()[0].lower()
  people = ctx.rng.sample(sorted(set(project.members) - {user_email(ctx)}), 3)
  extra = sorted(set(project.members) - {user_email(ctx)} - set(people))
  people += ctx.rng.sample(extra, min(len(extra), ctx.rng.randint(0, 2)))
  done = ctx.rng.sample(range(len(people)), 1 if len(people) < 5 else 2)
  steps = ctx.rng.sample(STEPS, len(people))
  for i, (who, step) in enumerate(zip(people, steps, strict=True)):
    status = "done" if i in done else ctx.choice(("todo", "in_progress", "in_review"))
    _put_task(
      ctx,
      project,
      f"{name}: {step}",
      assignee=who,
      status=status,
      labels=[label],
      story_points=ctx.choice((1, 2, 3, 5, 8)),
      priority=ctx.choice(("medium", "high")),
    )
  page = ctx.call(S, "search_tasks", project_id=_key(ctx, project), label=label, limit=100)
  return label, project, page["items"]


@facets.source(S, "person.email")
def label_assignees(ctx: AuthorContext) -> Found:
  label, project, tasks = _labelled_tasks(ctx)
  going = list(dict.fromkeys(t["assignee"] for t in tasks if t["status"] != "done"))
  finished = [t["assignee"] for t in tasks if t["status"] == "done" and t["assignee"] not in going]
  noun = f'the people assigned to tasks labelled "{label}" in the {project.name} project'
  return found_people(noun, going, finished, f'whose "{label}" task is already done')


def _points(n: int) -> str:
  return f"{n} point" if n == 1 else f"{n} points"


@facets.source(S, "number")
def label_story_points(ctx: AuthorContext) -> Found:
  label, project, tasks = _labelled_tasks(ctx)
  open_tasks = [t for t in tasks if t["status"] != "done"]
  return Found(
    "number",
    f'the story points of the unfinished tasks labelled "{label}" in the {project.name} project',
    [Value(t["story_points"], _points(t["story_points"]), t["story_points"]) for t in open_tasks],
  )


# --- lookups -------------------------------------------------------------------------------


def _soonest_task(ctx: AuthorContext, email) -> dict | None:
  """The person's unfinished task that is due soonest: a scenario task due before all their
  others, in a project they belong to (a new one if they belong to none)."""
  if not isinstance(email, str) or employee(ctx, email.lower()) is None:
    return None
  state, me, email = ctx.state(S), user_email(ctx), email.lower()
  theirs = [t.due_date for t in state.tasks if t.assignee == email and t.status != "done"]
  soonest = min([d for d in theirs if d is not None], default=None)
  due = state.now.date() + timedelta(days=ctx.rng.randint(1, 4))
  if soonest is not None and soonest <= due:
    due = soonest - timedelta(days=1)
  written = ctx.scratch.get("projects_created_in", set())
  homes = [
    p
    for p in sorted(state.projects, key=lambda p: p.id)
    if email in p.members and p.id not in written and p.start_date <= due
  ]
  name = topic(ctx)
  if homes:
    project = ctx.choice(homes)
  else:
    if _project_key(name) in state.projects:
      return None
    start = min(due, state.now.date()) - timedelta(days=7)
    members = [me] if email == me else [me, email]
    project = state.projects.get(_put_project(ctx, name, members, start)["id"])
  title = f"{name}: {ctx.choice(STEPS)}"
  _put_task(ctx, project, title, assignee=email, status="todo", due_date=due.isoformat())
  page = ctx.call(S, "search_tasks", assignee=email, limit=100)["items"]
  dated = [t for t in page if t["status"] != "done" and t["due_date"]]
  return min(dated, key=lambda t: (t["due_date"], t["project_id"], t["id"]))


@facets.lookup(S, "person.email", "title")
def most_urgent_task(ctx: AuthorContext, found: Found) -> Found | None:
  task = _soonest_task(ctx, found.values[0].value)
  if task is None:
    return None
  return found_one(
    "title",
    "the title of their unfinished task that is due soonest",
    task["title"],
    answer=f'Their most urgent task is "{task["title"]}", due {task["due_date"]}.',
  )


@facets.lookup(S, "person.email", "date")
def next_due_date(ctx: AuthorContext, found: Found) -> Found | None:
  task = _soonest_task(ctx, found.values[0].value)
  if task is None:
    return None
  return found_day(
    "the due date of their unfinished task that is due soonest",
    task["due_date"],
    answer=f'Their next deadline is {task["due_date"]} ("{task["title"]}").',
  )


# --- sinks ---------------------------------------------------------------------------------


def _join(ctx: AuthorContext, project_id: str, email: str) -> None:
  """Makes ``email`` a member of the project if it is not one (the tool refuses strangers)."""
  if not isinstance(email, str) or employee(ctx, email.lower()) is None:
    raise AuthoringError("not_an_employee", str(email))
  if email.lower() not in ctx.state(S).projects.get(project_id).members:
    ctx.call(S, "add_project_member", project_id=project_id, email=email)


def _task_for_target(ctx: AuthorContext) -> dict:
  project = _project(ctx)
  return {
    "project_id": _key(ctx, project),
    "project": project.name,
    "title": f"{topic(ctx)} handover",
  }


def _create_task_for(ctx: AuthorContext, t: dict, v: Value) -> None:
  _join(ctx, t["project_id"], v.value)
  _create_task(ctx, t["project_id"], title=t["title"], assignee=v.value)


facets.sink(
  S,
  "person.email",
  "create_task_for",
  prepare=_task_for_target,
  act=_create_task_for,
  check=lambda ctx, t, v: exists(
    S,
    "tasks",
    where("project_id", t["project_id"]),
    where("title", t["title"]),
    where("assignee", str(v.value).lower()),
  ),
  phrase=lambda ctx, t, obj: (
    f'create a "{t["title"]}" task in the {t["project"]} project assigned to {obj} (add '
    "them to the project first if they are not members)"
  ),
  text=lambda ctx, t, v: f'{v.label} is assigned a new "{t["title"]}" task.',
)


def _new_project(ctx: AuthorContext) -> dict:
  """A freshly set-up project with only the user on it, so whoever comes is a new member."""
  name = topic(ctx)
  key = _project_key(name)
  if key in ctx.state(S).projects:
    raise AuthoringError("project_key_taken", key)
  _put_project(ctx, name, [user_email(ctx)], (ctx.state(S).now - timedelta(days=2)).date())
  hit = next(p for p in ctx.call(S, "list_projects", query=name)["items"] if p["id"] == key)
  return {"id": hit["id"], "name": hit["name"]}


def _add_member(ctx: AuthorContext, p: dict, v: Value) -> None:
  if employee(ctx, str(v.value).lower()) is None:
    raise AuthoringError("not_an_employee", str(v.value))
  if str(v.value).lower() == user_email(ctx):
    raise AuthoringError("already_a_member", str(v.value))
  ctx.call(S, "add_project_member", project_id=p["id"], email=v.value)


facets.sink(
  S,
  "person.email",
  "add_to_project",
  prepare=_new_project,
  act=_add_member,
  check=lambda ctx, p, v: record_is(
    S, "projects", p["id"], "members", str(v.value).lower(), "contains"
  ),
  phrase=lambda ctx, p, obj: f'add {obj} to the members of the "{p["name"]}" project',
  text=lambda ctx, p, v: f'{v.label} is a member of the "{p["name"]}" project.',
)


def _undated_task(ctx: AuthorContext) -> dict:
  task, project = _scenario_task(ctx, status="todo", priority="high")
  return {**task, "project": project}


def _day(value: str) -> date:
  return datetime.fromisoformat(str(value)).date()


def _set_due(ctx: AuthorContext, t: dict, v: Value) -> None:
  due = _day(v.value)
  if due < ctx.state(S).now.date():
    raise AuthoringError("due_date_in_past", str(v.value))
  ctx.call(S, "update_task", task_id=t["id"], due_date=due.isoformat())


for kind, words in (("date", "{obj}"), ("datetime", "the day of {obj}")):
  facets.sink(
    S,
    kind,
    f"set_due_date_from_{kind}",
    prepare=_undated_task,
    act=_set_due,
    check=lambda ctx, t, v: record_is(S, "tasks", t["id"], "due_date", _day(v.value).isoformat()),
    phrase=lambda ctx, t, obj, words=words: (
      f'set the due date of the "{t["title"]}" task in the {t["project"]} project to '
      + words.format(obj=obj)
    ),
    text=lambda ctx, t, v: f'"{t["title"]}" is due on {_day(v.value).isoformat()}.',
  )


def _board(ctx: AuthorContext) -> dict:
  project = _project(ctx)
  return {"project_id": _key(ctx, project), "project": project.name}


facets.sink(
  S,
  "title",
  "add_task_titled",
  prepare=_board,
  act=lambda ctx, t, v: _create_task(ctx, t["project_id"], title=v.value),
  check=lambda ctx, t, v: exists(
    S,
    "tasks",
    where("project_id", t["project_id"]),
    where("title", str(v.value).strip()),
    since(ctx, S, "created_at"),
  ),
  phrase=lambda ctx, t, obj: f"add {obj} as a new task on the {t['project']} board",
  text=lambda ctx, t, v: f'The {t["project"]} board has a new task "{v.label}".',
)


def _comment_target(ctx: AuthorContext) -> dict:
  task, project = _scenario_task(ctx, status="in_progress")
  return {**task, "project": project}


def _commented(ctx: AuthorContext, t: dict, condition: dict) -> dict:
  """A rubric condition: the agent commented on ``t``'s task, and the comment meets
  ``condition``."""
  return exists(S, "comments", where("task_id", t["id"]), condition, since(ctx, S, "created_at"))


def _comment_phrase(ctx: AuthorContext, t: dict, obj: str) -> str:
  return f'post {obj} as a comment on the "{t["title"]}" task in the {t["project"]} project'


for kind in ("text", "url"):
  facets.sink(
    S,
    kind,
    f"comment_{kind}_on_task",
    prepare=_comment_target,
    act=lambda ctx, t, v: ctx.call(S, "add_comment", task_id=t["id"], body=f"FYI: {v.value}"),
    check=lambda ctx, t, v: _commented(ctx, t, mentions("body", v)),
    phrase=_comment_phrase,
    text=lambda ctx, t, v: f'"{t["title"]}" has a new comment containing {v.label}.',
  )


def _number_check(ctx: AuthorContext, t: dict, v: Value) -> dict:
  # A number written in a comment may be formatted ("1,250.50"): compare it numerically.
  number = v.number if v.number is not None else v.value
  amount = amount_is("body", number, 0.01)
  return _commented(ctx, t, amount)


for kind in ("number", "money", "quantity"):
  for aggregates, name, lead in ((True, "comment_total", "Total"), (False, "comment", "FYI")):
    facets.sink(
      S,
      kind,
      f"{name}_{kind}",
      prepare=_comment_target,
      act=lambda ctx, t, v, lead=lead: ctx.call(
        S, "add_comment", task_id=t["id"], body=f"{lead}: {v.label}"
      ),
      check=_number_check,
      phrase=_comment_phrase,
      text=lambda ctx, t, v: f'"{t["title"]}" has a comment stating {v.label}.',
      aggregates=aggregates,
    )


# --- the reassignment revisit: read who has a task, hand it to someone else, read again -----


def _assignee_first(ctx: AuthorContext) -> tuple[Found, dict]:
  project = _project(ctx, team=1)
  title = f"{topic(ctx)}: {ctx.choice(STEPS)}"
  _put_task(ctx, project, title, assignee=_assignee(ctx, project), status="in_progress")
  task = _find_task(ctx, title)
  found = found_one(
    "person.email",
    f'who is working on the "{title}" task in the {project.name} project',
    task["assignee"],
  )
  return found, {**task, "project": project.name}


def _reassign(ctx: AuthorContext, t: dict, v: Value) -> None:
  email = str(v.value).lower()
  if email == t["assignee"]:
    raise AuthoringError("same_assignee", email)
  _join(ctx, t["project_id"], email)
  ctx.call(S, "assign_task", task_id=t["id"], assignee=v.value)


def _assignee_second(ctx: AuthorContext, t: dict) -> Found:
  now = ctx.call(S, "get_task", task_id=t["id"])
  return found_one(
    "person.email",
    f'the new assignee of the "{t["title"]}" task',
    now["assignee"],
    stale=t["assignee"],
  )


facets.revisit(
  S,
  kind="person.email",
  kind_in="person.email",
  kind_after="person.email",
  name="reassign_task",
  first=_assignee_first,
  second=_assignee_second,
  act=_reassign,
  check=lambda ctx, t, v: record_is(S, "tasks", t["id"], "assignee", str(v.value).lower()),
  phrase=lambda ctx, t, obj: (
    f"reassign that task to {obj} (add them to the {t['project']} project first if "
    "they are not members)"
  ),
  text=lambda ctx, t, v: f'"{t["title"]}" is assigned to {v.label}.',
  single=True,  # one assignee per task
)
