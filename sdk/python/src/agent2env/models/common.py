"""Pieces every model module shares."""

from __future__ import annotations

from enum import Enum

from pydantic import BaseModel, ConfigDict

__all__ = ["APIModel", "StrEnum"]


class APIModel(BaseModel):
    """The base of the SDK's models: fields are set by name or by wire alias.

    Unknown fields of a newer daemon are ignored.
    """

    model_config = ConfigDict(populate_by_name=True)


class StrEnum(str, Enum):
    """An enum of wire strings that prints as its value (``running``, not ``Status.RUNNING``)."""

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, format_spec: str) -> str:
        return format(str(self.value), format_spec)
