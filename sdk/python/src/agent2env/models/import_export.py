"""Template import and export models (seed 003 §6.4)."""

from __future__ import annotations

from pydantic import Field

from .common import APIModel, StrEnum

__all__ = ["ImportAction", "ImportResult", "ImportResultItem", "ImportStrategy"]


class ImportStrategy(StrEnum):
    """What an import does with each template of the file."""

    CREATE_ONLY = "create-only"
    UPDATE_ONLY = "update-only"
    CREATE_OR_UPDATE = "create-or-update"


class ImportAction(StrEnum):
    """What an import did with one template."""

    CREATED = "created"
    UPDATED = "updated"
    SKIPPED = "skipped"
    FAILED = "failed"


class ImportResultItem(APIModel):
    """What happened to one template of an import."""

    name: str
    action: ImportAction
    version: int | None = None
    error: str | None = None


class ImportResult(APIModel):
    """What happened to each template of an import, in document order."""

    total: int
    created: int
    updated: int
    skipped: int
    failed: int
    results: list[ImportResultItem]
    prepull_started: list[str] | None = Field(None, alias="prepullStarted")
