"""The oldest E2B Python SDKs agent2env supports against it (TestE2BSDK).

Run by the interpreter of a venv that has only e2b 2.7 (mode base) or
e2b-code-interpreter 2.9 (mode interpreter), both installed by
scripts/test-peers.sh; the connection comes from the environment, as for
e2b_flow.py. Each mode prints one JSON object on its last line:

  base         e2b.Sandbox.create (template base), commands.run, a
               non-zero exit, files write/read, kill, is_running() after
  interpreter  the code interpreter's quickstart: Sandbox.create,
               run_code('x = 1'), run_code('x+=1; x'), a matplotlib chart
               as a png, files write/read, commands.run, kill,
               is_running() after
"""

import json
import sys
from typing import Any


def base() -> dict[str, Any]:
    import e2b

    sbx = e2b.Sandbox.create(template="base", timeout=120)
    out: dict[str, Any] = {}
    try:
        ran = sbx.commands.run("echo hi; pwd")
        out["run"] = [ran.stdout, ran.exit_code]
        try:
            sbx.commands.run("exit 3")
            out["exit"] = None
        except e2b.CommandExitException as e:
            out["exit"] = e.exit_code
        sbx.files.write("a.txt", "hello")
        out["read"] = sbx.files.read("a.txt")
    finally:
        out["killed"] = sbx.kill()
    out["running_after_kill"] = sbx.is_running()
    return out


def interpreter() -> dict[str, Any]:
    from e2b_code_interpreter import Sandbox

    sbx = Sandbox.create(timeout=120)
    out: dict[str, Any] = {}
    try:
        sbx.run_code("x = 1")
        out["text"] = sbx.run_code("x+=1; x").text
        chart = sbx.run_code(
            "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\n"
            "plt.plot([1, 2, 3], [1, 4, 9])\nplt.show()"
        )
        out["png_prefix"] = next((r.png[:8] for r in chart.results if r.png), None)
        sbx.files.write("hello.txt", "Hello World")
        out["read"] = sbx.files.read("hello.txt")
        out["commands_run"] = sbx.commands.run("echo hi").stdout
    finally:
        out["killed"] = sbx.kill()
    out["running_after_kill"] = sbx.is_running()
    return out


if __name__ == "__main__":
    print(json.dumps({"base": base, "interpreter": interpreter}[sys.argv[1]]()))
