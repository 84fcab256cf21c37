from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from pytest_httpx import HTTPXMock

from agent2env import BadRequestError, NotFoundError, StreamError
from agent2env.models import ContextList, ExecutionError, ExecutionResult

from .conftest import BASE, context_json, sse

CTX = f"{BASE}/contexts/ctx-3f9a1c2b7d4e"
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\nfake").decode()


def body(httpx_mock: HTTPXMock) -> Any:
    return json.loads(httpx_mock.get_requests()[-1].content)


@pytest.mark.parametrize(
    ("kwargs", "want"),
    [
        ({}, {"type": "jupyter", "language": "python"}),
        (
            {
                "language": "js",
                "session_name": "s",
                "working_dir": "/workspace/w",
                "sandbox_id": "sb1",
                "template": "t",
                "env": {"A": "1"},
            },
            {
                "type": "jupyter",
                "language": "js",
                "session_name": "s",
                "working_dir": "/workspace/w",
                "sandbox_id": "sb1",
                "template": "t",
                "env": {"A": "1"},
            },
        ),
    ],
)
def test_create(client: Any, httpx_mock: HTTPXMock, kwargs: dict[str, Any], want: Any) -> None:
    httpx_mock.add_response(
        method="POST", url=f"{BASE}/contexts", status_code=201, json=context_json()
    )
    ctx = client.contexts.create(**kwargs)
    assert body(httpx_mock) == want
    assert (ctx.context_id, ctx.language, ctx.sandbox_id, ctx.execution_count) == (
        "ctx-3f9a1c2b7d4e",
        "python",
        "sb1234567890",
        0,
    )


def test_create_waits_for_a_new_sandbox(client: Any, httpx_mock: HTTPXMock) -> None:
    # The daemon answers once the interpreter runs, in a sandbox whose image it may pull or
    # build first: far longer than the client's 30 s read timeout.
    httpx_mock.add_response(
        method="POST", url=f"{BASE}/contexts", status_code=201, json=context_json()
    )
    client.contexts.create()
    assert httpx_mock.get_requests()[0].extensions["timeout"]["read"] == 330


def test_create_unknown_language(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(
        status_code=400, json={"error": "unknown language cobol", "code": "INVALID_LANGUAGE"}
    )
    with pytest.raises(BadRequestError) as info:
        client.contexts.create("cobol")
    assert info.value.code == "INVALID_LANGUAGE"


def test_seed_001_context_without_additions(client: Any, httpx_mock: HTTPXMock) -> None:
    # Seed 001's service answers only these four fields.
    httpx_mock.add_response(
        json={
            "context_id": "ctx-1",
            "type": "jupyter",
            "status": "active",
            "created_at": "2025-10-22T11:30:00Z",
        }
    )
    ctx = client.contexts.get("ctx-1")
    assert (ctx.language, ctx.sandbox_id) == (None, None)


@pytest.mark.parametrize(
    ("kwargs", "params", "answer"),
    [
        ({}, {}, {"items": [context_json()], "contexts": [context_json()], "total": 1}),
        (
            {"session_name": "s", "sandbox_id": "sb"},
            {"session_name": "s", "sandbox_id": "sb"},
            {"contexts": [context_json()], "total": 1},
        ),
        (
            {"sandbox_id": "sb", "order": "desc"},
            {"sandbox_id": "sb", "order": "desc"},
            {"items": [context_json()], "contexts": [context_json()], "total": 1},
        ),
    ],
)
def test_list(
    client: Any, httpx_mock: HTTPXMock, kwargs: dict[str, Any], params: dict[str, str], answer: Any
) -> None:
    httpx_mock.add_response(method="GET", url=f"{BASE}/contexts", match_params=params, json=answer)
    assert [c.context_id for c in client.contexts.list(**kwargs)] == ["ctx-3f9a1c2b7d4e"]


def test_list_page(client: Any, httpx_mock: HTTPXMock) -> None:
    page = {"items": [context_json()], "contexts": [context_json()], "total": 1}
    httpx_mock.add_response(
        method="GET",
        url=f"{BASE}/contexts?sandbox_id=sb&limit=1&cursor=c1&order=desc",
        json={**page, "next_cursor": "c2"},
    )
    httpx_mock.add_response(method="GET", url=f"{BASE}/contexts?limit=1&cursor=c2", json=page)
    first = client.contexts.list_page(sandbox_id="sb", limit=1, cursor="c1", order="desc")
    assert isinstance(first, ContextList)
    assert ([c.context_id for c in first.items], first.next_cursor) == (["ctx-3f9a1c2b7d4e"], "c2")
    last = client.contexts.list_page(limit=1, cursor=first.next_cursor)
    assert ([c.context_id for c in last.items], last.next_cursor) == (["ctx-3f9a1c2b7d4e"], None)


def test_list_page_bad_cursor(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(
        url=f"{BASE}/contexts?cursor=nope",
        status_code=400,
        json={
            "code": "INVALID_REQUEST",
            "message": 'page cursor "nope" is not one this server gave',
        },
    )
    with pytest.raises(BadRequestError, match="cursor"):
        client.contexts.list_page(cursor="nope")


def test_get_delete(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(
        method="GET", url=CTX, json=context_json(execution_count=2, made_by_run="run-7")
    )
    httpx_mock.add_response(
        method="DELETE",
        url=CTX,
        json={"context_id": "ctx-3f9a1c2b7d4e", "status": "deleted", "message": "Context deleted"},
    )
    got = client.contexts.get("ctx-3f9a1c2b7d4e")
    assert (got.execution_count, got.made_by_run, got.made_by_sandbox) == (2, "run-7", None)
    assert client.contexts.delete("ctx-3f9a1c2b7d4e").status == "deleted"


def test_execute(client: Any, httpx_mock: HTTPXMock) -> None:
    answer = {
        "output": {"stdout": "Hello from Local Sandbox\n", "stderr": ""},
        "success": True,
        "execution_time": 0.123,
        "context_id": "ctx-3f9a1c2b7d4e",
        "execution_count": 1,
        "result": "42",
        "results": [
            {"text": "<Figure size 640x480 with 1 Axes>", "png": PNG},
            {"html": "<b>x</b>", "json": {"a": [1]}, "text": "{'a': [1]}"},
            {"text": "42", "is_main_result": True},
        ],
    }
    httpx_mock.add_response(method="POST", url=f"{CTX}/execute", json=answer)
    res = client.contexts.execute(
        "ctx-3f9a1c2b7d4e", 'print("Hello from Local Sandbox")', timeout=30, env={"A": "1"}
    )
    assert body(httpx_mock) == {
        "code": 'print("Hello from Local Sandbox")',
        "timeout": 30,
        "env": {"A": "1"},
    }
    assert res.success
    assert res.stdout == "Hello from Local Sandbox\n"
    assert res.stderr == ""
    assert res.result == "42"
    assert res.results[0].png_bytes() == b"\x89PNG\r\n\x1a\nfake"
    assert res.results[0].jpeg_bytes() is None
    assert res.results[1].json == {"a": [1]}
    assert res.results[1].html == "<b>x</b>"
    assert res.results[2].is_main_result
    assert res.error is None
    assert not res.state_lost
    assert httpx_mock.get_requests()[0].extensions["timeout"]["read"] == 60


def test_execute_failure_is_a_result(client: Any, httpx_mock: HTTPXMock) -> None:
    answer = {
        "output": {"stdout": "", "stderr": ""},
        "success": False,
        "execution_time": 2.0,
        "results": [],
        "error": {
            "name": "TimeoutError",
            "value": "timed out after 2s",
            "traceback": "",
            "kind": "system",
        },
        "state_lost": True,
    }
    httpx_mock.add_response(json=answer)
    res = client.contexts.execute("ctx-3f9a1c2b7d4e", "while True: pass", timeout=2)
    assert not res.success
    assert res.error == ExecutionError(
        name="TimeoutError", value="timed out after 2s", traceback="", kind="system"
    )
    assert res.state_lost


def test_execute_gone(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(
        status_code=404, json={"error": "context not found", "code": "CONTEXT_NOT_FOUND"}
    )
    with pytest.raises(NotFoundError) as info:
        client.contexts.execute("ctx-3f9a1c2b7d4e", "1")
    assert info.value.code == "CONTEXT_NOT_FOUND"


def test_execute_empty_code(client: Any) -> None:
    with pytest.raises(ValueError, match="code is empty"):
        client.contexts.execute("ctx-3f9a1c2b7d4e", "")


STREAM = sse(
    ("stdout", '{"text": "a\\n"}'),
    ("stderr", '{"text": "warn\\n"}'),
    ("result", json.dumps({"text": "<Figure>", "png": PNG})),
    ("stdout", '{"text": "b\\n"}'),
    (
        "error",
        json.dumps(
            {
                "name": "ZeroDivisionError",
                "value": "division by zero",
                "traceback": "tb",
                "kind": "runtime",
            }
        ),
    ),
    (
        "complete",
        json.dumps(
            {
                "output": {"stdout": "", "stderr": ""},
                "success": False,
                "execution_time": 0.01,
                "results": [],
            }
        ),
    ),
)


def test_iter_execute(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(method="POST", url=f"{CTX}/execute/stream", content=STREAM)
    events = list(client.contexts.iter_execute("ctx-3f9a1c2b7d4e", "1/0"))
    assert [e.type for e in events] == ["stdout", "stderr", "result", "stdout", "error", "complete"]
    assert events[0].text == "a\n"
    assert events[2].result == ExecutionResult(text="<Figure>", png=PNG)
    final = events[-1].response
    assert final is not None
    # The complete event leaves out what was streamed; the SDK fills it in.
    assert (final.stdout, final.stderr) == ("a\nb\n", "warn\n")
    assert final.results == [ExecutionResult(text="<Figure>", png=PNG)]
    assert final.error is not None
    assert final.error.kind == "runtime"
    assert httpx_mock.get_requests()[0].extensions["timeout"]["read"] is None


def test_execute_stream_callbacks(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(method="POST", url=f"{CTX}/execute/stream", content=STREAM)
    seen: list[Any] = []
    res = client.contexts.execute_stream(
        "ctx-3f9a1c2b7d4e",
        "1/0",
        timeout=5,
        env={"A": "1"},
        on_stdout=lambda s: seen.append(("out", s)),
        on_stderr=lambda s: seen.append(("err", s)),
        on_result=lambda r: seen.append(("result", r.text)),
        on_error=lambda e: seen.append(("error", e.name)),
    )
    assert seen == [
        ("out", "a\n"),
        ("err", "warn\n"),
        ("result", "<Figure>"),
        ("out", "b\n"),
        ("error", "ZeroDivisionError"),
    ]
    assert body(httpx_mock) == {"code": "1/0", "timeout": 5, "env": {"A": "1"}}
    assert res.stdout == "a\nb\n"
    assert not res.success


def test_execute_stream_without_callbacks(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(content=STREAM)
    assert (
        client.contexts.execute_stream("ctx-3f9a1c2b7d4e", "1/0").error.name == "ZeroDivisionError"
    )


def test_execute_stream_request_failed_midway(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(
        content=sse(
            ("stdout", '{"text": "a"}'),
            ("error", '{"error": "daemon shutting down", "code": "UNAVAILABLE"}'),
        )
    )
    with pytest.raises(Exception, match="daemon shutting down") as info:
        list(client.contexts.iter_execute("ctx-3f9a1c2b7d4e", "1"))
    assert info.value.status_code == 503


def test_execute_stream_cut_short(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(content=sse(("stdout", '{"text": "a"}')))
    with pytest.raises(StreamError, match="execution stream ended early"):
        client.contexts.execute_stream("ctx-3f9a1c2b7d4e", "1")
