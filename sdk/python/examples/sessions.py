"""Sessions (seed 000's high-level API): code and commands, sessions made and reused for you.

What an MCP server's tools need, one call each. Configured from the
environment: MSB_SERVER_URL (or AGENT2ENV_URL, default
http://localhost:8080/api/v1), MSB_API_KEY, MSB_DEFAULT_FLAVOR,
MSB_SESSION_TIMEOUT, SANDBOX_TIMEOUT.
"""

import asyncio
import logging

from agent2env.sessions import AsyncSessionManager, RuntimeExecutionError


async def main() -> None:
    # Each execution is logged with its time under the "agent2env" logger, at INFO.
    logging.basicConfig(level=logging.WARNING)
    async with AsyncSessionManager() as sandbox:
        # The first call makes a session; its id comes back with the result.
        res = await sandbox.execute_code("x = 6 * 7\nprint(x)")
        session_id = res.session_id
        print(f"New session: {res.created}, output: {res.stdout.strip()}")

        # Naming the session reuses it: its interpreter keeps its state.
        res = await sandbox.execute_code("print(x + 1)", session_id=session_id)
        print(f"Same session: {not res.created}, output: {res.stdout.strip()}")

        # Commands run in the same sandbox, and see its files.
        await sandbox.execute_code("open('data.txt', 'w').write('hello')", session_id=session_id)
        out = await sandbox.execute_command(["cat", "data.txt"], session_id=session_id)
        print(f"Command: {out.stdout}, exit code {out.exit_code}")

        # Code that fails raises by its kind; the result is on the exception.
        try:
            await sandbox.execute_code("1 / 0", session_id=session_id)
        except RuntimeExecutionError as e:
            print(f"Runtime error: {e.name}: {e.value}")

        # Sessions run concurrently, each in its own sandbox, sized by flavor:
        # the memory limit its cgroup sets (cgroup v2, else v1).
        memory = (
            "cat /sys/fs/cgroup/memory.max 2>/dev/null"
            " || cat /sys/fs/cgroup/memory/memory.limit_in_bytes"
        )
        results = await asyncio.gather(
            *(
                sandbox.execute_command(memory, session_id=f"{session_id}-{f}", flavor=f)
                for f in ("small", "medium")
            )
        )
        print("Memory by flavor:", ", ".join(f"{int(r.stdout) >> 30} GiB" for r in results))

        info = await sandbox.get_session_info(session_id)
        print(f"Session {info.session_id}: flavor {info.flavor}, {info.execution_count} runs")
        stats = await sandbox.get_stats()
        print(f"Active sessions: {stats.sessions.active}")

        for s in await sandbox.list_sessions():
            if s.session_id.startswith(session_id):
                await sandbox.stop_session(s.session_id)
        print(
            f"Stopped; stopping again finds nothing: {not await sandbox.stop_session(session_id)}"
        )


if __name__ == "__main__":
    asyncio.run(main())
