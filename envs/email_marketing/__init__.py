"""Email marketing: a Mailchimp-like service of audiences, subscribers, campaigns and reports.

``service``: its records, state, tools and seeded data generator; ``facets``: what a task author
knows of it. The package re-exports the public names of ``service``.
"""

from envs.email_marketing.service import *  # noqa: F403  (its public names)
