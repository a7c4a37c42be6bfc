"""Facets of the hand-written services: what the procedural author knows about each one.

Importing this package registers them in ``compoworld.facets.facets``.
"""

from envs.facets import calendar, chat, forum, geo, simosphere

__all__ = ["calendar", "chat", "forum", "geo", "simosphere"]
