"""A real agent2env daemon for the integration tests, one per test session.

The daemon is ``bin/agent2env`` of this checkout (or ``$AGENT2ENV_BIN``),
started as ``serve`` on a free loopback port with a temporary data
directory and the image store of ``IMAGE_DIR``; ``$AGENT2ENV_CACHE_DIR``
is passed on, so built images come from the cache. It needs root. Without
root or the binary the tests are skipped, unless under CI (``CI`` set to
anything but empty, ``0`` or ``false``, as Go's ``internal/testenv`` reads
it), where that is a failure: a gate, never a hidden skip.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from agent2env import Client, ConflictError
from agent2env.models import CreateTemplateRequest, TemplateSpec

REPO = Path(__file__).resolve().parents[4]
SDK = Path(__file__).resolve().parents[2]
IMAGE = "agent2env/python"
SESSION_IMAGE = "agent2env/code-interpreter"
# The daemon's image store is kept in the checkout (git ignores it) across
# runs: unpacking the Python image and deleting it again cost a minute or
# two each. One test session at a time per checkout.
IMAGE_DIR = SDK / ".cache" / "images"

_log_paths: list[Path] = []


@dataclass(frozen=True)
class Daemon:
    """A running daemon: its API URL and its log."""

    url: str
    log: Path


def _require() -> str:
    binary = os.environ.get("AGENT2ENV_BIN") or str(REPO / "bin" / "agent2env")
    missing = []
    if os.geteuid() != 0:
        missing.append("root (sandboxes need it)")
    if not os.access(binary, os.X_OK):
        missing.append(f"the daemon binary {binary} (make build)")
    if missing:
        why = "the integration tests need " + " and ".join(missing)
        if _ci():
            pytest.fail(why + f", and CI={os.environ['CI']}", pytrace=False)
        pytest.skip(why)
    return binary


def _ci() -> bool:
    """Whether the tests run under CI: the rule of Go's internal/testenv."""
    v = os.environ.get("CI", "").strip()
    return v not in ("", "0") and v.lower() != "false"


def _die_with_parent() -> None:
    # The daemon gets SIGTERM when the test run dies, rather than outliving it.
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


_PR_SET_PDEATHSIG = 1


_SERVING = re.compile(r"\bmsg=serving addr=(\S+)")


def _wait_ready(proc: subprocess.Popen[bytes], log: Path) -> str:
    """Wait until the daemon answers ``/readyz``; return its root URL.

    It listens on a port of its choosing and logs which: a port found free
    beforehand may be another test's daemon's by the time this one binds.
    """
    deadline = time.monotonic() + 60
    root = ""
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"daemon exited at start:\n{log.read_text()}", pytrace=False)
        if not root and (m := _SERVING.search(log.read_text())):
            root = "http://" + m.group(1)
        try:
            if root and httpx.get(root + "/readyz", timeout=2).status_code == 200:
                return root
        except httpx.TransportError:
            pass
        time.sleep(0.05)
    pytest.fail(f"daemon not ready after 60s:\n{log.read_text()}", pytrace=False)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        pytest.fail("daemon did not stop within 30s of SIGTERM", pytrace=False)


@contextlib.contextmanager
def _serve(binary: str, *args: str) -> Iterator[Daemon]:
    """Run ``agent2env serve`` with ``args`` on a free port until the block ends."""
    data_dir = tempfile.mkdtemp(prefix="a2e-py-")
    IMAGE_DIR.mkdir(parents=True, exist_ok=True)
    log = Path(tempfile.mkstemp(prefix="a2e-py-daemon-", suffix=".log")[1])
    _log_paths.append(log)
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [
                binary,
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--data-dir",
                data_dir,
                "--image-dir",
                str(IMAGE_DIR),
                *args,
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            preexec_fn=_die_with_parent,
        )
    try:
        root = _wait_ready(proc, log)
        yield Daemon(url=root + "/api/v1", log=log)
    finally:
        if proc.poll() is None:
            _stop(proc)
        shutil.rmtree(data_dir, ignore_errors=True)


def _no_sandboxes_left(url: str) -> None:
    with Client(url) as client:
        left = client.sandbox.list()
        for sb in left:
            client.sandbox.delete(sb.id)
    if left:
        pytest.fail(f"sandboxes left behind: {[sb.id for sb in left]}", pytrace=False)


@pytest.fixture(scope="session")
def daemon() -> Iterator[Daemon]:
    """Start the daemon; at the end, fail if a sandbox was left behind, and stop it."""
    with _serve(_require()) as d:
        with Client(d.url, timeout=60) as client:
            # Unpack the images once, from the build cache, before any test times
            # them: sandboxes' and sessions' (and contexts').
            client.images.build(IMAGE)
            client.images.build(SESSION_IMAGE)
        yield d
        _no_sandboxes_left(d.url)


MAX_SANDBOXES = 2


@pytest.fixture(scope="session")
def shared_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The host directory of the limited daemon's shared volume, mounted at /shared."""
    return tmp_path_factory.mktemp("shared")


@pytest.fixture(scope="session")
def limited_daemon(daemon: Daemon, shared_dir: Path) -> Iterator[Daemon]:
    """A second daemon, on the first one's image store, with ``--max-sandboxes 2``.

    Its sessions also get a shared volume, ``shared_dir`` at ``/shared``. It
    starts after the first daemon has unpacked the image, so that it only
    reads the store.
    """
    args = ["--max-sandboxes", str(MAX_SANDBOXES), "--shared-volumes", f"{shared_dir}:/shared"]
    with _serve(_require(), *args) as d:
        yield d
        _no_sandboxes_left(d.url)


def _criu() -> str:
    """The project's criu (``make criu``, scripts/criu.sh): snapshots need it."""
    out = subprocess.run(
        [str(REPO / "scripts" / "criu.sh"), "--path"], capture_output=True, text=True, check=False
    )
    path = out.stdout.strip()
    if out.returncode != 0 or not path:
        why = "the snapshot tests need the project's criu: run make criu (scripts/criu.sh)"
        if _ci():
            pytest.fail(why + f", and CI={os.environ['CI']}", pytrace=False)
        pytest.skip(why)
    return path


@pytest.fixture(scope="session")
def criu_daemon(daemon: Daemon) -> Iterator[Daemon]:
    """A daemon that snapshots sandboxes (``serve --criu``), on the first one's image store."""
    with _serve(_require(), "--criu", _criu()) as d:
        yield d
        _no_sandboxes_left(d.url)


@pytest.fixture(scope="session")
def cramped_daemon(daemon: Daemon) -> Iterator[Daemon]:
    """A daemon whose cpu capacity fits one ``large`` session (4 cpus) but not two.

    ``--cpu-overcommit`` is set from this host's cpu count so that the
    committed capacity is 6 cpus whatever the machine.
    """
    ratio = 6 / (os.cpu_count() or 1)
    with _serve(_require(), "--cpu-overcommit", f"{ratio:.6f}") as d:
        yield d
        _no_sandboxes_left(d.url)


@pytest.fixture(scope="session")
def seed_template(daemon: Daemon) -> str:
    """The template seed 003's examples create sandboxes from, on the built-in Python image."""
    with Client(daemon.url) as client:
        try:
            client.template.create(
                CreateTemplateRequest(name="python-data-science", spec=TemplateSpec(image=IMAGE))
            )
        except ConflictError:
            pass
    return "python-data-science"


@pytest.fixture
def client(daemon: Daemon) -> Iterator[Client]:
    """A client of the daemon."""
    with Client(daemon.url) as c:
        yield c


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, exitstatus: int) -> None:
    """Show the end of each daemon's log when a test failed, then remove the logs."""
    for log in _log_paths:
        if not log.exists():
            continue
        if exitstatus != 0:
            terminalreporter.section(f"agent2env daemon log {log.name} (last lines)")
            for line in log.read_text(errors="replace").splitlines()[-60:]:
                terminalreporter.write_line(line)
        log.unlink()
