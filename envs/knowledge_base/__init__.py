"""Knowledge base: a Zendesk Guide-like help center of sections and articles.

``state``: its records, state and constants; ``tools``: the service, its tools and seeded data
generator; ``facets``: what a task author knows of it. The package re-exports the public names of
``state`` and ``tools``.
"""

from envs.knowledge_base.state import *  # noqa: F403  (its public names)
from envs.knowledge_base.tools import *  # noqa: F403  (its public names)
