"""Oncall: a PagerDuty-like incident response service of on-call schedules and incidents.

``state``: its records, state and constants; ``data``: its seeded data generator (a base class of
the service); ``tools``: the service and its tools; ``facets``: what a task author knows of it. The
package re-exports the public names of ``state`` and ``tools``.
"""

from envs.oncall.state import *  # noqa: F403  (its public names)
from envs.oncall.tools import *  # noqa: F403  (its public names)
