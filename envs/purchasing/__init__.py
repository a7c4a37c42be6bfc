"""Purchasing: purchase orders to vendors, like the procurement module of NetSuite or Coupa.

``state``: its records, state and constants; ``tools``: the service, its tools and seeded data
generator; ``facets``: what a task author knows of it. The package re-exports the public names of
``state`` and ``tools``.
"""

from envs.purchasing.state import *  # noqa: F403  (its public names)
from envs.purchasing.tools import *  # noqa: F403  (its public names)
