"""Time off: a BambooHR/Workday-like leave tracker of policies, balances, requests and holidays.

``service``: its records, state, tools and seeded data generator; ``facets``: what a task author
knows of it. The package re-exports the public names of ``service``.
"""

from envs.timeoff.service import *  # noqa: F403  (its public names)
