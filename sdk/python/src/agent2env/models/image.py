"""Image store models (agent2env addition)."""

from __future__ import annotations

from datetime import datetime

from .common import APIModel

__all__ = ["Image", "ImageProgress"]


class Image(APIModel):
    """An image in the daemon's store."""

    ref: str
    digest: str
    """The manifest digest."""
    id: str
    """The config digest."""
    size: int
    """Bytes of the layers."""
    layers: int
    created: datetime


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
