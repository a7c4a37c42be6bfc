"""The hand-written service library. Importing it registers every service."""

from envs import calendar

__all__ = ["calendar"]
