"""The terminal client against an in-process WebSocket server speaking the daemon's protocol."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from pytest_httpx import HTTPXMock
from websockets.sync.server import ServerConnection, serve

import agent2env
from agent2env import AsyncClient, Client, ConflictError, StreamError
from agent2env.terminal import TerminalTakenOverError, interactive_query

from .conftest import BASE

SB = f"{BASE}/sandboxes/sb1234567890"

SUCCESS = b"\x03" + json.dumps({"status": "Success"}).encode()


def exit_status(code: int) -> bytes:
    causes = [{"reason": "ExitCode", "message": str(code)}]
    st = {"status": "Failure", "reason": "NonZeroExitCode", "details": {"causes": causes}}
    return b"\x03" + json.dumps(st).encode()


Script = Callable[[ServerConnection], None]


@pytest.fixture
def server() -> Iterator[Callable[[Script], str]]:
    """Serve a script per connection; yield a function that sets it and returns the URL."""
    script: list[Script] = []
    seen: list[tuple[str, str | None]] = []

    def handler(conn: ServerConnection) -> None:
        seen.append((conn.request.path if conn.request else "", conn.subprotocol))
        script[0](conn)

    with serve(handler, "127.0.0.1", 0, subprotocols=["v5.channel.k8s.io"]) as srv:  # type: ignore[list-item]
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        port = srv.socket.getsockname()[1]

        def use(s: Script) -> str:
            script[:] = [s]
            return f"http://127.0.0.1:{port}/api/v1"

        yield use
        srv.shutdown()


def test_one_shot(server: Callable[[Script], str]) -> None:
    got: list[bytes] = []

    def script(conn: ServerConnection) -> None:
        got.append(conn.recv())  # type: ignore[arg-type]
        got.append(conn.recv())  # type: ignore[arg-type]
        conn.send(b"\x01hello ")
        conn.send(b"\x02err")
        conn.send(b"\x01world")
        conn.send(exit_status(3))

    with Client(server(script)) as client, client.sandbox.terminal("sb1", ["sh"]) as term:
        term.write("ls\r")
        term.resize(40, 120)
        assert term.read(timeout=5) == b"hello "
        assert term.read(timeout=5) == b"err"
        assert term.offset == 6
        assert term.wait(timeout=5).exit_code == 3
        assert term.read() == b""
    assert got == [b"\x00ls\r", b"\x04" + json.dumps({"Width": 120, "Height": 40}).encode()]


def test_attach_offsets_and_takeover(server: Callable[[Script], str]) -> None:
    def script(conn: ServerConnection) -> None:
        conn.send(b"\x0520")
        conn.send(b"\x01abc")
        taken = {"status": "Failure", "reason": "TERMINAL_TAKEN_OVER", "message": "taken"}
        conn.send(b"\x03" + json.dumps(taken).encode())

    with Client(server(script)) as client:
        term = client.sandbox.attach_terminal("sb1", "work", since=7)
        assert term.offset == 7
        assert term.read(timeout=5) == b"abc"
        assert term.offset == 23
        with pytest.raises(TerminalTakenOverError) as e:
            term.read(timeout=5)
        assert e.value.code == "TERMINAL_TAKEN_OVER"
        assert isinstance(e.value, ConflictError)
        with pytest.raises(TerminalTakenOverError):
            term.write("x")  # input too: the other client writes now
        term.close()


def test_connection_lost(server: Callable[[Script], str]) -> None:
    def script(conn: ServerConnection) -> None:
        conn.send(b"\x01partial")

    with Client(server(script)) as client, client.sandbox.terminal("sb1", ["sh"]) as term:
        assert term.read(timeout=5) == b"partial"
        with pytest.raises(StreamError):
            term.wait(timeout=5)


def test_async(server: Callable[[Script], str]) -> None:
    got: list[Any] = []

    def script(conn: ServerConnection) -> None:
        got.extend(conn.recv() for _ in range(3))
        conn.send(b"\x01out")
        conn.send(SUCCESS)

    url = server(script)

    async def main() -> tuple[bytes, int, int]:
        async with AsyncClient(url) as client:
            term = await client.sandbox.attach_terminal("sb1", "work", takeover=True)
            async with term:
                await term.write(b"x")
                await term.resize(10, 20)
                await term.close_stdin()
                out = await term.read()
                return out, term.offset, (await term.wait()).exit_code

    assert asyncio.run(main()) == (b"out", 3, 0)
    assert got[0] == b"\x00x"
    assert got[2] == b"\xff\x00"


def test_async_timeouts(server: Callable[[Script], str]) -> None:
    # read and wait take timeout= as the sync terminal's do (audit finding 8).
    output, end = threading.Event(), threading.Event()

    def script(conn: ServerConnection) -> None:
        output.wait(10)
        conn.send(b"\x01late")
        end.wait(10)
        conn.send(exit_status(4))

    url = server(script)

    async def main() -> tuple[bytes, int]:
        async with AsyncClient(url) as client:
            term = await client.sandbox.terminal("sb1", ["sh"])
            async with term:
                with pytest.raises(agent2env.TimeoutError, match="no terminal output"):
                    await term.read(timeout=0.05)
                output.set()
                out = await term.read(timeout=5)  # the output the timed-out read left
                with pytest.raises(agent2env.TimeoutError):
                    await term.wait(timeout=0.05)
                end.set()
                return out, (await term.wait(timeout=5)).exit_code

    assert asyncio.run(main()) == (b"late", 4)


def test_sync_timeout(server: Callable[[Script], str]) -> None:
    # A read that times out raises the SDK's TimeoutError, an Agent2EnvError, as the
    # async terminal's does: it raised the built-in one websockets raises.
    output = threading.Event()

    def script(conn: ServerConnection) -> None:
        output.wait(10)
        conn.send(b"\x01late")
        conn.send(SUCCESS)

    with Client(server(script)) as client, client.sandbox.terminal("sb1", ["sh"]) as term:
        with pytest.raises(agent2env.TimeoutError, match=r"no terminal output in 0\.05 s"):
            term.read(timeout=0.05)
        output.set()
        assert term.read(timeout=5) == b"late"
        assert term.wait(timeout=5).exit_code == 0


def test_input_after_the_end(server: Callable[[Script], str]) -> None:
    # Input sent once the process has exited is a StreamError, not websockets' own error.
    def script(conn: ServerConnection) -> None:
        conn.send(SUCCESS)
        conn.close()

    with Client(server(script)) as client, client.sandbox.terminal("sb1", ["true"]) as term:
        assert term.wait(timeout=5).exit_code == 0
        for send in (lambda: term.write("x"), lambda: term.resize(2, 2), term.close_stdin):
            with pytest.raises(StreamError, match="connection has ended"):
                send()

    async def main() -> None:
        async with AsyncClient(server(script)) as client:
            term = await client.sandbox.terminal("sb1", ["true"])
            async with term:
                assert (await term.wait(timeout=5)).exit_code == 0
                with pytest.raises(StreamError, match="connection has ended"):
                    await term.write("x")
                with pytest.raises(StreamError, match="connection has ended"):
                    await term.resize(2, 2)
                with pytest.raises(StreamError, match="connection has ended"):
                    await term.close_stdin()

    asyncio.run(main())


def test_unreachable() -> None:
    # A daemon that cannot be reached is the SDK's ConnectionError, as for every other
    # call: the terminals raised the socket's ConnectionRefusedError.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}/api/v1"  # nothing listens there
    with Client(url) as client, pytest.raises(agent2env.ConnectionError, match="cannot reach") as e:
        client.sandbox.terminal("sb1", env={"TOKEN": "secret"})
    assert "/sandboxes/sb1/exec/interactive:" in str(e.value)
    assert "secret" not in str(e.value)

    async def main() -> None:
        async with AsyncClient(url) as client:
            with pytest.raises(agent2env.ConnectionError, match="cannot reach"):
                await client.sandbox.attach_terminal("sb1", "work")

    asyncio.run(main())


def test_refused_upgrade() -> None:
    def refuse(conn: ServerConnection, request: Any) -> Any:
        body = {"error": "terminal 'work' has a writer attached", "code": "CONFLICT"}
        return conn.respond(409, json.dumps(body))

    with serve(lambda conn: None, "127.0.0.1", 0, process_request=refuse) as srv:
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        url = f"http://127.0.0.1:{srv.socket.getsockname()[1]}/api/v1"
        with Client(url) as client, pytest.raises(ConflictError) as e:
            client.sandbox.attach_terminal("sb1", "work")
        srv.shutdown()
    assert e.value.code == "CONFLICT"
    assert "writer attached" in e.value.message


def test_interactive_query() -> None:
    q = interactive_query(["sh", "-c", "x"], True, 30, 100, "/tmp", {"A": "1"})
    assert q == [
        ("command", "sh"),
        ("command", "-c"),
        ("command", "x"),
        ("tty", "true"),
        ("rows", "30"),
        ("cols", "100"),
        ("cwd", "/tmp"),
        ("env", "A=1"),
    ]
    assert interactive_query(None, False, None, None, None, None) == [("tty", "false")]
    with pytest.raises(TypeError, match="not a string"):
        interactive_query("bash", True, None, None, None, None)


def test_persistent_rest(httpx_mock: HTTPXMock) -> None:
    info = {
        "name": "work",
        "command": ["sh"],
        "rows": 24,
        "cols": 80,
        "running": True,
        "started_at": "2026-12-04T10:00:00Z",
        "output_start": 0,
        "output": 12,
        "writer": False,
    }
    ended = {**info, "running": False, "exit": {"exit_code": 9}, "ended_at": "2026-12-04T10:01:00Z"}
    httpx_mock.add_response(method="POST", url=f"{SB}/terminals", status_code=201, json=info)
    httpx_mock.add_response(method="GET", url=f"{SB}/terminals", json={"items": [info]})
    httpx_mock.add_response(method="GET", url=f"{SB}/terminals/work", json=info)
    httpx_mock.add_response(method="DELETE", url=f"{SB}/terminals/work", json=ended)
    with Client(BASE) as client:
        got = client.sandbox.create_terminal(
            "sb1234567890", "work", ["sh"], rows=24, env={"A": "1"}
        )
        assert got.output == 12
        body = json.loads(httpx_mock.get_requests()[-1].content)
        assert body == {"name": "work", "command": ["sh"], "rows": 24, "env": {"A": "1"}}
        assert [t.name for t in client.sandbox.list_terminals("sb1234567890")] == ["work"]
        assert client.sandbox.get_terminal("sb1234567890", "work").running
        gone = client.sandbox.delete_terminal("sb1234567890", "work")
        assert gone.exit is not None
        assert gone.exit.exit_code == 9


def test_persistent_rest_async(httpx_mock: HTTPXMock) -> None:
    info = {
        "name": "t-1",
        "command": ["bash"],
        "rows": 24,
        "cols": 80,
        "running": True,
        "started_at": "2026-12-04T10:00:00Z",
        "output_start": 0,
        "output": 0,
        "writer": True,
    }
    httpx_mock.add_response(method="POST", url=f"{SB}/terminals", status_code=201, json=info)
    httpx_mock.add_response(method="GET", url=f"{SB}/terminals", json={"items": [info]})
    httpx_mock.add_response(method="GET", url=f"{SB}/terminals/t-1", json=info)
    httpx_mock.add_response(method="DELETE", url=f"{SB}/terminals/t-1", json=info)

    async def main() -> None:
        async with AsyncClient(BASE) as client:
            assert (await client.sandbox.create_terminal("sb1234567890")).name == "t-1"
            assert len(await client.sandbox.list_terminals("sb1234567890")) == 1
            assert (await client.sandbox.get_terminal("sb1234567890", "t-1")).writer
            await client.sandbox.delete_terminal("sb1234567890", "t-1")

    asyncio.run(main())
