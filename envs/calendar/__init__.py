"""Calendar: a Google Calendar-like service of calendars and events.

``service``: its records, state, tools and seeded data generator; ``facets``: what a task author
knows of it. The package re-exports the public names of ``service``.
"""

from envs.calendar.service import *  # noqa: F403  (its public names)
