"""Helpdesk: a Zendesk-like support desk of tickets, comments, agents, requesters and macros.

``state``: its records, state and constants; ``data``: its seeded data generator (a base class of
the service); ``tools``: the service and its tools; ``facets``: what a task author knows of it. The
package re-exports the public names of ``state`` and ``tools``.
"""

from envs.helpdesk.state import *  # noqa: F403  (its public names)
from envs.helpdesk.tools import *  # noqa: F403  (its public names)
