"""agent2env: the Python SDK of the agent2env sandbox daemon.

Sync and async clients over the daemon's REST API (wire-compatible with
LiteBoxd v1), with typed pydantic models and an exception per error class::

    from agent2env import Client

    with Client("http://localhost:8080/api/v1") as client:
        sandbox = client.sandbox.create_from_image("agent2env/python")
        print(client.sandbox.execute(sandbox.id, ["python3", "-c", "print(6 * 7)"]).stdout)
        client.sandbox.delete(sandbox.id)
"""

from . import exceptions, models
from ._version import __version__
from .client import AsyncClient, Client
from .exceptions import (
    Agent2EnvError,
    APIError,
    BadRequestError,
    ConflictError,
    ConnectionError,
    ForbiddenError,
    InternalServerError,
    LiteBoxdError,
    NotFoundError,
    PayloadTooLargeError,
    PrepullFailedError,
    ResourceLimitError,
    SandboxFailedError,
    ServiceUnavailableError,
    StreamError,
    TimeoutError,
    UnauthorizedError,
)

__all__ = [
    "APIError",
    "Agent2EnvError",
    "AsyncClient",
    "BadRequestError",
    "Client",
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
    "__version__",
    "exceptions",
    "models",
]
