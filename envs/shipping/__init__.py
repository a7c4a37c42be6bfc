"""Shipping: parcel shipments across carriers, like ShipStation on top of FedEx, UPS and DHL.

``state``: its records, state and constants; ``tools``: the service, its tools and seeded data
generator; ``facets``: what a task author knows of it. The package re-exports the public names of
``state`` and ``tools``.
"""

from envs.shipping.state import *  # noqa: F403  (its public names)
from envs.shipping.tools import *  # noqa: F403  (its public names)
