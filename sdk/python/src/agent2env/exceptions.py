"""The exceptions the SDK raises (seed 003 §7, plus the statuses agent2env adds).

Every exception derives from :class:`Agent2EnvError` (also importable under
LiteBoxd's name, :data:`LiteBoxdError`). An error response of the daemon is an
:class:`APIError`, or the subclass of its status, carrying the HTTP status, the
server's message and its machine-readable ``code`` (such as
``SANDBOX_NOT_FOUND``). Failures to reach the daemon are :class:`ConnectionError`
and :class:`TimeoutError`, which also derive from the built-in exceptions of
those names.

The session API (:mod:`agent2env.sessions`, seed 000) adds
:class:`SandboxCreationError` (of which :class:`ResourceLimitError`, with the
daemon's usage and suggestion, is one case) and the failures of the code run,
:class:`CompilationError`, :class:`RuntimeExecutionError` and
:class:`SystemExecutionError`, all three a :class:`CodeExecutionError`.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Mapping
from typing import Any

from .models.session import Usage

__all__ = [
    "APIError",
    "Agent2EnvError",
    "BadRequestError",
    "CodeExecutionError",
    "CompilationError",
    "ConflictError",
    "ConnectionError",
    "ForbiddenError",
    "InsufficientCapacityError",
    "InternalServerError",
    "LiteBoxdError",
    "NotFoundError",
    "PayloadTooLargeError",
    "PrepullFailedError",
    "ResourceLimitError",
    "RuntimeExecutionError",
    "SandboxCreationError",
    "SandboxFailedError",
    "ServiceUnavailableError",
    "StreamError",
    "SystemExecutionError",
    "TimeoutError",
    "UnauthorizedError",
    "error_for_code",
    "error_for_status",
]


class Agent2EnvError(Exception):
    """The base of every exception of the SDK."""


LiteBoxdError = Agent2EnvError
"""LiteBoxd's name for :class:`Agent2EnvError`, for code written against seed 003."""


class SandboxCreationError(Agent2EnvError):
    """A sandbox (a session's) could not be made; nothing was left behind.

    The session API raises it when the daemon fails to make a new session's
    sandbox; :class:`ResourceLimitError` is the case of a limit reached.

    Attributes:
        session_id: The session whose sandbox failed, when known.

    """

    def __init__(self, message: str, *, session_id: str | None = None) -> None:
        self.session_id = session_id
        super().__init__(message)


class APIError(Agent2EnvError):
    """An error response of the daemon.

    Attributes:
        status_code: The HTTP status; for an error reported inside an event
            stream, the status its ``code`` stands for (0 when unknown).
        message: The server's message.
        code: The server's machine-readable code, such as ``SANDBOX_NOT_FOUND``;
            ``None`` when the body was not the daemon's error body.

    """

    def __init__(self, status_code: int, message: str, *, code: str | None = None) -> None:
        self.status_code = status_code
        self.message = message
        self.code = code
        super().__init__(f"[{status_code}] {message}" + (f" ({code})" if code else ""))


class BadRequestError(APIError):
    """The request was invalid (400)."""

    def __init__(self, message: str = "Invalid request", *, code: str | None = None) -> None:
        super().__init__(400, message, code=code)


class UnauthorizedError(APIError):
    """No API key was sent, or a wrong one (401)."""

    def __init__(self, message: str = "Unauthorized", *, code: str | None = None) -> None:
        super().__init__(401, message, code=code)


class ForbiddenError(APIError):
    """The API key may not do this (403)."""

    def __init__(self, message: str = "Forbidden", *, code: str | None = None) -> None:
        super().__init__(403, message, code=code)


class NotFoundError(APIError):
    """What the request names does not exist (404)."""

    def __init__(self, message: str = "Resource not found", *, code: str | None = None) -> None:
        super().__init__(404, message, code=code)


class ConflictError(APIError):
    """It already exists, or its state forbids the request (409).

    A sandbox that is not running answers commands with this error and the
    code ``SANDBOX_NOT_READY``.
    """

    def __init__(
        self, message: str = "Resource already exists", *, code: str | None = None
    ) -> None:
        super().__init__(409, message, code=code)


class PayloadTooLargeError(APIError):
    """The request body is over its limit (413)."""

    def __init__(self, message: str = "Payload too large", *, code: str | None = None) -> None:
        super().__init__(413, message, code=code)


class ResourceLimitError(APIError, SandboxCreationError):
    """A limit is reached: the maximum number of sandboxes (429), or the host's capacity (507).

    Nothing was made. The daemon says what is in use and what to do.

    Attributes:
        usage: What exists and what the daemon allows (sandboxes, sessions,
            CPU and memory committed against capacity), when the daemon said.
        suggestion: What to do about it, such as stopping idle sessions.

    """

    def __init__(
        self,
        message: str = "Resource limit reached",
        *,
        code: str | None = None,
        usage: Usage | None = None,
        suggestion: str | None = None,
        status_code: int = 429,
    ) -> None:
        self.usage = usage
        self.suggestion = suggestion
        super().__init__(status_code, message, code=code)

    def __str__(self) -> str:
        text = super().__str__()
        return f"{text}; {self.suggestion}" if self.suggestion else text


class InsufficientCapacityError(ResourceLimitError):
    """The host's CPU or memory is committed (507 ``INSUFFICIENT_CAPACITY``); nothing was made."""

    def __init__(
        self,
        message: str = "Insufficient capacity",
        *,
        code: str | None = None,
        usage: Usage | None = None,
        suggestion: str | None = None,
    ) -> None:
        super().__init__(message, code=code, usage=usage, suggestion=suggestion, status_code=507)


class InternalServerError(APIError):
    """The daemon failed (500)."""

    def __init__(self, message: str = "Internal server error", *, code: str | None = None) -> None:
        super().__init__(500, message, code=code)


class ServiceUnavailableError(APIError):
    """The daemon cannot serve now or timed out (502, 503, 504); retrying later may succeed.

    Attributes:
        retry_after: The seconds the daemon's ``Retry-After`` header asked to wait, if any.

    """

    retry_after: float | None = None

    def __init__(
        self,
        message: str = "Service unavailable",
        *,
        code: str | None = None,
        status_code: int = 503,
    ) -> None:
        super().__init__(status_code, message, code=code)


class TimeoutError(Agent2EnvError, builtins.TimeoutError):
    """An operation did not finish in time: a wait, or a request to the daemon."""


class ConnectionError(Agent2EnvError, builtins.ConnectionError):
    """The daemon could not be reached, or the connection broke.

    The message names the URL; check that the daemon runs there (``make run``
    or ``agent2env serve``) and retry. Idempotent requests have been retried
    already (see the client's ``max_retries``).

    Attributes:
        suggestion: What to do about it.

    """

    suggestion = (
        "check that the daemon runs at that URL (agent2env serve, or make run) "
        "and is reachable from here, then retry"
    )


class StreamError(Agent2EnvError):
    """An event stream of the daemon ended early or could not be read."""


class SandboxFailedError(Agent2EnvError):
    """A sandbox reached a status it will not leave for running on its own.

    Attributes:
        sandbox_id: The sandbox.
        status: Its status (``failed``, ``succeeded``, ``terminating``, or
            ``paused`` until it is resumed), if known.
        reason: The server's explanation, if any.

    """

    def __init__(
        self,
        sandbox_id: str,
        message: str = "Sandbox failed to start",
        *,
        status: str | None = None,
        reason: str | None = None,
    ) -> None:
        self.sandbox_id = sandbox_id
        self.status = status
        self.reason = reason
        super().__init__(f"Sandbox {sandbox_id}: {message}")


class PrepullFailedError(Agent2EnvError):
    """A prepull task failed.

    Attributes:
        task_id: The task.
        error: The task's error, such as why the image could not be pulled.

    """

    def __init__(self, task_id: str, error: str) -> None:
        self.task_id = task_id
        self.error = error
        super().__init__(f"Prepull task {task_id} failed: {error}")


class CodeExecutionError(Agent2EnvError):
    """Code run by the session API failed: it did not parse, it raised, or the system stopped it.

    Raised by :meth:`agent2env.sessions.AsyncSessionManager.execute_code` (and
    its sync twin), one subclass per kind.

    Attributes:
        kind: ``syntax``, ``runtime`` or ``system``.
        name: The error's name, such as ``ZeroDivisionError``; for kind
            ``system`` one of ``TimeoutError``, ``KernelDied``,
            ``OutOfMemory``, ``SandboxGone`` (for a command: its exit status).
        value: The error's message.
        traceback: The traceback, as the interpreter printed it.
        session_id: The session the code ran in; it is still there.
        result: The whole result, output before the error included.

    """

    kind = "runtime"

    def __init__(
        self,
        name: str,
        value: str,
        *,
        traceback: str = "",
        session_id: str | None = None,
        result: Any = None,
    ) -> None:
        self.name = name
        self.value = value
        self.traceback = traceback
        self.session_id = session_id
        self.result = result
        where = f" (session {session_id})" if session_id else ""
        super().__init__(f"{name}: {value}{where}" if value else f"{name}{where}")


class CompilationError(CodeExecutionError):
    """The code did not parse or compile (kind ``syntax``), such as a SyntaxError."""

    kind = "syntax"


class RuntimeExecutionError(CodeExecutionError):
    """The code raised or exited non-zero while running (kind ``runtime``)."""

    kind = "runtime"


class SystemExecutionError(CodeExecutionError):
    """The system stopped the code (kind ``system``): a timeout, out of memory, a lost interpreter.

    The session stays; if the interpreter was restarted, its state is gone
    (``result.state_lost``).
    """

    kind = "system"


def execution_error(
    kind: str,
    name: str,
    value: str,
    *,
    traceback: str = "",
    session_id: str | None = None,
    result: Any = None,
) -> CodeExecutionError:
    """Return the exception of a failed execution's kind (an unknown kind is a runtime error)."""
    cls = {"syntax": CompilationError, "system": SystemExecutionError}.get(
        kind, RuntimeExecutionError
    )
    return cls(name, value, traceback=traceback, session_id=session_id, result=result)


# Each takes (message, *, code).
_BY_STATUS: dict[int, Callable[..., APIError]] = {
    400: BadRequestError,
    401: UnauthorizedError,
    403: ForbiddenError,
    404: NotFoundError,
    409: ConflictError,
    413: PayloadTooLargeError,
    500: InternalServerError,
}

# The status each error code of the daemon stands for (api/openapi.yaml,
# ErrorCode), for errors that arrive inside a 200 event stream.
_CODE_STATUS: dict[str, int] = {
    "INVALID_REQUEST": 400,
    "INVALID_YAML": 400,
    "INVALID_LANGUAGE": 400,
    "LANGUAGE_NOT_FOUND": 400,
    "UNAUTHORIZED": 401,
    "FORBIDDEN": 403,
    "NOT_FOUND": 404,
    "SANDBOX_NOT_FOUND": 404,
    "IMAGE_NOT_FOUND": 404,
    "FILE_NOT_FOUND": 404,
    "TEMPLATE_NOT_FOUND": 404,
    "VERSION_NOT_FOUND": 404,
    "PREPULL_NOT_FOUND": 404,
    "CONTEXT_NOT_FOUND": 404,
    "SESSION_NOT_FOUND": 404,
    "ALREADY_EXISTS": 409,
    "CONFLICT": 409,
    "SANDBOX_NOT_READY": 409,
    "TEMPLATE_EXISTS": 409,
    "PREPULL_IN_PROGRESS": 409,
    "PAYLOAD_TOO_LARGE": 413,
    "UNSUPPORTED_MEDIA_TYPE": 415,
    "MISDIRECTED_REQUEST": 421,
    "RESOURCE_LIMIT": 429,
    "INTERNAL": 500,
    "NOT_IMPLEMENTED": 501,
    "UNAVAILABLE": 503,
    "TIMEOUT": 504,
    "NO_SPACE": 507,
    "INSUFFICIENT_CAPACITY": 507,
}


def error_for_status(
    status_code: int,
    message: str,
    code: str | None = None,
    *,
    details: Mapping[str, Any] | None = None,
) -> APIError:
    """Return the exception for an error response: the class of its status, else APIError.

    ``details`` are the error body's fields beside ``error`` and ``code``,
    such as the ``usage`` and ``suggestion`` of a resource error.
    """
    if status_code in (502, 503, 504):
        return ServiceUnavailableError(message, code=code, status_code=status_code)
    if status_code == 429 or code == "INSUFFICIENT_CAPACITY":
        return _resource_error(status_code, message, code, details or {})
    cls = _BY_STATUS.get(status_code)
    if cls is None:
        return APIError(status_code, message, code=code)
    return cls(message, code=code)


def _resource_error(
    status_code: int, message: str, code: str | None, details: Mapping[str, Any]
) -> ResourceLimitError:
    raw = details.get("usage")
    usage = Usage.model_validate(raw) if isinstance(raw, dict) else None
    suggestion = details.get("suggestion")
    suggestion = suggestion if isinstance(suggestion, str) and suggestion else None
    if status_code == 507:
        return InsufficientCapacityError(message, code=code, usage=usage, suggestion=suggestion)
    return ResourceLimitError(
        message, code=code, usage=usage, suggestion=suggestion, status_code=status_code
    )


def error_for_code(
    code: str | None, message: str, *, details: Mapping[str, Any] | None = None
) -> APIError:
    """Return the exception for an error reported inside an event stream, by its code."""
    return error_for_status(_CODE_STATUS.get(code or "", 0), message, code, details=details)
