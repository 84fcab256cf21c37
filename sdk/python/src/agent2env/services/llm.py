"""The LLM proxy's services (agent2env addition): its archive, and per-run keys.

:class:`LLMService` reads the archive: exchanges (filtered, paged), one with its four parts,
a part's raw bytes, the JSON Lines export, a sandbox's conversations, and a live follow of
the exchanges as they end. :class:`LLMKeyService` makes, lists and revokes per-run keys, with
which callers outside sandboxes use the proxy at ``<daemon>/llm``.
"""

from __future__ import annotations

import builtins
import math
import os
from collections.abc import AsyncGenerator, Generator
from datetime import datetime, timedelta, timezone
from typing import IO, Any

from pydantic import ValidationError

from .._async_base import AsyncAPIClient
from .._base import (
    Op,
    Order,
    Request,
    SyncAPIClient,
    call,
    error_from_event,
    every_page,
    open_sink,
    paged,
    parse_bytes,
    parse_items,
    parse_model,
    parse_none,
    segment,
    stream_ended,
    translate_errors,
)
from .._sse import SSEEvent
from ..exceptions import StreamError
from ..models.llm import (
    LLMConversation,
    LLMExchange,
    LLMExchangeDetail,
    LLMExchangeEvent,
    LLMExchangeList,
    LLMKey,
    LLMKeyList,
    LLMPart,
)

__all__ = [
    "AsyncLLMKeyService",
    "AsyncLLMService",
    "LLMFollowParser",
    "LLMKeyService",
    "LLMService",
]

Destination = str | os.PathLike[str] | IO[bytes]
Time = datetime | str | None


def _time(t: Time) -> str | None:
    """Return ``t`` as RFC 3339 text; a naive datetime is taken as UTC."""
    if t is None or isinstance(t, str):
        return t
    if t.tzinfo is None:
        t = t.replace(tzinfo=timezone.utc)
    return t.isoformat()


def _filters(
    sandbox: str | None,
    run: str | None,
    model: str | None,
    conversation: str | None,
    status: str | int | None,
    since: Time,
    until: Time,
) -> dict[str, str | int | list[str]]:
    params: dict[str, str | int | list[str]] = {}
    for name, value in (
        ("sandbox", sandbox),
        ("run", run),
        ("model", model),
        ("conversation", conversation),
        ("status", None if status is None else str(status)),
        ("since", _time(since)),
        ("until", _time(until)),
    ):
        if value:
            params[name] = value
    return params


def _exchange_path(exchange_id: str) -> str:
    return f"/llm/exchanges/{segment(exchange_id, 'exchange id')}"


def _list(params: dict[str, str | int | list[str]]) -> Op[LLMExchangeList]:
    return call(Request("GET", "/llm/exchanges", params=params), parse_model(LLMExchangeList))


def _get(exchange_id: str) -> Op[LLMExchangeDetail]:
    return call(Request("GET", _exchange_path(exchange_id)), parse_model(LLMExchangeDetail))


def _raw(exchange_id: str, part: LLMPart | str) -> Op[bytes]:
    params = {"raw": LLMPart(part).value}
    return call(Request("GET", _exchange_path(exchange_id), params=params), parse_bytes)


def _conversations(sandbox_id: str) -> Op[list[LLMConversation]]:
    path = f"/sandboxes/{segment(sandbox_id, 'sandbox id')}/conversations"
    return call(Request("GET", path), parse_items(LLMConversation))


def _export_request(params: dict[str, str | int | list[str]]) -> Request:
    return Request("GET", "/llm/exchanges/export", params=params, min_read_timeout=math.inf)


def _export_line(line: str) -> LLMExchangeDetail | None:
    if not line:
        return None
    try:
        return LLMExchangeDetail.model_validate_json(line)
    except ValidationError as e:
        raise StreamError(f"LLM exchange export: a line that is not an exchange: {e}") from e


def _follow_request(
    params: dict[str, str | int | list[str]], after: str | None, last: int
) -> Request:
    params = dict(params)
    if after:
        params["after"] = after
    if last:
        params["last"] = last
    return Request("GET", "/llm/exchanges/stream", params=params, min_read_timeout=math.inf)


class LLMFollowParser:
    """Turns the daemon's follow stream into :class:`LLMExchangeEvent` items; it never ends."""

    done = False

    def feed(self, event: SSEEvent) -> LLMExchangeEvent | None:
        """Take one event; an ``error`` event raises the daemon's error."""
        if event.event == "error":
            raise error_from_event(event)
        if event.event == "exchange":
            return LLMExchangeEvent(
                cursor=event.id, exchange=LLMExchange.model_validate(event.json())
            )
        return None

    def finish(self) -> None:
        """Raise: the daemon never ends a follow, so its end is an error."""
        raise stream_ended("LLM exchange follow")


class LLMService:
    """The LLM proxy's archive; get it as :attr:`agent2env.Client.llm`.

    The filters, taken by :meth:`list`, :meth:`list_all`, :meth:`export`, :meth:`iter_export`
    and :meth:`follow`, combine: ``sandbox``, ``run``, ``model`` and ``conversation`` ids;
    ``status`` an HTTP status (``429``), a class (``"4xx"``) or a state (``"complete"``,
    ``"client_gone"``, ``"interrupted"``, ``"in_progress"``); ``since`` and ``until`` bound
    the time an exchange began (a datetime, naive ones taken as UTC, or RFC 3339 text). A
    daemon with API keys shows each key only its own exchanges and those sandboxes made.
    """

    def __init__(self, client: SyncAPIClient) -> None:
        self._c = client

    def list(
        self,
        *,
        sandbox: str | None = None,
        run: str | None = None,
        model: str | None = None,
        conversation: str | None = None,
        status: str | int | None = None,
        since: Time = None,
        until: Time = None,
        limit: int | None = None,
        cursor: str | None = None,
        order: Order | None = None,
    ) -> LLMExchangeList:
        """Return a page of the exchanges the filters select, oldest first.

        Args:
            limit: The page's size (1 to 1000); without it, every exchange.
            cursor: The ``next_cursor`` of the page before.
            order: ``"desc"`` lists newest first (the next pages older ones),
                ``"asc"`` oldest first, the default.

        Raises:
            BadRequestError: A filter is not one, or ``order`` neither ``"asc"`` nor ``"desc"``.

        """
        params = _filters(sandbox, run, model, conversation, status, since, until)
        return self._c.run(_list(paged(params, limit, cursor, order)))

    def list_all(
        self,
        *,
        sandbox: str | None = None,
        run: str | None = None,
        model: str | None = None,
        conversation: str | None = None,
        status: str | int | None = None,
        since: Time = None,
        until: Time = None,
        page_size: int = 500,
        order: Order | None = None,
    ) -> builtins.list[LLMExchange]:
        """Return every exchange the filters select, read a page at a time.

        Oldest first, or newest first with ``order="desc"``.
        """
        params = _filters(sandbox, run, model, conversation, status, since, until)
        return self._c.run(every_page(_list, paged(params, page_size, None, order)))

    def get(self, exchange_id: str) -> LLMExchangeDetail:
        """Return an exchange with its four parts; an unknown id raises NotFoundError."""
        return self._c.run(_get(exchange_id))

    def raw(self, exchange_id: str, part: LLMPart | str) -> bytes:
        """Return one part of an exchange exactly as it passed (a stream's bytes included)."""
        return self._c.run(_raw(exchange_id, part))

    def conversations(self, sandbox_id: str) -> builtins.list[LLMConversation]:
        """Return a sandbox's exchanges grouped into conversations, oldest first."""
        return self._c.run(_conversations(sandbox_id))

    def export(
        self,
        destination: Destination,
        *,
        sandbox: str | None = None,
        run: str | None = None,
        model: str | None = None,
        conversation: str | None = None,
        status: str | int | None = None,
        since: Time = None,
        until: Time = None,
    ) -> int:
        """Write the exchanges the filters select, with their parts, as JSON Lines.

        The file the replay provider answers from. A path is replaced only
        once the export is complete: a failed one leaves it as it was.
        Returns how many bytes were written.
        """
        params = _filters(sandbox, run, model, conversation, status, since, until)
        with open_sink(destination) as write:
            return self._c.download(_export_request(params), write)

    def iter_export(
        self,
        *,
        sandbox: str | None = None,
        run: str | None = None,
        model: str | None = None,
        conversation: str | None = None,
        status: str | int | None = None,
        since: Time = None,
        until: Time = None,
    ) -> Generator[LLMExchangeDetail, None, None]:
        """Yield the exchanges the filters select, with their parts, as the daemon streams them."""
        req = _export_request(_filters(sandbox, run, model, conversation, status, since, until))
        with self._c.open(req) as resp, translate_errors(self._c.config.url(req)):
            for line in resp.iter_lines():
                if (x := _export_line(line)) is not None:
                    yield x

    def follow(
        self,
        *,
        sandbox: str | None = None,
        run: str | None = None,
        model: str | None = None,
        conversation: str | None = None,
        status: str | int | None = None,
        since: Time = None,
        until: Time = None,
        after: str | None = None,
        last: int = 0,
    ) -> Generator[LLMExchangeEvent, None, None]:
        """Yield each exchange the filters select as it ends, in the order they end, without end.

        Each comes with the cursor that resumes after it: give the last one seen
        as ``after`` to a new follow (after a broken connection) to miss nothing
        and get nothing twice; a list's ``follow_cursor`` follows from just
        before that list. Without ``after``, the follow begins with the
        ``last`` exchanges that ended before it. Close the iterator to stop.

        Raises:
            BadRequestError: A filter is not one, or ``status`` is ``in_progress``.
            StreamError: The stream broke.

        """
        params = _filters(sandbox, run, model, conversation, status, since, until)
        return self._c.iter_stream(_follow_request(params, after, last), LLMFollowParser())


class AsyncLLMService:
    """The async twin of :class:`LLMService`: ``AsyncClient.llm``."""

    def __init__(self, client: AsyncAPIClient) -> None:
        self._c = client

    async def list(
        self,
        *,
        sandbox: str | None = None,
        run: str | None = None,
        model: str | None = None,
        conversation: str | None = None,
        status: str | int | None = None,
        since: Time = None,
        until: Time = None,
        limit: int | None = None,
        cursor: str | None = None,
        order: Order | None = None,
    ) -> LLMExchangeList:
        """Return a page of exchanges; see :meth:`LLMService.list`."""
        params = _filters(sandbox, run, model, conversation, status, since, until)
        return await self._c.run(_list(paged(params, limit, cursor, order)))

    async def list_all(
        self,
        *,
        sandbox: str | None = None,
        run: str | None = None,
        model: str | None = None,
        conversation: str | None = None,
        status: str | int | None = None,
        since: Time = None,
        until: Time = None,
        page_size: int = 500,
        order: Order | None = None,
    ) -> builtins.list[LLMExchange]:
        """Return every exchange the filters select; see :meth:`LLMService.list_all`."""
        params = _filters(sandbox, run, model, conversation, status, since, until)
        return await self._c.run(every_page(_list, paged(params, page_size, None, order)))

    async def get(self, exchange_id: str) -> LLMExchangeDetail:
        """Return an exchange with its four parts."""
        return await self._c.run(_get(exchange_id))

    async def raw(self, exchange_id: str, part: LLMPart | str) -> bytes:
        """Return one part of an exchange exactly as it passed."""
        return await self._c.run(_raw(exchange_id, part))

    async def conversations(self, sandbox_id: str) -> builtins.list[LLMConversation]:
        """Return a sandbox's exchanges grouped into conversations."""
        return await self._c.run(_conversations(sandbox_id))

    async def export(
        self,
        destination: Destination,
        *,
        sandbox: str | None = None,
        run: str | None = None,
        model: str | None = None,
        conversation: str | None = None,
        status: str | int | None = None,
        since: Time = None,
        until: Time = None,
    ) -> int:
        """Write exchanges as JSON Lines; see :meth:`LLMService.export`."""
        params = _filters(sandbox, run, model, conversation, status, since, until)
        with open_sink(destination) as write:
            return await self._c.download(_export_request(params), write)

    async def iter_export(
        self,
        *,
        sandbox: str | None = None,
        run: str | None = None,
        model: str | None = None,
        conversation: str | None = None,
        status: str | int | None = None,
        since: Time = None,
        until: Time = None,
    ) -> AsyncGenerator[LLMExchangeDetail, None]:
        """Yield exchanges with their parts as streamed; see :meth:`LLMService.iter_export`."""
        req = _export_request(_filters(sandbox, run, model, conversation, status, since, until))
        async with self._c.open(req) as resp:
            with translate_errors(self._c.config.url(req)):
                async for line in resp.aiter_lines():
                    if (x := _export_line(line)) is not None:
                        yield x

    def follow(
        self,
        *,
        sandbox: str | None = None,
        run: str | None = None,
        model: str | None = None,
        conversation: str | None = None,
        status: str | int | None = None,
        since: Time = None,
        until: Time = None,
        after: str | None = None,
        last: int = 0,
    ) -> AsyncGenerator[LLMExchangeEvent, None]:
        """Yield each exchange as it ends; see :meth:`LLMService.follow`."""
        params = _filters(sandbox, run, model, conversation, status, since, until)
        return self._c.iter_stream(_follow_request(params, after, last), LLMFollowParser())


def _key_body(
    name: str | None,
    sandbox: str | None,
    run: str | None,
    budget_tokens: int | None,
    requests_per_minute: int | None,
    tokens_per_minute: int | None,
    expires_in: float | timedelta | None,
) -> dict[str, Any]:
    if isinstance(expires_in, timedelta):
        expires_in = expires_in.total_seconds()
    if expires_in is not None and expires_in != int(expires_in):
        raise ValueError(f"expires_in {expires_in}: want whole seconds")
    body: dict[str, Any] = {
        "name": name,
        "sandbox": sandbox,
        "run": run,
        "budget_tokens": budget_tokens,
        "requests_per_minute": requests_per_minute,
        "tokens_per_minute": tokens_per_minute,
        "expires_in": None if expires_in is None else int(expires_in),
    }
    return {k: v for k, v in body.items() if v is not None}


def _create_key(body: dict[str, Any]) -> Op[LLMKey]:
    return call(Request("POST", "/llm/keys", json=body), parse_model(LLMKey))


def _list_keys() -> Op[list[LLMKey]]:
    return call(Request("GET", "/llm/keys"), parse_items(LLMKey))


def _list_keys_page(limit: int | None, cursor: str | None, order: Order | None) -> Op[LLMKeyList]:
    params = paged({}, limit, cursor, order)
    return call(Request("GET", "/llm/keys", params=params), parse_model(LLMKeyList))


def _revoke_key(key_id: str) -> Op[None]:
    return call(Request("DELETE", f"/llm/keys/{segment(key_id, 'key id')}"), parse_none)


class LLMKeyService:
    """Per-run keys of the LLM proxy; get it as :attr:`agent2env.Client.llm_keys`."""

    def __init__(self, client: SyncAPIClient) -> None:
        self._c = client

    def create(
        self,
        *,
        name: str | None = None,
        sandbox: str | None = None,
        run: str | None = None,
        budget_tokens: int | None = None,
        requests_per_minute: int | None = None,
        tokens_per_minute: int | None = None,
        expires_in: float | timedelta | None = None,
    ) -> LLMKey:
        """Make a key; its secret, ``key``, is in this answer only.

        Give the secret to the caller as its ``OPENAI_API_KEY`` (or
        ``ANTHROPIC_API_KEY``, ``GEMINI_API_KEY``) with the base URL
        ``<daemon>/llm``.

        Args:
            name: A name to know the key by.
            sandbox: The sandbox the key's calls are attributed to.
            run: The run the key's calls are attributed to (and counted against).
            budget_tokens: Tokens (input + output) the key may use in all.
            requests_per_minute: Calls a minute the key may make.
            tokens_per_minute: Tokens a minute the key may use.
            expires_in: The key's lifetime, whole seconds (default the daemon's, an hour;
                at most 30 days).

        Raises:
            BadRequestError: A limit is negative, or the lifetime too long.

        """
        body = _key_body(
            name, sandbox, run, budget_tokens, requests_per_minute, tokens_per_minute, expires_in
        )
        return self._c.run(_create_key(body))

    def list(self) -> list[LLMKey]:
        """Return the keys, newest first, without their secrets."""
        return self._c.run(_list_keys())

    def list_page(
        self, *, limit: int | None = None, cursor: str | None = None, order: Order | None = None
    ) -> LLMKeyList:
        """Return a page of the keys, without their secrets.

        Args:
            limit: The page's size (1 to 1000); without it, every key.
            cursor: The ``next_cursor`` of the page before.
            order: ``"asc"`` lists oldest first (the next pages newer ones),
                ``"desc"`` newest first, the default.

        Raises:
            BadRequestError: ``limit`` is not from 1 to 1000, ``cursor`` not
                one the daemon gave, or ``order`` neither ``"asc"`` nor ``"desc"``.

        """
        return self._c.run(_list_keys_page(limit, cursor, order))

    def revoke(self, key_id: str) -> None:
        """Revoke a key: calls with it are refused from now on; an unknown one is NotFoundError."""
        self._c.run(_revoke_key(key_id))


class AsyncLLMKeyService:
    """The async twin of :class:`LLMKeyService`: ``AsyncClient.llm_keys``."""

    def __init__(self, client: AsyncAPIClient) -> None:
        self._c = client

    async def create(
        self,
        *,
        name: str | None = None,
        sandbox: str | None = None,
        run: str | None = None,
        budget_tokens: int | None = None,
        requests_per_minute: int | None = None,
        tokens_per_minute: int | None = None,
        expires_in: float | timedelta | None = None,
    ) -> LLMKey:
        """Make a key; see :meth:`LLMKeyService.create`."""
        body = _key_body(
            name, sandbox, run, budget_tokens, requests_per_minute, tokens_per_minute, expires_in
        )
        return await self._c.run(_create_key(body))

    async def list(self) -> list[LLMKey]:
        """Return the keys, newest first, without their secrets."""
        return await self._c.run(_list_keys())

    async def list_page(
        self, *, limit: int | None = None, cursor: str | None = None, order: Order | None = None
    ) -> LLMKeyList:
        """Return a page of the keys; see :meth:`LLMKeyService.list_page`."""
        return await self._c.run(_list_keys_page(limit, cursor, order))

    async def revoke(self, key_id: str) -> None:
        """Revoke a key."""
        await self._c.run(_revoke_key(key_id))
