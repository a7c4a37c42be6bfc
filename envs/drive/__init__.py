"""Drive: a Google Drive-like file store of folders, files, permissions and share links.

``state``: its records, state and constants; ``data``: its seeded data generator (a base class of
the service); ``tools``: the service and its tools; ``facets``: what a task author knows of it. The
package re-exports the public names of ``state`` and ``tools``.
"""

from envs.drive.state import *  # noqa: F403  (its public names)
from envs.drive.tools import *  # noqa: F403  (its public names)
