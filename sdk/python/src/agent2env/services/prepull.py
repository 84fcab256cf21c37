"""The prepull service: fetching images before sandboxes need them (seed 003 §5.3)."""

from __future__ import annotations

import time

from .._async_base import AsyncAPIClient
from .._base import (
    Op,
    Order,
    Request,
    SyncAPIClient,
    call,
    paged,
    parse_items,
    parse_model,
    parse_none,
    segment,
    sleep,
)
from ..exceptions import PrepullFailedError, TimeoutError
from ..models.prepull import PrepullList, PrepullStatus, PrepullTask

__all__ = ["AsyncPrepullService", "PrepullService"]


def _path(task_id: str) -> str:
    return f"/images/prepull/{segment(task_id, 'prepull task id')}"


def _create(image: str, timeout: int) -> Op[PrepullTask]:
    body = {"image": image, "timeout": timeout}
    return call(Request("POST", "/images/prepull", json=body), parse_model(PrepullTask))


def _create_for_template(template_name: str) -> Op[PrepullTask]:
    path = f"/templates/{segment(template_name, 'template name')}/prepull"
    return call(Request("POST", path), parse_model(PrepullTask))


def _filter(
    image: str | None, status: PrepullStatus | str | None
) -> dict[str, str | int | list[str]]:
    params: dict[str, str | int | list[str]] = {}
    if image is not None:
        params["image"] = image
    if status is not None:
        params["status"] = PrepullStatus(status).value
    return params


def _list(image: str | None, status: PrepullStatus | str | None) -> Op[list[PrepullTask]]:
    params = _filter(image, status)
    return call(Request("GET", "/images/prepull", params=params), parse_items(PrepullTask))


def _list_page(
    image: str | None,
    status: PrepullStatus | str | None,
    limit: int | None,
    cursor: str | None,
    order: Order | None,
) -> Op[PrepullList]:
    params = paged(_filter(image, status), limit, cursor, order)
    return call(Request("GET", "/images/prepull", params=params), parse_model(PrepullList))


def _get(task_id: str) -> Op[PrepullTask]:
    return call(Request("GET", _path(task_id)), parse_model(PrepullTask))


def _delete(task_id: str) -> Op[None]:
    return call(Request("DELETE", _path(task_id)), parse_none)


def _wait_for_completion(task_id: str, poll_interval: float, timeout: float) -> Op[PrepullTask]:
    deadline = time.monotonic() + timeout
    while True:
        task = yield from _get(task_id)
        if task.status == PrepullStatus.COMPLETED:
            return task
        if task.status == PrepullStatus.FAILED:
            raise PrepullFailedError(task.id, task.error or "no reason given")
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(
                f"prepull task {task_id} not complete after {timeout:g}s (status {task.status})"
            )
        yield from sleep(min(poll_interval, remaining))


class PrepullService:
    """Image prepull operations; get it as :attr:`agent2env.Client.prepull`."""

    def __init__(self, client: SyncAPIClient) -> None:
        self._c = client

    def create(self, image: str, *, timeout: int = 600) -> PrepullTask:
        """Start fetching an image.

        Args:
            image: The image reference.
            timeout: Seconds the pull may take before the task fails.

        Raises:
            ConflictError: A prepull of that image is active (code ``PREPULL_IN_PROGRESS``).

        """
        return self._c.run(_create(image, timeout))

    def create_for_template(self, template_name: str) -> PrepullTask:
        """Start fetching the image of a template's latest version."""
        return self._c.run(_create_for_template(template_name))

    def list(
        self, *, image: str | None = None, status: PrepullStatus | None = None
    ) -> list[PrepullTask]:
        """Return the prepull tasks, newest first, optionally only those of an image or status."""
        return self._c.run(_list(image, status))

    def list_page(
        self,
        *,
        image: str | None = None,
        status: PrepullStatus | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        order: Order | None = None,
    ) -> PrepullList:
        """Return a page of the prepull tasks (agent2env addition), as :meth:`list` selects them.

        Args:
            image: Only the tasks of this image.
            status: Only the tasks with this status.
            limit: The page's size (1 to 1000); without it, every task.
            cursor: The ``next_cursor`` of the page before.
            order: ``"asc"`` lists oldest first (the next pages newer ones),
                ``"desc"`` newest first, the default.

        Raises:
            BadRequestError: ``limit`` is not from 1 to 1000, ``cursor`` not
                one the daemon gave, or ``order`` neither ``"asc"`` nor ``"desc"``.

        """
        return self._c.run(_list_page(image, status, limit, cursor, order))

    def get(self, task_id: str) -> PrepullTask:
        """Return a prepull task; an unknown id raises NotFoundError."""
        return self._c.run(_get(task_id))

    def delete(self, task_id: str) -> None:
        """Cancel (if active) and delete a prepull task."""
        self._c.run(_delete(task_id))

    def wait_for_completion(
        self, task_id: str, *, poll_interval: float = 5.0, timeout: float = 1800.0
    ) -> PrepullTask:
        """Poll a prepull task until it is completed and return it.

        Raises:
            PrepullFailedError: The task failed.
            TimeoutError: It was not complete in time.

        """
        return self._c.run(_wait_for_completion(task_id, poll_interval, timeout))


class AsyncPrepullService:
    """The async twin of :class:`PrepullService`: ``AsyncClient.prepull``."""

    def __init__(self, client: AsyncAPIClient) -> None:
        self._c = client

    async def create(self, image: str, *, timeout: int = 600) -> PrepullTask:
        """Start fetching an image; see :meth:`PrepullService.create`."""
        return await self._c.run(_create(image, timeout))

    async def create_for_template(self, template_name: str) -> PrepullTask:
        """Start fetching the image of a template's latest version."""
        return await self._c.run(_create_for_template(template_name))

    async def list(
        self, *, image: str | None = None, status: PrepullStatus | None = None
    ) -> list[PrepullTask]:
        """Return the prepull tasks, newest first."""
        return await self._c.run(_list(image, status))

    async def list_page(
        self,
        *,
        image: str | None = None,
        status: PrepullStatus | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        order: Order | None = None,
    ) -> PrepullList:
        """Return a page of the prepull tasks; see :meth:`PrepullService.list_page`."""
        return await self._c.run(_list_page(image, status, limit, cursor, order))

    async def get(self, task_id: str) -> PrepullTask:
        """Return a prepull task."""
        return await self._c.run(_get(task_id))

    async def delete(self, task_id: str) -> None:
        """Cancel (if active) and delete a prepull task."""
        await self._c.run(_delete(task_id))

    async def wait_for_completion(
        self, task_id: str, *, poll_interval: float = 5.0, timeout: float = 1800.0
    ) -> PrepullTask:
        """Poll a prepull task until completed; see :meth:`PrepullService.wait_for_completion`."""
        return await self._c.run(_wait_for_completion(task_id, poll_interval, timeout))
