"""Seed 000's high-level API: run code and commands; sessions are made and reused for you.

For MCP servers and agents that want one call per action::

    from agent2env.sessions import AsyncSessionManager

    async with AsyncSessionManager() as sandbox:  # configured from the environment
        res = await sandbox.execute_code("x = 6 * 7")
        res = await sandbox.execute_code("print(x + 1)", session_id=res.session_id)
        print(res.stdout)  # 43

The first call without a ``session_id`` makes a session (a sandbox with a
live interpreter per language); a call naming a session reuses it, and a
call naming one that does not exist makes it under that id rather than
failing. The daemon removes a session once it has been idle for its timeout
and reaps sandboxes no session owns. :class:`SessionManager` is the same for
synchronous code.

Failures are exceptions a caller can tell apart: :class:`SandboxCreationError`
(the sandbox could not be made), :class:`ResourceLimitError` (a limit of the
daemon; ``usage`` and ``suggestion`` say more), :class:`CompilationError`,
:class:`RuntimeExecutionError` and :class:`SystemExecutionError` (the code did
not parse, raised, or was stopped; each carries the whole ``result``), and
:class:`ConnectionError` (the daemon cannot be reached; retry).

Every call is logged under the ``agent2env.sessions`` logger with its time:
``logging.getLogger("agent2env").setLevel(logging.DEBUG)`` shows each
request too.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import posixpath
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from typing_extensions import Self

from ._base import DEFAULT_MAX_RETRIES, ENV_TOKENS, ENV_URLS, Op, call, parse_bytes, parse_model
from .client import AsyncClient, Client
from .exceptions import (
    Agent2EnvError,
    APIError,
    CodeExecutionError,
    CompilationError,
    ConnectionError,
    InsufficientCapacityError,
    NotFoundError,
    ResourceLimitError,
    RuntimeExecutionError,
    SandboxCreationError,
    ServiceUnavailableError,
    SystemExecutionError,
    execution_error,
)
from .models.sandbox import FileInfo
from .models.session import (
    Flavor,
    Session,
    SessionCommandResult,
    SessionExecuteResult,
    SessionInfo,
    Stats,
)
from .services.sandbox import Content, _download_request, _upload_request
from .services.session import (
    Command,
    _delete,
    _execute_code,
    _execute_command,
    _get,
    _keep_alive,
    _list,
    _stats,
)

__all__ = [
    "ENV_DEFAULT_FLAVOR",
    "ENV_EXECUTION_TIMEOUT",
    "ENV_SESSION_TIMEOUT",
    "ENV_SHARED_VOLUMES",
    "FLAVORS",
    "AsyncSessionManager",
    "CodeExecutionError",
    "CompilationError",
    "ConnectionError",
    "Flavor",
    "FlavorSpec",
    "InsufficientCapacityError",
    "ResourceLimitError",
    "RuntimeExecutionError",
    "SandboxCreationError",
    "SessionConfig",
    "SessionManager",
    "SharedVolume",
    "SystemExecutionError",
    "parse_duration",
    "parse_shared_volumes",
]

log = logging.getLogger("agent2env.sessions")

R = TypeVar("R", bound=SessionInfo)

ENV_DEFAULT_FLAVOR = "MSB_DEFAULT_FLAVOR"
"""The flavor of new sessions when a call names none."""
ENV_SESSION_TIMEOUT = "MSB_SESSION_TIMEOUT"
"""The idle timeout of the sessions this client makes: seconds, or a duration such as ``30m``."""
ENV_SHARED_VOLUMES = "MSB_SHARED_VOLUME_PATH"
"""The shared volumes, as the daemon reads them (see :func:`parse_shared_volumes`)."""
ENV_EXECUTION_TIMEOUT = "SANDBOX_TIMEOUT"
"""The seconds an execution may take when a call gives no timeout."""


@dataclass(frozen=True)
class FlavorSpec:
    """The resources of a flavor's sandbox."""

    cpus: int
    memory: str


FLAVORS: Mapping[str, FlavorSpec] = {
    Flavor.SMALL.value: FlavorSpec(cpus=1, memory="1Gi"),
    Flavor.MEDIUM.value: FlavorSpec(cpus=2, memory="2Gi"),
    Flavor.LARGE.value: FlavorSpec(cpus=4, memory="4Gi"),
}
"""The daemon's built-in flavors; a daemon may configure others, which it checks by name."""


@dataclass(frozen=True)
class SharedVolume:
    """A host directory the daemon mounts into session sandboxes at ``guest``.

    Each session sees its own subdirectory of ``host`` unless the volume is
    ``common``.
    """

    host: str
    guest: str
    common: bool = False
    read_only: bool = False


def parse_shared_volumes(text: str) -> list[SharedVolume]:
    """Read ``MSB_SHARED_VOLUME_PATH`` as the daemon does.

    A JSON array of ``"host:guest"`` strings, or a comma-separated list of
    them; options may follow a third ``:`` (``common``, ``ro``, ``rw``,
    ``session``, joined by ``+``). Paths must be absolute and clean.

    Raises:
        ValueError: The text is not such a list.

    """
    text = text.strip()
    if text.startswith("["):
        try:
            items = json.loads(text)
        except ValueError as e:
            raise ValueError(f"shared volumes {text!r}: not a JSON array of strings: {e}") from e
        if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
            raise ValueError(f"shared volumes {text!r}: not a JSON array of strings")
    else:
        items = text.split(",")
    out = []
    for raw in items:
        item = raw.strip()
        if not item:
            continue
        parts = item.split(":")
        if len(parts) not in (2, 3):
            raise ValueError(f"shared volume {item!r} is not host:guest[:options]")
        options = parts[2].split("+") if len(parts) == 3 else []
        unknown = set(options) - {"common", "ro", "rw", "session"}
        if unknown:
            raise ValueError(
                f"shared volume {item!r}: option {sorted(unknown)[0]!r} "
                "is not common, session, ro or rw"
            )
        for p in parts[:2]:
            if not p.startswith("/") or posixpath.normpath(p) != p or p == "/":
                raise ValueError(
                    f"shared volume {item!r}: paths must be absolute, clean (no '..') and not /"
                )
        out.append(SharedVolume(parts[0], parts[1], "common" in options, "ro" in options))
    return out


_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")


def parse_duration(text: str) -> float:
    """Return seconds from ``"1800"``, ``"2.5"`` or a duration such as ``"30m"`` or ``"1h30m"``.

    Raises:
        ValueError: The text is neither, or not positive.

    """
    text = text.strip()
    try:
        seconds = float(text)
    except ValueError:
        pos, seconds = 0, 0.0
        for m in _DURATION.finditer(text):
            if m.start() != pos:
                break
            seconds += float(m.group(1)) * _UNITS[m.group(2)]
            pos = m.end()
        if pos != len(text) or not text:
            raise ValueError(
                f"timeout {text!r} is neither seconds nor a duration such as 30m"
            ) from None
    if not (seconds > 0 and math.isfinite(seconds)):
        raise ValueError(f"timeout {text!r} must be positive")
    return seconds


def _first(environ: Mapping[str, str], names: Sequence[str]) -> str | None:
    return next((v for v in (environ.get(n, "").strip() for n in names) if v), None)


@dataclass(frozen=True)
class SessionConfig:
    """The configuration of a session manager; :meth:`from_env` reads it from the environment.

    Attributes:
        server_url: The daemon; None reads ``AGENT2ENV_URL``, ``MSB_SERVER_URL``,
            ``SANDBOX_BASE_URL`` as :class:`agent2env.Client` does.
        api_key: The API key; None reads ``AGENT2ENV_TOKEN`` or ``MSB_API_KEY``.
        default_flavor: The flavor of new sessions when a call names none;
            None leaves it to the daemon (``small`` unless configured).
        session_timeout: Seconds a session this manager makes may stay
            idle; None leaves the daemon's timeout.
        execution_timeout: Seconds an execution may take when a call gives
            none; None leaves the daemon's default (30).
        shared_volumes: The daemon's shared volumes, for :meth:`AsyncSessionManager.shared_path`.
        request_timeout: Seconds a request may take beyond its execution's timeout.
        max_retries: Retries of idempotent requests after connection errors and 503s.

    """

    server_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    default_flavor: str | None = None
    session_timeout: float | None = None
    execution_timeout: float | None = None
    shared_volumes: tuple[SharedVolume, ...] = field(default_factory=tuple)
    request_timeout: float = 30.0
    max_retries: int = DEFAULT_MAX_RETRIES

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> SessionConfig:
        """Read the configuration from the environment (or ``environ``); ``overrides`` win.

        ``AGENT2ENV_URL``, else ``MSB_SERVER_URL``, else ``SANDBOX_BASE_URL``;
        ``AGENT2ENV_TOKEN``, else ``MSB_API_KEY``; ``MSB_DEFAULT_FLAVOR``,
        ``MSB_SESSION_TIMEOUT`` (seconds or a duration such as ``30m``),
        ``MSB_SHARED_VOLUME_PATH`` and ``SANDBOX_TIMEOUT`` (seconds).

        Raises:
            ValueError: A variable is set to something it cannot be.

        """
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {
            "server_url": _first(env, ENV_URLS),
            "api_key": _first(env, ENV_TOKENS),
        }
        if flavor := env.get(ENV_DEFAULT_FLAVOR, "").strip().lower():
            values["default_flavor"] = flavor
        for name, key in (
            (ENV_SESSION_TIMEOUT, "session_timeout"),
            (ENV_EXECUTION_TIMEOUT, "execution_timeout"),
        ):
            if raw := env.get(name, "").strip():
                try:
                    values[key] = parse_duration(raw)
                except ValueError as e:
                    raise ValueError(f"{name}: {e}") from e
        if raw := env.get(ENV_SHARED_VOLUMES, "").strip():
            try:
                values["shared_volumes"] = tuple(parse_shared_volumes(raw))
            except ValueError as e:
                raise ValueError(f"{ENV_SHARED_VOLUMES}: {e}") from e
        return replace(cls(**values), **overrides)


def _tenant(api_key: str) -> str:
    return hashlib.sha256(b"agent2env tenant\x00" + api_key.encode()).hexdigest()[:24]


def _subdir_name(tenant: str, session_id: str) -> str:
    """Return the name of a session's directory in a shared volume, as the daemon makes it."""
    plain = re.sub(r"[^A-Za-z0-9._-]", "_", session_id)
    name = f"{tenant}-{plain}" if tenant else plain
    if plain != session_id or plain.startswith(".") or len(name) > 200:
        digest = hashlib.sha256(f"{tenant}/{session_id}".encode()).hexdigest()[:16]
        name = plain.lstrip(".")[:64] + "-" + digest
    return name


class _Ops:
    """The operations of a session manager, written once for the sync and async managers."""

    def __init__(self, config: SessionConfig, api_key: str | None) -> None:
        self.config = config
        self.api_key = api_key

    def execute_code(
        self,
        code: str,
        language: str,
        session_id: str | None,
        flavor: str | None,
        timeout: float | None,
        env: Mapping[str, str] | None,
        raise_on_error: bool,
    ) -> Op[SessionExecuteResult]:
        start = time.monotonic()
        flavor = flavor or self.config.default_flavor
        if timeout is None:
            timeout = self.config.execution_timeout
        res = yield from self._session_request(
            "execute_code",
            _execute_code(code, language, session_id, flavor, timeout, env),
            session_id,
            start,
        )
        log.info(
            "execute_code session=%s language=%s created=%s success=%s execution=%.3fs total=%.3fs",
            res.session_id,
            res.language,
            res.created,
            res.success,
            res.execution_time,
            time.monotonic() - start,
        )
        if res.error is not None and not res.success:
            log.debug(
                "execute_code session=%s failed: %s (%s): %s",
                res.session_id,
                res.error.name,
                res.error.kind,
                res.error.value,
            )
            if raise_on_error:
                raise execution_error(
                    res.error.kind,
                    res.error.name,
                    res.error.value,
                    traceback=res.error.traceback,
                    session_id=res.session_id,
                    result=res,
                )
        return res

    def execute_command(
        self,
        command: Command,
        session_id: str | None,
        flavor: str | None,
        timeout: float | None,
        cwd: str | None,
        env: Mapping[str, str] | None,
        check: bool,
    ) -> Op[SessionCommandResult]:
        start = time.monotonic()
        flavor = flavor or self.config.default_flavor
        if timeout is None:
            timeout = self.config.execution_timeout
        res = yield from self._session_request(
            "execute_command",
            _execute_command(command, session_id, flavor, timeout, cwd, env),
            session_id,
            start,
        )
        log.info(
            "execute_command session=%s created=%s exit_code=%d execution=%.3fs total=%.3fs",
            res.session_id,
            res.created,
            res.exit_code,
            (res.duration_ms or 0) / 1000,
            time.monotonic() - start,
        )
        if check and res.exit_code != 0:
            last = res.stderr.strip().splitlines()[-1:] or [""]
            if res.timed_out:
                raise SystemExecutionError(
                    "TimeoutError",
                    f"the command ran past its timeout of {timeout or 30:g}s",
                    session_id=res.session_id,
                    result=res,
                )
            if res.oom_killed or res.reason:
                raise SystemExecutionError(
                    res.reason or "OutOfMemory", last[0], session_id=res.session_id, result=res
                )
            raise RuntimeExecutionError(
                f"exit status {res.exit_code}", last[0], session_id=res.session_id, result=res
            )
        return res

    def _session_request(self, what: str, op: Op[R], session_id: str | None, start: float) -> Op[R]:
        """Run a request that may make a session; tell a failure to make it apart."""
        try:
            res = yield from op
        except APIError as e:
            err = yield from self._failed(what, e, session_id, start)
            if err is e:
                raise
            raise err from e
        if res.created:
            log.info("session %s created", res.session_id)
            yield from self._set_timeout(res.session_id)
        return res

    def _set_timeout(self, session_id: str) -> Op[None]:
        """Give a session this manager made the configured idle timeout."""
        if self.config.session_timeout is None:
            return
        try:
            yield from _keep_alive(session_id, self.config.session_timeout)
        except APIError as e:
            # The code ran: its result is worth more than the timeout.
            log.warning(
                "session %s keeps the daemon's idle timeout: set %gs: %s",
                session_id,
                self.config.session_timeout,
                e,
            )

    def _failed(
        self, what: str, err: APIError, session_id: str | None, start: float
    ) -> Op[Exception]:
        """Return the exception a failed request raises: a SandboxCreationError if one applies."""
        elapsed = time.monotonic() - start
        if isinstance(err, ResourceLimitError):
            log.warning("%s session=%s refused after %.3fs: %s", what, session_id, elapsed, err)
            return err
        log.error("%s session=%s failed after %.3fs: %s", what, session_id, elapsed, err)
        if not (
            isinstance(err, NotFoundError)
            or (err.status_code >= 500 and not isinstance(err, ServiceUnavailableError))
        ):
            return err
        if session_id is not None:
            # The request may have failed in a session that exists; only
            # one that is not there now was being made.
            try:
                yield from _get(session_id)
                return err
            except NotFoundError:
                pass
            except Agent2EnvError:
                return err  # cannot tell: the first error stands
        return SandboxCreationError(
            f"could not make a sandbox for session {session_id or '(new)'}: {err.message}",
            session_id=session_id,
        )

    def stop_session(self, session_id: str) -> Op[bool]:
        try:
            yield from _delete(session_id)
        except NotFoundError:
            log.info("stop_session session=%s: no such session", session_id)
            return False
        log.info("session %s stopped", session_id)
        return True

    def write_file(
        self, session_id: str, path: str, content: Content, mode: int | None
    ) -> Op[FileInfo]:
        sess = yield from _get(session_id)
        req = _upload_request(sess.sandbox_id, path, content, "application/octet-stream", mode)
        info = yield from call(req, parse_model(FileInfo))
        log.info("write_file session=%s path=%s size=%d", session_id, info.path, info.size)
        return info

    def read_file(self, session_id: str, path: str) -> Op[bytes]:
        sess = yield from _get(session_id)
        return (yield from call(_download_request(sess.sandbox_id, path), parse_bytes))

    def shared_path(self, session_id: str, guest_path: str) -> Path:
        p = posixpath.normpath(guest_path)
        for v in self.config.shared_volumes:
            if p == v.guest or p.startswith(v.guest.rstrip("/") + "/"):
                host = Path(v.host)
                if not v.common:
                    host /= _subdir_name(_tenant(self.api_key) if self.api_key else "", session_id)
                rest = p[len(v.guest) :].lstrip("/")
                return host / rest if rest else host
        raise ValueError(f"{guest_path} is in none of the shared volumes")


class AsyncSessionManager:
    """Seed 000's session API, async: code and commands in sessions made on first use.

    Args:
        config: The configuration; default :meth:`SessionConfig.from_env`.
        client: An :class:`agent2env.AsyncClient` to use (not closed by the
            manager); by default one is made from ``config``.

    Use it as an async context manager, or ``await manager.close()`` when done.
    Calls may run concurrently, in one session or many.
    """

    def __init__(
        self, config: SessionConfig | None = None, *, client: AsyncClient | None = None
    ) -> None:
        self.config = config if config is not None else SessionConfig.from_env()
        self._owned = client is None
        self.client = client or AsyncClient(
            self.config.server_url,
            auth_token=self.config.api_key,
            timeout=self.config.request_timeout,
            max_retries=self.config.max_retries,
        )
        self._ops = _Ops(self.config, _bearer(self.client._api.config.headers))

    async def execute_code(
        self,
        code: str,
        language: str = "python",
        session_id: str | None = None,
        flavor: str | None = None,
        timeout: float | None = None,
        *,
        env: Mapping[str, str] | None = None,
        raise_on_error: bool = True,
    ) -> SessionExecuteResult:
        """Run code in a session; make the session if it does not exist.

        Args:
            code: The code.
            language: ``python``, ``javascript`` (``node``) or ``bash``.
            session_id: The session; None makes a new one, whose id the result
                carries; an id that does not exist makes it under that id.
            flavor: ``small``, ``medium`` or ``large`` (see :data:`FLAVORS`)
                for a new session; default the configuration's, else the daemon's.
            timeout: Seconds until the execution is interrupted; default the
                configuration's ``execution_timeout``, else 30.
            env: Variables set in the interpreter's environment for this
                execution only (the processes the code starts see them); what
                they replaced is put back after it.
            raise_on_error: Raise when the code fails (the default); with
                False, return the result with ``success`` false and ``error`` set.

        Returns:
            The result: ``stdout``, ``stderr``, ``results`` (rich outputs such
            as figures), ``session_id``, ``created``.

        Raises:
            CompilationError: The code did not parse.
            RuntimeExecutionError: The code raised.
            SystemExecutionError: It was stopped: timeout, out of memory, the
                interpreter lost (the session stays).
            ResourceLimitError: A new session would pass the daemon's limits.
            SandboxCreationError: The session's sandbox could not be made.
            ConnectionError: The daemon cannot be reached.

        """
        return await self.client._api.run(
            self._ops.execute_code(code, language, session_id, flavor, timeout, env, raise_on_error)
        )

    async def execute_command(
        self,
        command: Command,
        session_id: str | None = None,
        flavor: str | None = None,
        timeout: float | None = None,
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        check: bool = False,
    ) -> SessionCommandResult:
        """Run a command in a session; make the session if it does not exist.

        Args:
            command: A string, run by ``bash -c``, or an argv list.
            session_id: See :meth:`execute_code`.
            flavor: See :meth:`execute_code`.
            timeout: Seconds until the command is killed; default as :meth:`execute_code`.
            cwd: The working directory, default ``/workspace``.
            env: Extra environment variables.
            check: Raise when the command exits non-zero:
                :class:`SystemExecutionError` when it timed out or ran out of
                memory, else :class:`RuntimeExecutionError`.

        Returns:
            ``exit_code``, ``stdout``, ``stderr``, ``session_id``, ``created``.

        Raises:
            ResourceLimitError: See :meth:`execute_code`.
            SandboxCreationError: See :meth:`execute_code`.

        """
        return await self.client._api.run(
            self._ops.execute_command(command, session_id, flavor, timeout, cwd, env, check)
        )

    async def get_session_info(self, session_id: str) -> Session:
        """Return a session's state; an unknown one raises NotFoundError."""
        return await self.client._api.run(_get(session_id))

    async def list_sessions(self) -> list[Session]:
        """Return the sessions (the API key's own, when keys are on), oldest first."""
        return await self.client._api.run(_list())

    async def stop_session(self, session_id: str) -> bool:
        """Remove a session with its sandbox; return False if there was no such session."""
        return await self.client._api.run(self._ops.stop_session(session_id))

    async def keep_alive(self, session_id: str, idle_timeout: float | None = None) -> Session:
        """Move a session's idle deadline to now plus its (or the given) idle timeout."""
        return await self.client._api.run(_keep_alive(session_id, idle_timeout))

    async def get_stats(self) -> Stats:
        """Return the daemon's statistics: sessions, sandboxes, CPU and memory, executions."""
        return await self.client._api.run(_stats())

    async def write_file(
        self, session_id: str, path: str, content: Content, *, mode: int | None = None
    ) -> FileInfo:
        """Write a file into a session's sandbox, making its parent directories.

        Args:
            session_id: The session; an unknown one raises NotFoundError
                (write after the first execution, which makes the session).
            path: The file's path; a relative one is relative to ``/workspace``.
            content: Bytes (a str is UTF-8 encoded), or a binary file object,
                which is streamed, not read whole.
            mode: Permission bits such as ``0o755``; default ``0o644``.

        """
        return await self.client._api.run(self._ops.write_file(session_id, path, content, mode))

    async def read_file(self, session_id: str, path: str) -> bytes:
        """Return a file of a session's sandbox; a missing one raises NotFoundError.

        For large files, ``client.sandbox.download_to`` streams to a path
        (the session's ``sandbox_id`` is in :meth:`get_session_info`).
        """
        return await self.client._api.run(self._ops.read_file(session_id, path))

    def shared_path(self, session_id: str, guest_path: str) -> Path:
        """Return where a path of a session's shared volume is on the daemon's host.

        For a client on the daemon's host: a file written at ``guest_path``
        in the session is at the returned path, and the other way round. The
        daemon names a session's directory by its API key's tenant when it
        checks API keys; a client that sends a key assumes it does.

        Raises:
            ValueError: ``guest_path`` is in none of the configured shared volumes.

        """
        return self._ops.shared_path(session_id, guest_path)

    async def close(self) -> None:
        """Close the client, unless it was given to the constructor (sessions stay)."""
        if self._owned:
            await self.client.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()


class SessionManager:
    """The sync twin of :class:`AsyncSessionManager`: the same methods, not awaited.

    Args:
        config: The configuration; default :meth:`SessionConfig.from_env`.
        client: An :class:`agent2env.Client` to use (not closed by the manager).

    """

    def __init__(
        self, config: SessionConfig | None = None, *, client: Client | None = None
    ) -> None:
        self.config = config if config is not None else SessionConfig.from_env()
        self._owned = client is None
        self.client = client or Client(
            self.config.server_url,
            auth_token=self.config.api_key,
            timeout=self.config.request_timeout,
            max_retries=self.config.max_retries,
        )
        self._ops = _Ops(self.config, _bearer(self.client._api.config.headers))

    def execute_code(
        self,
        code: str,
        language: str = "python",
        session_id: str | None = None,
        flavor: str | None = None,
        timeout: float | None = None,
        *,
        env: Mapping[str, str] | None = None,
        raise_on_error: bool = True,
    ) -> SessionExecuteResult:
        """Run code in a session; see :meth:`AsyncSessionManager.execute_code`."""
        return self.client._api.run(
            self._ops.execute_code(code, language, session_id, flavor, timeout, env, raise_on_error)
        )

    def execute_command(
        self,
        command: Command,
        session_id: str | None = None,
        flavor: str | None = None,
        timeout: float | None = None,
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        check: bool = False,
    ) -> SessionCommandResult:
        """Run a command in a session; see :meth:`AsyncSessionManager.execute_command`."""
        return self.client._api.run(
            self._ops.execute_command(command, session_id, flavor, timeout, cwd, env, check)
        )

    def get_session_info(self, session_id: str) -> Session:
        """Return a session's state; an unknown one raises NotFoundError."""
        return self.client._api.run(_get(session_id))

    def list_sessions(self) -> list[Session]:
        """Return the sessions, oldest first."""
        return self.client._api.run(_list())

    def stop_session(self, session_id: str) -> bool:
        """Remove a session; return False if there was no such session."""
        return self.client._api.run(self._ops.stop_session(session_id))

    def keep_alive(self, session_id: str, idle_timeout: float | None = None) -> Session:
        """Move a session's idle deadline; see :meth:`AsyncSessionManager.keep_alive`."""
        return self.client._api.run(_keep_alive(session_id, idle_timeout))

    def get_stats(self) -> Stats:
        """Return the daemon's statistics."""
        return self.client._api.run(_stats())

    def write_file(
        self, session_id: str, path: str, content: Content, *, mode: int | None = None
    ) -> FileInfo:
        """Write a file into a session's sandbox; see :meth:`AsyncSessionManager.write_file`."""
        return self.client._api.run(self._ops.write_file(session_id, path, content, mode))

    def read_file(self, session_id: str, path: str) -> bytes:
        """Return a file of a session's sandbox; see :meth:`AsyncSessionManager.read_file`."""
        return self.client._api.run(self._ops.read_file(session_id, path))

    def shared_path(self, session_id: str, guest_path: str) -> Path:
        """Return a shared path on the host; see :meth:`AsyncSessionManager.shared_path`."""
        return self._ops.shared_path(session_id, guest_path)

    def close(self) -> None:
        """Close the client, unless it was given to the constructor (sessions stay)."""
        if self._owned:
            self.client.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _bearer(headers: Mapping[str, str]) -> str | None:
    auth = headers.get("Authorization", "")
    scheme, _, token = auth.partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None
