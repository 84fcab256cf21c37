"""The public API: every name exported exists and every public name is documented."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
import textwrap
from pathlib import Path
from types import ModuleType

from mypy import api as mypy

import agent2env

README = Path(__file__).resolve().parents[1] / "README.md"


def modules() -> list[ModuleType]:
    return [agent2env] + [
        importlib.import_module(m.name)
        for m in pkgutil.walk_packages(agent2env.__path__, "agent2env.")
    ]


def test_exports_exist() -> None:
    for mod in modules():
        for name in getattr(mod, "__all__", []):
            assert hasattr(mod, name), f"{mod.__name__}.{name}"


def test_every_public_name_has_a_docstring() -> None:
    missing = []
    for mod in modules():
        if not mod.__doc__:
            missing.append(mod.__name__)
        for name, obj in vars(mod).items():
            if name.startswith("_") or getattr(obj, "__module__", None) != mod.__name__:
                continue
            if not (inspect.isclass(obj) or inspect.isfunction(obj)):
                continue
            if not obj.__doc__:
                missing.append(f"{mod.__name__}.{name}")
            for attr, value in vars(obj).items() if inspect.isclass(obj) else ():
                documented = inspect.isfunction(value) or isinstance(value, property)
                if not attr.startswith("_") and documented and not value.__doc__:
                    missing.append(f"{mod.__name__}.{name}.{attr}")
    assert missing == []


def test_seed_000_names() -> None:
    """The names seed 000's session API is used by."""
    for name in ("execute_code", "execute_command", "get_session_info", "list_sessions"):
        assert callable(getattr(agent2env.AsyncSessionManager, name))
        assert callable(getattr(agent2env.SessionManager, name))
    for name in ("stop_session", "get_stats"):
        assert callable(getattr(agent2env.SessionManager, name))
    for name in (
        "SandboxCreationError",
        "CompilationError",
        "RuntimeExecutionError",
        "SystemExecutionError",
        "ResourceLimitError",
        "ConnectionError",
    ):
        assert issubclass(getattr(agent2env, name), agent2env.Agent2EnvError)
    params = inspect.signature(agent2env.AsyncSessionManager.execute_code).parameters
    assert [(p.name, p.default) for p in params.values()][1:6] == [
        ("code", inspect.Parameter.empty),
        ("language", "python"),
        ("session_id", None),
        ("flavor", None),
        ("timeout", None),
    ]


def test_readme_lists_every_method() -> None:
    """The README's table "What is there" names each public method of each service."""
    rows = dict(re.findall(r"^\| `client\.(\w+)` \| (.*) \|$", README.read_text(), re.M))
    client = agent2env.Client("http://localhost:8080")
    missing: list[str] = []
    for name, service in vars(client).items():
        if name.startswith("_"):
            continue
        listed = set(re.findall(r"`(\w+)`", rows.get(name, "")))
        methods = [
            m for m in dir(service) if not m.startswith("_") and callable(getattr(service, m))
        ]
        missing += [f"client.{name}.{m}" for m in methods if m not in listed]
    assert missing == []


def test_readme_code_type_checks() -> None:
    """Each Python block of the README passes ``mypy --strict``, as user code must.

    A block is the body of a function given the names the README's fragments
    use: ``client`` (an ``AsyncClient`` for the block with ``async with``,
    else a ``Client``), ``sb`` and ``sandbox``.
    """
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    code = ["from agent2env import AsyncClient, Client", "from agent2env.models import Sandbox"]
    for i, block in enumerate(blocks):
        client = "AsyncClient" if "async with aclosing" in block else "Client"
        code.append(
            f"async def block_{i}(client: {client}, sb: Sandbox, sandbox: Sandbox) -> None:"
        )
        code.append(textwrap.indent(block, "    ") + "    pass")
    out, err, status = mypy.run(
        ["--config-file", "", "--strict", "--python-version", "3.10", "-c", "\n".join(code)]
    )
    assert status == 0, out + err


def test_readme_session_signatures() -> None:
    """The README's table of the session manager's methods gives each one's parameters."""
    readme = README.read_text()
    table = readme[readme.index("| method | what it does |") :].split("\n\n")[0]
    calls = re.findall(r"`(\w+)\(([^)]*)\)`", table)
    assert len(calls) >= 10
    for name, args in calls:
        params = list(inspect.signature(getattr(agent2env.AsyncSessionManager, name)).parameters)
        listed = [a.split("=")[0].strip() for a in args.split(",") if a.strip() not in ("", "*")]
        assert listed == params[1:], name
