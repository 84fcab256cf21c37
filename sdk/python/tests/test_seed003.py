"""The models are seed 003 §6's: every class, field, alias, default and enum value.

The seed is read from ``shared/seeds`` above the checkout when it is there
(the text is not part of the repository); the table below is what this test
found in it, so that a clone without the seed still checks the same.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

import agent2env.models as models

# (class, field, wire alias, default); REQUIRED marks a field without one.
REQUIRED: Any = object()

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


def seed_fields(text: str) -> list[tuple[str, str, str | None, Any]]:
    """Return the fields of the BaseModel classes of the seed's §6."""
    section = text[text.index("## 6.") : text.index("## 7.")]
    out: list[tuple[str, str, str | None, Any]] = []
    cls = None
    for line in section.splitlines():
        if m := re.match(r"class (\w+)\((BaseModel|str, Enum)\):", line):
            cls = m.group(1) if m.group(2) == "BaseModel" else None
            continue
        m = re.match(r"    (\w+): [^=]+?(?: = (.*))?$", line)
        if cls is None or m is None or m.group(1) == "model_config":
            continue
        name, default = m.groups()
        alias = None
        if default is None:
            value: Any = REQUIRED
        elif default.startswith("Field("):
            a = re.search(r'alias="(\w+)"', default)
            alias = a.group(1) if a else None
            first = default[len("Field(") :].split(",")[0].rstrip(")")
            if first.startswith("alias"):
                value = REQUIRED
            elif first.startswith("default_factory"):
                value = "factory"
            else:
                value = eval(first)  # a literal of the seed: 0, None, True, ...
        else:
            value = eval(default)
        out.append((cls, name, alias, value))
    return out


def seed_enums(text: str) -> list[tuple[str, str, str]]:
    """Return (enum, member, value) of the seed's §6."""
    section = text[text.index("## 6.") : text.index("## 7.")]
    out = []
    cls = None
    for line in section.splitlines():
        if m := re.match(r"class (\w+)\((BaseModel|str, Enum)\):", line):
            cls = m.group(1) if m.group(2) == "str, Enum" else None
        elif cls and (m := re.match(r'    (\w+) = "(.*)"', line)):
            out.append((cls, m.group(1), m.group(2)))
    return out


def find_seed() -> str | None:
    here = Path(__file__).resolve()
    for d in here.parents:
        for s in (d / "shared" / "seeds").glob("003_*.txt"):
            return s.read_text()
    return None


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


def test_the_table_is_the_seeds() -> None:
    text = find_seed()
    if text is None:
        pytest.skip("no shared/seeds above this checkout to compare the table with")
    assert seed_fields(text) == SEED_FIELDS
    assert seed_enums(text) == SEED_ENUMS
