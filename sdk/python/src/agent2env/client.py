"""The clients: :class:`Client` (sync) and :class:`AsyncClient` (async/await)."""

from __future__ import annotations

from collections.abc import Mapping
from types import TracebackType
from typing import Final

import httpx
from typing_extensions import Self

from ._async_base import AsyncAPIClient
from ._base import (
    DEFAULT_MAX_RETRIES,
    DEFAULT_TIMEOUT,
    ClientConfig,
    Op,
    Request,
    SyncAPIClient,
    call,
    parse_model,
    parse_none,
)
from .models.snapshot import Capabilities
from .services import (
    AsyncContextService,
    AsyncImageService,
    AsyncImportExportService,
    AsyncLLMKeyService,
    AsyncLLMService,
    AsyncPrepullService,
    AsyncRunService,
    AsyncSandboxService,
    AsyncSessionService,
    AsyncSnapshotService,
    AsyncStatsService,
    AsyncTemplateService,
    ContextService,
    ImageService,
    ImportExportService,
    LLMKeyService,
    LLMService,
    PrepullService,
    RunService,
    SandboxService,
    SessionService,
    SnapshotService,
    StatsService,
    TemplateService,
)

__all__ = ["AsyncClient", "Client"]


def _health() -> Op[None]:
    return call(Request("GET", "/health", api=False), parse_none)


def _capabilities() -> Op[Capabilities]:
    return call(Request("GET", "/capabilities"), parse_model(Capabilities))


class Client:
    """A client of one agent2env daemon (the LiteBoxd v1 API), safe for use from several threads.

    Args:
        base_url: The API's URL, such as ``http://localhost:8080/api/v1`` (the
            ``/api/v1`` may be left out). Default: ``$AGENT2ENV_URL``, else
            ``$MSB_SERVER_URL``, else ``$SANDBOX_BASE_URL``, else
            ``http://localhost:8080/api/v1``.
        timeout: Seconds (or an ``httpx.Timeout``) a request may take; calls
            that run something for longer (a command with a timeout) wait
            accordingly longer, streams wait as long as they last.
        auth_token: The daemon's API key, sent as a bearer token. Default:
            ``$AGENT2ENV_TOKEN``, else ``$MSB_API_KEY``; none when both are unset.
        headers: Headers sent with every request.
        http_client: An ``httpx.Client`` to send requests with (its own
            timeout applies); the client does not close it.
        max_retries: How often an idempotent request (GET, DELETE) is
            retried, with exponential back-off, after a connection error or
            a 503 (a DELETE only if it was not sent, or answered 503); other
            requests are never retried.

    Attributes:
        sandbox: Sandboxes, their commands, files and logs.
        template: Templates and their versions.
        prepull: Image prepull tasks.
        import_export: Templates as LiteBoxd YAML.
        contexts: Code-interpreter contexts (agent2env addition).
        sessions: Sessions: code and commands in sandboxes made on first
            use (agent2env addition; see also :mod:`agent2env.sessions`).
        snapshots: Saved sandboxes, processes and memory included; taken
            with ``sandbox.snapshot`` and restored with
            ``sandbox.create_from_snapshot`` (agent2env addition).
        stats: The daemon's statistics (agent2env addition).
        images: The daemon's image store (agent2env addition).
        llm: The LLM proxy's archive: every call sandboxes and runs made to a
            model (agent2env addition).
        llm_keys: The LLM proxy's per-run keys (agent2env addition).
        runs: Task runs: task files submitted, followed, waited for and read
            back, results, output and artifacts (agent2env addition).

    Use it as a context manager, or call :meth:`close` when done::

        with Client("http://localhost:8080/api/v1") as client:
            sandbox = client.sandbox.create(template="python-data-science")

    """

    def __init__(
        self,
        base_url: str | None = None,
        *,
        timeout: float | httpx.Timeout = DEFAULT_TIMEOUT,
        auth_token: str | None = None,
        headers: Mapping[str, str] | None = None,
        http_client: httpx.Client | None = None,
        max_retries: int = DEFAULT_MAX_RETRIES,
    ) -> None:
        config = ClientConfig(base_url, auth_token=auth_token, headers=headers)
        self._api = SyncAPIClient(
            config, timeout=timeout, http_client=http_client, max_retries=max_retries
        )
        self.sandbox: Final = SandboxService(self._api)
        self.template: Final = TemplateService(self._api)
        self.prepull: Final = PrepullService(self._api)
        self.import_export: Final = ImportExportService(self._api)
        self.contexts: Final = ContextService(self._api)
        self.sessions: Final = SessionService(self._api)
        self.snapshots: Final = SnapshotService(self._api)
        self.stats: Final = StatsService(self._api)
        self.images: Final = ImageService(self._api)
        self.llm: Final = LLMService(self._api)
        self.llm_keys: Final = LLMKeyService(self._api)
        self.runs: Final = RunService(self._api)

    @property
    def base_url(self) -> str:
        """The API's URL, ending in ``/api/v1``."""
        return self._api.config.base_url

    def health(self) -> None:
        """Check that the daemon answers; raise ConnectionError or APIError if not."""
        self._api.run(_health())

    def capabilities(self) -> Capabilities:
        """Return what the daemon's runtime can do: pause, snapshots (agent2env addition)."""
        return self._api.run(_capabilities())

    def close(self) -> None:
        """Close the HTTP connections (not those of an ``http_client`` given to the constructor)."""
        self._api.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class AsyncClient:
    """The async twin of :class:`Client`: the same arguments and services, methods awaited.

    Use it as an async context manager, or ``await client.close()`` when done::

        async with AsyncClient("http://localhost:8080/api/v1") as client:
            sandbox = await client.sandbox.create(template="python-data-science")

    Args:
        base_url: See :class:`Client`.
        timeout: See :class:`Client`.
        auth_token: See :class:`Client`.
        headers: See :class:`Client`.
        http_client: An ``httpx.AsyncClient``; the client does not close it.
        max_retries: See :class:`Client`.

    """

    def __init__(
        self,
        base_url: str | None = None,
        *,
        timeout: float | httpx.Timeout = DEFAULT_TIMEOUT,
        auth_token: str | None = None,
        headers: Mapping[str, str] | None = None,
        http_client: httpx.AsyncClient | None = None,
        max_retries: int = DEFAULT_MAX_RETRIES,
    ) -> None:
        config = ClientConfig(base_url, auth_token=auth_token, headers=headers)
        self._api = AsyncAPIClient(
            config, timeout=timeout, http_client=http_client, max_retries=max_retries
        )
        self.sandbox: Final = AsyncSandboxService(self._api)
        self.template: Final = AsyncTemplateService(self._api)
        self.prepull: Final = AsyncPrepullService(self._api)
        self.import_export: Final = AsyncImportExportService(self._api)
        self.contexts: Final = AsyncContextService(self._api)
        self.sessions: Final = AsyncSessionService(self._api)
        self.snapshots: Final = AsyncSnapshotService(self._api)
        self.stats: Final = AsyncStatsService(self._api)
        self.images: Final = AsyncImageService(self._api)
        self.llm: Final = AsyncLLMService(self._api)
        self.llm_keys: Final = AsyncLLMKeyService(self._api)
        self.runs: Final = AsyncRunService(self._api)

    @property
    def base_url(self) -> str:
        """The API's URL, ending in ``/api/v1``."""
        return self._api.config.base_url

    async def health(self) -> None:
        """Check that the daemon answers; raise ConnectionError or APIError if not."""
        await self._api.run(_health())

    async def capabilities(self) -> Capabilities:
        """Return what the daemon's runtime can do; see :meth:`Client.capabilities`."""
        return await self._api.run(_capabilities())

    async def close(self) -> None:
        """Close the HTTP connections (not those of an ``http_client`` given to the constructor)."""
        await self._api.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()
