"""The SDK's pydantic models: what the daemon's API sends and takes.

Fields have Python names; the wire's names (``templateVersion``,
``startupScript``, ...) are their aliases, accepted when a model is built and
used when one is sent.
"""

from .common import APIModel, StrEnum
from .context import (
    Context,
    DeleteContextResult,
    ExecuteResponse,
    ExecutionError,
    ExecutionEvent,
    ExecutionOutput,
    ExecutionResult,
)
from .image import Image, ImageProgress
from .import_export import ImportAction, ImportResult, ImportResultItem, ImportStrategy
from .prepull import PrepullProgress, PrepullStatus, PrepullTask
from .sandbox import (
    ExecEvent,
    ExecResult,
    FileInfo,
    LogsResult,
    Sandbox,
    SandboxOverrides,
    SandboxStatus,
)
from .template import (
    CreateTemplateRequest,
    ExecAction,
    FileSpec,
    NetworkSpec,
    PersistenceSpec,
    ProbeSpec,
    ResourceSpec,
    RollbackResult,
    Template,
    TemplateListResult,
    TemplateSpec,
    TemplateVersion,
    UpdateTemplateRequest,
    VersionListResult,
)

__all__ = [
    "APIModel",
    "Context",
    "CreateTemplateRequest",
    "DeleteContextResult",
    "ExecAction",
    "ExecEvent",
    "ExecResult",
    "ExecuteResponse",
    "ExecutionError",
    "ExecutionEvent",
    "ExecutionOutput",
    "ExecutionResult",
    "FileInfo",
    "FileSpec",
    "Image",
    "ImageProgress",
    "ImportAction",
    "ImportResult",
    "ImportResultItem",
    "ImportStrategy",
    "LogsResult",
    "NetworkSpec",
    "PersistenceSpec",
    "PrepullProgress",
    "PrepullStatus",
    "PrepullTask",
    "ProbeSpec",
    "ResourceSpec",
    "RollbackResult",
    "Sandbox",
    "SandboxOverrides",
    "SandboxStatus",
    "StrEnum",
    "Template",
    "TemplateListResult",
    "TemplateSpec",
    "TemplateVersion",
    "UpdateTemplateRequest",
    "VersionListResult",
]
