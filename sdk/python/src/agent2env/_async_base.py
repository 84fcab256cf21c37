"""The async base HTTP client: drives the ops of ``_base`` with httpx's AsyncClient."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterable
from dataclasses import replace
from typing import TypeVar, cast

import httpx

from ._base import (
    DEFAULT_MAX_RETRIES,
    ClientConfig,
    Op,
    Request,
    Sleep,
    StreamParser,
    error_from_response,
    log_response,
    log_retry,
    retry_delay,
    retry_reason,
    translate_errors,
)
from ._sse import SSEDecoder
from .exceptions import Agent2EnvError, APIError, ConnectionError, TimeoutError

__all__ = ["AsyncAPIClient"]

T = TypeVar("T")


async def _aiter(chunks: Iterable[bytes]) -> AsyncIterator[bytes]:
    for chunk in chunks:
        yield chunk


def _async_body(req: Request) -> Request:
    # httpx's AsyncClient streams only async iterables; a streamed upload is
    # read here in chunks (file reads are short and do not stall the loop).
    if req.content is None or isinstance(req.content, bytes):
        return req
    return replace(req, content=cast(Iterable[bytes], _aiter(req.content)))


class AsyncAPIClient:
    """Sends requests with an ``httpx.AsyncClient`` and drives ops, for :class:`AsyncClient`."""

    def __init__(
        self,
        config: ClientConfig,
        *,
        timeout: float | httpx.Timeout,
        http_client: httpx.AsyncClient | None,
        max_retries: int = DEFAULT_MAX_RETRIES,
    ) -> None:
        self.config = config
        self.max_retries = max_retries
        self._owned = http_client is None
        self._http = http_client if http_client is not None else httpx.AsyncClient(timeout=timeout)

    async def close(self) -> None:
        """Close the HTTP client, unless it was given by the caller."""
        if self._owned:
            await self._http.aclose()

    async def run(self, op: Op[T]) -> T:
        """Drive an op to its result; a failed request raises inside the op, which may catch it."""
        try:
            sent: object = None
            error: Agent2EnvError | None = None
            while True:
                try:
                    step = op.send(sent) if error is None else op.throw(error)
                except StopIteration as stop:
                    return cast(T, stop.value)
                sent, error = None, None
                if isinstance(step, Sleep):
                    await asyncio.sleep(step.seconds)
                else:
                    try:
                        sent = await self.send(step)
                    except Agent2EnvError as e:
                        error = e
        finally:
            op.close()

    async def send(self, req: Request) -> httpx.Response:
        """Send a request and return its response, read whole; an error status raises.

        Retries as :meth:`agent2env._base.SyncAPIClient.send` does.
        """
        async with self.open(req) as resp:
            await resp.aread()
            return resp

    @contextlib.asynccontextmanager
    async def open(self, req: Request) -> AsyncIterator[httpx.Response]:
        """Send a request and yield its response while its body streams; an error status raises."""
        req = _async_body(req)
        url = self.config.url(req)
        with translate_errors(url):
            async with contextlib.AsyncExitStack() as stack:
                attempt = 0
                while True:
                    start = time.monotonic()
                    try:
                        resp = await stack.enter_async_context(self._attempt(req, url, start))
                        break
                    except (ConnectionError, TimeoutError, APIError) as e:
                        reason = retry_reason(req, attempt, self.max_retries, e)
                        if reason is None:
                            raise
                        delay = retry_delay(attempt, e)
                        log_retry(req, url, reason, attempt, self.max_retries, delay)
                        await asyncio.sleep(delay)
                        attempt += 1
                yield resp

    @contextlib.asynccontextmanager
    async def _attempt(self, req: Request, url: str, start: float) -> AsyncIterator[httpx.Response]:
        with translate_errors(url):
            async with self._http.stream(**self.config.kwargs(req, self._http.timeout)) as resp:
                log_response(req, url, resp.status_code, start)
                if resp.is_error:
                    await resp.aread()
                    raise error_from_response(resp)
                yield resp

    async def download(self, req: Request, write: Callable[[bytes], object]) -> int:
        """Stream a response's body to ``write``; return how many bytes it had."""
        n = 0
        async with self.open(req) as resp:
            async for chunk in resp.aiter_bytes():
                write(chunk)
                n += len(chunk)
        return n

    async def iter_stream(self, req: Request, parser: StreamParser[T]) -> AsyncGenerator[T, None]:
        """Send a request answered by an event stream; yield what the parser makes of it."""
        async with self.open(req) as resp:
            decoder = SSEDecoder()
            with translate_errors(self.config.url(req)):
                async for line in resp.aiter_lines():
                    event = decoder.feed(line)
                    item = None if event is None else parser.feed(event)
                    if item is not None:
                        yield item
                    if parser.done:
                        return
        parser.finish()
