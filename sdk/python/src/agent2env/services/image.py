"""The images service: the daemon's image store (agent2env addition).

Pulls, builds and imports answer with a stream of progress events; the
methods hand each to ``on_progress`` and return the images made.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterator
from typing import IO
from urllib.parse import quote

from .._async_base import AsyncAPIClient
from .._base import (
    Op,
    Request,
    SyncAPIClient,
    call,
    error_from_event,
    open_source,
    parse_items,
    parse_none,
    stream_ended,
)
from .._sse import SSEEvent
from ..models.image import Image, ImageProgress

__all__ = ["AsyncImageService", "ImageService", "ImageStreamParser"]

OnProgress = Callable[[ImageProgress], object] | None
Archive = bytes | str | os.PathLike[str] | IO[bytes]


def _list() -> Op[list[Image]]:
    return call(Request("GET", "/images"), parse_items(Image))


def _remove(ref: str) -> Op[None]:
    if not ref:
        raise ValueError("image ref is empty")
    # The route takes the rest of the path, slashes included.
    path = "/images/" + "/".join(quote(seg, safe=":@") for seg in ref.split("/"))
    return call(Request("DELETE", path), parse_none)


def _ref_request(path: str, ref: str) -> Request:
    if not ref:
        raise ValueError("image ref is empty")
    return Request("POST", path, json={"ref": ref}, min_read_timeout=math.inf)


def _follow_request(ref: str) -> Request:
    if not ref:
        raise ValueError("image ref is empty")
    return Request("GET", "/images/follow", params={"ref": ref}, min_read_timeout=math.inf)


def _import_request(body: bytes | Iterator[bytes]) -> Request:
    return Request(
        "POST",
        "/images/import",
        content=body,
        headers={"Content-Type": "application/x-tar"},
        min_read_timeout=math.inf,
    )


class ImageStreamParser:
    """Turns a progress stream into :class:`ImageProgress` and :class:`Image` items.

    Hands progress to ``on_progress`` and keeps the images; the stream ends
    with the response.
    """

    def __init__(self, on_progress: OnProgress) -> None:
        self.done = False
        self.images: list[Image] = []
        self._on_progress = on_progress

    def feed(self, event: SSEEvent) -> Image | None:
        """Take one event; an ``error`` event raises the daemon's error."""
        if event.event == "error":
            raise error_from_event(event)
        if event.event == "progress":
            if self._on_progress is not None:
                self._on_progress(ImageProgress.model_validate(event.json()))
            return None
        if event.event == "image":
            image = Image.model_validate(event.json())
            self.images.append(image)
            return image
        return None

    def finish(self) -> None:
        """Accept the end of the stream if it brought an image; else raise."""
        if not self.images:
            raise stream_ended("image progress")


class ImageService:
    """Image store operations; get it as :attr:`agent2env.Client.images`."""

    def __init__(self, client: SyncAPIClient) -> None:
        self._c = client

    def _stream(self, req: Request, on_progress: OnProgress) -> list[Image]:
        parser = ImageStreamParser(on_progress)
        for _ in self._c.iter_stream(req, parser):
            pass
        return parser.images

    def pull(self, ref: str, *, on_progress: OnProgress = None) -> Image:
        """Pull an image from its registry, reporting progress to ``on_progress``."""
        return self._stream(_ref_request("/images/pull", ref), on_progress)[-1]

    def build(self, ref: str, *, on_progress: OnProgress = None) -> Image:
        """Build a built-in image (``agent2env/python``, ``agent2env/node``) offline."""
        return self._stream(_ref_request("/images/build", ref), on_progress)[-1]

    def follow(self, ref: str, *, on_progress: OnProgress = None) -> Image:
        """Wait for the pull or build of ``ref`` in flight, reporting its progress.

        Joins what a sandbox's creation, a prepull or the daemon's background
        build started, from its beginning, and starts nothing: an image
        already stored returns at once; one neither stored nor in flight
        raises :class:`~agent2env.NotFoundError`.
        """
        return self._stream(_follow_request(ref), on_progress)[-1]

    def import_archive(self, archive: Archive, *, on_progress: OnProgress = None) -> list[Image]:
        """Load the images of a ``docker save`` or OCI tarball: a path, file object or bytes."""
        with open_source(archive) as body:
            return self._stream(_import_request(body), on_progress)

    def remove(self, ref: str) -> None:
        """Remove a stored image by reference or ID."""
        self._c.run(_remove(ref))

    def list(self) -> list[Image]:
        """Return the images: stored, being prepared, and built-in ones not built yet."""
        return self._c.run(_list())


class AsyncImageService:
    """The async twin of :class:`ImageService`: ``AsyncClient.images``."""

    def __init__(self, client: AsyncAPIClient) -> None:
        self._c = client

    async def _stream(self, req: Request, on_progress: OnProgress) -> list[Image]:
        parser = ImageStreamParser(on_progress)
        async for _ in self._c.iter_stream(req, parser):
            pass
        return parser.images

    async def pull(self, ref: str, *, on_progress: OnProgress = None) -> Image:
        """Pull an image from its registry; see :meth:`ImageService.pull`."""
        return (await self._stream(_ref_request("/images/pull", ref), on_progress))[-1]

    async def build(self, ref: str, *, on_progress: OnProgress = None) -> Image:
        """Build a built-in image; see :meth:`ImageService.build`."""
        return (await self._stream(_ref_request("/images/build", ref), on_progress))[-1]

    async def follow(self, ref: str, *, on_progress: OnProgress = None) -> Image:
        """Wait for the pull or build of ``ref`` in flight; see :meth:`ImageService.follow`."""
        return (await self._stream(_follow_request(ref), on_progress))[-1]

    async def import_archive(
        self, archive: Archive, *, on_progress: OnProgress = None
    ) -> list[Image]:
        """Load the images of a tarball; see :meth:`ImageService.import_archive`."""
        with open_source(archive) as body:
            return await self._stream(_import_request(body), on_progress)

    async def remove(self, ref: str) -> None:
        """Remove a stored image by reference or ID."""
        await self._c.run(_remove(ref))

    async def list(self) -> list[Image]:
        """Return the images: stored, being prepared, and built-in ones not built yet."""
        return await self._c.run(_list())
