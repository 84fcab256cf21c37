"""The task runs' service (agent2env addition): tasks submitted, followed, read and removed.

A task file (task.schema.json: an agent, a goal, inputs, end conditions and
artifacts) submitted with :meth:`RunService.submit_file` runs k times per agent x
model combination, each run in its own sandbox. Its runs are followed event by
event, waited for, and read back: status, reason, exit code, timings, LLM usage,
the agent's output and the artifacts. The daemon removes the runs that ended
longer ago than its ``--run-max-age`` (default 30 days) by itself.
"""

from __future__ import annotations

import base64
import builtins
import importlib
import io
import json
import math
import os
import re
import tarfile
import time
from collections.abc import AsyncGenerator, Generator, Sequence
from typing import Any

from .._async_base import AsyncAPIClient
from .._base import (
    Op,
    Order,
    Request,
    SyncAPIClient,
    call,
    error_from_event,
    every_page,
    paged,
    parse_bytes,
    parse_model,
    parse_none,
    segment,
    sleep,
    stream_ended,
    translate_errors,
)
from .._sse import SSEEvent
from ..exceptions import Agent2EnvError, NotFoundError, TimeoutError
from ..models.run import Run, RunBatch, RunEvent, RunEventType, RunList, RunStatus

__all__ = ["AsyncRunService", "RunEventParser", "RunService", "extract_artifacts", "pack_inputs"]

LocalPath = str | os.PathLike[str]
Names = str | Sequence[str] | None
Statuses = RunStatus | str | Sequence[RunStatus | str] | None

PAGE_SIZE = 500
"""Runs a page when a whole list is read a page at a time."""


def _path(run_id: str, suffix: str = "") -> str:
    return f"/runs/{segment(run_id, 'run id')}{suffix}"


def _names(what: str, names: Names) -> list[str] | None:
    if names is None:
        return None
    out = [names] if isinstance(names, str) else list(names)
    if not all(out):
        raise ValueError(f"{what}: an empty name")
    return out


def _task_sources(text: str) -> list[str]:
    """Return the input sources a task file's text names (``inputs[].source``)."""
    if not re.search(r"\binputs\b", text):
        return []
    try:
        task = json.loads(text)
    except ValueError:
        try:
            yaml: Any = importlib.import_module("yaml")
        except ImportError as e:
            raise ImportError(
                "reading a YAML task's inputs needs PyYAML: pip install 'agent2env[tasks]'"
            ) from e
        try:
            task = yaml.safe_load(text)
        except yaml.YAMLError as e:
            raise ValueError(f"task file: {e}") from e
    inputs = task.get("inputs") if isinstance(task, dict) else None
    if not isinstance(inputs, list):
        return []
    sources = []
    for i, entry in enumerate(inputs):
        source = entry.get("source") if isinstance(entry, dict) else None
        if not isinstance(source, str) or not source:
            raise ValueError(f"inputs[{i}].source: want the path of a file or directory")
        sources.append(source)
    return sources


def pack_inputs(task: str, directory: LocalPath) -> str | None:
    """Return a task's input sources as the daemon takes them: a gzipped tar, in base64.

    Each source of the task's ``inputs`` is read from ``directory`` (where the
    task file is), its regular files by their paths relative to it; symbolic
    links are left out, as ``agent2env task run`` leaves them: one could bring
    in a file from outside the directory. None when the task has no inputs.

    Raises:
        ValueError: A source is missing, or not inside ``directory``.
        ImportError: The task is YAML with inputs, and PyYAML is not installed.

    """
    sources = _task_sources(task)
    if not sources:
        return None
    root = os.path.realpath(directory)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for i, source in enumerate(sources):
            src = os.path.realpath(os.path.join(root, source))
            if os.path.commonpath([root, src]) != root:
                raise ValueError(f"inputs[{i}].source: {source!r} is not inside {root}")
            if not os.path.exists(src):
                raise ValueError(f"inputs[{i}].source: {source!r} is not in {root}")
            for path in _regular_files(src):
                tar.add(path, arcname=os.path.relpath(path, root).replace(os.sep, "/"))
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _regular_files(src: str) -> list[str]:
    if not os.path.isdir(src):
        return [src] if os.path.isfile(src) else []
    out = []
    for dirpath, dirnames, filenames in os.walk(src):
        dirnames.sort()
        for name in sorted(filenames):
            p = os.path.join(dirpath, name)
            if os.path.isfile(p) and not os.path.islink(p):
                out.append(p)
    return out


def _submit_body(
    task: str | None,
    task_name: str | None,
    inputs_from: LocalPath | None,
    agents: Names,
    models: Names,
    repeats: int | None,
    parallel: int | None,
) -> dict[str, Any]:
    if (task is None) == (task_name is None):
        raise ValueError("give a task's content (task) or the name of one (task_name), not both")
    if task_name is not None and inputs_from is not None:
        raise ValueError("inputs_from goes with a task's content: a named task's are beside it")
    body: dict[str, Any] = {
        "task": task,
        "task_name": task_name,
        "inputs": None if task is None or inputs_from is None else pack_inputs(task, inputs_from),
        "agents": _names("agents", agents),
        "models": _names("models", models),
        "repeats": repeats,
        "parallel": parallel,
    }
    return {k: v for k, v in body.items() if v is not None}


def _file_body(
    path: LocalPath, agents: Names, models: Names, repeats: int | None, parallel: int | None
) -> dict[str, Any]:
    """Return the submission of a task file, its inputs read from its directory."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    inputs_from = os.path.dirname(os.path.abspath(path))
    return _submit_body(text, None, inputs_from, agents, models, repeats, parallel)


def _submit(body: dict[str, Any]) -> Op[RunBatch]:
    return call(Request("POST", "/runs", json=body), parse_model(RunBatch))


def _filters(
    batch: str | None, status: Statuses, agent: Names = None, model: Names = None
) -> dict[str, str | int | list[str]]:
    params: dict[str, str | int | list[str]] = {}
    if batch:
        params["batch"] = batch
    if status:
        statuses = [status] if isinstance(status, str) else list(status)
        params["status"] = [str(s) for s in statuses]
    for name, names in (("agent", agent), ("model", model)):
        values = _names(name, names)
        if values:
            params[name] = values
    return params


def _list_page(params: dict[str, str | int | list[str]]) -> Op[RunList]:
    return call(Request("GET", "/runs", params=params), parse_model(RunList))


def _list(params: dict[str, str | int | list[str]]) -> Op[list[Run]]:
    return every_page(_list_page, params)


def _get(run_id: str) -> Op[Run]:
    return call(Request("GET", _path(run_id)), parse_model(Run))


def _cancel(run_id: str) -> Op[Run]:
    return call(Request("POST", _path(run_id, "/cancel")), parse_model(Run))


def _delete(run_id: str) -> Op[None]:
    return call(Request("DELETE", _path(run_id)), parse_none)


def _deadline(timeout: float | None) -> float:
    return math.inf if timeout is None else time.monotonic() + timeout


def _pause(deadline: float, poll_interval: float, what: str, timeout: float | None) -> Op[None]:
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise TimeoutError(f"{what} after {timeout:g}s")
    yield from sleep(min(poll_interval, remaining))


def _wait_for_completion(run_id: str, poll_interval: float, timeout: float | None) -> Op[Run]:
    deadline = _deadline(timeout)
    while True:
        run = yield from _get(run_id)
        if run.ended:
            return run
        what = f"run {run_id} not ended (status {run.status}, phase {run.phase})"
        yield from _pause(deadline, poll_interval, what, timeout)


def _wait_for_batch(batch_id: str, poll_interval: float, timeout: float | None) -> Op[list[Run]]:
    if not batch_id:
        raise ValueError("batch id is empty")
    deadline = _deadline(timeout)
    while True:
        runs = yield from _list(paged(_filters(batch_id, None), PAGE_SIZE, None, None))
        if not runs:
            raise NotFoundError(
                f"batch {batch_id} has no runs (no such batch, or they were deleted)"
            )
        going = [r for r in runs if not r.ended]
        if not going:
            return runs
        what = f"batch {batch_id}: {len(going)} of {len(runs)} runs not ended"
        yield from _pause(deadline, poll_interval, what, timeout)


def _events_request(run_id: str, after: int) -> Request:
    if after < 0:
        raise ValueError(f"after {after!r}: want the seq of an event, 0 or more")
    params: dict[str, str | int | list[str]] | None = {"after": after} if after else None
    return Request("GET", _path(run_id, "/events"), params=params, min_read_timeout=math.inf)


def _check_ended(run_id: str) -> Op[None]:
    """Raise unless the run ended: its event stream ended before its ``end`` event.

    A log that a killed daemon left has no end event, yet its run ended.
    """
    run = yield from _get(run_id)
    if not run.ended:
        raise stream_ended(f"run {run_id} event")


class RunEventParser:
    """Turns a run's event stream into :class:`RunEvent` items, up to the ``end`` event.

    The daemon starts the stream after the event the request names
    (``after``), so every event it sends is one to pass on.
    """

    def __init__(self) -> None:
        self.done = False

    def feed(self, event: SSEEvent) -> RunEvent | None:
        """Take one event; an ``error`` event raises the daemon's error."""
        if event.event == "error":
            raise error_from_event(event)
        if event.event != "event":
            return None
        ev = RunEvent.model_validate(event.json())
        self.done = ev.type == RunEventType.END
        return ev

    def finish(self) -> None:
        """Nothing: whether a stream without its end event is an error, the run's status says."""


def _logs(run_id: str) -> Op[str]:
    return call(Request("GET", _path(run_id, "/logs")), lambda resp: resp.text)


def _artifacts(run_id: str) -> Op[bytes]:
    return call(Request("GET", _path(run_id, "/artifacts")), parse_bytes)


def _artifact(run_id: str, path: str) -> Op[bytes]:
    rel = path.lstrip("/")
    if not rel:
        raise ValueError("artifact path is empty")
    escaped = "/".join(segment(s, "artifact path segment") for s in rel.split("/"))
    return call(Request("GET", _path(run_id, "/artifacts/" + escaped)), parse_bytes)


def extract_artifacts(data: bytes, directory: LocalPath) -> builtins.list[str]:
    """Write a run's artifacts tar under ``directory``, each by its path in the sandbox.

    Returns the files written. Only regular files are written, and none
    outside ``directory``: an entry that would be is an error, and nothing
    after it is written.
    """
    root = os.path.realpath(directory)
    written = []
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
        for member in tar:
            if not member.isfile():
                continue
            target = os.path.realpath(os.path.join(root, member.name))
            if os.path.commonpath([root, target]) != root:
                raise Agent2EnvError(f"artifact {member.name!r} would be written outside {root}")
            src = tar.extractfile(member)
            assert src is not None  # a regular file's
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with src, open(target, "wb") as f:
                f.write(src.read())
            written.append(target)
    return written


class RunService:
    """Task runs; get it as :attr:`agent2env.Client.runs`.

    The usual path: submit a task file, wait for its runs, read their results::

        batch = client.runs.submit_file("tasks/hello.yaml", agents="codex", repeats=3)
        runs = client.runs.wait_for_batch(batch.id)
        for s in summarize(runs):
            print(s.task, s.agent, s.model, f"pass@1 {s.pass_at_1:.2f}")

    """

    def __init__(self, client: SyncAPIClient) -> None:
        self._c = client

    def submit(
        self,
        task: str | None = None,
        *,
        task_name: str | None = None,
        inputs_from: LocalPath | None = None,
        agents: Names = None,
        models: Names = None,
        repeats: int | None = None,
        parallel: int | None = None,
    ) -> RunBatch:
        """Submit a task and return its runs, queued.

        Args:
            task: A task file's content, YAML or JSON.
            task_name: Instead, the name of a task file in the daemon's tasks directory.
            inputs_from: The directory ``task``'s input sources are relative to (where
                its file is); they are sent with it. A task with inputs and without it
                runs failed.
            agents: Overrides the task's agent; several make a matrix with ``models``.
            models: Overrides the task's model; several make a matrix with ``agents``.
            repeats: Overrides the task's repeats (k): runs per combination.
            parallel: How many of the runs go at once (default: all, within the
                daemon's limit).

        Raises:
            BadRequestError: The task does not load, or an agent, a model or an
                override is bad; the message names the field. So is a ``task_name``
                to a daemon without a tasks directory (``serve --tasks-dir``).
            NotFoundError: ``task_name`` names no task, or the task's template is unknown.

        """
        body = _submit_body(task, task_name, inputs_from, agents, models, repeats, parallel)
        return self._c.run(_submit(body))

    def submit_file(
        self,
        path: LocalPath,
        *,
        agents: Names = None,
        models: Names = None,
        repeats: int | None = None,
        parallel: int | None = None,
    ) -> RunBatch:
        """Submit a task file, its inputs read from beside it, as ``agent2env task run`` does.

        See :meth:`submit` for the arguments and errors. A YAML task with inputs
        needs PyYAML (``pip install 'agent2env[tasks]'``).
        """
        body = _file_body(path, agents, models, repeats, parallel)
        return self._c.run(_submit(body))

    def get(self, run_id: str) -> Run:
        """Return a run; once it ended, with its result. An unknown one is NotFoundError."""
        return self._c.run(_get(run_id))

    def list(
        self,
        *,
        batch: str | None = None,
        status: Statuses = None,
        agent: Names = None,
        model: Names = None,
        order: Order | None = None,
    ) -> builtins.list[Run]:
        """Return the runs, oldest first (newest with ``order="desc"``), read a page at a time.

        Args:
            batch: Only one submission's runs (:attr:`RunBatch.id`).
            status: Only the runs in this status, or in one of these.
            agent: Only the runs of this agent (``"claude-code"``), or of one of these.
            model: Only the runs of this model, or of one of these, by the name
                the run records (:attr:`Run.model`).
            order: ``"desc"`` lists newest first, ``"asc"`` oldest first, the default.

        Raises:
            BadRequestError: A status or an agent is not one, or ``order`` neither
                ``"asc"`` nor ``"desc"``.
            ValueError: An empty agent or model name.

        """
        params = _filters(batch, status, agent, model)
        return self._c.run(_list(paged(params, PAGE_SIZE, None, order)))

    def list_page(
        self,
        *,
        batch: str | None = None,
        status: Statuses = None,
        agent: Names = None,
        model: Names = None,
        limit: int | None = None,
        cursor: str | None = None,
        order: Order | None = None,
    ) -> RunList:
        """Return a page of the runs :meth:`list` selects.

        Args:
            batch: As :meth:`list`'s.
            status: As :meth:`list`'s.
            agent: As :meth:`list`'s.
            model: As :meth:`list`'s.
            limit: The page's size (1 to 1000); without it, every run.
            cursor: The ``next_cursor`` of the page before.
            order: As :meth:`list`'s.

        Raises:
            BadRequestError: A status or an agent is not one, ``limit`` not from 1
                to 1000, ``cursor`` not one the daemon gave, or a bad ``order``.
            ValueError: An empty agent or model name.

        """
        params = _filters(batch, status, agent, model)
        return self._c.run(_list_page(paged(params, limit, cursor, order)))

    def cancel(self, run_id: str) -> Run:
        """Cancel a run and return it.

        A queued run ends cancelled at once; a running one once its agent is
        stopped and its artifacts collected (the answer may still say running).
        An ended run is returned as it is.
        """
        return self._c.run(_cancel(run_id))

    def delete(self, run_id: str) -> None:
        """Remove an ended run with its event log, output and artifacts.

        Raises:
            ConflictError: The run has not ended (code ``CONFLICT``): cancel it first.
            NotFoundError: No such run, or another API key's.

        """
        self._c.run(_delete(run_id))

    def wait_for_completion(
        self, run_id: str, *, poll_interval: float = 2.0, timeout: float | None = None
    ) -> Run:
        """Poll a run until it ended and return it, however it ended.

        Args:
            run_id: The run.
            poll_interval: Seconds between polls.
            timeout: Seconds to wait at most; default as long as it takes (the
                task's ``end.timeout`` bounds a run).

        Raises:
            TimeoutError: The run had not ended in time.

        """
        return self._c.run(_wait_for_completion(run_id, poll_interval, timeout))

    def wait_for_batch(
        self, batch_id: str, *, poll_interval: float = 2.0, timeout: float | None = None
    ) -> builtins.list[Run]:
        """Poll a submission's runs until every one ended and return them, oldest first.

        See :meth:`wait_for_completion` for the arguments; an unknown batch is
        NotFoundError.
        """
        return self._c.run(_wait_for_batch(batch_id, poll_interval, timeout))

    def iter_events(self, run_id: str, *, after: int = 0) -> Generator[RunEvent, None, None]:
        """Yield a run's events from its start, then as they happen, up to its ``end`` event.

        Args:
            run_id: The run.
            after: Start after the event of this ``seq``: give the last one seen to
                resume a follow that broke, missing nothing and getting nothing
                twice. The daemon skips to it, however long the log. After the
                ``end`` event's, nothing is yielded.

        Raises:
            NotFoundError: No such run.
            StreamError: The stream ended before the run did (the daemon stopped,
                or the connection broke).
            ValueError: ``after`` is negative.

        """
        req = _events_request(run_id, after)
        parser = RunEventParser()
        yield from self._c.iter_stream(req, parser)
        if not parser.done:
            self._c.run(_check_ended(run_id))

    def events(self, run_id: str, *, after: int = 0) -> builtins.list[RunEvent]:
        """Return a run's events up to its ``end``, waiting for it; see :meth:`iter_events`."""
        return builtins.list(self.iter_events(run_id, after=after))

    def logs(self, run_id: str) -> str:
        """Return the agent's output (and the setup commands' and the check's).

        One line each, stderr lines marked ``[stderr] ``.
        """
        return self._c.run(_logs(run_id))

    def iter_logs(self, run_id: str) -> Generator[str, None, None]:
        """Yield the lines of the agent's output as the daemon reads them; see :meth:`logs`."""
        req = Request("GET", _path(run_id, "/logs"))
        with self._c.open(req) as resp, translate_errors(self._c.config.url(req)):
            yield from resp.iter_lines()

    def artifacts(self, run_id: str) -> bytes:
        """Return a run's artifacts as a tar archive, each by its path in the sandbox."""
        return self._c.run(_artifacts(run_id))

    def artifacts_to(self, run_id: str, directory: LocalPath) -> builtins.list[str]:
        """Write a run's artifacts under ``directory`` by their paths in the sandbox.

        ``/workspace/out.txt`` lands at ``directory/workspace/out.txt``.
        Returns the files written.
        """
        return extract_artifacts(self.artifacts(run_id), directory)

    def artifact(self, run_id: str, path: str) -> bytes:
        """Return one artifact by its path in the sandbox; one not brought back is NotFoundError."""
        return self._c.run(_artifact(run_id, path))


class AsyncRunService:
    """The async twin of :class:`RunService`: ``AsyncClient.runs``."""

    def __init__(self, client: AsyncAPIClient) -> None:
        self._c = client

    async def submit(
        self,
        task: str | None = None,
        *,
        task_name: str | None = None,
        inputs_from: LocalPath | None = None,
        agents: Names = None,
        models: Names = None,
        repeats: int | None = None,
        parallel: int | None = None,
    ) -> RunBatch:
        """Submit a task; see :meth:`RunService.submit`."""
        body = _submit_body(task, task_name, inputs_from, agents, models, repeats, parallel)
        return await self._c.run(_submit(body))

    async def submit_file(
        self,
        path: LocalPath,
        *,
        agents: Names = None,
        models: Names = None,
        repeats: int | None = None,
        parallel: int | None = None,
    ) -> RunBatch:
        """Submit a task file with its inputs; see :meth:`RunService.submit_file`."""
        body = _file_body(path, agents, models, repeats, parallel)
        return await self._c.run(_submit(body))

    async def get(self, run_id: str) -> Run:
        """Return a run; see :meth:`RunService.get`."""
        return await self._c.run(_get(run_id))

    async def list(
        self,
        *,
        batch: str | None = None,
        status: Statuses = None,
        agent: Names = None,
        model: Names = None,
        order: Order | None = None,
    ) -> builtins.list[Run]:
        """Return the runs; see :meth:`RunService.list`."""
        params = _filters(batch, status, agent, model)
        return await self._c.run(_list(paged(params, PAGE_SIZE, None, order)))

    async def list_page(
        self,
        *,
        batch: str | None = None,
        status: Statuses = None,
        agent: Names = None,
        model: Names = None,
        limit: int | None = None,
        cursor: str | None = None,
        order: Order | None = None,
    ) -> RunList:
        """Return a page of runs; see :meth:`RunService.list_page`."""
        params = _filters(batch, status, agent, model)
        return await self._c.run(_list_page(paged(params, limit, cursor, order)))

    async def cancel(self, run_id: str) -> Run:
        """Cancel a run; see :meth:`RunService.cancel`."""
        return await self._c.run(_cancel(run_id))

    async def delete(self, run_id: str) -> None:
        """Remove an ended run; see :meth:`RunService.delete`."""
        await self._c.run(_delete(run_id))

    async def wait_for_completion(
        self, run_id: str, *, poll_interval: float = 2.0, timeout: float | None = None
    ) -> Run:
        """Poll a run until it ended; see :meth:`RunService.wait_for_completion`."""
        return await self._c.run(_wait_for_completion(run_id, poll_interval, timeout))

    async def wait_for_batch(
        self, batch_id: str, *, poll_interval: float = 2.0, timeout: float | None = None
    ) -> builtins.list[Run]:
        """Poll a batch until its runs ended; see :meth:`RunService.wait_for_batch`."""
        return await self._c.run(_wait_for_batch(batch_id, poll_interval, timeout))

    async def iter_events(self, run_id: str, *, after: int = 0) -> AsyncGenerator[RunEvent, None]:
        """Yield a run's events up to its end; see :meth:`RunService.iter_events`."""
        req = _events_request(run_id, after)
        parser = RunEventParser()
        async for ev in self._c.iter_stream(req, parser):
            yield ev
        if not parser.done:
            await self._c.run(_check_ended(run_id))

    async def events(self, run_id: str, *, after: int = 0) -> builtins.list[RunEvent]:
        """Return a run's events up to its end; see :meth:`RunService.events`."""
        return [ev async for ev in self.iter_events(run_id, after=after)]

    async def logs(self, run_id: str) -> str:
        """Return the agent's output; see :meth:`RunService.logs`."""
        return await self._c.run(_logs(run_id))

    async def iter_logs(self, run_id: str) -> AsyncGenerator[str, None]:
        """Yield the lines of the agent's output; see :meth:`RunService.iter_logs`."""
        req = Request("GET", _path(run_id, "/logs"))
        async with self._c.open(req) as resp:
            with translate_errors(self._c.config.url(req)):
                async for line in resp.aiter_lines():
                    yield line

    async def artifacts(self, run_id: str) -> bytes:
        """Return a run's artifacts as a tar archive; see :meth:`RunService.artifacts`."""
        return await self._c.run(_artifacts(run_id))

    async def artifacts_to(self, run_id: str, directory: LocalPath) -> builtins.list[str]:
        """Write a run's artifacts under a directory; see :meth:`RunService.artifacts_to`."""
        return extract_artifacts(await self.artifacts(run_id), directory)

    async def artifact(self, run_id: str, path: str) -> bytes:
        """Return one artifact; see :meth:`RunService.artifact`."""
        return await self._c.run(_artifact(run_id, path))
