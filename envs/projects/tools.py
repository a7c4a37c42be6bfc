"""Projects: a Jira/Asana-like tracker of projects, board tasks, dependencies and comments.

A project has a short key (``OPS``), a name, a lead, a member list of employee emails and a
start date. Its tasks are keyed ``<KEY>-<n>`` (``OPS-12``) in creation order and move across the
board ``todo → in_progress → in_review → done``; work in review can be sent back to
in_progress, and a done task can be reopened (back to in_progress). A task has a reporter, an
optional assignee, a priority (lowest..highest), labels, story points on the planning-poker
scale, an optional due date, and may be blocked by other tasks (of any project). Comments are
the task's discussion. A task is overdue when its due date has passed and it is not done.

Rules a tracker user expects: only members of the project can be assigned its tasks; a task
moves only along the workflow above (anything else, including "moving" to its own status, is a
conflict); a task cannot be done while a task blocking it is unfinished; a dependency is added
once, never forms a cycle (a task blocking itself included) and cannot be added to a done task;
a due date is not before the project's start date; labels are single lower-case words; story
points are 1, 2, 3, 5, 8, 13 or 21; members are employees of the home company, a project's lead
stays a member, and a member with unfinished tasks cannot be removed.
"""

from __future__ import annotations

from datetime import date

from compoworld import Conflict, InvalidArgument, NotFound, Service, registry, tool
from compoworld.runtime.fields import Email, Limit, Offset, Text
from compoworld.runtime.query import page_of, select
from compoworld.runtime.state import supplied
from envs._world import WorldUser, employee_email
from envs.projects.data import ProjectsData
from envs.projects.state import (
  STATUSES,
  TRANSITIONS,
  Comment,
  Priority,
  Project,
  ProjectsState,
  Status,
  Task,
  _labels,
  _number,
  _points,
  _task_order,
)


@registry.register
class ProjectsService(ProjectsData, WorldUser, Service):
  name = "projects"
  domain = "operations"
  description = "Project boards: tasks, workflow, assignees, dependencies, comments, burndown."
  State = ProjectsState

  # --- helpers -----------------------------------------------------------------------------

  def _task_view(self, task: Task) -> dict:
    today = self.state.now.date()
    return {
      **task.model_dump(),
      "overdue": self._overdue(task, today),
      "open_blockers": [b for b in task.blocked_by if self.state.tasks.get(b).status != "done"],
    }

  @staticmethod
  def _overdue(task: Task, today: date) -> bool:
    return task.due_date is not None and task.due_date < today and task.status != "done"

  def _check_due(self, project: Project, due_date: date | None) -> None:
    if due_date is not None and due_date < project.start_date:
      raise InvalidArgument(
        f"due_date {due_date.isoformat()} is before project {project.id}'s start date "
        f"{project.start_date.isoformat()}"
      )

  def _check_member(self, project: Project, email: str) -> None:
    if email not in project.members:
      raise Conflict(
        f"'{email}' is not a member of project {project.id}; assign one of its members "
        f"({', '.join(project.members)}) or add them with add_project_member first"
      )

  def _blocks(self, start: str) -> set[str]:
    """Every task that ``start`` waits on, directly or through other tasks."""
    seen, stack = set(), [start]
    while stack:
      for b in self.state.tasks.get(stack.pop()).blocked_by:
        if b not in seen:
          seen.add(b)
          stack.append(b)
    return seen

  # --- reads -------------------------------------------------------------------------------

  @tool(
    mutates=False,
    page="project",
    consumes=("person.email",),
    produces=("project.id", "person.email", "date"),
  )
  def list_projects(self, query: str | None = None, member: Email | None = None) -> list:
    """List projects by key, optionally filtered.

    Args:
      query: words that must all appear in the key, name or description.
      member: only projects this email address is a member of.
    """
    return select(
      self.state.projects,
      text=query,
      fields=("id", "name", "description"),
      where=lambda p: member is None or member.lower() in p.members,
      key=lambda p: p.id,
    )

  @tool(mutates=False, consumes=("project.id",), produces=("person.email", "date", "number"))
  def get_project(self, project_id: str) -> dict:
    """Get one project with its lead, members, start date and task counts per status.

    Args:
      project_id: the project key, e.g. "OPS".
    """
    project = self.state.projects.get(project_id)
    tasks = [t for t in self.state.tasks if t.project_id == project_id]
    counts = {s: sum(1 for t in tasks if t.status == s) for s in STATUSES}
    return {**project.model_dump(), "task_counts": counts}

  @tool(
    mutates=False,
    consumes=("project.id", "person.email", "status", "priority"),
    produces=("task.id", "title", "person.email", "date", "status"),
  )
  def search_tasks(
    self,
    project_id: str | None = None,
    assignee: Email | None = None,
    unassigned: bool = False,
    status: Status | None = None,
    priority: Priority | None = None,
    label: str | None = None,
    overdue: bool = False,
    query: str | None = None,
    limit: Limit = 20,
    offset: Offset = 0,
  ) -> dict:
    """Search tasks, ordered by project key then task number.

    Args:
      project_id: only tasks of this project key.
      assignee: only tasks assigned to this email address.
      unassigned: only tasks nobody is assigned to (not together with assignee).
      status: only tasks in this status: todo, in_progress, in_review or done.
      priority: only tasks of this priority: lowest, low, medium, high or highest.
      label: only tasks carrying this label.
      overdue: only tasks past their due date that are not done.
      query: words that must all appear in the key, title or description.
      limit: page size (1-100).
      offset: index of the first task to return.
    """
    self.state.projects.check(project_id)
    if assignee is not None and unassigned:
      raise InvalidArgument("give either assignee or unassigned=true, not both")
    today, label = self.state.now.date(), label.strip().lower() if label else None
    return page_of(
      self.state.tasks,
      eq={
        "project_id": project_id,
        "assignee": assignee and assignee.lower(),
        "status": status,
        "priority": priority,
      },
      text=query,
      fields=("id", "title", "description"),
      where=lambda t: (
        (not unassigned or t.assignee is None)
        and (label is None or label in t.labels)
        and (not overdue or self._overdue(t, today))
      ),
      key=_task_order,
      limit=limit,
      offset=offset,
      view=self._task_view,
    )

  @tool(
    mutates=False,
    consumes=("task.id",),
    produces=("title", "person.email", "date", "status", "priority", "text", "number"),
  )
  def get_task(self, task_id: str) -> dict:
    """Get one task with its comments (oldest first), the tasks it blocks and its unfinished
    blockers.

    Args:
      task_id: the task key, e.g. "OPS-12".
    """
    task = self.state.tasks.get(task_id)
    comments = sorted(
      (c for c in self.state.comments if c.task_id == task_id), key=lambda c: (c.created_at, c.id)
    )
    blocks = sorted((t.id for t in self.state.tasks if task_id in t.blocked_by), key=_number)
    return {**self._task_view(task), "blocks": blocks, "comments": comments}

  @tool(mutates=False, consumes=("project.id",), produces=("number", "percentage"))
  def project_burndown(self, project_id: str) -> dict:
    """Summarise a project's progress: tasks and story points per status, points done as a
    percentage, and the numbers of overdue and unassigned open tasks.

    Args:
      project_id: the project key, e.g. "OPS".
    """
    self.state.projects.get(project_id)
    today = self.state.now.date()
    tasks = [t for t in self.state.tasks if t.project_id == project_id]
    by_status = {
      s: {
        "tasks": sum(1 for t in tasks if t.status == s),
        "points": sum(t.story_points or 0 for t in tasks if t.status == s),
      }
      for s in STATUSES
    }
    total = sum(v["points"] for v in by_status.values())
    done = by_status["done"]["points"]
    return {
      "project_id": project_id,
      "by_status": by_status,
      "total_tasks": len(tasks),
      "total_points": total,
      "points_remaining": total - done,
      "percent_done": round(100 * done / total, 1) if total else 0.0,
      "overdue": sum(1 for t in tasks if self._overdue(t, today)),
      "unassigned_open": sum(1 for t in tasks if t.assignee is None and t.status != "done"),
    }

  # --- writes ------------------------------------------------------------------------------

  @tool(
    mutates=True,
    consumes=("project.id", "title", "text", "person.email", "priority", "date"),
    produces=("task.id",),
  )
  def create_task(
    self,
    project_id: str,
    title: Text,
    description: str = "",
    assignee: Email | None = None,
    priority: Priority = "medium",
    due_date: date | None = None,
    labels: list[str] = (),
    story_points: int | None = None,
  ) -> Task:
    """Create a task in a project's todo column; the user is the reporter and the task gets
    the project's next key (e.g. OPS-13).

    Args:
      project_id: the project key, e.g. "OPS".
      title: the task title.
      description: free text.
      assignee: email address of a project member to assign.
      priority: lowest, low, medium, high or highest.
      due_date: due day (YYYY-MM-DD), not before the project's start date.
      labels: single-word labels.
      story_points: estimate: 1, 2, 3, 5, 8, 13 or 21.
    """
    project = self.state.projects.get(project_id)
    self._check_due(project, due_date)
    if assignee is not None:
      assignee = assignee.lower()
      self._check_member(project, assignee)
    number = project.task_counter + 1
    self.state.projects.update(project_id, task_counter=number)
    return self.state.tasks.insert(
      Task(
        id=f"{project_id}-{number}",
        project_id=project_id,
        title=title,
        description=description,
        reporter=self.user,
        assignee=assignee,
        priority=priority,
        due_date=due_date,
        labels=_labels(labels),
        story_points=_points(story_points),
        created_at=self.state.now,
        updated_at=self.state.now,
      )
    )

  @tool(mutates=True, consumes=("task.id", "title", "text", "priority", "date"))
  def update_task(
    self,
    task_id: str,
    title: Text | None = None,
    description: str | None = None,
    priority: Priority | None = None,
    due_date: date | None = None,
    labels: list[str] | None = None,
    story_points: int | None = None,
  ) -> Task:
    """Change a task's title, description, priority, due date, labels or story points; only
    supplied fields change (labels replace the old ones).

    Args:
      task_id: the task key, e.g. "OPS-12".
      title: new title.
      description: new description.
      priority: lowest, low, medium, high or highest.
      due_date: new due day (YYYY-MM-DD), not before the project's start date.
      labels: the new labels (single words).
      story_points: new estimate: 1, 2, 3, 5, 8, 13 or 21.
    """
    task = self.state.tasks.get(task_id)
    changes = supplied(
      "update_task",
      dict(
        title=title,
        description=description,
        priority=priority,
        due_date=due_date,
        labels=labels,
        story_points=story_points,
      ),
    )
    self._check_due(self.state.projects.get(task.project_id), due_date)
    if labels is not None:
      changes["labels"] = _labels(labels)
    _points(story_points)
    return self.state.tasks.update(task_id, updated_at=self.state.now, **changes)

  @tool(mutates=True, consumes=("task.id", "status"))
  def transition_task(self, task_id: str, status: Status) -> dict:
    """Move a task along the workflow: todo → in_progress → in_review → done; a task in
    review can go back to in_progress and a done task can be reopened to in_progress. A task
    cannot be done while a task blocking it is unfinished.

    Args:
      task_id: the task key, e.g. "OPS-12".
      status: the new status: todo, in_progress, in_review or done.
    """
    task = self.state.tasks.get(task_id)
    allowed = TRANSITIONS[task.status]
    if status not in allowed:
      raise Conflict(
        f"task {task_id} cannot move from {task.status} to {status}; "
        f"from {task.status} it can move to: {', '.join(allowed)}"
      )
    if status == "done":
      waiting = [b for b in task.blocked_by if self.state.tasks.get(b).status != "done"]
      if waiting:
        raise Conflict(
          f"task {task_id} is blocked by unfinished task(s) {', '.join(waiting)}; "
          "finish them (or remove the dependency) before moving it to done"
        )
    task = self.state.tasks.update(
      task_id,
      status=status,
      updated_at=self.state.now,
      resolved_at=self.state.now if status == "done" else None,
    )
    return self._task_view(task)

  @tool(mutates=True, consumes=("task.id", "person.email"))
  def assign_task(self, task_id: str, assignee: Email) -> Task:
    """Assign a task to a member of its project.

    Args:
      task_id: the task key, e.g. "OPS-12".
      assignee: email address of a project member.
    """
    task, assignee = self.state.tasks.get(task_id), assignee.lower()
    self._check_member(self.state.projects.get(task.project_id), assignee)
    if task.assignee == assignee:
      raise Conflict(f"task {task_id} is already assigned to '{assignee}'")
    return self.state.tasks.update(task_id, assignee=assignee, updated_at=self.state.now)

  @tool(mutates=True, consumes=("task.id",))
  def add_dependency(self, task_id: str, blocked_by_id: str) -> dict:
    """Record that a task is blocked by another task (of any project).

    Args:
      task_id: the key of the task that has to wait.
      blocked_by_id: the key of the task it waits on.
    """
    task = self.state.tasks.get(task_id)
    blocker = self.state.tasks.get(blocked_by_id)
    if blocked_by_id in task.blocked_by:
      raise Conflict(f"task {task_id} is already blocked by {blocked_by_id}")
    if blocked_by_id == task_id or task_id in self._blocks(blocked_by_id):
      raise Conflict(
        f"making {task_id} wait on {blocked_by_id} would create a dependency cycle: "
        f"{blocked_by_id} already waits on {task_id}"
      )
    if task.status == "done" and blocker.status != "done":
      raise Conflict(
        f"task {task_id} is done and cannot wait on unfinished {blocked_by_id}; "
        "reopen it first (transition to in_progress)"
      )
    task = self.state.tasks.update(
      task_id, blocked_by=(*task.blocked_by, blocked_by_id), updated_at=self.state.now
    )
    return self._task_view(task)

  @tool(mutates=True, consumes=("task.id",))
  def remove_dependency(self, task_id: str, blocked_by_id: str) -> dict:
    """Remove a "blocked by" link between two tasks.

    Args:
      task_id: the key of the blocked task.
      blocked_by_id: the key of the task it no longer waits on.
    """
    task = self.state.tasks.get(task_id)
    if blocked_by_id not in task.blocked_by:
      raise NotFound(f"task {task_id} is not blocked by '{blocked_by_id}'")
    kept = tuple(b for b in task.blocked_by if b != blocked_by_id)
    return self._task_view(
      self.state.tasks.update(task_id, blocked_by=kept, updated_at=self.state.now)
    )

  @tool(mutates=True, consumes=("task.id", "text"), produces=("comment.id",))
  def add_comment(self, task_id: str, body: Text) -> Comment:
    """Comment on a task as the user.

    Args:
      task_id: the task key, e.g. "OPS-12".
      body: the comment text.
    """
    self.state.tasks.get(task_id)
    self.state.tasks.update(task_id, updated_at=self.state.now)
    return self.state.comments.insert(
      Comment(
        id=self.state.new_id("cmt"),
        task_id=task_id,
        author=self.user,
        body=body,
        created_at=self.state.now,
      )
    )

  @tool(mutates=True, consumes=("project.id", "person.email"))
  def add_project_member(self, project_id: str, email: Email) -> Project:
    """Add an employee of the company to a project's members.

    Args:
      project_id: the project key, e.g. "OPS".
      email: the employee's email address.
    """
    project = self.state.projects.get(project_id)
    email = employee_email(self.state.seed, email)
    if email in project.members:
      raise Conflict(f"'{email}' is already a member of project {project_id}")
    return self.state.projects.update(project_id, members=(*project.members, email))

  @tool(mutates=True, consumes=("project.id", "person.email"))
  def remove_project_member(self, project_id: str, email: Email) -> Project:
    """Remove a member from a project; the lead and members with unfinished tasks stay.

    Args:
      project_id: the project key, e.g. "OPS".
      email: the member's email address.
    """
    project, email = self.state.projects.get(project_id), email.lower()
    if email not in project.members:
      raise NotFound(f"'{email}' is not a member of project {project_id}")
    if email == project.lead:
      raise Conflict(f"'{email}' leads project {project_id}; the lead cannot be removed")
    mine = sorted(
      (
        t.id
        for t in self.state.tasks
        if t.project_id == project_id and t.assignee == email and t.status != "done"
      ),
      key=_number,
    )
    if mine:
      raise Conflict(
        f"'{email}' still has unfinished tasks in {project_id} ({', '.join(mine)}); "
        "reassign them first"
      )
    kept = tuple(m for m in project.members if m != email)
    return self.state.projects.update(project_id, members=kept)
