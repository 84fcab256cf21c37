"""Prepull models (seed 003 §6.3)."""

from __future__ import annotations

from datetime import datetime

from pydantic import Field

from .common import APIModel, StrEnum

__all__ = ["PrepullList", "PrepullProgress", "PrepullStatus", "PrepullTask"]


class PrepullStatus(StrEnum):
    """``pending`` and ``pulling`` are active; ``completed`` and ``failed`` are final."""

    PENDING = "pending"
    PULLING = "pulling"
    COMPLETED = "completed"
    FAILED = "failed"


class PrepullProgress(APIModel):
    """Layers fetched (``ready``) of those to fetch (``total``)."""

    ready: int
    total: int


class PrepullTask(APIModel):
    """A task fetching an image before sandboxes need it."""

    id: str
    image: str
    status: PrepullStatus
    progress: PrepullProgress | None = None
    template: str | None = None
    error: str | None = None
    started_at: datetime = Field(alias="startedAt")
    completed_at: datetime | None = Field(None, alias="completedAt")


class PrepullList(APIModel):
    """A page of prepull tasks (agent2env addition), newest first unless asked otherwise."""

    items: list[PrepullTask] = Field(default_factory=list)
    next_cursor: str | None = None
    """The next page's cursor; none on the last page."""
