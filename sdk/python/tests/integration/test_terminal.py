"""Terminals against a real daemon: one-shot (sync and async) and persistent, with reattach."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest

from agent2env import AsyncClient, Client, ConflictError, NotFoundError
from agent2env.terminal import AsyncTerminal, Terminal, TerminalTakenOverError

from .conftest import IMAGE, Daemon

pytestmark = pytest.mark.integration


def read_until(term: Terminal, want: bytes) -> bytes:
    """Read the terminal's output until it holds ``want``."""
    got = b""
    deadline = time.monotonic() + 30
    while want not in got:
        assert time.monotonic() < deadline, f"no {want!r} in {got!r}"
        chunk = term.read(timeout=30)
        assert chunk, f"the output ended before {want!r}: {got!r}"
        got += chunk
    return got


async def aread_until(term: AsyncTerminal, want: bytes) -> bytes:
    got = b""
    while want not in got:
        chunk = await asyncio.wait_for(term.read(), 30)
        assert chunk, f"the output ended before {want!r}: {got!r}"
        got += chunk
    return got


@pytest.fixture
def sandbox_id(client: Client) -> Iterator[str]:
    sb = client.sandbox.wait_for_ready(
        client.sandbox.create_from_image(IMAGE).id, poll_interval=0.2
    )
    yield sb.id
    client.sandbox.delete(sb.id)


def test_terminal_sync(client: Client, sandbox_id: str) -> None:
    with client.sandbox.terminal(sandbox_id, ["sh"], rows=30, cols=100) as term:
        term.write("stty size\r")
        read_until(term, b"30 100")
        term.resize(40, 120)
        term.write("stty size; exit 3\r")
        read_until(term, b"40 120")
        assert term.wait().exit_code == 3
    with client.sandbox.terminal(sandbox_id, ["cat"], tty=False) as term:
        term.write("piped\n")
        term.close_stdin()
        assert read_until(term, b"piped\n") == b"piped\n"
        assert term.wait().exit_code == 0
    with pytest.raises(NotFoundError):
        client.sandbox.terminal("nosuchsandbox", ["true"])


def test_terminal_async(daemon: Daemon, sandbox_id: str) -> None:
    async def main() -> int:
        async with AsyncClient(daemon.url) as aclient:
            term = await aclient.sandbox.terminal(sandbox_id, ["sh", "-c", "read x; exit $x"])
            async with term:
                await term.resize(50, 150)
                await term.write("5\r")
                await aread_until(term, b"5")
                return (await term.wait()).exit_code

    assert asyncio.run(main()) == 5


def test_persistent_terminal(client: Client, daemon: Daemon, sandbox_id: str) -> None:
    info = client.sandbox.create_terminal(sandbox_id, "work", ["sh"])
    assert info.name == "work"
    assert info.running
    with pytest.raises(ConflictError):
        client.sandbox.create_terminal(sandbox_id, "work")

    # Detached, the shell goes on; attaching again from the offset reached
    # replays what it wrote meanwhile, and nothing before.
    with client.sandbox.attach_terminal(sandbox_id, "work") as term:
        term.write("echo one-$((1+1))\r")
        read_until(term, b"one-2")
        term.write("sleep 1; echo missed-$((3+3))\r")
        read_until(term, b"missed-$((3+3))\r\n")
        offset = term.offset
    time.sleep(2)
    with client.sandbox.attach_terminal(sandbox_id, "work", since=offset) as term:
        assert b"one-2" not in read_until(term, b"missed-6")
        # One writer: another is refused, a takeover ends this attachment.
        with pytest.raises(ConflictError):
            client.sandbox.attach_terminal(sandbox_id, "work")
        terminals = client.sandbox.get(sandbox_id).terminals or []
        assert [(t.name, t.writer) for t in terminals] == [("work", True)]

        async def take_over() -> int:
            async with AsyncClient(daemon.url) as aclient:
                taker = await aclient.sandbox.attach_terminal(
                    sandbox_id, "work", since=term.offset, takeover=True
                )
                async with taker:
                    await taker.write("exit 9\r")
                    return (await taker.wait()).exit_code

        assert asyncio.run(take_over()) == 9
        with pytest.raises(TerminalTakenOverError):
            term.wait()
    ended = client.sandbox.get_terminal(sandbox_id, "work")
    assert not ended.running
    assert ended.exit is not None
    assert ended.exit.exit_code == 9
    assert [t.name for t in client.sandbox.list_terminals(sandbox_id)] == ["work"]
    client.sandbox.delete_terminal(sandbox_id, "work")
    with pytest.raises(NotFoundError):
        client.sandbox.get_terminal(sandbox_id, "work")
