from __future__ import annotations

import io
from typing import Any

import pytest
from pytest_httpx import HTTPXMock

from agent2env import BadRequestError
from agent2env.models import ImportAction, ImportStrategy

from .conftest import BASE, multipart_parts

YAML = b"apiVersion: liteboxd/v1\nkind: SandboxTemplate\nmetadata:\n  name: t\nspec:\n  image: x\n"
RESULT = {
    "total": 2,
    "created": 1,
    "updated": 0,
    "skipped": 0,
    "failed": 1,
    "results": [
        {"name": "t", "action": "created", "version": 1},
        {"name": "u", "action": "failed", "error": "invalid spec"},
    ],
    "prepullStarted": ["x"],
}


@pytest.mark.parametrize(
    ("content", "kwargs", "fields"),
    [
        (YAML, {}, [("strategy", b"create-or-update"), ("prepull", b"false")]),
        (
            YAML.decode(),
            {"strategy": ImportStrategy.CREATE_ONLY, "auto_prepull": True},
            [("strategy", b"create-only"), ("prepull", b"true")],
        ),
        (
            io.BytesIO(YAML),
            {"strategy": ImportStrategy.UPDATE_ONLY},
            [("strategy", b"update-only"), ("prepull", b"false")],
        ),
    ],
)
def test_import_templates(
    client: Any,
    httpx_mock: HTTPXMock,
    content: Any,
    kwargs: dict[str, Any],
    fields: list[tuple[str, bytes]],
) -> None:
    httpx_mock.add_response(method="POST", url=f"{BASE}/templates/import", json=RESULT)
    res = client.import_export.import_templates(content, **kwargs)
    request = httpx_mock.get_requests()[0]
    assert multipart_parts(request) == [*fields, ("file", YAML)]
    assert b'filename="templates.yaml"' in request.content
    assert (res.total, res.created, res.failed, res.prepull_started) == (2, 1, 1, ["x"])
    assert res.results[0].action is ImportAction.CREATED
    assert res.results[1].error == "invalid spec"


def test_import_refused(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(status_code=400, json={"error": "not YAML", "code": "INVALID_YAML"})
    with pytest.raises(BadRequestError) as info:
        client.import_export.import_templates(b"{")
    assert info.value.code == "INVALID_YAML"


@pytest.mark.parametrize(
    ("kwargs", "params"),
    [({}, {}), ({"tag": "python", "names": ["a", "b"]}, {"tag": "python", "names": "a,b"})],
)
def test_export_all(
    client: Any, httpx_mock: HTTPXMock, kwargs: dict[str, Any], params: dict[str, str]
) -> None:
    httpx_mock.add_response(
        method="GET",
        url=f"{BASE}/templates/export",
        match_params=params,
        content=b"kind: SandboxTemplateList\n",
    )
    assert client.import_export.export_all(**kwargs) == b"kind: SandboxTemplateList\n"
