from __future__ import annotations

import base64
import gzip
import io
import json
import os
import tarfile
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from pytest_httpx import HTTPXMock

import agent2env.services.run
from agent2env import (
    Agent2EnvError,
    BadRequestError,
    ConflictError,
    NotFoundError,
    StreamError,
    TimeoutError,
)
from agent2env.models import Run, RunStatus, pass_at_k, summarize
from agent2env.services.run import extract_artifacts, pack_inputs

from .conftest import BASE, T0, payload, sse

RUNS = f"{BASE}/runs"

# A run as api/run.go's Run marshals it: every field set.
run_json = payload(
    id="run-1",
    batch_id="batch-1",
    task="copy",
    agent="custom",
    model="m1",
    repeat=1,
    status="succeeded",
    phase="done",
    reason="the agent exited 0 and the check passed",
    exit_code=0,
    sandbox_id="sb1",
    created_at=T0,
    started_at="2025-01-01T12:00:01Z",
    ended_at="2025-01-01T12:00:09Z",
    timings_ms={"create": 120.5, "agent": 3000.0},
    llm={
        "requests": 2,
        "input_tokens": 10,
        "output_tokens": 4,
        "cached_tokens": 1,
        "source": "proxy",
    },
    conversation_id="llx_1",
    conversation_ids=["llx_1", "llx_2"],
    output_tail=["copied"],
    artifacts=[{"path": "/workspace/out.txt", "size": 2}],
    artifacts_truncated=True,
    artifacts_error="a file could not be read",
)

COPY_TASK = """name: copy
agent: custom
goal: copy
entrypoint: cat repo/a.txt > out.txt
inputs: [{source: ./repo, destination: /workspace/repo}]
"""


def query(request: Any) -> dict[str, list[str]]:
    return parse_qs(urlsplit(str(request.url)).query)


def sent(httpx_mock: HTTPXMock) -> Any:
    return json.loads(httpx_mock.get_requests()[-1].content)


def event(seq: int, type: str, **fields: Any) -> tuple[str, str]:
    return "event", json.dumps({"seq": seq, "time": T0, "type": type, **fields})


def test_run_model_mirrors_the_wire() -> None:
    r = Run.model_validate(run_json())
    assert (r.batch_id, r.repeat, r.exit_code, r.sandbox_id) == ("batch-1", 1, 0, "sb1")
    assert r.status == RunStatus.SUCCEEDED
    assert r.ended
    assert r.succeeded
    assert r.timings_ms == {"create": 120.5, "agent": 3000.0}
    assert (r.llm.requests, r.llm.input_tokens, r.llm.cached_tokens) == (2, 10, 1)
    assert r.llm.source == "proxy"
    assert r.conversation_ids == ["llx_1", "llx_2"]
    assert r.output_tail == ["copied"]
    assert (r.artifacts[0].path, r.artifacts[0].size) == ("/workspace/out.txt", 2)
    assert r.artifacts_truncated
    assert r.artifacts_error
    assert r.started_at is not None
    assert r.ended_at is not None
    assert (r.ended_at - r.started_at).total_seconds() == 8
    # Omitted fields (omitempty) and a newer daemon's status.
    bare = Run.model_validate({"id": "r", "status": "paused", "created_at": T0, "llm": {}})
    assert bare.ended
    assert not bare.succeeded
    assert bare.exit_code is None
    assert bare.model is None
    for status in ("queued", "running"):
        assert not Run.model_validate(run_json(status=status)).ended


def test_submit(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(
        method="POST",
        url=RUNS,
        status_code=201,
        json={"id": "batch-1", "task": "hello", "runs": [run_json(status="queued")]},
    )
    batch = client.runs.submit(
        "name: hello\n", agents="codex", models=["m1", "m2"], repeats=3, parallel=2
    )
    assert (batch.id, batch.task, batch.runs[0].status) == ("batch-1", "hello", "queued")
    assert sent(httpx_mock) == {
        "task": "name: hello\n",
        "agents": ["codex"],
        "models": ["m1", "m2"],
        "repeats": 3,
        "parallel": 2,
    }


def test_submit_task_name(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(method="POST", url=RUNS, status_code=201, json={"id": "b"})
    assert client.runs.submit(task_name="hello").runs == []
    assert sent(httpx_mock) == {"task_name": "hello"}


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "give a task's content"),
        ({"task": "name: x", "task_name": "x"}, "not both"),
        ({"task_name": "x", "inputs_from": "."}, "inputs_from goes with"),
        ({"task": "name: x", "agents": ["a", ""]}, "agents: an empty name"),
    ],
)
def test_submit_bad_arguments(client: Any, kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        client.runs.submit(**kwargs)


def test_submit_refused_names_the_field(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(
        method="POST",
        url=RUNS,
        status_code=400,
        json={"error": 'task: end.timeout: "soon" is not a duration', "code": "INVALID_REQUEST"},
    )
    with pytest.raises(BadRequestError, match=r"end\.timeout") as info:
        client.runs.submit("name: x\nend: {timeout: soon}\n")
    assert info.value.code == "INVALID_REQUEST"


def make_task_dir(tmp_path: Path) -> Path:
    (tmp_path / "repo" / "sub").mkdir(parents=True)
    (tmp_path / "repo" / "a.txt").write_text("A\n")
    (tmp_path / "repo" / "a.txt").chmod(0o644)
    (tmp_path / "repo" / "sub" / "b.sh").write_text("echo b\n")
    (tmp_path / "repo" / "sub" / "b.sh").chmod(0o755)
    (tmp_path / "secret.txt").write_text("no\n")
    (tmp_path / "repo" / "link.txt").symlink_to(tmp_path / "secret.txt")
    (tmp_path / "copy.yaml").write_text(COPY_TASK)
    return tmp_path / "copy.yaml"


def unpack(inputs: str) -> dict[str, tuple[bytes, int]]:
    data = gzip.decompress(base64.b64decode(inputs))
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        return {
            m.name: (tar.extractfile(m).read(), m.mode)  # type: ignore[union-attr]
            for m in tar
        }


def test_submit_file_sends_its_inputs(client: Any, httpx_mock: HTTPXMock, tmp_path: Path) -> None:
    path = make_task_dir(tmp_path)
    httpx_mock.add_response(method="POST", url=RUNS, status_code=201, json={"id": "b"})
    client.runs.submit_file(path, models="m1")
    body = sent(httpx_mock)
    assert (body["task"], body["models"]) == (COPY_TASK, ["m1"])
    # The sources' regular files by their paths relative to the task file;
    # the symbolic link, which points outside, is left out.
    files = unpack(body["inputs"])
    assert files == {"repo/a.txt": (b"A\n", 0o644), "repo/sub/b.sh": (b"echo b\n", 0o755)}


def test_submit_file_without_inputs(client: Any, httpx_mock: HTTPXMock, tmp_path: Path) -> None:
    path = tmp_path / "hello.json"
    path.write_text('{"name": "hello", "agent": "codex", "goal": "hi"}')
    httpx_mock.add_response(method="POST", url=RUNS, status_code=201, json={"id": "b"})
    client.runs.submit_file(str(path))
    assert "inputs" not in sent(httpx_mock)


@pytest.mark.parametrize(
    ("task", "message"),
    [
        ("inputs: [{source: ../outside, destination: /x}]", r"inputs\[0\].source: '../outside'"),
        ("inputs: [{source: nothing, destination: /x}]", r"'nothing' is not in"),
        ("inputs: [{destination: /x}]", r"inputs\[0\].source: want the path"),
        ("inputs: [a: b", "task file"),
        ('{"inputs": [{"source": "repo/../../x"}]}', "is not inside"),
    ],
)
def test_pack_inputs_refused(tmp_path: Path, task: str, message: str) -> None:
    (tmp_path / "task").mkdir()
    with pytest.raises(ValueError, match=message):
        pack_inputs(task, tmp_path / "task")


def test_pack_inputs_of_one_file_and_none(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("A")
    (tmp_path / "a.txt").chmod(0o644)
    inputs = pack_inputs('{"inputs": [{"source": "a.txt", "destination": "/w/a"}]}', tmp_path)
    assert inputs is not None
    assert unpack(inputs) == {"a.txt": (b"A", 0o644)}
    assert pack_inputs("name: x  # no inputs at all\n", tmp_path) is None
    assert pack_inputs("inputs: []\n", tmp_path) is None


def test_pack_inputs_without_pyyaml(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    real = agent2env.services.run.importlib.import_module

    def no_yaml(name: str) -> Any:
        if name == "yaml":
            raise ImportError("No module named 'yaml'")
        return real(name)

    monkeypatch.setattr(agent2env.services.run.importlib, "import_module", no_yaml)
    with pytest.raises(ImportError, match=r"agent2env\[tasks\]"):
        pack_inputs(COPY_TASK, tmp_path)
    # A task without inputs, and a JSON one, need no YAML parser.
    assert pack_inputs("name: x\n", tmp_path) is None
    assert pack_inputs('{"inputs": []}', tmp_path) is None


def test_get(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(method="GET", url=f"{RUNS}/run-1", json=run_json())
    assert client.runs.get("run-1").reason == "the agent exited 0 and the check passed"


def test_get_unknown(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(
        url=f"{RUNS}/run-x",
        status_code=404,
        json={"error": "run run-x not found", "code": "NOT_FOUND"},
    )
    with pytest.raises(NotFoundError, match="run run-x not found"):
        client.runs.get("run-x")


def test_list_reads_every_page(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(json={"items": [run_json(id="a")], "next_cursor": "c1"})
    httpx_mock.add_response(json={"items": [run_json(id="b")]})
    runs = client.runs.list(batch="batch-1", status=[RunStatus.FAILED, "hung"], order="desc")
    assert [r.id for r in runs] == ["a", "b"]
    first, second = (query(r) for r in httpx_mock.get_requests())
    assert first == {
        "batch": ["batch-1"],
        "status": ["failed", "hung"],
        "limit": ["500"],
        "order": ["desc"],
    }
    assert second == {**first, "cursor": ["c1"]}


def test_list_page(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(json={"items": [run_json()], "next_cursor": "c2"})
    page = client.runs.list_page(status="running", limit=1, cursor="c1")
    assert (page.items[0].id, page.next_cursor) == ("run-1", "c2")
    assert query(httpx_mock.get_requests()[0]) == {
        "status": ["running"],
        "limit": ["1"],
        "cursor": ["c1"],
    }


def test_list_by_agent_and_model(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(json={"items": [run_json(agent="codex", model="gpt-5")]})
    runs = client.runs.list(agent="codex", model=["gpt-5", "o3"])
    assert [(r.agent, r.model) for r in runs] == [("codex", "gpt-5")]
    httpx_mock.add_response(json={"items": []})
    page = client.runs.list_page(agent=["claude-code", "codex"], status="failed", limit=2)
    assert page.items == []
    first, second = (query(r) for r in httpx_mock.get_requests())
    assert first == {"agent": ["codex"], "model": ["gpt-5", "o3"], "limit": ["500"]}
    assert second == {"agent": ["claude-code", "codex"], "status": ["failed"], "limit": ["2"]}


@pytest.mark.parametrize("kwargs", [{"agent": ""}, {"agent": ["codex", ""]}, {"model": ""}])
def test_list_empty_names(client: Any, httpx_mock: HTTPXMock, kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="an empty name"):
        client.runs.list_page(**kwargs)
    assert httpx_mock.get_requests() == []


def test_list_refused(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(
        status_code=400,
        json={"error": 'status: "done" is not a run status', "code": "INVALID_REQUEST"},
    )
    with pytest.raises(BadRequestError, match="status"):
        client.runs.list_page(status="done")


def test_cancel(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(
        method="POST", url=f"{RUNS}/run-1/cancel", json=run_json(status="cancelled")
    )
    assert client.runs.cancel("run-1").status == RunStatus.CANCELLED


def test_cancel_unknown(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(
        method="POST", url=f"{RUNS}/x/cancel", status_code=404, json={"error": "no run x"}
    )
    with pytest.raises(NotFoundError):
        client.runs.cancel("x")


def test_delete(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(
        method="DELETE", url=f"{BASE}/runs/run-0123456789abcdef", status_code=204
    )
    assert client.runs.delete("run-0123456789abcdef") is None
    assert [r.method for r in httpx_mock.get_requests()] == ["DELETE"]


def test_delete_escapes_the_id(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(method="DELETE", url=f"{BASE}/runs/a%2F..%2Fb", status_code=204)
    client.runs.delete("a/../b")


@pytest.mark.parametrize(
    ("status", "code", "error"),
    [
        (409, "CONFLICT", ConflictError),
        (404, "NOT_FOUND", NotFoundError),
    ],
)
def test_delete_refused(
    client: Any, httpx_mock: HTTPXMock, status: int, code: str, error: type[Exception]
) -> None:
    httpx_mock.add_response(
        method="DELETE",
        url=f"{BASE}/runs/run-1",
        status_code=status,
        json={"error": "run run-1 is running: cancel it first", "code": code},
    )
    with pytest.raises(error) as info:
        client.runs.delete("run-1")
    assert getattr(info.value, "code", None) == code


@pytest.mark.parametrize("method", ["get", "cancel", "delete", "logs", "artifacts", "events"])
def test_empty_id(client: Any, method: str) -> None:
    with pytest.raises(ValueError, match="run id is empty"):
        getattr(client.runs, method)("")


def test_wait_for_completion(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(url=f"{RUNS}/run-1", json=run_json(status="queued"))
    httpx_mock.add_response(url=f"{RUNS}/run-1", json=run_json(status="running"))
    httpx_mock.add_response(url=f"{RUNS}/run-1", json=run_json(status="failed"))
    run = client.runs.wait_for_completion("run-1", poll_interval=0.001)
    assert run.status == RunStatus.FAILED
    assert len(httpx_mock.get_requests()) == 3


def test_wait_for_completion_timeout(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(url=f"{RUNS}/run-1", json=run_json(status="running"), is_reusable=True)
    with pytest.raises(TimeoutError, match=r"run run-1 not ended \(status running"):
        client.runs.wait_for_completion("run-1", poll_interval=0.01, timeout=0.03)


def test_wait_for_batch(client: Any, httpx_mock: HTTPXMock) -> None:
    url = f"{RUNS}?batch=b1&limit=500"
    httpx_mock.add_response(
        url=url, json={"items": [run_json(id="a"), run_json(id="b", status="running")]}
    )
    httpx_mock.add_response(url=url, json={"items": [run_json(id="a"), run_json(id="b")]})
    runs = client.runs.wait_for_batch("b1", poll_interval=0.001)
    assert [r.id for r in runs] == ["a", "b"]
    assert all(r.ended for r in runs)


def test_wait_for_batch_timeout_and_unknown(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(
        url=f"{RUNS}?batch=b1&limit=500",
        json={"items": [run_json(status="queued")]},
        is_reusable=True,
    )
    httpx_mock.add_response(url=f"{RUNS}?batch=nope&limit=500", json={"items": []})
    with pytest.raises(TimeoutError, match="batch b1: 1 of 1 runs not ended"):
        client.runs.wait_for_batch("b1", poll_interval=0.01, timeout=0.03)
    with pytest.raises(NotFoundError, match="batch nope has no runs"):
        client.runs.wait_for_batch("nope")
    with pytest.raises(ValueError, match="batch id is empty"):
        client.runs.wait_for_batch("")


def test_events_to_the_end(client: Any, httpx_mock: HTTPXMock) -> None:
    body = b": keep-alive\n\n" + sse(
        event(1, "phase", phase="create"),
        event(2, "output", phase="agent", stream="stdout", text="copied"),
        ("future", "{}"),
        event(
            3,
            "agent",
            kind="tool_call",
            tool="bash",
            tool_id="t1",
            input={"cmd": "ls"},
            usage={"requests": 1, "input_tokens": 3},
        ),
        event(4, "end", status="succeeded", reason="ok"),
        event(5, "output", text="after the end: never read"),
    )
    httpx_mock.add_response(
        url=f"{RUNS}/run-1/events", content=body, headers={"Content-Type": "text/event-stream"}
    )
    events = list(client.runs.iter_events("run-1"))
    assert [(e.seq, e.type) for e in events] == [
        (1, "phase"),
        (2, "output"),
        (3, "agent"),
        (4, "end"),
    ]
    assert (events[1].stream, events[1].text) == ("stdout", "copied")
    assert events[2].input == {"cmd": "ls"}
    assert events[2].usage is not None
    assert (events[3].status, events[3].reason) == (RunStatus.SUCCEEDED, "ok")


def test_events_resume_after(client: Any, httpx_mock: HTTPXMock) -> None:
    # The daemon starts the stream after the seq asked for.
    body = sse(event(3, "output", text="three"), event(4, "end", status="failed"))
    httpx_mock.add_response(
        url=f"{RUNS}/run-1/events?after=2",
        content=body,
        headers={"Content-Type": "text/event-stream"},
    )
    assert [e.seq for e in client.runs.events("run-1", after=2)] == [3, 4]


def test_events_from_the_start_send_no_after(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(
        url=f"{RUNS}/run-1/events",
        content=sse(event(1, "end", status="failed")),
        headers={"Content-Type": "text/event-stream"},
    )
    assert [e.seq for e in client.runs.events("run-1", after=0)] == [1]
    assert query(httpx_mock.get_requests()[0]) == {}


def test_events_after_negative(client: Any, httpx_mock: HTTPXMock) -> None:
    with pytest.raises(ValueError, match="after -1"):
        client.runs.events("run-1", after=-1)
    assert httpx_mock.get_requests() == []


def test_events_stream_broke(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(
        url=f"{RUNS}/run-1/events",
        content=sse(event(1, "phase")),
        headers={"Content-Type": "text/event-stream"},
    )
    httpx_mock.add_response(url=f"{RUNS}/run-1", json=run_json(status="running"))
    with pytest.raises(StreamError, match="run run-1 event stream ended early"):
        client.runs.events("run-1")


def test_events_of_a_log_without_its_end(client: Any, httpx_mock: HTTPXMock) -> None:
    # A daemon killed mid-run leaves no end event; the run ended failed on restart.
    httpx_mock.add_response(
        url=f"{RUNS}/run-1/events",
        content=sse(event(1, "phase")),
        headers={"Content-Type": "text/event-stream"},
    )
    httpx_mock.add_response(url=f"{RUNS}/run-1", json=run_json(status="failed"))
    assert [e.seq for e in client.runs.events("run-1")] == [1]


def test_events_error(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(
        url=f"{RUNS}/run-1/events",
        content=sse(("error", '{"error": "event log unreadable", "code": "INTERNAL_ERROR"}')),
        headers={"Content-Type": "text/event-stream"},
    )
    httpx_mock.add_response(
        url=f"{RUNS}/x/events", status_code=404, json={"error": "run x not found"}
    )
    with pytest.raises(Agent2EnvError, match="event log unreadable"):
        client.runs.events("run-1")
    with pytest.raises(NotFoundError):
        client.runs.events("x")


def test_logs(client: Any, httpx_mock: HTTPXMock) -> None:
    text = "copied\n[stderr] warning\n"
    httpx_mock.add_response(url=f"{RUNS}/run-1/logs", text=text, is_reusable=True)
    assert client.runs.logs("run-1") == text
    assert list(client.runs.iter_logs("run-1")) == ["copied", "[stderr] warning"]


def test_logs_unknown(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(
        url=f"{RUNS}/x/logs", status_code=404, json={"error": "run x not found"}, is_reusable=True
    )
    with pytest.raises(NotFoundError):
        client.runs.logs("x")
    with pytest.raises(NotFoundError):
        list(client.runs.iter_logs("x"))


def tar_of(*members: tuple[tarfile.TarInfo, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for info, data in members:
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def test_artifacts(client: Any, httpx_mock: HTTPXMock, tmp_path: Path) -> None:
    archive = tar_of(
        (tarfile.TarInfo("workspace/out.txt"), b"A\n"),
        (tarfile.TarInfo("tmp/report/r.json"), b"{}"),
    )
    httpx_mock.add_response(url=f"{RUNS}/run-1/artifacts", content=archive, is_reusable=True)
    assert client.runs.artifacts("run-1") == archive
    written = client.runs.artifacts_to("run-1", tmp_path)
    assert [os.path.relpath(p, tmp_path) for p in written] == [
        "workspace/out.txt",
        "tmp/report/r.json",
    ]
    assert (tmp_path / "workspace" / "out.txt").read_bytes() == b"A\n"


def test_extract_artifacts_stays_inside(tmp_path: Path) -> None:
    link = tarfile.TarInfo("workspace/link")
    link.type = tarfile.SYMTYPE
    link.linkname = "/etc/passwd"
    out = tmp_path / "out"
    assert extract_artifacts(tar_of((link, b"")), out) == []
    with pytest.raises(Agent2EnvError, match="would be written outside"):
        extract_artifacts(tar_of((tarfile.TarInfo("../escape"), b"x")), out)
    assert not (tmp_path / "escape").exists()


def test_artifact(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(url=f"{RUNS}/run-1/artifacts/workspace/a%20b%3F.txt", content=b"data")
    assert client.runs.artifact("run-1", "/workspace/a b?.txt") == b"data"


def test_artifact_not_brought_back(client: Any, httpx_mock: HTTPXMock) -> None:
    httpx_mock.add_response(
        url=f"{RUNS}/run-1/artifacts/etc/passwd",
        status_code=404,
        json={"error": "run run-1 has no artifact /etc/passwd", "code": "NOT_FOUND"},
    )
    with pytest.raises(NotFoundError, match="no artifact"):
        client.runs.artifact("run-1", "/etc/passwd")
    for bad in ("/", ""):
        with pytest.raises(ValueError, match="artifact path is empty"):
            client.runs.artifact("run-1", bad)


@pytest.mark.parametrize(
    ("n", "c", "k", "want"),
    [
        (0, 0, 1, 0.0),
        (3, 0, 1, 0.0),
        (3, 3, 1, 1.0),
        (4, 1, 1, 0.25),
        (4, 1, 2, 0.5),
        (5, 2, 2, 0.7),
        (2, 1, 3, 0.0),
        (200, 1, 100, 0.5),
    ],
)
def test_pass_at_k(n: int, c: int, k: int, want: float) -> None:
    assert pass_at_k(n, c, k) == pytest.approx(want)


def test_summarize() -> None:
    runs = [
        Run.model_validate(run_json(model="m1", status=s))
        for s in ("succeeded", "failed", "failed", "succeeded")
    ] + [Run.model_validate(run_json(model="m2", status="hung"))]
    m1, m2 = summarize(runs)
    assert (m1.model, m1.runs, m1.succeeded, m1.pass_at_1, m1.pass_at_k) == ("m1", 4, 2, 0.5, 1.0)
    assert m1.status == {"succeeded": 2, "failed": 2}
    assert (m2.model, m2.runs, m2.succeeded, m2.pass_at_k, m2.status) == (
        "m2",
        1,
        0,
        0.0,
        {"hung": 1},
    )
