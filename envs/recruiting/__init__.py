"""Recruiting: a Greenhouse-like applicant tracking system of jobs, candidates and pipelines.

``state``: its records, state and constants; ``tools``: the service, its tools and seeded data
generator; ``facets``: what a task author knows of it. The package re-exports the public names of
``state`` and ``tools``.
"""

from envs.recruiting.state import *  # noqa: F403  (its public names)
from envs.recruiting.tools import *  # noqa: F403  (its public names)
