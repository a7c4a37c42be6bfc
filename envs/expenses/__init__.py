"""Expenses: an Expensify-like service of expense reports, their items and spending policies.

``service``: its records, state, tools and seeded data generator; ``facets``: what a task author
knows of it. The package re-exports the public names of ``service``.
"""

from envs.expenses.service import *  # noqa: F403  (its public names)
