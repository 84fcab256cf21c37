"""The task runs' service (agent2env addition): removing ended runs.

Runs are submitted and followed with ``agent2env task`` or the REST API
(``/api/v1/runs``); here they are removed, each with its event log, output
and artifacts. The daemon removes the runs that ended longer ago than its
``--run-max-age`` (default 30 days) by itself.
"""

from __future__ import annotations

from .._async_base import AsyncAPIClient
from .._base import Op, Request, SyncAPIClient, call, parse_none, segment

__all__ = ["AsyncRunService", "RunService"]


def _delete(run_id: str) -> Op[None]:
    return call(Request("DELETE", f"/runs/{segment(run_id, 'run id')}"), parse_none)


class RunService:
    """Task run operations; get it as :attr:`agent2env.Client.runs`."""

    def __init__(self, client: SyncAPIClient) -> None:
        self._c = client

    def delete(self, run_id: str) -> None:
        """Remove an ended run with its event log, output and artifacts.

        Raises:
            ConflictError: The run has not ended (code ``CONFLICT``): cancel it first.
            NotFoundError: No such run, or another API key's.

        """
        self._c.run(_delete(run_id))


class AsyncRunService:
    """The async twin of :class:`RunService`: ``AsyncClient.runs``."""

    def __init__(self, client: AsyncAPIClient) -> None:
        self._c = client

    async def delete(self, run_id: str) -> None:
        """Remove an ended run; see :meth:`RunService.delete`."""
        await self._c.run(_delete(run_id))
