"""Session and statistics models (seed 000's sessions, agent2env addition).

A session is a sandbox named by an id of the client's choosing, made on
first use, with one live interpreter per language, removed once idle for its
timeout. Code and commands run in sessions answer with their result and the
session they ran in (:class:`SessionInfo`).
"""

from __future__ import annotations

from datetime import datetime

from pydantic import Field

from .common import APIModel, StrEnum
from .context import ExecuteResponse
from .sandbox import ExecResult

__all__ = [
    "DeleteSessionResult",
    "ExecutionStats",
    "Flavor",
    "ResourceStats",
    "Session",
    "SessionCommandResult",
    "SessionExecuteResult",
    "SessionInfo",
    "SessionList",
    "SessionStats",
    "Stats",
    "Usage",
]


class Flavor(StrEnum):
    """The sandbox sizes of a session; a daemon may configure more, by name."""

    SMALL = "small"
    """1 CPU and 1 GiB of memory: the default."""
    MEDIUM = "medium"
    """2 CPUs and 2 GiB of memory."""
    LARGE = "large"
    """4 CPUs and 4 GiB of memory."""


class SessionInfo(APIModel):
    """What every result of a session request says of its session."""

    session_id: str
    created: bool = False
    """This request made the session (it did not exist)."""
    expires_at: datetime
    """The idle deadline after this request."""


class SessionExecuteResult(SessionInfo, ExecuteResponse):
    """Code run in a session: the execution's result with its session.

    ``success`` is false when the code failed; :attr:`error` says why, with
    its ``kind`` (``syntax``, ``runtime`` or ``system``).
    """

    language: str = "python"
    """The interpreter the code ran in: ``python``, ``javascript`` or ``bash``."""


class SessionCommandResult(SessionInfo, ExecResult):
    """A command run in a session: its exit code and output with its session."""


class Session(APIModel):
    """A session's state."""

    session_id: str
    flavor: str
    cpu: str
    memory: str
    sandbox_id: str
    languages: list[str] = Field(default_factory=list)
    """The languages with a live interpreter in the session."""
    created_at: datetime
    last_used_at: datetime
    """When the last request in the session finished."""
    expires_at: datetime
    """The idle deadline: the session goes then unless used or kept alive."""
    ends_at: datetime | None = None
    """The end of its maximum lifetime, if the daemon sets one."""
    idle_timeout: float
    """Seconds."""
    busy: int = 0
    """Requests running in the session now."""
    execution_count: int = 0
    error_count: int = 0
    execution_time: float = 0.0
    """Total seconds of its executions."""
    made_by_sandbox: str | None = None
    """The sandbox whose code made it through the daemon's MCP server; it ends with that sandbox."""
    made_by_run: str | None = None
    """The task run that made it; it ends with that run."""


class SessionList(APIModel):
    """A page of sessions (agent2env addition), oldest first unless asked otherwise."""

    items: list[Session] = Field(default_factory=list)
    total: int = 0
    """How many sessions are listed on this page."""
    next_cursor: str | None = None
    """The next page's cursor; none on the last page."""


class DeleteSessionResult(APIModel):
    """The answer to a session delete."""

    session_id: str
    status: str


class Usage(APIModel):
    """The load a resource error reports: what exists and what the daemon allows."""

    sandboxes: int = 0
    max_sandboxes: int | None = None
    """The daemon's maximum of sandboxes (``--max-sandboxes``), when it has one."""
    sessions: int = 0
    idle_sessions: int = 0
    millicpu: int = 0
    """CPU committed by pending and running sandboxes' limits, in thousandths of a CPU."""
    millicpu_capacity: int = 0
    memory_bytes: int = 0
    """Memory committed by pending and running sandboxes' limits."""
    memory_bytes_capacity: int = 0


class SessionStats(APIModel):
    """Sessions counted."""

    active: int = 0
    busy: int = 0
    """Sessions with a request running in them now."""


class ResourceStats(APIModel):
    """CPU and memory committed (sandboxes' limits) and used (measured now), against capacity."""

    millicpu_committed: int = 0
    millicpu_capacity: int = 0
    memory_bytes_committed: int = 0
    memory_bytes_capacity: int = 0
    cpu_seconds_used: float = 0.0
    memory_bytes_used: int = 0


class ExecutionStats(APIModel):
    """Executions of code and commands since the daemon started; p50 and p95 in seconds."""

    count: int = 0
    errors: int = 0
    p50: float = 0.0
    p95: float = 0.0


class Stats(APIModel):
    """The daemon's statistics: sessions, sandboxes by status, resources, executions."""

    sessions: SessionStats = Field(default_factory=SessionStats)
    sandboxes: dict[str, int] = Field(default_factory=dict)
    """Sandboxes by status; those waiting in warm pools are ``pooled``."""
    resources: ResourceStats = Field(default_factory=ResourceStats)
    executions: ExecutionStats = Field(default_factory=ExecutionStats)
