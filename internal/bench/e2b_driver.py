"""The stock E2B SDKs, driven by make bench (internal/bench/e2b.go).

Reads one command a line on stdin and answers each with one JSON line,
{"ms": [...]}, timed here (perf_counter) so that the pipe to the
benchmark is not:

  create TEMPLATE   e2b.Sandbox.create(template=TEMPLATE) until its first
                    commands.run("true") has answered, and until create
                    returned (then kill, untimed)
  runcode N         in a new code-interpreter sandbox (untimed, as is a
                    first run_code), N run_code("1") round trips
"""

import json
import sys
import time

import e2b
from e2b_code_interpreter import Sandbox


def create(template: str) -> list[float]:
    start = time.perf_counter()
    sbx = e2b.Sandbox.create(template=template, timeout=120)
    created = time.perf_counter()
    sbx.commands.run("true")
    ran = time.perf_counter()
    sbx.kill()
    return [(ran - start) * 1000, (created - start) * 1000]


def runcode(n: int) -> list[float]:
    sbx = Sandbox.create(timeout=300)
    try:
        sbx.run_code("1")
        out = []
        for _ in range(n):
            start = time.perf_counter()
            text = sbx.run_code("1").text
            out.append((time.perf_counter() - start) * 1000)
            if text != "1":
                raise RuntimeError(f"run_code('1') gave {text!r}")
        return out
    finally:
        sbx.kill()


def main() -> None:
    for line in sys.stdin:
        cmd, arg = line.split()
        ms = create(arg) if cmd == "create" else runcode(int(arg))
        print(json.dumps({"ms": ms}), flush=True)


if __name__ == "__main__":
    main()
