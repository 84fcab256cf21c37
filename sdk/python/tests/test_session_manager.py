"""Seed 000's high-level API (agent2env.sessions), sync and async, over pytest-httpx."""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from pytest_httpx import HTTPXMock

from agent2env import (
    AsyncClient,
    BadRequestError,
    Client,
    CodeExecutionError,
    CompilationError,
    ConnectionError,
    InternalServerError,
    NotFoundError,
    ResourceLimitError,
    RuntimeExecutionError,
    SandboxCreationError,
    ServiceUnavailableError,
    SystemExecutionError,
)
from agent2env.sessions import (
    FLAVORS,
    AsyncSessionManager,
    SessionConfig,
    SessionManager,
    SharedVolume,
    parse_duration,
    parse_shared_volumes,
)

from .conftest import (
    BASE,
    Blocking,
    session_command_json,
    session_execute_json,
    session_json,
    stats_json,
    usage_json,
)

EXECUTE = f"{BASE}/sessions/execute"
COMMAND = f"{BASE}/sessions/command"

Factory = Callable[..., Any]


@pytest.fixture(params=["sync", "async"])
def make(request: pytest.FixtureRequest) -> Iterator[Factory]:
    """Make managers of one kind (the async one behind a blocking facade) on BASE."""
    closers: list[Callable[[], None]] = []
    loop = asyncio.new_event_loop()

    def build(**config: Any) -> Any:
        cfg = SessionConfig(**{"server_url": BASE, **config})
        if request.param == "sync":
            sync = SessionManager(cfg)
            closers.append(sync.close)
            return sync
        manager = AsyncSessionManager(cfg)
        closers.append(lambda: loop.run_until_complete(manager.close()))
        return Blocking(manager, loop)

    yield build
    for close in closers:
        close()
    loop.close()


def sent(httpx_mock: HTTPXMock, index: int = -1) -> Any:
    return json.loads(httpx_mock.get_requests()[index].content)


def test_first_call_creates_then_the_id_reuses(make: Factory, httpx_mock: HTTPXMock) -> None:
    manager = make()
    httpx_mock.add_response(url=EXECUTE, json=session_execute_json(session_id="ses-1"))
    httpx_mock.add_response(
        url=EXECUTE,
        json=session_execute_json(session_id="ses-1", created=False, output={"stdout": "101\n"}),
    )
    first = manager.execute_code("x = 100\nprint(x)")
    assert (first.session_id, first.created) == ("ses-1", True)
    assert sent(httpx_mock) == {"code": "x = 100\nprint(x)", "language": "python"}
    again = manager.execute_code("print(x + 1)", session_id=first.session_id)
    assert (again.created, again.stdout) == (False, "101\n")
    assert sent(httpx_mock)["session_id"] == "ses-1"
    assert len(httpx_mock.get_requests()) == 2  # no keepalive without a session timeout


def test_configured_defaults(make: Factory, httpx_mock: HTTPXMock) -> None:
    manager = make(default_flavor="medium", session_timeout=90.0, execution_timeout=12.0)
    httpx_mock.add_response(url=EXECUTE, json=session_execute_json())
    httpx_mock.add_response(url=f"{BASE}/sessions/my-session/keepalive", json=session_json())
    manager.execute_code("1", language="javascript")
    assert sent(httpx_mock, 0) == {
        "code": "1",
        "language": "javascript",
        "flavor": "medium",
        "timeout": 12.0,
    }
    # The session it made gets the configured idle timeout.
    assert sent(httpx_mock, 1) == {"idle_timeout": 90.0}

    httpx_mock.add_response(url=EXECUTE, json=session_execute_json(created=False))
    manager.execute_code(
        "1", session_id="my-session", flavor="large", timeout=1, env={"TOKEN": "t"}
    )
    assert sent(httpx_mock) == {
        "code": "1",
        "language": "python",
        "session_id": "my-session",
        "flavor": "large",
        "timeout": 1,
        "env": {"TOKEN": "t"},
    }
    assert len(httpx_mock.get_requests()) == 3  # an existing session is not kept alive again


@pytest.mark.parametrize(
    ("kind", "cls"),
    [
        ("syntax", CompilationError),
        ("runtime", RuntimeExecutionError),
        ("system", SystemExecutionError),
        ("newer", RuntimeExecutionError),
    ],
)
def test_code_errors_by_kind(
    make: Factory, httpx_mock: HTTPXMock, kind: str, cls: type[CodeExecutionError]
) -> None:
    manager = make()
    error = {"name": "SomeError", "value": "what", "traceback": "Traceback ...", "kind": kind}
    body = session_execute_json(success=False, error=error, output={"stdout": "before\n"})
    httpx_mock.add_response(url=EXECUTE, json=body, is_reusable=True)
    with pytest.raises(cls) as info:
        manager.execute_code("boom")
    err = info.value
    assert type(err) is cls
    assert (err.name, err.value, err.traceback, err.session_id) == (
        "SomeError",
        "what",
        "Traceback ...",
        "my-session",
    )
    assert err.result.stdout == "before\n"
    assert str(err) == "SomeError: what (session my-session)"
    res = manager.execute_code("boom", raise_on_error=False)
    assert not res.success
    assert res.error.kind == kind


def test_session_timeout_refused(
    make: Factory, httpx_mock: HTTPXMock, caplog: pytest.LogCaptureFixture
) -> None:
    manager = make(session_timeout=1e9)
    httpx_mock.add_response(url=EXECUTE, json=session_execute_json())
    httpx_mock.add_response(
        url=f"{BASE}/sessions/my-session/keepalive",
        status_code=400,
        json={
            "error": "idle_timeout must be between 0 and 86400 seconds",
            "code": "INVALID_REQUEST",
        },
    )
    assert manager.execute_code("print(100)").stdout == "100\n"
    assert "keeps the daemon's idle timeout: set 1e+09s" in caplog.text


def test_execute_command(make: Factory, httpx_mock: HTTPXMock) -> None:
    manager = make(execution_timeout=7.0)
    httpx_mock.add_response(url=COMMAND, json=session_command_json(exit_code=1, stderr="no\n"))
    res = manager.execute_command("ls nope", "my-session", cwd="/tmp", env={"A": "1"})
    assert res.exit_code == 1  # a result, unless check=True
    assert sent(httpx_mock) == {
        "command": "ls nope",
        "session_id": "my-session",
        "timeout": 7.0,
        "cwd": "/tmp",
        "env": {"A": "1"},
        "output_encoding": "base64",
    }


@pytest.mark.parametrize(
    ("result", "cls", "name", "value"),
    [
        (
            {"exit_code": 2, "stderr": "a\nls: nope: No such file\n"},
            RuntimeExecutionError,
            "exit status 2",
            "ls: nope: No such file",
        ),
        (
            {"exit_code": 137, "timed_out": True},
            SystemExecutionError,
            "TimeoutError",
            "the command ran past its timeout of 30s",
        ),
        (
            {"exit_code": 137, "oom_killed": True, "reason": "OutOfMemory", "stderr": "killed\n"},
            SystemExecutionError,
            "OutOfMemory",
            "killed",
        ),
        ({"exit_code": 126, "reason": "PidsExhausted"}, SystemExecutionError, "PidsExhausted", ""),
    ],
)
def test_execute_command_check(
    make: Factory,
    httpx_mock: HTTPXMock,
    result: dict[str, Any],
    cls: type[CodeExecutionError],
    name: str,
    value: str,
) -> None:
    manager = make()
    httpx_mock.add_response(url=COMMAND, json=session_command_json(**result))
    with pytest.raises(cls) as info:
        manager.execute_command(["sh", "-c", "x"], check=True)
    assert (info.value.name, info.value.value) == (name, value)
    assert info.value.result.exit_code == result["exit_code"]


def test_execute_command_check_passes(make: Factory, httpx_mock: HTTPXMock) -> None:
    manager = make(session_timeout=60.0)
    httpx_mock.add_response(url=COMMAND, json=session_command_json(created=True))
    httpx_mock.add_response(url=f"{BASE}/sessions/my-session/keepalive", json=session_json())
    assert manager.execute_command("true", check=True).exit_code == 0
    assert sent(httpx_mock) == {"idle_timeout": 60.0}


def test_resource_limit_passes_through(make: Factory, httpx_mock: HTTPXMock) -> None:
    manager = make()
    httpx_mock.add_response(
        url=EXECUTE,
        status_code=429,
        json={
            "error": "2 sandboxes exist",
            "code": "RESOURCE_LIMIT",
            "usage": usage_json(),
            "suggestion": "delete idle sessions",
        },
    )
    with pytest.raises(ResourceLimitError) as info:
        manager.execute_code("1", session_id="third")
    assert info.value.suggestion == "delete idle sessions"
    assert info.value.usage is not None
    assert info.value.usage.max_sandboxes == 2
    assert len(httpx_mock.get_requests()) == 1


def test_creation_failure_of_a_new_session(make: Factory, httpx_mock: HTTPXMock) -> None:
    manager = make()
    httpx_mock.add_response(
        url=COMMAND, status_code=500, json={"error": "unpack image: boom", "code": "INTERNAL"}
    )
    with pytest.raises(SandboxCreationError) as info:
        manager.execute_command("true")
    assert "could not make a sandbox for session (new): unpack image: boom" in str(info.value)
    assert info.value.session_id is None
    assert isinstance(info.value.__cause__, InternalServerError)


def test_creation_failure_of_a_named_session(make: Factory, httpx_mock: HTTPXMock) -> None:
    manager = make()
    httpx_mock.add_response(
        url=EXECUTE, status_code=404, json={"error": "image x not found", "code": "IMAGE_NOT_FOUND"}
    )
    httpx_mock.add_response(
        url=f"{BASE}/sessions/new-one",
        status_code=404,
        json={"error": "session new-one not found", "code": "SESSION_NOT_FOUND"},
    )
    with pytest.raises(SandboxCreationError) as info:
        manager.execute_code("1", session_id="new-one")
    assert info.value.session_id == "new-one"


def test_failure_in_an_existing_session_is_not_creation(
    make: Factory, httpx_mock: HTTPXMock
) -> None:
    manager = make()
    httpx_mock.add_response(
        url=EXECUTE, status_code=500, json={"error": "kernel lost", "code": "INTERNAL"}
    )
    httpx_mock.add_response(url=f"{BASE}/sessions/my-session", json=session_json())
    with pytest.raises(InternalServerError, match="kernel lost") as info:
        manager.execute_code("1", session_id="my-session")
    assert not isinstance(info.value, SandboxCreationError)


def test_failure_when_the_session_cannot_be_looked_up(make: Factory, httpx_mock: HTTPXMock) -> None:
    manager = make()
    httpx_mock.add_response(
        url=EXECUTE, status_code=500, json={"error": "first", "code": "INTERNAL"}
    )
    httpx_mock.add_response(
        url=f"{BASE}/sessions/my-session",
        status_code=500,
        json={"error": "second", "code": "INTERNAL"},
    )
    with pytest.raises(InternalServerError, match="first"):
        manager.execute_code("1", session_id="my-session")


@pytest.mark.parametrize(
    ("status", "code", "cls"),
    [(400, "INVALID_LANGUAGE", BadRequestError), (503, "UNAVAILABLE", ServiceUnavailableError)],
)
def test_other_errors_pass_through(
    make: Factory, httpx_mock: HTTPXMock, status: int, code: str, cls: type[Exception]
) -> None:
    manager = make()
    httpx_mock.add_response(url=EXECUTE, status_code=status, json={"error": "no", "code": code})
    with pytest.raises(cls):
        manager.execute_code("1", language="cobol")
    assert len(httpx_mock.get_requests()) == 1  # POST is not retried


def test_session_info_list_stop_keep_alive_stats(make: Factory, httpx_mock: HTTPXMock) -> None:
    manager = make()
    one = f"{BASE}/sessions/my-session"
    httpx_mock.add_response(method="GET", url=one, json=session_json())
    httpx_mock.add_response(url=f"{BASE}/sessions", json={"items": [session_json()], "total": 1})
    httpx_mock.add_response(
        method="DELETE", url=one, json={"session_id": "my-session", "status": "deleted"}
    )
    httpx_mock.add_response(
        method="DELETE",
        url=one,
        status_code=404,
        json={"error": "session my-session not found", "code": "SESSION_NOT_FOUND"},
    )
    httpx_mock.add_response(method="POST", url=f"{one}/keepalive", json=session_json())
    httpx_mock.add_response(url=f"{BASE}/stats", json=stats_json())
    assert manager.get_session_info("my-session").flavor == "small"
    assert [s.session_id for s in manager.list_sessions()] == ["my-session"]
    assert manager.stop_session("my-session") is True
    assert manager.stop_session("my-session") is False
    assert manager.keep_alive("my-session", 120).session_id == "my-session"
    assert sent(httpx_mock) == {"idle_timeout": 120}
    assert manager.get_stats().sessions.active == 2


def test_files(make: Factory, httpx_mock: HTTPXMock) -> None:
    manager = make()
    one = f"{BASE}/sessions/my-session"
    files = f"{BASE}/sandboxes/sb1234567890/files"
    info = {
        "name": "a.txt",
        "path": "/workspace/a.txt",
        "size": 2,
        "mode": "0600",
        "mod_time": "2025-01-01T12:00:00Z",
        "is_dir": False,
    }
    httpx_mock.add_response(method="GET", url=one, json=session_json(), is_reusable=True)
    httpx_mock.add_response(method="POST", url=files, json=info)
    httpx_mock.add_response(method="GET", url=f"{files}?path=a.txt", content=b"hi")
    written = manager.write_file("my-session", "a.txt", io.BytesIO(b"hi"), mode=0o600)
    assert (written.path, written.size) == ("/workspace/a.txt", 2)
    assert b'name="mode"\r\n\r\n0600' in httpx_mock.get_requests()[1].read()
    assert manager.read_file("my-session", "a.txt") == b"hi"


def test_files_of_an_unknown_session(make: Factory, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(
        status_code=404, json={"error": "session x not found", "code": "SESSION_NOT_FOUND"}
    )
    with pytest.raises(NotFoundError):
        make().write_file("x", "a.txt", b"hi")


def test_unknown_session_info(make: Factory, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(
        status_code=404, json={"error": "session x not found", "code": "SESSION_NOT_FOUND"}
    )
    with pytest.raises(NotFoundError):
        make().get_session_info("x")


def test_connection_error_has_retry_advice(make: Factory, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_exception(httpx.ConnectError("connection refused"))
    with pytest.raises(ConnectionError) as info:
        make().execute_code("1")
    assert "retry" in str(info.value)
    assert "retry" in info.value.suggestion


def test_logs_with_timings(
    make: Factory, httpx_mock: HTTPXMock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="agent2env")
    manager = make()
    httpx_mock.add_response(url=EXECUTE, json=session_execute_json())
    httpx_mock.add_response(
        url=EXECUTE,
        json=session_execute_json(
            success=False,
            error={"name": "E", "value": "v", "traceback": "", "kind": "runtime"},
        ),
    )
    httpx_mock.add_response(
        url=EXECUTE, status_code=429, json={"error": "full", "code": "RESOURCE_LIMIT"}
    )
    manager.execute_code("1")
    manager.execute_code("1", raise_on_error=False)
    with pytest.raises(ResourceLimitError):
        manager.execute_code("1")
    messages = [(r.name, r.levelname, r.getMessage()) for r in caplog.records]
    sessions = [m for m in messages if m[0] == "agent2env.sessions"]
    assert sessions[0] == ("agent2env.sessions", "INFO", "session my-session created")
    assert sessions[1][2].startswith(
        "execute_code session=my-session language=python created=True success=True "
        "execution=0.002s total="
    )
    assert any(level == "DEBUG" and "failed: E (runtime): v" in m for _, level, m in sessions)
    assert sessions[-1][1] == "WARNING"
    assert "refused after" in sessions[-1][2]
    http = [m for m in messages if m[0] == "agent2env.http"]
    assert http[0][2].startswith(f"POST {EXECUTE} -> 200 in ")


def test_given_client_is_not_closed(httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(url=f"{BASE}/stats", json=stats_json(), is_reusable=True)
    client = Client(BASE)
    with SessionManager(client=client) as manager:
        assert manager.client is client
        manager.get_stats()
    client.stats.get()  # still usable
    client.close()

    async def run() -> None:
        aclient = AsyncClient(BASE)
        async with AsyncSessionManager(client=aclient) as amanager:
            await amanager.get_stats()
        await aclient.stats.get()
        await aclient.close()

    asyncio.run(run())


def test_configuration_from_environment(
    monkeypatch: pytest.MonkeyPatch, httpx_mock: HTTPXMock
) -> None:
    monkeypatch.setenv("MSB_SERVER_URL", "http://msb.test:5555")
    monkeypatch.setenv("MSB_API_KEY", "msb-key")
    monkeypatch.setenv("MSB_DEFAULT_FLAVOR", " Large ")
    monkeypatch.setenv("MSB_SESSION_TIMEOUT", "45m")
    monkeypatch.setenv("MSB_SHARED_VOLUME_PATH", "/srv/data:/data")
    monkeypatch.setenv("SANDBOX_TIMEOUT", "20")
    cfg = SessionConfig.from_env()
    assert cfg == SessionConfig(
        server_url="http://msb.test:5555",
        api_key="msb-key",
        default_flavor="large",
        session_timeout=2700.0,
        execution_timeout=20.0,
        shared_volumes=(SharedVolume("/srv/data", "/data"),),
    )
    httpx_mock.add_response(
        url="http://msb.test:5555/api/v1/sessions/execute", json=session_execute_json(created=False)
    )
    with SessionManager() as manager:
        manager.execute_code("1")
    request = httpx_mock.get_requests()[0]
    assert request.headers["Authorization"] == "Bearer msb-key"
    assert json.loads(request.content)["flavor"] == "large"


@pytest.mark.parametrize(
    ("env", "want"),
    [
        ({"AGENT2ENV_URL": "http://a", "MSB_SERVER_URL": "http://b"}, "http://a"),
        ({"MSB_SERVER_URL": "http://b", "SANDBOX_BASE_URL": "http://c"}, "http://b"),
        ({"SANDBOX_BASE_URL": "http://c"}, "http://c"),
        ({"AGENT2ENV_URL": " "}, None),
    ],
)
def test_url_precedence(env: dict[str, str], want: str | None) -> None:
    assert SessionConfig.from_env(env).server_url == want


def test_from_env_overrides() -> None:
    cfg = SessionConfig.from_env({"MSB_DEFAULT_FLAVOR": "small"}, default_flavor="medium")
    assert cfg.default_flavor == "medium"
    assert cfg.api_key is None


@pytest.mark.parametrize(
    ("env", "match"),
    [
        ({"MSB_SESSION_TIMEOUT": "soon"}, "MSB_SESSION_TIMEOUT: timeout 'soon' is neither"),
        ({"SANDBOX_TIMEOUT": "-3"}, "SANDBOX_TIMEOUT: timeout '-3' must be positive"),
        ({"MSB_SHARED_VOLUME_PATH": "/a"}, "MSB_SHARED_VOLUME_PATH: shared volume '/a'"),
    ],
)
def test_bad_environment(env: dict[str, str], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        SessionConfig.from_env(env)


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("1800", 1800.0),
        ("2.5", 2.5),
        ("30m", 1800.0),
        ("1h30m", 5400.0),
        ("1.5h", 5400.0),
        ("90s", 90.0),
        ("500ms", 0.5),
    ],
)
def test_parse_duration(text: str, want: float) -> None:
    assert parse_duration(text) == want


@pytest.mark.parametrize("text", ["", "0", "-1", "inf", "nan", "m", "30 m", "3d", "1h-2m"])
def test_parse_duration_refuses(text: str) -> None:
    with pytest.raises(ValueError, match="timeout"):
        parse_duration(text)


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("/srv/a:/data", [SharedVolume("/srv/a", "/data")]),
        (
            '["/srv/a:/data", "/srv/b:/common:common+ro"]',
            [SharedVolume("/srv/a", "/data"), SharedVolume("/srv/b", "/common", True, True)],
        ),
        (
            "/srv/a:/a:rw+session, ,/srv/b:/b",
            [SharedVolume("/srv/a", "/a"), SharedVolume("/srv/b", "/b")],
        ),
    ],
)
def test_parse_shared_volumes(text: str, want: list[SharedVolume]) -> None:
    assert parse_shared_volumes(text) == want


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("[1]", "not a JSON array of strings"),
        ("[oops", "not a JSON array of strings"),
        ("/a:/b:/c:/d", "is not host:guest"),
        ("/a:/b:shared", "option 'shared'"),
        ("a:/b", "paths must be absolute"),
        ("/a/../b:/b", "paths must be absolute"),
        ("/a:/", "paths must be absolute"),
    ],
)
def test_parse_shared_volumes_refuses(text: str, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        parse_shared_volumes(text)


@pytest.mark.parametrize(
    ("api_key", "session_id", "guest", "want"),
    [
        (None, "my-session", "/data/out.csv", "/srv/a/my-session/out.csv"),
        (None, "my-session", "/data", "/srv/a/my-session"),
        (None, "my session", "/data/x", "/srv/a/my_session-{digest}/x"),
        (None, "s", "/common/x/../y", "/srv/b/y"),
        ("k", "s", "/data/x", "/srv/a/{tenant}-s/x"),
    ],
)
def test_shared_path(
    make: Factory, api_key: str | None, session_id: str, guest: str, want: str
) -> None:
    tenant = hashlib.sha256(b"agent2env tenant\x00k").hexdigest()[:24]
    digest = hashlib.sha256(f"/{session_id}".encode()).hexdigest()[:16]
    manager = make(
        api_key=api_key,
        shared_volumes=(SharedVolume("/srv/a", "/data"), SharedVolume("/srv/b", "/common", True)),
    )
    got = manager.shared_path(session_id, guest)
    assert got == Path(want.format(tenant=tenant, digest=digest))
    with pytest.raises(ValueError, match="none of the shared volumes"):
        manager.shared_path(session_id, "/datax/y")


def test_flavors() -> None:
    assert {name: (f.cpus, f.memory) for name, f in FLAVORS.items()} == {
        "small": (1, "1Gi"),
        "medium": (2, "2Gi"),
        "large": (4, "4Gi"),
    }
