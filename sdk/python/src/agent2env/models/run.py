"""Task run models (agent2env addition): runs of task files, their events and their results.

A task file submitted to the daemon runs k times per agent x model combination,
each run in its own sandbox; :func:`summarize` and :func:`pass_at_k` give the pass
rates of the runs that ended, as ``agent2env task run`` prints them.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from pydantic import Field

from .common import APIModel, StrEnum

__all__ = [
    "Run",
    "RunArtifact",
    "RunBatch",
    "RunEvent",
    "RunEventType",
    "RunLLMUsage",
    "RunList",
    "RunStatus",
    "RunSummary",
    "pass_at_k",
    "summarize",
]


class RunStatus(StrEnum):
    """Where a run is: ``queued`` or ``running``, or how it ended (every other status)."""

    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    """The agent exited with the expected code and the end conditions hold."""
    FAILED = "failed"
    """The agent exited otherwise, an end condition does not hold, or a step before it failed."""
    HUNG = "hung"
    """No progress on any liveness signal for the task's ``liveness.idle``."""
    TIMEOUT = "timeout"
    """The run did not end within the task's ``end.timeout``."""
    SANDBOX_LOST = "sandbox_lost"
    """The sandbox stopped answering."""
    CANCELLED = "cancelled"


def _final(status: str) -> bool:
    """Whether a run's status is an end state (a newer daemon's status counts as one)."""
    return status not in ("", RunStatus.QUEUED, RunStatus.RUNNING)


class RunEventType(StrEnum):
    """The types of :class:`RunEvent`."""

    PHASE = "phase"
    """The run entered ``phase``."""
    OUTPUT = "output"
    """A line the agent (or a setup command, or the check) wrote on ``stream``."""
    AGENT = "agent"
    """Something the agent did, read from its output (``kind``: message, tool_call, ...)."""
    LIVENESS = "liveness"
    """A liveness signal's state changed (``text`` says which), or a heartbeat was missed."""
    END = "end"
    """The run ended with ``status`` and ``reason``: the last event."""


class RunLLMUsage(APIModel):
    """A run's model calls and tokens; ``source`` says who counted: ``proxy`` or ``agent``."""

    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    source: str | None = None


class RunArtifact(APIModel):
    """A file brought back from a run's sandbox, by its absolute path there."""

    path: str
    size: int = 0


class Run(APIModel):
    """One run of a task: its record and, once it ended, its result."""

    id: str
    batch_id: str = ""
    task: str = ""
    """The task's name."""
    agent: str = ""
    model: str | None = None
    repeat: int = 0
    """The run's index among its combination's repeats, from 0."""
    status: str
    """A :class:`RunStatus` (a newer daemon's status stays a string)."""
    phase: str = ""
    """The step the run is in (queued, create, inputs, setup, agent, check, artifacts), or done."""
    reason: str | None = None
    """Why the run ended as it did."""
    exit_code: int | None = None
    """The agent's, once it exited."""
    sandbox_id: str | None = None
    created_at: datetime
    started_at: datetime | None = None
    ended_at: datetime | None = None
    timings_ms: dict[str, float] = Field(default_factory=dict)
    """Each phase's duration in milliseconds (create, inputs, setup, agent, check, artifacts)."""
    llm: RunLLMUsage = Field(default_factory=lambda: RunLLMUsage())
    conversation_id: str | None = None
    """The LLM proxy's archive of the run's (first) conversation, when it keeps one."""
    conversation_ids: list[str] = Field(default_factory=list)
    output_tail: list[str] = Field(default_factory=list)
    """The last lines of the agent's output."""
    artifacts: list[RunArtifact] = Field(default_factory=list)
    artifacts_truncated: bool = False
    """Artifacts were left out at the size limit."""
    artifacts_error: str | None = None
    """Why the artifacts could not all be collected; none when they all came back."""

    @property
    def ended(self) -> bool:
        """Whether the run has ended (its status is neither queued nor running)."""
        return _final(self.status)

    @property
    def succeeded(self) -> bool:
        """Whether the run ended ``succeeded``."""
        return self.status == RunStatus.SUCCEEDED


class RunBatch(APIModel):
    """What one submission made: its id (the runs' ``batch_id``), the task's name, the runs."""

    id: str
    task: str = ""
    runs: list[Run] = Field(default_factory=list)


class RunList(APIModel):
    """A page of runs, oldest first (newest first with ``order="desc"``)."""

    items: list[Run] = Field(default_factory=list)
    next_cursor: str | None = None
    """The next page's cursor; none on the last page."""


class RunEvent(APIModel):
    """One entry of a run's event log; ``type`` a :class:`RunEventType`."""

    seq: int
    """Numbers the run's events from 1."""
    time: datetime
    type: str
    phase: str | None = None
    stream: str | None = None
    """``stdout`` or ``stderr``, for ``output``."""
    text: str | None = None
    kind: str | None = None
    """For ``agent``: message, tool_call, tool_result, llm_call, result or error."""
    tool: str | None = None
    tool_id: str | None = None
    input: Any = None
    is_error: bool = False
    usage: RunLLMUsage | None = None
    status: str | None = None
    """How the run ended, on the ``end`` event."""
    reason: str | None = None


class RunSummary(APIModel):
    """The runs of one task x agent x model combination, with their pass rates."""

    task: str
    agent: str
    model: str | None = None
    runs: int = 0
    succeeded: int = 0
    pass_at_1: float = 0.0
    pass_at_k: float = 0.0
    """pass@k for k = ``runs``: whether any run succeeded."""
    status: dict[str, int] = Field(default_factory=dict)
    """How many runs ended in each status."""


def pass_at_k(n: int, c: int, k: int) -> float:
    """Return the unbiased estimate of pass@k from ``n`` runs of which ``c`` succeeded.

    ``1 - C(n-c, k) / C(n, k)``, computed without the binomials (which grow
    past floats for large ``n``); 0 when there are fewer than ``k`` runs.
    """
    if n <= 0 or k <= 0 or k > n:
        return 0.0
    if n - c < k:
        return 1.0
    p = 1.0
    for i in range(n - c + 1, n + 1):
        p *= 1 - k / i
    return 1 - p


def summarize(runs: Iterable[Run]) -> list[RunSummary]:
    """Group runs by task, agent and model, in their order, with pass@1 and pass@k (k = runs).

    As ``agent2env task run`` sums them up; give it the runs of a batch once
    they ended (:meth:`agent2env.services.RunService.wait_for_batch`).
    """
    out: dict[tuple[str, str, str | None], RunSummary] = {}
    for r in runs:
        s = out.setdefault(
            (r.task, r.agent, r.model), RunSummary(task=r.task, agent=r.agent, model=r.model)
        )
        s.runs += 1
        s.status[r.status] = s.status.get(r.status, 0) + 1
        s.succeeded += r.succeeded
    for s in out.values():
        s.pass_at_1 = pass_at_k(s.runs, s.succeeded, 1)
        s.pass_at_k = pass_at_k(s.runs, s.succeeded, s.runs)
    return list(out.values())
