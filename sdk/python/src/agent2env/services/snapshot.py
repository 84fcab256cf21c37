"""The snapshots service: the saved sandboxes the daemon keeps (agent2env addition).

A snapshot is taken with :meth:`SandboxService.snapshot
<agent2env.services.sandbox.SandboxService.snapshot>` and sandboxes are made
from it with :meth:`SandboxService.create_from_snapshot
<agent2env.services.sandbox.SandboxService.create_from_snapshot>`; this service
lists, reads and deletes them, and forks them (N sandboxes at once).
"""

from __future__ import annotations

from collections.abc import Mapping

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
)
from ..models.snapshot import ForkResult, Snapshot, SnapshotList
from .sandbox import _fork

__all__ = ["AsyncSnapshotService", "SnapshotService"]


def _path(snapshot_id: str) -> str:
    return f"/snapshots/{segment(snapshot_id, 'snapshot id')}"


def _list_request(
    sandbox_id: str | None, limit: int | None, cursor: str | None, order: Order | None
) -> Request:
    params: dict[str, str | int | list[str]] = {}
    if sandbox_id is not None:
        if not sandbox_id:
            raise ValueError("sandbox id is empty")
        params["sandbox_id"] = sandbox_id
    return Request("GET", "/snapshots", params=paged(params, limit, cursor, order))


def _list(sandbox_id: str | None) -> Op[list[Snapshot]]:
    return call(_list_request(sandbox_id, None, None, None), parse_items(Snapshot))


def _list_page(
    sandbox_id: str | None, limit: int | None, cursor: str | None, order: Order | None
) -> Op[SnapshotList]:
    return call(_list_request(sandbox_id, limit, cursor, order), parse_model(SnapshotList))


class SnapshotService:
    """Snapshot operations; get it as :attr:`agent2env.Client.snapshots`."""

    def __init__(self, client: SyncAPIClient) -> None:
        self._c = client

    def list(self, *, sandbox_id: str | None = None) -> list[Snapshot]:
        """Return the snapshots, newest first; only those of ``sandbox_id`` when given."""
        return self._c.run(_list(sandbox_id))

    def list_page(
        self,
        *,
        sandbox_id: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        order: Order | None = None,
    ) -> SnapshotList:
        """Return a page of the snapshots, as :meth:`list` selects them.

        Args:
            sandbox_id: Only the snapshots of this sandbox.
            limit: The page's size (1 to 1000); without it, every snapshot.
            cursor: The ``next_cursor`` of the page before.
            order: ``"asc"`` lists oldest first (the next pages newer ones),
                ``"desc"`` newest first, the default of this list.

        Raises:
            BadRequestError: ``limit`` is not from 1 to 1000, ``cursor`` not
                one the daemon gave, or ``order`` neither ``"asc"`` nor ``"desc"``.

        """
        return self._c.run(_list_page(sandbox_id, limit, cursor, order))

    def get(self, snapshot_id: str) -> Snapshot:
        """Return a snapshot; an unknown id raises NotFoundError."""
        return self._c.run(call(Request("GET", _path(snapshot_id)), parse_model(Snapshot)))

    def delete(self, snapshot_id: str) -> None:
        """Delete a snapshot and its files; sandboxes made from it are not affected."""
        self._c.run(call(Request("DELETE", _path(snapshot_id)), parse_none))

    def fork(
        self,
        snapshot_id: str,
        *,
        count: int,
        ttl: int | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> ForkResult:
        """Make ``count`` sandboxes from a snapshot in parallel, each with its contexts.

        As :meth:`SandboxService.fork <agent2env.services.sandbox.SandboxService.fork>`
        from an existing snapshot (``snapshot_id`` of the result is this one):
        copies running where the save was, the snapshot's code-interpreter
        contexts under new ids, fresh randomness in each.

        Args:
            snapshot_id: The snapshot.
            count: How many sandboxes, 1 to 32 (BadRequestError otherwise).
            ttl: Every sandbox's seconds until it expires (``0``: never).
            metadata: Every sandbox's labels.

        Raises:
            NotFoundError: The snapshot does not exist.
            ResourceLimitError: The sandboxes do not fit the daemon's limits (none is made).
            APIError: Code ``NOT_IMPLEMENTED`` (501): the runtime cannot restore.

        """
        return self._c.run(_fork(f"{_path(snapshot_id)}/fork", count, ttl, metadata))


class AsyncSnapshotService:
    """The async twin of :class:`SnapshotService`: ``AsyncClient.snapshots``."""

    def __init__(self, client: AsyncAPIClient) -> None:
        self._c = client

    async def list(self, *, sandbox_id: str | None = None) -> list[Snapshot]:
        """Return the snapshots, newest first; see :meth:`SnapshotService.list`."""
        return await self._c.run(_list(sandbox_id))

    async def list_page(
        self,
        *,
        sandbox_id: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        order: Order | None = None,
    ) -> SnapshotList:
        """Return a page of the snapshots; see :meth:`SnapshotService.list_page`."""
        return await self._c.run(_list_page(sandbox_id, limit, cursor, order))

    async def get(self, snapshot_id: str) -> Snapshot:
        """Return a snapshot; an unknown id raises NotFoundError."""
        return await self._c.run(call(Request("GET", _path(snapshot_id)), parse_model(Snapshot)))

    async def delete(self, snapshot_id: str) -> None:
        """Delete a snapshot and its files; sandboxes made from it are not affected."""
        await self._c.run(call(Request("DELETE", _path(snapshot_id)), parse_none))

    async def fork(
        self,
        snapshot_id: str,
        *,
        count: int,
        ttl: int | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> ForkResult:
        """Make ``count`` sandboxes from a snapshot; see :meth:`SnapshotService.fork`."""
        return await self._c.run(_fork(f"{_path(snapshot_id)}/fork", count, ttl, metadata))
