"""Times the stock OpenSandbox Python SDK (PyPI opensandbox) for make bench.

One Sandbox.create → first commands.run per line read on stdin
(internal/bench/opensandbox.go).

  python opensandbox_sdk.py IMAGE [CPU MEMORY]

The connection comes from OPEN_SANDBOX_DOMAIN and OPEN_SANDBOX_API_KEY.
For each line on stdin it creates a sandbox of IMAGE (with resource
limits CPU and MEMORY when given, or the SDK's default), runs `true` in it,
and prints a JSON line: {"seconds": the create and the run until its
answer}; the kill that follows is not timed. An error is printed as
{"error": ...}. The sandboxes share one ConnectionConfig with one
transport, as the SDK's documentation has a long-lived program do (each
create otherwise builds a new HTTP client stack, TLS context included,
before its first request: the SDK's cost, not the server's), and as the
Go client it is compared with keeps its connections.
"""

import asyncio
import json
import sys
import time

import httpx
from opensandbox.config import ConnectionConfig
from opensandbox.sandbox import Sandbox


async def once(
    image: str, resource: dict[str, str] | None, config: ConnectionConfig
) -> dict[str, object]:
    start = time.perf_counter()
    sandbox = await Sandbox.create(image, resource=resource, connection_config=config)
    try:
        execution = await sandbox.commands.run("true")
        seconds = time.perf_counter() - start
        if execution.exit_code != 0:
            return {"error": f"true exited {execution.exit_code}"}
        return {"seconds": seconds}
    finally:
        await sandbox.kill()
        await sandbox.close()


async def main() -> None:
    image = sys.argv[1]
    resource = {"cpu": sys.argv[2], "memory": sys.argv[3]} if len(sys.argv) > 3 else None
    config = ConnectionConfig(transport=httpx.AsyncHTTPTransport())
    loop = asyncio.get_running_loop()
    while await loop.run_in_executor(None, sys.stdin.readline):
        try:
            out = await once(image, resource, config)
        except Exception as e:  # reported to the bench, which stops
            out = {"error": f"{type(e).__name__}: {e}"}
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
