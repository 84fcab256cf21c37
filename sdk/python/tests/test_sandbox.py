from __future__ import annotations

import base64
import builtins
import io
import json
import os
import stat
import threading
from pathlib import Path
from typing import Any

import pytest
from pytest_httpx import HTTPXMock

from agent2env import (
    APIError,
    BadRequestError,
    ConflictError,
    NotFoundError,
    SandboxFailedError,
    StreamError,
    TimeoutError,
)
from agent2env.models import ExecEvent, SandboxList, SandboxOverrides, SandboxStatus

from .conftest import BASE, BrokenStream, multipart_parts, sandbox_json, sse

SB = f"{BASE}/sandboxes/sb1234567890"


def body(httpx_mock: HTTPXMock) -> Any:
    return json.loads(httpx_mock.get_requests()[-1].content)


@pytest.mark.parametrize(
    ("kwargs", "want"),
    [
        ({}, {"template": "python-data-science"}),
        (
            {"overrides": {"ttl": 7200, "env": {"DEBUG": "true"}}},
            {
                "template": "python-data-science",
                "overrides": {"ttl": 7200, "env": {"DEBUG": "true"}},
            },
        ),
        (
            {"template_version": 2, "overrides": SandboxOverrides(cpu="1", memory="1Gi", ttl=0)},
            {
                "template": "python-data-science",
                "templateVersion": 2,
                "overrides": {"cpu": "1", "memory": "1Gi", "ttl": 0},
            },
        ),
        (
            {"metadata": {"team": "eval"}},
            {"template": "python-data-science", "metadata": {"team": "eval"}},
        ),
    ],
)
def test_create(client: Any, httpx_mock: HTTPXMock, kwargs: dict[str, Any], want: Any) -> None:
    httpx_mock.add_response(
        method="POST", url=f"{BASE}/sandboxes", status_code=201, json=sandbox_json(status="pending")
    )
    sb = client.sandbox.create(template="python-data-science", **kwargs)
    assert body(httpx_mock) == want
    assert sb.id == "sb1234567890"
    assert sb.status is SandboxStatus.PENDING
    assert sb.template_version == 1
    assert sb.access_token == "ab" * 32
    assert sb.access_url == "http://daemon.test/api/v1/sandbox/sb1234567890"


def test_create_unknown_template(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(
        status_code=404, json={"error": "template nope not found", "code": "TEMPLATE_NOT_FOUND"}
    )
    with pytest.raises(NotFoundError) as info:
        client.sandbox.create("nope")
    assert info.value.status_code == 404
    assert info.value.code == "TEMPLATE_NOT_FOUND"
    assert info.value.message == "template nope not found"


def test_create_from_image(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(
        method="POST",
        url=f"{BASE}/sandboxes",
        status_code=201,
        json=sandbox_json(metadata={"team": "eval"}),
    )
    sb = client.sandbox.create_from_image(
        "agent2env/python", memory="256Mi", ttl=0, env={"A": "1"}, metadata={"team": "eval"}
    )
    assert body(httpx_mock) == {
        "image": "agent2env/python",
        "memory": "256Mi",
        "ttl": 0,
        "env": {"A": "1"},
        "metadata": {"team": "eval"},
    }
    assert sb.metadata == {"team": "eval"}


def test_list_get_delete(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(
        method="GET",
        url=f"{BASE}/sandboxes",
        json={"items": [sandbox_json(), sandbox_json(id="other")]},
    )
    httpx_mock.add_response(method="GET", url=SB, json=sandbox_json(reason="ok"))
    httpx_mock.add_response(method="DELETE", url=SB, status_code=204)
    assert [sb.id for sb in client.sandbox.list()] == ["sb1234567890", "other"]
    assert client.sandbox.get("sb1234567890").reason == "ok"
    assert client.sandbox.delete("sb1234567890") is None


def test_list_empty(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(url=f"{BASE}/sandboxes", json={"items": []})
    assert client.sandbox.list() == []


@pytest.mark.parametrize(
    ("kwargs", "query"),
    [
        ({"order": "desc"}, "order=desc"),
        ({"status": SandboxStatus.PAUSED}, "status=paused"),
        ({"status": "failed", "order": "asc"}, "status=failed&order=asc"),
        (
            {"status": [SandboxStatus.RUNNING, "pending"], "order": "desc"},
            "status=running&status=pending&order=desc",
        ),
        ({"status": []}, ""),
    ],
)
def test_list_selected_and_ordered(
    client: Any, httpx_mock: HTTPXMock, kwargs: dict[str, Any], query: str
) -> None:
    httpx_mock.add_response(
        method="GET",
        url=f"{BASE}/sandboxes" + (f"?{query}" if query else ""),
        json={"items": [sandbox_json(id="newer"), sandbox_json()]},
    )
    assert [sb.id for sb in client.sandbox.list(**kwargs)] == ["newer", "sb1234567890"]


def test_list_page(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(
        method="GET",
        url=f"{BASE}/sandboxes?status=running&limit=2&cursor=c1&order=desc",
        json={"items": [sandbox_json(id="newer"), sandbox_json()], "nextCursor": "c2"},
    )
    httpx_mock.add_response(
        method="GET", url=f"{BASE}/sandboxes?limit=2&cursor=c2", json={"items": []}
    )
    page = client.sandbox.list_page(status="running", limit=2, cursor="c1", order="desc")
    assert isinstance(page, SandboxList)
    assert ([sb.id for sb in page.items], page.next_cursor) == (["newer", "sb1234567890"], "c2")
    last = client.sandbox.list_page(limit=2, cursor=page.next_cursor)
    assert (last.items, last.next_cursor) == ([], None)


def test_list_page_bad_limit(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(
        url=f"{BASE}/sandboxes?limit=0",
        status_code=400,
        json={"code": "INVALID_REQUEST", "message": 'limit "0": want a number from 1 to 1000'},
    )
    with pytest.raises(BadRequestError, match="limit"):
        client.sandbox.list_page(limit=0)


def test_ids_are_escaped(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(
        method="GET", url=f"{BASE}/sandboxes/a%2Fb%3F", json=sandbox_json(id="a/b?")
    )
    assert client.sandbox.get("a/b?").id == "a/b?"


def test_empty_id_is_refused(client: Any) -> None:
    with pytest.raises(ValueError, match="sandbox id is empty"):
        client.sandbox.get("")


@pytest.mark.parametrize("op", ["stop", "start", "restart"])
def test_control(client: Any, httpx_mock: HTTPXMock, op: str) -> None:
    httpx_mock.add_response(method="POST", url=f"{SB}/{op}", json={"message": f"{op} requested"})
    assert getattr(client.sandbox, op)("sb1234567890") is None
    assert httpx_mock.get_requests()[0].content == b""


@pytest.mark.parametrize(("op", "state"), [("pause", "paused"), ("resume", "running")])
def test_pause_resume(client: Any, httpx_mock: HTTPXMock, op: str, state: str) -> None:
    # The daemon gives a paused sandbox as running in status, for LiteBoxd's clients.
    wire = sandbox_json(status="running", state=state)
    httpx_mock.add_response(method="POST", url=f"{SB}/{op}", json=wire)
    sb = getattr(client.sandbox, op)("sb1234567890")
    assert sb.status == SandboxStatus(state)
    assert httpx_mock.get_requests()[0].content == b""


def test_paused_in_state(client: Any, httpx_mock: HTTPXMock) -> None:
    paused = sandbox_json(status="running", state="paused")
    httpx_mock.add_response(url=f"{BASE}/sandboxes", json={"items": [paused, sandbox_json()]})
    httpx_mock.add_response(url=SB, json=paused)
    assert [sb.status for sb in client.sandbox.list()] == [
        SandboxStatus.PAUSED,
        SandboxStatus.RUNNING,  # a daemon that sends no state: its status
    ]
    with pytest.raises(SandboxFailedError, match="Sandbox is paused"):
        client.sandbox.wait_for_ready("sb1234567890", poll_interval=0.001)


@pytest.mark.parametrize(
    ("status", "code", "exc"),
    [(409, "CONFLICT", ConflictError), (501, "NOT_IMPLEMENTED", APIError)],
)
def test_pause_refused(
    client: Any, httpx_mock: HTTPXMock, status: int, code: str, exc: type[Exception]
) -> None:
    httpx_mock.add_response(status_code=status, json={"error": "cannot pause", "code": code})
    with pytest.raises(exc, match="cannot pause") as info:
        client.sandbox.pause("sb1234567890")
    assert info.value.code == code


def test_stop_not_running(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(
        status_code=409, json={"error": "sandbox is not running", "code": "CONFLICT"}
    )
    with pytest.raises(ConflictError, match="not running"):
        client.sandbox.stop("sb1234567890")


def test_execute(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(
        method="POST",
        url=f"{SB}/exec",
        json={"exit_code": 0, "stdout": "Hello from sandbox!\n", "stderr": "", "duration_ms": 12.5},
    )
    res = client.sandbox.execute(
        "sb1234567890", command=["python", "-c", "print('Hello from sandbox!')"]
    )
    assert body(httpx_mock) == {
        "command": ["python", "-c", "print('Hello from sandbox!')"],
        "timeout": 30,
        "output_encoding": "base64",
    }
    assert (res.exit_code, res.stdout, res.stderr, res.duration_ms, res.timed_out) == (
        0,
        "Hello from sandbox!\n",
        "",
        12.5,
        False,
    )


def test_execute_additions_and_read_timeout(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(
        json={"exit_code": 3, "stdout": "", "stderr": "x", "duration_ms": 1, "timed_out": True}
    )
    res = client.sandbox.execute(
        "sb1234567890", ["cat"], timeout=120, env={"A": "b"}, cwd="sub", stdin="in"
    )
    assert body(httpx_mock) == {
        "command": ["cat"],
        "timeout": 120,
        "env": {"A": "b"},
        "cwd": "sub",
        "stdin": "in",
        "output_encoding": "base64",
    }
    assert res.exit_code == 3
    assert res.timed_out
    # The client waits longer than the command may run.
    assert httpx_mock.get_requests()[0].extensions["timeout"]["read"] == 150


# Output that is not UTF-8: every byte value, then invalid sequences (a lone
# continuation byte, a cut character, an overlong NUL, a surrogate).
BINARY = bytes(range(256)) + b"\x80 \xe2\x82 \xc0\x80 \xed\xa0\x80 \xe2\x82\xac"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def test_execute_binary_output(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(
        json={
            "exit_code": 0,
            "stdout": b64(BINARY),
            "stderr": b64(b"\xff"),
            "encoding": "base64",
            "duration_ms": 1,
        }
    )
    res = client.sandbox.execute("sb1234567890", ["cat", "f"])
    assert body(httpx_mock)["output_encoding"] == "base64"
    assert (res.stdout_bytes, res.stderr_bytes) == (BINARY, b"\xff")
    assert res.stdout == BINARY.decode("utf-8", "replace")
    assert res.stderr == "\ufffd"


def test_execute_text_output(client: Any, httpx_mock: HTTPXMock) -> None:
    # A daemon that predates output_encoding answers text, unmarked.
    httpx_mock.add_response(json={"exit_code": 0, "stdout": "é\ufffd", "stderr": ""})
    res = client.sandbox.execute("sb1234567890", ["true"])
    assert (res.stdout, res.stdout_bytes, res.stderr_bytes) == ("é\ufffd", "é\ufffd".encode(), b"")


@pytest.mark.parametrize(
    "reply",
    [
        {"exit_code": 0, "stdout": "not base64!", "stderr": "", "encoding": "base64"},
        {"exit_code": 0, "stdout": "", "stderr": "", "encoding": "base32"},
    ],
)
def test_execute_bad_output(client: Any, httpx_mock: HTTPXMock, reply: dict[str, Any]) -> None:
    httpx_mock.add_response(json=reply)
    with pytest.raises(ValueError, match=r"base64|encoding"):
        client.sandbox.execute("sb1234567890", ["true"])


def test_execute_stream_binary_output(client: Any, httpx_mock: HTTPXMock) -> None:
    def event(name: str, data: bytes) -> tuple[str, str]:
        return (name, json.dumps({"type": name, "data": b64(data), "encoding": "base64"}))

    httpx_mock.add_response(
        content=sse(
            event("stdout", BINARY[:100]),
            event("stderr", b"\xff"),
            event("stdout", BINARY[100:]),
            ("exit", '{"type":"exit","duration_ms":2}'),
        )
    )
    events = list(client.sandbox.execute_stream("sb1234567890", ["cat", "f"]))
    assert body(httpx_mock)["output_encoding"] == "base64"
    out = b"".join(e.data_bytes for e in events if e.type == "stdout")
    assert out == BINARY
    assert [e.data_bytes for e in events if e.type == "stderr"] == [b"\xff"]
    assert events[0].data == BINARY[:100].decode("utf-8", "replace")
    assert events[-1] == ExecEvent(type="exit", exit_code=0, duration_ms=2)


def test_execute_empty_command(client: Any) -> None:
    with pytest.raises(ValueError, match="command is empty"):
        client.sandbox.execute("sb1234567890", [])


def test_execute_not_ready(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(
        status_code=409, json={"error": "sandbox is pending", "code": "SANDBOX_NOT_READY"}
    )
    with pytest.raises(ConflictError) as info:
        client.sandbox.execute("sb1234567890", ["true"])
    assert info.value.code == "SANDBOX_NOT_READY"


def test_execute_stream(client: Any, httpx_mock: HTTPXMock) -> None:
    stream = sse(
        ("stdout", '{"type":"stdout","data":"a\\n"}'),
        ("ping", "{}"),
        ("stderr", '{"type":"stderr","data":"b\\n"}'),
        ("exit", '{"type":"exit","exit_code":3,"duration_ms":502.2}'),
    )
    httpx_mock.add_response(
        method="POST",
        url=f"{SB}/exec/stream",
        content=stream,
        headers={"Content-Type": "text/event-stream"},
    )
    events = list(
        client.sandbox.execute_stream(
            "sb1234567890", ["sh", "-c", "echo a; echo b >&2; exit 3"], timeout=5
        )
    )
    assert events == [
        ExecEvent(type="stdout", data="a\n"),
        ExecEvent(type="stderr", data="b\n"),
        ExecEvent(type="exit", exit_code=3, duration_ms=502.2),
    ]
    # Output events carry no exit code (audit finding 10): only the exit event has one.
    assert [e.exit_code for e in events] == [None, None, 3]
    assert body(httpx_mock)["timeout"] == 5
    # A stream may be idle as long as the command is: no read timeout.
    assert httpx_mock.get_requests()[0].extensions["timeout"]["read"] is None


def test_exec_event_exit_code() -> None:
    # The wire leaves out an exit code of 0; an output event has none.
    assert ExecEvent.model_validate({"type": "exit"}).exit_code == 0
    assert ExecEvent(type="exit").exit_code == 0
    assert ExecEvent.model_validate({"type": "stdout", "data": "x"}).exit_code is None
    assert ExecEvent(type="stderr", data="x").exit_code is None


def test_execute_stream_error_event(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(
        content=sse(
            ("stdout", '{"type":"stdout","data":"a"}'),
            ("error", '{"error":"sandbox gone","code":"SANDBOX_NOT_FOUND"}'),
        )
    )
    with pytest.raises(NotFoundError) as info:
        list(client.sandbox.execute_stream("sb1234567890", ["true"]))
    assert info.value.code == "SANDBOX_NOT_FOUND"


def test_execute_stream_cut_short(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(
        content=sse(("stdout", '{"type":"stdout","data":"a"}')) + b"event: exit\ndata: {"
    )
    with pytest.raises(StreamError, match="ended early"):
        list(client.sandbox.execute_stream("sb1234567890", ["true"]))


def test_execute_stream_refused_before_start(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(
        status_code=409, json={"error": "not running", "code": "SANDBOX_NOT_READY"}
    )
    with pytest.raises(ConflictError):
        list(client.sandbox.execute_stream("sb1234567890", ["true"]))


def test_get_logs(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(
        method="GET", url=f"{SB}/logs", json={"logs": "hi\n", "events": ["t pending", "t running"]}
    )
    logs = client.sandbox.get_logs("sb1234567890")
    assert logs.logs == "hi\n"
    assert logs.events == ["t pending", "t running"]
    assert logs.events_dropped == 0


def test_get_logs_of_a_cut_history(client: Any, httpx_mock: HTTPXMock) -> None:
    body = {"logs": "", "events": ["t running"], "events_dropped": 7}
    httpx_mock.add_response(method="GET", url=f"{SB}/logs", json=body)
    assert client.sandbox.get_logs("sb1234567890").events_dropped == 7


FILE_INFO = {
    "name": "y.txt",
    "path": "/workspace/x/y.txt",
    "size": 5,
    "mode": "0755",
    "mod_time": "2025-01-01T12:00:00Z",
    "is_dir": False,
}


@pytest.mark.parametrize(
    ("content", "want"),
    [
        (b"hello", b"hello"),
        ("héllo", "héllo".encode()),
        (io.BytesIO(b"from a file"), b"from a file"),
    ],
)
def test_upload_file(client: Any, httpx_mock: HTTPXMock, content: Any, want: bytes) -> None:
    httpx_mock.add_response(method="POST", url=f"{SB}/files", json=FILE_INFO)
    info = client.sandbox.upload_file("sb1234567890", "x/y.txt", content, mode=0o755)
    assert info.path == "/workspace/x/y.txt"
    assert info.mode == "0755"
    # path and mode come before the file, so that the daemon need not spool it.
    assert multipart_parts(httpx_mock.get_requests()[0]) == [
        ("path", b"x/y.txt"),
        ("mode", b"0755"),
        ("file", want),
    ]


def test_upload_path(client: Any, httpx_mock: HTTPXMock, tmp_path: Path) -> None:
    local = tmp_path / "data.bin"
    local.write_bytes(b"\x00\x01" * 100_000)
    httpx_mock.add_response(method="POST", url=f"{SB}/files", json=FILE_INFO)
    client.sandbox.upload_path("sb1234567890", "/workspace/data.bin", local)
    assert multipart_parts(httpx_mock.get_requests()[0]) == [
        ("path", b"/workspace/data.bin"),
        ("file", local.read_bytes()),
    ]


def test_upload_empty_path(client: Any) -> None:
    with pytest.raises(ValueError, match="path is empty"):
        client.sandbox.upload_file("sb1234567890", "", b"x")


def test_download_file(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(method="GET", url=f"{SB}/files?path=x%2Fy.txt", content=b"hello")
    assert client.sandbox.download_file("sb1234567890", "x/y.txt") == b"hello"


def test_download_missing(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(
        status_code=404, json={"error": "file not found", "code": "FILE_NOT_FOUND"}
    )
    with pytest.raises(NotFoundError) as info:
        client.sandbox.download_file("sb1234567890", "nope")
    assert info.value.code == "FILE_NOT_FOUND"


def test_download_to(client: Any, httpx_mock: HTTPXMock, tmp_path: Path) -> None:
    data = bytes(range(256)) * 1000
    httpx_mock.add_response(url=f"{SB}/files?path=big", content=data, is_reusable=True)
    dest = tmp_path / "big"
    assert client.sandbox.download_to("sb1234567890", "big", dest) == len(data)
    assert dest.read_bytes() == data
    buf = io.BytesIO()
    assert client.sandbox.download_to("sb1234567890", "big", buf) == len(data)
    assert buf.getvalue() == data


def test_download_to_a_pipe(client: Any, httpx_mock: HTTPXMock, tmp_path: Path) -> None:
    # What is not a regular file (a named pipe here, /dev/null alike) is written, not replaced.
    httpx_mock.add_response(content=b"through the pipe")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    read: list[bytes] = []
    reader = threading.Thread(target=lambda: read.append(fifo.read_bytes()), daemon=True)
    reader.start()
    assert client.sandbox.download_to("sb1234567890", "big", fifo) == 16
    assert stat.S_ISFIFO(fifo.lstat().st_mode)
    reader.join(10)
    assert read == [b"through the pipe"]


def test_download_to_failure_removes_the_file(
    client: Any, httpx_mock: HTTPXMock, tmp_path: Path
) -> None:
    httpx_mock.add_response(
        status_code=404, json={"error": "file not found", "code": "FILE_NOT_FOUND"}
    )
    dest = tmp_path / "out"
    with pytest.raises(NotFoundError):
        client.sandbox.download_to("sb1234567890", "nope", str(dest))
    assert not dest.exists()
    assert list(tmp_path.iterdir()) == []


def test_download_to_failure_keeps_an_existing_file(
    client: Any, httpx_mock: HTTPXMock, tmp_path: Path
) -> None:
    dest = tmp_path / "out"
    dest.write_bytes(b"mine")
    dest.chmod(0o640)
    httpx_mock.add_response(
        status_code=404, json={"error": "file not found", "code": "FILE_NOT_FOUND"}
    )
    with pytest.raises(NotFoundError):
        client.sandbox.download_to("sb1234567890", "nope", dest)
    # A download cut midway leaves it too.
    httpx_mock.add_response(stream=BrokenStream(b"part of it"))
    with pytest.raises(ConnectionError, match="peer closed connection"):
        client.sandbox.download_to("sb1234567890", "big", dest)
    assert dest.read_bytes() == b"mine"
    assert list(tmp_path.iterdir()) == [dest]
    # A complete one replaces it, with its permissions.
    httpx_mock.add_response(content=b"theirs")
    assert client.sandbox.download_to("sb1234567890", "big", dest) == 6
    assert dest.read_bytes() == b"theirs"
    assert dest.stat().st_mode & 0o777 == 0o640
    assert list(tmp_path.iterdir()) == [dest]


def test_download_to_a_missing_directory(
    client: Any, httpx_mock: HTTPXMock, tmp_path: Path
) -> None:
    # The error names the path given, not the temporary file made beside it.
    httpx_mock.add_response(content=b"data", is_optional=True)
    dest = tmp_path / "nodir" / "out"
    with pytest.raises(FileNotFoundError) as info:
        client.sandbox.download_to("sb1234567890", "big", dest)
    assert info.value.filename == str(dest)
    assert ".part" not in str(info.value)


def test_wait_for_ready(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(url=SB, json=sandbox_json(status="pending"))
    httpx_mock.add_response(url=SB, json=sandbox_json(status="pending"))
    httpx_mock.add_response(url=SB, json=sandbox_json(status="running"))
    sb = client.sandbox.wait_for_ready("sb1234567890", poll_interval=0.001)
    assert sb.status == SandboxStatus.RUNNING
    assert len(httpx_mock.get_requests()) == 3


@pytest.mark.parametrize(
    ("status", "reason", "match"),
    [
        ("failed", "pull image: not found", "Sandbox failed to start: pull image: not found"),
        ("succeeded", None, "Sandbox is succeeded"),
        ("terminating", None, "Sandbox is terminating"),
        ("paused", "paused by request", r"Sandbox is paused \(resume it to have it run\)"),
    ],
)
def test_wait_for_ready_final(
    client: Any, httpx_mock: HTTPXMock, status: str, reason: str | None, match: str
) -> None:
    httpx_mock.add_response(url=SB, json=sandbox_json(status=status, reason=reason))
    with pytest.raises(SandboxFailedError, match=match) as info:
        client.sandbox.wait_for_ready("sb1234567890", poll_interval=0.001)
    assert info.value.sandbox_id == "sb1234567890"
    assert info.value.status == status
    assert info.value.reason == reason


def test_wait_for_ready_timeout(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(url=SB, json=sandbox_json(status="pending"), is_reusable=True)
    with pytest.raises(TimeoutError, match=r"not ready after 0\.05s"):
        client.sandbox.wait_for_ready("sb1234567890", poll_interval=0.01, timeout=0.05)
    # It is also the built-in TimeoutError.
    assert issubclass(TimeoutError, builtins.TimeoutError)


def test_wait_for_ready_gone(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(
        url=SB, status_code=404, json={"error": "not found", "code": "SANDBOX_NOT_FOUND"}
    )
    with pytest.raises(NotFoundError):
        client.sandbox.wait_for_ready("sb1234567890")


def test_string_command_refused(client: Any, httpx_mock: HTTPXMock) -> None:
    """A string is a Sequence[str] too: it must not run as one argument a character."""
    for call in (
        lambda: client.sandbox.execute("sb1234567890", "echo hi"),
        lambda: list(client.sandbox.execute_stream("sb1234567890", "echo hi")),
        lambda: client.sandbox.create_terminal("sb1234567890", "work", command="bash"),
    ):
        with pytest.raises(TypeError, match=r"a list of arguments, such as \['sh', '-c', "):
            call()
    assert httpx_mock.get_requests() == []
