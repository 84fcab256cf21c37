"""Interactive terminals: a process on a tty in a sandbox, over the daemon's WebSocket.

:meth:`SandboxService.terminal <agent2env.services.SandboxService.terminal>`
starts a one-shot terminal, whose process ends with it;
:meth:`~agent2env.services.SandboxService.attach_terminal` attaches to a
persistent one, which goes on when the attachment closes. Both speak
Kubernetes' ``v5.channel.k8s.io`` protocol: binary messages whose first
byte is the stream (0 stdin, 1 stdout, 2 stderr, 3 the exit status, 4 a
resize, 5 the offset of the next output byte, 255 a close).
"""

from __future__ import annotations

import asyncio
import builtins
import json
import threading
from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from types import TracebackType
from typing import Any
from urllib.parse import urlencode

from typing_extensions import Self
from websockets import Subprotocol
from websockets.asyncio.client import ClientConnection as AsyncConnection
from websockets.asyncio.client import connect as async_connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus
from websockets.sync.client import ClientConnection, connect

from ._base import ClientConfig, argv, unreachable
from .exceptions import (
    Agent2EnvError,
    APIError,
    ConflictError,
    StreamError,
    TimeoutError,
    error_for_status,
)

__all__ = ["AsyncTerminal", "Terminal", "TerminalExit", "TerminalTakenOverError"]

PROTOCOL = "v5.channel.k8s.io"
_STDIN, _STDOUT, _STDERR, _STATUS, _RESIZE, _OFFSET, _CLOSE = 0, 1, 2, 3, 4, 5, 255
# The largest message the daemon sends is 32 KiB of output; a status is small.
_MAX_MESSAGE = 1 << 20
_TAKEN_OVER = "TERMINAL_TAKEN_OVER"


class TerminalTakenOverError(ConflictError):
    """Another client took over the writer's place of the persistent terminal attached to."""


@dataclass(frozen=True)
class TerminalExit:
    """How a terminal's process ended: its exit code (128+n when signal n ended it)."""

    exit_code: int


def _ws_url(config: ClientConfig, path: str, query: list[tuple[str, str]]) -> str:
    root = config.root
    if root.startswith("https://"):
        root = "wss://" + root.removeprefix("https://")
    else:
        root = "ws://" + root.removeprefix("http://")
    return f"{root}/api/v1{path}?{urlencode(query)}"


def _options(config: ClientConfig) -> dict[str, Any]:
    """Return the options of ``connect``, sync or asyncio: the client's headers, the protocol."""
    headers = {k: v for k, v in config.headers.items() if k.lower() != "user-agent"}
    agent = next((v for k, v in config.headers.items() if k.lower() == "user-agent"), None)
    return {
        "additional_headers": headers,
        "user_agent_header": agent,
        "subprotocols": [Subprotocol(PROTOCOL)],
        "max_size": _MAX_MESSAGE,
        "open_timeout": 30,
    }


def interactive_query(
    command: Sequence[str] | None,
    tty: bool,
    rows: int | None,
    cols: int | None,
    cwd: str | None,
    env: Mapping[str, str] | None,
) -> list[tuple[str, str]]:
    """Return the query of GET .../exec/interactive."""
    q = [("command", c) for c in argv(command or [])]
    q.append(("tty", "true" if tty else "false"))
    if rows:
        q.append(("rows", str(rows)))
    if cols:
        q.append(("cols", str(cols)))
    if cwd:
        q.append(("cwd", cwd))
    q.extend(("env", f"{k}={v}") for k, v in (env or {}).items())
    return q


def _refusal(e: InvalidStatus) -> APIError:
    """Return the error of an upgrade the daemon refused with an error status."""
    resp = e.response
    message, code = resp.reason_phrase or f"status {resp.status_code}", None
    try:
        body = json.loads(resp.body or b"")
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("error"), str):
        message = body["error"]
        code = body.get("code") if isinstance(body.get("code"), str) else None
    return error_for_status(resp.status_code, message, code, details=body)


def _connect_error(url: str, e: Exception) -> Agent2EnvError:
    """Return the error of a connection to ``url`` that failed: refused, timed out, not HTTP."""
    if isinstance(e, InvalidStatus):
        return _refusal(e)
    url = url.partition("?")[0]  # not the query: the command's env may hold secrets
    if isinstance(e, (builtins.TimeoutError, asyncio.TimeoutError)):
        return TimeoutError(f"connecting to the terminal at {url} timed out")
    return unreachable(url, e)


# What connecting may raise besides the daemon's refusal: the socket's errors
# (a timeout among them), an answer that is not a WebSocket upgrade.
_CONNECT_ERRORS = (OSError, asyncio.TimeoutError, InvalidHandshake)


def _read_timeout(timeout: float | None) -> TimeoutError:
    return TimeoutError(f"no terminal output in {timeout:g} s")


def _ended() -> StreamError:
    """Return the error of input sent once the terminal's connection has ended."""
    return StreamError(
        "terminal: the connection has ended (the process exited, or the terminal was closed)"
    )


def _status(payload: bytes) -> TerminalExit:
    """Read the Kubernetes Status that ends the output: the exit, or raise what failed."""
    try:
        st: Any = json.loads(payload)
    except ValueError as e:
        raise StreamError(f"terminal: malformed exit status {payload[:200]!r}") from e
    if st.get("status") == "Success":
        return TerminalExit(0)
    reason = st.get("reason")
    if reason == "NonZeroExitCode":
        for cause in (st.get("details") or {}).get("causes") or []:
            if cause.get("reason") == "ExitCode":
                return TerminalExit(int(cause.get("message")))
    message = str(st.get("message") or "the terminal failed")
    if reason == _TAKEN_OVER:
        raise TerminalTakenOverError(message, code=_TAKEN_OVER)
    raise StreamError(f"terminal: {message}")


class _State:
    """What the output stream has said so far, shared by both terminals."""

    def __init__(self, since: int) -> None:
        self.offset = since
        self.exit: TerminalExit | None = None
        self.error: Agent2EnvError | None = None

    def take(self, message: bytes | str) -> bytes | None:
        """Apply one message; return the output it carries, if any."""
        if isinstance(message, str) or not message:
            return None
        stream, payload = message[0], message[1:]
        if stream in (_STDOUT, _STDERR):
            if stream == _STDOUT:
                self.offset += len(payload)
            return payload
        if stream == _OFFSET:
            self.offset = int(payload)
        elif stream == _STATUS:
            try:
                self.exit = _status(payload)
            except Agent2EnvError as e:
                self.error = e
        return None

    def ended(self) -> Agent2EnvError:
        """Return the error of input sent after the end: why it ended, if it failed."""
        return self.error if self.error is not None else _ended()

    def end(self) -> TerminalExit:
        """Return the exit, or raise why the stream ended without one."""
        if self.error is not None:
            raise self.error
        if self.exit is None:
            raise StreamError("terminal: the connection ended before the process")
        return self.exit


def _resize(rows: int, cols: int) -> bytes:
    if rows <= 0 or cols <= 0:
        raise ValueError(f"a terminal of {rows} x {cols}")
    return bytes([_RESIZE]) + json.dumps({"Width": cols, "Height": rows}).encode()


def _input(data: bytes | str) -> bytes:
    return bytes([_STDIN]) + (data.encode() if isinstance(data, str) else data)


class Terminal:
    """A terminal in a sandbox (sync): :meth:`write` its input, :meth:`read` its output.

    Made by :meth:`SandboxService.terminal
    <agent2env.services.SandboxService.terminal>` (a one-shot terminal:
    closing it ends its process) or :meth:`~agent2env.services.SandboxService.attach_terminal`
    (closing detaches; the terminal goes on). Use it as a context manager.
    :meth:`read` and :meth:`wait` are for one thread at a time; :meth:`write`,
    :meth:`resize` and :meth:`close` may be called from another. Once the
    connection has ended, :meth:`write`, :meth:`resize` and :meth:`close_stdin`
    raise StreamError (TerminalTakenOverError once another client took over).
    """

    def __init__(
        self, conn: ClientConnection, since: int = 0, stack: ExitStack | None = None
    ) -> None:
        self._conn = conn
        self._stack = stack
        self._state = _State(since)
        self._done = False
        self._wlock = threading.Lock()

    @classmethod
    def open(
        cls, config: ClientConfig, path: str, query: list[tuple[str, str]], since: int = 0
    ) -> Self:
        """Connect to the terminal WebSocket at ``path`` with ``query``."""
        # The connection is a context manager, entered here, exited by close.
        stack = ExitStack()
        url = _ws_url(config, path, query)
        try:
            conn = stack.enter_context(connect(url, **_options(config)))
        except _CONNECT_ERRORS as e:
            raise _connect_error(url, e) from (None if isinstance(e, InvalidStatus) else e)
        return cls(conn, since, stack)

    @property
    def offset(self) -> int:
        """The offset after the last output byte read: the ``since`` to attach again with."""
        return self._state.offset

    def read(self, timeout: float | None = None) -> bytes:
        """Return the next output (stdout, and stderr without a tty); ``b""`` once it has ended.

        Raises:
            TimeoutError: No output came in ``timeout`` seconds (``agent2env.TimeoutError``,
                a built-in ``TimeoutError`` too); a later read gets the output.
            TerminalTakenOverError: Another client took over this attachment's input.
            StreamError: The connection ended before the process did.

        """
        while not self._done:
            try:
                message = self._conn.recv(timeout)
            except builtins.TimeoutError:
                raise _read_timeout(timeout) from None
            except ConnectionClosed:
                self._done = True
                break
            out = self._state.take(message)
            if out:
                return out
            if self._state.exit is not None or self._state.error is not None:
                self._done = True
        self._state.end()
        return b""

    def write(self, data: bytes | str) -> None:
        """Send input (a str is UTF-8 encoded); on a tty, a carriage return is the Enter key."""
        self._send(_input(data))

    def resize(self, rows: int, cols: int) -> None:
        """Set the size of the terminal; its programs get SIGWINCH."""
        self._send(_resize(rows, cols))

    def close_stdin(self) -> None:
        """End the input (a tty gets its end-of-file character, ``^D``)."""
        self._send(bytes([_CLOSE, _STDIN]))

    def wait(self, timeout: float | None = None) -> TerminalExit:
        """Read the output to its end, dropping it, and return how the process ended.

        ``timeout`` bounds each wait for output, as in :meth:`read`.
        """
        while self.read(timeout):
            pass
        return self._state.end()

    def _send(self, message: bytes) -> None:
        if self._done:  # its exit status came, or why it ended without one
            raise self._state.ended()
        with self._wlock:
            try:
                self._conn.send(message)
            except ConnectionClosed:
                raise _ended() from None

    def close(self) -> None:
        """Close the connection: a one-shot terminal's process ends, an attachment detaches."""
        if self._stack is not None:
            self._stack.close()
        else:
            self._conn.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class AsyncTerminal:
    """A terminal in a sandbox (async/await): the :class:`Terminal` of an :class:`AsyncClient`."""

    def __init__(self, conn: AsyncConnection, since: int = 0) -> None:
        self._conn = conn
        self._state = _State(since)
        self._done = False

    @classmethod
    async def open(
        cls, config: ClientConfig, path: str, query: list[tuple[str, str]], since: int = 0
    ) -> Self:
        """Connect to the terminal WebSocket at ``path`` with ``query``."""
        url = _ws_url(config, path, query)
        try:
            conn = await async_connect(url, **_options(config))
        except _CONNECT_ERRORS as e:
            raise _connect_error(url, e) from (None if isinstance(e, InvalidStatus) else e)
        return cls(conn, since)

    @property
    def offset(self) -> int:
        """The offset after the last output byte read: the ``since`` to attach again with."""
        return self._state.offset

    async def read(self, timeout: float | None = None) -> bytes:
        """Return the next output; ``b""`` once it has ended (see :meth:`Terminal.read`).

        Raises:
            TimeoutError: No output came in ``timeout`` seconds (``agent2env.TimeoutError``,
                a built-in ``TimeoutError`` too); a later read gets the output.
            TerminalTakenOverError: Another client took over this attachment's input.
            StreamError: The connection ended before the process did.

        """
        while not self._done:
            try:
                # Cancelling recv loses no message: a later read gets it.
                message = await asyncio.wait_for(self._conn.recv(), timeout)
            except asyncio.TimeoutError:  # not the builtin TimeoutError before Python 3.11
                raise _read_timeout(timeout) from None
            except ConnectionClosed:
                self._done = True
                break
            out = self._state.take(message)
            if out:
                return out
            if self._state.exit is not None or self._state.error is not None:
                self._done = True
        self._state.end()
        return b""

    async def write(self, data: bytes | str) -> None:
        """Send input (a str is UTF-8 encoded)."""
        await self._send(_input(data))

    async def resize(self, rows: int, cols: int) -> None:
        """Set the size of the terminal."""
        await self._send(_resize(rows, cols))

    async def close_stdin(self) -> None:
        """End the input (a tty gets ``^D``)."""
        await self._send(bytes([_CLOSE, _STDIN]))

    async def _send(self, message: bytes) -> None:
        if self._done:
            raise self._state.ended()
        try:
            await self._conn.send(message)
        except ConnectionClosed:
            raise _ended() from None

    async def wait(self, timeout: float | None = None) -> TerminalExit:
        """Read the output to its end, dropping it, and return how the process ended.

        ``timeout`` bounds each wait for output, as in :meth:`read`.
        """
        while await self.read(timeout):
            pass
        return self._state.end()

    async def close(self) -> None:
        """Close the connection: a one-shot terminal's process ends, an attachment detaches."""
        await self._conn.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()
