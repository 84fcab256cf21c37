"""Async use (seed 003 §9.2): several sandboxes at once, output streamed as it comes.

Run it against a daemon (``make run``) at $AGENT2ENV_URL, default
http://localhost:8080/api/v1.
"""

import asyncio

from agent2env import AsyncClient


async def run_one(client: AsyncClient, n: int) -> str:
    """Run a small computation in a fresh sandbox and return its output."""
    sandbox = await client.sandbox.create_from_image("agent2env/python", ttl=600)
    try:
        sandbox = await client.sandbox.wait_for_ready(sandbox.id, poll_interval=0.5, timeout=900)
        result = await client.sandbox.execute(
            sandbox.id, command=["python", "-c", f"print(sum(range({n})))"]
        )
        return result.stdout.strip()
    finally:
        await client.sandbox.delete(sandbox.id)


async def main() -> None:
    async with AsyncClient() as client:
        # Three sandboxes side by side.
        sums = await asyncio.gather(*(run_one(client, n) for n in (10, 100, 1000)))
        print("Sums:", ", ".join(sums))

        # Output of a longer command, line by line as it is printed.
        sandbox = await client.sandbox.create_from_image("agent2env/python", ttl=600)
        sandbox = await client.sandbox.wait_for_ready(sandbox.id, poll_interval=0.5, timeout=900)
        script = "for i in 1 2 3; do echo step $i; sleep 0.2; done; echo done >&2"
        async for event in client.sandbox.execute_stream(sandbox.id, ["sh", "-c", script]):
            if event.type == "exit":
                print(f"exit code {event.exit_code} after {event.duration_ms:.0f} ms")
            else:
                print(f"{event.type}: {event.data}", end="")
        await client.sandbox.delete(sandbox.id)


if __name__ == "__main__":
    asyncio.run(main())
