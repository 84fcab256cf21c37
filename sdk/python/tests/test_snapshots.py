"""Snapshots: taking one, making sandboxes from it, forking, listing, reading and deleting them."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

import pytest
from pytest_httpx import HTTPXMock

from agent2env import (
    APIError,
    BadRequestError,
    ConflictError,
    InsufficientCapacityError,
    NotFoundError,
    ResourceLimitError,
)
from agent2env.models import SandboxStatus, SnapshotList, SnapshotStatus

from .conftest import BASE, sandbox_json, snapshot_json

SB = f"{BASE}/sandboxes/sb1234567890"
SNAP = f"{BASE}/snapshots/snap-0123abcd"


def sent(httpx_mock: HTTPXMock) -> Any:
    return json.loads(httpx_mock.get_requests()[-1].content)


@pytest.mark.parametrize(("kwargs", "want"), [({}, {}), ({"stop": True}, {"stop": True})])
def test_snapshot(
    client: Any, httpx_mock: HTTPXMock, kwargs: dict[str, Any], want: dict[str, Any]
) -> None:
    stopped = kwargs.get("stop", False)
    httpx_mock.add_response(
        method="POST", url=f"{SB}/snapshots", status_code=201, json=snapshot_json(stopped=stopped)
    )
    snap = client.sandbox.snapshot("sb1234567890", **kwargs)
    assert sent(httpx_mock) == want
    assert snap.id == "snap-0123abcd"
    assert snap.sandbox_id == "sb1234567890"
    assert snap.status is SnapshotStatus.READY
    assert snap.stopped is stopped
    assert snap.size_bytes == 52428800
    assert snap.template is None
    assert snap.created_at == datetime(2025, 1, 1, 12, tzinfo=timezone.utc)
    # Saving memory takes time: the read timeout is raised for it.
    assert httpx_mock.get_requests()[0].extensions["timeout"]["read"] == 300


@pytest.mark.parametrize(
    "op",
    [
        lambda c: c.sandbox.snapshot("sb1234567890"),
        lambda c: c.sandbox.fork("sb1234567890", count=2),
        lambda c: c.snapshots.fork("snap-0123abcd", count=2),
    ],
    ids=["snapshot", "fork", "fork-snapshot"],
)
@pytest.mark.parametrize(
    ("status", "code", "exc"),
    [
        (409, "CONFLICT", ConflictError),
        (404, "SANDBOX_NOT_FOUND", NotFoundError),
        (501, "NOT_IMPLEMENTED", APIError),
        (429, "RESOURCE_LIMIT", ResourceLimitError),
        (507, "INSUFFICIENT_CAPACITY", InsufficientCapacityError),
    ],
)
def test_snapshot_refused(
    client: Any,
    httpx_mock: HTTPXMock,
    op: Callable[[Any], object],
    status: int,
    code: str,
    exc: type[APIError],
) -> None:
    httpx_mock.add_response(status_code=status, json={"error": "cannot snapshot", "code": code})
    with pytest.raises(exc, match="cannot snapshot") as info:
        op(client)
    assert info.value.code == code
    assert info.value.status_code == status
    # A POST is never retried.
    assert len(httpx_mock.get_requests()) == 1


@pytest.mark.parametrize(
    ("kwargs", "want"),
    [
        ({}, {"from_snapshot": "snap-0123abcd"}),
        (
            {"ttl": 0, "metadata": {"rollout": "3"}},
            {"from_snapshot": "snap-0123abcd", "ttl": 0, "metadata": {"rollout": "3"}},
        ),
    ],
)
def test_create_from_snapshot(
    client: Any, httpx_mock: HTTPXMock, kwargs: dict[str, Any], want: dict[str, Any]
) -> None:
    httpx_mock.add_response(
        method="POST",
        url=f"{BASE}/sandboxes",
        status_code=201,
        json=sandbox_json(id="sb0000000002", template=None, templateVersion=None),
    )
    sb = client.sandbox.create_from_snapshot("snap-0123abcd", **kwargs)
    assert sent(httpx_mock) == want
    assert sb.id == "sb0000000002"
    assert sb.status is SandboxStatus.RUNNING
    assert sb.contexts is None
    assert httpx_mock.get_requests()[0].extensions["timeout"]["read"] == 300


def test_create_from_snapshot_contexts(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(
        method="POST",
        url=f"{BASE}/sandboxes",
        status_code=201,
        json=sandbox_json(id="sb0000000002", contexts={"ctx-old": "ctx-new"}),
    )
    sb = client.sandbox.create_from_snapshot("snap-0123abcd")
    assert sb.contexts == {"ctx-old": "ctx-new"}


def test_create_from_snapshot_errors(client: Any, httpx_mock: HTTPXMock) -> None:
    with pytest.raises(ValueError, match="snapshot id is empty"):
        client.sandbox.create_from_snapshot("")
    httpx_mock.add_response(
        status_code=404, json={"error": "snapshot snap-x not found", "code": "NOT_FOUND"}
    )
    with pytest.raises(NotFoundError, match="snap-x"):
        client.sandbox.create_from_snapshot("snap-x")
    httpx_mock.add_response(
        status_code=400, json={"error": "from_snapshot: give only ttl", "code": "BAD_REQUEST"}
    )
    with pytest.raises(BadRequestError, match="only ttl"):
        client.sandbox.create_from_snapshot("snap-0123abcd")


@pytest.mark.parametrize(
    ("kwargs", "query"), [({}, ""), ({"sandbox_id": "sb1234567890"}, "?sandbox_id=sb1234567890")]
)
def test_list(client: Any, httpx_mock: HTTPXMock, kwargs: dict[str, Any], query: str) -> None:
    httpx_mock.add_response(
        method="GET",
        url=f"{BASE}/snapshots{query}",
        json={"items": [snapshot_json(), snapshot_json(id="snap-older", stopped=True)]},
    )
    snaps = client.snapshots.list(**kwargs)
    assert [s.id for s in snaps] == ["snap-0123abcd", "snap-older"]
    assert snaps[1].stopped is True


def test_list_page(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(
        method="GET",
        url=f"{BASE}/snapshots?sandbox_id=sb1&limit=1&cursor=c1&order=asc",
        json={"items": [snapshot_json(id="snap-older")], "next_cursor": "c2"},
    )
    httpx_mock.add_response(
        method="GET", url=f"{BASE}/snapshots?limit=1&cursor=c2", json={"items": [snapshot_json()]}
    )
    page = client.snapshots.list_page(sandbox_id="sb1", limit=1, cursor="c1", order="asc")
    assert isinstance(page, SnapshotList)
    assert ([s.id for s in page.items], page.next_cursor) == (["snap-older"], "c2")
    last = client.snapshots.list_page(limit=1, cursor=page.next_cursor)
    assert ([s.id for s in last.items], last.next_cursor) == (["snap-0123abcd"], None)
    with pytest.raises(ValueError, match="sandbox id is empty"):
        client.snapshots.list_page(sandbox_id="")


def test_list_empty(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(method="GET", url=f"{BASE}/snapshots", json={"items": []})
    assert client.snapshots.list() == []
    with pytest.raises(ValueError, match="sandbox id is empty"):
        client.snapshots.list(sandbox_id="")


def test_get_and_delete(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(method="GET", url=SNAP, json=snapshot_json(template="py"))
    assert client.snapshots.get("snap-0123abcd").template == "py"
    httpx_mock.add_response(method="DELETE", url=SNAP, status_code=204)
    assert client.snapshots.delete("snap-0123abcd") is None
    httpx_mock.add_response(
        method="GET",
        url=f"{BASE}/snapshots/a%2Fb",
        status_code=404,
        json={"error": "snapshot a/b not found", "code": "NOT_FOUND"},
    )
    with pytest.raises(NotFoundError):
        client.snapshots.get("a/b")
    with pytest.raises(ValueError, match="snapshot id is empty"):
        client.snapshots.delete("")


def test_capabilities(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(
        method="GET",
        url=f"{BASE}/capabilities",
        json={"runtime": "kubernetes", "pause": False, "snapshots": False},
    )
    caps = client.capabilities()
    assert (caps.runtime, caps.pause, caps.snapshots) == ("kubernetes", False, False)


def fork_json(snapshot_id: str, count: int) -> dict[str, Any]:
    return {
        "snapshot_id": snapshot_id,
        "sandboxes": [
            {
                **sandbox_json(id=f"sb000000000{i}", template=None, templateVersion=None),
                "contexts": {"ctx-parent": f"ctx-fork{i}"},
            }
            for i in range(count)
        ],
    }


@pytest.mark.parametrize(
    ("kwargs", "want"),
    [
        ({"count": 3}, {"count": 3}),
        (
            {"count": 2, "ttl": 0, "metadata": {"run": "7"}},
            {"count": 2, "ttl": 0, "metadata": {"run": "7"}},
        ),
    ],
)
def test_fork_sandbox(
    client: Any, httpx_mock: HTTPXMock, kwargs: dict[str, Any], want: dict[str, Any]
) -> None:
    count = kwargs["count"]
    httpx_mock.add_response(
        method="POST", url=f"{SB}/fork", status_code=201, json=fork_json("snap-new", count)
    )
    res = client.sandbox.fork("sb1234567890", **kwargs)
    assert sent(httpx_mock) == want
    assert res.snapshot_id == "snap-new"
    assert [s.id for s in res.sandboxes] == [f"sb000000000{i}" for i in range(count)]
    for i, sb in enumerate(res.sandboxes):
        assert sb.status is SandboxStatus.RUNNING
        assert sb.contexts == {"ctx-parent": f"ctx-fork{i}"}
    # A fork saves memory and restores it N times: the read timeout is raised for it.
    assert httpx_mock.get_requests()[0].extensions["timeout"]["read"] == 300


def test_fork_snapshot(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(
        method="POST", url=f"{SNAP}/fork", status_code=201, json=fork_json("snap-0123abcd", 1)
    )
    res = client.snapshots.fork("snap-0123abcd", count=1, metadata={"rollout": "0"})
    assert sent(httpx_mock) == {"count": 1, "metadata": {"rollout": "0"}}
    assert res.snapshot_id == "snap-0123abcd"
    assert res.sandboxes[0].contexts == {"ctx-parent": "ctx-fork0"}
    assert httpx_mock.get_requests()[0].extensions["timeout"]["read"] == 300


@pytest.mark.parametrize("count", [0, 33])
def test_fork_count_is_the_daemons_to_check(client: Any, httpx_mock: HTTPXMock, count: int) -> None:
    # The bound is the daemon's (api.MaxForkCount): sent as given, refused there.
    httpx_mock.add_response(
        method="POST",
        url=f"{SB}/fork",
        status_code=400,
        json={"error": f"count must be 1 to 32, not {count}", "code": "BAD_REQUEST"},
    )
    with pytest.raises(BadRequestError, match="count must be 1 to 32") as info:
        client.sandbox.fork("sb1234567890", count=count)
    assert sent(httpx_mock) == {"count": count}
    assert info.value.status_code == 400


def test_fork_ids_checked(client: Any, httpx_mock: HTTPXMock) -> None:
    with pytest.raises(ValueError, match="sandbox id is empty"):
        client.sandbox.fork("", count=1)
    with pytest.raises(ValueError, match="snapshot id is empty"):
        client.snapshots.fork("", count=1)
    httpx_mock.add_response(
        method="POST",
        url=f"{BASE}/snapshots/a%2Fb/fork",
        status_code=404,
        json={"error": "snapshot a/b not found", "code": "NOT_FOUND"},
    )
    with pytest.raises(NotFoundError, match="a/b"):
        client.snapshots.fork("a/b", count=1)
