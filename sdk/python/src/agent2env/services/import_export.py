"""The import/export service: templates as LiteBoxd YAML (seed 003 §5.4)."""

from __future__ import annotations

from typing import IO

from .._async_base import AsyncAPIClient
from .._base import Op, Request, SyncAPIClient, call, parse_bytes, parse_model
from ..models.import_export import ImportResult, ImportStrategy

__all__ = ["AsyncImportExportService", "ImportExportService"]

YAMLContent = bytes | str | IO[bytes]


def _import(
    yaml_content: YAMLContent, strategy: ImportStrategy | str, auto_prepull: bool
) -> Op[ImportResult]:
    if isinstance(yaml_content, str):
        yaml_content = yaml_content.encode()
    data = {
        "strategy": ImportStrategy(strategy).value,
        "prepull": "true" if auto_prepull else "false",
    }
    # The file part is named as LiteBoxd's SDKs name it; the values go first.
    files = {"file": ("templates.yaml", yaml_content, "application/x-yaml")}
    return call(
        Request("POST", "/templates/import", data=data, files=files), parse_model(ImportResult)
    )


def _export_all(tag: str | None, names: list[str] | None) -> Op[bytes]:
    params: dict[str, str] = {}
    if tag is not None:
        params["tag"] = tag
    if names:
        # One comma-separated value, which LiteBoxd reads as well.
        params["names"] = ",".join(names)
    return call(Request("GET", "/templates/export", params=params), parse_bytes)


class ImportExportService:
    """Template YAML import and export; get it as :attr:`agent2env.Client.import_export`."""

    def __init__(self, client: SyncAPIClient) -> None:
        self._c = client

    def import_templates(
        self,
        yaml_content: YAMLContent,
        *,
        strategy: ImportStrategy = ImportStrategy.CREATE_OR_UPDATE,
        auto_prepull: bool = False,
    ) -> ImportResult:
        """Create or update the templates of a YAML file.

        Args:
            yaml_content: The YAML (a ``SandboxTemplate``, a
                ``SandboxTemplateList`` or a ``---`` stream of them), as bytes,
                text or a binary file object (streamed).
            strategy: What to do with each template.
            auto_prepull: Also prepull the images of the templates created or updated.

        Returns:
            One result per template; templates fail alone, so a result with
            ``failed > 0`` is not an exception.

        Raises:
            BadRequestError: The file is refused whole (code ``INVALID_YAML``).

        """
        return self._c.run(_import(yaml_content, strategy, auto_prepull))

    def export_all(self, *, tag: str | None = None, names: list[str] | None = None) -> bytes:
        """Return the templates carrying ``tag`` and named in ``names`` (all by default) as YAML."""
        return self._c.run(_export_all(tag, names))


class AsyncImportExportService:
    """The async twin of :class:`ImportExportService`: ``AsyncClient.import_export``."""

    def __init__(self, client: AsyncAPIClient) -> None:
        self._c = client

    async def import_templates(
        self,
        yaml_content: YAMLContent,
        *,
        strategy: ImportStrategy = ImportStrategy.CREATE_OR_UPDATE,
        auto_prepull: bool = False,
    ) -> ImportResult:
        """Import templates from YAML; see :meth:`ImportExportService.import_templates`."""
        return await self._c.run(_import(yaml_content, strategy, auto_prepull))

    async def export_all(self, *, tag: str | None = None, names: list[str] | None = None) -> bytes:
        """Return templates as YAML; see :meth:`ImportExportService.export_all`."""
        return await self._c.run(_export_all(tag, names))
