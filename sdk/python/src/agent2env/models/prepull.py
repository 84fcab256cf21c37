"""Prepull models (seed 003 §6.3)."""

from __future__ import annotations

from datetime import datetime

from pydantic import Field

from .common import APIModel, StrEnum

__all__ = ["PrepullProgress", "PrepullStatus", "PrepullTask"]


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
