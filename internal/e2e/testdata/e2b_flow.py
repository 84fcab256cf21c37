"""The stock E2B code-interpreter SDK against agent2env (TestE2BSDK).

The connection comes from the environment, as the README tells users:
E2B_API_URL and E2B_SANDBOX_URL (both the daemon's address), E2B_API_KEY
(one of the daemon's API keys). Each mode prints one JSON object on its
last line, which the Go test checks:

  quickstart        Sandbox.create, run_code('x = 1'), run_code('x+=1; x'),
                    a matplotlib chart, an error, stdout; IPython's
                    !cmd, %%bash, display(HTML) and %matplotlib inline;
                    an execution's own variables (envs), set_timeout,
                    get_info, a connect that keeps the longer timeout,
                    relative paths in code where files have them,
                    get_metrics, Sandbox.list with a metadata filter, the
                    code contexts, files.write/read, E2B's template API
                    (not served); kill and is_running() after
  envd              the base SDK's commands (run, exit codes, background,
                    connect, stdin, kill, list), a PTY session and its
                    resize, and files (write/read/list/exists/make_dir/
                    rename/remove/watch_dir), on template base
  slowreader        a command writing 16 MiB to a reader slower than it
                    (on_stdout sleeps at first): every byte arrives
  readme            the README's example, word for word
  badkey            Sandbox.create with a wrong API key: the error and how
                    long it took
  badtemplate       Sandbox.create of a template that does not exist
  web               E2B's home /home/user through files, commands and
                    watch_dir; a web server in the sandbox opened as a
                    browser opens it, at <port>-<id>.<domain> without a
                    token (E2B's default), and a sandbox made with
                    allow_public_traffic False, whose port wants its
                    traffic token (and clears a browser's preflight,
                    which carries none)
  pause             pause (and again: already paused), the state in
                    get_info and Sandbox.list, resume by Sandbox.connect,
                    the kernel's variable and a file kept
  snapshot          create_snapshot of a sandbox that runs on, the
                    snapshots listed (by sandbox, by id, a page at a time),
                    a sandbox made from one after its source is killed
                    (the kernel's variable and a file kept), a name
                    refused, delete_snapshot (then false), a create from
                    a deleted snapshot
  nosnapshot        on a runtime without snapshots: create_snapshot
                    refused in E2B's form, saying why; list and delete
                    still answer
"""

import io
import json
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

import e2b
from e2b import CommandExitException, FileType, PtySize, SandboxQuery, SandboxState
from e2b.exceptions import (
    AuthenticationException,
    NotFoundException,
    SandboxException,
    TimeoutException,
)
from e2b_code_interpreter import Sandbox


def quickstart() -> dict[str, Any]:
    sbx = Sandbox.create(metadata={"suite": "e2e-e2b"}, timeout=120)
    out: dict[str, Any] = {"id": sbx.sandbox_id, "running": sbx.is_running()}
    try:
        sbx.run_code("x = 1")
        execution = sbx.run_code("x+=1; x")
        out["text"] = execution.text
        printed = sbx.run_code("print('hello'); import sys; print('warn', file=sys.stderr)")
        out["stdout"] = "".join(printed.logs.stdout)
        out["stderr"] = "".join(printed.logs.stderr)
        failed = sbx.run_code("1/0")
        out["error"] = failed.error.name if failed.error else None
        chart = sbx.run_code(
            "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\n"
            "plt.plot([1, 2, 3], [1, 4, 9])\nplt.show()"
        )
        out["png"] = any(r.png for r in chart.results)
        out["png_prefix"] = next((r.png[:8] for r in chart.results if r.png), None)
        # IPython's syntax, as agents write it for E2B's Jupyter kernel.
        out["shell"] = "".join(sbx.run_code("!echo hi").logs.stdout)
        out["bash_magic"] = "".join(sbx.run_code("%%bash\necho from-bash").logs.stdout)
        shown = sbx.run_code("from IPython.display import HTML, display\ndisplay(HTML('<b>x</b>'))")
        out["ipython_html"] = [r.html for r in shown.results]
        inline = sbx.run_code(
            "%matplotlib inline\nimport matplotlib.pyplot as plt\n_ = plt.plot([1, 2])"
        )
        out["inline_png"] = [bool(r.png) for r in inline.results]

        info = sbx.files.write("notes/hello.txt", "Hello World")
        out["written"] = info.path
        out["read"] = sbx.files.read("notes/hello.txt")
        # Code takes relative paths from where files do, the home, in the
        # default context and in one made without a cwd.
        out["read_by_code_relative"] = [
            sbx.run_code("open('notes/hello.txt').read()").text,
            sbx.run_code("import os; os.getcwd() == os.path.expanduser('~')").text,
        ]
        # E2B's home, by the absolute path code written for E2B names.
        out["read_by_code_home"] = sbx.run_code("open('/home/user/notes/hello.txt').read()").text
        out["read_by_code"] = sbx.run_code("open('/tmp/t.txt','w').write('from code'); 0").text
        out["read_back"] = sbx.files.read("/tmp/t.txt")
        try:
            sbx.files.read("/no/such/file")
            out["missing"] = None
        except Exception as e:
            out["missing"] = type(e).__name__

        out["commands_run"] = sbx.commands.run("echo hi").stdout

        # Variables for one execution: the kernel's and its children's, then gone.
        seen = (
            "import os, subprocess\n"
            "child = subprocess.run(['sh', '-c', 'echo $A2E_RUN'], text=True, stdout=-1)\n"
            "os.environ['A2E_RUN'] + '|' + child.stdout.strip()"
        )
        out["run_code_envs"] = [
            sbx.run_code(seen, envs={"A2E_RUN": "per run"}).text,
            sbx.run_code("'A2E_RUN' in os.environ").text,
        ]

        ctx = sbx.create_code_context()
        out["context_cwd"] = ctx.cwd == sbx.commands.run("pwd").stdout.strip()
        sbx.run_code("y = 41", context=ctx)
        out["in_context"] = sbx.run_code("y + 1", context=ctx).text
        out["contexts"] = len(sbx.list_code_contexts())
        sbx.restart_code_context(ctx)
        out["after_restart"] = sbx.run_code("'y' in globals()", context=ctx).text
        sbx.remove_code_context(ctx)
        out["contexts_after_remove"] = len(sbx.list_code_contexts())

        again = Sandbox.connect(sbx.sandbox_id)
        out["connected_x"] = again.run_code("x").text

        sbx.set_timeout(600)
        info = sbx.get_info()
        left = (info.end_at - info.started_at).total_seconds()
        out["timeout_extended"] = left > 300
        out["info_metadata"] = info.metadata
        out["info_template"] = info.template_id
        # A connect only ever extends a running sandbox's life, as the
        # SDK says (e2b before 2.51 sends 300 s on every connect): it
        # still ends 600 s from the set_timeout.
        Sandbox.connect(sbx.sandbox_id, timeout=60)
        out["connect_kept_end"] = sbx.get_info().end_at == info.end_at
        metrics = sbx.get_metrics()
        out["metrics"] = [
            [m.cpu_count >= 1, 0 <= m.cpu_used_pct <= 100, 0 < m.mem_used < m.mem_total]
            for m in metrics
        ]
        out["metrics_by_id"] = len(Sandbox.get_metrics(sbx.sandbox_id))

        mine = Sandbox.list(query=SandboxQuery(metadata={"suite": "e2e-e2b"})).next_items()
        out["listed"] = [s.sandbox_id == sbx.sandbox_id for s in mine]
        other = Sandbox.list(query=SandboxQuery(metadata={"suite": "other"})).next_items()
        out["listed_other"] = len(other)
        # E2B's APIs agent2env does not serve answer in E2B's form: the
        # SDK's own exception, saying so.
        try:
            e2b.Template.exists("x")
            out["unsupported"] = None
        except SandboxException as e:
            out["unsupported"] = [type(e).__name__, "not supported" in str(e)]
    finally:
        out["killed"] = sbx.kill()
    out["running_after_kill"] = sbx.is_running()
    return out


def envd() -> dict[str, Any]:
    """E2B's base SDK on its in-sandbox daemon's process and filesystem APIs."""
    sbx = e2b.Sandbox.create(template="base", timeout=120)
    out: dict[str, Any] = {}
    try:
        # The quickstart of the base SDK.
        ran = sbx.commands.run("echo hi; echo oops >&2; pwd")
        out["run"] = [ran.stdout, ran.stderr, ran.exit_code]
        try:
            sbx.commands.run("echo bad >&2; exit 3")
            out["exit"] = None
        except CommandExitException as e:
            out["exit"] = [type(e).__name__, e.exit_code, e.stderr]
        out["env_cwd"] = sbx.commands.run(
            "echo $GREETING; pwd", envs={"GREETING": "hey"}, cwd="/tmp"
        ).stdout
        try:
            sbx.commands.run("id", user="root")
            out["root"] = None
        except SandboxException as e:
            out["root"] = type(e).__name__

        # A background command: listed, connected to by pid, fed stdin,
        # killed.
        bg = sbx.commands.run("read line; echo got $line; sleep 100", background=True, stdin=True)
        out["listed"] = [[p.pid == bg.pid, p.cmd, p.args] for p in sbx.commands.list()]
        again = sbx.commands.connect(bg.pid)
        sbx.commands.send_stdin(bg.pid, "ping\n")
        deadline = time.monotonic() + 10
        seen = ""
        for stdout, _, _ in again:
            seen += stdout or ""
            if "got ping" in seen or time.monotonic() > deadline:
                break
        out["connected_stdout"] = seen
        out["killed"] = sbx.commands.kill(bg.pid)
        try:
            bg.wait()
            out["killed_wait"] = None
        except CommandExitException as e:
            out["killed_wait"] = e.exit_code
        out["kill_again"] = sbx.commands.kill(bg.pid)
        out["listed_after"] = len(sbx.commands.list())
        cat = sbx.commands.run("cat", background=True, stdin=True)
        sbx.commands.send_stdin(cat.pid, "to cat")
        sbx.commands.close_stdin(cat.pid)
        out["closed_stdin"] = cat.wait().stdout
        start = time.monotonic()
        try:
            sbx.commands.run("sleep 30", timeout=1)
            out["timed_out"] = None
        except TimeoutException as e:
            out["timed_out"] = [type(e).__name__, time.monotonic() - start < 10]
        # The timeout ends the command too.
        deadline = time.monotonic() + 10
        while (
            any("sleep 30" in " ".join(p.args) for p in sbx.commands.list())
            and time.monotonic() < deadline
        ):
            time.sleep(0.1)
        out["after_timeout"] = [" ".join(p.args) for p in sbx.commands.list()]
        try:
            sbx.commands.connect(999999)
            out["connect_unknown"] = None
        except NotFoundException as e:
            out["connect_unknown"] = type(e).__name__

        # A PTY session: input, resizes, kill.
        pty = sbx.pty.create(PtySize(rows=24, cols=80))
        sbx.pty.send_stdin(pty.pid, b"stty size\n")
        time.sleep(0.5)
        sbx.pty.resize(pty.pid, PtySize(rows=30, cols=100))
        sbx.pty.send_stdin(pty.pid, b"stty size; echo $TERM\n")
        time.sleep(0.5)
        # A zero in a size is taken, as envd takes it: here the default's
        # rows (24), as pty.create's.
        sbx.pty.resize(pty.pid, PtySize(rows=0, cols=120))
        sbx.pty.send_stdin(pty.pid, b"stty size\n")
        time.sleep(0.5)
        out["pty_killed"] = sbx.pty.kill(pty.pid)
        data = []
        try:
            pty.wait(on_pty=lambda b: data.append(b))
        except CommandExitException as e:
            out["pty_exit"] = e.exit_code
        text = b"".join(data).decode(errors="replace")
        out["pty_sizes"] = [size for size in ("24 80", "30 100", "24 120") if size in text]
        out["pty_term"] = "xterm-256color" in text

        # Files.
        out["written"] = sbx.files.write("dir/a.txt", "hello").path
        out["read"] = sbx.files.read("dir/a.txt")
        out["cat"] = sbx.commands.run("cat dir/a.txt").stdout
        # Several files in one request land together, or none of them.
        many = [{"path": "many/1.txt", "data": "one"}, {"path": "many/2.txt", "data": "two"}]
        out["write_files"] = [w.path for w in sbx.files.write_files(many)]
        try:
            refused = [{"path": "many/1.txt", "data": "changed"}, {"path": "many", "data": "x"}]
            sbx.files.write_files(refused)
            out["write_files_refused"] = "no error"
        except Exception as e:
            out["write_files_refused"] = type(e).__name__
        out["write_files_kept"] = [sbx.files.read("many/1.txt"), len(sbx.files.list("many"))]
        sbx.files.remove("many")
        # File-like data goes as application/octet-stream (envd 0.5.7),
        # compressed when asked.
        sbx.files.write("dir/raw.bin", io.BytesIO(b"\x00raw"))
        sbx.files.write("dir/zipped.txt", "zipped " * 100, gzip=True)
        out["octet"] = [
            sbx.files.read("dir/raw.bin", format="bytes") == b"\x00raw",
            sbx.files.read("dir/zipped.txt") == "zipped " * 100,
        ]
        sbx.files.remove("dir/raw.bin")
        sbx.files.remove("dir/zipped.txt")
        out["exists"] = [sbx.files.exists("dir/a.txt"), sbx.files.exists("dir/nope")]
        out["make_dir"] = [sbx.files.make_dir("dir/sub"), sbx.files.make_dir("dir/sub")]
        out["list"] = sorted(
            [e.name, e.type.value if e.type else None, e.path, e.size, e.permissions, e.owner]
            for e in sbx.files.list("dir")
        )
        out["list_deep"] = sorted(e.path for e in sbx.files.list("/home/sandbox/dir", depth=2))
        out["renamed"] = sbx.files.rename("dir/a.txt", "dir/sub/b.txt").path
        out["info"] = [
            sbx.files.get_info("dir/sub").type == FileType.DIR,
            sbx.files.get_info("dir/sub/b.txt").size,
        ]
        sbx.files.remove("dir/sub")
        out["removed"] = sbx.files.exists("dir/sub/b.txt")
        watch = sbx.files.watch_dir("dir")
        sbx.files.write("dir/w.txt", "1")
        sbx.files.write("dir/w.txt", "22")
        sbx.files.remove("dir/w.txt")
        sbx.commands.run("echo by a command > dir/c.txt")
        time.sleep(0.5)
        out["events"] = [[e.name, e.type.value] for e in watch.get_new_events()]
        watch.stop()
    finally:
        out["killed_sandbox"] = sbx.kill()
    return out


def web() -> dict[str, Any]:
    """E2B's /home/user, and a sandbox's web server as a browser opens it."""
    # *.localhost names need not resolve here: the requests go to the
    # daemon's address with the Host a browser would send.
    daemon = urllib.parse.urlsplit(os.environ["E2B_API_URL"])

    def fetch(
        sbx: e2b.Sandbox,
        path: str,
        headers: dict[str, str],
        method: str = "GET",
        show: tuple[str, ...] = (),
    ) -> list[Any]:
        """[status, body] and the values of the response headers in show."""
        host = f"{sbx.get_host(3000)}:{daemon.port}"
        req = urllib.request.Request(
            f"http://{daemon.netloc}{path}", headers={"Host": host, **headers}, method=method
        )
        try:
            with urllib.request.urlopen(req, timeout=10) as res:
                return [res.status, res.read().decode(), *(res.headers.get(h) for h in show)]
        except urllib.error.HTTPError as e:
            return [e.code, e.read().decode(), *(e.headers.get(h) for h in show)]

    def serve(sbx: e2b.Sandbox, headers: dict[str, str]) -> None:
        site = "/home/user/site"
        sbx.commands.run(
            f"mkdir -p {site} && cd {site} && echo page > index.html && echo script > app.js"
        )
        sbx.commands.run(f"python3 -m http.server 3000 --directory {site}", background=True)
        deadline = time.monotonic() + 20
        while fetch(sbx, "/", headers)[0] != 200 and time.monotonic() < deadline:
            time.sleep(0.2)

    # One sandbox at a time: a one-node cluster may have room for one.
    out: dict[str, Any] = {"killed": []}
    sbx = e2b.Sandbox.create(template="base", timeout=120, domain="localhost")
    try:
        out["written"] = sbx.files.write("/home/user/x", "by files").path
        out["cat"] = sbx.commands.run("cat /home/user/x").stdout
        out["cd"] = sbx.commands.run("cd /home/user && cat x").stdout
        out["listed"] = [e.path for e in sbx.files.list("/home/user") if e.name == "x"]
        info = sbx.files.get_info("/home/user")
        out["info"] = [info.type.value if info.type else None, info.path]
        out["info_x"] = sbx.files.get_info("/home/user/x").path
        watch = sbx.files.watch_dir("/home/user")
        sbx.commands.run("echo 1 > /home/user/w.txt")
        time.sleep(0.5)
        out["events"] = sorted({e.name for e in watch.get_new_events()})
        watch.stop()

        out["host"] = sbx.get_host(3000) == f"3000-{sbx.sandbox_id}.localhost"
        serve(sbx, {})
        out["page"] = fetch(sbx, "/", {"Sec-Fetch-Site": "none", "Sec-Fetch-Mode": "navigate"})
        out["subresource"] = fetch(
            sbx, "/app.js", {"Sec-Fetch-Site": "same-origin", "Sec-Fetch-Mode": "no-cors"}
        )
        public_traffic = (sbx.get_info().network or {}).get("allow_public_traffic")
    finally:
        out["killed"].append(sbx.kill())
    private = e2b.Sandbox.create(
        template="base", timeout=120, domain="localhost", network={"allow_public_traffic": False}
    )
    try:
        token = {"e2b-traffic-access-token": private.traffic_access_token or ""}
        serve(private, token)
        out["private_no_token"] = fetch(private, "/", {})[0]
        out["private_token"] = fetch(private, "/", token)
        # A page on another origin that sends the token: the browser's
        # preflight (Chrome's headers) carries no token, and is cleared.
        out["private_preflight"] = fetch(
            private,
            "/",
            {
                "Origin": "http://app.localhost:5173",
                "Access-Control-Request-Method": "GET",
                "Access-Control-Request-Headers": "e2b-traffic-access-token",
                "Sec-Fetch-Mode": "cors",
                "Sec-Fetch-Site": "same-site",
                "Sec-Fetch-Dest": "empty",
            },
            method="OPTIONS",
            show=("Access-Control-Allow-Origin", "Access-Control-Allow-Headers"),
        )
        out["allow_public_traffic"] = [
            public_traffic,
            (private.get_info().network or {}).get("allow_public_traffic"),
        ]
    finally:
        out["killed"].append(private.kill())
    return out


README = """
from e2b_code_interpreter import Sandbox

with Sandbox.create() as sandbox:                  # template code-interpreter-v1
    sandbox.run_code("x = 1")
    print(sandbox.run_code("x+=1; x").text)        # 2
    sandbox.files.write("hello.txt", "Hello World")
    print(sandbox.files.read("hello.txt"))         # Hello World
"""


def readme() -> dict[str, Any]:
    """Run the README's example, word for word, and return its printed lines."""
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        exec(README, {})
    return {"printed": buf.getvalue().splitlines()}


def badkey() -> dict[str, Any]:
    start = time.monotonic()
    try:
        Sandbox.create(api_key="e2b_wrong-key-0123456789")
    except AuthenticationException as e:
        return {"type": type(e).__name__, "message": str(e), "seconds": time.monotonic() - start}
    return {"type": None}


def badtemplate() -> dict[str, Any]:
    start = time.monotonic()
    try:
        Sandbox.create(template="no-such-template")
    except SandboxException as e:
        return {
            "type": type(e).__name__,
            "status": getattr(e, "status_code", None),
            "message": str(e),
            "seconds": time.monotonic() - start,
        }
    return {"type": None}


def pause() -> dict[str, Any]:
    sbx = Sandbox.create(metadata={"suite": "e2e-e2b-pause"}, timeout=120)
    out: dict[str, Any] = {}
    mine = {"suite": "e2e-e2b-pause"}
    try:
        sbx.run_code("x = 41")
        sbx.files.write("kept.txt", "kept")
        out["paused"] = sbx.pause()
        out["paused_again"] = sbx.pause()
        out["state"] = str(sbx.get_info().state)
        paused = Sandbox.list(
            query=SandboxQuery(metadata=mine, state=[SandboxState.PAUSED])
        ).next_items()
        out["listed_paused"] = [s.sandbox_id == sbx.sandbox_id for s in paused]
        running = Sandbox.list(
            query=SandboxQuery(metadata=mine, state=[SandboxState.RUNNING])
        ).next_items()
        out["listed_running"] = len(running)
        start = time.monotonic()
        try:
            sbx.files.read("kept.txt")
            out["read_while_paused"] = "read"
        except Exception as e:
            out["read_while_paused"] = type(e).__name__
            out["paused_says_so"] = "is paused; connect to it" in str(e)
        out["read_while_paused_seconds"] = time.monotonic() - start
        resumed = Sandbox.connect(sbx.sandbox_id)
        out["resumed_state"] = str(resumed.get_info().state)
        out["x_plus_1"] = resumed.run_code("x + 1").text
        out["file"] = resumed.files.read("kept.txt")
    finally:
        out["killed"] = sbx.kill()
    return out


def snapshot() -> dict[str, Any]:
    sbx = Sandbox.create(metadata={"suite": "e2e-e2b-snapshot"}, timeout=120)
    out: dict[str, Any] = {}
    made: list[Sandbox] = []
    snaps: list[str] = []
    try:
        sbx.run_code("x = 41")
        sbx.files.write("kept.txt", "kept")
        first = sbx.create_snapshot()
        snaps.append(first.snapshot_id)
        out["names"] = first.names
        # The sandbox was frozen while saved and runs on.
        out["source_x_plus_1"] = sbx.run_code("x + 1").text
        out["source_state"] = str(sbx.get_info().state)
        second = Sandbox.create_snapshot(sbx.sandbox_id)
        snaps.append(second.snapshot_id)
        mine = Sandbox.list_snapshots(sandbox_id=sbx.sandbox_id).next_items()
        out["listed"] = [s.snapshot_id for s in mine] == [second.snapshot_id, first.snapshot_id]
        out["listed_all"] = first.snapshot_id in [
            s.snapshot_id for s in Sandbox.list_snapshots().next_items()
        ]
        by_id = Sandbox.list_snapshots(name=first.snapshot_id).next_items()
        out["listed_by_id"] = [s.snapshot_id == first.snapshot_id for s in by_id]
        out["listed_by_other_name"] = len(
            Sandbox.list_snapshots(name="no-such-snapshot").next_items()
        )
        pager = Sandbox.list_snapshots(sandbox_id=sbx.sandbox_id, limit=1)
        pages = []
        while pager.has_next:
            pages.append([s.snapshot_id for s in pager.next_items()])
        out["pages"] = pages == [[second.snapshot_id], [first.snapshot_id]]
        try:
            sbx.create_snapshot(name="my-snapshot")
            out["named"] = None
        except SandboxException as e:
            out["named"] = [
                type(e).__name__,
                getattr(e, "status_code", None),
                "have no names" in str(e),
            ]
        # A snapshot outlives its sandbox.
        out["source_killed"] = sbx.kill()
        restored = Sandbox.create(first.snapshot_id, timeout=120)
        made.append(restored)
        out["restored_other"] = restored.sandbox_id != sbx.sandbox_id
        out["restored_x_plus_1"] = restored.run_code("x + 1").text
        out["restored_file"] = restored.files.read("kept.txt")
        out["deleted"] = [
            Sandbox.delete_snapshot(first.snapshot_id),
            Sandbox.delete_snapshot(first.snapshot_id),
        ]
        try:
            made.append(Sandbox.create(template=first.snapshot_id, timeout=120))
            out["create_deleted"] = None
        except SandboxException as e:
            out["create_deleted"] = [type(e).__name__, "not found" in str(e)]
    finally:
        for s in snaps:
            Sandbox.delete_snapshot(s)
        sbx.kill()
        out["killed"] = [m.kill() for m in made]
    return out


def nosnapshot() -> dict[str, Any]:
    sbx = Sandbox.create(timeout=120)
    out: dict[str, Any] = {}
    try:
        try:
            sbx.create_snapshot()
            out["refused"] = None
        except SandboxException as e:
            out["refused"] = [
                type(e).__name__,
                getattr(e, "status_code", None),
                "has no snapshots" in str(e),
            ]
            out["message"] = str(e)
        out["running"] = sbx.is_running()
        out["listed"] = len(Sandbox.list_snapshots(sandbox_id=sbx.sandbox_id).next_items())
        out["deleted"] = Sandbox.delete_snapshot("snap-aaaaaaaaaaaa")
    finally:
        out["killed"] = sbx.kill()
    return out


# SLOW_BYTES is what the slow reader's command writes: far past the
# agent's 1 MiB of kept output and the sockets' buffers on the way.
SLOW_BYTES = 16 << 20


def slowreader() -> dict[str, Any]:
    """Read a command that writes faster than its reader takes: nothing is lost."""
    sbx = e2b.Sandbox.create(template="base", timeout=120)
    out: dict[str, Any] = {}
    try:
        seen = {"chunks": 0, "bytes": 0}

        def slow(chunk: str) -> None:
            seen["chunks"] += 1
            seen["bytes"] += len(chunk)
            if seen["chunks"] <= 40:
                time.sleep(0.05)  # 2 s in all: the command is long done

        ran = sbx.commands.run(
            f"head -c {SLOW_BYTES} /dev/zero | tr '\\0' a; echo done >&2",
            on_stdout=slow,
            timeout=120,
        )
        # As text: the Go test reads numbers as floats.
        out["bytes"] = str(seen["bytes"])
        out["stdout"] = f"{len(ran.stdout)} {ran.stdout.count('a')}"
        out["stderr"] = ran.stderr
        out["exit"] = ran.exit_code
    finally:
        out["killed"] = sbx.kill()
    return out


if __name__ == "__main__":
    mode = sys.argv[1]
    modes = {
        "quickstart": quickstart,
        "envd": envd,
        "slowreader": slowreader,
        "readme": readme,
        "badkey": badkey,
        "badtemplate": badtemplate,
        "pause": pause,
        "snapshot": snapshot,
        "nosnapshot": nosnapshot,
        "web": web,
    }
    print(json.dumps(modes[mode]()))
