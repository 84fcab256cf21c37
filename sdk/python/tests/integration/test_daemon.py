"""The SDK against a real daemon: seed 003's examples, the README, the examples, and the additions.

``seed003/`` holds seed 003's examples §9.1, §9.2 and §9.3 as the seed
writes them, but for the import (``agent2env`` for ``liteboxd``) and the
template's image (the built-in ``agent2env/python`` for ``python:3.11-slim``,
which a machine without a registry cannot pull); they are run as scripts
with the daemon's URL put in for ``http://localhost:8080/api/v1``.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from agent2env import AsyncClient, BadRequestError, Client, ConflictError, NotFoundError
from agent2env.models import ExecEvent, SandboxStatus, UpdateTemplateRequest

from .conftest import IMAGE, SDK, Daemon

pytestmark = pytest.mark.integration

SEED_URL = "http://localhost:8080/api/v1"
SEEDS = Path(__file__).parent / "seed003"
# The sha256 of each of seed 003's §9.1 to 9.3 examples without the lines a
# copy may change (CHANGEABLE), as read from the seed, whose text is not
# part of the repository.
SEED_EXAMPLES = {
    "quickstart.py": "f19ffd2c225ba9196ed27036deb8c5f1da6f22e7bf3b18b77129d93cd79c759a",
    "async_usage.py": "af7601fe4c5bc83a5d455cb1ce44106fe7b56ba4445620ce1e6086a34ee22213",
    "template_management.py": "2eba04ceb6c07486ff94d7957d9b3913ff801d1f5ff23348cda7ff3d8e73b57b",
}
CHANGEABLE = re.compile(
    r"from (liteboxd|agent2env)(\.models)? import .*"
    r"|\s+image=\"(python:3\.11-slim|agent2env/python)\","
)


def run_script(daemon: Daemon, code: str) -> str:
    """Run Python code as a user's script against the daemon; return its output.

    What the script saves in its temporary directory (the code-interpreter
    example's figure) goes to one of its own, removed afterwards.
    """
    with tempfile.TemporaryDirectory(prefix="a2e-script-") as tmp:
        env = {**os.environ, "AGENT2ENV_URL": daemon.url, "PYTHONWARNINGS": "error", "TMPDIR": tmp}
        proc = subprocess.run(
            [sys.executable, "-c", code.replace(SEED_URL, daemon.url)],
            capture_output=True,
            text=True,
            env=env,
            timeout=900,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    assert proc.returncode == 0, (
        f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    )
    assert proc.stderr == "", proc.stderr
    return proc.stdout


def test_seed_9_1_quickstart(daemon: Daemon, seed_template: str) -> None:
    out = run_script(daemon, (SEEDS / "quickstart.py").read_text())
    lines = out.splitlines()
    assert re.fullmatch(r"Created sandbox: [0-9a-z]{12}", lines[0]), out
    assert lines[1:] == ["Sandbox status: running", "Output: Hello from sandbox!", ""], out


def test_seed_9_2_async(daemon: Daemon, seed_template: str) -> None:
    assert run_script(daemon, (SEEDS / "async_usage.py").read_text()) == "Hello!\n\n"


def test_seed_9_3_templates(daemon: Daemon, client: Client) -> None:
    try:
        out = run_script(daemon, (SEEDS / "template_management.py").read_text())
        lines = out.splitlines()
        assert lines[:2] == [
            "Created template: my-python-template v1",
            "- my-python-template: Custom Python environment",
        ], out
        assert "startupScript: pip install numpy pandas\n" in out
        template = client.template.get("my-python-template")
        assert template.spec is not None
        assert (template.spec.resources.cpu, template.spec.resources.memory, template.spec.ttl) == (
            "1000m",
            "1Gi",
            7200,
        )
        # auto_prepull started a prepull of the template's image.
        assert [t.template for t in client.prepull.list(image=IMAGE)] == ["my-python-template"]
        # A second version; the versions a page at a time, oldest first.
        client.template.update(
            "my-python-template", UpdateTemplateRequest(spec=template.spec, changelog="again")
        )
        first = client.template.list_versions("my-python-template", limit=1, order="asc")
        assert ([v.version for v in first.items], first.total) == ([1], 1)
        last = client.template.list_versions(
            "my-python-template", limit=1, order="asc", cursor=first.next_cursor
        )
        assert ([v.version for v in last.items], last.next_cursor) == ([2], None)
    finally:
        client.template.delete("my-python-template")


def test_seed_copies_are_the_seed() -> None:
    """The copies differ from the seed only in the import and the image."""
    for name, want in SEED_EXAMPLES.items():
        lines = (SEEDS / name).read_text().splitlines()
        kept = "\n".join(line for line in lines if not CHANGEABLE.fullmatch(line))
        assert hashlib.sha256(kept.encode()).hexdigest() == want, f"{name} is no longer the seed's"


def readme_code(section: str, path: Path = SDK / "README.md") -> str:
    """Return the first Python block of a section of a README, the SDK's by default."""
    readme = path.read_text()
    code = re.search(r"```python\n(.*?)```", readme[readme.index(section) :], re.S)
    assert code is not None
    return code.group(1)


def test_readme_quickstart(daemon: Daemon) -> None:
    assert "Hello from sandbox!" in run_script(daemon, readme_code("## Quickstart"))


def test_readme_sessions(daemon: Daemon) -> None:
    out = run_script(daemon, readme_code("## Sessions"))
    assert out == "42\n0\nZeroDivisionError division by zero\nsmall 1 1Gi\n"


@pytest.mark.parametrize(
    ("example", "expect"),
    [
        ("quickstart.py", "Output: Hello from sandbox! true"),
        ("async_example.py", "Sums: 45, 4950, 499500"),
        ("sandbox_lifecycle.py", "After restart the files are still there: ['2', '3']"),
        ("template_management.py", "Imported: [('example-python-template', 'created')]"),
        ("code_interpreter.py", "Error: ZeroDivisionError (runtime): division by zero"),
        ("code_interpreter.py", "tick 1"),  # streamed chunks joined as printed
        ("sessions.py", "Memory by flavor: 1 GiB, 2 GiB"),
    ],
)
def test_example(daemon: Daemon, example: str, expect: str) -> None:
    out = run_script(daemon, (SDK / "examples" / example).read_text())
    assert expect in out.splitlines(), out


def test_contexts_with_a_figure(client: Client) -> None:
    ctx = client.contexts.create("python", session_name="py-sdk-figure")
    try:
        assert ctx.sandbox_id
        assert client.contexts.execute(ctx.context_id, "n = 6").success
        res = client.contexts.execute(
            ctx.context_id,
            "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\n"
            "plt.plot([1, 2, 3], [n, n * 2, n * 3])\nplt.show()\nn * 7",
            timeout=120,
        )
        assert res.success, res.error
        assert res.result == "42"
        pngs = [r.png_bytes() for r in res.results if r.png]
        assert len(pngs) == 1
        assert pngs[0] is not None
        assert pngs[0].startswith(b"\x89PNG\r\n\x1a\n")
        assert res.results[-1].is_main_result
        assert res.results[-1].text == "42"

        failed = client.contexts.execute(ctx.context_id, "def f(:\n  pass")
        assert not failed.success
        assert failed.error is not None
        assert (failed.error.name, failed.error.kind) == ("SyntaxError", "syntax")

        timed_out = client.contexts.execute(
            ctx.context_id, "import time\ntime.sleep(30)", timeout=1
        )
        assert timed_out.error is not None
        assert (timed_out.error.name, timed_out.error.kind) == ("TimeoutError", "system")
        assert (
            client.contexts.execute(ctx.context_id, "n").result == "6"
        )  # the context is still usable

        # Variables for one execution: the kernel's and its children's, then gone.
        seen = "import os, subprocess\nsubprocess.run(['printenv', 'A2E_TOKEN'], stdout=-1).stdout"
        with_env = client.contexts.execute(ctx.context_id, seen, env={"A2E_TOKEN": "t"})
        assert with_env.result == "b't\\n'"
        assert (
            client.contexts.execute(ctx.context_id, "'A2E_TOKEN' in os.environ").result == "False"
        )
        with pytest.raises(BadRequestError, match="A-B"):
            client.contexts.execute(ctx.context_id, "1", env={"A-B": "x"})

        assert [c.context_id for c in client.contexts.list(session_name="py-sdk-figure")] == [
            ctx.context_id
        ]
        page = client.contexts.list_page(session_name="py-sdk-figure", limit=1)
        assert ([c.context_id for c in page.items], page.next_cursor) == ([ctx.context_id], None)
        with pytest.raises(BadRequestError, match="limit"):
            client.contexts.list_page(limit=1001)
        assert client.contexts.get(ctx.context_id).execution_count == 7
    finally:
        assert client.contexts.delete(ctx.context_id).status == "deleted"
    with pytest.raises(NotFoundError) as info:
        client.contexts.execute(ctx.context_id, "1")
    assert info.value.code == "CONTEXT_NOT_FOUND"


def test_context_streaming(daemon: Daemon) -> None:
    async def main() -> None:
        async with AsyncClient(daemon.url) as client:
            ctx = await client.contexts.create(session_name="py-sdk-stream")
            try:
                got: list[tuple[str, float]] = []
                start = time.monotonic()
                res = await client.contexts.execute_stream(
                    ctx.context_id,
                    "import time\nprint('first', flush=True)\ntime.sleep(1)\nprint('second')\n1/0",
                    on_stdout=lambda text: got.append((text, time.monotonic() - start)),
                )
                assert "".join(t for t, _ in got) == "first\nsecond\n"
                assert got[-1][1] - got[0][1] >= 0.5, got  # streamed as printed, not at the end
                assert res.stdout == "first\nsecond\n"
                assert res.error is not None
                assert res.error.name == "ZeroDivisionError"
                kinds = [
                    e.type
                    async for e in client.contexts.iter_execute(ctx.context_id, "print(1)\n2")
                ]
                assert kinds[0] == "stdout"
                assert kinds[-1] == "complete"
            finally:
                await client.contexts.delete(ctx.context_id)

    asyncio.run(main())


def test_streaming_exec(client: Client) -> None:
    sb = client.sandbox.wait_for_ready(
        client.sandbox.create_from_image(IMAGE).id, poll_interval=0.2
    )
    try:
        start = time.monotonic()
        events: list[tuple[ExecEvent, float]] = []
        for event in client.sandbox.execute_stream(
            sb.id, ["sh", "-c", "echo out; sleep 1; echo err >&2; exit 7"]
        ):
            events.append((event, time.monotonic() - start))
        kinds = [(e.type, e.data) for e, _ in events]
        assert kinds == [("stdout", "out\n"), ("stderr", "err\n"), ("exit", "")]
        assert events[-1][0].exit_code == 7
        assert events[-1][1] - events[0][1] >= 0.5  # the first line came while the command ran

        async def run_async() -> list[ExecEvent]:
            async with AsyncClient(client.base_url) as aclient:
                return [
                    e
                    async for e in aclient.sandbox.execute_stream(sb.id, ["sleep", "5"], timeout=1)
                ]

        timed_out = asyncio.run(run_async())
        assert timed_out[-1].type == "exit"
        assert timed_out[-1].timed_out
    finally:
        client.sandbox.delete(sb.id)


def test_files(client: Client, tmp_path: Path) -> None:
    sb = client.sandbox.wait_for_ready(
        client.sandbox.create_from_image(IMAGE).id, poll_interval=0.2
    )
    try:
        data = os.urandom(24 << 20)
        local = tmp_path / "big.bin"
        local.write_bytes(data)
        info = client.sandbox.upload_path(sb.id, "in/big.bin", local, mode=0o600)
        assert (info.path, info.size, info.mode) == ("/workspace/in/big.bin", len(data), "0600")
        digest = client.sandbox.execute(sb.id, ["sha256sum", "in/big.bin"]).stdout.split()[0]
        assert digest == hashlib.sha256(data).hexdigest()

        back = tmp_path / "back.bin"
        assert client.sandbox.download_to(sb.id, "/workspace/in/big.bin", back) == len(data)
        assert back.read_bytes() == data

        client.sandbox.upload_file(sb.id, "small.txt", io.BytesIO(b"from a file object"))
        assert client.sandbox.download_file(sb.id, "small.txt") == b"from a file object"

        async def run_async() -> bytes:
            async with AsyncClient(client.base_url) as aclient:
                await aclient.sandbox.upload_path(sb.id, "async.bin", local)
                buf = io.BytesIO()
                await aclient.sandbox.download_to(sb.id, "async.bin", buf)
                return buf.getvalue()

        assert asyncio.run(run_async()) == data
        with pytest.raises(NotFoundError) as info_missing:
            client.sandbox.download_file(sb.id, "nope.txt")
        assert info_missing.value.code == "FILE_NOT_FOUND"
    finally:
        client.sandbox.delete(sb.id)


def test_lifecycle_and_errors(client: Client) -> None:
    sb = client.sandbox.create_from_image(
        IMAGE, ttl=0, env={"GREETING": "hi"}, metadata={"suite": "integration"}
    )
    try:
        sb = client.sandbox.wait_for_ready(sb.id, poll_interval=0.2)
        assert sb.expires_at.year == 9999
        assert sb.metadata == {"suite": "integration"}
        assert client.sandbox.execute(sb.id, ["sh", "-c", "echo $GREETING"]).stdout == "hi\n"
        client.sandbox.stop(sb.id)
        assert client.sandbox.get(sb.id).status is SandboxStatus.SUCCEEDED
        # Selected by status and listed newest first on the daemon.
        assert sb.id in {s.id for s in client.sandbox.list(status=SandboxStatus.SUCCEEDED)}
        assert sb.id not in {s.id for s in client.sandbox.list(status=["running", "pending"])}
        oldest_first = [s.id for s in client.sandbox.list()]
        assert [s.id for s in client.sandbox.list(order="desc")] == oldest_first[::-1]
        # Paged a sandbox at a time, newest first, the pages make the whole list.
        paged: list[str] = []
        cursor = None
        while True:
            page = client.sandbox.list_page(limit=1, cursor=cursor, order="desc")
            paged += [s.id for s in page.items]
            if page.next_cursor is None:
                break
            cursor = page.next_cursor
        assert paged == oldest_first[::-1]
        with pytest.raises(ConflictError) as info:
            client.sandbox.execute(sb.id, ["true"])
        assert info.value.code == "SANDBOX_NOT_READY"
        with pytest.raises(ConflictError):
            client.sandbox.stop(sb.id)
        client.sandbox.start(sb.id)
        assert (
            client.sandbox.wait_for_ready(sb.id, poll_interval=0.2).status is SandboxStatus.RUNNING
        )
        assert any("running" in line for line in client.sandbox.get_logs(sb.id).events)
    finally:
        client.sandbox.delete(sb.id)
    with pytest.raises(NotFoundError) as gone:
        client.sandbox.get(sb.id)
    assert gone.value.code == "SANDBOX_NOT_FOUND"
    listed = {i.ref: i for i in client.images.list()}
    assert listed[IMAGE + ":latest"].status == "ready"
    # Following a stored image with nothing in flight ends at once with it.
    assert client.images.follow(IMAGE).ref == IMAGE + ":latest"
    with pytest.raises(NotFoundError):
        client.images.follow("example.invalid/nothing:1")
