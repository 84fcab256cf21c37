"""Server-Sent Events, decoded without I/O so that the sync and async clients share it.

The daemon streams command output, execution output and image progress as
``text/event-stream``; each event's data is one line of JSON.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from .exceptions import StreamError

__all__ = ["MAX_EVENT_CHARS", "SSEDecoder", "SSEEvent"]

MAX_EVENT_CHARS = 16 << 20
"""Bounds one event, so that a broken stream cannot make the client buffer without end."""


@dataclass(frozen=True)
class SSEEvent:
    """One event: its name (``message`` when the stream gave none), its data and its id.

    The id is the last the stream set, kept for the events that follow (as
    the standard says); "" when it set none.
    """

    event: str
    data: str
    id: str = ""

    def json(self) -> Any:
        """Return the data decoded as JSON."""
        try:
            return json.loads(self.data)
        except ValueError as e:
            raise StreamError(f"decode {self.event} event: {e}") from e


class SSEDecoder:
    """Turns the lines of a stream into events, following the HTML living standard.

    Feed it each line without its terminator; it returns an event when a
    blank line completes one. Not safe for concurrent use.
    """

    def __init__(self) -> None:
        self._event = ""
        self._data: list[str] = []
        self._size = 0
        self._id = ""

    def feed(self, line: str) -> SSEEvent | None:
        """Take one line; return the event it completes, if any."""
        if not line:
            if not self._data:
                # An event without data is not dispatched.
                self._event = ""
                return None
            ev = SSEEvent(self._event or "message", "\n".join(self._data), self._id)
            self._event, self._data, self._size = "", [], 0
            return ev
        self._size += len(line)
        if self._size > MAX_EVENT_CHARS:
            raise StreamError(f"server-sent event exceeds {MAX_EVENT_CHARS} characters")
        field, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if field == "event":
            self._event = value
        elif field == "data":
            self._data.append(value)
        elif field == "id" and "\0" not in value:
            self._id = value
        # Comments (":keep-alive") and "retry" change nothing here.
        return None
