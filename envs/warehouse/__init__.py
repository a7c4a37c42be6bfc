"""Warehouse: a Snowflake/BigQuery-like SQL data warehouse over the company's business data.

``state``: its records, state and constants; ``tools``: the service, its tools and seeded data
generator; ``facets``: what a task author knows of it. The package re-exports the public names of
``state`` and ``tools``.
"""

from envs.warehouse.state import *  # noqa: F403  (its public names)
from envs.warehouse.state import _connection as _connection
from envs.warehouse.tools import *  # noqa: F403  (its public names)
