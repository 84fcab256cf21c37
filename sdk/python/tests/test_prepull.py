from __future__ import annotations

import json
from typing import Any

import pytest
from pytest_httpx import HTTPXMock

from agent2env import ConflictError, PrepullFailedError, TimeoutError
from agent2env.models import PrepullList, PrepullStatus

from .conftest import BASE, prepull_json

PP = f"{BASE}/images/prepull"


def test_create(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(
        method="POST",
        url=PP,
        status_code=202,
        json=prepull_json(status="pending"),
        is_reusable=True,
    )
    task = client.prepull.create("agent2env/python")
    assert json.loads(httpx_mock.get_requests()[0].content) == {
        "image": "agent2env/python",
        "timeout": 600,
    }
    assert (task.id, task.status, task.progress.total) == ("pp-0123abcd", PrepullStatus.PENDING, 1)
    client.prepull.create("agent2env/python", timeout=30)
    assert json.loads(httpx_mock.get_requests()[1].content)["timeout"] == 30


def test_create_in_progress(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(
        status_code=409, json={"error": "in progress", "code": "PREPULL_IN_PROGRESS"}
    )
    with pytest.raises(ConflictError) as info:
        client.prepull.create("agent2env/python")
    assert info.value.code == "PREPULL_IN_PROGRESS"


def test_create_for_template(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(
        method="POST",
        url=f"{BASE}/templates/web/prepull",
        status_code=202,
        json=prepull_json(template="web"),
    )
    assert client.prepull.create_for_template("web").template == "web"


@pytest.mark.parametrize(
    ("kwargs", "params"),
    [
        ({}, {}),
        (
            {"image": "agent2env/python", "status": PrepullStatus.FAILED},
            {"image": "agent2env/python", "status": "failed"},
        ),
    ],
)
def test_list(
    client: Any, httpx_mock: HTTPXMock, kwargs: dict[str, Any], params: dict[str, str]
) -> None:
    httpx_mock.add_response(
        method="GET", url=PP, match_params=params, json={"items": [prepull_json()]}
    )
    assert [t.id for t in client.prepull.list(**kwargs)] == ["pp-0123abcd"]


def test_list_page(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(
        method="GET",
        url=f"{PP}?image=alpine&status=failed&limit=1&cursor=c1&order=asc",
        json={"items": [prepull_json()], "next_cursor": "c2"},
    )
    httpx_mock.add_response(method="GET", url=f"{PP}?limit=1&cursor=c2", json={"items": []})
    page = client.prepull.list_page(
        image="alpine", status=PrepullStatus.FAILED, limit=1, cursor="c1", order="asc"
    )
    assert isinstance(page, PrepullList)
    assert ([t.id for t in page.items], page.next_cursor) == (["pp-0123abcd"], "c2")
    last = client.prepull.list_page(limit=1, cursor=page.next_cursor)
    assert (last.items, last.next_cursor) == ([], None)


def test_get_delete(client: Any, httpx_mock: HTTPXMock) -> None:
    done = prepull_json(
        status="completed", progress={"ready": 1, "total": 1}, completedAt="2025-01-01T12:01:00Z"
    )
    httpx_mock.add_response(method="GET", url=f"{PP}/pp-0123abcd", json=done)
    httpx_mock.add_response(method="DELETE", url=f"{PP}/pp-0123abcd", status_code=204)
    task = client.prepull.get("pp-0123abcd")
    assert task.completed_at is not None
    assert task.progress.ready == 1
    client.prepull.delete("pp-0123abcd")


def test_wait_for_completion(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(url=f"{PP}/pp-0123abcd", json=prepull_json(status="pending"))
    httpx_mock.add_response(url=f"{PP}/pp-0123abcd", json=prepull_json(status="completed"))
    assert (
        client.prepull.wait_for_completion("pp-0123abcd", poll_interval=0.001).status
        == PrepullStatus.COMPLETED
    )


def test_wait_for_completion_failed(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(
        url=f"{PP}/pp-0123abcd", json=prepull_json(status="failed", error="manifest unknown")
    )
    with pytest.raises(
        PrepullFailedError, match="Prepull task pp-0123abcd failed: manifest unknown"
    ) as info:
        client.prepull.wait_for_completion("pp-0123abcd", poll_interval=0.001)
    assert (info.value.task_id, info.value.error) == ("pp-0123abcd", "manifest unknown")


def test_wait_for_completion_timeout(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(url=f"{PP}/pp-0123abcd", json=prepull_json(), is_reusable=True)
    with pytest.raises(TimeoutError, match="not complete"):
        client.prepull.wait_for_completion("pp-0123abcd", poll_interval=0.01, timeout=0.03)
