#!/usr/bin/env python3
"""A small MCP server that answers read-only SQL queries on one SQLite database.

It speaks newline-delimited JSON-RPC 2.0 over stdio.

Usage: sqlite_mcp.py DATABASE

Tools: list_tables, describe_table, query. Python standard library only,
so that it runs in a sandbox with no network.
"""

import json
import sqlite3
import sys
from typing import Any

PROTOCOL_VERSIONS = ("2025-06-18", "2025-03-26", "2024-11-05")

TOOLS = [
    {
        "name": "list_tables",
        "description": "List the tables of the database.",
        "inputSchema": {"type": "object", "properties": {}},
    },
    {
        "name": "describe_table",
        "description": "Show the columns of a table.",
        "inputSchema": {
            "type": "object",
            "properties": {"table": {"type": "string", "description": "table name"}},
            "required": ["table"],
        },
    },
    {
        "name": "query",
        "description": "Run a read-only SQL query (SELECT) and return the rows as JSON.",
        "inputSchema": {
            "type": "object",
            "properties": {"sql": {"type": "string", "description": "one SELECT statement"}},
            "required": ["sql"],
        },
    },
]


def rows(db: sqlite3.Connection, sql: str, params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
    cur = db.execute(sql, params)
    cols = [d[0] for d in cur.description or ()]
    return [dict(zip(cols, r, strict=True)) for r in cur.fetchmany(1000)]


def call_tool(db: sqlite3.Connection, name: str, args: dict[str, Any]) -> list[dict[str, Any]]:
    if name == "list_tables":
        return rows(db, "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
    if name == "describe_table":
        return rows(db, "SELECT name, type, pk FROM pragma_table_info(?)", (args.get("table", ""),))
    if name == "query":
        return rows(db, args.get("sql", ""))
    raise KeyError(name)


def handle(db: sqlite3.Connection, msg: dict[str, Any]) -> dict[str, Any]:
    method, params = msg.get("method"), msg.get("params") or {}
    if method == "initialize":
        asked = params.get("protocolVersion")
        return {
            "protocolVersion": asked if asked in PROTOCOL_VERSIONS else PROTOCOL_VERSIONS[0],
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": {"name": "sqlite", "version": "1.0.0"},
        }
    if method == "ping":
        return {}
    if method == "tools/list":
        return {"tools": TOOLS}
    if method == "resources/list":
        return {"resources": []}
    if method == "resources/templates/list":
        return {"resourceTemplates": []}
    if method == "prompts/list":
        return {"prompts": []}
    if method == "tools/call":
        name = params.get("name")
        if name not in {t["name"] for t in TOOLS}:
            raise LookupError(f"unknown tool {name!r}")
        try:
            result = call_tool(db, name, params.get("arguments") or {})
        except sqlite3.Error as e:
            return {"content": [{"type": "text", "text": f"SQL error: {e}"}], "isError": True}
        # The rows as text, and as structured content (an object, as MCP
        # wants it): without it gemini-cli's stdio client makes structured
        # content of the text's JSON, an array, and then rejects it.
        return {
            "content": [{"type": "text", "text": json.dumps(result)}],
            "structuredContent": {"rows": result},
            "isError": False,
        }
    raise NotImplementedError(method)


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit("usage: sqlite_mcp.py DATABASE")
    # Read-only: the URI mode refuses writes whatever the SQL says.
    db = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            msg = json.loads(line)
        except ValueError:
            reply = {
                "jsonrpc": "2.0",
                "id": None,
                "error": {"code": -32700, "message": "parse error"},
            }
        else:
            if "id" not in msg:
                continue  # a notification
            reply = {"jsonrpc": "2.0", "id": msg["id"]}
            try:
                reply["result"] = handle(db, msg)
            except NotImplementedError as e:
                reply["error"] = {"code": -32601, "message": f"method not found: {e}"}
            except LookupError as e:
                reply["error"] = {"code": -32602, "message": str(e)}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
