r"""Drives agent2env's MCP server with the official Python SDK (`mcp` on PyPI).

    python mcp_flow.py stdio COMMAND [ARG...]   # the server on stdio (agent2env mcp)
    python mcp_flow.py http URL                 # the server at URL (/mcp)

Runs seed 004's test flow (create_context, run_code `x = 100\\nprint(x)`, state
kept, list_contexts, stop_context, run_code gives CONTEXT_NOT_FOUND), then
execute_code with a new and a reused session id, a matplotlib figure as an
image, a bad argument (INVALID_PARAMS), output as progress notifications, and a
cancellation that interrupts the code while the session lives on. Prints one
line per step; exits non-zero at the first failure.
"""

import json
import os
import sys
import time
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult, TextContent


def check(cond: bool, what: str, got: object = None) -> None:
    if not cond:
        raise AssertionError(f"{what}: got {got!r}")
    print("ok", what, flush=True)


def first_text(result: CallToolResult) -> str:
    content = result.content[0]
    if not isinstance(content, TextContent):
        raise TypeError(f"not text content: {content!r}")
    text: str = content.text  # str, typed or not (mcp's types may be absent)
    return text


def text_json(result: CallToolResult) -> Any:
    return json.loads(first_text(result))


async def call(
    session: ClientSession, name: str, args: dict[str, Any] | None = None, **kw: Any
) -> CallToolResult:
    result: CallToolResult = await session.call_tool(name, args or {}, **kw)
    return result


async def flow(session: ClientSession) -> None:
    await session.initialize()
    tools = {t.name for t in (await session.list_tools()).tools}
    check(
        {
            "run_code",
            "create_context",
            "stop_context",
            "list_contexts",
            "execute_code",
            "execute_command",
        }
        <= tools,
        "seed tools listed",
        tools,
    )

    # Seed 004's flow.
    created = await call(session, "create_context", {"name": "test", "language": "python"})
    ctx = created.structured_content
    check(
        not created.is_error
        and ctx["status"] == "active"
        and ctx["message"] == "Python context created successfully"
        and ctx["context_id"].startswith("ctx-")
        and text_json(created) == ctx,
        "create_context",
        ctx,
    )
    cid = ctx["context_id"]
    run = await call(session, "run_code", {"code": "x = 100\nprint(x)", "context_id": cid})
    out = run.structured_content
    check(
        out["stdout"] == "100\n"
        and out["success"] is True
        and set(out) == {"stdout", "stderr", "success", "execution_time"},
        "run_code x = 100",
        out,
    )
    run = await call(session, "run_code", {"code": "print(x * 2)", "context_id": cid})
    check(run.structured_content["stdout"] == "200\n", "state kept", run.structured_content)
    listed = (await call(session, "list_contexts")).structured_content
    check(
        any(c["context_id"] == cid and c["name"] == "test" for c in listed["contexts"])
        and listed["total"] >= 1,
        "list_contexts",
        listed,
    )
    stopped = (await call(session, "stop_context", {"context_id": cid})).structured_content
    check(
        stopped
        == {"context_id": cid, "status": "stopped", "message": "Context stopped successfully"},
        "stop_context",
        stopped,
    )
    gone = await call(session, "run_code", {"code": "print(x)", "context_id": cid})
    check(
        gone.is_error and text_json(gone)["code"] == "CONTEXT_NOT_FOUND",
        "run_code after stop: CONTEXT_NOT_FOUND",
        first_text(gone),
    )
    bad_lang = await call(session, "create_context", {"name": "r", "language": "ruby"})
    check(
        bad_lang.is_error and text_json(bad_lang)["code"] == "INVALID_LANGUAGE",
        "INVALID_LANGUAGE",
        first_text(bad_lang),
    )

    # Sessions.
    first = await call(session, "execute_code", {"code": "y = 41\nprint(y)"})
    first = first.structured_content
    check(
        first["created"] is True and first["stdout"] == "41\n",
        "execute_code makes a session",
        first,
    )
    sid = first["session_id"]
    again = (
        await call(session, "execute_code", {"code": "y + 1", "session_id": sid})
    ).structured_content
    check(again["created"] is False and again["result"] == "42", "execute_code reuses it", again)
    named = (
        await call(
            session, "execute_code", {"code": "1", "session_id": "py-client-" + str(os.getpid())}
        )
    ).structured_content
    check(named["created"] is True, "an unknown session id makes that session", named)
    figure = await call(
        session,
        "execute_code",
        {
            "code": "import matplotlib.pyplot as plt\nplt.plot([1, 4, 9])\nplt.show()",
            "session_id": sid,
        },
    )
    images = [c for c in figure.content if c.type == "image"]
    check(
        not figure.is_error and len(images) == 1 and images[0].mime_type == "image/png",
        "a figure comes back as an image",
        [c.type for c in figure.content],
    )
    cmd = (
        await call(session, "execute_command", {"command": "echo $((6 * 7))", "session_id": sid})
    ).structured_content
    check(cmd["exit_code"] == 0 and cmd["stdout"] == "42\n", "execute_command", cmd)
    bad = await call(session, "execute_code", {"code": 5})
    check(
        bad.is_error and text_json(bad)["code"] == "INVALID_PARAMS",
        "a bad argument: INVALID_PARAMS",
        first_text(bad),
    )
    failed = await call(
        session, "execute_code", {"code": "raise ValueError('nope')", "session_id": sid}
    )
    err = text_json(failed)["error"]
    check(
        failed.is_error
        and err["name"] == "ValueError"
        and err["value"] == "nope"
        and "Traceback" in err["traceback"],
        "a failed execution: a tool error with name, value, traceback",
        first_text(failed),
    )

    # Output as progress notifications while the code runs.
    messages = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        messages.append((time.monotonic(), message))

    start = time.monotonic()
    res = await call(
        session,
        "execute_code",
        {
            "code": "import time\n"
            "for i in range(3):\n    print('step', i, flush=True)\n    time.sleep(0.5)",
            "session_id": sid,
        },
        progress_callback=on_progress,
    )
    end = time.monotonic()
    streamed = "".join(m for _, m in messages if m)
    check(
        not res.is_error
        and "step 0" in streamed
        and "step 2" in streamed
        and messages[0][0] < end - 0.5,
        "output comes as progress while the code runs",
        (messages, start, end),
    )

    # Cancelling the call interrupts the code; the session lives on.
    messages.clear()
    with anyio.move_on_after(1.5):
        await call(
            session,
            "execute_code",
            {
                "code": "import time\n"
                "for i in range(300):\n    print('tick', i, flush=True)\n    time.sleep(0.1)",
                "session_id": sid,
            },
            progress_callback=on_progress,
        )
    start = time.monotonic()
    after = (
        await call(session, "execute_code", {"code": "y", "session_id": sid})
    ).structured_content
    check(
        after["result"] == "41" and time.monotonic() - start < 10,
        "a cancelled call's code is interrupted, the session kept",
        (after, time.monotonic() - start),
    )
    print("done", flush=True)


async def main() -> None:
    mode = sys.argv[1]
    if mode == "stdio":
        params = StdioServerParameters(command=sys.argv[2], args=sys.argv[3:], env=dict(os.environ))
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await flow(session)
    else:
        async with (
            streamable_http_client(sys.argv[2]) as (read, write),
            ClientSession(read, write) as session,
        ):
            await flow(session)


anyio.run(main)
