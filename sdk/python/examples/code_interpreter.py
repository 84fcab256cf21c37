"""A code interpreter: a Python context whose state persists, figures, errors, streaming.

Run it against a daemon (``make run``) at $AGENT2ENV_URL, default
http://localhost:8080/api/v1.
"""

import tempfile
from pathlib import Path

from agent2env import Client

PLOT = """
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
plt.plot(xs, [x * x for x in xs])
plt.title("squares")
plt.show()
"""


def main() -> None:
    with Client() as client:
        ctx = client.contexts.create("python", session_name="example")
        print(f"Context {ctx.context_id} in sandbox {ctx.sandbox_id}")

        # State persists between executions; the last expression is the result.
        client.contexts.execute(ctx.context_id, "xs = list(range(10))")
        res = client.contexts.execute(ctx.context_id, "sum(xs)")
        print(f"sum(xs) = {res.result}")

        # A figure comes back as a PNG.
        res = client.contexts.execute(ctx.context_id, PLOT, timeout=120)
        png = next(r.png_bytes() for r in res.results if r.png)
        assert png is not None
        out = Path(tempfile.gettempdir()) / "squares.png"
        out.write_bytes(png)
        print(f"Figure: {len(png)} bytes of PNG, saved to {out}")

        # Code that fails is a result with the error, not an exception.
        res = client.contexts.execute(ctx.context_id, "1 / 0")
        assert res.error is not None
        print(f"Error: {res.error.name} ({res.error.kind}): {res.error.value}")

        # Output as it is printed: each chunk as it comes (a line may come in
        # several), passed on as it is.
        print("Streamed:")
        res = client.contexts.execute_stream(
            ctx.context_id,
            "import time\nfor i in range(3):\n    print('tick', i)\n    time.sleep(0.1)\n'done'",
            on_stdout=lambda text: print(text, end="", flush=True),
        )
        print(f"Streamed result: {res.result}, {res.execution_time:.2f}s")

        client.contexts.delete(ctx.context_id)


if __name__ == "__main__":
    main()
