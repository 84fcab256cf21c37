"""The sessions and stats services: the daemon's sessions API (seed 000, agent2env addition).

A session is a sandbox named by an id of the client's choosing: code and
commands sent with an id that does not exist make it, later ones with that id
reuse it (its interpreters keep their state), and the daemon removes it once
it has been idle for its timeout. These services are the REST API as it is;
:mod:`agent2env.sessions` builds seed 000's high-level API on them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .._async_base import AsyncAPIClient
from .._base import (
    CREATE_MARGIN,
    TIMEOUT_MARGIN,
    Op,
    Order,
    Request,
    SyncAPIClient,
    call,
    paged,
    parse_items,
    parse_model,
    segment,
)
from ..models.sandbox import OUTPUT_ENCODING
from ..models.session import (
    DeleteSessionResult,
    Session,
    SessionCommandResult,
    SessionExecuteResult,
    SessionList,
    Stats,
)

__all__ = ["AsyncSessionService", "AsyncStatsService", "SessionService", "StatsService"]

Command = str | Sequence[str]


def _path(session_id: str, suffix: str = "") -> str:
    return f"/sessions/{segment(session_id, 'session id')}{suffix}"


def _read_timeout(timeout: float | None) -> float:
    # A request that makes a session waits for its sandbox and interpreter too.
    return (timeout or 30) + TIMEOUT_MARGIN + CREATE_MARGIN


def _execute_code(
    code: str,
    language: str | None,
    session_id: str | None,
    flavor: str | None,
    timeout: float | None,
    env: Mapping[str, str] | None,
) -> Op[SessionExecuteResult]:
    if not code:
        raise ValueError("code is empty")
    body: dict[str, Any] = {"code": code}
    for key, value in (
        ("language", language),
        ("session_id", session_id),
        ("flavor", flavor),
        ("timeout", timeout),
    ):
        if value is not None:
            body[key] = str(value) if key == "flavor" else value
    if env:
        body["env"] = dict(env)
    req = Request("POST", "/sessions/execute", json=body, min_read_timeout=_read_timeout(timeout))
    return call(req, parse_model(SessionExecuteResult))


def _execute_command(
    command: Command,
    session_id: str | None,
    flavor: str | None,
    timeout: float | None,
    cwd: str | None,
    env: Mapping[str, str] | None,
) -> Op[SessionCommandResult]:
    if not command:
        raise ValueError("command is empty")
    body: dict[str, Any] = {"command": command if isinstance(command, str) else list(command)}
    for key, value in (
        ("session_id", session_id),
        ("flavor", flavor),
        ("timeout", timeout),
        ("cwd", cwd),
        ("env", dict(env) if env is not None else None),
    ):
        if value is not None:
            body[key] = str(value) if key == "flavor" else value
    body["output_encoding"] = OUTPUT_ENCODING  # bytes that are not UTF-8 arrive as they are
    req = Request("POST", "/sessions/command", json=body, min_read_timeout=_read_timeout(timeout))
    return call(req, parse_model(SessionCommandResult))


def _get(session_id: str) -> Op[Session]:
    return call(Request("GET", _path(session_id)), parse_model(Session))


def _list() -> Op[list[Session]]:
    return call(Request("GET", "/sessions"), parse_items(Session))


def _list_page(limit: int | None, cursor: str | None, order: Order | None) -> Op[SessionList]:
    params = paged({}, limit, cursor, order)
    return call(Request("GET", "/sessions", params=params), parse_model(SessionList))


def _delete(session_id: str) -> Op[DeleteSessionResult]:
    return call(Request("DELETE", _path(session_id)), parse_model(DeleteSessionResult))


def _keep_alive(session_id: str, idle_timeout: float | None) -> Op[Session]:
    body = {} if idle_timeout is None else {"idle_timeout": idle_timeout}
    return call(Request("POST", _path(session_id, "/keepalive"), json=body), parse_model(Session))


def _stats() -> Op[Stats]:
    return call(Request("GET", "/stats"), parse_model(Stats))


class SessionService:
    """The sessions API; get it as :attr:`agent2env.Client.sessions`."""

    def __init__(self, client: SyncAPIClient) -> None:
        self._c = client

    def execute_code(
        self,
        code: str,
        *,
        language: str | None = None,
        session_id: str | None = None,
        flavor: str | None = None,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
    ) -> SessionExecuteResult:
        """Run code in a session, making the session when it does not exist.

        Code that fails is a result with ``success`` false and ``error`` set
        (with its ``kind``), not an exception.

        Args:
            code: The code.
            language: ``python`` (the daemon's default), ``javascript`` or
                ``bash``, or an alias (``py``, ``js``, ``node``, ``sh``).
            session_id: The session; None makes a new one under a generated
                id, an unknown id makes it under that id.
            flavor: The size of a new session's sandbox: ``small`` (the
                daemon's default), ``medium``, ``large`` or one the daemon
                configures; ignored for a session that exists.
            timeout: Seconds until the execution is interrupted (default 30).
            env: Variables for this execution only, as in
                :meth:`ContextService.execute`.

        Returns:
            The result, with ``session_id``, ``created`` (this request made
            the session) and ``expires_at`` (its idle deadline now).

        Raises:
            ResourceLimitError: A new session would pass the daemon's
                maximum of sandboxes (429) or its host's capacity
                (:class:`InsufficientCapacityError`, 507); ``usage`` and
                ``suggestion`` say more.
            BadRequestError: An invalid language, flavor or session id.

        """
        return self._c.run(_execute_code(code, language, session_id, flavor, timeout, env))

    def execute_command(
        self,
        command: Command,
        *,
        session_id: str | None = None,
        flavor: str | None = None,
        timeout: float | None = None,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> SessionCommandResult:
        """Run a command in a session, making the session as :meth:`execute_code` does.

        Args:
            command: A string, run by ``bash -c``, or an argv list.
            session_id: See :meth:`execute_code`.
            flavor: See :meth:`execute_code`.
            timeout: Seconds until the command's process group is killed (default 30).
            cwd: The working directory, default ``/workspace``.
            env: Extra environment variables.

        Returns:
            The exit code and output (a non-zero exit code is a result), with the session;
            ``stdout_bytes`` and ``stderr_bytes`` are the output's exact bytes.

        """
        return self._c.run(_execute_command(command, session_id, flavor, timeout, cwd, env))

    def get(self, session_id: str) -> Session:
        """Return a session; an unknown one raises NotFoundError (``SESSION_NOT_FOUND``)."""
        return self._c.run(_get(session_id))

    def list(self) -> list[Session]:
        """Return the sessions (the API key's own, when keys are on), oldest first."""
        return self._c.run(_list())

    def list_page(
        self, *, limit: int | None = None, cursor: str | None = None, order: Order | None = None
    ) -> SessionList:
        """Return a page of the sessions (agent2env addition), as :meth:`list` selects them.

        Args:
            limit: The page's size (1 to 1000); without it, every session.
            cursor: The ``next_cursor`` of the page before.
            order: ``"desc"`` lists newest first (the next pages older ones),
                ``"asc"`` oldest first, the default.

        Raises:
            BadRequestError: ``limit`` is not from 1 to 1000, ``cursor`` not
                one the daemon gave, or ``order`` neither ``"asc"`` nor ``"desc"``.

        """
        return self._c.run(_list_page(limit, cursor, order))

    def delete(self, session_id: str) -> DeleteSessionResult:
        """Remove a session with its sandbox and interpreters; what runs in it ends."""
        return self._c.run(_delete(session_id))

    def keep_alive(self, session_id: str, *, idle_timeout: float | None = None) -> Session:
        """Move a session's idle deadline to now plus its idle timeout.

        ``idle_timeout`` (seconds) replaces the session's timeout first. The
        daemon's maximum lifetime of a session still applies.
        """
        return self._c.run(_keep_alive(session_id, idle_timeout))


class AsyncSessionService:
    """The async twin of :class:`SessionService`: ``AsyncClient.sessions``."""

    def __init__(self, client: AsyncAPIClient) -> None:
        self._c = client

    async def execute_code(
        self,
        code: str,
        *,
        language: str | None = None,
        session_id: str | None = None,
        flavor: str | None = None,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
    ) -> SessionExecuteResult:
        """Run code in a session; see :meth:`SessionService.execute_code`."""
        return await self._c.run(_execute_code(code, language, session_id, flavor, timeout, env))

    async def execute_command(
        self,
        command: Command,
        *,
        session_id: str | None = None,
        flavor: str | None = None,
        timeout: float | None = None,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> SessionCommandResult:
        """Run a command in a session; see :meth:`SessionService.execute_command`."""
        return await self._c.run(_execute_command(command, session_id, flavor, timeout, cwd, env))

    async def get(self, session_id: str) -> Session:
        """Return a session; an unknown one raises NotFoundError."""
        return await self._c.run(_get(session_id))

    async def list(self) -> list[Session]:
        """Return the sessions, oldest first."""
        return await self._c.run(_list())

    async def list_page(
        self, *, limit: int | None = None, cursor: str | None = None, order: Order | None = None
    ) -> SessionList:
        """Return a page of the sessions; see :meth:`SessionService.list_page`."""
        return await self._c.run(_list_page(limit, cursor, order))

    async def delete(self, session_id: str) -> DeleteSessionResult:
        """Remove a session with its sandbox and interpreters."""
        return await self._c.run(_delete(session_id))

    async def keep_alive(self, session_id: str, *, idle_timeout: float | None = None) -> Session:
        """Move a session's idle deadline; see :meth:`SessionService.keep_alive`."""
        return await self._c.run(_keep_alive(session_id, idle_timeout))


class StatsService:
    """The daemon's statistics; get it as :attr:`agent2env.Client.stats`."""

    def __init__(self, client: SyncAPIClient) -> None:
        self._c = client

    def get(self) -> Stats:
        """Return the sessions, sandboxes by status, CPU and memory, and executions."""
        return self._c.run(_stats())


class AsyncStatsService:
    """The async twin of :class:`StatsService`: ``AsyncClient.stats``."""

    def __init__(self, client: AsyncAPIClient) -> None:
        self._c = client

    async def get(self) -> Stats:
        """Return the daemon's statistics; see :meth:`StatsService.get`."""
        return await self._c.run(_stats())
