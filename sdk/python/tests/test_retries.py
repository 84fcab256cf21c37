"""Retries of idempotent requests after connection errors and 503s, with back-off."""

from __future__ import annotations

import logging
from typing import Any

import httpx
import pytest
from pytest_httpx import HTTPXMock

import agent2env._base
from agent2env import (
    ConnectionError,
    ServiceUnavailableError,
    TimeoutError,
)
from agent2env._base import RETRY_BACKOFF_MAX, Request, may_retry, retry_delay
from agent2env.models import TemplateSpec, UpdateTemplateRequest

from .conftest import BASE, make_client, sandbox_json

SB = f"{BASE}/sandboxes/sb1234567890"
UNAVAILABLE = {"error": "the daemon is starting", "code": "UNAVAILABLE"}


NOT_SENT = [
    {"status_code": 503, "json": UNAVAILABLE},
    httpx.ConnectError("connection refused"),
    httpx.ConnectTimeout("connect timed out"),
]
BROKEN = [httpx.RemoteProtocolError("server disconnected"), httpx.ReadError("connection reset")]
GET = ("GET", SB, lambda c: c.sandbox.get("sb1234567890"))
DOWNLOAD = (
    "GET",
    f"{SB}/files?path=a.txt",
    lambda c: c.sandbox.download_file("sb1234567890", "a.txt"),
)
DELETE = ("DELETE", SB, lambda c: c.sandbox.delete("sb1234567890"))


@pytest.mark.parametrize(
    ("failure", "method", "url", "call"),
    [(f, *r) for f in NOT_SENT for r in (GET, DOWNLOAD, DELETE)]
    + [(f, *r) for f in BROKEN for r in (GET, DOWNLOAD)],
)
def test_idempotent_requests_are_retried(
    client: Any, httpx_mock: HTTPXMock, failure: Any, method: str, url: str, call: Any
) -> None:
    for _ in range(2):
        if isinstance(failure, Exception):
            httpx_mock.add_exception(failure, method=method, url=url)
        else:
            httpx_mock.add_response(method=method, url=url, **failure)
    httpx_mock.add_response(method=method, url=url, json=sandbox_json())
    call(client)
    assert len(httpx_mock.get_requests()) == 3


@pytest.mark.parametrize(
    "failure",
    [{"status_code": 503, "json": UNAVAILABLE}, httpx.ConnectError("connection refused")],
)
def test_posts_and_puts_are_not_retried(client: Any, httpx_mock: HTTPXMock, failure: Any) -> None:
    for _ in range(2):
        if isinstance(failure, Exception):
            httpx_mock.add_exception(failure)
        else:
            httpx_mock.add_response(**failure)
    with pytest.raises((ServiceUnavailableError, ConnectionError)):
        client.sandbox.execute("sb1234567890", ["true"])
    # A template's PUT makes a new version each time.
    with pytest.raises((ServiceUnavailableError, ConnectionError)):
        client.template.update("t", UpdateTemplateRequest(spec=TemplateSpec(image="i")))
    assert len(httpx_mock.get_requests()) == 2


@pytest.mark.parametrize("failure", BROKEN)
def test_a_delete_whose_connection_broke_is_not_retried(
    client: Any, httpx_mock: HTTPXMock, failure: Exception
) -> None:
    httpx_mock.add_exception(failure)
    with pytest.raises(ConnectionError):
        client.sandbox.delete("sb1234567890")
    assert len(httpx_mock.get_requests()) == 1


def test_read_timeouts_and_other_errors_are_not_retried(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_exception(httpx.ReadTimeout("read timed out"))
    with pytest.raises(TimeoutError):
        client.sandbox.get("sb1234567890")
    httpx_mock.add_response(status_code=500, json={"error": "boom", "code": "INTERNAL"})
    with pytest.raises(agent2env.InternalServerError):
        client.sandbox.get("sb1234567890")
    assert len(httpx_mock.get_requests()) == 2


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_max_retries(httpx_mock: HTTPXMock, kind: str) -> None:
    httpx_mock.add_response(status_code=503, json=UNAVAILABLE, is_reusable=True)
    for client in make_client(kind, max_retries=0):
        with pytest.raises(ServiceUnavailableError):
            client.sandbox.list()
    assert len(httpx_mock.get_requests()) == 1
    for client in make_client(kind, max_retries=4):
        with pytest.raises(ServiceUnavailableError):
            client.sandbox.list()
    assert len(httpx_mock.get_requests()) == 6


def test_what_may_be_retried() -> None:
    # A body in memory can be sent again, one streamed from a file cannot; a
    # template's PUT makes a new version each time; retries are counted.
    assert may_retry(Request("DELETE", "/x", content=b"a"), 0, 2)
    assert not may_retry(Request("DELETE", "/x", content=iter([b"a"])), 0, 2)
    assert not may_retry(Request("DELETE", "/x", files={"f": ("f", b"", "text/plain")}), 0, 2)
    assert not may_retry(Request("PUT", "/x", json={}), 0, 2)
    assert not may_retry(Request("GET", "/x"), 2, 2)


def test_retries_are_logged(
    client: Any, httpx_mock: HTTPXMock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="agent2env")
    httpx_mock.add_response(status_code=503, json=UNAVAILABLE)
    httpx_mock.add_response(json={"items": []})
    client.sandbox.list()
    (record,) = caplog.records
    assert record.name == "agent2env.http"
    assert record.getMessage().startswith(
        f"retrying GET {BASE}/sandboxes after 503 the daemon is starting (retry 1 of 2 in "
    )


def test_retry_after_is_honoured(client: Any, httpx_mock: HTTPXMock, monkeypatch: Any) -> None:
    waits: list[float] = []
    monkeypatch.setattr(agent2env._base.time, "sleep", waits.append)

    async def asleep(seconds: float) -> None:
        waits.append(seconds)

    monkeypatch.setattr(agent2env._async_base.asyncio, "sleep", asleep)
    httpx_mock.add_response(status_code=503, json=UNAVAILABLE, headers={"Retry-After": "1.5"})
    httpx_mock.add_response(json={"items": []})
    client.sandbox.list()
    assert waits == [1.5]


def test_retry_delay(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(agent2env._base, "RETRY_BACKOFF", 0.5)
    err = ServiceUnavailableError("x")
    err.retry_after = 3.0
    assert retry_delay(0, err) == 3.0
    err.retry_after = 1000.0  # unreasonable: back off as usual
    for attempt in range(8):
        base = min(agent2env._base.RETRY_BACKOFF * 2.0**attempt, RETRY_BACKOFF_MAX)
        assert base / 2 <= retry_delay(attempt, err) <= base
        assert base / 2 <= retry_delay(attempt) <= base


def test_unparsable_retry_after(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(
        status_code=503, json=UNAVAILABLE, headers={"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}
    )
    httpx_mock.add_response(json={"items": []})
    assert client.sandbox.list() == []
