"""The template service: named, versioned sandbox templates (seed 003 §5.2)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._async_base import AsyncAPIClient
from .._base import (
    Op,
    Order,
    Request,
    SyncAPIClient,
    call,
    dump,
    paged,
    parse_bytes,
    parse_model,
    parse_none,
    segment,
)
from ..models.template import (
    CreateTemplateRequest,
    RollbackResult,
    Template,
    TemplateListResult,
    TemplateVersion,
    UpdateTemplateRequest,
    VersionListResult,
)

__all__ = ["AsyncTemplateService", "TemplateService"]

CreateRequest = CreateTemplateRequest | Mapping[str, Any]
UpdateRequest = UpdateTemplateRequest | Mapping[str, Any]


def _path(name: str, suffix: str = "") -> str:
    return f"/templates/{segment(name, 'template name')}{suffix}"


def _create(request: CreateRequest) -> Op[Template]:
    body = dump(CreateTemplateRequest.model_validate(request))
    return call(Request("POST", "/templates", json=body), parse_model(Template))


def _list(tag: str | None, search: str | None, page: int, page_size: int) -> Op[TemplateListResult]:
    params: dict[str, str | int] = {"page": page, "pageSize": page_size}
    if tag is not None:
        params["tag"] = tag
    if search is not None:
        params["search"] = search
    return call(Request("GET", "/templates", params=params), parse_model(TemplateListResult))


def _get(name: str) -> Op[Template]:
    return call(Request("GET", _path(name)), parse_model(Template))


def _update(name: str, request: UpdateRequest) -> Op[Template]:
    body = dump(UpdateTemplateRequest.model_validate(request))
    return call(Request("PUT", _path(name), json=body), parse_model(Template))


def _delete(name: str) -> Op[None]:
    return call(Request("DELETE", _path(name)), parse_none)


def _list_versions(
    name: str, limit: int | None, cursor: str | None, order: Order | None
) -> Op[VersionListResult]:
    params = paged({}, limit, cursor, order)
    request = Request("GET", _path(name, "/versions"), params=params)
    return call(request, parse_model(VersionListResult))


def _get_version(name: str, version: int) -> Op[TemplateVersion]:
    return call(
        Request("GET", _path(name, f"/versions/{int(version)}")), parse_model(TemplateVersion)
    )


def _rollback(name: str, target_version: int, changelog: str | None) -> Op[RollbackResult]:
    body: dict[str, Any] = {"targetVersion": target_version}
    if changelog is not None:
        body["changelog"] = changelog
    return call(Request("POST", _path(name, "/rollback"), json=body), parse_model(RollbackResult))


def _export_yaml(name: str, version: int | None) -> Op[bytes]:
    params = None if version is None else {"version": version}
    return call(Request("GET", _path(name, "/export"), params=params), parse_bytes)


class TemplateService:
    """Template operations: create, list, get, update, delete, versions, rollback, YAML export.

    Get it as :attr:`agent2env.Client.template`.
    """

    def __init__(self, client: SyncAPIClient) -> None:
        self._c = client

    def create(self, request: CreateRequest) -> Template:
        """Create a template with version 1.

        Args:
            request: A :class:`CreateTemplateRequest`, or a dict of its fields.

        Raises:
            ConflictError: A template of that name exists (code ``TEMPLATE_EXISTS``).
            BadRequestError: The name or spec is invalid.

        """
        return self._c.run(_create(request))

    def list(
        self,
        *,
        tag: str | None = None,
        search: str | None = None,
        page: int = 1,
        page_size: int = 20,
    ) -> TemplateListResult:
        """Return a page of templates, newest first, each with its latest spec.

        Args:
            tag: Only templates carrying this tag.
            search: Only templates whose name, display name or description contains this.
            page: The page, from 1.
            page_size: Templates per page, 1 to 100.

        """
        return self._c.run(_list(tag, search, page, page_size))

    def get(self, name: str) -> Template:
        """Return a template with its latest spec; an unknown name raises NotFoundError."""
        return self._c.run(_get(name))

    def update(self, name: str, request: UpdateRequest) -> Template:
        """Make a new version of a template with the request's spec (a full replacement)."""
        return self._c.run(_update(name, request))

    def delete(self, name: str) -> None:
        """Delete a template and all its versions; sandboxes made from it stay."""
        self._c.run(_delete(name))

    def list_versions(
        self,
        name: str,
        *,
        limit: int | None = None,
        cursor: str | None = None,
        order: Order | None = None,
    ) -> VersionListResult:
        """Return every version of a template, newest first, or a page of them.

        Args:
            name: The template.
            limit: The page's size (1 to 1000; agent2env addition); without
                it, every version.
            cursor: The ``next_cursor`` of the page before.
            order: ``"asc"`` lists oldest first (the next pages newer ones),
                ``"desc"`` newest first, the default.

        Raises:
            NotFoundError: The template does not exist.
            BadRequestError: ``limit`` is not from 1 to 1000, ``cursor`` not
                one the daemon gave, or ``order`` neither ``"asc"`` nor ``"desc"``.

        """
        return self._c.run(_list_versions(name, limit, cursor, order))

    def get_version(self, name: str, version: int) -> TemplateVersion:
        """Return one version of a template; an unknown one raises NotFoundError."""
        return self._c.run(_get_version(name, version))

    def rollback(
        self, name: str, target_version: int, *, changelog: str | None = None
    ) -> RollbackResult:
        """Make a new version of a template with the spec of ``target_version``."""
        return self._c.run(_rollback(name, target_version, changelog))

    def export_yaml(self, name: str, *, version: int | None = None) -> bytes:
        """Return a template as a LiteBoxd YAML document; the latest version by default."""
        return self._c.run(_export_yaml(name, version))


class AsyncTemplateService:
    """The async twin of :class:`TemplateService`: ``AsyncClient.template``."""

    def __init__(self, client: AsyncAPIClient) -> None:
        self._c = client

    async def create(self, request: CreateRequest) -> Template:
        """Create a template; see :meth:`TemplateService.create`."""
        return await self._c.run(_create(request))

    async def list(
        self,
        *,
        tag: str | None = None,
        search: str | None = None,
        page: int = 1,
        page_size: int = 20,
    ) -> TemplateListResult:
        """Return a page of templates; see :meth:`TemplateService.list`."""
        return await self._c.run(_list(tag, search, page, page_size))

    async def get(self, name: str) -> Template:
        """Return a template with its latest spec."""
        return await self._c.run(_get(name))

    async def update(self, name: str, request: UpdateRequest) -> Template:
        """Make a new version of a template; see :meth:`TemplateService.update`."""
        return await self._c.run(_update(name, request))

    async def delete(self, name: str) -> None:
        """Delete a template and all its versions."""
        await self._c.run(_delete(name))

    async def list_versions(
        self,
        name: str,
        *,
        limit: int | None = None,
        cursor: str | None = None,
        order: Order | None = None,
    ) -> VersionListResult:
        """Return a template's versions; see :meth:`TemplateService.list_versions`."""
        return await self._c.run(_list_versions(name, limit, cursor, order))

    async def get_version(self, name: str, version: int) -> TemplateVersion:
        """Return one version of a template."""
        return await self._c.run(_get_version(name, version))

    async def rollback(
        self, name: str, target_version: int, *, changelog: str | None = None
    ) -> RollbackResult:
        """Make a new version with an old spec; see :meth:`TemplateService.rollback`."""
        return await self._c.run(_rollback(name, target_version, changelog))

    async def export_yaml(self, name: str, *, version: int | None = None) -> bytes:
        """Return a template as a LiteBoxd YAML document."""
        return await self._c.run(_export_yaml(name, version))
