"""Pause, resume and snapshots through the SDK against a daemon with criu (``serve --criu``).

The model is the daemon's own end-to-end test (internal/e2e/snapshot_test.go):
a process holding a value in memory and serving it on the sandbox's
loopback, a shell's variable and a file are all in the sandboxes made from
a snapshot, while the sandbox it was taken of runs on and keeps its writes
to itself.
"""

from __future__ import annotations

import asyncio
import textwrap

import pytest

from agent2env import AsyncClient, Client, ConflictError, NotFoundError
from agent2env.models import SandboxStatus, SnapshotStatus

from .conftest import IMAGE, REPO, Daemon
from .test_daemon import readme_code, run_script

pytestmark = pytest.mark.integration

# The image has no curl: get.py prints what a GET of its URL answers.
SETUP = textwrap.dedent("""\
    echo hello > /workspace/f
    cat > /tmp/get.py <<'PY'
    import sys, urllib.request
    print(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode(), end="")
    PY
    cat > /tmp/hold.py <<'PY'
    import http.server
    x = 41
    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = str(x + 1).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
    http.server.HTTPServer(("127.0.0.1", 8000), H).serve_forever()
    PY
    setsid python3 /tmp/hold.py </dev/null >/dev/null 2>&1 &
    setsid bash -c 'v=from-memory; trap "echo \\$v > /workspace/v" USR1
        while :; do sleep 0.1; done' </dev/null >/dev/null 2>&1 &
    echo $! > /workspace/shell.pid
    for i in $(seq 100); do
        python3 /tmp/get.py http://127.0.0.1:8000/ 2>/dev/null && exit 0; sleep 0.1
    done
    exit 1
""")
# What a sandbox made from the snapshot answers: the process's 42, the file,
# the shell's variable (it writes it on SIGUSR1).
CHECK = textwrap.dedent("""\
    python3 /tmp/get.py http://127.0.0.1:8000/; echo; cat /workspace/f
    kill -USR1 $(cat /workspace/shell.pid)
    for i in $(seq 50); do [ -s /workspace/v ] && break; sleep 0.1; done; cat /workspace/v
""")


def test_pause_snapshot_restore(criu_daemon: Daemon) -> None:
    with Client(criu_daemon.url, timeout=60) as client:
        caps = client.capabilities()
        assert (caps.runtime, caps.pause, caps.snapshots) == ("oci", True, True)
        sb = client.sandbox.create_from_image(IMAGE, metadata={"role": "parent"})
        made = [sb.id]
        try:
            res = client.sandbox.execute(sb.id, ["bash", "-c", SETUP])
            assert (res.exit_code, res.stdout) == (0, "42"), res

            # Pause and resume: frozen, out of reach, then on where it was.
            assert client.sandbox.pause(sb.id).status is SandboxStatus.PAUSED
            with pytest.raises(ConflictError) as info:
                client.sandbox.execute(sb.id, ["true"])
            assert info.value.code == "SANDBOX_NOT_READY"
            with pytest.raises(ConflictError):
                client.sandbox.pause(sb.id)
            # A paused sandbox is snapshotted as it is, and stays paused.
            paused_snap = client.sandbox.snapshot(sb.id)
            assert client.sandbox.get(sb.id).status is SandboxStatus.PAUSED
            assert client.sandbox.resume(sb.id).status is SandboxStatus.RUNNING
            with pytest.raises(ConflictError):
                client.sandbox.resume(sb.id)

            # A live snapshot: the parent runs on.
            snap = client.sandbox.snapshot(sb.id)
            assert snap.sandbox_id == sb.id
            assert snap.image == IMAGE
            assert snap.status is SnapshotStatus.READY
            assert snap.size_bytes > 0
            assert (snap.cpu, snap.memory, snap.stopped) == (sb.cpu, sb.memory, False)
            assert client.sandbox.get(sb.id).status is SandboxStatus.RUNNING
            res = client.sandbox.execute(
                sb.id,
                [
                    "bash",
                    "-c",
                    "echo changed > /workspace/f; python3 /tmp/get.py http://127.0.0.1:8000/",
                ],
            )
            assert res.stdout == "42", res

            # Two sandboxes from it: each has it all, and keeps its writes.
            copies = [
                client.sandbox.create_from_snapshot(snap.id, ttl=600, metadata={"rollout": str(i)})
                for i in range(2)
            ]
            made += [c.id for c in copies]
            for i, copy in enumerate(copies):
                assert copy.id != sb.id
                assert copy.status is SandboxStatus.RUNNING
                assert copy.metadata == {"rollout": str(i)}
                res = client.sandbox.execute(copy.id, ["bash", "-c", CHECK])
                assert (res.exit_code, res.stdout) == (0, "42\nhello\nfrom-memory\n"), res
                client.sandbox.upload_file(copy.id, "mine", str(i))
            for i, copy in enumerate(copies):
                assert client.sandbox.download_file(copy.id, "mine") == str(i).encode()
            with pytest.raises(NotFoundError):
                client.sandbox.download_file(sb.id, "mine")
            assert client.sandbox.download_file(sb.id, "f") == b"changed\n"
            # The paused sandbox's snapshot comes back running.
            again = client.sandbox.create_from_snapshot(paused_snap.id)
            made.append(again.id)
            assert again.status is SandboxStatus.RUNNING
            res = client.sandbox.execute(again.id, ["bash", "-c", CHECK])
            assert res.stdout == "42\nhello\nfrom-memory\n", res

            # Listed newest first, by sandbox; read one by one.
            listed = client.snapshots.list(sandbox_id=sb.id)
            assert [s.id for s in listed] == [snap.id, paused_snap.id]
            # A page of one, oldest first, and the next.
            first = client.snapshots.list_page(sandbox_id=sb.id, limit=1, order="asc")
            assert [s.id for s in first.items] == [paused_snap.id]
            last = client.snapshots.list_page(
                sandbox_id=sb.id, limit=1, order="asc", cursor=first.next_cursor
            )
            assert ([s.id for s in last.items], last.next_cursor) == ([snap.id], None)
            assert {s.id for s in client.snapshots.list()} >= {snap.id, paused_snap.id}
            assert client.snapshots.list(sandbox_id=copies[0].id) == []
            assert client.snapshots.get(snap.id) == snap

            # Stopped once saved: the memory freed, the sandbox succeeded.
            stopped = client.sandbox.snapshot(copies[0].id, stop=True)
            assert stopped.stopped is True
            assert client.sandbox.get(copies[0].id).status is SandboxStatus.SUCCEEDED
            with pytest.raises(ConflictError):
                client.sandbox.snapshot(copies[0].id)
            third = client.sandbox.create_from_snapshot(stopped.id)
            made.append(third.id)
            assert client.sandbox.download_file(third.id, "mine") == b"0"

            # Deleting snapshots leaves the sandboxes made from them.
            for s in (snap, paused_snap, stopped):
                client.snapshots.delete(s.id)
            with pytest.raises(NotFoundError):
                client.snapshots.get(snap.id)
            with pytest.raises(NotFoundError):
                client.snapshots.delete(snap.id)
            with pytest.raises(NotFoundError):
                client.sandbox.create_from_snapshot(snap.id)
            assert client.sandbox.execute(copies[1].id, ["cat", "mine"]).stdout == "1"
        finally:
            for sandbox_id in made:
                client.sandbox.delete(sandbox_id)
        assert client.snapshots.list(sandbox_id=sb.id) == []


def test_async_snapshot(criu_daemon: Daemon) -> None:
    async def run() -> None:
        async with AsyncClient(criu_daemon.url, timeout=60) as client:
            sb = await client.sandbox.create_from_image(IMAGE)
            made = [sb.id]
            try:
                await client.sandbox.upload_file(sb.id, "state", "kept")
                snap = await client.sandbox.snapshot(sb.id, stop=True)
                assert (await client.sandbox.get(sb.id)).status is SandboxStatus.SUCCEEDED
                copy = await client.sandbox.create_from_snapshot(snap.id)
                made.append(copy.id)
                assert await client.sandbox.download_file(copy.id, "state") == b"kept"
                assert [s.id for s in await client.snapshots.list(sandbox_id=sb.id)] == [snap.id]
                await client.snapshots.delete(snap.id)
            finally:
                for sandbox_id in made:
                    await client.sandbox.delete(sandbox_id)

    asyncio.run(run())


def test_readme_snapshots(criu_daemon: Daemon) -> None:
    out = run_script(criu_daemon, readme_code("### Snapshots"))
    assert out == "0 prepared True\n1 prepared True\n2 prepared True\nTrue\n", out


def test_repository_readme_snapshots(criu_daemon: Daemon) -> None:
    """The Python example of the repository's README, section Snapshots."""
    out = run_script(criu_daemon, readme_code("### Snapshots", REPO / "README.md"))
    assert out == "{'prepared'}\n1\n", out
