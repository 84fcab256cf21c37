from __future__ import annotations

from typing import Any

import pytest
from pytest_httpx import HTTPXMock

from agent2env import ConflictError, NotFoundError

from .conftest import BASE


def test_delete(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(
        method="DELETE", url=f"{BASE}/runs/run-0123456789abcdef", status_code=204
    )
    assert client.runs.delete("run-0123456789abcdef") is None
    assert [r.method for r in httpx_mock.get_requests()] == ["DELETE"]


def test_delete_escapes_the_id(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(method="DELETE", url=f"{BASE}/runs/a%2F..%2Fb", status_code=204)
    client.runs.delete("a/../b")


@pytest.mark.parametrize(
    ("status", "code", "error"),
    [
        (409, "CONFLICT", ConflictError),
        (404, "NOT_FOUND", NotFoundError),
    ],
)
def test_delete_refused(
    client: Any, httpx_mock: HTTPXMock, status: int, code: str, error: type[Exception]
) -> None:
    httpx_mock.add_response(
        method="DELETE",
        url=f"{BASE}/runs/run-1",
        status_code=status,
        json={"error": "run run-1 is running: cancel it first", "code": code},
    )
    with pytest.raises(error) as info:
        client.runs.delete("run-1")
    assert getattr(info.value, "code", None) == code


def test_delete_empty_id(client: Any) -> None:
    with pytest.raises(ValueError, match="run id is empty"):
        client.runs.delete("")
