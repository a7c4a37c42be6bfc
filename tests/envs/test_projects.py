from datetime import timedelta

import pytest

from envs._world import world
from envs.projects import ProjectsService
from tests.contract import call_fails, call_ok

SEED = 3


@pytest.fixture
def pj():
  return ProjectsService.create(seed=SEED)


def user():
  return world(SEED).people[0].email


def tasks(pj, **attrs):
  """Tasks (in project, number order) whose fields equal ``attrs``."""
  return sorted(
    (t for t in pj.state.tasks if all(getattr(t, k) == v for k, v in attrs.items())),
    key=lambda t: (t.project_id, int(t.id.split("-")[1])),
  )


def outsider(pj, project_id):
  """An employee who is not a member of the project."""
  members = pj.state.projects.get(project_id).members
  return next(p.email for p in world(SEED).people if p.email not in members)


def blocked_review(pj):
  """A task in review that waits on an unfinished task."""
  return next(
    t
    for t in tasks(pj, status="in_review")
    if any(pj.state.tasks.get(b).status != "done" for b in t.blocked_by)
  )


def test_seeded_data_is_sized():
  a = ProjectsService.create(seed=5)
  st = a.state
  assert len(st.projects) == 4 and len(st.tasks) == 48 and len(st.comments) > 20
  assert {t.status for t in st.tasks} == {"todo", "in_progress", "in_review", "done"}
  for t in st.tasks:
    project = st.projects.get(t.project_id)
    assert t.assignee is None or t.assignee in project.members
    assert t.due_date is None or t.due_date >= project.start_date
    if t.status == "done":  # seeded data keeps the rules it enforces
      assert all(st.tasks.get(b).status == "done" for b in t.blocked_by)
      assert t.resolved_at is not None and t.resolved_at <= st.now
  assert all(p.lead in p.members for p in st.projects)
  emails = {p.email for p in world(5).people}
  assert all(set(p.members) <= emails for p in st.projects)
  assert len(ProjectsService.create(seed=5, size=150).state.tasks) == 150
  assert len(ProjectsService.create(seed=5, size=5).state.tasks) == 5


def test_list_and_get_projects(pj):
  page = call_ok(pj, "list_projects", {"limit": 2})
  assert page["total"] == 4 and len(page["items"]) == 2 and page["next_offset"] == 2
  keys = [p["id"] for p in call_ok(pj, "list_projects")["items"]]
  assert keys == sorted(keys)
  mine = call_ok(pj, "list_projects", {"member": user().upper()})["items"]
  assert len(mine) == 3 and all(user() in p["members"] for p in mine)
  key = keys[0]
  name_word = pj.state.projects.get(key).name.split()[0]
  assert key in [p["id"] for p in call_ok(pj, "list_projects", {"query": name_word})["items"]]
  got = call_ok(pj, "get_project", {"project_id": key})
  assert got["lead"] == pj.state.projects.get(key).lead
  assert sum(got["task_counts"].values()) == len(tasks(pj, project_id=key))
  assert got["task_counts"]["done"] == len(tasks(pj, project_id=key, status="done"))


def test_search_tasks_filters_and_pages(pj):
  page = call_ok(pj, "search_tasks", {"limit": 5})
  assert page["total"] == 48 and len(page["items"]) == 5 and page["next_offset"] == 5
  key = page["items"][0]["project_id"]
  in_project = call_ok(pj, "search_tasks", {"project_id": key, "limit": 100})["items"]
  assert [t["id"] for t in in_project] == [t.id for t in tasks(pj, project_id=key)]
  who = next(t.assignee for t in tasks(pj) if t.assignee)
  theirs = call_ok(pj, "search_tasks", {"assignee": who, "limit": 100})["items"]
  assert theirs and len(theirs) == len(tasks(pj, assignee=who))
  free = call_ok(pj, "search_tasks", {"unassigned": True, "limit": 100})["items"]
  assert free and all(t["assignee"] is None for t in free)
  review = call_ok(pj, "search_tasks", {"status": "in_review", "limit": 100})["items"]
  assert len(review) == len(tasks(pj, status="in_review"))
  high = call_ok(pj, "search_tasks", {"priority": "high", "limit": 100})["items"]
  assert high and all(t["priority"] == "high" for t in high)
  label = next(t.labels[0] for t in tasks(pj) if t.labels)
  labelled = call_ok(pj, "search_tasks", {"label": label.upper(), "limit": 100})["items"]
  assert labelled and all(label in t["labels"] for t in labelled)
  late = call_ok(pj, "search_tasks", {"overdue": True, "limit": 100})["items"]
  today = pj.state.now.date().isoformat()
  assert late and all(t["overdue"] and t["due_date"] < today for t in late)
  assert all(t["status"] != "done" for t in late)
  title = tasks(pj)[0].title
  assert tasks(pj)[0].id in [
    t["id"] for t in call_ok(pj, "search_tasks", {"query": title.lower()})["items"]
  ]


def test_get_task_shows_comments_blockers_and_blocked(pj):
  t = blocked_review(pj)
  got = call_ok(pj, "get_task", {"task_id": t.id})
  assert got["open_blockers"] and set(got["open_blockers"]) <= set(t.blocked_by)
  blocker = call_ok(pj, "get_task", {"task_id": t.blocked_by[0]})
  assert t.id in blocker["blocks"]
  commented = next(c.task_id for c in pj.state.comments)
  comments = call_ok(pj, "get_task", {"task_id": commented})["comments"]
  assert comments and [c["created_at"] for c in comments] == sorted(
    c["created_at"] for c in comments
  )


def test_create_update_assign_comment(pj):
  project = next(iter(pj.state.projects))
  before = project.task_counter
  member = project.members[1]
  task = call_ok(
    pj,
    "create_task",
    {
      "project_id": project.id,
      "title": "Set up nightly backup",
      "assignee": member.upper(),
      "priority": "high",
      "due_date": "2026-04-01",
      "labels": ["Infra", "infra", "ops"],
      "story_points": 5,
    },
  )
  assert task["id"] == f"{project.id}-{before + 1}" and task["status"] == "todo"
  assert task["assignee"] == member and task["reporter"] == user()
  assert task["labels"] == ["infra", "ops"] and task["created_at"] == "2026-03-02T09:00:00"
  assert pj.state.projects.get(project.id).task_counter == before + 1
  assert pj.state.tasks.get(task["id"]).due_date.isoformat() == "2026-04-01"

  upd = call_ok(pj, "update_task", {"task_id": task["id"], "title": "Nightly backups"})
  assert upd["title"] == "Nightly backups" and upd["priority"] == "high"
  upd = call_ok(pj, "update_task", {"task_id": task["id"], "labels": [], "story_points": 8})
  assert upd["labels"] == [] and upd["story_points"] == 8 and upd["title"] == "Nightly backups"
  assert pj.state.tasks.get(task["id"]).story_points == 8

  other = project.members[2]
  assert call_ok(pj, "assign_task", {"task_id": task["id"], "assignee": other})["assignee"]
  assert pj.state.tasks.get(task["id"]).assignee == other

  c = call_ok(pj, "add_comment", {"task_id": task["id"], "body": "Starting tomorrow."})
  assert c["author"] == user() and c["task_id"] == task["id"]
  assert pj.state.comments.get(c["id"]).body == "Starting tomorrow."
  assert call_ok(pj, "get_task", {"task_id": task["id"]})["comments"][-1]["id"] == c["id"]


def test_workflow_transitions(pj):
  t = tasks(pj, status="todo", blocked_by=())[0]
  tid = t.id
  for status in ("in_progress", "in_review", "in_progress", "in_review", "done"):
    got = call_ok(pj, "transition_task", {"task_id": tid, "status": status})
    assert got["status"] == status and pj.state.tasks.get(tid).status == status
  assert got["resolved_at"] == got["updated_at"] and pj.state.tasks.get(tid).resolved_at
  reopened = call_ok(pj, "transition_task", {"task_id": tid, "status": "in_progress"})
  assert reopened["resolved_at"] is None and pj.state.tasks.get(tid).resolved_at is None


def test_done_after_blockers_finish(pj):
  t = blocked_review(pj)
  for b in t.blocked_by:
    while pj.state.tasks.get(b).status != "done":
      nxt = {"todo": "in_progress", "in_progress": "in_review", "in_review": "done"}
      blocker = pj.state.tasks.get(b)
      if blocker.status == "in_review" and any(
        pj.state.tasks.get(x).status != "done" for x in blocker.blocked_by
      ):
        call_ok(pj, "remove_dependency", {"task_id": b, "blocked_by_id": blocker.blocked_by[0]})
        continue
      call_ok(pj, "transition_task", {"task_id": b, "status": nxt[blocker.status]})
  done = call_ok(pj, "transition_task", {"task_id": t.id, "status": "done"})
  assert done["status"] == "done" and done["open_blockers"] == []


def test_dependencies_and_burndown(pj):
  a, b = tasks(pj, status="todo", blocked_by=())[:2]
  got = call_ok(pj, "add_dependency", {"task_id": a.id, "blocked_by_id": b.id})
  assert got["blocked_by"] == [b.id] and got["open_blockers"] == [b.id]
  assert pj.state.tasks.get(a.id).blocked_by == (b.id,)
  got = call_ok(pj, "remove_dependency", {"task_id": a.id, "blocked_by_id": b.id})
  assert got["blocked_by"] == [] and pj.state.tasks.get(a.id).blocked_by == ()

  key = a.project_id
  report = call_ok(pj, "project_burndown", {"project_id": key})
  mine = tasks(pj, project_id=key)
  assert report["total_tasks"] == len(mine)
  assert report["total_points"] == sum(t.story_points or 0 for t in mine)
  done = sum(t.story_points or 0 for t in mine if t.status == "done")
  assert report["by_status"]["done"]["points"] == done
  assert report["points_remaining"] == report["total_points"] - done
  assert report["percent_done"] == round(100 * done / report["total_points"], 1)
  today = pj.state.now.date()
  assert report["overdue"] == sum(
    1 for t in mine if t.due_date and t.due_date < today and t.status != "done"
  )


def test_members(pj):
  key = next(iter(pj.state.projects)).id
  new = outsider(pj, key)
  got = call_ok(pj, "add_project_member", {"project_id": key, "email": new})
  assert got["members"][-1] == new and new in pj.state.projects.get(key).members
  call_ok(pj, "remove_project_member", {"project_id": key, "email": new})
  assert new not in pj.state.projects.get(key).members


def test_error_paths_are_atomic(pj):
  todo = tasks(pj, status="todo")[0]
  key = todo.project_id
  project = pj.state.projects.get(key)
  stranger = outsider(pj, key)
  # missing / ill-typed arguments
  call_fails(pj, "get_task", {}, 400, "task_id")
  call_fails(pj, "get_task", {"task_id": 12}, 400, "task_id", "string")
  call_fails(pj, "create_task", {"project_id": key}, 400, "title")
  call_fails(pj, "transition_task", {"task_id": todo.id, "status": "closed"}, 400, "status")
  call_fails(pj, "create_task", {"project_id": key, "title": "x", "priority": "urgent"}, 400)
  call_fails(pj, "search_tasks", {"limit": 0}, 400, "limit")
  call_fails(pj, "search_tasks", {"assignee": "nope"}, 400, "assignee")
  call_fails(pj, "search_tasks", {"assignee": project.lead, "unassigned": True}, 400, "either")
  # unknown ids
  call_fails(pj, "get_project", {"project_id": "ZZZ"}, 404, "ZZZ")
  call_fails(pj, "project_burndown", {"project_id": "ZZZ"}, 404, "ZZZ")
  call_fails(pj, "search_tasks", {"project_id": "ZZZ"}, 404, "ZZZ")
  call_fails(pj, "get_task", {"task_id": "OPS-999"}, 404, "OPS-999")
  call_fails(pj, "create_task", {"project_id": "ZZZ", "title": "x"}, 404, "ZZZ")
  call_fails(pj, "update_task", {"task_id": "X-1", "title": "x"}, 404, "X-1")
  call_fails(pj, "transition_task", {"task_id": "X-1", "status": "done"}, 404, "X-1")
  call_fails(pj, "assign_task", {"task_id": "X-1", "assignee": project.lead}, 404, "X-1")
  call_fails(pj, "add_dependency", {"task_id": "X-1", "blocked_by_id": todo.id}, 404, "X-1")
  call_fails(pj, "add_dependency", {"task_id": todo.id, "blocked_by_id": "X-2"}, 404, "X-2")
  call_fails(pj, "remove_dependency", {"task_id": "X-1", "blocked_by_id": todo.id}, 404, "X-1")
  call_fails(pj, "remove_dependency", {"task_id": todo.id, "blocked_by_id": "X-2"}, 404, "X-2")
  call_fails(pj, "add_comment", {"task_id": "X-1", "body": "hi"}, 404, "X-1")
  call_fails(pj, "add_project_member", {"project_id": "ZZZ", "email": stranger}, 404, "ZZZ")
  call_fails(pj, "add_project_member", {"project_id": key, "email": "x@y.com"}, 404, "x@y.com")
  call_fails(pj, "remove_project_member", {"project_id": "ZZZ", "email": stranger}, 404, "ZZZ")
  call_fails(pj, "remove_project_member", {"project_id": key, "email": stranger}, 404, stranger)
  # 400 value rules
  early = (project.start_date - timedelta(days=1)).isoformat()
  call_fails(
    pj, "create_task", {"project_id": key, "title": "x", "due_date": early}, 400, "due_date"
  )
  call_fails(pj, "update_task", {"task_id": todo.id, "due_date": early}, 400, "start date")
  call_fails(pj, "update_task", {"task_id": todo.id}, 400, "at least one")
  call_fails(pj, "update_task", {"task_id": todo.id, "story_points": 4}, 400, "story_points")
  call_fails(
    pj, "create_task", {"project_id": key, "title": "x", "story_points": 0}, 400, "story_points"
  )
  call_fails(
    pj, "create_task", {"project_id": key, "title": "x", "labels": ["two words"]}, 400, "label"
  )
  call_fails(pj, "add_comment", {"task_id": todo.id, "body": ""}, 400, "body")
  # 409 business rules
  call_fails(pj, "assign_task", {"task_id": todo.id, "assignee": stranger}, 409, "not a member")
  call_fails(
    pj, "create_task", {"project_id": key, "title": "x", "assignee": stranger}, 409, "member"
  )
  call_fails(pj, "transition_task", {"task_id": todo.id, "status": "done"}, 409, "in_progress")
  call_fails(pj, "transition_task", {"task_id": todo.id, "status": "todo"}, 409, "cannot move")
  done = tasks(pj, status="done")[0]
  call_fails(pj, "transition_task", {"task_id": done.id, "status": "in_review"}, 409)
  call_fails(pj, "transition_task", {"task_id": done.id, "status": "todo"}, 409)
  review = blocked_review(pj)
  call_fails(pj, "transition_task", {"task_id": review.id, "status": "done"}, 409, "blocked by")
  if review.assignee:
    call_fails(pj, "assign_task", {"task_id": review.id, "assignee": review.assignee}, 409)
  blocker = review.blocked_by[0]
  call_fails(pj, "add_dependency", {"task_id": review.id, "blocked_by_id": blocker}, 409, "already")
  call_fails(pj, "add_dependency", {"task_id": blocker, "blocked_by_id": review.id}, 409, "cycle")
  call_fails(pj, "add_dependency", {"task_id": todo.id, "blocked_by_id": todo.id}, 409, "cycle")
  # a longer cycle: a waits on b, b waits on c; c cannot wait on a
  a, b, c = (t.id for t in tasks(pj, status="todo", blocked_by=())[:3])
  call_ok(pj, "add_dependency", {"task_id": a, "blocked_by_id": b})
  call_ok(pj, "add_dependency", {"task_id": b, "blocked_by_id": c})
  call_fails(pj, "add_dependency", {"task_id": c, "blocked_by_id": a}, 409, "cycle")
  call_fails(pj, "add_dependency", {"task_id": done.id, "blocked_by_id": a}, 409, "reopen")
  call_fails(pj, "remove_dependency", {"task_id": a, "blocked_by_id": c}, 404, "not blocked")
  member = project.members[1]
  call_fails(pj, "add_project_member", {"project_id": key, "email": member}, 409, "already")
  call_fails(pj, "remove_project_member", {"project_id": key, "email": project.lead}, 409, "lead")
  busy = next(
    t.assignee
    for t in tasks(pj, project_id=key)
    if t.assignee and t.assignee != project.lead and t.status != "done"
  )
  call_fails(pj, "remove_project_member", {"project_id": key, "email": busy}, 409, "unfinished")
