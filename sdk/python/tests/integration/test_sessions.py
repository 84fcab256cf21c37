"""Seed 000's flow against a real daemon: sessions made, reused, sized, limited, stopped."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent2env import (
    Client,
    CompilationError,
    InsufficientCapacityError,
    NotFoundError,
    ResourceLimitError,
    RuntimeExecutionError,
    SystemExecutionError,
)
from agent2env.sessions import FLAVORS, AsyncSessionManager, SessionConfig, SessionManager

from .conftest import MAX_SANDBOXES, Daemon

pytestmark = pytest.mark.integration

# The sandbox's limits as its cgroup sets them: cgroup v2, else v1.
V1 = "/sys/fs/cgroup/cpu/cpu.cfs_"
CPU = f"cat /sys/fs/cgroup/cpu.max 2>/dev/null || echo $(cat {V1}quota_us) $(cat {V1}period_us)"
MEMORY = (
    "cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes"
)
GIB = {"1Gi": 1 << 30, "2Gi": 2 << 30, "4Gi": 4 << 30}


def test_seed_000_flow(daemon: Daemon) -> None:
    async def main() -> None:
        config = SessionConfig(server_url=daemon.url, session_timeout=600)
        async with AsyncSessionManager(config) as sandbox:
            # The first call makes a session.
            first = await sandbox.execute_code("x = 100\nprint(x)")
            sid = first.session_id
            try:
                assert (first.created, first.stdout, first.language) == (True, "100\n", "python")
                # Its id reuses it: the interpreter kept x.
                again = await sandbox.execute_code("print(x + 1)", session_id=sid)
                assert (again.created, again.session_id, again.stdout) == (False, sid, "101\n")
                # Another language in the same session, and a command that sees its files.
                js = await sandbox.execute_code("console.log(6 * 7)", "javascript", sid)
                assert (js.created, js.stdout) == (False, "42\n")
                await sandbox.execute_code("open('f.txt', 'w').write('hi')", session_id=sid)
                cat = await sandbox.execute_command(["cat", "f.txt"], session_id=sid)
                assert (cat.created, cat.stdout, cat.exit_code) == (False, "hi", 0)

                # Errors by kind; the session stays and keeps its state.
                with pytest.raises(CompilationError) as syntax:
                    await sandbox.execute_code("def f(:\n  pass", session_id=sid)
                assert syntax.value.name == "SyntaxError"
                with pytest.raises(RuntimeExecutionError) as runtime:
                    await sandbox.execute_code("print('before')\n1 / 0", session_id=sid)
                assert (runtime.value.name, runtime.value.result.stdout) == (
                    "ZeroDivisionError",
                    "before\n",
                )
                with pytest.raises(SystemExecutionError) as system:
                    await sandbox.execute_code(
                        "import time\ntime.sleep(30)", session_id=sid, timeout=1
                    )
                assert system.value.name == "TimeoutError"
                with pytest.raises(RuntimeExecutionError) as failed:
                    await sandbox.execute_command("echo oops >&2; exit 3", sid, check=True)
                assert (failed.value.name, failed.value.value) == ("exit status 3", "oops")
                assert (await sandbox.execute_code("print(x)", session_id=sid)).stdout == "100\n"

                # Concurrent calls in one session all run.
                outs = await asyncio.gather(
                    *(sandbox.execute_code(f"print({i})", session_id=sid) for i in range(4))
                )
                assert sorted(o.stdout for o in outs) == ["0\n", "1\n", "2\n", "3\n"]

                info = await sandbox.get_session_info(sid)
                assert (info.flavor, info.cpu, info.memory) == ("small", "1", "1Gi")
                assert info.idle_timeout == 600  # MSB_SESSION_TIMEOUT's place in the config
                assert set(info.languages) >= {"python", "javascript"}
                assert info.execution_count >= 10
                assert sid in [s.session_id for s in await sandbox.list_sessions()]
                stats = await sandbox.get_stats()
                assert stats.sessions.active >= 1
                assert stats.executions.count >= info.execution_count
            finally:
                assert await sandbox.stop_session(sid)
            assert not await sandbox.stop_session(sid)
            with pytest.raises(NotFoundError):
                await sandbox.get_session_info(sid)

    asyncio.run(main())


def test_concurrent_first_calls_make_one_session(daemon: Daemon) -> None:
    async def main() -> None:
        async with AsyncSessionManager(SessionConfig(server_url=daemon.url)) as sandbox:
            try:
                results = await asyncio.gather(
                    *(
                        sandbox.execute_code(f"print({i})", session_id="py-sdk-racing")
                        for i in range(4)
                    )
                )
                assert sorted(r.created for r in results) == [False, False, False, True]
                assert [s.session_id for s in await sandbox.list_sessions()].count(
                    "py-sdk-racing"
                ) == 1
            finally:
                await sandbox.stop_session("py-sdk-racing")

    asyncio.run(main())


def test_unknown_id_makes_the_session(daemon: Daemon) -> None:
    with SessionManager(SessionConfig(server_url=daemon.url)) as sandbox:
        res = sandbox.execute_command("pwd", session_id="py-sdk-chosen-id")
        try:
            assert (res.created, res.session_id, res.stdout) == (
                True,
                "py-sdk-chosen-id",
                "/workspace\n",
            )
            assert sandbox.execute_code("1", session_id="py-sdk-chosen-id").created is False
        finally:
            assert sandbox.stop_session("py-sdk-chosen-id")
        # Gone, the same id makes it anew: never an error.
        again = sandbox.execute_code("print('anew')", session_id="py-sdk-chosen-id")
        assert (again.created, again.stdout) == (True, "anew\n")
        assert sandbox.stop_session("py-sdk-chosen-id")


def test_session_files(daemon: Daemon, tmp_path: Path) -> None:
    with SessionManager(SessionConfig(server_url=daemon.url)) as sandbox:
        sid = sandbox.execute_code("import csv").session_id
        try:
            local = tmp_path / "data.csv"
            local.write_text("a,b\n1,2\n3,4\n")
            with local.open("rb") as f:
                info = sandbox.write_file(sid, "in/data.csv", f)
            assert (info.path, info.size) == ("/workspace/in/data.csv", local.stat().st_size)
            res = sandbox.execute_code(
                "rows = list(csv.DictReader(open('in/data.csv')))\n"
                "open('out.txt', 'w').write(str(sum(int(r['b']) for r in rows)))",
                session_id=sid,
            )
            assert res.success
            assert sandbox.read_file(sid, "/workspace/out.txt") == b"6"
            with pytest.raises(NotFoundError):
                sandbox.read_file(sid, "missing.txt")
        finally:
            sandbox.stop_session(sid)


@pytest.mark.parametrize("flavor", ["small", "medium", "large"])
def test_flavor_limits_seen_inside(daemon: Daemon, flavor: str) -> None:
    with SessionManager(SessionConfig(server_url=daemon.url, default_flavor=flavor)) as sandbox:
        res = sandbox.execute_command(CPU)
        try:
            quota, period = res.stdout.split()
            assert int(quota) / int(period) == FLAVORS[flavor].cpus, res.stdout
            memory = sandbox.execute_command(MEMORY, session_id=res.session_id)
            assert int(memory.stdout) == GIB[FLAVORS[flavor].memory]
            assert sandbox.get_session_info(res.session_id).flavor == flavor
        finally:
            sandbox.stop_session(res.session_id)


def test_resource_limit_past_max_sandboxes(limited_daemon: Daemon) -> None:
    with SessionManager(SessionConfig(server_url=limited_daemon.url)) as sandbox:
        ids = [f"py-sdk-limit-{i}" for i in range(MAX_SANDBOXES)]
        try:
            for sid in ids:
                assert sandbox.execute_code("1", session_id=sid).created
            with pytest.raises(ResourceLimitError) as info:
                sandbox.execute_code("1", session_id="py-sdk-limit-over")
            err = info.value
            assert (err.status_code, err.code) == (429, "RESOURCE_LIMIT")
            assert err.usage is not None
            assert (err.usage.sandboxes, err.usage.max_sandboxes) == (MAX_SANDBOXES, MAX_SANDBOXES)
            assert err.usage.sessions == MAX_SANDBOXES
            assert err.suggestion
            # Nothing was made, and the sessions there still serve.
            with pytest.raises(NotFoundError):
                sandbox.get_session_info("py-sdk-limit-over")
            assert sandbox.execute_code("print(2)", session_id=ids[0]).stdout == "2\n"
            # Stopping one makes room.
            assert sandbox.stop_session(ids[0])
            assert sandbox.execute_code("1", session_id="py-sdk-limit-over").created
            ids.append("py-sdk-limit-over")
        finally:
            for sid in ids:
                sandbox.stop_session(sid)


def test_insufficient_capacity(cramped_daemon: Daemon) -> None:
    """Large sessions past the host's committed cpu or memory: 507 with usage and a suggestion."""
    large = FLAVORS["large"]
    client = Client(cramped_daemon.url)
    res = client.stats.get().resources
    fit = min(
        (res.millicpu_capacity - res.millicpu_committed) // (large.cpus * 1000),
        (res.memory_bytes_capacity - res.memory_bytes_committed) // GIB[large.memory],
    )
    assert fit == 1, f"the cramped daemon fits {fit} large sessions, want 1: {res}"
    with client, SessionManager(client=client) as sandbox:
        made: list[str] = []
        try:
            for i in range(fit):
                made.append(sandbox.execute_command("true", f"py-sdk-cap-{i}", "large").session_id)
            with pytest.raises(InsufficientCapacityError) as info:
                sandbox.execute_command("true", "py-sdk-cap-over", "large")
            err = info.value
            assert (err.status_code, err.code) == (507, "INSUFFICIENT_CAPACITY")
            assert err.usage is not None
            assert (
                err.usage.millicpu + large.cpus * 1000 > err.usage.millicpu_capacity
                or err.usage.memory_bytes + GIB[large.memory] > err.usage.memory_bytes_capacity
            )
            assert err.suggestion
            # Nothing was made for the refused one.
            with pytest.raises(NotFoundError):
                sandbox.get_session_info("py-sdk-cap-over")
        finally:
            for sid in made:
                sandbox.stop_session(sid)


@pytest.mark.parametrize("session_id", ["py-sdk-shared", "py-sdk:odd+id", ".py-sdk-dot"])
def test_shared_volume_paths(limited_daemon: Daemon, shared_dir: Path, session_id: str) -> None:
    """What a session writes to its shared volume is where shared_path says, on the host."""
    config = SessionConfig.from_env(
        {"MSB_SERVER_URL": limited_daemon.url, "MSB_SHARED_VOLUME_PATH": f"{shared_dir}:/shared"}
    )
    with SessionManager(config) as sandbox:
        try:
            sandbox.execute_code(
                "open('/shared/out.txt', 'w').write('from the sandbox')", session_id=session_id
            )
            host = sandbox.shared_path(session_id, "/shared/out.txt")
            assert host.parent.parent == shared_dir
            assert host.read_text() == "from the sandbox"
            host.with_name("in.txt").write_text("from the host")
            cat = sandbox.execute_command(["cat", "/shared/in.txt"], session_id=session_id)
            assert cat.stdout == "from the host"
        finally:
            sandbox.stop_session(session_id)


def test_sessions_service_and_stats(client: Client) -> None:
    res = client.sessions.execute_code("print(7)", flavor="medium", timeout=20)
    try:
        assert (res.created, res.stdout, res.success) == (True, "7\n", True)
        cmd = client.sessions.execute_command("echo $A", session_id=res.session_id, env={"A": "b"})
        assert (cmd.created, cmd.stdout) == (False, "b\n")
        kept = client.sessions.keep_alive(res.session_id, idle_timeout=120)
        assert kept.idle_timeout == 120
        assert client.sessions.get(res.session_id).flavor == "medium"
        # Paged a session at a time, newest first, the pages make the whole list.
        listed = [s.session_id for s in client.sessions.list()]
        paged: list[str] = []
        cursor = None
        while True:
            page = client.sessions.list_page(limit=1, cursor=cursor, order="desc")
            paged += [s.session_id for s in page.items]
            if page.next_cursor is None:
                break
            cursor = page.next_cursor
        assert res.session_id in listed
        assert paged == listed[::-1]
        stats = client.stats.get()
        assert stats.sessions.active >= 1
        assert stats.sandboxes.get("running", 0) >= 1
        assert stats.resources.millicpu_committed >= 2000
    finally:
        assert client.sessions.delete(res.session_id).status == "deleted"


def test_configuration_from_the_environment(daemon: Daemon, tmp_path: Path) -> None:
    """A script configured by MSB_* variables alone, as seed 000's MCP servers are."""
    script = tmp_path / "mcp_like.py"
    script.write_text(
        "from agent2env.sessions import SessionManager\n"
        "with SessionManager() as s:\n"
        "    r = s.execute_code('import os; print(os.cpu_count() > 0)')\n"
        "    i = s.get_session_info(r.session_id)\n"
        "    print(r.stdout.strip(), i.flavor, i.idle_timeout)\n"
        "    s.stop_session(r.session_id)\n"
    )
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("AGENT2ENV_", "MSB_", "SANDBOX_"))
    }
    env |= {
        "MSB_SERVER_URL": daemon.url,
        "MSB_DEFAULT_FLAVOR": "medium",
        "MSB_SESSION_TIMEOUT": "5m",
        "PYTHONWARNINGS": "error",
    }
    proc = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "True medium 300.0\n"
