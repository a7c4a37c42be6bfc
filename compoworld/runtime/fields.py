"""Annotated argument and field types shared by services, with JSON Schema constraints."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

Email = Annotated[
  str, Field(pattern=r"^[^@\s]+@[^@\s]+\.[A-Za-z]{2,}$", description="An email address.")
]
Text = Annotated[str, Field(min_length=1)]
Limit = Annotated[int, Field(ge=1, le=100)]
Offset = Annotated[int, Field(ge=0)]
Money = Annotated[float, Field(ge=0, le=1e12, description="An amount of money.")]
