"""Task runs against a real daemon: a task submitted with its inputs, followed, read back.

The tasks run the ``custom`` agent, a shell command, so that no model is needed.
"""

from __future__ import annotations

import asyncio
import io
import json
import tarfile
from contextlib import aclosing
from pathlib import Path

import pytest

from agent2env import AsyncClient, BadRequestError, Client, NotFoundError
from agent2env.models import RunEventType, RunStatus, summarize

from .conftest import IMAGE, Daemon
from .test_daemon import readme_code, run_script

pytestmark = pytest.mark.integration

COPY = f"""name: copy
image: {IMAGE}
agent: custom
goal: copy
entrypoint: cat repo/a.txt > out.txt && echo copied && echo oops >&2
inputs: [{{source: ./repo, destination: /workspace/repo}}]
end: {{check: grep -qx A out.txt}}
artifacts: [/workspace/out.txt]
"""


def test_readme_task_runs(daemon: Daemon) -> None:
    out = run_script(daemon, readme_code("## Task runs")).splitlines()
    assert out[0] == "copied", out
    # status, exit code, reason, input tokens (none: no model)
    assert [(line.split()[:2], line.split()[-1]) for line in out[1:3]] == [
        (["succeeded", "0"], "0")
    ] * 2, out
    assert out[3:] == ["b'A\\n'", "copy custom: pass@1 1.00, pass@2 1.00"], out


def test_run_submitted_followed_and_read(client: Client, tmp_path: Path) -> None:
    (tmp_path / "repo").mkdir()
    (tmp_path / "repo" / "a.txt").write_text("A\n")
    batch = client.runs.submit(COPY, inputs_from=tmp_path, models=["m1", "m2"])
    assert (batch.task, len(batch.runs)) == ("copy", 2)
    assert {r.model for r in batch.runs} == {"m1", "m2"}
    run_id = batch.runs[0].id

    events = list(client.runs.iter_events(run_id))
    assert events[-1].type == RunEventType.END
    assert events[-1].status == RunStatus.SUCCEEDED
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    phases = [e.phase for e in events if e.type == RunEventType.PHASE]
    assert {"create", "inputs", "agent", "check", "artifacts"} <= set(phases), phases
    assert ("stdout", "copied") in [(e.stream, e.text) for e in events if e.type == "output"]
    # Resumed after the third event: the rest of the same log.
    assert client.runs.events(run_id, after=3) == events[3:]

    runs = client.runs.wait_for_batch(batch.id, poll_interval=0.2, timeout=300)
    assert [r.status for r in runs] == [RunStatus.SUCCEEDED] * 2
    # Selected by agent and model, by the daemon.
    assert [r.model for r in client.runs.list(batch=batch.id, agent="custom", model="m1")] == ["m1"]
    assert client.runs.list_page(batch=batch.id, agent=["codex", "claude-code"]).items == []
    with pytest.raises(BadRequestError, match="agent"):
        client.runs.list(agent="claude")
    run = client.runs.get(run_id)
    assert (run.exit_code, run.phase, run.batch_id) == (0, "done", batch.id)
    assert run.started_at is not None
    assert run.ended_at is not None
    assert run.timings_ms.get("agent", 0) > 0
    assert [(a.path, a.size) for a in run.artifacts] == [("/workspace/out.txt", 2)]
    assert client.runs.artifact(run_id, "/workspace/out.txt") == b"A\n"
    with tarfile.open(fileobj=io.BytesIO(client.runs.artifacts(run_id))) as tar:
        assert tar.getnames() == ["workspace/out.txt"]
    written = client.runs.artifacts_to(run_id, tmp_path / "out")
    assert written == [str((tmp_path / "out" / "workspace" / "out.txt").resolve())]
    assert "[stderr] oops" in client.runs.logs(run_id).splitlines()
    assert "copied" in client.runs.iter_logs(run_id)
    with pytest.raises(NotFoundError):
        client.runs.artifact(run_id, "/etc/passwd")

    summaries = summarize(client.runs.list(batch=batch.id))
    assert sorted((s.model, s.runs, s.succeeded, s.pass_at_1) for s in summaries) == [
        ("m1", 1, 1, 1.0),
        ("m2", 1, 1, 1.0),
    ]
    page = client.runs.list_page(batch=batch.id, status=RunStatus.SUCCEEDED, limit=1)
    assert len(page.items) == 1
    assert page.next_cursor
    for r in runs:
        client.runs.delete(r.id)
    with pytest.raises(NotFoundError):
        client.runs.get(run_id)


def test_run_cancelled_async(daemon: Daemon) -> None:
    task = json.dumps(
        {
            "name": "wait",
            "image": IMAGE,
            "agent": "custom",
            "goal": "wait",
            "entrypoint": "sleep 600",
        }
    )

    async def go() -> None:
        async with AsyncClient(daemon.url) as client:
            batch = await client.runs.submit(task)
            run_id = batch.runs[0].id
            async with aclosing(client.runs.iter_events(run_id)) as events:
                async for ev in events:
                    if ev.type == RunEventType.PHASE and ev.phase == "agent":
                        break
            await client.runs.cancel(run_id)
            run = await client.runs.wait_for_completion(run_id, poll_interval=0.2, timeout=120)
            assert run.status == RunStatus.CANCELLED
            ended = [e async for e in client.runs.iter_events(run_id)]
            assert ended[-1].status == RunStatus.CANCELLED
            await client.runs.delete(run_id)

    asyncio.run(go())


def test_bad_task_names_the_field(client: Client) -> None:
    before = client.runs.list()
    with pytest.raises(BadRequestError, match=r"end\.timeout"):
        client.runs.submit(
            "name: x\nagent: custom\ngoal: g\nentrypoint: 'true'\nend: {timeout: soon}\n"
        )
    with pytest.raises(BadRequestError, match="no tasks directory"):
        client.runs.submit(task_name="hello")  # this daemon has none
    assert client.runs.list() == before  # nothing recorded
