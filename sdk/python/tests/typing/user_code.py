"""User code against the public API, checked by ``mypy --strict`` (never run).

Each annotated assignment states a type the API must give; each
``type: ignore`` marks a misuse the API must reject (mypy's
warn_unused_ignores fails the check if it does not).
"""

from __future__ import annotations

import io
from contextlib import aclosing, closing
from pathlib import Path

from agent2env import (
    APIError,
    AsyncClient,
    AsyncSessionManager,
    Client,
    CompilationError,
    ConflictError,
    ConnectionError,
    LiteBoxdError,
    NotFoundError,
    PrepullFailedError,
    ResourceLimitError,
    RuntimeExecutionError,
    SandboxCreationError,
    SandboxFailedError,
    SessionConfig,
    SessionManager,
    SystemExecutionError,
    TimeoutError,
)
from agent2env.models import (
    Context,
    CreateTemplateRequest,
    ExecAction,
    ExecEvent,
    ExecResult,
    ExecuteResponse,
    ExecutionEvent,
    ExecutionResult,
    FileInfo,
    Flavor,
    ForkedSandbox,
    ForkResult,
    Image,
    ImageProgress,
    ImportResult,
    ImportStrategy,
    LogsResult,
    NetworkSpec,
    PrepullStatus,
    PrepullTask,
    ProbeSpec,
    ResourceSpec,
    RollbackResult,
    Run,
    RunBatch,
    RunEvent,
    RunList,
    RunStatus,
    RunSummary,
    Sandbox,
    SandboxOverrides,
    SandboxStatus,
    Session,
    SessionCommandResult,
    SessionExecuteResult,
    Snapshot,
    SnapshotStatus,
    Stats,
    Template,
    TemplateListResult,
    TemplateSpec,
    TemplateVersion,
    UpdateTemplateRequest,
    Usage,
    VersionListResult,
    pass_at_k,
    summarize,
)
from agent2env.sessions import FLAVORS


def seed_quickstart() -> None:
    client = Client("http://localhost:8080/api/v1")
    sandbox: Sandbox = client.sandbox.create(
        template="python-data-science",
        overrides={"ttl": 7200, "env": {"DEBUG": "true"}},
    )
    sandbox = client.sandbox.wait_for_ready(sandbox.id)
    status: SandboxStatus = sandbox.status
    result: ExecResult = client.sandbox.execute(
        sandbox.id,
        command=["python", "-c", "print('Hello from sandbox!')"],
    )
    out: str = result.stdout
    raw: bytes = result.stdout_bytes + result.stderr_bytes
    code: int = result.exit_code
    print(status, out, raw, code)
    client.sandbox.delete(sandbox.id)
    client.close()


async def seed_async() -> None:
    async with AsyncClient("http://localhost:8080/api/v1") as client:
        sandbox: Sandbox = await client.sandbox.create(template="python-data-science")
        sandbox = await client.sandbox.wait_for_ready(sandbox.id)
        result: ExecResult = await client.sandbox.execute(
            sandbox.id, command=["python", "-c", "print('Hello!')"]
        )
        print(result.stdout)
        async for event in client.sandbox.execute_stream(sandbox.id, ["echo", "hi"]):
            chunk: ExecEvent = event
            data: bytes = chunk.data_bytes
            print(chunk.data, data)
        await client.sandbox.delete(sandbox.id)
        client.sandbox.create(template="x")  # type: ignore[unused-coroutine]


def seed_templates() -> None:
    client = Client("http://localhost:8080/api/v1")
    template: Template = client.template.create(
        CreateTemplateRequest(
            name="my-python-template",
            display_name="My Python Template",
            description="Custom Python environment",
            tags=["python", "custom"],
            spec=TemplateSpec(
                image="agent2env/python",
                resources=ResourceSpec(cpu="1000m", memory="1Gi"),
                ttl=7200,
                startup_script="pip install numpy pandas",
                readiness_probe=ProbeSpec(exec=ExecAction(command=["true"]), period_seconds=1),
                network=NetworkSpec(allow_internet_access=False, allowed_domains=["pypi.org"]),
            ),
            auto_prepull=True,
        )
    )
    version: int = template.latest_version
    templates: TemplateListResult = client.template.list(tag="python")
    for t in templates.items:
        print(f"- {t.name}: {t.description}", version)
    yaml_content: bytes = client.template.export_yaml("my-python-template")
    print(yaml_content.decode())
    updated: Template = client.template.update(
        "my-python-template",
        UpdateTemplateRequest(spec=TemplateSpec(image="agent2env/python"), changelog="c"),
    )
    versions: VersionListResult = client.template.list_versions(updated.name)
    one: TemplateVersion = client.template.get_version(updated.name, versions.items[0].version)
    back: RollbackResult = client.template.rollback(one.template_id, 1, changelog="back")
    print(back.rolled_back_to)
    imported: ImportResult = client.import_export.import_templates(
        yaml_content, strategy=ImportStrategy.CREATE_ONLY
    )
    print(imported.results[0].action, client.import_export.export_all(names=["a"]))
    CreateTemplateRequest(name="x", spec=TemplateSpec(image="y"), displayName="z")  # type: ignore[call-arg]
    TemplateSpec(image=1)  # type: ignore[arg-type]
    client.template.list(size=3)  # type: ignore[call-arg]
    client.close()


def prepull_and_images() -> None:
    with Client() as client:
        task: PrepullTask = client.prepull.create("agent2env/python", timeout=60)
        tasks: list[PrepullTask] = client.prepull.list(status=PrepullStatus.PULLING)
        done: PrepullTask = client.prepull.wait_for_completion(task.id, poll_interval=0.5)
        print(tasks, done.completed_at)
        progress: list[ImageProgress] = []
        image: Image = client.images.pull("alpine:3", on_progress=progress.append)
        images: list[Image] = client.images.import_archive(Path("images.tar"))
        print(image.digest, images)


def files_and_contexts(client: Client, sandbox_id: str) -> None:
    info: FileInfo = client.sandbox.upload_file(sandbox_id, "a.txt", b"hi", mode=0o600)
    info = client.sandbox.upload_path(sandbox_id, "b.bin", Path("b.bin"))
    data: bytes = client.sandbox.download_file(sandbox_id, info.path)
    written: int = client.sandbox.download_to(sandbox_id, "a.txt", io.BytesIO())
    logs: LogsResult = client.sandbox.get_logs(sandbox_id)
    print(data, written, logs.events)
    client.sandbox.stop(sandbox_id)
    client.sandbox.start(sandbox_id)
    client.sandbox.restart(sandbox_id)
    for event in client.sandbox.execute_stream(sandbox_id, ["ls"], timeout=5):
        if event.type == "exit":
            print(event.exit_code)

    ctx: Context = client.contexts.create("python", session_name="s")
    res: ExecuteResponse = client.contexts.execute(ctx.context_id, "6 * 7", timeout=10)
    figures: list[ExecutionResult] = [r for r in res.results if r.png]
    png: bytes | None = figures[0].png_bytes()
    if res.error is not None:
        print(res.error.name, res.error.value, res.error.traceback, res.error.kind)
    print(res.state_lost, png)
    res = client.contexts.execute_stream(
        ctx.context_id, "print(1)", on_stdout=print, on_error=lambda e: print(e.name)
    )
    for ev in client.contexts.iter_execute(ctx.context_id, "1"):
        streamed: ExecutionEvent = ev
        print(streamed.type)
    client.contexts.delete(ctx.context_id)
    client.sandbox.create("t", overrides=SandboxOverrides(ttl=0))
    client.sandbox.execute(sandbox_id, "ls")  # type: ignore[arg-type]


def snapshots(client: Client, sandbox_id: str) -> None:
    if client.capabilities().snapshots:
        print("this daemon snapshots")
    paused: Sandbox = client.sandbox.pause(sandbox_id)
    snap: Snapshot = client.sandbox.snapshot(sandbox_id, stop=True)
    size: int = snap.size_bytes
    ready: bool = snap.status is SnapshotStatus.READY
    print(paused.status, size, ready, snap.sandbox_id, snap.stopped, snap.created_at)
    copies: list[Sandbox] = [
        client.sandbox.create_from_snapshot(snap.id, ttl=600, metadata={"rollout": str(i)})
        for i in range(8)
    ]
    mine: list[Snapshot] = client.snapshots.list(sandbox_id=sandbox_id)
    print(copies, mine, client.snapshots.get(snap.id).runtime)
    client.snapshots.delete(snap.id)
    client.sandbox.snapshot(sandbox_id, True)  # type: ignore[call-arg]
    client.sandbox.create_from_snapshot(snap.id, image="x")  # type: ignore[call-arg]


async def async_snapshots(client: AsyncClient, sandbox_id: str) -> None:
    snap: Snapshot = await client.sandbox.snapshot(sandbox_id)
    sb: Sandbox = await client.sandbox.create_from_snapshot(snap.id)
    all_: list[Snapshot] = await client.snapshots.list()
    print(sb.id, all_, await client.sandbox.resume(sandbox_id))
    await client.snapshots.delete(snap.id)


def fork(client: Client, sandbox_id: str) -> None:
    made: ForkResult = client.sandbox.fork(sandbox_id, count=8, ttl=600, metadata={"run": "1"})
    kept: str = made.snapshot_id
    copies: list[ForkedSandbox] = made.sandboxes
    as_sandbox: Sandbox = copies[0]  # a ForkedSandbox is a Sandbox
    new_context: str = copies[0].contexts["ctx-old"]
    print(kept, as_sandbox.status, new_context)
    again: ForkResult = client.snapshots.fork(kept, count=2)
    print(again.sandboxes)
    client.sandbox.fork(sandbox_id, 8)  # type: ignore[call-arg]
    client.sandbox.fork(sandbox_id)  # type: ignore[call-arg]
    client.snapshots.fork(kept, count="2")  # type: ignore[arg-type]


async def async_fork(client: AsyncClient, sandbox_id: str) -> None:
    made: ForkResult = await client.sandbox.fork(sandbox_id, count=2)
    again: ForkResult = await client.snapshots.fork(made.snapshot_id, count=1, ttl=0)
    print(again.sandboxes[0].contexts)


def errors(client: Client) -> None:
    try:
        client.sandbox.get("nope")
    except NotFoundError as e:
        code: str | None = e.code
        status: int = e.status_code
        print(code, status, e.message)
    except ConflictError:
        pass
    except APIError:
        pass
    except (SandboxFailedError, PrepullFailedError, TimeoutError, LiteBoxdError):
        pass


def sessions_service(client: Client) -> None:
    run: SessionExecuteResult = client.sessions.execute_code("x = 1", flavor=Flavor.MEDIUM)
    cmd: SessionCommandResult = client.sessions.execute_command(
        ["ls", "-la"], session_id=run.session_id, env={"A": "1"}
    )
    print(run.created, run.expires_at, run.stdout, cmd.exit_code, cmd.oom_killed)
    sessions: list[Session] = client.sessions.list()
    one: Session = client.sessions.keep_alive(sessions[0].session_id, idle_timeout=60)
    print(one.flavor, one.languages, client.sessions.delete(one.session_id).status)
    stats: Stats = client.stats.get()
    print(stats.sessions.active, stats.sandboxes.get("running"), stats.executions.p95)
    client.sessions.execute_code(["print(1)"])  # type: ignore[arg-type]


async def session_manager() -> None:
    config: SessionConfig = SessionConfig.from_env(default_flavor="large")
    async with AsyncSessionManager(config) as sandbox:
        try:
            res: SessionExecuteResult = await sandbox.execute_code(
                "print(1)", "python", None, "small", 10.0
            )
            out: SessionCommandResult = await sandbox.execute_command(
                "ls", res.session_id, check=True
            )
            print(out.stdout)
        except CompilationError as e:
            print(e.traceback)
        except (RuntimeExecutionError, SystemExecutionError) as e:
            failed: object = e.result
            print(e.kind, e.name, e.value, e.session_id, failed)
        except ResourceLimitError as e:
            usage: Usage | None = e.usage
            suggestion: str | None = e.suggestion
            print(usage, suggestion)
        except SandboxCreationError as e:
            print(e.session_id)
        except ConnectionError as e:
            print(e.suggestion)
        info: Session = await sandbox.get_session_info("s")
        stopped: bool = await sandbox.stop_session(info.session_id)
        listed: list[Session] = await sandbox.list_sessions()
        stats: Stats = await sandbox.get_stats()
        where: Path = sandbox.shared_path("s", "/data/x")
        written: FileInfo = await sandbox.write_file("s", "a.txt", io.BytesIO(b"x"), mode=0o600)
        back: bytes = await sandbox.read_file("s", written.path)
        print(stopped, listed, stats, where, back)
        await sandbox.execute_code("1", timeout="10")  # type: ignore[arg-type]


def session_manager_sync() -> None:
    with SessionManager(client=Client()) as sandbox:
        res: SessionExecuteResult = sandbox.execute_code("1", raise_on_error=False)
        print(res.error.kind if res.error else "", FLAVORS["small"].cpus)


async def terminals() -> None:
    # The async terminal has the sync one's methods and arguments, awaited.
    with Client() as client, client.sandbox.terminal("sb", ["sh"]) as term:
        out: bytes = term.read(timeout=1)
        code: int | None = term.wait(timeout=5).exit_code
        print(out, code)
    async with AsyncClient() as aclient:
        aterm = await aclient.sandbox.terminal("sb", ["sh"])
        async with aterm:
            aout: bytes = await aterm.read(timeout=1)
            acode: int | None = (await aterm.wait(timeout=5)).exit_code
            print(aout, acode)


def closing_streams(client: Client) -> None:
    # What the docstrings advise to stop reading a stream early.
    with closing(client.sandbox.execute_stream("sb", ["ls"])) as events:
        first: ExecEvent = next(events)
    with closing(client.contexts.iter_execute("ctx", "1")) as cevents:
        cfirst: ExecutionEvent = next(cevents)
    with closing(client.llm.follow(run="r")) as follow, closing(client.llm.iter_export()) as xs:
        print(first.type, cfirst.type, next(follow).cursor, next(xs).id)


async def aclosing_streams(client: AsyncClient) -> None:
    async with aclosing(client.sandbox.execute_stream("sb", ["ls"])) as events:
        async for event in events:
            print(event.data)
    async with aclosing(client.contexts.iter_execute("ctx", "1")) as cevents:
        async for cevent in cevents:
            print(cevent.type)
    async with aclosing(client.llm.follow(run="r")) as follow:
        async for ev in follow:
            print(ev.cursor)
    async with aclosing(client.llm.iter_export()) as xs:
        async for x in xs:
            print(x.id)


def task_runs(client: Client, tmp: Path) -> None:
    batch: RunBatch = client.runs.submit_file(tmp / "task.yaml", agents="codex", repeats=3)
    runs: list[Run] = client.runs.wait_for_batch(batch.id, timeout=3600)
    summaries: list[RunSummary] = summarize(runs)
    page: RunList = client.runs.list_page(status=[RunStatus.FAILED, "hung"], limit=10)
    with closing(client.runs.iter_events(runs[0].id)) as events:
        event: RunEvent = next(events)
    tar: bytes = client.runs.artifacts(runs[0].id)
    written: list[str] = client.runs.artifacts_to(runs[0].id, tmp)
    client.runs.submit(task_name="hello", repeats="3")  # type: ignore[arg-type]
    print(summaries[0].pass_at_1, page.next_cursor, event.seq, len(tar), written)


async def async_task_runs(client: AsyncClient) -> None:
    batch: RunBatch = await client.runs.submit("name: x\n", models=["m1", "m2"])
    run: Run = await client.runs.wait_for_completion(batch.runs[0].id)
    async with aclosing(client.runs.iter_events(run.id, after=3)) as events:
        async for event in events:
            print(event.type, event.text)
    async for line in client.runs.iter_logs(run.id):
        print(line)
    print(pass_at_k(10, 3, 5), await client.runs.artifact(run.id, "/workspace/out.txt"))
