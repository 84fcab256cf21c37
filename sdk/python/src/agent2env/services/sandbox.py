"""The sandbox service: lifecycle, commands, files and logs (seed 003 §5.1 and additions)."""

from __future__ import annotations

import builtins
import math
import os
import posixpath
import time
from collections.abc import AsyncGenerator, Generator, Mapping, Sequence
from typing import IO, Any

from .._async_base import AsyncAPIClient
from .._base import (
    TIMEOUT_MARGIN,
    Op,
    Order,
    Request,
    SyncAPIClient,
    argv,
    call,
    dump,
    error_from_event,
    open_sink,
    paged,
    parse_bytes,
    parse_items,
    parse_model,
    parse_none,
    segment,
    sleep,
    stream_ended,
)
from .._sse import SSEEvent
from ..exceptions import SandboxFailedError, TimeoutError
from ..models.sandbox import (
    OUTPUT_ENCODING,
    ExecEvent,
    ExecResult,
    FileInfo,
    LogsResult,
    Sandbox,
    SandboxList,
    SandboxOverrides,
    SandboxStatus,
    TerminalInfo,
)
from ..models.snapshot import ForkResult, Snapshot
from ..terminal import AsyncTerminal, Terminal, interactive_query

__all__ = ["AsyncSandboxService", "SandboxService"]

Overrides = SandboxOverrides | Mapping[str, Any] | None
Content = bytes | str | IO[bytes]
Destination = str | os.PathLike[str] | IO[bytes]

SNAPSHOT_TIMEOUT = 300.0
"""Seconds a snapshot or a restore may take: saving and loading memory scale with its size."""

# The statuses a sandbox does not leave for running on its own (paused: until
# it is resumed).
_FINAL = (
    SandboxStatus.FAILED,
    SandboxStatus.SUCCEEDED,
    SandboxStatus.TERMINATING,
    SandboxStatus.PAUSED,
)


def _path(sandbox_id: str, suffix: str = "") -> str:
    return f"/sandboxes/{segment(sandbox_id, 'sandbox id')}{suffix}"


def _list_request(
    status: str | Sequence[str] | None, limit: int | None, cursor: str | None, order: Order | None
) -> Request:
    params: dict[str, str | int | list[str]] = {}
    if status is not None:
        params["status"] = [status] if isinstance(status, str) else [str(s) for s in status]
    return Request("GET", "/sandboxes", params=paged(params, limit, cursor, order))


def _list(status: str | Sequence[str] | None, order: Order | None) -> Op[list[Sandbox]]:
    return call(_list_request(status, None, None, order), parse_items(Sandbox))


def _list_page(
    status: str | Sequence[str] | None, limit: int | None, cursor: str | None, order: Order | None
) -> Op[SandboxList]:
    return call(_list_request(status, limit, cursor, order), parse_model(SandboxList))


def _create(
    template: str,
    template_version: int | None,
    overrides: Overrides,
    metadata: Mapping[str, str] | None,
) -> Op[Sandbox]:
    body: dict[str, Any] = {"template": template}
    if template_version is not None:
        body["templateVersion"] = template_version
    if overrides is not None:
        body["overrides"] = dump(SandboxOverrides.model_validate(overrides))
    if metadata is not None:
        body["metadata"] = dict(metadata)
    return call(Request("POST", "/sandboxes", json=body), parse_model(Sandbox))


def _create_from_image(
    image: str,
    cpu: str | None,
    memory: str | None,
    ttl: int | None,
    env: Mapping[str, str] | None,
    metadata: Mapping[str, str] | None,
) -> Op[Sandbox]:
    body = {
        "image": image,
        "cpu": cpu,
        "memory": memory,
        "ttl": ttl,
        "env": env,
        "metadata": metadata,
    }
    body = {k: v for k, v in body.items() if v is not None}
    return call(Request("POST", "/sandboxes", json=body), parse_model(Sandbox))


def _create_from_snapshot(
    snapshot_id: str, ttl: int | None, metadata: Mapping[str, str] | None
) -> Op[Sandbox]:
    if not snapshot_id:
        raise ValueError("snapshot id is empty")
    body: dict[str, Any] = {"from_snapshot": snapshot_id}
    if ttl is not None:
        body["ttl"] = ttl
    if metadata is not None:
        body["metadata"] = dict(metadata)
    req = Request("POST", "/sandboxes", json=body, min_read_timeout=SNAPSHOT_TIMEOUT)
    return call(req, parse_model(Sandbox))


def _snapshot(sandbox_id: str, stop: bool) -> Op[Snapshot]:
    body = {"stop": True} if stop else {}
    req = Request(
        "POST", _path(sandbox_id, "/snapshots"), json=body, min_read_timeout=SNAPSHOT_TIMEOUT
    )
    return call(req, parse_model(Snapshot))


def _fork(
    path: str, count: int, ttl: int | None, metadata: Mapping[str, str] | None
) -> Op[ForkResult]:
    """Fork a sandbox or a snapshot: ``path`` ends in ``/fork``."""
    body: dict[str, Any] = {"count": count}
    if ttl is not None:
        body["ttl"] = ttl
    if metadata is not None:
        body["metadata"] = dict(metadata)
    req = Request("POST", path, json=body, min_read_timeout=SNAPSHOT_TIMEOUT)
    return call(req, parse_model(ForkResult))


def _exec_request(
    suffix: str,
    sandbox_id: str,
    command: list[str],
    timeout: int,
    env: Mapping[str, str] | None,
    cwd: str | None,
    stdin: str | None,
    *,
    stream: bool = False,
) -> Request:
    command = argv(command)
    if not command:
        raise ValueError("command is empty")
    body: dict[str, Any] = {"command": command, "timeout": timeout}
    for key, value in (("env", env), ("cwd", cwd), ("stdin", stdin)):
        if value is not None:
            body[key] = value
    # Output as base64, so that bytes that are not UTF-8 arrive as they are.
    body["output_encoding"] = OUTPUT_ENCODING
    read = math.inf if stream else (timeout or 30) + TIMEOUT_MARGIN
    return Request("POST", _path(sandbox_id, suffix), json=body, min_read_timeout=read)


def _upload_request(
    sandbox_id: str, path: str, content: Any, content_type: str, mode: int | None
) -> Request:
    if not path:
        raise ValueError("path is empty")
    # path and mode go before the file, so that the daemon streams the file
    # straight to its place (httpx writes form fields before files).
    data = {"path": path}
    if mode is not None:
        data["mode"] = f"{mode & 0o777:04o}"
    if isinstance(content, str):
        content = content.encode()
    name = posixpath.basename(path.rstrip("/")) or "file"
    return Request(
        "POST",
        _path(sandbox_id, "/files"),
        data=data,
        files={"file": (name, content, content_type)},
    )


def _upload_path(
    sandbox_id: str, path: str, local_path: str | os.PathLike[str], mode: int | None
) -> Op[FileInfo]:
    with open(local_path, "rb") as f:
        return (
            yield from call(
                _upload_request(sandbox_id, path, f, "application/octet-stream", mode),
                parse_model(FileInfo),
            )
        )


def _download_request(sandbox_id: str, path: str) -> Request:
    if not path:
        raise ValueError("path is empty")
    return Request(
        "GET", _path(sandbox_id, "/files"), params={"path": path}, min_read_timeout=math.inf
    )


def _control_sandbox(sandbox_id: str, suffix: str) -> Op[Sandbox]:
    """Post a request without a body (pause, resume) that answers with the sandbox."""
    return call(Request("POST", _path(sandbox_id, suffix)), parse_model(Sandbox))


def _wait_for_ready(sandbox_id: str, poll_interval: float, timeout: float) -> Op[Sandbox]:
    deadline = time.monotonic() + timeout
    while True:
        sb = yield from call(Request("GET", _path(sandbox_id)), parse_model(Sandbox))
        if sb.status == SandboxStatus.RUNNING:
            return sb
        if sb.status in _FINAL:
            if sb.status == SandboxStatus.FAILED:
                message = "Sandbox failed to start"
            elif sb.status == SandboxStatus.PAUSED:
                message = "Sandbox is paused (resume it to have it run)"
            else:
                message = f"Sandbox is {sb.status}"
            if sb.reason:
                message += f": {sb.reason}"
            raise SandboxFailedError(sb.id, message, status=sb.status.value, reason=sb.reason)
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(
                f"sandbox {sandbox_id} not ready after {timeout:g}s (status {sb.status})"
            )
        yield from sleep(min(poll_interval, remaining))


class ExecStreamParser:
    """Turns the events of a streamed command into :class:`ExecEvent` objects, up to ``exit``."""

    def __init__(self) -> None:
        self.done = False

    def feed(self, event: SSEEvent) -> ExecEvent | None:
        """Take one event; an ``error`` event raises the daemon's error."""
        if event.event == "error":
            raise error_from_event(event)
        if event.event not in ("stdout", "stderr", "exit"):
            return None  # an event of a newer daemon
        self.done = event.event == "exit"
        return ExecEvent.model_validate({**event.json(), "type": event.event})

    def finish(self) -> None:
        """Raise: the stream ended without an ``exit`` event."""
        raise stream_ended("command output")


def _terminal_body(
    name: str | None,
    command: Sequence[str] | None,
    rows: int | None,
    cols: int | None,
    cwd: str | None,
    env: Mapping[str, str] | None,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": name,
        "command": argv(command or []) or None,
        "rows": rows,
        "cols": cols,
    }
    body.update(cwd=cwd, env=dict(env) if env else None)
    return {k: v for k, v in body.items() if v is not None}


def _terminal_path(sandbox_id: str, name: str, suffix: str = "") -> str:
    return _path(sandbox_id, f"/terminals/{segment(name, 'terminal name')}{suffix}")


def _attach_query(since: int, read_only: bool, takeover: bool) -> list[tuple[str, str]]:
    flag = {True: "true", False: "false"}
    return [("since", str(since)), ("readonly", flag[read_only]), ("takeover", flag[takeover])]


class SandboxService:
    """Sandbox operations: lifecycle (stop, start, restart, pause, resume), snapshots, exec, files.

    Get it as :attr:`agent2env.Client.sandbox`.
    """

    def __init__(self, client: SyncAPIClient) -> None:
        self._c = client

    def create(
        self,
        template: str,
        *,
        template_version: int | None = None,
        overrides: Overrides = None,
        metadata: Mapping[str, str] | None = None,
    ) -> Sandbox:
        """Create a sandbox from a template.

        Args:
            template: The template's name.
            template_version: The version to use; the latest by default.
            overrides: Values replacing the template's: ``cpu``, ``memory``,
                ``ttl``, ``env`` (a :class:`SandboxOverrides` or a dict).
            metadata: Labels kept with the sandbox and shown in :attr:`Sandbox.metadata`
                (agent2env addition): at most 64, Kubernetes label syntax.

        Returns:
            The new sandbox: ``running`` when its image was stored and it has
            no startup steps, else ``pending`` (see :meth:`wait_for_ready`).

        Raises:
            NotFoundError: The template or version does not exist.
            BadRequestError: The request is invalid.
            ResourceLimitError: The daemon's maximum of sandboxes is reached.

        """
        return self._c.run(_create(template, template_version, overrides, metadata))

    def create_from_image(
        self,
        image: str,
        *,
        cpu: str | None = None,
        memory: str | None = None,
        ttl: int | None = None,
        env: Mapping[str, str] | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> Sandbox:
        """Create a sandbox from an image, such as ``agent2env/python`` (agent2env addition).

        Unset values take the daemon's defaults; ``ttl=0`` never expires; ``metadata``
        labels the sandbox as in :meth:`create`.
        """
        return self._c.run(_create_from_image(image, cpu, memory, ttl, env, metadata))

    def get(self, sandbox_id: str) -> Sandbox:
        """Return a sandbox; an unknown id raises NotFoundError."""
        return self._c.run(call(Request("GET", _path(sandbox_id)), parse_model(Sandbox)))

    def delete(self, sandbox_id: str) -> None:
        """Stop a sandbox and remove it with its files."""
        self._c.run(call(Request("DELETE", _path(sandbox_id)), parse_none))

    def stop(self, sandbox_id: str) -> None:
        """Stop a running sandbox, keeping its files (status ``succeeded``); else ConflictError."""
        self._c.run(call(Request("POST", _path(sandbox_id, "/stop")), parse_none))

    def start(self, sandbox_id: str) -> None:
        """Start a stopped sandbox again with its files; it is ``pending`` until ready."""
        self._c.run(call(Request("POST", _path(sandbox_id, "/start")), parse_none))

    def restart(self, sandbox_id: str) -> None:
        """Stop a sandbox (if running) and start it again, keeping its files."""
        self._c.run(call(Request("POST", _path(sandbox_id, "/restart")), parse_none))

    def pause(self, sandbox_id: str) -> Sandbox:
        """Freeze a running sandbox's processes in memory and return it ``paused``.

        It uses no CPU until :meth:`resume`, keeps its memory, files and
        processes, still counts against the daemon's capacity, and its TTL
        runs on (paused time counts). Exec, files and contexts raise
        ConflictError (code ``SANDBOX_NOT_READY``) meanwhile; :meth:`stop`,
        :meth:`restart` and :meth:`delete` work as they do on a running one.

        Raises:
            ConflictError: The sandbox is not running.
            APIError: Code ``NOT_IMPLEMENTED`` (501): the runtime cannot pause
                (the kubernetes runtime).

        """
        return self._c.run(_control_sandbox(sandbox_id, "/pause"))

    def resume(self, sandbox_id: str) -> Sandbox:
        """Let a paused sandbox's processes run again where they were; return it ``running``.

        Raises ConflictError when the sandbox is not paused.
        """
        return self._c.run(_control_sandbox(sandbox_id, "/resume"))

    def snapshot(self, sandbox_id: str, *, stop: bool = False) -> Snapshot:
        """Save a running or paused sandbox whole: its processes with their memory, files, spec.

        Live by default: the sandbox is frozen only while it is saved and
        runs on (a paused one stays paused); with ``stop=True`` it is stopped
        once saved (status ``succeeded``), its memory freed. The snapshot
        outlives the sandbox and a restart of the daemon; make sandboxes
        from it with :meth:`create_from_snapshot`, list and delete it with
        :attr:`agent2env.Client.snapshots` (agent2env addition).

        Raises:
            ConflictError: The sandbox is neither running nor paused.
            ServiceUnavailableError: A connection through the sandbox's
                services or a request to its agent was still open after 5 s;
                the sandbox is left as it was.
            APIError: Code ``NOT_IMPLEMENTED`` (501): the runtime cannot
                snapshot (the kubernetes runtime, or the daemon has no
                working criu: ``serve --criu``).

        """
        return self._c.run(_snapshot(sandbox_id, stop))

    def create_from_snapshot(
        self,
        snapshot_id: str,
        *,
        ttl: int | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> Sandbox:
        """Make a sandbox from a snapshot, its processes and files as saved (agent2env addition).

        The new sandbox has its own id and the snapshot's image, resources,
        environment and network; it is ``running`` when returned. Each call
        makes another independent copy. Its ``contexts`` maps the id of each
        context of the snapshot to the id of the same context in it.

        Args:
            snapshot_id: The snapshot.
            ttl: Seconds until it expires (``0``: never); the daemon's default when unset.
            metadata: Labels, as in :meth:`create`.

        Raises:
            NotFoundError: The snapshot does not exist.
            APIError: Code ``NOT_IMPLEMENTED`` (501): the runtime cannot restore.

        """
        return self._c.run(_create_from_snapshot(snapshot_id, ttl, metadata))

    def fork(
        self,
        sandbox_id: str,
        *,
        count: int,
        ttl: int | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> ForkResult:
        """Make ``count`` copies of a running sandbox in parallel, processes and memory included.

        One prepared state, N rollouts (agent2env addition). The call takes
        a live snapshot of the sandbox (frozen only while saved, it runs
        on), kept as ``snapshot_id`` (delete it with
        :meth:`SnapshotService.delete <agent2env.services.snapshot.SnapshotService.delete>`),
        and makes the copies from it, ``running`` when returned. Each has
        its own id, hostname, network and files, and the sandbox's
        code-interpreter contexts under new ids (``ForkedSandbox.contexts``:
        old id to new id) with their variables; every interpreter's random
        generators are reseeded, so copies do not draw the same numbers.
        All copies are admitted before any is made, and a fork that fails
        part-way deletes what it made.

        Args:
            sandbox_id: The sandbox, running or paused.
            count: How many copies, 1 to 32 (the daemon's bound; BadRequestError
                otherwise).
            ttl: Every copy's seconds until it expires (``0``: never); the
                daemon's default when unset.
            metadata: Every copy's labels, as in :meth:`create`.

        Raises:
            BadRequestError: ``count`` is out of bounds.
            NotFoundError: The sandbox does not exist.
            ConflictError: The sandbox is neither running nor paused.
            ResourceLimitError: The copies do not fit the daemon's limits (none is made).
            InsufficientCapacityError: The copies do not fit the host (none is made).
            APIError: Code ``NOT_IMPLEMENTED`` (501): the runtime cannot snapshot.

        """
        return self._c.run(_fork(_path(sandbox_id, "/fork"), count, ttl, metadata))

    def execute(
        self,
        sandbox_id: str,
        command: list[str],
        *,
        timeout: int = 30,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        stdin: str | None = None,
    ) -> ExecResult:
        """Run a command in a sandbox and return its result once it has exited.

        Args:
            sandbox_id: The sandbox.
            command: The argv, such as ``["python", "-c", "print('hello')"]``;
                no shell is involved.
            timeout: Seconds until the command's process group is killed
                (``0``: the daemon's default, 30).
            env: Extra environment variables (agent2env addition).
            cwd: The working directory, default ``/workspace`` (agent2env addition).
            stdin: The command's standard input (agent2env addition).

        Returns:
            The exit code and output; a non-zero exit code is a result, not an error.
            ``stdout_bytes`` and ``stderr_bytes`` are the output exactly as the
            command wrote it, ``stdout`` and ``stderr`` its text.

        Raises:
            ConflictError: The sandbox is not running (code ``SANDBOX_NOT_READY``).

        """
        req = _exec_request("/exec", sandbox_id, command, timeout, env, cwd, stdin)
        return self._c.run(call(req, parse_model(ExecResult)))

    def execute_stream(
        self,
        sandbox_id: str,
        command: list[str],
        *,
        timeout: int = 30,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        stdin: str | None = None,
    ) -> Generator[ExecEvent, None, None]:
        """Run a command, yielding its output as it is produced (agent2env addition).

        Yields ``stdout`` and ``stderr`` events (``data_bytes``: the chunk
        exactly as the command wrote it; ``data``: its text), then one ``exit``
        event with the exit code. The arguments are those of :meth:`execute`. The
        request is sent when iteration starts; to stop reading early and
        close the connection at once, wrap the iterator in
        ``contextlib.closing``.
        """
        req = _exec_request(
            "/exec/stream", sandbox_id, command, timeout, env, cwd, stdin, stream=True
        )
        return self._c.iter_stream(req, ExecStreamParser())

    def get_logs(self, sandbox_id: str) -> LogsResult:
        """Return a sandbox's console output and its status history."""
        return self._c.run(
            call(Request("GET", _path(sandbox_id, "/logs")), parse_model(LogsResult))
        )

    def upload_file(
        self,
        sandbox_id: str,
        path: str,
        content: Content,
        *,
        content_type: str = "application/octet-stream",
        mode: int | None = None,
    ) -> FileInfo:
        """Write a file into a sandbox, creating its parent directories.

        Args:
            sandbox_id: The sandbox.
            path: The file's path; a relative one is relative to ``/workspace``.
            content: The bytes (a str is UTF-8 encoded), or a binary file
                object, which is streamed, not read whole.
            content_type: The upload's media type.
            mode: Permission bits such as ``0o755``; the daemon's default is ``0o644``.

        Returns:
            The written file (agent2env answers with it; LiteBoxd with nothing).

        """
        req = _upload_request(sandbox_id, path, content, content_type, mode)
        return self._c.run(call(req, parse_model(FileInfo)))

    def upload_path(
        self,
        sandbox_id: str,
        path: str,
        local_path: str | os.PathLike[str],
        *,
        mode: int | None = None,
    ) -> FileInfo:
        """Stream the local file ``local_path`` into a sandbox at ``path`` (agent2env addition)."""
        return self._c.run(_upload_path(sandbox_id, path, local_path, mode))

    def download_file(self, sandbox_id: str, path: str) -> bytes:
        """Return the content of a file in a sandbox; a missing file raises NotFoundError."""
        return self._c.run(call(_download_request(sandbox_id, path), parse_bytes))

    def download_to(self, sandbox_id: str, path: str, destination: Destination) -> int:
        """Stream a file of a sandbox to a local path or a binary file object (agent2env addition).

        Returns the number of bytes written. A local path is replaced only
        once the download is complete: a failed download (a wrong path, a
        lost connection) leaves a file already there as it was.
        """
        with open_sink(destination) as write:
            return self._c.download(_download_request(sandbox_id, path), write)

    def wait_for_ready(
        self, sandbox_id: str, *, poll_interval: float = 2.0, timeout: float = 300.0
    ) -> Sandbox:
        """Poll a sandbox until it is running and return it.

        Args:
            sandbox_id: The sandbox.
            poll_interval: Seconds between polls.
            timeout: Seconds to wait at most.

        Raises:
            TimeoutError: The sandbox was not running in time.
            SandboxFailedError: It reached ``failed``, ``succeeded`` or
                ``terminating``, which it will not leave for running, or
                ``paused``, which only a resume leaves.

        """
        return self._c.run(_wait_for_ready(sandbox_id, poll_interval, timeout))

    def list(
        self,
        *,
        status: SandboxStatus | str | Sequence[SandboxStatus | str] | None = None,
        order: Order | None = None,
    ) -> list[Sandbox]:
        """Return the sandboxes, oldest first, or newest first with ``order="desc"``.

        Args:
            status: Only the sandboxes in this status, or in one of these
                (``SandboxStatus.PAUSED`` finds the paused ones,
                ``SandboxStatus.RUNNING`` not them).
            order: ``"desc"`` lists newest first, ``"asc"`` oldest first, the
                default.

        Raises:
            BadRequestError: A status is not one, or ``order`` neither
                ``"asc"`` nor ``"desc"``.

        """
        return self._c.run(_list(status, order))

    def list_page(
        self,
        *,
        status: SandboxStatus | str | Sequence[SandboxStatus | str] | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        order: Order | None = None,
    ) -> SandboxList:
        """Return a page of the sandboxes (agent2env addition), as :meth:`list` selects them.

        Args:
            status: As :meth:`list`'s.
            limit: The page's size (1 to 1000); without it, every sandbox.
            cursor: The ``next_cursor`` of the page before.
            order: ``"desc"`` lists newest first (the next pages older ones),
                ``"asc"`` oldest first, the default.

        Raises:
            BadRequestError: A status is not one, ``limit`` not from 1 to
                1000, ``cursor`` not one the daemon gave, or ``order``
                neither ``"asc"`` nor ``"desc"``.

        """
        return self._c.run(_list_page(status, limit, cursor, order))

    def terminal(
        self,
        sandbox_id: str,
        command: Sequence[str] | None = None,
        *,
        tty: bool = True,
        rows: int | None = None,
        cols: int | None = None,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> Terminal:
        r"""Start a command (the login shell by default) on a terminal and connect to it.

        A one-shot terminal (agent2env addition): its process ends when it
        exits or the terminal is closed. ``rows`` x ``cols`` is the tty's
        size (24 x 80 by default); ``tty=False`` runs the command on pipes,
        its stderr apart. Use it as a context manager::

            with client.sandbox.terminal(sandbox.id, ["sh", "-c", "read x; exit 3"]) as term:
                term.write(b"go\r")
                print(term.wait().exit_code)

        Raises:
            ConflictError: The sandbox is not running.
            NotFoundError: There is no such sandbox.
            ConnectionError: The daemon could not be reached.

        """
        query = interactive_query(command, tty, rows, cols, cwd, env)
        return Terminal.open(self._c.config, _path(sandbox_id, "/exec/interactive"), query)

    def create_terminal(
        self,
        sandbox_id: str,
        name: str | None = None,
        command: Sequence[str] | None = None,
        *,
        rows: int | None = None,
        cols: int | None = None,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> TerminalInfo:
        """Start a persistent terminal: it outlives its connections (agent2env addition).

        The sandbox holds it, with its last MiB of output, until its process
        exits, :meth:`delete_terminal` or the sandbox ends; attach to it with
        :meth:`attach_terminal`. ``name`` is made up when not given.

        Raises:
            ConflictError: A running terminal has that name.

        """
        body = _terminal_body(name, command, rows, cols, cwd, env)
        req = Request("POST", _path(sandbox_id, "/terminals"), json=body)
        return self._c.run(call(req, parse_model(TerminalInfo)))

    def list_terminals(self, sandbox_id: str) -> builtins.list[TerminalInfo]:
        """Return a sandbox's persistent terminals, running and ended, oldest first."""
        req = Request("GET", _path(sandbox_id, "/terminals"))
        return self._c.run(call(req, parse_items(TerminalInfo)))

    def get_terminal(self, sandbox_id: str, name: str) -> TerminalInfo:
        """Return a persistent terminal; an unknown one raises NotFoundError."""
        req = Request("GET", _terminal_path(sandbox_id, name))
        return self._c.run(call(req, parse_model(TerminalInfo)))

    def delete_terminal(self, sandbox_id: str, name: str) -> TerminalInfo:
        """End a persistent terminal with all it started; return how it ended."""
        req = Request("DELETE", _terminal_path(sandbox_id, name))
        return self._c.run(call(req, parse_model(TerminalInfo)))

    def attach_terminal(
        self,
        sandbox_id: str,
        name: str,
        *,
        since: int = 0,
        read_only: bool = False,
        takeover: bool = False,
    ) -> Terminal:
        """Attach to a persistent terminal; closing the attachment leaves it running.

        Its output is replayed from offset ``since`` (0: all it keeps; a
        previous attachment's :attr:`Terminal.offset` to go on where it
        left). One client at a time writes: another writer raises
        ConflictError unless ``takeover``, which ends the first one's
        attachment (its reads raise TerminalTakenOverError); ``read_only``
        watches beside the writer.
        """
        path = _terminal_path(sandbox_id, name, "/attach")
        query = _attach_query(since, read_only, takeover)
        return Terminal.open(self._c.config, path, query, since)


class AsyncSandboxService:
    """The async twin of :class:`SandboxService`: ``AsyncClient.sandbox``."""

    def __init__(self, client: AsyncAPIClient) -> None:
        self._c = client

    async def create(
        self,
        template: str,
        *,
        template_version: int | None = None,
        overrides: Overrides = None,
        metadata: Mapping[str, str] | None = None,
    ) -> Sandbox:
        """Create a sandbox from a template; see :meth:`SandboxService.create`."""
        return await self._c.run(_create(template, template_version, overrides, metadata))

    async def create_from_image(
        self,
        image: str,
        *,
        cpu: str | None = None,
        memory: str | None = None,
        ttl: int | None = None,
        env: Mapping[str, str] | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> Sandbox:
        """Create a sandbox from an image; see :meth:`SandboxService.create_from_image`."""
        return await self._c.run(_create_from_image(image, cpu, memory, ttl, env, metadata))

    async def get(self, sandbox_id: str) -> Sandbox:
        """Return a sandbox; an unknown id raises NotFoundError."""
        return await self._c.run(call(Request("GET", _path(sandbox_id)), parse_model(Sandbox)))

    async def delete(self, sandbox_id: str) -> None:
        """Stop a sandbox and remove it with its files."""
        await self._c.run(call(Request("DELETE", _path(sandbox_id)), parse_none))

    async def stop(self, sandbox_id: str) -> None:
        """Stop a running sandbox, keeping its files; see :meth:`SandboxService.stop`."""
        await self._c.run(call(Request("POST", _path(sandbox_id, "/stop")), parse_none))

    async def start(self, sandbox_id: str) -> None:
        """Start a stopped sandbox again; see :meth:`SandboxService.start`."""
        await self._c.run(call(Request("POST", _path(sandbox_id, "/start")), parse_none))

    async def restart(self, sandbox_id: str) -> None:
        """Stop and start a sandbox; see :meth:`SandboxService.restart`."""
        await self._c.run(call(Request("POST", _path(sandbox_id, "/restart")), parse_none))

    async def pause(self, sandbox_id: str) -> Sandbox:
        """Freeze a running sandbox in memory; see :meth:`SandboxService.pause`."""
        return await self._c.run(_control_sandbox(sandbox_id, "/pause"))

    async def resume(self, sandbox_id: str) -> Sandbox:
        """Let a paused sandbox run again; see :meth:`SandboxService.resume`."""
        return await self._c.run(_control_sandbox(sandbox_id, "/resume"))

    async def snapshot(self, sandbox_id: str, *, stop: bool = False) -> Snapshot:
        """Save a sandbox whole; see :meth:`SandboxService.snapshot`."""
        return await self._c.run(_snapshot(sandbox_id, stop))

    async def create_from_snapshot(
        self,
        snapshot_id: str,
        *,
        ttl: int | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> Sandbox:
        """Make a sandbox from a snapshot; see :meth:`SandboxService.create_from_snapshot`."""
        return await self._c.run(_create_from_snapshot(snapshot_id, ttl, metadata))

    async def fork(
        self,
        sandbox_id: str,
        *,
        count: int,
        ttl: int | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> ForkResult:
        """Make ``count`` copies of a running sandbox; see :meth:`SandboxService.fork`."""
        return await self._c.run(_fork(_path(sandbox_id, "/fork"), count, ttl, metadata))

    async def execute(
        self,
        sandbox_id: str,
        command: list[str],
        *,
        timeout: int = 30,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        stdin: str | None = None,
    ) -> ExecResult:
        """Run a command and return its result; see :meth:`SandboxService.execute`."""
        req = _exec_request("/exec", sandbox_id, command, timeout, env, cwd, stdin)
        return await self._c.run(call(req, parse_model(ExecResult)))

    def execute_stream(
        self,
        sandbox_id: str,
        command: list[str],
        *,
        timeout: int = 30,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        stdin: str | None = None,
    ) -> AsyncGenerator[ExecEvent, None]:
        """Run a command, yielding its output; see :meth:`SandboxService.execute_stream`."""
        req = _exec_request(
            "/exec/stream", sandbox_id, command, timeout, env, cwd, stdin, stream=True
        )
        return self._c.iter_stream(req, ExecStreamParser())

    async def get_logs(self, sandbox_id: str) -> LogsResult:
        """Return a sandbox's console output and its status history."""
        return await self._c.run(
            call(Request("GET", _path(sandbox_id, "/logs")), parse_model(LogsResult))
        )

    async def upload_file(
        self,
        sandbox_id: str,
        path: str,
        content: Content,
        *,
        content_type: str = "application/octet-stream",
        mode: int | None = None,
    ) -> FileInfo:
        """Write a file into a sandbox; see :meth:`SandboxService.upload_file`."""
        req = _upload_request(sandbox_id, path, content, content_type, mode)
        return await self._c.run(call(req, parse_model(FileInfo)))

    async def upload_path(
        self,
        sandbox_id: str,
        path: str,
        local_path: str | os.PathLike[str],
        *,
        mode: int | None = None,
    ) -> FileInfo:
        """Stream a local file into a sandbox; see :meth:`SandboxService.upload_path`."""
        return await self._c.run(_upload_path(sandbox_id, path, local_path, mode))

    async def download_file(self, sandbox_id: str, path: str) -> bytes:
        """Return the content of a file in a sandbox."""
        return await self._c.run(call(_download_request(sandbox_id, path), parse_bytes))

    async def download_to(self, sandbox_id: str, path: str, destination: Destination) -> int:
        """Stream a file to a path or file object; see :meth:`SandboxService.download_to`."""
        with open_sink(destination) as write:
            return await self._c.download(_download_request(sandbox_id, path), write)

    async def wait_for_ready(
        self, sandbox_id: str, *, poll_interval: float = 2.0, timeout: float = 300.0
    ) -> Sandbox:
        """Poll a sandbox until it is running; see :meth:`SandboxService.wait_for_ready`."""
        return await self._c.run(_wait_for_ready(sandbox_id, poll_interval, timeout))

    async def list(
        self,
        *,
        status: SandboxStatus | str | Sequence[SandboxStatus | str] | None = None,
        order: Order | None = None,
    ) -> list[Sandbox]:
        """Return the sandboxes; see :meth:`SandboxService.list`."""
        return await self._c.run(_list(status, order))

    async def list_page(
        self,
        *,
        status: SandboxStatus | str | Sequence[SandboxStatus | str] | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        order: Order | None = None,
    ) -> SandboxList:
        """Return a page of the sandboxes; see :meth:`SandboxService.list_page`."""
        return await self._c.run(_list_page(status, limit, cursor, order))

    async def terminal(
        self,
        sandbox_id: str,
        command: Sequence[str] | None = None,
        *,
        tty: bool = True,
        rows: int | None = None,
        cols: int | None = None,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> AsyncTerminal:
        """Start a command on a terminal; see :meth:`SandboxService.terminal`."""
        query = interactive_query(command, tty, rows, cols, cwd, env)
        return await AsyncTerminal.open(
            self._c.config, _path(sandbox_id, "/exec/interactive"), query
        )

    async def create_terminal(
        self,
        sandbox_id: str,
        name: str | None = None,
        command: Sequence[str] | None = None,
        *,
        rows: int | None = None,
        cols: int | None = None,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> TerminalInfo:
        """Start a persistent terminal; see :meth:`SandboxService.create_terminal`."""
        body = _terminal_body(name, command, rows, cols, cwd, env)
        req = Request("POST", _path(sandbox_id, "/terminals"), json=body)
        return await self._c.run(call(req, parse_model(TerminalInfo)))

    async def list_terminals(self, sandbox_id: str) -> builtins.list[TerminalInfo]:
        """Return a sandbox's persistent terminals, oldest first."""
        req = Request("GET", _path(sandbox_id, "/terminals"))
        return await self._c.run(call(req, parse_items(TerminalInfo)))

    async def get_terminal(self, sandbox_id: str, name: str) -> TerminalInfo:
        """Return a persistent terminal; an unknown one raises NotFoundError."""
        req = Request("GET", _terminal_path(sandbox_id, name))
        return await self._c.run(call(req, parse_model(TerminalInfo)))

    async def delete_terminal(self, sandbox_id: str, name: str) -> TerminalInfo:
        """End a persistent terminal with all it started; return how it ended."""
        req = Request("DELETE", _terminal_path(sandbox_id, name))
        return await self._c.run(call(req, parse_model(TerminalInfo)))

    async def attach_terminal(
        self,
        sandbox_id: str,
        name: str,
        *,
        since: int = 0,
        read_only: bool = False,
        takeover: bool = False,
    ) -> AsyncTerminal:
        """Attach to a persistent terminal; see :meth:`SandboxService.attach_terminal`."""
        path = _terminal_path(sandbox_id, name, "/attach")
        query = _attach_query(since, read_only, takeover)
        return await AsyncTerminal.open(self._c.config, path, query, since)
