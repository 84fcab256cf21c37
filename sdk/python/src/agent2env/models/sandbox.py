"""Sandbox models (seed 003 §6.1, plus the fields agent2env adds)."""

from __future__ import annotations

import base64
import binascii
from datetime import datetime
from typing import Any, Literal

from pydantic import Field, model_validator

from .common import APIModel, StrEnum

__all__ = [
    "ExecEvent",
    "ExecResult",
    "FileInfo",
    "LogsResult",
    "Sandbox",
    "SandboxList",
    "SandboxOverrides",
    "SandboxStatus",
    "TerminalExitInfo",
    "TerminalInfo",
]


class SandboxStatus(StrEnum):
    """Where a sandbox is in its life.

    ``pending`` until it runs (image being fetched, startup steps running),
    ``running``, ``paused`` (its processes frozen in memory, see
    :meth:`~agent2env.services.sandbox.SandboxService.pause`), ``succeeded``
    (stopped, or its main process exited 0), ``failed`` (see
    :attr:`Sandbox.reason`), ``terminating`` while being deleted, ``unknown``
    when the daemon lost track of it.
    """

    PENDING = "pending"
    RUNNING = "running"
    PAUSED = "paused"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    TERMINATING = "terminating"
    UNKNOWN = "unknown"


class TerminalExitInfo(APIModel):
    """How a persistent terminal's process ended."""

    exit_code: int
    """The exit code; 128+n when signal n ended it."""
    signal: str | None = None
    reason: str | None = None


class TerminalInfo(APIModel):
    """A persistent terminal of a sandbox (agent2env addition)."""

    name: str
    command: list[str]
    rows: int
    cols: int
    running: bool
    exit: TerminalExitInfo | None = None
    started_at: datetime
    ended_at: datetime | None = None
    output_start: int
    """The offset of the oldest output byte the sandbox still keeps."""
    output: int
    """The offset after the newest output byte."""
    writer: bool
    """A client is attached as the terminal's writer."""


class Sandbox(APIModel):
    """A sandbox."""

    id: str
    image: str
    cpu: str
    memory: str
    ttl: int
    env: dict[str, str] | None = None
    status: SandboxStatus
    """Where it is in its life, ``paused`` included.

    The daemon sends it as ``state``, and in ``status`` the nearest value that
    LiteBoxd's clients know (``running`` for ``paused``); this SDK reads
    ``state``, and ``status`` only from a daemon that sends none.
    """
    template: str | None = None
    template_version: int | None = Field(None, alias="templateVersion")
    created_at: datetime = Field(alias="created_at")
    expires_at: datetime = Field(alias="expires_at")
    """When its TTL ends; 9999-12-31 when ``ttl`` is 0, never."""
    access_token: str | None = Field(None, alias="accessToken", repr=False)
    """The token of its ``access_url`` (a secret: not in the model's repr)."""
    access_url: str | None = Field(None, alias="accessUrl")
    updated_at: datetime | None = None
    """When the sandbox last changed status (agent2env addition)."""
    reason: str | None = None
    """Why the sandbox is in its status, such as why it failed (agent2env addition)."""
    metadata: dict[str, str] | None = None
    """The labels its client gave it (agent2env addition; the OpenSandbox API's metadata)."""
    terminals: list[TerminalInfo] | None = None
    """Its persistent terminals, when it runs (agent2env addition)."""
    contexts: dict[str, str] | None = None
    """In the answer of ``create_from_snapshot`` only (agent2env addition): the id of each
    code-interpreter context of the snapshot, to the id of the same context (its interpreter,
    with its variables) in this sandbox, as a fork's; ``None`` when the snapshot holds none."""

    @model_validator(mode="before")
    @classmethod
    def _state(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("state") is not None:
            data = {**data, "status": data["state"]}
        return data


class SandboxList(APIModel):
    """A page of sandboxes (agent2env addition), oldest first unless asked otherwise."""

    items: list[Sandbox] = Field(default_factory=list)
    next_cursor: str | None = Field(None, alias="nextCursor")
    """The next page's cursor; none on the last page."""


class SandboxOverrides(APIModel):
    """Values replacing the template's for one sandbox; ``env`` is merged over the template's."""

    cpu: str | None = None
    memory: str | None = None
    ttl: int | None = None
    env: dict[str, str] | None = None


OUTPUT_ENCODING = "base64"
"""The ``output_encoding`` the SDK asks for: the daemon sends output as the base64 of its bytes."""


def decode_output(data: Any, *keys: str) -> Any:
    """Give a wire object's output fields ``keys`` both as bytes and as text.

    Output marked ``"encoding": "base64"`` is decoded into ``<key>_bytes``,
    its text (invalid UTF-8 replaced by U+FFFD) into ``<key>``; unmarked
    output (an older daemon's, or a model built by hand) is text, and its
    bytes are its UTF-8.
    """
    if not isinstance(data, dict):
        return data
    data = dict(data)
    encoding = data.pop("encoding", None)
    if encoding not in (None, "", OUTPUT_ENCODING):
        raise ValueError(f"output in unknown encoding {encoding!r}")
    for key in keys:
        value = data.get(key)
        if not isinstance(value, str):
            continue
        if encoding == OUTPUT_ENCODING:
            try:
                raw = base64.b64decode(value, validate=True)
            except binascii.Error as e:
                raise ValueError(f"{key} is not base64: {e}") from e
            data[key] = raw.decode("utf-8", "replace")
        else:
            raw = value.encode()
        data.setdefault(f"{key}_bytes", raw)
    return data


class ExecResult(APIModel):
    """The result of a command that ran to its end (a non-zero exit code is a result)."""

    exit_code: int = Field(alias="exit_code")
    stdout: str
    """The output as text: each byte sequence that is not UTF-8 is replaced by U+FFFD."""
    stderr: str
    """As :attr:`stdout`."""
    stdout_bytes: bytes = Field(default=b"", exclude=True, repr=False)
    """The output exactly as the command wrote it, UTF-8 or not (agent2env addition)."""
    stderr_bytes: bytes = Field(default=b"", exclude=True, repr=False)
    """As :attr:`stdout_bytes`."""
    timed_out: bool = False
    """The command was killed at its timeout (agent2env addition)."""
    truncated: bool = False
    """Output beyond the daemon's limit was dropped (agent2env addition)."""
    duration_ms: float | None = None
    """How long the command ran, in milliseconds (agent2env addition)."""
    oom_killed: bool = False
    """The out-of-memory killer ended the command: the sandbox hit its memory limit
    (agent2env addition; the exit code is then 137 and :attr:`reason` ``OutOfMemory``)."""
    reason: str | None = None
    """A cause beyond the command's own doing: ``OutOfMemory``, or ``PidsExhausted`` when it
    could not start for the sandbox's process limit (agent2env addition)."""

    @model_validator(mode="before")
    @classmethod
    def _decode(cls, data: Any) -> Any:
        return decode_output(data, "stdout", "stderr")


class ExecEvent(APIModel):
    """One event of a streamed command: a chunk of output, or its exit.

    ``stdout`` and ``stderr`` events carry :attr:`data` and :attr:`data_bytes`;
    the final ``exit`` event carries :attr:`exit_code`, :attr:`timed_out`,
    :attr:`duration_ms`, :attr:`oom_killed` and :attr:`reason`.
    """

    type: Literal["stdout", "stderr", "exit"]
    data: str = ""
    """The chunk as text, decoded on its own: each byte sequence that is not UTF-8 (a
    character cut between two chunks too) is replaced by U+FFFD."""
    data_bytes: bytes = Field(default=b"", exclude=True, repr=False)
    """The chunk exactly as the command wrote it, UTF-8 or not (agent2env addition)."""
    exit_code: int | None = None
    """The exit code on the ``exit`` event; ``None`` on ``stdout`` and ``stderr`` events,
    which carry none."""
    timed_out: bool = False
    duration_ms: float | None = None
    oom_killed: bool = False
    reason: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _decode(cls, data: Any) -> Any:
        data = decode_output(data, "data")
        if isinstance(data, dict) and data.get("type") == "exit" and data.get("exit_code") is None:
            data["exit_code"] = 0  # the wire leaves an exit code of 0 out
        return data


class LogsResult(APIModel):
    """A sandbox's console output (the last 1 MiB) and its status history."""

    logs: str
    events: list[str]
    """Its newest 1000 events, oldest first."""
    events_dropped: int = 0
    """How many older events were dropped to keep that bound (agent2env addition)."""


class FileInfo(APIModel):
    """A file in a sandbox, as an upload wrote it."""

    name: str
    path: str
    size: int
    mode: str
    mod_time: datetime
    is_dir: bool
