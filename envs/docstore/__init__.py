"""Docstore: a document store of manuals, policies, contracts and reports read as PDF-like pages.

``state``: its records, state and constants; ``tools``: the service, its tools and seeded data
generator; ``facets``: what a task author knows of it. The package re-exports the public names of
``state`` and ``tools``.
"""

from envs.docstore.state import *  # noqa: F403  (its public names)
from envs.docstore.tools import *  # noqa: F403  (its public names)
