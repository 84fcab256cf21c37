"""The stock OpenSandbox Python SDK against agent2env (TestOpenSandboxSDK).

The connection comes from the environment, as the README tells users:
OPEN_SANDBOX_DOMAIN and OPEN_SANDBOX_API_KEY. Each mode prints one JSON
object on its last line, which the Go test checks:

  quickstart IMAGE  the SDK README's quickstart (create, commands.run,
                    destroy) plus a failing command and a
                    files.write_file/read_file round trip
  badkey IMAGE      Sandbox.create with a wrong API key: the error and
                    how long it took
  lifecycle IMAGE   metadata at create, the list filtered by state and
                    metadata with its pagination, renew, a metadata patch,
                    through Sandbox and SandboxManager
  unknown           SandboxManager.get_sandbox_info of an unknown id
  badimage IMAGE    Sandbox.create of an image that does not exist
"""

import asyncio
import json
import sys
import time
from datetime import datetime, timedelta, timezone

from opensandbox.config import ConnectionConfig
from opensandbox.exceptions import SandboxApiException, SandboxException
from opensandbox.manager import SandboxManager
from opensandbox.models.sandboxes import SandboxFilter
from opensandbox.sandbox import Sandbox


def failure(e: SandboxException, seconds: float) -> dict:
    return {
        "type": type(e).__name__,
        "status": e.status_code if isinstance(e, SandboxApiException) else None,
        "code": e.error.code if e.error else None,
        "message": e.error.message if e.error else str(e),
        "seconds": seconds,
    }


async def quickstart(image: str) -> dict:
    sandbox = await Sandbox.create(image, connection_config=ConnectionConfig())
    out: dict = {"id": sandbox.id}
    try:
        execution = await sandbox.commands.run("echo 'Hello Sandbox!'")
        out["stdout"] = execution.logs.stdout[0].text
        out["text"] = execution.text
        out["exit_code"] = execution.exit_code
        failed = await sandbox.commands.run("echo oops >&2; exit 3")
        out["failed_exit_code"] = failed.exit_code
        out["failed_stderr"] = "".join(m.text for m in failed.logs.stderr)
        await sandbox.files.write_file("/tmp/hello.txt", "Hello World")
        out["read"] = await sandbox.files.read_file("/tmp/hello.txt")
        info = await sandbox.get_info()
        out["state"] = info.status.state
    finally:
        await sandbox.destroy()
    return out


async def lifecycle(image: str) -> dict:
    sandbox = await Sandbox.create(image, metadata={"suite": "e2e", "run": "1"}, connection_config=ConnectionConfig())
    manager = await SandboxManager.create(ConnectionConfig())
    out: dict = {}
    try:
        info = await sandbox.get_info()
        out["metadata"] = info.metadata

        async def listed(f: SandboxFilter) -> dict:
            page = await manager.list_sandbox_infos(f)
            return {"ids": [i.id == sandbox.id for i in page.sandbox_infos], "total": page.pagination.total_items,
                    "pages": page.pagination.total_pages, "next": page.pagination.has_next_page}

        out["by_state_and_metadata"] = await listed(SandboxFilter(states=["Running"], metadata={"suite": "e2e"}))
        out["by_other_metadata"] = await listed(SandboxFilter(metadata={"suite": "other"}))
        out["by_other_state"] = await listed(SandboxFilter(states=["Paused"]))
        renewed = await sandbox.renew(timedelta(hours=2))
        left = renewed.expires_at - datetime.now(timezone.utc)
        out["renewed_hours"] = round(left.total_seconds() / 3600, 1)
        info = await sandbox.patch_metadata({"run": None, "owner": "ci"})
        out["patched"] = info.metadata
        info = await manager.get_sandbox_info(sandbox.id)
        out["expires_in_hours"] = round((info.expires_at - datetime.now(timezone.utc)).total_seconds() / 3600, 1)
    finally:
        await sandbox.destroy()
        await manager.close()
    return out


async def create_fails(image: str, config: ConnectionConfig) -> dict:
    start = time.monotonic()
    try:
        sandbox = await Sandbox.create(image, connection_config=config)
    except SandboxException as e:
        return failure(e, time.monotonic() - start)
    await sandbox.destroy()
    return {"type": None, "seconds": time.monotonic() - start}


async def unknown() -> dict:
    manager = await SandboxManager.create(ConnectionConfig())
    start = time.monotonic()
    try:
        info = await manager.get_sandbox_info("sb-does-not-exist")
        return {"type": None, "info": str(info)}
    except SandboxException as e:
        return failure(e, time.monotonic() - start)
    finally:
        await manager.close()


async def main() -> dict:
    mode = sys.argv[1]
    if mode == "quickstart":
        return await quickstart(sys.argv[2])
    if mode == "badkey":
        return await create_fails(sys.argv[2], ConnectionConfig(api_key="a2e_wrong-key-0123456789"))
    if mode == "badimage":
        return await create_fails(sys.argv[2], ConnectionConfig())
    if mode == "lifecycle":
        return await lifecycle(sys.argv[2])
    if mode == "unknown":
        return await unknown()
    raise SystemExit(f"unknown mode {mode}")


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main())))
