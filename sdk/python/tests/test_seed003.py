"""The models are seed 003 §6's: every class, field, alias, default and enum value.

The seed's text is not part of the repository: the table below is what was
read from its §6, and SEED_DIGEST the digest of what was read, so that the
table cannot drift from the seed without this test saying so.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pydantic import BaseModel

import agent2env.models as models

# (class, field, wire alias, default); REQUIRED marks a field without one.
REQUIRED: Any = object()

# table_digest of the fields and enums parsed from seed 003 §6.
SEED_DIGEST = "bcf1e813dc6a46d9315c0fb1710d104fafa9e2650fe8504a898f9d4827013376"

SEED_FIELDS = [
    ("Sandbox", "id", None, REQUIRED),
    ("Sandbox", "image", None, REQUIRED),
    ("Sandbox", "cpu", None, REQUIRED),
    ("Sandbox", "memory", None, REQUIRED),
    ("Sandbox", "ttl", None, REQUIRED),
    ("Sandbox", "env", None, None),
    ("Sandbox", "status", None, REQUIRED),
    ("Sandbox", "template", None, None),
    ("Sandbox", "template_version", "templateVersion", None),
    ("Sandbox", "created_at", "created_at", REQUIRED),
    ("Sandbox", "expires_at", "expires_at", REQUIRED),
    ("Sandbox", "access_token", "accessToken", None),
    ("Sandbox", "access_url", "accessUrl", None),
    ("SandboxOverrides", "cpu", None, None),
    ("SandboxOverrides", "memory", None, None),
    ("SandboxOverrides", "ttl", None, None),
    ("SandboxOverrides", "env", None, None),
    ("ExecResult", "exit_code", "exit_code", REQUIRED),
    ("ExecResult", "stdout", None, REQUIRED),
    ("ExecResult", "stderr", None, REQUIRED),
    ("LogsResult", "logs", None, REQUIRED),
    ("LogsResult", "events", None, REQUIRED),
    ("ResourceSpec", "cpu", None, "500m"),
    ("ResourceSpec", "memory", None, "512Mi"),
    ("FileSpec", "source", None, None),
    ("FileSpec", "destination", None, REQUIRED),
    ("FileSpec", "content", None, None),
    ("ExecAction", "command", None, REQUIRED),
    ("ProbeSpec", "exec", None, REQUIRED),
    ("ProbeSpec", "initial_delay_seconds", "initialDelaySeconds", 0),
    ("ProbeSpec", "period_seconds", "periodSeconds", 10),
    ("ProbeSpec", "failure_threshold", "failureThreshold", 3),
    ("NetworkSpec", "allow_internet_access", "allowInternetAccess", False),
    ("NetworkSpec", "allowed_domains", "allowedDomains", None),
    ("TemplateSpec", "image", None, REQUIRED),
    ("TemplateSpec", "command", None, None),
    ("TemplateSpec", "args", None, None),
    ("TemplateSpec", "resources", None, "factory"),
    ("TemplateSpec", "ttl", None, 3600),
    ("TemplateSpec", "env", None, None),
    ("TemplateSpec", "startup_script", "startupScript", None),
    ("TemplateSpec", "startup_timeout", "startupTimeout", 300),
    ("TemplateSpec", "files", None, None),
    ("TemplateSpec", "readiness_probe", "readinessProbe", None),
    ("TemplateSpec", "network", None, None),
    ("Template", "id", None, REQUIRED),
    ("Template", "name", None, REQUIRED),
    ("Template", "display_name", "displayName", None),
    ("Template", "description", None, None),
    ("Template", "tags", None, None),
    ("Template", "author", None, None),
    ("Template", "is_public", "isPublic", True),
    ("Template", "latest_version", "latestVersion", REQUIRED),
    ("Template", "created_at", "createdAt", REQUIRED),
    ("Template", "updated_at", "updatedAt", REQUIRED),
    ("Template", "spec", None, None),
    ("TemplateVersion", "id", None, REQUIRED),
    ("TemplateVersion", "template_id", "templateId", REQUIRED),
    ("TemplateVersion", "version", None, REQUIRED),
    ("TemplateVersion", "spec", None, REQUIRED),
    ("TemplateVersion", "changelog", None, None),
    ("TemplateVersion", "created_by", "createdBy", None),
    ("TemplateVersion", "created_at", "createdAt", REQUIRED),
    ("CreateTemplateRequest", "name", None, REQUIRED),
    ("CreateTemplateRequest", "display_name", "displayName", None),
    ("CreateTemplateRequest", "description", None, None),
    ("CreateTemplateRequest", "tags", None, None),
    ("CreateTemplateRequest", "is_public", "isPublic", None),
    ("CreateTemplateRequest", "spec", None, REQUIRED),
    ("CreateTemplateRequest", "auto_prepull", "autoPrepull", False),
    ("UpdateTemplateRequest", "display_name", "displayName", None),
    ("UpdateTemplateRequest", "description", None, None),
    ("UpdateTemplateRequest", "tags", None, None),
    ("UpdateTemplateRequest", "is_public", "isPublic", None),
    ("UpdateTemplateRequest", "spec", None, REQUIRED),
    ("UpdateTemplateRequest", "changelog", None, None),
    ("PrepullProgress", "ready", None, REQUIRED),
    ("PrepullProgress", "total", None, REQUIRED),
    ("PrepullTask", "id", None, REQUIRED),
    ("PrepullTask", "image", None, REQUIRED),
    ("PrepullTask", "status", None, REQUIRED),
    ("PrepullTask", "progress", None, None),
    ("PrepullTask", "template", None, None),
    ("PrepullTask", "error", None, None),
    ("PrepullTask", "started_at", "startedAt", REQUIRED),
    ("PrepullTask", "completed_at", "completedAt", None),
    ("ImportResultItem", "name", None, REQUIRED),
    ("ImportResultItem", "action", None, REQUIRED),
    ("ImportResultItem", "version", None, None),
    ("ImportResultItem", "error", None, None),
    ("ImportResult", "total", None, REQUIRED),
    ("ImportResult", "created", None, REQUIRED),
    ("ImportResult", "updated", None, REQUIRED),
    ("ImportResult", "skipped", None, REQUIRED),
    ("ImportResult", "failed", None, REQUIRED),
    ("ImportResult", "results", None, REQUIRED),
    ("ImportResult", "prepull_started", "prepullStarted", None),
]
SEED_ENUMS = [
    ("SandboxStatus", "PENDING", "pending"),
    ("SandboxStatus", "RUNNING", "running"),
    ("SandboxStatus", "SUCCEEDED", "succeeded"),
    ("SandboxStatus", "FAILED", "failed"),
    ("SandboxStatus", "TERMINATING", "terminating"),
    ("SandboxStatus", "UNKNOWN", "unknown"),
    ("PrepullStatus", "PENDING", "pending"),
    ("PrepullStatus", "PULLING", "pulling"),
    ("PrepullStatus", "COMPLETED", "completed"),
    ("PrepullStatus", "FAILED", "failed"),
    ("ImportStrategy", "CREATE_ONLY", "create-only"),
    ("ImportStrategy", "UPDATE_ONLY", "update-only"),
    ("ImportStrategy", "CREATE_OR_UPDATE", "create-or-update"),
    ("ImportAction", "CREATED", "created"),
    ("ImportAction", "UPDATED", "updated"),
    ("ImportAction", "SKIPPED", "skipped"),
    ("ImportAction", "FAILED", "failed"),
]


def check_fields(fields: list[tuple[str, str, str | None, Any]]) -> None:
    for cls_name, name, alias, default in fields:
        model: type[BaseModel] = getattr(models, cls_name)
        assert model.model_config.get("populate_by_name"), cls_name
        field = model.model_fields.get(name)
        assert field is not None, f"{cls_name}.{name} missing"
        if alias is not None:
            assert field.alias == alias, f"{cls_name}.{name}: alias {field.alias} != {alias}"
        if default is REQUIRED:
            assert field.is_required(), f"{cls_name}.{name} should be required"
        elif default == "factory":
            assert field.default_factory is not None, f"{cls_name}.{name}"
        else:
            assert field.default == default, f"{cls_name}.{name}: {field.default!r} != {default!r}"


def test_models_are_the_seeds() -> None:
    check_fields(SEED_FIELDS)
    for enum, member, value in SEED_ENUMS:
        assert getattr(models, enum)[member].value == value, (enum, member)


def table_digest(
    fields: list[tuple[str, str, str | None, Any]], enums: list[tuple[str, str, str]]
) -> str:
    """Return the sha256 of the tables in a canonical JSON form."""
    rows = [[c, n, a, "REQUIRED" if d is REQUIRED else d] for c, n, a, d in fields]
    return hashlib.sha256(json.dumps([rows, [list(e) for e in enums]]).encode()).hexdigest()


def test_the_table_is_the_seeds() -> None:
    assert table_digest(SEED_FIELDS, SEED_ENUMS) == SEED_DIGEST, "the table is no longer the seed's"
