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
  code IMAGE        the code-interpreter quickstart (opensandbox-code-interpreter):
                    CodeInterpreter.create, x = 1 then x + 1, an exception,
                    a matplotlib chart (its PNG in the raw result stream and
                    as a saved file read back), the default context, bash,
                    contexts listed and deleted, a run interrupted
  background IMAGE  a background command: its status while it runs and
                    after, its logs read by cursor in two steps, a
                    background sleep 100 interrupted, a foreground
                    command killed by a signal and one interrupted, a
                    foreground command's status while it runs and after
                    (its logs refused, as stock execd's)
  files IMAGE       files: info, search, list, replace, mv, permissions,
                    directories made and deleted (a file with them), files deleted (and
                    missing ones, which is no failure), a ranged
                    and a line-based read, a 10 MB upload and its last bytes
                    by a range
  pause IMAGE       pause with a file written and a background loop that
                    counts: the state and the list while paused, a command
                    refused, Sandbox.resume, the file, the loop running on
                    with its count (no restart) and a gap as long as the
                    pause
  metrics IMAGE     get_metrics while a command keeps a CPU busy, and the
                    egress policy: deny-all at create, read, patched with
                    a deny rule, an allow rule refused, rules deleted
  egress IMAGE      a networkPolicy allowing *.allowed.test: from inside,
                    a denied host refused by the egress proxy (403), an
                    allowed one let through (the proxy dials it: 502, as
                    it does not resolve here), the policy read back, a
                    rule that holds accepted and one that would change it
                    refused; a CIDR target refused at create, naming the
                    field
  session IMAGE     a bash session: its directory, variables and cwd kept
                    from run to run, exit codes, a run's own cwd, a
                    timeout, two runs at once, delete
"""

import asyncio
import base64
import json
import sys
import time
from datetime import datetime, timedelta, timezone
from typing import Any

import httpx
from code_interpreter import CodeInterpreter
from code_interpreter.models.code import SupportedLanguage
from opensandbox.config import ConnectionConfig
from opensandbox.exceptions import SandboxApiException, SandboxException
from opensandbox.manager import SandboxManager
from opensandbox.models.execd import Execution, ExecutionHandlers, ExecutionInit, RunCommandOpts
from opensandbox.models.filesystem import (
    ContentReplaceEntry,
    DirectoryListEntry,
    MoveEntry,
    SearchEntry,
    SetPermissionEntry,
    WriteEntry,
)
from opensandbox.models.sandboxes import NetworkPolicy, NetworkRule, SandboxFilter
from opensandbox.sandbox import Sandbox


def failure(e: SandboxException, seconds: float) -> dict[str, Any]:
    return {
        "type": type(e).__name__,
        "status": e.status_code if isinstance(e, SandboxApiException) else None,
        "code": e.error.code if e.error else None,
        "message": e.error.message if e.error else str(e),
        "seconds": seconds,
    }


async def quickstart(image: str) -> dict[str, Any]:
    sandbox = await Sandbox.create(image, connection_config=ConnectionConfig())
    out: dict[str, Any] = {"id": sandbox.id}
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


async def lifecycle(image: str) -> dict[str, Any]:
    sandbox = await Sandbox.create(
        image, metadata={"suite": "e2e", "run": "1"}, connection_config=ConnectionConfig()
    )
    manager = await SandboxManager.create(ConnectionConfig())
    out: dict[str, Any] = {}
    try:
        info = await sandbox.get_info()
        out["metadata"] = info.metadata

        async def listed(f: SandboxFilter) -> dict[str, Any]:
            page = await manager.list_sandbox_infos(f)
            return {
                "ids": [i.id == sandbox.id for i in page.sandbox_infos],
                "total": page.pagination.total_items,
                "pages": page.pagination.total_pages,
                "next": page.pagination.has_next_page,
            }

        out["by_state_and_metadata"] = await listed(
            SandboxFilter(states=["Running"], metadata={"suite": "e2e"})
        )
        out["by_other_metadata"] = await listed(SandboxFilter(metadata={"suite": "other"}))
        out["by_other_state"] = await listed(SandboxFilter(states=["Paused"]))
        renewed = await sandbox.renew(timedelta(hours=2))
        left = renewed.expires_at - datetime.now(timezone.utc)
        out["renewed_hours"] = round(left.total_seconds() / 3600, 1)
        info = await sandbox.patch_metadata({"run": None, "owner": "ci"})
        out["patched"] = info.metadata
        info = await manager.get_sandbox_info(sandbox.id)
        out["expires_in_hours"] = round(
            (info.expires_at - datetime.now(timezone.utc)).total_seconds() / 3600, 1
        )
    finally:
        await sandbox.destroy()
        await manager.close()
    return out


async def create_fails(image: str, config: ConnectionConfig) -> dict[str, Any]:
    start = time.monotonic()
    try:
        sandbox = await Sandbox.create(image, connection_config=config)
    except SandboxException as e:
        return failure(e, time.monotonic() - start)
    await sandbox.destroy()
    return {"type": None, "seconds": time.monotonic() - start}


async def unknown() -> dict[str, Any]:
    manager = await SandboxManager.create(ConnectionConfig())
    start = time.monotonic()
    try:
        info = await manager.get_sandbox_info("sb-does-not-exist")
        return {"type": None, "info": str(info)}
    except SandboxException as e:
        return failure(e, time.monotonic() - start)
    finally:
        await manager.close()


CHART = """
import matplotlib
import matplotlib.pyplot as plt
plt.plot([1, 2, 3], [1, 4, 9])
plt.savefig('/tmp/chart.png')
plt.show()
"""

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


async def raw_results(sandbox: Sandbox, code: str, context_id: str) -> list[dict[str, Any]]:
    """POST /code as the JS SDK does, keeping every result's MIME bundle.

    The Python SDK keeps only results.text.
    """
    endpoint = await sandbox.get_endpoint(44772)
    config = ConnectionConfig()
    async with httpx.AsyncClient(timeout=120) as client:
        resp = await client.post(
            f"{config.protocol}://{endpoint.endpoint}/code",
            json={"code": code, "context": {"id": context_id, "language": "python"}},
            headers=endpoint.build_request_headers(config),
        )
    resp.raise_for_status()
    events = [json.loads(line) for line in resp.text.splitlines() if line.strip()]
    return [e["results"] for e in events if e["type"] == "result"]


async def code(image: str) -> dict[str, Any]:
    sandbox = await Sandbox.create(
        image,
        entrypoint=["/opt/code-interpreter/code-interpreter.sh"],
        connection_config=ConnectionConfig(),
    )
    out: dict[str, Any] = {}
    try:
        start = time.monotonic()
        interpreter = await CodeInterpreter.create(sandbox)
        out["ready_seconds"] = time.monotonic() - start
        codes = interpreter.codes
        ctx = await codes.create_context(SupportedLanguage.PYTHON)
        out["context_language"] = ctx.language
        first = await codes.run("x = 1", context=ctx)
        out["first_error"] = first.error.name if first.error else None
        second = await codes.run("x + 1", context=ctx)
        out["x_plus_1"] = second.result[0].text if second.result else None
        out["execution_count"] = second.execution_count
        failed = await codes.run("1 / 0", context=ctx)
        out["error_name"] = failed.error.name if failed.error else None
        out["error_value"] = failed.error.value if failed.error else None
        out["traceback_mentions"] = any(
            "ZeroDivisionError" in line for line in (failed.error.traceback if failed.error else [])
        )
        printed = await codes.run("print('hello from python')", context=ctx)
        out["stdout"] = "".join(m.text for m in printed.logs.stdout)
        chart = await codes.run(CHART, context=ctx)
        out["chart_error"] = chart.error.name if chart.error else None
        saved = await sandbox.files.read_bytes("/tmp/chart.png")
        out["saved_png"] = saved.startswith(PNG_MAGIC)
        bundles = await raw_results(sandbox, CHART, ctx.id)
        pngs = [base64.b64decode(b["image/png"]) for b in bundles if "image/png" in b]
        out["raw_png"] = bool(pngs) and pngs[0].startswith(PNG_MAGIC)
        # Interrupt a run by the id of its init event: the kernel's state
        # is kept.
        started: asyncio.Queue = asyncio.Queue()

        async def on_init(init: ExecutionInit) -> None:
            await started.put(init.id)

        loop = asyncio.create_task(
            codes.run(
                "import time\nwhile True:\n    time.sleep(0.05)",
                context=ctx,
                handlers=ExecutionHandlers(on_init=on_init),
            )
        )
        execution_id = await asyncio.wait_for(started.get(), 30)
        await asyncio.sleep(0.5)
        await codes.interrupt(execution_id)
        interrupted = await asyncio.wait_for(loop, 30)
        out["interrupted_error"] = interrupted.error.name if interrupted.error else None
        after = await codes.run("x", context=ctx)
        out["after_interrupt"] = after.result[0].text if after.result else None
        # Without a context: the language's default context, kept.
        await codes.run("y = 21")
        doubled = await codes.run("y * 2")
        out["default_context"] = doubled.result[0].text if doubled.result else None
        bash = await codes.create_context(SupportedLanguage.BASH)
        echoed = await codes.run("echo hi from bash", context=bash)
        out["bash_stdout"] = "".join(m.text for m in echoed.logs.stdout)
        try:
            await codes.create_context(SupportedLanguage.JAVA)
            out["java"] = "created"
        except SandboxException as e:
            out["java"] = e.status_code if isinstance(e, SandboxApiException) else str(e)
        listed = await codes.list_contexts(SupportedLanguage.PYTHON)
        out["listed_has_ctx"] = any(c.id == ctx.id for c in listed)
        await codes.delete_context(ctx.id)
        try:
            await codes.get_context(ctx.id)
            out["deleted"] = False
        except SandboxException:
            out["deleted"] = True
        await codes.delete_contexts(SupportedLanguage.BASH)
        out["bash_left"] = len(await codes.list_contexts(SupportedLanguage.BASH))
    finally:
        await sandbox.destroy()
    return out


async def files(image: str) -> dict[str, Any]:
    sandbox = await Sandbox.create(image, connection_config=ConnectionConfig())
    out: dict[str, Any] = {}
    fs = sandbox.files
    try:
        await fs.write_file("/workspace/notes/a.txt", "one two one\nline 2\nline 3\n", mode=644)
        await fs.write_file("/workspace/notes/b.py", "print(1)\n")
        info = (await fs.get_file_info(["/workspace/notes/a.txt"]))["/workspace/notes/a.txt"]
        out["info"] = {
            "size": info.size,
            "mode": info.mode,
            "type": info.entry_type,
            "owner": info.owner,
            "group": info.group,
        }
        found = await fs.search(SearchEntry(path="/workspace", pattern="*.txt"))
        out["search"] = sorted(e.path for e in found)
        listed = await fs.list_directory(DirectoryListEntry(path="/workspace/notes"))
        out["list"] = sorted(e.path for e in listed)
        replaced = await fs.replace_contents_detailed(
            [ContentReplaceEntry(path="/workspace/notes/a.txt", old_content="one", new_content="1")]
        )
        out["replaced"] = [r.replaced_count for r in replaced]
        out["after_replace"] = await fs.read_file("/workspace/notes/a.txt")
        out["range"] = (
            await fs.read_bytes("/workspace/notes/a.txt", range_header="bytes=2-4")
        ).decode()
        out["lines"] = await fs.read_file("/workspace/notes/a.txt", offset=2, limit=1)
        await fs.move_files([MoveEntry(src="/workspace/notes/a.txt", dest="/workspace/moved.txt")])
        out["moved"] = await fs.read_file("/workspace/moved.txt")
        await fs.set_permissions([SetPermissionEntry(path="/workspace/moved.txt", mode=600)])
        moved = (await fs.get_file_info(["/workspace/moved.txt"]))["/workspace/moved.txt"]
        out["mode_after_chmod"] = moved.mode
        try:
            await fs.set_permissions(
                [SetPermissionEntry(path="/workspace/moved.txt", mode=600, owner="root")]
            )
            out["chown_root"] = "allowed"
        except SandboxApiException as e:
            out["chown_root"] = e.status_code
        await fs.create_directories([WriteEntry(path="/workspace/d1/d2", mode=700)])
        d2 = (await fs.get_file_info(["/workspace/d1/d2"]))["/workspace/d1/d2"]
        out["dir"] = {"mode": d2.mode, "type": d2.entry_type}
        # As execd's os.RemoveAll: a path gone already is no failure
        # (/workspace/d1 twice, /workspace/none), and a file goes too.
        await fs.write_file("/workspace/plain.txt", "plain")
        await fs.delete_directories(
            ["/workspace/d1", "/workspace/d1", "/workspace/none", "/workspace/plain.txt"]
        )
        # A link to a directory is no file: a 400, the link and the
        # directory left (stock execd refuses it with a 500); as a
        # directory, the link alone goes.
        await sandbox.commands.run("ln -s /workspace/notes /workspace/notes-link")
        try:
            await fs.delete_files(["/workspace/notes-link"])
            out["delete_link_to_dir"] = "deleted"
        except SandboxApiException as e:
            out["delete_link_to_dir"] = e.status_code
        await fs.delete_directories(["/workspace/notes-link"])
        await fs.delete_files(["/workspace/moved.txt", "/workspace/notes/b.py", "/workspace/none"])
        await fs.delete_files(["/workspace/moved.txt"])
        remaining = await fs.list_directory(DirectoryListEntry(path="/workspace", depth=3))
        out["remaining"] = sorted(e.path for e in remaining)
        try:
            await fs.get_file_info(["/workspace/moved.txt"])
            out["deleted_info"] = "found"
        except SandboxApiException as e:
            out["deleted_info"] = e.status_code
        # 10 MB up, then its last bytes by a range (the agent reads from
        # the range's start).
        big = bytes(i % 251 for i in range(10 << 20))
        await fs.write_file("/workspace/big.bin", big)
        size = len(big)
        tail = await fs.read_bytes(
            "/workspace/big.bin", range_header=f"bytes={size - 10}-{size - 1}"
        )
        out["big_tail"] = tail == big[-10:]
        out["big_size"] = str(
            (await fs.get_file_info(["/workspace/big.bin"]))["/workspace/big.bin"].size
        )
    finally:
        await sandbox.destroy()
    return out


async def background(image: str) -> dict[str, Any]:
    sandbox = await Sandbox.create(image, connection_config=ConnectionConfig())
    out: dict[str, Any] = {}
    bg = RunCommandOpts(background=True)
    try:
        execution = await sandbox.commands.run(
            "echo first; sleep 1; echo second >&2; exit 4", opts=bg
        )
        cid = execution.id
        status = await sandbox.commands.get_command_status(cid)
        out["content"] = status.content
        out["running"] = status.running
        out["running_exit_code"] = status.exit_code
        out["running_finished"] = status.finished_at is not None
        deadline = time.monotonic() + 10
        logs = await sandbox.commands.get_background_command_logs(cid)
        while not logs.content and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
            logs = await sandbox.commands.get_background_command_logs(cid)
        out["logs1"], out["cursor1"] = logs.content, logs.cursor
        while status.running and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
            status = await sandbox.commands.get_command_status(cid)
        out["ended_running"] = status.running
        out["exit_code"] = status.exit_code
        out["finished"] = status.finished_at is not None and status.finished_at >= status.started_at
        rest = await sandbox.commands.get_background_command_logs(cid, cursor=logs.cursor)
        out["logs2"], out["cursor2"] = rest.content, rest.cursor

        sleeper = await sandbox.commands.run("sleep 100", opts=bg)
        start = time.monotonic()
        await sandbox.commands.interrupt(sleeper.id)
        out["interrupt_seconds"] = time.monotonic() - start
        status = await sandbox.commands.get_command_status(sleeper.id)
        out["interrupted_running"] = status.running
        out["interrupted_exit_code"] = status.exit_code
        out["interrupted_error"] = status.error
        # A foreground command a signal ended.
        killed = await sandbox.commands.run("kill -TERM $$")
        out["killed_exit_code"] = killed.exit_code
        out["killed_error"] = killed.error.traceback if killed.error else None
        # A foreground command interrupted by the id of its init event.
        started: asyncio.Queue = asyncio.Queue()

        async def on_init(init: ExecutionInit) -> None:
            await started.put(init.id)

        running = asyncio.create_task(
            sandbox.commands.run("sleep 100", handlers=ExecutionHandlers(on_init=on_init))
        )
        execution_id = await asyncio.wait_for(started.get(), 30)
        start = time.monotonic()
        await sandbox.commands.interrupt(execution_id)
        stopped = await asyncio.wait_for(running, 30)
        out["fg_interrupt_seconds"] = time.monotonic() - start
        out["fg_interrupted_exit_code"] = stopped.exit_code
        out["fg_interrupted_error"] = stopped.error.traceback if stopped.error else None
        status = await sandbox.commands.get_command_status(execution_id)
        out["fg_interrupted_status"] = [status.running, status.exit_code, status.error]
        # A foreground command's status by the id of its init event, while
        # it runs and once it has ended; its logs went to its stream.
        running = asyncio.create_task(
            sandbox.commands.run("sleep 1; echo hi", handlers=ExecutionHandlers(on_init=on_init))
        )
        execution_id = await asyncio.wait_for(started.get(), 30)
        status = await sandbox.commands.get_command_status(execution_id)
        out["fg_running"] = [status.content, status.running, status.exit_code, status.finished_at]
        done = await asyncio.wait_for(running, 30)
        status = await sandbox.commands.get_command_status(execution_id)
        out["fg_ended"] = [
            done.logs.stdout[0].text if done.logs.stdout else None,
            status.running,
            status.exit_code,
            status.finished_at is not None and status.finished_at >= status.started_at,
        ]
        try:
            await sandbox.commands.get_background_command_logs(execution_id)
        except SandboxApiException as e:
            out["fg_logs_status"] = e.status_code
        try:
            await sandbox.commands.get_command_status("proc-unknown")
        except SandboxApiException as e:
            out["unknown_status"] = e.status_code
    finally:
        await sandbox.destroy()
    return out


# Counts into /tmp/count, one line a turn: the turn and the kernel's clock.
COUNTER = (
    "i=0; while :; do i=$((i+1)); read up _ </proc/uptime; "
    'echo "$i $up" >>/tmp/count; sleep 0.05; done'
)

# Checks /tmp/count: its lines, whether each counts one more than the last
# (no restart: the loop's memory kept), and the longest gap between turns.
CHECK = """python3 -c '
lines = [l.split() for l in open("/tmp/count")]
ok = all(int(n) == i + 1 for i, (n, _) in enumerate(lines))
gap = max(float(b[1]) - float(a[1]) for a, b in zip(lines, lines[1:]))
print(len(lines), ok, round(gap, 2))'"""


async def pause(image: str) -> dict[str, Any]:
    sandbox = await Sandbox.create(image, connection_config=ConnectionConfig())
    manager = await SandboxManager.create(ConnectionConfig())
    out: dict[str, Any] = {}
    try:
        await sandbox.files.write_file("/workspace/kept.txt", "kept")
        counter = await sandbox.commands.run(COUNTER, opts=RunCommandOpts(background=True))
        await asyncio.sleep(0.5)
        await sandbox.pause()
        out["state"] = (await sandbox.get_info()).status.state
        page = await manager.list_sandbox_infos(SandboxFilter(states=["Paused"]))
        out["listed_paused"] = [i.id == sandbox.id for i in page.sandbox_infos]
        try:
            await sandbox.commands.run("true")
            out["run_while_paused"] = "ran"
        except SandboxException as e:
            out["run_while_paused"] = type(e).__name__
        await asyncio.sleep(1)
        resumed = await Sandbox.resume(sandbox.id, connection_config=ConnectionConfig())
        out["resumed_state"] = (await resumed.get_info()).status.state
        out["file"] = await resumed.files.read_file("/workspace/kept.txt")
        out["counter_running"] = (await resumed.commands.get_command_status(counter.id)).running
        first = (await resumed.commands.run(CHECK)).text.split()
        await asyncio.sleep(0.5)
        n, ok, gap = (await resumed.commands.run(CHECK)).text.split()
        out["counting_on"] = int(n) > int(first[0])
        out["count_kept"] = ok
        out["gap"] = float(gap)
    finally:
        await sandbox.destroy()
        await manager.close()
    return out


async def session(image: str) -> dict[str, Any]:
    sandbox = await Sandbox.create(image, connection_config=ConnectionConfig())
    out: dict[str, Any] = {}
    cmds = sandbox.commands

    def stdout(execution: Execution) -> str:
        return "".join(m.text for m in execution.logs.stdout)

    try:
        sid = await cmds.create_session(working_directory="/workspace/sess")
        out["pwd"] = stdout(await cmds.run_in_session(sid, "pwd"))
        await cmds.run_in_session(sid, "export A=1; B=2; cd /tmp; f() { echo f$1; }")
        kept = await cmds.run_in_session(sid, 'echo "$A $B $PWD $(f 3)"')
        out["kept"], out["kept_exit_code"] = stdout(kept), kept.exit_code
        failed = await cmds.run_in_session(sid, "echo before; exit 3; echo after")
        out["failed"], out["failed_exit_code"] = stdout(failed), failed.exit_code
        out["after_exit"] = stdout(await cmds.run_in_session(sid, 'echo "$A $PWD"'))
        out["own_cwd"] = stdout(
            await cmds.run_in_session(sid, "pwd", working_directory="/workspace")
        )
        start = time.monotonic()
        slow = await cmds.run_in_session(sid, "sleep 30", timeout=timedelta(seconds=1))
        out["timeout_exit_code"], out["timeout_seconds"] = slow.exit_code, time.monotonic() - start
        # Two runs at once take turns, in order of arrival: the second is
        # sent once the first runs (on a loaded host the first's request
        # can take longer than any fixed delay to arrive).
        first = asyncio.create_task(
            cmds.run_in_session(
                sid, "touch /tmp/started; sleep 2; echo $SECONDS > /tmp/first; echo one"
            )
        )
        for _ in range(200):
            probe = await sandbox.commands.run("test -e /tmp/started")
            if probe.exit_code == 0:
                break
            await asyncio.sleep(0.05)
        second = await cmds.run_in_session(sid, "cat /tmp/first >/dev/null && echo two")
        out["turns"] = [stdout(await first), stdout(second)]
        await cmds.delete_session(sid)
        try:
            await cmds.run_in_session(sid, "pwd")
            out["deleted_run"] = "ran"
        except SandboxApiException as e:
            out["deleted_run"] = e.status_code
    finally:
        await sandbox.destroy()
    return out


async def metrics(image: str) -> dict[str, Any]:
    deny = NetworkPolicy(
        defaultAction="deny", egress=[NetworkRule(action="deny", target="*.example.com")]
    )
    sandbox = await Sandbox.create(image, network_policy=deny, connection_config=ConnectionConfig())
    out: dict[str, Any] = {}
    try:
        idle = await sandbox.get_metrics()
        await sandbox.commands.run(
            "timeout 20 sh -c 'while :; do :; done'", opts=RunCommandOpts(background=True)
        )
        # A loaded host may give the loop much less than its CPU, late:
        # read until the loop shows, for up to 10 s.
        for _ in range(20):
            await asyncio.sleep(0.5)
            m = await sandbox.get_metrics()
            if m.cpu_used_percentage > max(10, idle.cpu_used_percentage):
                break
        out["cpu_count"], out["memory_total_in_mib"] = m.cpu_count, m.memory_total_in_mib
        out["idle_pct"], out["busy_pct"] = idle.cpu_used_percentage, m.cpu_used_percentage
        out["busy"] = m.cpu_used_percentage > max(10, idle.cpu_used_percentage)
        out["memory_used"] = 0 < m.memory_used_in_mib < m.memory_total_in_mib
        out["timestamp_now"] = abs(m.timestamp / 1000 - time.time()) < 60
        policy = await sandbox.get_egress_policy()
        out["policy"] = {"default": policy.default_action, "egress": policy.egress}
        await sandbox.patch_egress_rules([NetworkRule(action="deny", target="pypi.org")])
        try:
            await sandbox.patch_egress_rules([NetworkRule(action="allow", target="pypi.org")])
            out["allow"] = "patched"
        except SandboxApiException as e:
            out["allow"] = e.status_code
        await sandbox.delete_egress_rules(["pypi.org"])
        out["deleted"] = True
    finally:
        await sandbox.destroy()
    return out


# Fetches argv[1] through the sandbox's proxy (HTTP_PROXY): the status of
# the answer, or the exception's name.
PROBE = """import sys, urllib.request
try:
    urllib.request.urlopen(sys.argv[1], timeout=10)
    print(200)
except urllib.error.HTTPError as e:
    print(e.code)
except Exception as e:
    print(type(e).__name__)"""


async def egress(image: str) -> dict[str, Any]:
    policy = NetworkPolicy(
        defaultAction="deny",
        egress=[
            NetworkRule(action="allow", target="*.allowed.test"),
            NetworkRule(action="deny", target="pypi.org"),
        ],
    )
    sandbox = await Sandbox.create(
        image, network_policy=policy, connection_config=ConnectionConfig()
    )
    out: dict[str, Any] = {}
    try:

        async def fetch(url: str) -> str:
            return (await sandbox.commands.run(f"python3 -c '{PROBE}' {url}")).text.strip()

        out["denied"] = await fetch("http://denied.example/")
        out["allowed"] = await fetch("http://a.allowed.test/")
        read = await sandbox.get_egress_policy()
        out["policy"] = {
            "default": read.default_action,
            "egress": [f"{r.action} {r.target}" for r in read.egress],
        }
        await sandbox.patch_egress_rules([NetworkRule(action="allow", target="b.allowed.test")])
        out["patch_held"] = "ok"
        try:
            await sandbox.patch_egress_rules([NetworkRule(action="allow", target="pypi.org")])
            out["patch_new"] = "patched"
        except SandboxApiException as e:
            out["patch_new"] = e.status_code
    finally:
        await sandbox.destroy()
    start = time.monotonic()
    try:
        cidr = NetworkPolicy(
            defaultAction="deny", egress=[NetworkRule(action="allow", target="10.0.0.0/8")]
        )
        other = await Sandbox.create(
            image, network_policy=cidr, connection_config=ConnectionConfig()
        )
        await other.destroy()
        out["cidr"] = "created"
    except SandboxApiException as e:
        out["cidr"] = e.status_code
        out["cidr_names_field"] = "networkPolicy.egress[0].target" in (
            e.error.message if e.error else ""
        )
    out["cidr_seconds"] = time.monotonic() - start
    return out


async def main() -> dict[str, Any]:
    mode = sys.argv[1]
    if mode == "quickstart":
        return await quickstart(sys.argv[2])
    if mode == "badkey":
        return await create_fails(sys.argv[2], ConnectionConfig(api_key="a2e_wrong-key-0123456789"))
    if mode == "badimage":
        return await create_fails(sys.argv[2], ConnectionConfig())
    if mode == "background":
        return await background(sys.argv[2])
    if mode == "files":
        return await files(sys.argv[2])
    if mode == "metrics":
        return await metrics(sys.argv[2])
    if mode == "egress":
        return await egress(sys.argv[2])
    if mode == "session":
        return await session(sys.argv[2])
    if mode == "code":
        return await code(sys.argv[2])
    if mode == "lifecycle":
        return await lifecycle(sys.argv[2])
    if mode == "unknown":
        return await unknown()
    if mode == "pause":
        return await pause(sys.argv[2])
    raise SystemExit(f"unknown mode {mode}")


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main())))
