from __future__ import annotations

import asyncio
import io
import json
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from pytest_httpx import HTTPXMock

from agent2env import AsyncClient, BadRequestError, Client, NotFoundError, StreamError
from agent2env.models import LLMExchangeState, LLMKeyList, LLMPart

from .conftest import BASE, T0, payload

EX = f"{BASE}/llm/exchanges"
KEYS = f"{BASE}/llm/keys"

exchange_json = payload(
    id="llx_1",
    sandboxId="sb1",
    runId="run-1",
    conversationId="llx_1",
    format="anthropic",
    method="POST",
    path="/v1/messages",
    model="coder",
    provider="up",
    stream=True,
    passthrough=True,
    status=200,
    state="complete",
    usage={"inputTokens": 5, "outputTokens": 1, "cachedTokens": 0, "reasoningTokens": 0},
    attempts=1,
    timeToFirstByteMs=1.5,
    durationMs=3.25,
    createdAt=T0,
    requestBytes=87,
    responseBytes=855,
    storedBytes=300,
)
key_json = payload(
    id="llmk_1",
    name="ci",
    run="run-1",
    budget_tokens=5000,
    used_tokens=12,
    created_at=T0,
    expires_at="2025-01-01T13:00:00Z",
)


def query(request: Any) -> dict[str, list[str]]:
    return parse_qs(urlsplit(str(request.url)).query)


def test_list_filters_and_page(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(
        json={"items": [exchange_json()], "nextCursor": "c2", "followCursor": "41"}
    )
    page = client.llm.list(
        sandbox="sb1",
        run="run-1",
        model="coder",
        status="4xx",
        since=datetime(2025, 1, 1, 12, 0),  # naive: UTC
        until=datetime(2025, 1, 2, tzinfo=timezone(timedelta(hours=2))),
        limit=10,
        cursor="c1",
        order="desc",
    )
    assert query(httpx_mock.get_requests()[0]) == {
        "sandbox": ["sb1"],
        "run": ["run-1"],
        "model": ["coder"],
        "status": ["4xx"],
        "since": ["2025-01-01T12:00:00+00:00"],
        "until": ["2025-01-02T00:00:00+02:00"],
        "limit": ["10"],
        "cursor": ["c1"],
        "order": ["desc"],
    }
    assert (page.next_cursor, page.follow_cursor) == ("c2", "41")
    x = page.items[0]
    assert (x.id, x.sandbox_id, x.state, x.usage.input_tokens, x.duration_ms) == (
        "llx_1",
        "sb1",
        LLMExchangeState.COMPLETE,
        5,
        3.25,
    )


def test_list_all_walks_the_pages(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(
        url=f"{EX}?status=429&limit=2",
        json={"items": [exchange_json(), exchange_json(id="b")], "nextCursor": "n"},
    )
    httpx_mock.add_response(
        url=f"{EX}?status=429&limit=2&cursor=n", json={"items": [exchange_json(id="c")]}
    )
    got = client.llm.list_all(status=429, page_size=2)
    assert [x.id for x in got] == ["llx_1", "b", "c"]


def test_list_all_newest_first(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(
        url=f"{EX}?limit=1&order=desc",
        json={"items": [exchange_json(id="c")], "nextCursor": "n"},
    )
    httpx_mock.add_response(
        url=f"{EX}?limit=1&order=desc&cursor=n", json={"items": [exchange_json(id="b")]}
    )
    got = client.llm.list_all(page_size=1, order="desc")
    assert [x.id for x in got] == ["c", "b"]


def test_get_raw_conversations(client: Any, httpx_mock: HTTPXMock) -> None:
    detail = exchange_json(
        request={"method": "POST", "url": "/v1/messages", "body": "{}", "headers": {"A": ["b"]}},
        response={"status": 200, "body": "data: 1\n\n", "chunks": [{"atMs": 1.0, "size": 9}]},
    )
    httpx_mock.add_response(url=f"{EX}/llx_1", json=detail)
    d = client.llm.get("llx_1")
    assert d.request is not None
    assert d.request.headers == {"A": ["b"]}
    assert d.response is not None
    assert d.response.chunks[0].size == 9
    assert d.upstream_request is None

    httpx_mock.add_response(url=f"{EX}/llx_1?raw=upstream_response", content=b"\x00raw")
    assert client.llm.raw("llx_1", LLMPart.UPSTREAM_RESPONSE) == b"\x00raw"
    with pytest.raises(ValueError, match="everything"):
        client.llm.raw("llx_1", "everything")

    conv = {"id": "llx_1", "startedAt": T0, "lastAt": T0, "exchanges": [exchange_json()]}
    httpx_mock.add_response(url=f"{BASE}/sandboxes/sb1/conversations", json={"items": [conv]})
    convs = client.llm.conversations("sb1")
    assert [c.exchanges[0].id for c in convs] == ["llx_1"]

    httpx_mock.add_response(
        url=f"{EX}/nope", status_code=404, json={"error": "not found", "code": "NOT_FOUND"}
    )
    with pytest.raises(NotFoundError):
        client.llm.get("nope")
    with pytest.raises(ValueError, match="empty"):
        client.llm.get("")


def test_export(client: Any, httpx_mock: HTTPXMock, tmp_path: Path) -> None:
    lines = (
        json.dumps(exchange_json(id="a", request={"body": "x"}))
        + "\n"
        + json.dumps(exchange_json(id="b"))
        + "\n"
    ).encode()
    httpx_mock.add_response(url=f"{EX}/export?run=run-1", content=lines, is_reusable=True)
    dest = tmp_path / "run.jsonl"
    assert client.llm.export(dest, run="run-1") == len(lines)
    assert dest.read_bytes() == lines
    buf = io.BytesIO()
    client.llm.export(buf, run="run-1")
    assert buf.getvalue() == lines
    got = list(client.llm.iter_export(run="run-1"))
    assert [(x.id, x.request.body if x.request else None) for x in got] == [("a", "x"), ("b", None)]


def test_export_bad_line(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(url=f"{EX}/export", content=b'{"id": "a", "createdAt": "no"}\n')
    with pytest.raises(StreamError, match="not an exchange"):
        list(client.llm.iter_export())


def follow_body(*events: tuple[str, str, str]) -> bytes:
    return "".join(f"event: {n}\nid: {i}\ndata: {d}\n\n" for n, i, d in events).encode()


def test_follow(httpx_mock: HTTPXMock) -> None:
    body = b": keep-alive\n\n" + follow_body(
        ("exchange", "7", json.dumps(exchange_json(id="a"))),
        ("exchange", "9", json.dumps(exchange_json(id="b", state="client_gone"))),
        ("error", "9", '{"error": "archive closed", "code": "INTERNAL_ERROR"}'),
    )
    httpx_mock.add_response(
        url=f"{EX}/stream?sandbox=sb1&after=5",
        content=body,
        headers={"Content-Type": "text/event-stream"},
    )
    with Client(BASE) as c:
        it = c.llm.follow(sandbox="sb1", after="5")
        first, second = next(it), next(it)
        assert (first.cursor, first.exchange.id) == ("7", "a")
        assert (second.cursor, second.exchange.state) == ("9", LLMExchangeState.CLIENT_GONE)
        with pytest.raises(Exception, match="archive closed"):
            next(it)


def test_follow_ended_and_refused(httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(
        url=f"{EX}/stream?last=3",
        content=follow_body(("exchange", "1", json.dumps(exchange_json()))),
        headers={"Content-Type": "text/event-stream"},
    )
    httpx_mock.add_response(
        url=f"{EX}/stream?status=in_progress",
        status_code=400,
        json={"error": "a follow sends exchanges as they end", "code": "INVALID_REQUEST"},
    )

    async def collect(c: AsyncClient, **filters: Any) -> list[str]:
        return [ev.cursor async for ev in c.llm.follow(**filters)]

    async def run() -> None:
        async with AsyncClient(BASE) as c:
            with pytest.raises(StreamError, match="ended early"):
                await collect(c, last=3)
            with pytest.raises(BadRequestError):
                await collect(c, status="in_progress")

    asyncio.run(run())


def test_keys(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(
        method="POST",
        url=KEYS,
        status_code=201,
        json=key_json(key="a2e_llm_secret"),
        is_reusable=True,
    )
    k = client.llm_keys.create(
        name="ci",
        run="run-1",
        budget_tokens=5000,
        requests_per_minute=60,
        expires_in=timedelta(hours=2),
    )
    assert json.loads(httpx_mock.get_requests()[0].content) == {
        "name": "ci",
        "run": "run-1",
        "budget_tokens": 5000,
        "requests_per_minute": 60,
        "expires_in": 7200,
    }
    assert (k.id, k.key, k.budget_tokens, k.used_tokens) == ("llmk_1", "a2e_llm_secret", 5000, 12)
    client.llm_keys.create()
    assert json.loads(httpx_mock.get_requests()[1].content) == {}
    with pytest.raises(ValueError, match="whole seconds"):
        client.llm_keys.create(expires_in=1.5)

    httpx_mock.add_response(method="GET", url=KEYS, json={"items": [key_json(revoked_at=T0)]})
    keys = client.llm_keys.list()
    assert keys[0].key is None
    assert keys[0].revoked_at is not None

    httpx_mock.add_response(method="DELETE", url=f"{KEYS}/llmk_1", status_code=204)
    client.llm_keys.revoke("llmk_1")
    httpx_mock.add_response(
        method="DELETE",
        url=f"{KEYS}/nope",
        status_code=404,
        json={"error": "no", "code": "NOT_FOUND"},
    )
    with pytest.raises(NotFoundError):
        client.llm_keys.revoke("nope")


def test_keys_list_page(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(
        method="GET",
        url=f"{KEYS}?limit=1&cursor=c1&order=asc",
        json={"items": [key_json()], "next_cursor": "c2"},
    )
    httpx_mock.add_response(method="GET", url=f"{KEYS}?limit=1&cursor=c2", json={"items": []})
    page = client.llm_keys.list_page(limit=1, cursor="c1", order="asc")
    assert isinstance(page, LLMKeyList)
    assert ([k.id for k in page.items], page.next_cursor) == (["llmk_1"], "c2")
    last = client.llm_keys.list_page(limit=1, cursor=page.next_cursor)
    assert (last.items, last.next_cursor) == ([], None)
