"""E-sign: a DocuSign-like e-signature service of templates, envelopes and signers.

``state``: its records, state and constants; ``tools``: the service, its tools and seeded data
generator; ``facets``: what a task author knows of it. The package re-exports the public names of
``state`` and ``tools``.
"""

from envs.esign.state import *  # noqa: F403  (its public names)
from envs.esign.tools import *  # noqa: F403  (its public names)
