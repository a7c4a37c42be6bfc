"""The hand-written service library. Importing it registers every service."""

from envs import calendar, chat, forum, geo, simosphere

__all__ = ["calendar", "chat", "forum", "geo", "simosphere"]
