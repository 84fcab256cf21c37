"""The services of a client, one per group of endpoints, each with its async twin."""

from .context import AsyncContextService, ContextService
from .image import AsyncImageService, ImageService
from .import_export import AsyncImportExportService, ImportExportService
from .llm import AsyncLLMKeyService, AsyncLLMService, LLMKeyService, LLMService
from .prepull import AsyncPrepullService, PrepullService
from .run import AsyncRunService, RunService
from .sandbox import AsyncSandboxService, SandboxService
from .session import AsyncSessionService, AsyncStatsService, SessionService, StatsService
from .snapshot import AsyncSnapshotService, SnapshotService
from .template import AsyncTemplateService, TemplateService

__all__ = [
    "AsyncContextService",
    "AsyncImageService",
    "AsyncImportExportService",
    "AsyncLLMKeyService",
    "AsyncLLMService",
    "AsyncPrepullService",
    "AsyncRunService",
    "AsyncSandboxService",
    "AsyncSessionService",
    "AsyncSnapshotService",
    "AsyncStatsService",
    "AsyncTemplateService",
    "ContextService",
    "ImageService",
    "ImportExportService",
    "LLMKeyService",
    "LLMService",
    "PrepullService",
    "RunService",
    "SandboxService",
    "SessionService",
    "SnapshotService",
    "StatsService",
    "TemplateService",
]
