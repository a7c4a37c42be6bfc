"""Maps: a Google Maps-like service of places, opening hours, routes, saved lists and reviews.

``state``: its records, state and constants; ``tools``: the service, its tools and seeded data
generator; ``facets``: what a task author knows of it. The package re-exports the public names of
``state`` and ``tools``.
"""

from envs.maps.state import *  # noqa: F403  (its public names)
from envs.maps.tools import *  # noqa: F403  (its public names)
