"""Chat: a Slack-like team chat of channels, threads, reactions and direct messages.

``state``: its records, state and constants; ``tools``: the service, its tools and seeded data
generator; ``facets``: what a task author knows of it. The package re-exports the public names of
``state`` and ``tools``.
"""

from envs.chat.state import *  # noqa: F403  (its public names)
from envs.chat.tools import *  # noqa: F403  (its public names)
