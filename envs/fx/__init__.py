"""FX: currency rates and multi-currency wallets, like Wise Business or Revolut Business.

``service``: its records, state, tools and seeded data generator; ``facets``: what a task author
knows of it. The package re-exports the public names of ``service``.
"""

from envs.fx.service import *  # noqa: F403  (its public names)
