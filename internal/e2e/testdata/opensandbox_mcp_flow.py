"""Drives the stock OpenSandbox MCP server (PyPI opensandbox-mcp) against agent2env.

It runs over stdio with the official MCP Python client (`mcp`), for
TestOpenSandboxSDK's "mcp server".

    python opensandbox_mcp_flow.py IMAGE

The server is the venv's opensandbox-mcp console script, run by the client
as its subprocess with --domain and --api-key from OPEN_SANDBOX_DOMAIN and
OPEN_SANDBOX_API_KEY. The flow: create, run, write, read, replace, list,
kill, each a tool call. Prints one JSON object on its last line, which the
Go test checks.
"""

import asyncio
import json
import os
import sys
from typing import Any

from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.types import CallToolResult, TextContent


def first_text(result: CallToolResult) -> str:
    content = result.content[0]
    if not isinstance(content, TextContent):
        raise TypeError(f"not text content: {content!r}")
    text: str = content.text  # str, typed or not (mcp's types may be absent)
    return text


def result_of(res: CallToolResult) -> Any:
    """Return a tool call's structured result, or its error text."""
    if res.is_error:
        return {"error": first_text(res) if res.content else "?"}
    if res.structured_content is not None:
        out = res.structured_content
        # A list (or other non-object) result comes wrapped.
        return out.get("result", out) if set(out) == {"result"} else out
    return json.loads(first_text(res))


async def flow(image: str) -> dict[str, Any]:
    server = StdioServerParameters(
        command=os.path.join(os.path.dirname(sys.executable), "opensandbox-mcp"),
        args=[
            "--domain",
            os.environ["OPEN_SANDBOX_DOMAIN"],
            "--api-key",
            os.environ["OPEN_SANDBOX_API_KEY"],
        ],
    )
    out: dict[str, Any] = {}
    async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        tools = {t.name for t in (await session.list_tools()).tools}
        want = {
            "sandbox_create",
            "command_run",
            "file_write",
            "file_read",
            "file_replace_contents",
            "sandbox_list",
            "sandbox_kill",
        }
        out["tools_missing"] = sorted(want - tools)

        async def call(name: str, **args: object) -> Any:
            return result_of(await session.call_tool(name, args))

        created = await call("sandbox_create", image=image, metadata={"via": "mcp"})
        sid = created["sandbox_id"]
        out["state"] = created["info"]["status"]["state"]
        try:
            ran = await call(
                "command_run", sandbox_id=sid, command="echo hi from mcp; echo err >&2"
            )
            out["stdout"] = "".join(m["text"] for m in ran["logs"]["stdout"])
            out["stderr"] = "".join(m["text"] for m in ran["logs"]["stderr"])
            out["exit_code"] = ran.get("exit_code")
            failed = await call("command_run", sandbox_id=sid, command="exit 7")
            out["failed_exit_code"] = failed.get("exit_code")
            out["write"] = await call(
                "file_write",
                sandbox_id=sid,
                path="/workspace/m.txt",
                content="one two one\n",
                mode=644,
            )
            out["read"] = (await call("file_read", sandbox_id=sid, path="/workspace/m.txt"))[
                "content"
            ]
            replaced = await call(
                "file_replace_contents",
                sandbox_id=sid,
                entries=[{"path": "/workspace/m.txt", "old_content": "one", "new_content": "1"}],
            )
            out["replaced"] = [r.get("replaced_count", r.get("replacedCount")) for r in replaced]
            out["after_replace"] = (
                await call("file_read", sandbox_id=sid, path="/workspace/m.txt")
            )["content"]
            listed = await call("sandbox_list", filter={"metadata": {"via": "mcp"}})
            out["listed"] = [i["id"] == sid for i in listed["sandbox_infos"]]
        finally:
            out["kill"] = await call("sandbox_kill", sandbox_id=sid)
        listed = await call("sandbox_list", filter={"metadata": {"via": "mcp"}})
        out["listed_after_kill"] = len(listed["sandbox_infos"])
    return out


if __name__ == "__main__":
    print(json.dumps(asyncio.run(flow(sys.argv[1]))))
