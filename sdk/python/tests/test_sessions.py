"""The sessions and stats services (the REST sessions API), for both clients."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from pytest_httpx import HTTPXMock

from agent2env import (
    BadRequestError,
    InsufficientCapacityError,
    NotFoundError,
    ResourceLimitError,
    SandboxCreationError,
)
from agent2env.models import Flavor, SessionCommandResult, SessionExecuteResult, SessionList

from .conftest import (
    BASE,
    session_command_json,
    session_execute_json,
    session_json,
    stats_json,
    usage_json,
)


def body(httpx_mock: HTTPXMock) -> Any:
    return json.loads(httpx_mock.get_requests()[-1].content)


@pytest.mark.parametrize(
    ("kwargs", "want"),
    [
        ({}, {"code": "x = 100\nprint(x)"}),
        (
            {
                "language": "js",
                "session_id": "my-session",
                "flavor": Flavor.LARGE,
                "timeout": 5,
                "env": {"A": "1"},
            },
            {
                "code": "x = 100\nprint(x)",
                "language": "js",
                "session_id": "my-session",
                "flavor": "large",
                "timeout": 5,
                "env": {"A": "1"},
            },
        ),
    ],
)
def test_execute_code(
    client: Any, httpx_mock: HTTPXMock, kwargs: dict[str, Any], want: Any
) -> None:
    httpx_mock.add_response(
        method="POST", url=f"{BASE}/sessions/execute", json=session_execute_json()
    )
    res = client.sessions.execute_code("x = 100\nprint(x)", **kwargs)
    assert body(httpx_mock) == want
    assert isinstance(res, SessionExecuteResult)
    assert (res.session_id, res.created, res.language) == ("my-session", True, "python")
    assert (res.stdout, res.success, res.context_id) == ("100\n", True, "ctx-3f9a1c2b7d4e")
    assert res.expires_at.minute == 30
    # A request that may make a session waits for it, beyond the execution's timeout.
    assert httpx_mock.get_requests()[-1].extensions["timeout"]["read"] >= 300


def test_execute_code_failed_is_a_result(client: Any, httpx_mock: HTTPXMock) -> None:
    error = {
        "name": "ZeroDivisionError",
        "value": "division by zero",
        "traceback": "tb",
        "kind": "runtime",
    }
    httpx_mock.add_response(json=session_execute_json(success=False, error=error, created=False))
    res = client.sessions.execute_code("1/0", session_id="my-session")
    assert not res.success
    assert res.error is not None
    assert (res.error.name, res.error.kind) == ("ZeroDivisionError", "runtime")


@pytest.mark.parametrize(
    ("command", "kwargs", "want"),
    [
        ("ls -la /workspace", {}, {"command": "ls -la /workspace", "output_encoding": "base64"}),
        (
            ("ls", "-la"),
            {"session_id": "s", "flavor": "medium", "timeout": 3, "cwd": "/tmp", "env": {"A": "1"}},
            {
                "command": ["ls", "-la"],
                "session_id": "s",
                "flavor": "medium",
                "timeout": 3,
                "cwd": "/tmp",
                "env": {"A": "1"},
                "output_encoding": "base64",
            },
        ),
    ],
)
def test_execute_command(
    client: Any, httpx_mock: HTTPXMock, command: Any, kwargs: dict[str, Any], want: Any
) -> None:
    httpx_mock.add_response(
        method="POST", url=f"{BASE}/sessions/command", json=session_command_json()
    )
    res = client.sessions.execute_command(command, **kwargs)
    assert body(httpx_mock) == want
    assert isinstance(res, SessionCommandResult)
    assert (res.session_id, res.created, res.exit_code, res.stdout) == (
        "my-session",
        False,
        0,
        "total 0\n",
    )
    assert res.duration_ms == 3.5


def test_execute_command_binary_output(client: Any, httpx_mock: HTTPXMock) -> None:
    out = bytes(range(256)) + b"\x80 \xe2\x82"
    stdout = base64.b64encode(out).decode()
    reply = session_command_json(stdout=stdout, stderr="", encoding="base64")
    httpx_mock.add_response(method="POST", url=f"{BASE}/sessions/command", json=reply)
    res = client.sessions.execute_command(["cat", "f"])
    assert (res.stdout_bytes, res.stderr_bytes) == (out, b"")
    assert res.stdout == out.decode("utf-8", "replace")


@pytest.mark.parametrize(
    ("call", "args"),
    [("execute_code", ("",)), ("execute_command", ("",)), ("execute_command", ([],))],
)
def test_empty_code_or_command(client: Any, call: str, args: tuple[Any, ...]) -> None:
    with pytest.raises(ValueError, match="is empty"):
        getattr(client.sessions, call)(*args)


def test_get_list_delete_keep_alive(client: Any, httpx_mock: HTTPXMock) -> None:
    one = f"{BASE}/sessions/my%20session"
    httpx_mock.add_response(method="GET", url=one, json=session_json(session_id="my session"))
    httpx_mock.add_response(
        method="GET",
        url=f"{BASE}/sessions",
        json={"items": [session_json(made_by_sandbox="sbx-1")], "total": 1},
    )
    httpx_mock.add_response(
        method="DELETE", url=one, json={"session_id": "my session", "status": "deleted"}
    )
    httpx_mock.add_response(method="POST", url=f"{one}/keepalive", json=session_json())
    httpx_mock.add_response(method="POST", url=f"{one}/keepalive", json=session_json())

    sess = client.sessions.get("my session")
    assert (sess.session_id, sess.flavor, sess.cpu, sess.memory) == (
        "my session",
        "small",
        "1",
        "1Gi",
    )
    assert sess.languages == ["python"]
    assert sess.idle_timeout == 1800
    assert sess.ends_at is None
    assert (sess.made_by_sandbox, sess.made_by_run) == (None, None)
    listed = client.sessions.list()
    assert [(s.session_id, s.made_by_sandbox) for s in listed] == [("my-session", "sbx-1")]
    assert client.sessions.delete("my session").status == "deleted"
    client.sessions.keep_alive("my session")
    assert body(httpx_mock) == {}
    client.sessions.keep_alive("my session", idle_timeout=60)
    assert body(httpx_mock) == {"idle_timeout": 60}


def test_get_unknown(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(
        status_code=404, json={"error": "session x not found", "code": "SESSION_NOT_FOUND"}
    )
    with pytest.raises(NotFoundError) as info:
        client.sessions.get("x")
    assert info.value.code == "SESSION_NOT_FOUND"
    with pytest.raises(ValueError, match="session id is empty"):
        client.sessions.get("")


def test_stats(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(method="GET", url=f"{BASE}/stats", json=stats_json())
    stats = client.stats.get()
    assert (stats.sessions.active, stats.sessions.busy) == (2, 1)
    assert stats.sandboxes == {"running": 2, "pooled": 1}
    assert stats.resources.millicpu_capacity == 32000
    assert stats.resources.memory_bytes_used == 17 << 20
    assert (stats.executions.count, stats.executions.errors, stats.executions.p95) == (5, 2, 0.01)


@pytest.mark.parametrize(
    ("status", "code", "cls"),
    [
        (429, "RESOURCE_LIMIT", ResourceLimitError),
        (507, "INSUFFICIENT_CAPACITY", InsufficientCapacityError),
    ],
)
def test_resource_errors(
    client: Any, httpx_mock: HTTPXMock, status: int, code: str, cls: type[ResourceLimitError]
) -> None:
    httpx_mock.add_response(
        status_code=status,
        json={
            "error": "2 sandboxes exist, the configured maximum",
            "code": code,
            "usage": usage_json(),
            "suggestion": "delete idle sessions or raise --max-sandboxes",
        },
    )
    with pytest.raises(cls) as info:
        client.sessions.execute_code("1")
    err = info.value
    assert type(err) is cls
    assert isinstance(err, SandboxCreationError)
    assert (err.status_code, err.code) == (status, code)
    assert err.usage is not None
    assert (err.usage.sandboxes, err.usage.max_sandboxes, err.usage.idle_sessions) == (2, 2, 2)
    assert err.suggestion == "delete idle sessions or raise --max-sandboxes"
    assert str(err).endswith("; delete idle sessions or raise --max-sandboxes")


def test_bad_flavor(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(
        status_code=400,
        json={
            "error": 'flavor "huge" is not one of small, medium, large',
            "code": "INVALID_REQUEST",
        },
    )
    with pytest.raises(BadRequestError, match="huge"):
        client.sessions.execute_code("1", flavor="huge")


def test_list_page(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(
        method="GET",
        url=f"{BASE}/sessions?limit=1&cursor=c1&order=desc",
        json={"items": [session_json(session_id="newer")], "total": 1, "next_cursor": "c2"},
    )
    httpx_mock.add_response(
        method="GET", url=f"{BASE}/sessions?limit=1&cursor=c2", json={"items": [], "total": 0}
    )
    page = client.sessions.list_page(limit=1, cursor="c1", order="desc")
    assert isinstance(page, SessionList)
    assert ([s.session_id for s in page.items], page.total, page.next_cursor) == (
        ["newer"],
        1,
        "c2",
    )
    last = client.sessions.list_page(limit=1, cursor=page.next_cursor)
    assert (last.items, last.next_cursor) == ([], None)
