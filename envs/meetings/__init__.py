"""Meetings: a Zoom-like video meeting service of meetings, registrants, recordings and transcripts.

``state``: its records, state and constants; ``tools``: the service, its tools and seeded data
generator; ``facets``: what a task author knows of it. The package re-exports the public names of
``state`` and ``tools``.
"""

from envs.meetings.state import *  # noqa: F403  (its public names)
from envs.meetings.tools import *  # noqa: F403  (its public names)
