"""Simosphere: a mail-and-collaboration suite (mail, documents and meeting invitations).

``state``: its records, state and constants; ``tools``: the service, its tools and seeded data
generator; ``facets``: what a task author knows of it. The package re-exports the public names of
``state`` and ``tools``.
"""

from envs.simosphere.state import *  # noqa: F403  (its public names)
from envs.simosphere.tools import *  # noqa: F403  (its public names)
