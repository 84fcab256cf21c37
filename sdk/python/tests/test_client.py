from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from pytest_httpx import HTTPXMock

import agent2env
from agent2env import AsyncClient, Client, ConnectionError, TimeoutError, UnauthorizedError
from agent2env._base import ENV_TOKENS, ENV_URLS

from .conftest import BASE, HOST, BrokenStream, make_client, sandbox_json


@pytest.mark.parametrize(
    ("base_url", "want"),
    [
        ("http://h:8080/api/v1", "http://h:8080/api/v1"),
        ("http://h:8080/api/v1/", "http://h:8080/api/v1"),
        ("http://h:8080", "http://h:8080/api/v1"),
        (" http://h:8080/ ", "http://h:8080/api/v1"),
        ("https://proxy/agent2env", "https://proxy/agent2env/api/v1"),
    ],
)
def test_base_url(base_url: str, want: str) -> None:
    with Client(base_url) as client:
        assert client.base_url == want


@pytest.mark.parametrize("base_url", ["localhost:8080", "ftp://h/", "http://"])
def test_bad_base_url(base_url: str) -> None:
    with pytest.raises(ValueError, match="want http://host:port"):
        Client(base_url)


def test_defaults_and_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ENV_URLS:
        monkeypatch.delenv(name, raising=False)
    assert Client().base_url == "http://localhost:8080/api/v1"
    # Read in the order the docstring gives, the first set one wins.
    for i, name in reversed(list(enumerate(ENV_URLS))):
        monkeypatch.setenv(name, f"http://from-env:{i + 1}")
        assert Client().base_url == f"http://from-env:{i + 1}/api/v1"
    assert Client("http://given:9").base_url == "http://given:9/api/v1"


def test_environment_documented() -> None:
    """The constructor's docstring names each variable it reads, in the order it reads them."""
    doc = Client.__doc__ or ""
    for names in (ENV_URLS, ENV_TOKENS):
        where = [doc.find(f"``${name}``") for name in names]
        assert -1 not in where, names
        assert where == sorted(where), names


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_headers(httpx_mock: HTTPXMock, monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    monkeypatch.setenv("AGENT2ENV_TOKEN", "env-token")
    httpx_mock.add_response(json={"items": []}, is_reusable=True)
    for client in make_client(kind, auth_token="secret", headers={"X-Custom-Header": "value"}):
        client.sandbox.list()
    for client in make_client(kind):
        client.sandbox.list()
    for client in make_client(kind, auth_token=""):
        client.sandbox.list()
    given, from_env, none = httpx_mock.get_requests()
    assert given.headers["Authorization"] == "Bearer secret"
    assert given.headers["X-Custom-Header"] == "value"
    assert given.headers["User-Agent"] == f"agent2env-python/{agent2env.__version__}"
    assert from_env.headers["Authorization"] == "Bearer env-token"
    assert "Authorization" not in none.headers


def test_unauthorized(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(
        status_code=401,
        json={"error": "authentication required", "code": "UNAUTHORIZED"},
        headers={"WWW-Authenticate": "Bearer"},
    )
    with pytest.raises(UnauthorizedError, match="authentication required"):
        client.sandbox.list()


def test_health(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(method="GET", url=f"{HOST}/health", text="OK")
    assert client.health() is None


def test_connection_refused(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_exception(httpx.ConnectError("connection refused"), is_reusable=True)
    with pytest.raises(
        ConnectionError,
        match=f"cannot reach the agent2env daemon at {BASE}/sandboxes: connection refused",
    ) as info:
        client.sandbox.list()
    assert isinstance(info.value, agent2env.Agent2EnvError)
    assert isinstance(info.value, __import__("builtins").ConnectionError)
    assert "retry" in info.value.suggestion
    assert len(httpx_mock.get_requests()) == 3  # the first try and two retries


def test_request_timeout(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_exception(httpx.ReadTimeout("read timed out"))
    with pytest.raises(TimeoutError, match="timed out"):
        client.sandbox.get("sb1234567890")


def test_stream_broken_midway(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(stream=BrokenStream(b"event: stdout\ndata: {}\n\n"))
    with pytest.raises(ConnectionError, match="peer closed connection"):
        list(client.sandbox.execute_stream("sb1234567890", ["true"]))


def test_timeout_is_applied(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(json={"items": []})
    client.sandbox.list()
    assert httpx_mock.get_requests()[0].extensions["timeout"]["read"] == 30


def test_given_http_client_is_used_and_not_closed(httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(json=sandbox_json(), is_reusable=True)
    http = httpx.Client(timeout=5, headers={"X-From": "mine"})
    with Client(BASE, http_client=http) as client:
        client.sandbox.get("sb1234567890")
    assert not http.is_closed
    request = httpx_mock.get_requests()[0]
    assert request.headers["X-From"] == "mine"
    assert request.extensions["timeout"]["read"] == 5
    http.close()


async def test_async_given_http_client(httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(json=sandbox_json())
    http = httpx.AsyncClient()
    async with AsyncClient(BASE, http_client=http) as client:
        sb = await client.sandbox.get("sb1234567890")
    assert sb.id == "sb1234567890"
    assert not http.is_closed
    await http.aclose()


async def test_async_client_closes_its_own(httpx_mock: HTTPXMock) -> None:
    client = AsyncClient(BASE, timeout=httpx.Timeout(3.0))
    httpx_mock.add_response(json={"items": []})
    await client.sandbox.list()
    await client.close()
    with pytest.raises(RuntimeError):
        await client.sandbox.list()


async def test_async_calls_run_concurrently(httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(json=sandbox_json(), is_reusable=True)
    async with AsyncClient(BASE) as client:
        got = await asyncio.gather(*(client.sandbox.get("sb1234567890") for _ in range(5)))
    assert len(got) == 5


def test_non_json_answer(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(text="<html>oops</html>")
    with pytest.raises(agent2env.Agent2EnvError, match="decode response of GET"):
        client.sandbox.get("sb1234567890")
