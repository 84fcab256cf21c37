"""Image store models (agent2env addition)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import field_validator

from .common import APIModel

__all__ = ["Image", "ImageProgress", "ImageStatus"]

ImageStatus = Literal["ready", "missing", "building", "pulling", "failed"]
"""The state of an image in the list: ``ready`` (stored), ``missing`` (a
built-in image not built yet), ``building``, ``pulling``, ``failed`` (its last
pull or build failed while it was not stored; see :attr:`Image.error`)."""


class ImageProgress(APIModel):
    """Progress of a pull, build or import.

    ``phase`` is ``resolve``, ``download``, ``unpack``, ``build`` or ``done``;
    ``item`` the reference, layer or build step concerned; ``current`` and
    ``total`` count bytes where they apply.
    """

    phase: str
    item: str | None = None
    current: int | None = None
    total: int | None = None


class Image(APIModel):
    """An image in the daemon's store, or one it is preparing.

    The list also holds the built-in images that are not stored yet and the
    images being pulled or built; those have an empty digest and no layers.
    """

    ref: str
    digest: str = ""
    """The manifest digest."""
    id: str = ""
    """The config digest."""
    size: int = 0
    """Bytes of the layers."""
    layers: int = 0
    created: datetime | None = None
    """When the image was made; ``None`` for one not stored yet."""
    status: ImageStatus | None = None
    """``None`` from a daemon that lists stored images only."""
    progress: ImageProgress | None = None
    """The last progress of the pull or build in flight, or of the one that failed."""
    started: datetime | None = None
    """When the pull or build in flight, or the one that failed, began."""
    error: str | None = None
    """Why the last pull or build failed (status ``failed``)."""

    @field_validator("created", mode="before")
    @classmethod
    def _no_zero_time(cls, value: Any) -> Any:
        # The daemon sends an image not stored yet with Go's zero time, year 1.
        if isinstance(value, str) and value.startswith("0001-01-01T00:00:00"):
            return None
        return value
