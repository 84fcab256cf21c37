"""Code-interpreter context models (seed 001, plus the fields agent2env adds)."""

from __future__ import annotations

import base64
import warnings
from datetime import datetime
from typing import Any, Literal

from pydantic import Field

from .common import APIModel

__all__ = [
    "Context",
    "ContextList",
    "DeleteContextResult",
    "ExecuteResponse",
    "ExecutionError",
    "ExecutionEvent",
    "ExecutionOutput",
    "ExecutionResult",
]


class Context(APIModel):
    """A live interpreter in a sandbox whose state persists between executions."""

    context_id: str
    type: str = "jupyter"
    status: str = "active"
    created_at: datetime
    language: str | None = None
    """``python``, ``javascript`` or ``bash``, aliases resolved."""
    session_name: str | None = None
    working_dir: str | None = None
    sandbox_id: str | None = None
    last_used_at: datetime | None = None
    execution_count: int = 0
    made_by_sandbox: str | None = None
    """The sandbox whose code made it through the daemon's MCP server; it ends with that sandbox."""
    made_by_run: str | None = None
    """The task run that made it; it ends with that run."""


class ContextList(APIModel):
    """A page of contexts (agent2env addition), oldest first unless asked otherwise."""

    items: list[Context] = Field(default_factory=list)
    next_cursor: str | None = None
    """The next page's cursor; none on the last page."""


class DeleteContextResult(APIModel):
    """The answer to a context delete."""

    context_id: str
    status: str
    message: str


class ExecutionOutput(APIModel):
    """The captured output of an execution."""

    stdout: str = ""
    stderr: str = ""


# A field named "json" shadows BaseModel.json, pydantic's deprecated
# serializer; the wire name is worth more than that method here.
with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message='Field name "json"', category=UserWarning)

    class ExecutionResult(APIModel):
        """One rich output, a MIME bundle: displayed values, figures, the last expression's value.

        Binary representations (:attr:`png`, :attr:`jpeg`) are base64 text;
        :meth:`png_bytes` and :meth:`jpeg_bytes` decode them.
        """

        text: str | None = None
        html: str | None = None
        markdown: str | None = None
        svg: str | None = None
        png: str | None = None
        jpeg: str | None = None
        latex: str | None = None
        json: Any = None
        """application/json: any JSON value."""
        javascript: str | None = None
        is_main_result: bool = False
        """This is the value of the last expression."""

        def png_bytes(self) -> bytes | None:
            """Return the PNG image decoded, or None when there is none."""
            return base64.b64decode(self.png) if self.png else None

        def jpeg_bytes(self) -> bytes | None:
            """Return the JPEG image decoded, or None when there is none."""
            return base64.b64decode(self.jpeg) if self.jpeg else None


class ExecutionError(APIModel):
    """Why an execution did not succeed.

    ``kind`` is ``syntax`` (the code did not parse), ``runtime`` (it raised
    or exited non-zero) or ``system`` (a timeout, out of memory, the
    interpreter or sandbox gone; ``name`` is then ``TimeoutError``,
    ``KernelDied``, ``OutOfMemory`` or ``SandboxGone``).
    """

    name: str
    value: str
    traceback: str = ""
    kind: str


class ExecuteResponse(APIModel):
    """The result of one execution; ``success`` is false when the code failed."""

    output: ExecutionOutput
    success: bool
    execution_time: float
    """Wall time in seconds."""
    context_id: str | None = None
    execution_count: int | None = None
    result: str | None = None
    """The plain-text value of the last expression, if any."""
    results: list[ExecutionResult] = Field(default_factory=list)
    """Rich outputs in the order they were produced, then the last expression's value."""
    error: ExecutionError | None = None
    state_lost: bool = False
    """The interpreter was restarted: variables and imports are gone."""
    truncated: bool = False
    """Output beyond the daemon's limit was dropped."""

    @property
    def stdout(self) -> str:
        """The execution's standard output."""
        return self.output.stdout

    @property
    def stderr(self) -> str:
        """The execution's standard error."""
        return self.output.stderr


class ExecutionEvent(APIModel):
    """One event of a streamed execution, in the order the daemon sent them.

    ``stdout`` and ``stderr`` carry :attr:`text`; ``result`` carries
    :attr:`result`; ``error`` (the code failed) carries :attr:`error`; the
    last, ``complete``, carries :attr:`response`, the whole
    :class:`ExecuteResponse` with the streamed output filled in.
    """

    type: Literal["stdout", "stderr", "result", "error", "complete"]
    text: str | None = None
    result: ExecutionResult | None = None
    error: ExecutionError | None = None
    response: ExecuteResponse | None = None
