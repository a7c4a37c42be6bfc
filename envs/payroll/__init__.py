"""Payroll: a Gusto-like payroll of compensation, pay runs, payslips and adjustments.

``service``: its records, state, tools and seeded data generator; ``facets``: what a task author
knows of it. The package re-exports the public names of ``service``.
"""

from envs.payroll.service import *  # noqa: F403  (its public names)
