from __future__ import annotations

import pytest

from agent2env import StreamError
from agent2env._sse import MAX_EVENT_CHARS, SSEDecoder, SSEEvent


def decode(lines: list[str]) -> list[SSEEvent]:
    decoder = SSEDecoder()
    return [ev for line in lines if (ev := decoder.feed(line)) is not None]


@pytest.mark.parametrize(
    ("lines", "want"),
    [
        (["event: stdout", 'data: {"a":1}', ""], [SSEEvent("stdout", '{"a":1}')]),
        (["data: x", ""], [SSEEvent("message", "x")]),
        (["data:x", "data: y", ""], [SSEEvent("message", "x\ny")]),
        (
            [": keep-alive", "", "event: a", "id: 1", "retry: 5", "data: 1", ""],
            [SSEEvent("a", "1", "1")],
        ),
        # An id holds for the events after it, until another is set.
        (
            [
                "id: 7",
                "data: a",
                "",
                "data: b",
                "",
                "id: 8",
                "data: c",
                "",
                "id: x\0",
                "data: d",
                "",
            ],
            [
                SSEEvent("message", "a", "7"),
                SSEEvent("message", "b", "7"),
                SSEEvent("message", "c", "8"),
                SSEEvent("message", "d", "8"),
            ],
        ),
        (["event: empty", "", "data: 2", ""], [SSEEvent("message", "2")]),
        (["event: cut", "data: 3"], []),
        (["data: a:b", ""], [SSEEvent("message", "a:b")]),
    ],
)
def test_decoder(lines: list[str], want: list[SSEEvent]) -> None:
    assert decode(lines) == want


def test_event_too_large() -> None:
    decoder = SSEDecoder()
    half = "data: " + "x" * (MAX_EVENT_CHARS // 2)
    decoder.feed(half)
    with pytest.raises(StreamError, match="exceeds"):
        decoder.feed(half)


def test_event_json() -> None:
    assert SSEEvent("a", '{"k": [1]}').json() == {"k": [1]}
    with pytest.raises(StreamError, match="decode a event"):
        SSEEvent("a", "{").json()
