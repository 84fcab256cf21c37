"""Fork through the SDK against a daemon with criu (``serve --criu``).

The model is the daemon's own end-to-end test of fork: a Python context
holding a value is in every copy under a new id, each copy's context goes
its own way, and each draws its own random numbers (the daemon reseeds
every kernel's generators in a copy).
"""

from __future__ import annotations

import asyncio

import pytest

from agent2env import AsyncClient, BadRequestError, Client, NotFoundError
from agent2env.models import SandboxStatus

from .conftest import IMAGE, REPO, Daemon
from .test_daemon import readme_code, run_script

pytestmark = pytest.mark.integration


def run(client: Client, context_id: str, code: str) -> str:
    """Run code in a context; return its stdout, stripped."""
    res = client.contexts.execute(context_id, code)
    assert res.success, res
    return res.output.stdout.strip()


def test_fork_contexts(criu_daemon: Daemon) -> None:
    with Client(criu_daemon.url, timeout=60) as client:
        sb = client.sandbox.create_from_image(IMAGE)
        made = [sb.id]
        snapshots: list[str] = []
        try:
            ctx = client.contexts.create("python", sandbox_id=sb.id)
            assert run(client, ctx.context_id, "import random\nx = 41\nprint(x)") == "41"

            fork = client.sandbox.fork(sb.id, count=3, ttl=600, metadata={"run": "fork"})
            made += [f.id for f in fork.sandboxes]
            snapshots.append(fork.snapshot_id)
            assert len(fork.sandboxes) == 3
            assert len({sb.id, *(f.id for f in fork.sandboxes)}) == 4
            # The fork's snapshot is kept, a snapshot of the parent, which runs on.
            assert client.snapshots.get(fork.snapshot_id).sandbox_id == sb.id
            assert client.sandbox.get(sb.id).status is SandboxStatus.RUNNING

            draws = {run(client, ctx.context_id, "print(random.random())")}
            copies: list[str] = []
            for i, f in enumerate(fork.sandboxes):
                assert f.status is SandboxStatus.RUNNING
                assert f.metadata == {"run": "fork"}
                assert list(f.contexts) == [ctx.context_id]
                copy = f.contexts[ctx.context_id]
                assert copy != ctx.context_id
                assert [c.context_id for c in client.contexts.list(sandbox_id=f.id)] == [copy]
                copies.append(copy)
                # The parent's x, then this copy's own.
                out = run(client, copy, f"print(x)\nx += {i + 1}\nprint(x, random.random())")
                before, after, draw = out.split()
                assert (before, after) == ("41", str(42 + i)), out
                draws.add(draw)
            # Every copy and the parent drew their own number.
            assert len(draws) == 4, draws
            # Each copy kept its own x; the parent's is untouched.
            for i, copy in enumerate(copies):
                assert run(client, copy, "print(x)") == str(42 + i)
            assert run(client, ctx.context_id, "print(x)") == "41"

            # From the kept snapshot: the state as it was saved.
            again = client.snapshots.fork(fork.snapshot_id, count=1)
            made += [f.id for f in again.sandboxes]
            assert again.snapshot_id == fork.snapshot_id
            (one,) = again.sandboxes
            assert run(client, one.contexts[ctx.context_id], "print(x)") == "41"

            # A count out of bounds is the daemon's 400, nothing made.
            existing = {s.id for s in client.sandbox.list()}
            for count in (0, 33):
                with pytest.raises(BadRequestError) as info:
                    client.sandbox.fork(sb.id, count=count)
                assert info.value.status_code == 400
                with pytest.raises(BadRequestError):
                    client.snapshots.fork(fork.snapshot_id, count=count)
            assert {s.id for s in client.sandbox.list()} == existing
            with pytest.raises(NotFoundError):
                client.snapshots.fork("snap-nonexistent", count=1)
        finally:
            for sandbox_id in made:
                client.sandbox.delete(sandbox_id)
            for snapshot_id in snapshots:
                client.snapshots.delete(snapshot_id)
        assert client.snapshots.list(sandbox_id=sb.id) == []
        assert not {s.id for s in client.sandbox.list()} & set(made)


def test_async_fork(criu_daemon: Daemon) -> None:
    async def go() -> None:
        async with AsyncClient(criu_daemon.url, timeout=60) as client:
            sb = await client.sandbox.create_from_image(IMAGE)
            made = [sb.id]
            try:
                await client.sandbox.upload_file(sb.id, "state", "kept")
                fork = await client.sandbox.fork(sb.id, count=2)
                made += [f.id for f in fork.sandboxes]
                for f in fork.sandboxes:
                    assert f.contexts == {}
                    assert await client.sandbox.download_file(f.id, "state") == b"kept"
                again = await client.snapshots.fork(fork.snapshot_id, count=1)
                made += [f.id for f in again.sandboxes]
                assert await client.sandbox.download_file(again.sandboxes[0].id, "state") == b"kept"
                await client.snapshots.delete(fork.snapshot_id)
            finally:
                for sandbox_id in made:
                    await client.sandbox.delete(sandbox_id)

    asyncio.run(go())


def test_repository_readme_fork(criu_daemon: Daemon) -> None:
    """The Python example of the repository's README, the fork of section Snapshots."""
    out = run_script(criu_daemon, readme_code("**Fork**", REPO / "README.md"))
    assert out == "41 41 41 41\n4 4\n", out
