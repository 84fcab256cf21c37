"""agent2env: the Python SDK of the agent2env sandbox daemon.

Sync and async clients over the daemon's REST API (wire-compatible with
LiteBoxd v1), with typed pydantic models and an exception per error class::

    from agent2env import Client

    with Client("http://localhost:8080/api/v1") as client:
        sandbox = client.sandbox.create_from_image("agent2env/python")
        print(client.sandbox.execute(sandbox.id, ["python3", "-c", "print(6 * 7)"]).stdout)
        client.sandbox.delete(sandbox.id)

The high-level sessions API, sessions made and reused for you, is
:mod:`agent2env.sessions` (:class:`AsyncSessionManager`, :class:`SessionManager`).
The SDK logs under the ``agent2env`` logger; it adds no handler of its own.
"""

import logging

from . import exceptions, models, sessions
from ._version import __version__
from .client import AsyncClient, Client
from .exceptions import (
    Agent2EnvError,
    APIError,
    BadRequestError,
    CodeExecutionError,
    CompilationError,
    ConflictError,
    ConnectionError,
    ForbiddenError,
    InsufficientCapacityError,
    InternalServerError,
    LiteBoxdError,
    NotFoundError,
    PayloadTooLargeError,
    PrepullFailedError,
    ResourceLimitError,
    RuntimeExecutionError,
    SandboxCreationError,
    SandboxFailedError,
    ServiceUnavailableError,
    StreamError,
    SystemExecutionError,
    TimeoutError,
    UnauthorizedError,
)
from .sessions import AsyncSessionManager, SessionConfig, SessionManager

logging.getLogger("agent2env").addHandler(logging.NullHandler())

__all__ = [
    "APIError",
    "Agent2EnvError",
    "AsyncClient",
    "AsyncSessionManager",
    "BadRequestError",
    "Client",
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
    "SessionConfig",
    "SessionManager",
    "StreamError",
    "SystemExecutionError",
    "TimeoutError",
    "UnauthorizedError",
    "__version__",
    "exceptions",
    "models",
    "sessions",
]
