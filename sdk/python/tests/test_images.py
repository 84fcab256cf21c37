from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from pytest_httpx import HTTPXMock

from agent2env import BadRequestError, ConflictError, NotFoundError, StreamError
from agent2env.models import ImageProgress

from .conftest import BASE, sse

IMAGE = {
    "ref": "agent2env/python:latest",
    "digest": "sha256:" + "a" * 64,
    "id": "sha256:" + "b" * 64,
    "size": 1204400694,
    "layers": 1,
    "created": "2025-01-01T12:00:00Z",
}
PROGRESS = sse(
    ("progress", '{"phase": "resolve", "item": "alpine:3"}'),
    ("progress", '{"phase": "download", "item": "sha256:c", "current": 10, "total": 20}'),
    ("image", json.dumps(IMAGE)),
)


def test_list(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(method="GET", url=f"{BASE}/images", json={"items": [IMAGE]})
    images = client.images.list()
    assert [(i.ref, i.size, i.layers) for i in images] == [
        ("agent2env/python:latest", 1204400694, 1)
    ]


def test_list_shows_images_being_prepared(client: Any, httpx_mock: HTTPXMock) -> None:
    building = {
        "ref": "agent2env/code-interpreter:latest",
        "digest": "",
        "id": "",
        "size": 0,
        "layers": 0,
        "created": "0001-01-01T00:00:00Z",
        "status": "building",
        "progress": {"phase": "build", "item": "Setting up python3"},
        "started": "2025-01-01T12:00:00Z",
    }
    missing = {
        "ref": "agent2env/node:latest",
        "digest": "",
        "created": "0001-01-01T00:00:00Z",  # as the daemon sends an image not stored
        "status": "missing",
    }
    failed = {"ref": "agent2env/agent:latest", "status": "failed", "error": "mirror unreachable"}
    httpx_mock.add_response(
        method="GET", url=f"{BASE}/images", json={"items": [IMAGE, building, missing, failed]}
    )
    images = client.images.list()
    assert [i.status for i in images] == [None, "building", "missing", "failed"]
    assert images[1].progress is not None
    assert images[1].progress.item == "Setting up python3"
    assert images[1].started is not None
    assert images[1].started.year == 2025
    assert images[1].created is None
    assert images[2].digest == ""
    assert images[2].created is None
    assert images[3].error == "mirror unreachable"


def test_follow(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(
        method="GET",
        url=f"{BASE}/images/follow?ref=agent2env%2Fpython",
        content=PROGRESS,
    )
    seen: list[ImageProgress] = []
    image = client.images.follow("agent2env/python", on_progress=seen.append)
    assert image.ref == "agent2env/python:latest"
    assert [p.phase for p in seen] == ["resolve", "download"]


def test_follow_nothing_in_flight(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(
        content=sse(("error", '{"error": "no pull or build of x in flight", "code": "NOT_FOUND"}'))
    )
    with pytest.raises(NotFoundError, match="in flight"):
        client.images.follow("x")
    with pytest.raises(ValueError, match="image ref is empty"):
        client.images.follow("")


@pytest.mark.parametrize("op", ["pull", "build"])
def test_pull_and_build(client: Any, httpx_mock: HTTPXMock, op: str) -> None:
    httpx_mock.add_response(
        method="POST", url=f"{BASE}/images/{op}", match_json={"ref": "alpine:3"}, content=PROGRESS
    )
    seen: list[ImageProgress] = []
    image = getattr(client.images, op)("alpine:3", on_progress=seen.append)
    assert image.ref == "agent2env/python:latest"
    assert [p.phase for p in seen] == ["resolve", "download"]
    assert (seen[1].current, seen[1].total) == (10, 20)


def test_pull_without_progress_callback(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(content=PROGRESS)
    assert client.images.pull("alpine:3").layers == 1


def test_pull_fails_midway(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(
        content=sse(
            ("progress", '{"phase": "resolve"}'),
            ("error", '{"error": "manifest unknown", "code": "IMAGE_NOT_FOUND"}'),
        )
    )
    with pytest.raises(Exception, match="manifest unknown") as info:
        client.images.pull("nope:1")
    assert info.value.code == "IMAGE_NOT_FOUND"


def test_pull_without_image(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(content=sse(("progress", '{"phase": "resolve"}')))
    with pytest.raises(StreamError):
        client.images.pull("x")


def test_pull_refused(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(
        status_code=400, json={"error": "bad reference", "code": "INVALID_REQUEST"}
    )
    with pytest.raises(BadRequestError):
        client.images.pull("UPPER")


def test_empty_ref(client: Any) -> None:
    with pytest.raises(ValueError, match="image ref is empty"):
        client.images.pull("")
    with pytest.raises(ValueError, match="image ref is empty"):
        client.images.remove("")


@pytest.mark.parametrize("kind", ["bytes", "file", "path"])
def test_import_archive(client: Any, httpx_mock: HTTPXMock, tmp_path: Path, kind: str) -> None:
    data = b"tar" * 50_000
    source: Any = data
    if kind == "file":
        source = io.BytesIO(data)
    elif kind == "path":
        source = tmp_path / "img.tar"
        source.write_bytes(data)
    httpx_mock.add_response(
        method="POST",
        url=f"{BASE}/images/import",
        match_headers={"Content-Type": "application/x-tar"},
        content=sse(("image", json.dumps(IMAGE)), ("image", json.dumps({**IMAGE, "ref": "two:1"}))),
    )
    images = client.images.import_archive(source)
    assert [i.ref for i in images] == ["agent2env/python:latest", "two:1"]
    assert httpx_mock.get_requests()[0].content == data


def test_remove(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(method="DELETE", url=f"{BASE}/images/library/alpine:3", status_code=204)
    httpx_mock.add_response(
        method="DELETE",
        url=f"{BASE}/images/busy:1",
        status_code=409,
        json={"error": "in use", "code": "CONFLICT"},
    )
    client.images.remove("library/alpine:3")
    with pytest.raises(ConflictError):
        client.images.remove("busy:1")
