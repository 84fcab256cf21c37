"""Template models (seed 003 §6.2, plus the fields agent2env adds).

The request models users build (:class:`TemplateSpec`, :class:`ProbeSpec`,
:class:`NetworkSpec`, :class:`CreateTemplateRequest`,
:class:`UpdateTemplateRequest`) declare their constructor for type checkers,
so that editors complete the snake_case names the seed's examples use (the
wire's camelCase aliases are accepted too, at run time).
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from pydantic import Field

from .common import APIModel

__all__ = [
    "CreateTemplateRequest",
    "ExecAction",
    "FileSpec",
    "NetworkSpec",
    "PersistenceSpec",
    "ProbeSpec",
    "ResourceSpec",
    "RollbackResult",
    "Template",
    "TemplateListResult",
    "TemplateSpec",
    "TemplateVersion",
    "UpdateTemplateRequest",
    "VersionListResult",
]


class ResourceSpec(APIModel):
    """Resource limits: Kubernetes quantities such as ``500m`` CPU and ``512Mi`` memory."""

    cpu: str = "500m"
    memory: str = "512Mi"


class FileSpec(APIModel):
    """A file put in place before the sandbox starts; exactly one of ``content`` and ``source``."""

    source: str | None = None
    destination: str
    content: str | None = None


class ExecAction(APIModel):
    """A command, as an argv."""

    command: list[str]


class ProbeSpec(APIModel):
    """A readiness probe: the sandbox counts as running once ``exec`` exits 0."""

    exec: ExecAction
    initial_delay_seconds: int = Field(0, alias="initialDelaySeconds")
    period_seconds: int = Field(10, alias="periodSeconds")
    failure_threshold: int = Field(3, alias="failureThreshold")

    if TYPE_CHECKING:

        def __init__(
            self,
            *,
            exec: ExecAction,
            initial_delay_seconds: int = 0,
            period_seconds: int = 10,
            failure_threshold: int = 3,
        ) -> None: ...


class NetworkSpec(APIModel):
    """What the sandbox may reach beyond its loopback; nothing by default."""

    allow_internet_access: bool = Field(False, alias="allowInternetAccess")
    allowed_domains: list[str] | None = Field(None, alias="allowedDomains")

    if TYPE_CHECKING:

        def __init__(
            self, *, allow_internet_access: bool = False, allowed_domains: list[str] | None = None
        ) -> None: ...


class PersistenceSpec(APIModel):
    """Keeps the root filesystem's changes across a stop and start (agent2env addition)."""

    enabled: bool = False
    mode: str | None = None
    size: str | None = None
    storage_class_name: str | None = Field(None, alias="storageClassName")
    reclaim_policy: str | None = Field(None, alias="reclaimPolicy")

    if TYPE_CHECKING:

        def __init__(
            self,
            *,
            enabled: bool = False,
            mode: str | None = None,
            size: str | None = None,
            storage_class_name: str | None = None,
            reclaim_policy: str | None = None,
        ) -> None: ...


class TemplateSpec(APIModel):
    """What a sandbox made from a template runs and how it starts."""

    image: str
    command: list[str] | None = None
    args: list[str] | None = None
    resources: ResourceSpec = Field(default_factory=ResourceSpec)
    ttl: int = 3600
    env: dict[str, str] | None = None
    startup_script: str | None = Field(None, alias="startupScript")
    startup_timeout: int = Field(300, alias="startupTimeout")
    files: list[FileSpec] | None = None
    readiness_probe: ProbeSpec | None = Field(None, alias="readinessProbe")
    network: NetworkSpec | None = None
    persistence: PersistenceSpec | None = None
    """The sandbox's writable storage on a volume of its own, kept or not after delete."""
    runtime_class_name: str | None = Field(None, alias="runtimeClassName")
    """The RuntimeClass of the sandboxes' Pods (agent2env addition; kubernetes only)."""

    if TYPE_CHECKING:

        def __init__(
            self,
            *,
            image: str,
            command: list[str] | None = None,
            args: list[str] | None = None,
            resources: ResourceSpec = ...,
            ttl: int = 3600,
            env: dict[str, str] | None = None,
            startup_script: str | None = None,
            startup_timeout: int = 300,
            files: list[FileSpec] | None = None,
            readiness_probe: ProbeSpec | None = None,
            network: NetworkSpec | None = None,
            persistence: PersistenceSpec | None = None,
            runtime_class_name: str | None = None,
        ) -> None: ...


class Template(APIModel):
    """A template with its latest spec."""

    id: str
    name: str
    display_name: str | None = Field(None, alias="displayName")
    description: str | None = None
    tags: list[str] | None = None
    author: str | None = None
    is_public: bool = Field(True, alias="isPublic")
    latest_version: int = Field(alias="latestVersion")
    created_at: datetime = Field(alias="createdAt")
    updated_at: datetime = Field(alias="updatedAt")
    spec: TemplateSpec | None = None


class TemplateVersion(APIModel):
    """One immutable version of a template."""

    id: str
    template_id: str = Field(alias="templateId")
    version: int
    spec: TemplateSpec
    changelog: str | None = None
    created_by: str | None = Field(None, alias="createdBy")
    created_at: datetime = Field(alias="createdAt")


class CreateTemplateRequest(APIModel):
    """The body of a template create."""

    name: str
    display_name: str | None = Field(None, alias="displayName")
    description: str | None = None
    tags: list[str] | None = None
    is_public: bool | None = Field(None, alias="isPublic")
    spec: TemplateSpec
    auto_prepull: bool = Field(False, alias="autoPrepull")

    if TYPE_CHECKING:

        def __init__(
            self,
            *,
            name: str,
            display_name: str | None = None,
            description: str | None = None,
            tags: list[str] | None = None,
            is_public: bool | None = None,
            spec: TemplateSpec,
            auto_prepull: bool = False,
        ) -> None: ...


class UpdateTemplateRequest(APIModel):
    """The body of a template update, which makes a new version.

    ``None`` keeps the old display name, description, tags and visibility;
    ``tags=[]`` clears the tags.
    """

    display_name: str | None = Field(None, alias="displayName")
    description: str | None = None
    tags: list[str] | None = None
    is_public: bool | None = Field(None, alias="isPublic")
    spec: TemplateSpec
    changelog: str | None = None

    if TYPE_CHECKING:

        def __init__(
            self,
            *,
            display_name: str | None = None,
            description: str | None = None,
            tags: list[str] | None = None,
            is_public: bool | None = None,
            spec: TemplateSpec,
            changelog: str | None = None,
        ) -> None: ...


class TemplateListResult(APIModel):
    """A page of templates."""

    items: list[Template]
    total: int
    """How many templates match, on all pages."""
    page: int
    page_size: int = Field(alias="pageSize")


class VersionListResult(APIModel):
    """Every version of a template, newest first, or a page of them."""

    items: list[TemplateVersion]
    total: int
    """How many versions are listed (on this page, with a limit)."""
    next_cursor: str | None = None
    """The next page's cursor; none on the last page (agent2env addition)."""


class RollbackResult(APIModel):
    """The outcome of a rollback, which made a new version with an old spec."""

    id: str
    name: str
    latest_version: int = Field(alias="latestVersion")
    rolled_back_from: int = Field(alias="rolledBackFrom")
    """The latest version before the rollback."""
    rolled_back_to: int = Field(alias="rolledBackTo")
    """The version whose spec was copied."""
    updated_at: datetime = Field(alias="updatedAt")
