"""The stock OpenSandbox Python SDK's snapshots against agent2env.

TestOpenSandboxSnapshots runs it. The connection comes from the environment: OPEN_SANDBOX_DOMAIN and
OPEN_SANDBOX_API_KEY. `opensandbox_snapshot.py IMAGE` makes a sandbox with
a file and a background loop counting into /tmp/n, snapshots it with
Sandbox.create_snapshot, refuses a named one, reads the snapshot back
through SandboxManager (get, list by sandbox, by state, by name), makes a
sandbox from it with Sandbox.create(snapshot_id=...) (the file there, the
loop still counting from where it was: its memory restored), refuses one
with other resources, and deletes it all. It prints one JSON object, which
the Go test checks.
"""

import asyncio
import json
import sys
from typing import Any

from opensandbox.config import ConnectionConfig
from opensandbox.exceptions import SandboxApiException, SandboxException
from opensandbox.manager import SandboxManager
from opensandbox.models.execd import RunCommandOpts
from opensandbox.models.sandboxes import SnapshotFilter
from opensandbox.sandbox import Sandbox

# A loop counting into /tmp/n, its count held in memory. Each count is
# renamed into place: a snapshot taken between a truncation and its write
# would keep an empty file.
COUNTER = (
    "python3 -c 'import os, time\nn = 0\nwhile True:\n    n += 1\n"
    '    open("/tmp/n.new", "w").write(str(n))\n    os.replace("/tmp/n.new", "/tmp/n")\n'
    "    time.sleep(0.05)'"
)


def refusal(e: SandboxException) -> str:
    status = e.status_code if isinstance(e, SandboxApiException) else None
    message = e.error.message if e.error else str(e)
    return f"{status} {message}"


async def flow(image: str) -> dict[str, Any]:
    sandbox = await Sandbox.create(image, connection_config=ConnectionConfig())
    manager = await SandboxManager.create(ConnectionConfig())
    out: dict[str, Any] = {}
    restored = None
    try:
        await sandbox.files.write_file("/workspace/kept.txt", "kept")
        await sandbox.commands.run(COUNTER, opts=RunCommandOpts(background=True))
        await asyncio.sleep(0.5)
        before = int((await sandbox.commands.run("cat /tmp/n")).text)
        snap = await sandbox.create_snapshot()
        out["state"] = snap.status.state
        out["of_sandbox"] = snap.sandbox_id == sandbox.id
        try:
            await sandbox.create_snapshot(name="before-import")
            out["named"] = "made"
        except SandboxException as e:
            out["named"] = refusal(e)
        out["get_state"] = (await manager.get_snapshot(snap.id)).status.state
        page = await manager.list_snapshots(SnapshotFilter(sandbox_id=sandbox.id))
        out["listed"] = [s.id == snap.id for s in page.snapshot_infos]
        out["listed_total"] = page.pagination.total_items
        failed = await manager.list_snapshots(SnapshotFilter(states=["Failed"]))
        out["failed_total"] = failed.pagination.total_items
        named = await manager.list_snapshots(SnapshotFilter(name="before-import"))
        out["named_total"] = named.pagination.total_items

        restored = await Sandbox.create(snapshot_id=snap.id, connection_config=ConnectionConfig())
        out["restored_state"] = (await restored.get_info()).status.state
        out["file"] = await restored.files.read_file("/workspace/kept.txt")
        first = int((await restored.commands.run("cat /tmp/n")).text)
        await asyncio.sleep(0.5)
        second = int((await restored.commands.run("cat /tmp/n")).text)
        # The loop, which nothing starts again, runs on in the restored
        # sandbox from its count at the snapshot: its memory was restored.
        out["counting_on"] = second > first
        out["count_restored"] = first >= before
        try:
            other = await Sandbox.create(
                snapshot_id=snap.id,
                resource={"cpu": "2", "memory": "2Gi"},
                connection_config=ConnectionConfig(),
            )
            await other.destroy()
            out["other_resources"] = "made"
        except SandboxException as e:
            out["other_resources"] = refusal(e)
        await manager.delete_snapshot(snap.id)
        try:
            await manager.get_snapshot(snap.id)
            out["deleted"] = "still there"
        except SandboxException as e:
            out["deleted"] = refusal(e).split(" ")[0]
    finally:
        if restored is not None:
            await restored.destroy()
        await sandbox.destroy()
        await manager.close()
    return out


if __name__ == "__main__":
    print(json.dumps(asyncio.run(flow(sys.argv[1]))))
