"""CRM: a Salesforce/HubSpot-like sales CRM of accounts, contacts, deals and activities.

``state``: its records, state and constants; ``tools``: the service, its tools and seeded data
generator; ``facets``: what a task author knows of it. The package re-exports the public names of
``state`` and ``tools``.
"""

from envs.crm.state import *  # noqa: F403  (its public names)
from envs.crm.tools import *  # noqa: F403  (its public names)
