"""The stock E2B code-interpreter SDK against agent2env (TestE2BSDK).

The connection comes from the environment, as the README tells users:
E2B_API_URL and E2B_SANDBOX_URL (both the daemon's address), E2B_API_KEY
(one of the daemon's API keys). Each mode prints one JSON object on its
last line, which the Go test checks:

  quickstart        Sandbox.create, run_code('x = 1'), run_code('x+=1; x'),
                    a matplotlib chart, an error, stdout; set_timeout,
                    get_info, Sandbox.list with a metadata filter, the
                    code contexts, files.write/read; kill and is_running()
                    after
  readme            the README's example, word for word
  badkey            Sandbox.create with a wrong API key: the error and how
                    long it took
  badtemplate       Sandbox.create of a template that does not exist
  pause             pause (and again: already paused), the state in
                    get_info and Sandbox.list, resume by Sandbox.connect,
                    the kernel's variable and a file kept
"""

import json
import sys
import time

from e2b import SandboxQuery, SandboxState
from e2b.exceptions import AuthenticationException, SandboxException
from e2b_code_interpreter import Sandbox


def quickstart() -> dict:
    sbx = Sandbox.create(metadata={"suite": "e2e-e2b"}, timeout=120)
    out: dict = {"id": sbx.sandbox_id, "running": sbx.is_running()}
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

        info = sbx.files.write("notes/hello.txt", "Hello World")
        out["written"] = info.path
        out["read"] = sbx.files.read("notes/hello.txt")
        out["read_by_code"] = sbx.run_code("open('/tmp/t.txt','w').write('from code'); 0").text
        out["read_back"] = sbx.files.read("/tmp/t.txt")
        try:
            sbx.files.read("/no/such/file")
            out["missing"] = None
        except Exception as e:
            out["missing"] = type(e).__name__

        # Not served yet: the process API must fail at once, clearly.
        start = time.monotonic()
        try:
            sbx.commands.run("true")
            out["commands_run"] = "ran"
        except Exception as e:
            out["commands_run"] = type(e).__name__
            out["commands_run_message"] = str(e)
        out["commands_run_seconds"] = time.monotonic() - start

        ctx = sbx.create_code_context()
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

        mine = Sandbox.list(query=SandboxQuery(metadata={"suite": "e2e-e2b"})).next_items()
        out["listed"] = [s.sandbox_id == sbx.sandbox_id for s in mine]
        other = Sandbox.list(query=SandboxQuery(metadata={"suite": "other"})).next_items()
        out["listed_other"] = len(other)
    finally:
        out["killed"] = sbx.kill()
    out["running_after_kill"] = sbx.is_running()
    return out


README = """
from e2b_code_interpreter import Sandbox

with Sandbox.create() as sandbox:                  # template code-interpreter-v1
    sandbox.run_code("x = 1")
    print(sandbox.run_code("x+=1; x").text)        # 2
    sandbox.files.write("hello.txt", "Hello World")
    print(sandbox.files.read("hello.txt"))         # Hello World
"""


def readme() -> dict:
    """The README's example, word for word, its printed lines."""
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        exec(README, {})
    return {"printed": buf.getvalue().splitlines()}


def badkey() -> dict:
    start = time.monotonic()
    try:
        Sandbox.create(api_key="e2b_wrong-key-0123456789")
    except AuthenticationException as e:
        return {"type": type(e).__name__, "message": str(e), "seconds": time.monotonic() - start}
    return {"type": None}


def badtemplate() -> dict:
    start = time.monotonic()
    try:
        Sandbox.create(template="no-such-template")
    except SandboxException as e:
        return {"type": type(e).__name__, "status": getattr(e, "status_code", None), "message": str(e),
                "seconds": time.monotonic() - start}
    return {"type": None}


def pause() -> dict:
    sbx = Sandbox.create(metadata={"suite": "e2e-e2b-pause"}, timeout=120)
    out: dict = {}
    mine = {"suite": "e2e-e2b-pause"}
    try:
        sbx.run_code("x = 41")
        sbx.files.write("kept.txt", "kept")
        out["paused"] = sbx.pause()
        out["paused_again"] = sbx.pause()
        out["state"] = str(sbx.get_info().state)
        paused = Sandbox.list(query=SandboxQuery(metadata=mine, state=[SandboxState.PAUSED])).next_items()
        out["listed_paused"] = [s.sandbox_id == sbx.sandbox_id for s in paused]
        running = Sandbox.list(query=SandboxQuery(metadata=mine, state=[SandboxState.RUNNING])).next_items()
        out["listed_running"] = len(running)
        start = time.monotonic()
        try:
            sbx.files.read("kept.txt")
            out["read_while_paused"] = "read"
        except Exception as e:
            out["read_while_paused"] = type(e).__name__
        out["read_while_paused_seconds"] = time.monotonic() - start
        resumed = Sandbox.connect(sbx.sandbox_id)
        out["resumed_state"] = str(resumed.get_info().state)
        out["x_plus_1"] = resumed.run_code("x + 1").text
        out["file"] = resumed.files.read("kept.txt")
    finally:
        out["killed"] = sbx.kill()
    return out


if __name__ == "__main__":
    mode = sys.argv[1]
    modes = {"quickstart": quickstart, "readme": readme, "badkey": badkey, "badtemplate": badtemplate, "pause": pause}
    print(json.dumps(modes[mode]()))
