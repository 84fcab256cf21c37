"""The contexts service: code-interpreter contexts (seed 001, agent2env addition).

A context is a live Python, JavaScript or bash interpreter in a sandbox whose
variables and imports persist between executions. Executions return
:class:`ExecuteResponse` objects with the output, the rich results (text,
HTML, PNG figures, JSON) and, when the code failed, the error with its kind.
"""

from __future__ import annotations

import math
from collections.abc import AsyncGenerator, Callable, Generator, Mapping
from typing import Any

from .._async_base import AsyncAPIClient
from .._base import (
    CREATE_MARGIN,
    TIMEOUT_MARGIN,
    Op,
    Order,
    Request,
    SyncAPIClient,
    call,
    error_from_event,
    paged,
    parse_items,
    parse_model,
    segment,
    stream_ended,
)
from .._sse import SSEEvent
from ..models.context import (
    Context,
    ContextList,
    DeleteContextResult,
    ExecuteResponse,
    ExecutionError,
    ExecutionEvent,
    ExecutionResult,
)

__all__ = ["AsyncContextService", "ContextService", "ExecutionStreamParser", "StreamCallbacks"]


def _path(context_id: str, suffix: str = "") -> str:
    return f"/contexts/{segment(context_id, 'context id')}{suffix}"


def _create(
    language: str,
    session_name: str | None,
    working_dir: str | None,
    sandbox_id: str | None,
    template: str | None,
    env: Mapping[str, str] | None,
) -> Op[Context]:
    body: dict[str, Any] = {"type": "jupyter", "language": language}
    for key, value in (
        ("session_name", session_name),
        ("working_dir", working_dir),
        ("sandbox_id", sandbox_id),
        ("template", template),
        ("env", env),
    ):
        if value is not None:
            body[key] = value
    # The daemon answers once the interpreter runs, in a sandbox it may make first.
    req = Request("POST", "/contexts", json=body, min_read_timeout=TIMEOUT_MARGIN + CREATE_MARGIN)
    return call(req, parse_model(Context))


def _get(context_id: str) -> Op[Context]:
    return call(Request("GET", _path(context_id)), parse_model(Context))


def _list_request(
    session_name: str | None,
    sandbox_id: str | None,
    limit: int | None,
    cursor: str | None,
    order: Order | None,
) -> Request:
    params: dict[str, str | int | list[str]] = {}
    if session_name is not None:
        params["session_name"] = session_name
    if sandbox_id is not None:
        params["sandbox_id"] = sandbox_id
    return Request("GET", "/contexts", params=paged(params, limit, cursor, order))


def _list(
    session_name: str | None, sandbox_id: str | None, order: Order | None
) -> Op[list[Context]]:
    # "contexts" is seed 001's name of the same list.
    request = _list_request(session_name, sandbox_id, None, None, order)
    return call(request, parse_items(Context, "contexts"))


def _list_page(
    session_name: str | None,
    sandbox_id: str | None,
    limit: int | None,
    cursor: str | None,
    order: Order | None,
) -> Op[ContextList]:
    request = _list_request(session_name, sandbox_id, limit, cursor, order)
    return call(request, parse_model(ContextList))


def _delete(context_id: str) -> Op[DeleteContextResult]:
    return call(Request("DELETE", _path(context_id)), parse_model(DeleteContextResult))


def _execute_request(
    context_id: str,
    code: str,
    timeout: float | None,
    env: Mapping[str, str] | None,
    *,
    stream: bool = False,
) -> Request:
    if not code:
        raise ValueError("code is empty")
    body: dict[str, Any] = {"code": code}
    if timeout is not None:
        body["timeout"] = timeout
    if env:
        body["env"] = dict(env)
    read = math.inf if stream else (timeout or 30) + TIMEOUT_MARGIN
    suffix = "/execute/stream" if stream else "/execute"
    return Request("POST", _path(context_id, suffix), json=body, min_read_timeout=read)


class ExecutionStreamParser:
    """Turns the events of a streamed execution into :class:`ExecutionEvent` objects.

    The final ``complete`` event's response gets the streamed output, results
    and error filled in, so that it equals what a plain execute returns.
    """

    def __init__(self) -> None:
        self.done = False
        self._stdout: list[str] = []
        self._stderr: list[str] = []
        self._results: list[ExecutionResult] = []
        self._error: ExecutionError | None = None

    def feed(self, event: SSEEvent) -> ExecutionEvent | None:
        """Take one event; an ``error`` event with the daemon's error body raises it."""
        name = event.event
        if name in ("stdout", "stderr"):
            text = str(event.json().get("text", ""))
            if name == "stdout":
                self._stdout.append(text)
                return ExecutionEvent(type="stdout", text=text)
            self._stderr.append(text)
            return ExecutionEvent(type="stderr", text=text)
        if name == "result":
            result = ExecutionResult.model_validate(event.json())
            self._results.append(result)
            return ExecutionEvent(type="result", result=result)
        if name == "error":
            body = event.json()
            if "code" in body:  # the request failed, not the code
                raise error_from_event(event)
            self._error = ExecutionError.model_validate(body)
            return ExecutionEvent(type="error", error=self._error)
        if name == "complete":
            self.done = True
            response = ExecuteResponse.model_validate(event.json())
            # The output was streamed, not repeated in the complete event.
            output = response.output
            output.stdout = output.stdout or "".join(self._stdout)
            output.stderr = output.stderr or "".join(self._stderr)
            response.results = response.results or self._results
            response.error = response.error or self._error
            return ExecutionEvent(type="complete", response=response)
        return None  # an event of a newer daemon

    def finish(self) -> None:
        """Raise: the stream ended without a ``complete`` event."""
        raise stream_ended("execution")


class StreamCallbacks:
    """Hands the events of a streamed execution to callbacks and keeps the final response."""

    def __init__(
        self,
        on_stdout: Callable[[str], object] | None,
        on_stderr: Callable[[str], object] | None,
        on_result: Callable[[ExecutionResult], object] | None,
        on_error: Callable[[ExecutionError], object] | None,
    ) -> None:
        self._on_stdout = on_stdout
        self._on_stderr = on_stderr
        self._on_result = on_result
        self._on_error = on_error
        self.response: ExecuteResponse | None = None

    def __call__(self, event: ExecutionEvent) -> None:
        """Hand one event to its callback."""
        if event.type == "stdout" and self._on_stdout and event.text is not None:
            self._on_stdout(event.text)
        elif event.type == "stderr" and self._on_stderr and event.text is not None:
            self._on_stderr(event.text)
        elif event.type == "result" and self._on_result and event.result is not None:
            self._on_result(event.result)
        elif event.type == "error" and self._on_error and event.error is not None:
            self._on_error(event.error)
        elif event.type == "complete":
            self.response = event.response

    def result(self) -> ExecuteResponse:
        """Return the final response (the stream's parser guarantees there is one)."""
        assert self.response is not None
        return self.response


OnText = Callable[[str], object] | None
OnResult = Callable[[ExecutionResult], object] | None
OnError = Callable[[ExecutionError], object] | None


class ContextService:
    """Code-interpreter contexts; get it as :attr:`agent2env.Client.contexts`."""

    def __init__(self, client: SyncAPIClient) -> None:
        self._c = client

    def create(
        self,
        language: str = "python",
        *,
        session_name: str | None = None,
        working_dir: str | None = None,
        sandbox_id: str | None = None,
        template: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> Context:
        """Start an interpreter and return its context once it is ready.

        Args:
            language: ``python``, ``javascript`` or ``bash``, or an alias (``py``,
                ``js``, ``node``, ``sh``).
            session_name: Contexts of one session share a sandbox (its files).
            working_dir: The interpreter's directory, default ``/workspace``.
            sandbox_id: Put the context in this existing, running sandbox.
            template: The template of the sandbox made for the context, when one is made.
            env: Environment variables of the interpreter.

        Raises:
            BadRequestError: An unknown language (``INVALID_LANGUAGE``) or one the
                sandbox's image lacks (``LANGUAGE_NOT_FOUND``).
            ResourceLimitError: The daemon's maximum of sandboxes is reached.

        """
        return self._c.run(_create(language, session_name, working_dir, sandbox_id, template, env))

    def get(self, context_id: str) -> Context:
        """Return a context; an unknown id raises NotFoundError (``CONTEXT_NOT_FOUND``)."""
        return self._c.run(_get(context_id))

    def list(
        self,
        *,
        session_name: str | None = None,
        sandbox_id: str | None = None,
        order: Order | None = None,
    ) -> list[Context]:
        """Return the contexts, optionally only a session's or a sandbox's.

        Oldest first, or newest first with ``order="desc"``; another order
        raises BadRequestError.
        """
        return self._c.run(_list(session_name, sandbox_id, order))

    def list_page(
        self,
        *,
        session_name: str | None = None,
        sandbox_id: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        order: Order | None = None,
    ) -> ContextList:
        """Return a page of the contexts (agent2env addition), as :meth:`list` selects them.

        Args:
            session_name: Only the contexts of this session.
            sandbox_id: Only the contexts in this sandbox.
            limit: The page's size (1 to 1000); without it, every context.
            cursor: The ``next_cursor`` of the page before.
            order: ``"desc"`` lists newest first (the next pages older ones),
                ``"asc"`` oldest first, the default.

        Raises:
            BadRequestError: ``limit`` is not from 1 to 1000, ``cursor`` not
                one the daemon gave, or ``order`` neither ``"asc"`` nor ``"desc"``.

        """
        return self._c.run(_list_page(session_name, sandbox_id, limit, cursor, order))

    def delete(self, context_id: str) -> DeleteContextResult:
        """Stop a context's interpreter; a sandbox made for it goes with its last context."""
        return self._c.run(_delete(context_id))

    def execute(
        self,
        context_id: str,
        code: str,
        *,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
    ) -> ExecuteResponse:
        """Run code in a context and return the result once it has finished.

        Code that fails (raises, does not parse, times out) is a result with
        ``success`` false and ``error`` set, not an exception; an exception
        means the execution could not run, such as NotFoundError for a
        context that no longer exists.

        Args:
            context_id: The context.
            code: The code, in the context's language.
            timeout: Seconds until the execution is interrupted (default 30);
                the context stays usable, or ``state_lost`` says it was restarted.
            env: Variables set in the interpreter's environment for this
                execution only (``os.environ``, ``process.env``, bash's
                exported variables; the processes the code starts see them);
                what they replaced is put back after it. Names are letters,
                digits and ``_``, not starting with a digit.

        """
        return self._c.run(
            call(_execute_request(context_id, code, timeout, env), parse_model(ExecuteResponse))
        )

    def iter_execute(
        self,
        context_id: str,
        code: str,
        *,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
    ) -> Generator[ExecutionEvent, None, None]:
        """Run code, yielding :class:`ExecutionEvent` objects as the output comes.

        The last event is ``complete``, with the whole response. The request
        is sent when iteration starts; see :meth:`SandboxService.execute_stream`
        on stopping early.
        """
        return self._c.iter_stream(
            _execute_request(context_id, code, timeout, env, stream=True), ExecutionStreamParser()
        )

    def execute_stream(
        self,
        context_id: str,
        code: str,
        *,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
        on_stdout: OnText = None,
        on_stderr: OnText = None,
        on_result: OnResult = None,
        on_error: OnError = None,
    ) -> ExecuteResponse:
        """Run code, calling the callbacks as output, results and the error come.

        Returns the response :meth:`execute` would return.
        """
        handle = StreamCallbacks(on_stdout, on_stderr, on_result, on_error)
        for event in self.iter_execute(context_id, code, timeout=timeout, env=env):
            handle(event)
        return handle.result()


class AsyncContextService:
    """The async twin of :class:`ContextService`: ``AsyncClient.contexts``."""

    def __init__(self, client: AsyncAPIClient) -> None:
        self._c = client

    async def create(
        self,
        language: str = "python",
        *,
        session_name: str | None = None,
        working_dir: str | None = None,
        sandbox_id: str | None = None,
        template: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> Context:
        """Start an interpreter; see :meth:`ContextService.create`."""
        return await self._c.run(
            _create(language, session_name, working_dir, sandbox_id, template, env)
        )

    async def get(self, context_id: str) -> Context:
        """Return a context."""
        return await self._c.run(_get(context_id))

    async def list(
        self,
        *,
        session_name: str | None = None,
        sandbox_id: str | None = None,
        order: Order | None = None,
    ) -> list[Context]:
        """Return the contexts; see :meth:`ContextService.list`."""
        return await self._c.run(_list(session_name, sandbox_id, order))

    async def list_page(
        self,
        *,
        session_name: str | None = None,
        sandbox_id: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        order: Order | None = None,
    ) -> ContextList:
        """Return a page of the contexts; see :meth:`ContextService.list_page`."""
        return await self._c.run(_list_page(session_name, sandbox_id, limit, cursor, order))

    async def delete(self, context_id: str) -> DeleteContextResult:
        """Stop a context's interpreter."""
        return await self._c.run(_delete(context_id))

    async def execute(
        self,
        context_id: str,
        code: str,
        *,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
    ) -> ExecuteResponse:
        """Run code and return the result; see :meth:`ContextService.execute`."""
        return await self._c.run(
            call(_execute_request(context_id, code, timeout, env), parse_model(ExecuteResponse))
        )

    def iter_execute(
        self,
        context_id: str,
        code: str,
        *,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
    ) -> AsyncGenerator[ExecutionEvent, None]:
        """Run code, yielding events (``async for``); see :meth:`ContextService.iter_execute`."""
        return self._c.iter_stream(
            _execute_request(context_id, code, timeout, env, stream=True), ExecutionStreamParser()
        )

    async def execute_stream(
        self,
        context_id: str,
        code: str,
        *,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
        on_stdout: OnText = None,
        on_stderr: OnText = None,
        on_result: OnResult = None,
        on_error: OnError = None,
    ) -> ExecuteResponse:
        """Run code with callbacks; see :meth:`ContextService.execute_stream`."""
        handle = StreamCallbacks(on_stdout, on_stderr, on_result, on_error)
        async for event in self.iter_execute(context_id, code, timeout=timeout, env=env):
            handle(event)
        return handle.result()
