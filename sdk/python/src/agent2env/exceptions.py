"""The exceptions the SDK raises (seed 003 §7, plus the statuses agent2env adds).

Every exception derives from :class:`Agent2EnvError` (also importable under
LiteBoxd's name, :data:`LiteBoxdError`). An error response of the daemon is an
:class:`APIError`, or the subclass of its status, carrying the HTTP status, the
server's message and its machine-readable ``code`` (such as
``SANDBOX_NOT_FOUND``). Failures to reach the daemon are :class:`ConnectionError`
and :class:`TimeoutError`, which also derive from the built-in exceptions of
those names.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable

__all__ = [
    "APIError",
    "Agent2EnvError",
    "BadRequestError",
    "ConflictError",
    "ConnectionError",
    "ForbiddenError",
    "InternalServerError",
    "LiteBoxdError",
    "NotFoundError",
    "PayloadTooLargeError",
    "PrepullFailedError",
    "ResourceLimitError",
    "SandboxFailedError",
    "ServiceUnavailableError",
    "StreamError",
    "TimeoutError",
    "UnauthorizedError",
    "error_for_code",
    "error_for_status",
]


class Agent2EnvError(Exception):
    """The base of every exception of the SDK."""


LiteBoxdError = Agent2EnvError
"""LiteBoxd's name for :class:`Agent2EnvError`, for code written against seed 003."""


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


class ResourceLimitError(APIError):
    """A configured limit is reached, such as the maximum number of sandboxes (429)."""

    def __init__(self, message: str = "Resource limit reached", *, code: str | None = None) -> None:
        super().__init__(429, message, code=code)


class InternalServerError(APIError):
    """The daemon failed (500)."""

    def __init__(self, message: str = "Internal server error", *, code: str | None = None) -> None:
        super().__init__(500, message, code=code)


class ServiceUnavailableError(APIError):
    """The daemon cannot serve now or timed out (502, 503, 504); retrying later may succeed."""

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
    or ``agent2env serve``) and retry.
    """


class StreamError(Agent2EnvError):
    """An event stream of the daemon ended early or could not be read."""


class SandboxFailedError(Agent2EnvError):
    """A sandbox reached a status it will not leave for running.

    Attributes:
        sandbox_id: The sandbox.
        status: Its status (``failed``, ``succeeded`` or ``terminating``), if known.
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


# Each takes (message, *, code).
_BY_STATUS: dict[int, Callable[..., APIError]] = {
    400: BadRequestError,
    401: UnauthorizedError,
    403: ForbiddenError,
    404: NotFoundError,
    409: ConflictError,
    413: PayloadTooLargeError,
    429: ResourceLimitError,
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
    "ALREADY_EXISTS": 409,
    "CONFLICT": 409,
    "SANDBOX_NOT_READY": 409,
    "TEMPLATE_EXISTS": 409,
    "PREPULL_IN_PROGRESS": 409,
    "PAYLOAD_TOO_LARGE": 413,
    "RESOURCE_LIMIT": 429,
    "INTERNAL": 500,
    "NOT_IMPLEMENTED": 501,
    "UNAVAILABLE": 503,
    "TIMEOUT": 504,
    "NO_SPACE": 507,
}


def error_for_status(status_code: int, message: str, code: str | None = None) -> APIError:
    """Return the exception for an error response: the class of its status, else APIError."""
    if status_code in (502, 503, 504):
        return ServiceUnavailableError(message, code=code, status_code=status_code)
    cls = _BY_STATUS.get(status_code)
    if cls is None:
        return APIError(status_code, message, code=code)
    return cls(message, code=code)


def error_for_code(code: str | None, message: str) -> APIError:
    """Return the exception for an error reported inside an event stream, by its code."""
    return error_for_status(_CODE_STATUS.get(code or "", 0), message, code)
