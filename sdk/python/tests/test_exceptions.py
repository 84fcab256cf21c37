from __future__ import annotations

import json
from typing import Any

import pytest
from pytest_httpx import HTTPXMock

from agent2env import (
    Agent2EnvError,
    APIError,
    BadRequestError,
    CodeExecutionError,
    CompilationError,
    ConflictError,
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
    SystemExecutionError,
    UnauthorizedError,
)
from agent2env.exceptions import error_for_code, error_for_status, execution_error

from .conftest import sse, usage_json

STATUS_CLASSES = [
    (400, "INVALID_REQUEST", BadRequestError),
    (401, "UNAUTHORIZED", UnauthorizedError),
    (403, "FORBIDDEN", ForbiddenError),
    (404, "SANDBOX_NOT_FOUND", NotFoundError),
    (409, "SANDBOX_NOT_READY", ConflictError),
    (413, "PAYLOAD_TOO_LARGE", PayloadTooLargeError),
    (429, "RESOURCE_LIMIT", ResourceLimitError),
    (500, "INTERNAL", InternalServerError),
    (501, "NOT_IMPLEMENTED", APIError),
    (502, "UNAVAILABLE", ServiceUnavailableError),
    (503, "UNAVAILABLE", ServiceUnavailableError),
    (504, "TIMEOUT", ServiceUnavailableError),
    (507, "NO_SPACE", APIError),
    (507, "INSUFFICIENT_CAPACITY", InsufficientCapacityError),
    (415, "UNSUPPORTED_MEDIA_TYPE", APIError),
    (421, "MISDIRECTED_REQUEST", APIError),
    (418, None, APIError),
]


@pytest.mark.parametrize(("status", "code", "cls"), STATUS_CLASSES)
def test_status_mapping(
    client: Any, httpx_mock: HTTPXMock, status: int, code: str | None, cls: type[APIError]
) -> None:
    body: dict[str, Any] = {"error": "what went wrong"}
    if code:
        body["code"] = code
    httpx_mock.add_response(status_code=status, json=body, is_reusable=True)
    with pytest.raises(cls) as info:
        client.sandbox.list()
    err = info.value
    assert type(err) is cls
    assert (err.status_code, err.message, err.code) == (status, "what went wrong", code)
    assert isinstance(err, LiteBoxdError)


@pytest.mark.parametrize(
    ("status", "code", "cls"), [row for row in STATUS_CLASSES if row[1] and row[0] != 502]
)
def test_code_mapping(status: int, code: str, cls: type[APIError]) -> None:
    err = error_for_code(code, "m")
    assert type(err) is cls
    assert (err.status_code, err.code) == (status, code)


def test_every_code_of_the_api_maps_to_its_status() -> None:
    codes = {
        400: ["INVALID_REQUEST", "INVALID_YAML", "INVALID_LANGUAGE", "LANGUAGE_NOT_FOUND"],
        404: [
            "NOT_FOUND",
            "SANDBOX_NOT_FOUND",
            "IMAGE_NOT_FOUND",
            "FILE_NOT_FOUND",
            "TEMPLATE_NOT_FOUND",
            "VERSION_NOT_FOUND",
            "PREPULL_NOT_FOUND",
            "CONTEXT_NOT_FOUND",
            "SESSION_NOT_FOUND",
        ],
        409: [
            "ALREADY_EXISTS",
            "CONFLICT",
            "SANDBOX_NOT_READY",
            "TEMPLATE_EXISTS",
            "PREPULL_IN_PROGRESS",
        ],
    }
    for status, names in codes.items():
        for code in names:
            assert error_for_code(code, "m").status_code == status, code
    unknown = error_for_code("SOMETHING_NEW", "m")
    assert (type(unknown), unknown.status_code) == (APIError, 0)


@pytest.mark.parametrize(
    ("body", "want"),
    [
        (b"<html>bad gateway</html>", "<html>bad gateway</html>"),
        (b"", "Bad Gateway"),
        (b'{"message": "not ours"}', '{"message": "not ours"}'),
        (b"x" * 2000, "x" * 512 + "..."),
    ],
)
def test_error_body_not_ours(client: Any, httpx_mock: HTTPXMock, body: bytes, want: str) -> None:
    httpx_mock.add_response(status_code=502, content=body)
    with pytest.raises(ServiceUnavailableError) as info:
        client.sandbox.list()
    assert info.value.message == want
    assert info.value.code is None


def test_seed_constructors() -> None:
    # Seed 003 §7 builds the exceptions with a message alone.
    assert str(NotFoundError()) == "[404] Resource not found"
    assert str(ConflictError("taken")) == "[409] taken"
    assert str(BadRequestError()) == "[400] Invalid request"
    assert str(UnauthorizedError()) == "[401] Unauthorized"
    assert str(InternalServerError()) == "[500] Internal server error"
    assert str(APIError(418, "teapot", code="X")) == "[418] teapot (X)"
    assert str(SandboxFailedError("sb1")) == "Sandbox sb1: Sandbox failed to start"
    assert str(PrepullFailedError("pp-1", "boom")) == "Prepull task pp-1 failed: boom"
    assert issubclass(APIError, Agent2EnvError)
    assert LiteBoxdError is Agent2EnvError
    assert error_for_status(504, "slow").status_code == 504


def test_session_api_exceptions() -> None:
    assert issubclass(ResourceLimitError, SandboxCreationError)
    assert issubclass(ResourceLimitError, APIError)
    assert issubclass(InsufficientCapacityError, ResourceLimitError)
    limit = ResourceLimitError()
    assert (limit.status_code, limit.usage, limit.suggestion) == (429, None, None)
    assert str(limit) == "[429] Resource limit reached"
    assert InsufficientCapacityError("full").status_code == 507
    made = SandboxCreationError("no image", session_id="s")
    assert (str(made), made.session_id) == ("no image", "s")
    for kind, cls in (
        ("syntax", CompilationError),
        ("runtime", RuntimeExecutionError),
        ("system", SystemExecutionError),
    ):
        err = execution_error(kind, "N", "v", traceback="tb", session_id="s", result=1)
        assert type(err) is cls
        assert isinstance(err, CodeExecutionError)
        assert (err.kind, err.name, err.value, err.traceback, err.result) == (
            kind,
            "N",
            "v",
            "tb",
            1,
        )
    assert str(execution_error("system", "KernelDied", "")) == "KernelDied"


def test_resource_error_in_a_stream(client: Any, httpx_mock: HTTPXMock) -> None:
    body = {
        "error": "no room",
        "code": "INSUFFICIENT_CAPACITY",
        "usage": usage_json(),
        "suggestion": "use a smaller flavor",
    }
    httpx_mock.add_response(content=sse(("error", json.dumps(body))))
    with pytest.raises(InsufficientCapacityError) as info:
        list(client.sandbox.execute_stream("sb1234567890", ["true"]))
    assert info.value.suggestion == "use a smaller flavor"
    assert info.value.usage is not None
    assert info.value.usage.memory_bytes_capacity == 48 << 30


def test_resource_error_with_a_malformed_usage() -> None:
    err = error_for_status(429, "full", "RESOURCE_LIMIT", details={"usage": 3, "suggestion": ""})
    assert isinstance(err, ResourceLimitError)
    assert (err.usage, err.suggestion) == (None, None)
