"""Inventory: a multi-warehouse stock ledger, like the inventory module of NetSuite or Shopify.

``state``: its records, state and constants; ``tools``: the service, its tools and seeded data
generator; ``facets``: what a task author knows of it. The package re-exports the public names of
``state`` and ``tools``.
"""

from envs.inventory.state import *  # noqa: F403  (its public names)
from envs.inventory.tools import *  # noqa: F403  (its public names)
