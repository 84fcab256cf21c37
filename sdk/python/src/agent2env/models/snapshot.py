"""Snapshot models (agent2env addition): a sandbox saved whole, processes and memory included."""

from __future__ import annotations

from datetime import datetime

from pydantic import Field

from .common import APIModel, StrEnum
from .sandbox import Sandbox

__all__ = [
    "Capabilities",
    "ForkResult",
    "ForkedSandbox",
    "Snapshot",
    "SnapshotList",
    "SnapshotStatus",
]


class SnapshotStatus(StrEnum):
    """Where a snapshot is in its life: ``ready`` once saved (a failed save leaves none)."""

    READY = "ready"


class Snapshot(APIModel):
    """A sandbox saved with its processes, their memory, its writable files and its spec.

    Sandboxes are made from it with
    :meth:`~agent2env.services.sandbox.SandboxService.create_from_snapshot`.
    It outlives the sandbox it was taken of and a restart of the daemon.
    """

    id: str
    sandbox_id: str
    """The sandbox it was taken of, which may be gone."""
    image: str
    template: str | None = None
    cpu: str
    memory: str
    runtime: str
    """The daemon's runtime that saved it (``oci``)."""
    status: SnapshotStatus
    stopped: bool = False
    """The sandbox was stopped once saved (``stop=True``)."""
    size_bytes: int
    """What its files take on the daemon's disk."""
    created_at: datetime


class SnapshotList(APIModel):
    """A page of snapshots, newest first unless asked otherwise."""

    items: list[Snapshot] = Field(default_factory=list)
    next_cursor: str | None = None
    """The next page's cursor; none on the last page."""


class ForkedSandbox(Sandbox):
    """A sandbox a fork made: a sandbox, and where the snapshot's contexts are in it."""

    contexts: dict[str, str]
    """The id of each code-interpreter context of the snapshot, to the id of the
    same context (its interpreter, with its variables) in this sandbox."""


class ForkResult(APIModel):
    """What a fork made: the snapshot the sandboxes were made from, and the sandboxes, running.

    A sandbox's fork takes the snapshot and keeps it: delete it with
    :meth:`~agent2env.services.snapshot.SnapshotService.delete` when done.
    """

    snapshot_id: str
    sandboxes: list[ForkedSandbox]


class Capabilities(APIModel):
    """What the daemon's runtime can do where runtimes differ (agent2env addition).

    What it cannot do raises :class:`~agent2env.APIError` with code ``NOT_IMPLEMENTED``.
    """

    runtime: str
    """The runtime's name: ``oci``, ``kubernetes``."""
    pause: bool
    """Sandboxes can be paused and resumed."""
    snapshots: bool
    """Sandboxes can be snapshotted and made from snapshots (oci with criu)."""
