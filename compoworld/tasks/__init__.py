"""Tasks: what a task is, how it is verified, and how it is authored from an environment walk.

- ``task``: ``Task`` x = (u, s0, G, g, v), stored one JSON object per line, and its gates.
- ``rubric``: executable rubrics, declarative checks over the final joint state and answer.
- ``author_context``: what a facet sees while a task is authored.
- ``facets``: what the procedural author knows of one service (each service's own live in
  ``envs/<name>/facets.py``).
- ``walks``: environment walks over the services' facets.
- ``authoring``: the procedural author, from a walk to a verified-ready task.
- ``generate``: task generation at scale, every gate checked.
- ``splits``: train / evaluation splits that test composition.

The LLM author, which drives an agent, is ``compoworld.agents.llm_author``.
"""

from compoworld.tasks.task import Task, load_tasks, save_tasks

__all__ = ["Task", "load_tasks", "save_tasks"]
