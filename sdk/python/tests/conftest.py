"""Fixtures of the unit tests: a client of each kind over pytest-httpx, and wire payloads.

The ``client`` fixture runs every test twice, with :class:`agent2env.Client`
and with :class:`agent2env.AsyncClient` behind a blocking facade, so that the
sync and async twins are held to the same behaviour by the same test.
"""

from __future__ import annotations

import asyncio
import copy
import inspect
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import httpx
import pytest

import agent2env._base
from agent2env import AsyncClient, Client

HOST = "http://daemon.test"
BASE = HOST + "/api/v1"


class Blocking:
    """Calls an async client's methods to completion, so tests can drive it like the sync one."""

    def __init__(self, target: Any, loop: asyncio.AbstractEventLoop) -> None:
        self._target = target
        self._loop = loop

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._target, name)
        if not callable(attr):
            return Blocking(attr, self._loop) if hasattr(attr, "_c") else attr

        def call(*args: Any, **kwargs: Any) -> Any:
            result = attr(*args, **kwargs)
            if inspect.isawaitable(result):
                return self._loop.run_until_complete(result)
            if isinstance(result, AsyncIterator):
                return iter(self._loop.run_until_complete(_collect(result)))
            return result

        return call


async def _collect(it: AsyncIterator[Any]) -> list[Any]:
    return [item async for item in it]


@pytest.fixture(autouse=True)
def _no_retry_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    """Retries go at once: the back-off is tested on its own."""
    monkeypatch.setattr(agent2env._base, "RETRY_BACKOFF", 0.0)


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test sees the configuration of the shell that runs it."""
    for name in ENV_NAMES:
        monkeypatch.delenv(name, raising=False)


ENV_NAMES = (
    "AGENT2ENV_URL",
    "AGENT2ENV_TOKEN",
    "MSB_SERVER_URL",
    "MSB_API_KEY",
    "MSB_DEFAULT_FLAVOR",
    "MSB_SESSION_TIMEOUT",
    "MSB_SHARED_VOLUME_PATH",
    "SANDBOX_BASE_URL",
    "SANDBOX_TIMEOUT",
)


def make_client(kind: str, **kwargs: Any) -> Iterator[Any]:
    """Yield a client of ``kind`` ("sync" or "async") on BASE, closing it afterwards."""
    kwargs.setdefault("base_url", BASE)
    if kind == "sync":
        with Client(**kwargs) as client:
            yield client
        return
    loop = asyncio.new_event_loop()
    aclient = AsyncClient(**kwargs)
    try:
        yield Blocking(aclient, loop)
    finally:
        loop.run_until_complete(aclient.close())
        loop.close()


@pytest.fixture(params=["sync", "async"], scope="session")
def client(request: pytest.FixtureRequest) -> Iterator[Any]:
    """A Client, or an AsyncClient behind a blocking facade, shared by the tests.

    pytest-httpx mocks the transport of every httpx client, so one client per
    kind serves all tests (making one per test loads TLS settings each time).
    """
    yield from make_client(request.param)


def payload(**base: Any) -> Callable[..., dict[str, Any]]:
    """Return a builder of a wire payload: ``base`` with the given fields replaced."""

    def build(**overrides: Any) -> dict[str, Any]:
        return {**copy.deepcopy(base), **overrides}

    return build


T0 = "2025-01-01T12:00:00Z"

sandbox_json = payload(
    id="sb1234567890",
    image="agent2env/python",
    cpu="500m",
    memory="512Mi",
    ttl=3600,
    status="running",
    template="python-data-science",
    templateVersion=1,
    created_at=T0,
    updated_at="2025-01-01T12:00:01Z",
    expires_at="2025-01-01T13:00:00Z",
    accessToken="ab" * 32,
    accessUrl="http://daemon.test/api/v1/sandbox/sb1234567890",
)
snapshot_json = payload(
    id="snap-0123abcd",
    sandbox_id="sb1234567890",
    image="agent2env/python",
    cpu="500m",
    memory="512Mi",
    runtime="oci",
    status="ready",
    size_bytes=52428800,
    created_at=T0,
)
# A stored template spec, defaults applied.
spec_json = payload(
    image="agent2env/python",
    resources={"cpu": "500m", "memory": "512Mi"},
    ttl=0,
    startupTimeout=300,
)
template_json = payload(
    id="tpl-0123abcd",
    name="my-python-template",
    displayName="My Python Template",
    description="Custom Python environment",
    tags=["python", "custom"],
    author="",
    isPublic=True,
    latestVersion=1,
    createdAt=T0,
    updatedAt=T0,
    spec=spec_json(),
)
version_json = payload(
    id="ver-0123abcd",
    templateId="tpl-0123abcd",
    version=1,
    spec=spec_json(),
    changelog="Initial version",
    createdBy="",
    createdAt=T0,
)
prepull_json = payload(
    id="pp-0123abcd",
    image="agent2env/python",
    status="pulling",
    progress={"ready": 0, "total": 1},
    startedAt=T0,
)
context_json = payload(
    context_id="ctx-3f9a1c2b7d4e",
    type="jupyter",
    status="active",
    created_at=T0,
    language="python",
    session_name="test-session",
    working_dir="/workspace",
    sandbox_id="sb1234567890",
    last_used_at=T0,
    execution_count=0,
)


class BrokenStream(httpx.SyncByteStream, httpx.AsyncByteStream):
    """A response body that gives ``first``, then fails as a closed connection does."""

    def __init__(self, first: bytes) -> None:
        self.first = first

    def __iter__(self) -> Iterator[bytes]:
        yield self.first
        raise httpx.RemoteProtocolError("peer closed connection")

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield self.first
        raise httpx.RemoteProtocolError("peer closed connection")


def sse(*events: tuple[str, str]) -> bytes:
    """Encode (event, data) pairs as a text/event-stream body."""
    return "".join(f"event: {name}\ndata: {data}\n\n" for name, data in events).encode()


def multipart_parts(request: httpx.Request) -> list[tuple[str, bytes]]:
    """Return (name, value) of each part of a multipart request, in order."""
    boundary = request.headers["Content-Type"].split("boundary=")[1].encode()
    parts = []
    for raw in request.content.split(b"--" + boundary)[1:-1]:
        # b"\r\n" headers b"\r\n\r\n" value b"\r\n"
        head, _, value = raw[2:-2].partition(b"\r\n\r\n")
        name = head.split(b'name="')[1].split(b'"')[0].decode()
        parts.append((name, value))
    return parts


session_json = payload(
    session_id="my-session",
    flavor="small",
    cpu="1",
    memory="1Gi",
    sandbox_id="sb1234567890",
    languages=["python"],
    created_at=T0,
    last_used_at=T0,
    expires_at="2025-01-01T12:30:00Z",
    idle_timeout=1800,
    busy=0,
    execution_count=1,
    error_count=0,
    execution_time=0.002,
)
session_execute_json = payload(
    session_id="my-session",
    created=True,
    expires_at="2025-01-01T12:30:00Z",
    language="python",
    output={"stdout": "100\n", "stderr": ""},
    success=True,
    execution_time=0.002,
    context_id="ctx-3f9a1c2b7d4e",
    execution_count=1,
    results=[],
)
session_command_json = payload(
    session_id="my-session",
    created=False,
    expires_at="2025-01-01T12:30:00Z",
    exit_code=0,
    stdout="total 0\n",
    stderr="",
    duration_ms=3.5,
)
stats_json = payload(
    sessions={"active": 2, "busy": 1},
    sandboxes={"running": 2, "pooled": 1},
    resources={
        "millicpu_committed": 3000,
        "millicpu_capacity": 32000,
        "memory_bytes_committed": 3 << 30,
        "memory_bytes_capacity": 48 << 30,
        "cpu_seconds_used": 0.5,
        "memory_bytes_used": 17 << 20,
    },
    executions={"count": 5, "errors": 2, "p50": 0.001, "p95": 0.01},
)
usage_json = payload(
    sandboxes=2,
    max_sandboxes=2,
    sessions=2,
    idle_sessions=2,
    millicpu=3000,
    millicpu_capacity=32000,
    memory_bytes=3 << 30,
    memory_bytes_capacity=48 << 30,
)
