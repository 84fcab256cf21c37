"""LLM proxy models: the archive of exchanges with models, and per-run keys (agent2env addition)."""

from __future__ import annotations

from datetime import datetime

from pydantic import Field

from .common import APIModel, StrEnum

__all__ = [
    "LLMChunk",
    "LLMConversation",
    "LLMExchange",
    "LLMExchangeDetail",
    "LLMExchangeEvent",
    "LLMExchangeList",
    "LLMExchangeState",
    "LLMKey",
    "LLMKeyList",
    "LLMMessage",
    "LLMPart",
    "LLMUsage",
]


class LLMExchangeState(StrEnum):
    """Where an exchange is: ``in_progress``, then one of the others once it ended."""

    IN_PROGRESS = "in_progress"
    COMPLETE = "complete"
    CLIENT_GONE = "client_gone"
    """The client left mid-answer; the record holds everything up to then."""
    INTERRUPTED = "interrupted"
    """The daemon stopped mid-answer."""


class LLMPart(StrEnum):
    """The parts of an exchange, for :meth:`agent2env.services.LLMService.raw`."""

    REQUEST = "request"
    UPSTREAM_REQUEST = "upstream_request"
    UPSTREAM_RESPONSE = "upstream_response"
    RESPONSE = "response"


class LLMUsage(APIModel):
    """The tokens of an exchange (or a conversation)."""

    input_tokens: int = Field(default=0, alias="inputTokens")
    output_tokens: int = Field(default=0, alias="outputTokens")
    cached_tokens: int = Field(default=0, alias="cachedTokens")
    reasoning_tokens: int = Field(default=0, alias="reasoningTokens")


class LLMExchange(APIModel):
    """One call through the daemon's LLM proxy, as the archive indexes it."""

    id: str
    sandbox_id: str | None = Field(None, alias="sandboxId")
    run_id: str | None = Field(None, alias="runId")
    key_id: str | None = Field(None, alias="keyId")
    conversation_id: str | None = Field(None, alias="conversationId")
    format: str = ""
    """The client's wire format: openai, openai-responses, anthropic or gemini."""
    method: str = ""
    path: str = ""
    model: str | None = None
    provider: str | None = None
    upstream_model: str | None = Field(None, alias="upstreamModel")
    stream: bool = False
    passthrough: bool = False
    status: int = 0
    """The HTTP status the client got; 0 when none was sent."""
    state: str = ""
    """An :class:`LLMExchangeState` (a newer daemon's state stays a string)."""
    error: str | None = None
    usage: LLMUsage = Field(default_factory=lambda: LLMUsage())
    attempts: int = 0
    time_to_first_byte_ms: float = Field(0.0, alias="timeToFirstByteMs")
    duration_ms: float = Field(0.0, alias="durationMs")
    created_at: datetime = Field(alias="createdAt")
    request_bytes: int = Field(0, alias="requestBytes")
    response_bytes: int = Field(0, alias="responseBytes")
    stored_bytes: int = Field(0, alias="storedBytes")


class LLMExchangeList(APIModel):
    """A page of exchanges, oldest first."""

    items: list[LLMExchange] = Field(default_factory=list)
    next_cursor: str | None = Field(None, alias="nextCursor")
    """The next page's cursor; none on the last page."""
    follow_cursor: str | None = Field(None, alias="followCursor")
    """Give it as ``after`` to :meth:`agent2env.services.LLMService.follow` to miss nothing that
    ends after this list."""


class LLMChunk(APIModel):
    """A piece of a body: milliseconds since the exchange began, and its size in bytes."""

    at_ms: float = Field(alias="atMs")
    size: int


class LLMMessage(APIModel):
    """A request or a response of an exchange (credentials redacted)."""

    method: str | None = None
    url: str | None = None
    status: int | None = None
    headers: dict[str, list[str]] = Field(default_factory=dict)
    body: str = ""
    """The body as text, or base64 when ``body_encoding`` is ``base64``."""
    body_encoding: str | None = Field(None, alias="bodyEncoding")
    chunks: list[LLMChunk] = Field(default_factory=list)


class LLMExchangeDetail(LLMExchange):
    """An exchange with its four parts; a part is absent when it never happened."""

    request: LLMMessage | None = None
    upstream_request: LLMMessage | None = Field(None, alias="upstreamRequest")
    upstream_response: LLMMessage | None = Field(None, alias="upstreamResponse")
    response: LLMMessage | None = None


class LLMConversation(APIModel):
    """The exchanges of one conversation: each request's messages extend the previous one's."""

    id: str
    sandbox_id: str | None = Field(None, alias="sandboxId")
    run_id: str | None = Field(None, alias="runId")
    started_at: datetime = Field(alias="startedAt")
    last_at: datetime = Field(alias="lastAt")
    usage: LLMUsage = Field(default_factory=lambda: LLMUsage())
    exchanges: list[LLMExchange] = Field(default_factory=list)


class LLMExchangeEvent(APIModel):
    """An exchange that ended, as a follow sends it, and the cursor that resumes after it."""

    cursor: str
    exchange: LLMExchange


class LLMKey(APIModel):
    """A per-run key of the LLM proxy; ``key``, its secret, only in the answer to its creation."""

    id: str
    key: str | None = Field(None, repr=False)
    """The secret (not in the model's repr); ``None`` but in the answer to the key's creation."""
    name: str | None = None
    sandbox: str | None = None
    run: str | None = None
    budget_tokens: int = 0
    requests_per_minute: int = 0
    tokens_per_minute: int = 0
    used_tokens: int = 0
    created_at: datetime
    expires_at: datetime
    revoked_at: datetime | None = None


class LLMKeyList(APIModel):
    """A page of LLM keys, newest first unless asked otherwise."""

    items: list[LLMKey] = Field(default_factory=list)
    next_cursor: str | None = None
    """The next page's cursor; none on the last page."""
