"""Quotes: a CPQ (configure-price-quote) tool like Salesforce CPQ or HubSpot Quotes.

``service``: its records, state, tools and seeded data generator; ``facets``: what a task author
knows of it. The package re-exports the public names of ``service``.
"""

from envs.quotes.service import *  # noqa: F403  (its public names)
