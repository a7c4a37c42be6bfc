"""Forum: a Reddit-like service of communities, posts, threaded comments and votes.

``state``: its records, state and constants; ``tools``: the service, its tools and seeded data
generator; ``facets``: what a task author knows of it. The package re-exports the public names of
``state`` and ``tools``.
"""

from envs.forum.state import *  # noqa: F403  (its public names)
from envs.forum.tools import *  # noqa: F403  (its public names)
