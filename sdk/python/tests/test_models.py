"""Model round trips: the wire's names in, Python names out, and back to the wire."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import pytest
from pydantic import BaseModel

from agent2env.models import (
    CreateTemplateRequest,
    ExecResult,
    ImportResult,
    LLMKey,
    NetworkSpec,
    PersistenceSpec,
    PrepullStatus,
    PrepullTask,
    ProbeSpec,
    Sandbox,
    SandboxStatus,
    Session,
    SessionCommandResult,
    SessionExecuteResult,
    Stats,
    Template,
    TemplateListResult,
    TemplateSpec,
    TemplateVersion,
    UpdateTemplateRequest,
    Usage,
)
from agent2env.sessions import SessionConfig

from .conftest import (
    prepull_json,
    sandbox_json,
    session_command_json,
    session_execute_json,
    session_json,
    stats_json,
    template_json,
    usage_json,
    version_json,
)


def wire(model: BaseModel) -> Any:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


@pytest.mark.parametrize(
    ("cls", "payload"),
    [
        (Sandbox, sandbox_json(env={"A": "1"}, reason="r")),
        (Template, template_json()),
        (TemplateVersion, version_json()),
        (PrepullTask, prepull_json(template="t", error="e", completedAt="2025-01-01T12:01:00Z")),
        (
            ExecResult,
            {
                "exit_code": 1,
                "stdout": "o",
                "stderr": "e",
                "timed_out": True,
                "truncated": True,
                "duration_ms": 1.5,
            },
        ),
        (
            ImportResult,
            {
                "total": 1,
                "created": 1,
                "updated": 0,
                "skipped": 0,
                "failed": 0,
                "results": [{"name": "t", "action": "created", "version": 1}],
                "prepullStarted": ["x"],
            },
        ),
        (TemplateListResult, {"items": [template_json()], "total": 1, "page": 1, "pageSize": 20}),
    ],
)
def test_round_trip(cls: type[BaseModel], payload: dict[str, Any]) -> None:
    model = cls.model_validate(payload)
    again = cls.model_validate(wire(model))
    assert again == model
    # Every field the daemon sent comes back under its wire name.
    sent = wire(model)
    for key in payload:
        assert key in sent, key


def test_sandbox_fields() -> None:
    sb = Sandbox.model_validate(sandbox_json(expires_at="9999-12-31T23:59:59Z"))
    assert sb.status is SandboxStatus.RUNNING
    assert sb.template_version == 1
    assert sb.created_at == datetime(2025, 1, 1, 12, tzinfo=timezone.utc)
    assert sb.expires_at.year == 9999
    assert sb.updated_at is not None


def test_secrets_not_in_repr() -> None:
    """A secret is read as a field but left out of the repr, which logs and tracebacks show."""
    sb = Sandbox.model_validate(sandbox_json(accessToken="sandbox-secret"))
    key = LLMKey.model_validate(
        {
            "id": "llmk_1",
            "key": "llm-secret",
            "created_at": "2025-01-01T12:00:00Z",
            "expires_at": "2025-01-01T13:00:00Z",
        }
    )
    config = SessionConfig(server_url="http://h:1", api_key="api-secret")
    assert (sb.access_token, key.key, config.api_key) == (
        "sandbox-secret",
        "llm-secret",
        "api-secret",
    )
    assert wire(sb)["accessToken"] == "sandbox-secret"
    for shown in (repr(sb), str(sb), repr(key), str(key), repr(config)):
        assert "secret" not in shown, shown


def test_populate_by_name_and_alias() -> None:
    by_name = CreateTemplateRequest(
        name="t",
        display_name="T",
        is_public=False,
        spec=TemplateSpec(image="x", startup_script="s"),
        auto_prepull=True,
    )
    by_alias = CreateTemplateRequest.model_validate(
        {
            "name": "t",
            "displayName": "T",
            "isPublic": False,
            "spec": {"image": "x", "startupScript": "s"},
            "autoPrepull": True,
        }
    )
    assert by_name == by_alias
    assert wire(by_name) == {
        "name": "t",
        "displayName": "T",
        "isPublic": False,
        "spec": {
            "image": "x",
            "resources": {"cpu": "500m", "memory": "512Mi"},
            "ttl": 3600,
            "startupScript": "s",
            "startupTimeout": 300,
        },
        "autoPrepull": True,
    }


def test_spec_aliases() -> None:
    spec = TemplateSpec(
        image="x",
        readiness_probe=ProbeSpec.model_validate(
            {"exec": {"command": ["true"]}, "initialDelaySeconds": 1}
        ),
        network=NetworkSpec(allow_internet_access=True, allowed_domains=["*.example.com"]),
        persistence=PersistenceSpec(
            enabled=True, storage_class_name="fast", reclaim_policy="Retain"
        ),
        runtime_class_name="gvisor",
    )
    sent = wire(spec)
    assert sent["readinessProbe"] == {
        "exec": {"command": ["true"]},
        "initialDelaySeconds": 1,
        "periodSeconds": 10,
        "failureThreshold": 3,
    }
    assert sent["network"] == {"allowInternetAccess": True, "allowedDomains": ["*.example.com"]}
    assert sent["persistence"] == {
        "enabled": True,
        "storageClassName": "fast",
        "reclaimPolicy": "Retain",
    }
    assert sent["runtimeClassName"] == "gvisor"
    assert TemplateSpec.model_validate(sent) == spec


def test_update_request_keeps_what_is_unset() -> None:
    assert wire(UpdateTemplateRequest(spec=TemplateSpec(image="x"))).keys() == {"spec"}


def test_enums_print_as_their_value() -> None:
    assert f"{SandboxStatus.RUNNING}" == "running"
    assert str(PrepullStatus.COMPLETED) == "completed"
    assert f"{SandboxStatus.PENDING:>8}" == " pending"
    assert SandboxStatus("failed") is SandboxStatus.FAILED
    assert SandboxStatus.RUNNING == "running"


def test_unknown_fields_are_ignored() -> None:
    sb = Sandbox.model_validate({**sandbox_json(), "fromTheFuture": 1})
    assert not hasattr(sb, "fromTheFuture")


def test_session_models_round_trip() -> None:
    res = SessionExecuteResult.model_validate(session_execute_json())
    wire = res.model_dump(mode="json", by_alias=True)
    assert wire["session_id"] == "my-session"
    assert wire["output"] == {"stdout": "100\n", "stderr": ""}
    assert SessionExecuteResult.model_validate(wire) == res
    assert (res.stdout, res.language, res.created, res.execution_count) == (
        "100\n",
        "python",
        True,
        1,
    )
    cmd = SessionCommandResult.model_validate(
        session_command_json(oom_killed=True, reason="OutOfMemory", exit_code=137)
    )
    assert (cmd.oom_killed, cmd.reason, cmd.timed_out, cmd.truncated) == (
        True,
        "OutOfMemory",
        False,
        False,
    )
    sess = Session.model_validate(session_json(ends_at="2025-01-02T12:00:00Z", future_field=1))
    assert sess.ends_at is not None
    assert Session.model_validate(sess.model_dump()) == sess
    assert Stats.model_validate(stats_json()).sandboxes["pooled"] == 1
    assert Stats.model_validate({}).sessions.active == 0  # an older daemon's partial answer
    assert Usage.model_validate(usage_json(max_sandboxes=None)).max_sandboxes is None
