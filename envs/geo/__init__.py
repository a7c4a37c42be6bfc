"""Geo: a "Thinair Geo"-like service of places, geocoding and daily weather forecasts.

``service``: its records, state, tools and seeded data generator; ``facets``: what a task author
knows of it. The package re-exports the public names of ``service``.
"""

from envs.geo.service import *  # noqa: F403  (its public names)
