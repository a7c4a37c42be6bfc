"""Projects: the seeded data generator, a base of the service class in ``tools``."""

from __future__ import annotations

from datetime import datetime, timedelta

from envs._world import seeded
from envs.projects.state import (
  COMMENTS,
  DESCRIPTIONS,
  POINTS,
  STATUSES,
  TEMPLATES,
  Comment,
  Project,
  ProjectsState,
  Task,
  _task_order,
)


class ProjectsData:
  """Draws the initial state from a seed: ``generate`` and the helpers only it uses."""

  @classmethod
  def generate(cls, seed: int, size: int | None) -> ProjectsState:
    rng, w, state = seeded(cls, seed)
    now, user = state.now, w.people[0].email
    n_tasks = size if size is not None else 48
    n_projects = max(1, min(len(TEMPLATES), round(n_tasks / 12)))
    templates = rng.sample(TEMPLATES, n_projects)
    others = list(w.people[1:])
    for i, (key, pname, desc, _, _) in enumerate(templates):
      team = rng.sample(others, rng.randint(3, 6))
      # The user works on every project but the last, so "my tasks" has data in each seed.
      members = tuple(p.email for p in team) + ((user,) if i < n_projects - 1 else ())
      state.projects.insert(
        Project(
          id=key,
          name=pname,
          description=desc,
          lead=members[0],
          members=members,
          start_date=(now - timedelta(days=rng.randint(30, 120))).date(),
        )
      )
    # Keys follow creation order: each project's creation moments are drawn up front, sorted.
    moments = {}
    for i, (key, *_) in enumerate(templates):
      count = len(range(i, n_tasks, n_projects))
      start = datetime.combine(state.projects.get(key).start_date, datetime.min.time())
      start += timedelta(hours=9)
      span = now - timedelta(hours=2) - start
      moments[key] = sorted(
        (start + span * rng.random()).replace(second=0, microsecond=0) for _ in range(count)
      )
    for n in range(n_tasks):
      key, _, _, labels, titles = templates[n % n_projects]
      project = state.projects.get(key)
      number = project.task_counter + 1
      state.projects.update(key, task_counter=number)
      title = titles[(number - 1) % len(titles)]
      if number > len(titles):
        title = f"{title} (phase {(number - 1) // len(titles) + 1})"
      created = moments[key][number - 1]
      cls._seed_task(state, rng, project, number, title, labels, created)
    cls._guarantee_blocked_review(state)
    return state

  @staticmethod
  def _seed_task(
    state, rng, project: Project, number: int, title: str, labels, created: datetime
  ) -> None:
    now = state.now
    # Older tasks are more likely finished; the newest mostly wait in todo.
    progress = (created - datetime.combine(project.start_date, datetime.min.time())) / (
      now - datetime.combine(project.start_date, datetime.min.time())
    )
    weights = (1 + 4 * progress, 2.5, 1.5 + progress, 5 * (1 - progress))
    status = rng.choices(STATUSES, weights=weights)[0]
    earlier = [t for t in state.tasks if t.project_id == project.id]
    blockers: tuple[str, ...] = ()
    if earlier and rng.random() < 0.3:
      # A done task was only finished after its blockers were: it never waits on open work.
      pool = [t for t in earlier if t.status == "done"] if status == "done" else earlier
      if pool:
        blockers = (rng.choice(pool).id,)
    resolved = None
    if status == "done":
      resolved = min(now - timedelta(hours=1), created + timedelta(days=rng.randint(1, 14)))
    assignee = rng.choice(project.members)
    if status == "todo" and rng.random() < 0.3:
      assignee = None
    state.tasks.insert(
      Task(
        id=f"{project.id}-{number}",
        project_id=project.id,
        title=title,
        description=rng.choice(DESCRIPTIONS),
        reporter=rng.choice((project.lead, *project.members)),
        assignee=assignee,
        status=status,
        priority=rng.choices(("lowest", "low", "medium", "high", "highest"), (1, 3, 5, 3, 1))[0],
        due_date=(created + timedelta(days=rng.randint(7, 75))).date()
        if rng.random() < 0.8
        else None,
        labels=tuple(rng.sample(labels, rng.randint(0, 2))),
        blocked_by=blockers,
        story_points=rng.choice(POINTS[:5]) if rng.random() < 0.85 else None,
        created_at=created,
        updated_at=resolved or created,
        resolved_at=resolved,
      )
    )
    for _ in range(rng.choice((0, 0, 1, 1, 2, 3))):
      at = created + ((resolved or now) - created) * rng.random()
      state.comments.insert(
        Comment(
          id=state.new_id("cmt"),
          task_id=f"{project.id}-{number}",
          author=rng.choice(project.members),
          body=rng.choice(COMMENTS),
          created_at=at.replace(microsecond=0),
        )
      )

  @staticmethod
  def _guarantee_blocked_review(state: ProjectsState) -> None:
    """Every project with review work gets a task in review waiting on an unfinished one, so
    the "cannot be done while blocked" rule has a record to trigger it."""

    def waits_on(task_id: str) -> set[str]:
      seen, stack = set(), [task_id]
      while stack:
        for b in state.tasks.get(stack.pop()).blocked_by:
          if b not in seen:
            seen.add(b)
            stack.append(b)
      return seen

    for project in sorted(state.projects, key=lambda p: p.id):
      tasks = sorted((t for t in state.tasks if t.project_id == project.id), key=_task_order)
      review = [t for t in tasks if t.status == "in_review"]
      if any(any(state.tasks.get(b).status != "done" for b in t.blocked_by) for t in review):
        continue
      for t in review:
        # Any unfinished task that does not itself wait on t can block it without a cycle.
        pool = [
          o for o in tasks if o.id != t.id and o.status != "done" and t.id not in waits_on(o.id)
        ]
        if pool:
          state.tasks.update(t.id, blocked_by=(*t.blocked_by, pool[0].id))
          break
