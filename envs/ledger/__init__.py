"""Ledger: a general ledger (the accounting core of QuickBooks, Xero or NetSuite).

``state``: its records, state and constants; ``tools``: the service, its tools and seeded data
generator; ``facets``: what a task author knows of it. The package re-exports the public names of
``state`` and ``tools``.
"""

from envs.ledger.state import *  # noqa: F403  (its public names)
from envs.ledger.tools import *  # noqa: F403  (its public names)
