"""The stock E2B SDKs, driven by make bench (internal/bench/e2b.go).

Reads one command a line on stdin and answers each with one JSON line,
{"ms": [...]}, timed here (perf_counter) so that the pipe to the
benchmark is not:

  create TEMPLATE   e2b.Sandbox.create(template=TEMPLATE) until its first
                    commands.run("true") has answered, and until create
                    returned (then kill, untimed)
  runcode N         N run_code("1") round trips in a code-interpreter
                    sandbox made by the first runcode (untimed, as is its
                    first run_code) and kept for the next ones; killed
                    when stdin ends
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


class RunCode:
    """The sandbox runcode runs in, made on first use."""

    sbx: Sandbox | None = None

    def run(self, n: int) -> list[float]:
        """Time n run_code("1") round trips, in ms."""
        if self.sbx is None:
            self.sbx = Sandbox.create(timeout=600)
            self.sbx.run_code("1")
        out = []
        for _ in range(n):
            start = time.perf_counter()
            text = self.sbx.run_code("1").text
            out.append((time.perf_counter() - start) * 1000)
            if text != "1":
                raise RuntimeError(f"run_code('1') gave {text!r}")
        return out

    def close(self) -> None:
        """Kill the sandbox, if one was made."""
        if self.sbx is not None:
            self.sbx.kill()


def main() -> None:
    rc = RunCode()
    try:
        for line in sys.stdin:
            cmd, arg = line.split()
            ms = create(arg) if cmd == "create" else rc.run(int(arg))
            print(json.dumps({"ms": ms}), flush=True)
    finally:
        rc.close()


if __name__ == "__main__":
    main()
