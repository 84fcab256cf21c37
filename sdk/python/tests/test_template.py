from __future__ import annotations

import json
from typing import Any

import pytest
from pytest_httpx import HTTPXMock

from agent2env import BadRequestError, ConflictError, NotFoundError
from agent2env.models import (
    CreateTemplateRequest,
    ExecAction,
    ProbeSpec,
    ResourceSpec,
    TemplateSpec,
    UpdateTemplateRequest,
)

from .conftest import BASE, spec_json, template_json, version_json

TPL = f"{BASE}/templates/my-python-template"


def body(httpx_mock: HTTPXMock) -> Any:
    return json.loads(httpx_mock.get_requests()[-1].content)


def test_create_seed_example(client: Any, httpx_mock: HTTPXMock) -> None:
    # Seed 003 §9.3, as written (but for the image).
    httpx_mock.add_response(
        method="POST", url=f"{BASE}/templates", status_code=201, json=template_json()
    )
    template = client.template.create(
        CreateTemplateRequest(
            name="my-python-template",
            display_name="My Python Template",
            description="Custom Python environment",
            tags=["python", "custom"],
            spec=TemplateSpec(
                image="agent2env/python",
                resources=ResourceSpec(cpu="1000m", memory="1Gi"),
                ttl=7200,
                startup_script="pip install numpy pandas",
            ),
            auto_prepull=True,
        )
    )
    assert body(httpx_mock) == {
        "name": "my-python-template",
        "displayName": "My Python Template",
        "description": "Custom Python environment",
        "tags": ["python", "custom"],
        "spec": {
            "image": "agent2env/python",
            "resources": {"cpu": "1000m", "memory": "1Gi"},
            "ttl": 7200,
            "startupScript": "pip install numpy pandas",
            "startupTimeout": 300,
        },
        "autoPrepull": True,
    }
    assert (template.name, template.latest_version, template.display_name) == (
        "my-python-template",
        1,
        "My Python Template",
    )
    assert template.spec is not None
    assert template.spec.startup_timeout == 300


def test_create_from_dict_with_wire_names(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(status_code=201, json=template_json())
    client.template.create(
        {
            "name": "t",
            "isPublic": False,
            "spec": {
                "image": "agent2env/python",
                "readinessProbe": {"exec": {"command": ["true"]}, "periodSeconds": 1},
                "network": {"allowInternetAccess": True, "allowedDomains": ["pypi.org"]},
            },
        }
    )
    sent = body(httpx_mock)
    assert sent["isPublic"] is False
    assert sent["spec"]["readinessProbe"] == {
        "exec": {"command": ["true"]},
        "initialDelaySeconds": 0,
        "periodSeconds": 1,
        "failureThreshold": 3,
    }
    assert sent["spec"]["network"] == {"allowInternetAccess": True, "allowedDomains": ["pypi.org"]}


def test_create_exists(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(
        status_code=409, json={"error": "template t exists", "code": "TEMPLATE_EXISTS"}
    )
    with pytest.raises(ConflictError) as info:
        client.template.create(CreateTemplateRequest(name="t", spec=TemplateSpec(image="x")))
    assert info.value.code == "TEMPLATE_EXISTS"


def test_create_invalid(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(
        status_code=400, json={"error": "invalid name", "code": "INVALID_REQUEST"}
    )
    with pytest.raises(BadRequestError, match="invalid name"):
        client.template.create(CreateTemplateRequest(name="Bad Name", spec=TemplateSpec(image="x")))


@pytest.mark.parametrize(
    ("kwargs", "params"),
    [
        ({}, {"page": "1", "pageSize": "20"}),
        (
            {"tag": "python", "search": "py", "page": 2, "page_size": 5},
            {"page": "2", "pageSize": "5", "tag": "python", "search": "py"},
        ),
    ],
)
def test_list(
    client: Any, httpx_mock: HTTPXMock, kwargs: dict[str, Any], params: dict[str, str]
) -> None:
    httpx_mock.add_response(
        method="GET",
        url=f"{BASE}/templates",
        match_params=params,
        json={"items": [template_json()], "total": 1, "page": 1, "pageSize": 20},
    )
    templates = client.template.list(**kwargs)
    assert templates.total == 1
    assert templates.page_size == 20
    assert [t.description for t in templates.items] == ["Custom Python environment"]


def test_get_update_delete(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(method="GET", url=TPL, json=template_json())
    httpx_mock.add_response(method="PUT", url=TPL, json=template_json(latestVersion=2))
    httpx_mock.add_response(method="DELETE", url=TPL, status_code=204)
    assert client.template.get("my-python-template").is_public is True
    updated = client.template.update(
        "my-python-template",
        UpdateTemplateRequest(
            tags=[], spec=TemplateSpec(image="agent2env/python", ttl=0), changelog="no tags"
        ),
    )
    assert updated.latest_version == 2
    assert body(httpx_mock) == {
        "tags": [],
        "spec": {
            "image": "agent2env/python",
            "resources": {"cpu": "500m", "memory": "512Mi"},
            "ttl": 0,
            "startupTimeout": 300,
        },
        "changelog": "no tags",
    }
    client.template.delete("my-python-template")


def test_get_missing(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(
        status_code=404, json={"error": "template x not found", "code": "TEMPLATE_NOT_FOUND"}
    )
    with pytest.raises(NotFoundError):
        client.template.get("x")


def test_versions(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(
        url=f"{TPL}/versions", json={"items": [version_json(version=2), version_json()], "total": 2}
    )
    httpx_mock.add_response(
        url=f"{TPL}/versions/2", json=version_json(version=2, changelog="second")
    )
    versions = client.template.list_versions("my-python-template")
    assert [v.version for v in versions.items] == [2, 1]
    assert versions.items[1].template_id == "tpl-0123abcd"
    version = client.template.get_version("my-python-template", 2)
    assert (version.version, version.changelog, version.created_by) == (2, "second", "")


def test_list_versions_page(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(
        url=f"{TPL}/versions?limit=1&cursor=c1&order=asc",
        json={"items": [version_json(version=2)], "total": 1, "next_cursor": "c2"},
    )
    httpx_mock.add_response(
        url=f"{TPL}/versions?limit=1&cursor=c2", json={"items": [version_json()], "total": 1}
    )
    page = client.template.list_versions("my-python-template", limit=1, cursor="c1", order="asc")
    assert ([v.version for v in page.items], page.next_cursor) == ([2], "c2")
    last = client.template.list_versions("my-python-template", limit=1, cursor=page.next_cursor)
    assert ([v.version for v in last.items], last.next_cursor) == ([1], None)


def test_rollback(client: Any, httpx_mock: HTTPXMock) -> None:
    answer = {
        "id": "tpl-0123abcd",
        "name": "my-python-template",
        "latestVersion": 3,
        "rolledBackFrom": 2,
        "rolledBackTo": 1,
        "updatedAt": "2025-01-01T12:00:00Z",
    }
    httpx_mock.add_response(method="POST", url=f"{TPL}/rollback", json=answer, is_reusable=True)
    res = client.template.rollback("my-python-template", 1, changelog="back")
    assert body(httpx_mock) == {"targetVersion": 1, "changelog": "back"}
    assert (res.latest_version, res.rolled_back_from, res.rolled_back_to) == (3, 2, 1)
    client.template.rollback("my-python-template", 1)
    assert body(httpx_mock) == {"targetVersion": 1}


def test_export_yaml(client: Any, httpx_mock: HTTPXMock) -> None:
    yaml = b"apiVersion: liteboxd/v1\nkind: SandboxTemplate\n"
    httpx_mock.add_response(url=f"{TPL}/export", content=yaml)
    httpx_mock.add_response(url=f"{TPL}/export?version=1", content=yaml)
    assert client.template.export_yaml("my-python-template") == yaml
    assert client.template.export_yaml("my-python-template", version=1) == yaml


def test_spec_defaults_follow_the_seed() -> None:
    spec = TemplateSpec(image="x")
    assert (spec.ttl, spec.startup_timeout, spec.resources) == (
        3600,
        300,
        ResourceSpec(cpu="500m", memory="512Mi"),
    )
    probe = ProbeSpec(exec=ExecAction(command=["true"]))
    assert (probe.initial_delay_seconds, probe.period_seconds, probe.failure_threshold) == (
        0,
        10,
        3,
    )
    assert spec_json()["ttl"] == 0  # a stored spec keeps its own values
