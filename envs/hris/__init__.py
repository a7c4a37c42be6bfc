"""HRIS: a BambooHR-like employee directory, org chart and job records of the home company.

``service``: its records, state, tools and seeded data generator; ``facets``: what a task author
knows of it. The package re-exports the public names of ``service``.
"""

from envs.hris.service import *  # noqa: F403  (its public names)
