"""The base HTTP client, and everything the sync and async clients share.

Each API operation is written once, without I/O, as an *op*: a generator
that yields :class:`Request` (and :class:`Sleep`) steps and gets back the
:class:`httpx.Response` of each request, then returns its result. The sync
:class:`SyncAPIClient` here and the async ``AsyncAPIClient`` of
``_async_base`` only drive ops, so that both clients send the same requests
and parse the same answers. Streams are parsed alike by
:class:`StreamParser` objects fed with decoded events.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import random
import secrets
import stat
import time
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, Any, Literal, Protocol, TypeVar, cast
from urllib.parse import quote

import httpx
from pydantic import BaseModel

from ._sse import SSEDecoder, SSEEvent
from ._version import __version__
from .exceptions import (
    Agent2EnvError,
    APIError,
    ConnectionError,
    ServiceUnavailableError,
    StreamError,
    TimeoutError,
    error_for_code,
    error_for_status,
)

__all__ = [
    "API_PREFIX",
    "DEFAULT_BASE_URL",
    "DEFAULT_MAX_RETRIES",
    "DEFAULT_TIMEOUT",
    "ENV_TOKEN",
    "ENV_URL",
    "ClientConfig",
    "Op",
    "Request",
    "Sleep",
    "StreamParser",
    "SyncAPIClient",
]

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)
M = TypeVar("M", bound=BaseModel)

API_PREFIX = "/api/v1"
DEFAULT_BASE_URL = "http://localhost:8080/api/v1"
DEFAULT_TIMEOUT = 30.0
ENV_URL = "AGENT2ENV_URL"
"""The daemon's URL when the client is given none."""
ENV_TOKEN = "AGENT2ENV_TOKEN"
"""The API key when the client is given none."""
ENV_URLS = (ENV_URL, "MSB_SERVER_URL", "SANDBOX_BASE_URL")
"""Where the URL is looked for, in order: ours, seed 000's, seed 001's."""
ENV_TOKENS = (ENV_TOKEN, "MSB_API_KEY")
"""Where the API key is looked for, in order: ours, seed 000's."""

Order = Literal["asc", "desc"]
"""A list's order by creation time: ``"asc"`` oldest first (the default), ``"desc"`` newest."""


def paged(
    params: dict[str, str | int | list[str]],
    limit: int | None,
    cursor: str | None,
    order: Order | None,
) -> dict[str, str | int | list[str]]:
    """Return ``params`` with a list page's ``limit``, ``cursor`` and ``order`` added."""
    if limit is not None:
        params["limit"] = limit
    if cursor:
        params["cursor"] = cursor
    if order:
        params["order"] = order
    return params


class Page(Protocol[T_co]):
    """A list page: its items, and the cursor of the next one (none on the last)."""

    @property
    def items(self) -> Sequence[T_co]:
        """The page's items."""
        ...

    @property
    def next_cursor(self) -> str | None:
        """The next page's cursor."""
        ...


def every_page(
    fetch: Callable[[dict[str, str | int | list[str]]], Op[Page[T]]],
    params: dict[str, str | int | list[str]],
) -> Op[list[T]]:
    """Read every page of a list, each fetched with ``params`` and the cursor before it."""
    out: list[T] = []
    page = dict(params)
    while True:
        resp = yield from fetch(page)
        out.extend(resp.items)
        if not resp.next_cursor:
            return out
        page["cursor"] = resp.next_cursor


DEFAULT_MAX_RETRIES = 2
"""How often an idempotent request (GET, DELETE) is retried after a connection error or a 503.

A request whose connection broke after it was sent is retried only if it
reads (GET); one that could not connect, or was answered 503, also if it
deletes.
"""
RETRY_BACKOFF = 0.5
"""Seconds before the first retry; each next waits twice as long, up to RETRY_BACKOFF_MAX."""
RETRY_BACKOFF_MAX = 8.0
# Methods whose requests may be sent twice: reads (safe), and deletes, whose
# second try finds nothing to delete. A template's PUT is not among them: each
# makes a new version.
_SAFE = frozenset({"GET", "HEAD", "OPTIONS"})
_IDEMPOTENT = _SAFE | {"DELETE"}
# The request never reached the daemon.
_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout)
# The connection broke, perhaps after the daemon acted: retried for reads
# only. A read timeout is not retried at all: the daemon is busy with the
# request, and asking again would double the wait.
_BROKEN = (httpx.NetworkError, httpx.RemoteProtocolError)

log = logging.getLogger("agent2env.http")

# How much longer than an operation's own timeout the client waits for the
# daemon's answer: the daemon reports the timeout, the client should not.
TIMEOUT_MARGIN = 30.0

CREATE_MARGIN = 300.0
"""How much longer a request that may make a sandbox (a context's, a session's) waits for
the daemon's answer: the daemon pulls or builds its image and starts its interpreter first."""

_MAX_ERROR_CHARS = 512


@dataclass(frozen=True)
class Request:
    """One HTTP request of an op, its path below ``/api/v1`` (already escaped).

    ``min_read_timeout`` raises the client's read timeout for a request that
    may take long (a command with a timeout); ``math.inf`` lifts it, for
    streams that may be idle for long.
    """

    method: str
    path: str
    params: Mapping[str, str | int | list[str]] | None = None
    json: Any = None
    data: Mapping[str, str] | None = None
    files: Mapping[str, tuple[str, Any, str]] | None = None
    content: bytes | Iterable[bytes] | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    min_read_timeout: float | None = None
    api: bool = True
    """False for paths outside ``/api/v1``, such as ``/health``."""


@dataclass(frozen=True)
class Sleep:
    """A pause of an op (between polls)."""

    seconds: float


Step = Request | Sleep
Op = Generator[Step, object, T]
"""An operation: yields requests and pauses, gets responses, returns its result."""


def call(req: Request, parse: Callable[[httpx.Response], T]) -> Op[T]:
    """Send one request and parse its (successful) response."""
    resp = yield req
    assert isinstance(resp, httpx.Response)
    return parse(resp)


def sleep(seconds: float) -> Op[None]:
    """Pause an op."""
    yield Sleep(seconds)


def parse_model(model: type[M]) -> Callable[[httpx.Response], M]:
    """Return a parser of a JSON response into ``model``."""

    def parse(resp: httpx.Response) -> M:
        return model.model_validate(_json(resp))

    return parse


def parse_items(model: type[M], *fallbacks: str) -> Callable[[httpx.Response], list[M]]:
    """Return a parser of a ``{"items": [...]}`` list, or of the first non-empty fallback key."""

    def parse(resp: httpx.Response) -> list[M]:
        body = _json(resp)
        items: list[Any] = body.get("items") or next(
            (body[k] for k in fallbacks if body.get(k)), []
        )
        return [model.model_validate(item) for item in items]

    return parse


def parse_none(resp: httpx.Response) -> None:
    """Ignore a response's body."""


def parse_bytes(resp: httpx.Response) -> bytes:
    """Return a response's body."""
    return resp.content


def _json(resp: httpx.Response) -> Any:
    try:
        return resp.json()
    except ValueError as e:
        raise Agent2EnvError(
            f"decode response of {resp.request.method} {resp.request.url}: {e}"
        ) from e


def dump(model: BaseModel) -> Any:
    """Return a model as the JSON the daemon takes: wire names, unset fields left out."""
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


def argv(command: Sequence[str]) -> list[str]:
    """Return the argv ``command`` as a list.

    A string is a TypeError: it is a ``Sequence[str]`` too, which type
    checkers let through, and would run as one argument a character.
    """
    if isinstance(command, str):
        raise TypeError(
            f"command must be a list of arguments, such as ['sh', '-c', {command!r}], not a string"
        )
    return list(command)


def segment(value: str, what: str) -> str:
    """Return ``value`` escaped as one path segment; an empty value is a ValueError."""
    if not value:
        raise ValueError(f"{what} is empty")
    return quote(value, safe="")


def error_from_response(resp: httpx.Response) -> APIError:
    """Build the exception of an error response from the daemon's ``{"error", "code"}`` body."""
    text = resp.text
    try:
        body = resp.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("error"), str) and body["error"]:
        code = body.get("code")
        err = error_for_status(
            resp.status_code, body["error"], code if isinstance(code, str) else None, details=body
        )
    else:
        msg = text.strip() or resp.reason_phrase or f"HTTP {resp.status_code}"
        if len(msg) > _MAX_ERROR_CHARS:
            msg = msg[:_MAX_ERROR_CHARS] + "..."
        err = error_for_status(resp.status_code, msg)
    if isinstance(err, ServiceUnavailableError):
        with contextlib.suppress(ValueError):
            err.retry_after = float(resp.headers.get("Retry-After", ""))
    return err


def error_from_event(event: SSEEvent) -> APIError:
    """Build the exception of an ``error`` event carrying the daemon's error body."""
    body = event.json()
    if not isinstance(body, dict) or not body.get("error"):
        return APIError(0, f"malformed error event: {event.data.strip()}")
    return error_for_code(body.get("code"), str(body["error"]), details=body)


def first_env(names: Iterable[str]) -> str | None:
    """Return the first of the environment variables that is set and not empty."""
    return next((v for v in (os.environ.get(n, "").strip() for n in names) if v), None)


def may_retry(req: Request, attempt: int, max_retries: int) -> bool:
    """Whether a failed request may be sent again: idempotent, a body that can be resent."""
    return (
        attempt < max_retries
        and req.method in _IDEMPOTENT
        and req.files is None
        and (req.content is None or isinstance(req.content, bytes))
    )


def retry_delay(attempt: int, error: BaseException | None = None) -> float:
    """Seconds to wait before retry ``attempt + 1``: the daemon's Retry-After, else back-off."""
    after = getattr(error, "retry_after", None)
    if isinstance(after, float) and 0 <= after <= RETRY_BACKOFF_MAX * 4:
        return after
    delay = min(RETRY_BACKOFF * 2.0**attempt, RETRY_BACKOFF_MAX)
    return delay * random.uniform(0.5, 1.0)  # jitter, so that clients do not retry in step


def retry_reason(
    req: Request, attempt: int, max_retries: int, error: BaseException | None
) -> str | None:
    """Why a request that failed with ``error`` (our exception) is retried; None if it is not."""
    if error is None or not may_retry(req, attempt, max_retries):
        return None
    cause = error.__cause__
    if isinstance(cause, _NOT_SENT) or (isinstance(cause, _BROKEN) and req.method in _SAFE):
        return type(cause).__name__
    if isinstance(error, APIError) and error.status_code == 503:
        return "503 " + error.message
    return None


def log_retry(
    req: Request, url: str, reason: str, attempt: int, max_retries: int, delay: float
) -> None:
    """Log a retry at WARNING."""
    log.warning(
        "retrying %s %s after %s (retry %d of %d in %.2fs)",
        req.method,
        url,
        reason,
        attempt + 1,
        max_retries,
        delay,
    )


def log_response(req: Request, url: str, status: int, start: float) -> None:
    """Log a request's status and time at DEBUG."""
    if log.isEnabledFor(logging.DEBUG):
        log.debug("%s %s -> %d in %.3fs", req.method, url, status, time.monotonic() - start)


@contextlib.contextmanager
def translate_errors(url: str) -> Iterator[None]:
    """Turn httpx's transport errors into the SDK's ConnectionError and TimeoutError."""
    try:
        yield
    except httpx.TimeoutException as e:
        raise TimeoutError(f"request to {url} timed out: {e}") from e
    except httpx.TransportError as e:
        raise unreachable(url, e) from e


def unreachable(url: str, cause: Exception) -> ConnectionError:
    """Return the ConnectionError of a daemon that could not be reached at ``url``."""
    return ConnectionError(
        f"cannot reach the agent2env daemon at {url}: {cause or type(cause).__name__}; "
        "check that it is running there, then retry"
    )


class ClientConfig:
    """The URL, headers and timeouts of a client, and the request building they imply."""

    def __init__(
        self,
        base_url: str | None,
        *,
        auth_token: str | None,
        headers: Mapping[str, str] | None,
    ) -> None:
        url = (base_url or first_env(ENV_URLS) or DEFAULT_BASE_URL).strip().rstrip("/")
        parsed = httpx.URL(url)
        if parsed.scheme not in ("http", "https") or not parsed.host:
            raise ValueError(f"agent2env url {url!r}: want http://host:port or https://host:port")
        # A trailing /api/v1 is accepted and ignored; another path is kept as
        # a prefix, for daemons behind a reverse proxy.
        self.root = url.removesuffix(API_PREFIX).rstrip("/")
        self.headers = {"User-Agent": f"agent2env-python/{__version__}"}
        token = auth_token if auth_token is not None else first_env(ENV_TOKENS)
        if token:
            self.headers["Authorization"] = f"Bearer {token}"
        self.headers.update(headers or {})

    @property
    def base_url(self) -> str:
        """The URL of the API, ``<root>/api/v1``."""
        return self.root + API_PREFIX

    def url(self, req: Request) -> str:
        """Return the absolute URL of a request."""
        return self.root + (API_PREFIX if req.api else "") + req.path

    def kwargs(self, req: Request, timeout: httpx.Timeout) -> dict[str, Any]:
        """Return the arguments of ``httpx.Client.request`` for a request."""
        kw: dict[str, Any] = {
            "method": req.method,
            "url": self.url(req),
            "headers": {**self.headers, **req.headers},
            "timeout": _timeout(timeout, req.min_read_timeout),
        }
        for name in ("params", "json", "data", "files", "content"):
            value = getattr(req, name)
            if value is not None:
                kw[name] = value
        return kw


def _timeout(current: httpx.Timeout, floor: float | None) -> httpx.Timeout:
    if floor is None or current.read is None or current.read >= floor:
        return current
    return httpx.Timeout(
        connect=current.connect,
        read=None if math.isinf(floor) else floor,
        write=current.write,
        pool=current.pool,
    )


class StreamParser(Protocol[T_co]):
    """Turns the events of one stream into results; shared by the sync and async clients."""

    @property
    def done(self) -> bool:
        """Whether the stream's last event has come (the client stops reading)."""
        ...

    def feed(self, event: SSEEvent) -> T_co | None:
        """Take one event; return what it yields, if anything. Error events raise."""
        ...

    def finish(self) -> None:
        """Handle the end of the stream before it was done: raise if that is an error."""
        ...


def chunks(f: IO[bytes], size: int = 1 << 16) -> Iterator[bytes]:
    """Read a file in chunks, so that a body is streamed, never held whole."""
    while chunk := f.read(size):
        yield chunk


@contextlib.contextmanager
def open_source(
    source: bytes | str | os.PathLike[str] | IO[bytes],
) -> Iterator[bytes | Iterator[bytes]]:
    """Open what a streamed upload reads: bytes as they are, a path or file object in chunks."""
    if isinstance(source, bytes):
        yield source
    elif isinstance(source, (str, os.PathLike)):
        with open(source, "rb") as f:
            yield chunks(f)
    else:
        yield chunks(source)


_O_BINARY = getattr(os, "O_BINARY", 0)  # Windows: no newline translation


@contextlib.contextmanager
def open_sink(
    destination: str | os.PathLike[str] | IO[bytes],
) -> Iterator[Callable[[bytes], object]]:
    """Open where a download writes: a path, or a file object.

    A path is written whole or not at all: the download goes to a temporary
    file beside it, renamed over it once complete and removed if it fails,
    so that a failed download (a wrong path, a lost connection) leaves a
    file already there as it was. A file that is replaced keeps its
    permissions; a new one gets the umask's, as ``open`` gives them. What is
    not a regular file, such as ``/dev/null`` or a named pipe, is written as
    it is: it cannot be replaced.
    """
    if not isinstance(destination, (str, os.PathLike)):
        yield destination.write
        return
    target = os.path.realpath(destination)  # a symbolic link's target is written, as open does
    directory, name = os.path.split(target)
    mode = None
    with contextlib.suppress(FileNotFoundError):
        st = os.stat(target)
        if not stat.S_ISREG(st.st_mode):
            with open(target, "wb") as f:
                yield f.write
            return
        mode = stat.S_IMODE(st.st_mode)
    while True:
        temp = os.path.join(directory, f".{name}.{secrets.token_hex(4)}.part")
        try:
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_BINARY, 0o666)
            break
        except FileExistsError:
            continue
        except OSError as e:
            e.filename = os.fspath(destination)  # what the caller named, not the temporary file
            raise
    try:
        with open(fd, "wb") as f:
            if mode is not None:
                os.chmod(temp, mode)
            yield f.write
        os.replace(temp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(temp)
        raise


class SyncAPIClient:
    """Sends requests with an ``httpx.Client`` and drives ops; used by :class:`agent2env.Client`.

    Safe for concurrent use from several threads, as httpx's client is.
    """

    def __init__(
        self,
        config: ClientConfig,
        *,
        timeout: float | httpx.Timeout,
        http_client: httpx.Client | None,
        max_retries: int = DEFAULT_MAX_RETRIES,
    ) -> None:
        self.config = config
        self.max_retries = max_retries
        self._owned = http_client is None
        self._http = http_client if http_client is not None else httpx.Client(timeout=timeout)

    def close(self) -> None:
        """Close the HTTP client, unless it was given by the caller."""
        if self._owned:
            self._http.close()

    def run(self, op: Op[T]) -> T:
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
                    time.sleep(step.seconds)
                else:
                    try:
                        sent = self.send(step)
                    except Agent2EnvError as e:
                        error = e
        finally:
            op.close()

    def send(self, req: Request) -> httpx.Response:
        """Send a request and return its response, read whole; an error status raises.

        An idempotent request is retried, with back-off, after a connection
        error or a 503, at most ``max_retries`` times.
        """
        with self.open(req) as resp:
            resp.read()
            return resp

    @contextlib.contextmanager
    def open(self, req: Request) -> Iterator[httpx.Response]:
        """Send a request and yield its response while its body streams; an error status raises.

        Retries as :meth:`send` does, before the body is yielded.
        """
        url = self.config.url(req)
        with translate_errors(url), contextlib.ExitStack() as stack:
            attempt = 0
            while True:
                start = time.monotonic()
                try:
                    resp = stack.enter_context(self._attempt(req, url, start))
                    break
                except (ConnectionError, TimeoutError, APIError) as e:
                    reason = retry_reason(req, attempt, self.max_retries, e)
                    if reason is None:
                        raise
                    delay = retry_delay(attempt, e)
                    log_retry(req, url, reason, attempt, self.max_retries, delay)
                    time.sleep(delay)
                    attempt += 1
            yield resp

    @contextlib.contextmanager
    def _attempt(self, req: Request, url: str, start: float) -> Iterator[httpx.Response]:
        with (
            translate_errors(url),
            self._http.stream(**self.config.kwargs(req, self._http.timeout)) as resp,
        ):
            log_response(req, url, resp.status_code, start)
            if resp.is_error:
                resp.read()
                raise error_from_response(resp)
            yield resp

    def download(self, req: Request, write: Callable[[bytes], object]) -> int:
        """Stream a response's body to ``write``; return how many bytes it had."""
        n = 0
        with self.open(req) as resp:
            for chunk in resp.iter_bytes():
                write(chunk)
                n += len(chunk)
        return n

    def iter_stream(self, req: Request, parser: StreamParser[T]) -> Generator[T, None, None]:
        """Send a request answered by an event stream; yield what the parser makes of it."""
        with self.open(req) as resp:
            decoder = SSEDecoder()
            with translate_errors(self.config.url(req)):
                for line in resp.iter_lines():
                    event = decoder.feed(line)
                    item = None if event is None else parser.feed(event)
                    if item is not None:
                        yield item
                    if parser.done:
                        return
        parser.finish()


def stream_ended(what: str) -> StreamError:
    """Return the error of a stream that ended before its last event."""
    return StreamError(f"{what} stream ended early (the daemon stopped, or the connection broke)")
