"""Social posts: a Buffer/Hootsuite-like scheduler for the company's social media profiles.

``service``: its records, state, tools and seeded data generator; ``facets``: what a task author
knows of it. The package re-exports the public names of ``service``.
"""

from envs.social_posts.service import *  # noqa: F403  (its public names)
