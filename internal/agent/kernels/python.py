r"""The agent2env Python kernel driver, read on stdin by `python3 -c <bootstrap>`.

The agent sends it compiled by CPython 3.11 (python.marshal, which `go generate
./internal/agent` writes from this file) and as source, for other interpreters.

Requests arrive on fd 3, each a "<marker> <n> <k> <m>\n" line, n bytes of UTF-8
code, then m bytes of k "NAME=value\0" entries set in os.environ for the run.
JSON lines go to fd 4: "ready" once at start, "started" once a run's code compiled
and takes SIGINT (the agent holds one back until then), "display" for rich output
during a run, and "done" (result bundle, error) at its end, after the marker has
been written raw to fd 1 and then fd 2. SIGINT interrupts a run with
KeyboardInterrupt and is ignored between runs. stdout and stderr are held to each
line's end and flushed every FLUSH_INTERVAL while a run lasts, as Jupyter's are.

A cell that does not compile as Python is IPython's (!cmd, %magic, obj?) when
IPython is installed: its InteractiveShell, made on first need over the
kernel's namespace, turns the cell into Python and runs its magics, and
publishes its displays through the kernel. A kernel imports no IPython until
then.
"""

from __future__ import annotations  # annotations stay unevaluated on Python 3.8

import _ast  # ast's node types and flags, without ast.py's helpers (some 300 KB idle)
import _thread
import binascii
import builtins
import io
import os
import sys

try:
    # signal.py makes enums of the signals: it imports enum, functools and
    # collections, which an idle kernel, one in each of thousands of
    # sandboxes, would hold for nothing. _signal is the same functions.
    import _signal as signal  # type: ignore[import-not-found]
except ImportError:  # an interpreter without CPython's _signal
    import signal

# Types for mypy only: the driver imports no more at run time than it needs.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import asyncio
    from collections.abc import Callable, Coroutine, Sequence
    from importlib.machinery import ModuleSpec
    from types import CodeType, FrameType, ModuleType, TracebackType
    from typing import Any

    Bundle = dict[str, Any]  # a MIME bundle: MIME type to str or JSON value
    Error = dict[str, str]

REQUESTS, CONTROL = 3, 4
FLUSH_INTERVAL = 0.2  # seconds: a run's partial line shows this late at most, as in ipykernel
CO_COROUTINE = 0x80  # inspect.CO_COROUTINE, without importing inspect
COMPILE_FLAGS = _ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
DRIVER_GLOBALS = globals()
REPR_METHODS = (
    ("text/html", "_repr_html_"),
    ("text/markdown", "_repr_markdown_"),
    ("text/latex", "_repr_latex_"),
    ("image/svg+xml", "_repr_svg_"),
    ("image/png", "_repr_png_"),
    ("image/jpeg", "_repr_jpeg_"),
    ("application/json", "_repr_json_"),
    ("application/javascript", "_repr_javascript_"),
)


class Kernel:
    def __init__(self) -> None:
        self.main = new_main_module()
        self.namespace: dict[str, Any] = self.main.__dict__
        self.cells = 0
        # The asyncio event loop for top-level await, made on first use.
        self.loop: asyncio.AbstractEventLoop | None = None
        self.interruptible = False  # SIGINT raises KeyboardInterrupt: user code runs
        self.interrupted = False  # SIGINT came while a run held interrupts back
        self.main_thread = _thread.get_ident()
        self.control_lock = _thread.allocate_lock()
        signal.signal(signal.SIGINT, self.on_sigint)
        builtins.display = self.display  # type: ignore[attr-defined]
        # IPython's get_ipython: the shell, made on first call; None without IPython.
        builtins.get_ipython = self.ipython  # type: ignore[attr-defined]
        self.shell: Any = None  # the IPython InteractiveShell once made
        sys.meta_path.insert(0, ImportHook("matplotlib.pyplot", self.pyplot_loaded))
        # Whoever imports IPython (a cell, a library) gets the kernel's shell.
        sys.meta_path.insert(0, ImportHook("IPython", self.ipython_loaded))
        self.sources = CellSources()
        # The user's site-packages, where pip installs as the sandbox's user:
        # Python added it at its start only if it existed; one a cell makes
        # (!pip install) is added as the next cell starts.
        self.user_site = missing_user_site()
        self.flusher = Flusher()

    def serve(self) -> None:
        requests = os.fdopen(REQUESTS, "rb")
        version = "{}.{}.{}".format(*sys.version_info[:3])
        self.send({"type": "ready", "language": "python", "version": version})
        while True:
            header = requests.readline()
            if not header:
                return
            marker, size, _, env_size = header.rstrip(b"\n").split(b" ")
            source = requests.read(int(size)).decode("utf-8", "replace")
            env = requests.read(int(env_size)).decode("utf-8", "surrogateescape")
            saved = set_environ(env.split("\0")[:-1])
            self.flusher.resume()
            try:
                result, error = self.run(source)
            finally:
                self.flusher.pause()
                set_environ(saved)
            flush_std()
            write_all(1, marker)
            write_all(2, marker)
            self.send({"type": "done", "result": result, "error": error})

    def run(self, source: str) -> tuple[Bundle | None, Error | None]:
        """Run one cell: return its result bundle and error, either may be None."""
        self.cells += 1
        if self.user_site is not None and os.path.isdir(self.user_site):
            add_user_site(self.user_site)
            self.user_site = None
        filename = f"<cell-{self.cells}>"
        self.sources.add(filename, source)
        self.interrupted = False
        try:
            body, last = self.compile(source, filename)
        except Exception as exc:  # SyntaxError and subclasses; ValueError for NUL bytes
            text = "".join(format_exception(exc, None, only=True))
            if isinstance(exc, SyntaxError) and self.shell is None and ipython_like(source):
                text += IPYTHON_HINT
            return None, error_info(exc, text, "syntax")
        # A SIGINT from here on is this run's: one that came before was an earlier
        # run's, cleared above.
        self.send({"type": "started"})
        # The handler raises KeyboardInterrupt only between these two assignments,
        # so an interrupt can never escape into the driver.
        try:
            self.interruptible = True
            try:
                if self.interrupted:  # while the cell compiled
                    raise KeyboardInterrupt
                return self.execute(body, last), None
            finally:
                self.interruptible = False
        except BaseException as exc:  # SystemExit and KeyboardInterrupt too
            tb = user_traceback(exc.__traceback__, filename)
            text = "".join(format_exception(exc, tb))
            return None, error_info(exc, text, "runtime")

    def compile(self, source: str, filename: str) -> tuple[CodeType, CodeType | None]:
        """Compile the cell as Python, or else as IPython's when IPython is installed."""
        try:
            return compile_cell(source, filename)
        except SyntaxError:
            if self.shell is None and not ipython_like(source):
                raise  # a typo: IPython is not loaded to say so
            shell = self.ipython()
            if shell is None:
                raise
        # Line magics and !cmd keep their lines: tracebacks show the cell's own.
        return compile_cell(shell.transform_cell(source), filename)

    def ipython(self) -> Any:
        """Return the kernel's IPython shell, made on first need; None without IPython."""
        if self.shell is None:
            try:
                import IPython  # noqa: F401  # its import hook makes the shell
            except ImportError:
                return None
            if self.shell is None:  # imported before the kernel started
                self.shell = ipython_shell(self)
        return self.shell

    def ipython_loaded(self, module: ModuleType) -> None:
        try:
            self.shell = ipython_shell(self)
        except Exception as exc:  # the import itself stands: IPython without the shell
            text = "".join(format_exception(exc, exc.__traceback__))
            sys.stderr.write("IPython's shell could not start in this kernel:\n" + text)

    def pyplot_loaded(self, module: ModuleType) -> None:
        # A plain function, not a bound method: pyplot.switch_backend sets
        # show.__signature__, which a method does not allow.
        def kernel_show(*args: object, **kwargs: object) -> None:
            return self.show_figures(*args, **kwargs)

        module.show = kernel_show  # type: ignore[attr-defined]

    def execute(self, body: CodeType, last: CodeType | None) -> Bundle | None:
        try:
            self.evaluate(body)
            value = None if last is None else self.evaluate(last)
            if value is None:
                return None
            self.namespace["_"] = value
            return mime_bundle(value)
        finally:
            self.show_figures()

    def evaluate(self, code: CodeType) -> Any:
        if code.co_flags & CO_COROUTINE:  # top-level await
            return self.run_coroutine(eval(code, self.namespace))
        return eval(code, self.namespace)

    def run_coroutine(self, coroutine: Coroutine[Any, Any, Any]) -> Any:
        import asyncio

        if self.loop is None:
            self.loop = asyncio.new_event_loop()
            asyncio.set_event_loop(self.loop)
        task = self.loop.create_task(coroutine)
        try:
            return self.loop.run_until_complete(task)
        except KeyboardInterrupt:
            if task.done():
                raise
            raise KeyboardInterrupt from None  # it hit the idle loop: no user frame to show
        finally:
            task.cancel()  # an interrupted cell must not carry on in a later one

    def on_sigint(self, signum: int, frame: FrameType | None) -> None:
        if self.interruptible:
            raise KeyboardInterrupt
        self.interrupted = True

    def display(self, *objs: object) -> None:
        """Show each object as rich output: its MIME bundle, as for a cell's result.

        Once IPython's shell runs, through its display publisher, which %%capture swaps.
        """
        for obj in objs:
            if self.shell is None:
                self.display_bundle(mime_bundle(obj))
            else:
                self.shell.display_pub.publish(mime_bundle(obj))

    def display_bundle(self, bundle: Bundle) -> None:
        message = {"type": "display", "data": bundle}
        if _thread.get_ident() != self.main_thread:
            self.send(message)
            return
        # A KeyboardInterrupt must not cut the line short: hold it until written.
        self.interruptible, self.interrupted = False, False
        try:
            self.send(message)
        finally:
            self.interruptible = True
        if self.interrupted:
            raise KeyboardInterrupt

    def show_figures(self, *args: object, **kwargs: object) -> None:
        """Display each open pyplot figure as a PNG image, then close it.

        This is matplotlib.pyplot.show in the kernel; it also runs after each cell.
        """
        plt = sys.modules.get("matplotlib.pyplot")
        if plt is None:
            return
        for number in plt.get_fignums():
            figure = plt.figure(number)
            if figure.axes or figure.lines:
                png = io.BytesIO()
                figure.savefig(png, format="png", bbox_inches="tight")
                self.display_bundle(
                    {"text/plain": safe_repr(figure), "image/png": base64(png.getvalue())}
                )
            plt.close(figure)

    def send(self, message: dict[str, Any]) -> None:
        line = json_dumps(message, allow_nan=True)
        # Lone surrogates, which can only occur inside JSON strings, become \udXXX escapes.
        data = line.encode("utf-8", "backslashreplace") + b"\n"
        flush_std()
        with self.control_lock:
            write_all(CONTROL, data)


class Flusher:
    """Flushes stdout and stderr every FLUSH_INTERVAL while a run lasts.

    They are held to each line's end, so a partial line (print(x, end=""), a
    progress report) would otherwise wait for its end or the run's. The thread
    starts with the first run and sleeps on a lock between runs: an idle kernel
    never wakes. It takes no signal, so that SIGINT interrupts the main thread.
    """

    def __init__(self) -> None:
        self.idle = _thread.allocate_lock()  # held between runs
        self.idle.acquire()
        self.started = False

    def resume(self) -> None:
        if not self.started:
            _thread.start_new_thread(self.loop, ())
            self.started = True
        self.idle.release()

    def pause(self) -> None:
        self.idle.acquire()

    def loop(self) -> None:
        import time

        if hasattr(signal, "pthread_sigmask"):
            signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())
        while True:
            with self.idle:  # waits while no run lasts
                pass
            time.sleep(FLUSH_INTERVAL)
            # The streams the kernel made, not what user code may have put in their place.
            flush_std(sys.__stdout__, sys.__stderr__)


class ImportHook:
    """Import hook that calls loaded(module) once the module named has loaded, once."""

    def __init__(self, name: str, loaded: Callable[[ModuleType], None]) -> None:
        self.name = name
        self.loaded = loaded

    def find_spec(
        self, name: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if name != self.name:
            return None
        from importlib.machinery import PathFinder

        spec = PathFinder.find_spec(name, path, target)
        if spec is None or spec.loader is None:
            return None
        exec_module = spec.loader.exec_module

        def exec_and_call(module: ModuleType) -> None:
            exec_module(module)
            sys.meta_path.remove(self)
            self.loaded(module)

        spec.loader.exec_module = exec_and_call  # type: ignore[method-assign]
        return spec


class CellSources:
    """The cells' sources for linecache (tracebacks, inspect), without importing it.

    linecache imports tokenize and re: some 0.4 MB that an idle kernel, one in
    each of thousands of sandboxes, would hold for nothing. Until something
    imports linecache, the sources wait here; they go into its cache as it loads.
    """

    def __init__(self) -> None:
        self.pending: dict[str, tuple[int, None, list[str], str]] = {}
        if "linecache" not in sys.modules:
            sys.meta_path.insert(0, self)

    def add(self, filename: str, source: str) -> None:
        entry = (len(source), None, source.splitlines(True), filename)
        linecache = sys.modules.get("linecache")
        if linecache is None:
            self.pending[filename] = entry
        else:
            linecache.cache[filename] = entry

    def find_spec(
        self, name: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if name != "linecache":
            return None
        sys.meta_path.remove(self)
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            spec: ModuleSpec | None = None if find is None else find(name, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = FillingLoader(spec.loader, self.pending)  # type: ignore[assignment]
                return spec
        return None


class FillingLoader:
    """A module's loader that puts entries into the module's cache once it ran."""

    def __init__(self, loader: Any, entries: dict[str, Any]) -> None:
        self.loader = loader
        self.entries = entries

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        module: ModuleType | None = self.loader.create_module(spec)
        return module

    def exec_module(self, module: ModuleType) -> None:
        self.loader.exec_module(module)
        module.cache.update(self.entries)
        self.entries.clear()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.loader, name)


IPYTHON_HINT = (
    "IPython syntax (!cmd, %magic, %%cell magic, obj?) needs IPython, which this"
    " kernel's Python lacks: pip install ipython\n"
)


# How the lines IPython's input transformers rewrite start, stripped: shell
# commands, magics, help, the escapes of autocall, pasted prompts.
IPYTHON_STARTS = ("!", "%", "?", ",", ";", "/", ">>>", "...", "In [")


def ipython_like(source: str) -> bool:
    """Tell whether a cell that is not Python may be IPython's.

    Generous: a cell it passes only costs loading IPython to find out; one it
    misses is a SyntaxError. Only such a cell loads IPython (0.3 s, 30 MB), not a typo.
    """
    lines = [line for line in source.splitlines() if line.strip()]
    if lines and lines[0][0].isspace():  # IPython dedents a cell indented as a whole
        return True
    for line in lines:
        line = line.strip()
        if line.startswith(IPYTHON_STARTS) or line.endswith("?"):
            return True
        if line.partition("=")[2].lstrip().startswith(("!", "%")):  # x = !cmd, x = %magic
            return True
    return False


def ipython_shell(kernel: Kernel) -> Any:
    """Make IPython's InteractiveShell the kernel's, as ipykernel's is a Jupyter kernel's.

    Its user namespace is the kernel's; its displays, the pager's text and !cmd's
    output go where the kernel's go; %matplotlib keeps the kernel's figures. It
    installs no displayhook, excepthook or signal handler, keeps no history file
    and starts no thread.
    """
    from IPython.core.displaypub import DisplayPublisher
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets import Type
    from traitlets.config import Config

    class Publisher(DisplayPublisher):  # type: ignore[misc]
        """Sends IPython's displays (display(), %%html) as the kernel's."""

        def publish(self, data: Bundle, metadata: object = None, *args: Any, **kwargs: Any) -> None:
            bundle: Bundle = {}
            for mime, value in data.items():
                add_mime(bundle, mime, value)
            kernel.display_bundle(bundle)

    class Shell(InteractiveShell):  # type: ignore[misc]
        display_pub_class = Type(Publisher)

        def system(self, cmd: str) -> None:
            """Run !cmd in a shell, its output the cell's as it comes, as Jupyter does.

            Unlike Jupyter, an interrupt stops the cell as well as the command.
            """
            command = self.var_expand(cmd, depth=1)
            self.user_ns["_exit_code"] = run_command(command)

        def getoutput(self, cmd: str, split: bool = True, depth: int = 0) -> Any:
            """Run cmd in a shell and return its output, as IPython's x = !cmd.

            Unlike IPython's, an interrupt stops the cell as well as the command.
            """
            if cmd.rstrip().endswith("&"):
                raise OSError("Background processes not supported.")
            from IPython.utils.text import LSString, SList

            output = capture_command(self.var_expand(cmd, depth=depth + 1))
            return SList(output.splitlines()) if split else LSString(output)

        def enable_matplotlib(self, gui: str | None = None) -> tuple[str | None, str]:
            """Keep the kernel's figures, PNG images after each cell, as %matplotlib inline."""
            import matplotlib
            import matplotlib.pyplot  # with the kernel's show

            if gui not in (None, "auto", "inline", "agg"):
                print(f"no {gui} windows here: figures come back as PNG images", file=sys.stderr)
            return gui, matplotlib.get_backend()

    config = Config()
    config.HistoryManager.enabled = False  # no sqlite file, no saving thread
    config.InteractiveShell.colors = "NoColor"
    shell = Shell.instance(config=config, user_module=kernel.main)
    shell.set_hook("show_in_pager", page_to_stdout)
    # The shell's builtins and names for a terminal: the kernel keeps its display,
    # and exit() raises SystemExit as in a plain kernel.
    builtins.display = kernel.display  # type: ignore[attr-defined]
    hidden = shell.user_ns_hidden
    for name in ("exit", "quit", "open"):  # open: IPython 8.12's, which refuses fds 0 to 2
        if name in hidden and kernel.namespace.get(name) is hidden[name]:
            del kernel.namespace[name]
    return shell


def page_to_stdout(shell: object, data: object, *args: object, **kwargs: object) -> None:
    """Write what IPython would page (obj?, %pdoc) to stdout: a kernel has no pager."""
    text = str(data.get("text/plain", "") if isinstance(data, dict) else data)
    sys.stdout.write(text if text.endswith("\n") else text + "\n")


def run_command(command: str) -> int:
    """Run command in $SHELL, as IPython's !cmd: return its exit status, -N for signal N.

    Its output goes to fd 1 and 2 as it comes, unless user code redirected
    sys.stdout or sys.stderr (%%capture): then it is copied there at the end.
    An interrupt kills it and stops the cell.
    """
    import subprocess

    executable = os.environ.get("SHELL") or None  # None: /bin/sh
    flush_std()
    if sys.stdout is sys.__stdout__ and sys.stderr is sys.__stderr__:
        status = subprocess.call(command, shell=True, executable=executable)
    else:
        done = subprocess.run(command, shell=True, executable=executable, capture_output=True)
        sys.stdout.write(done.stdout.decode("utf-8", "replace"))
        sys.stderr.write(done.stderr.decode("utf-8", "replace"))
        status = done.returncode
    return -(status - 128) if status > 128 else status


def capture_command(command: str) -> str:
    """Run command in $SHELL and return its stdout and stderr as written, decoded.

    An interrupt kills it and stops the cell.
    """
    import subprocess

    executable = os.environ.get("SHELL") or None  # None: /bin/sh
    flush_std()
    done = subprocess.run(
        command,
        shell=True,
        executable=executable,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    return done.stdout.decode("utf-8", "replace")


def json_dumps(value: object, allow_nan: bool) -> str:
    """Return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=...).

    With _json's encoder alone where there is one: the json package imports re,
    which an idle kernel would hold for nothing.
    """
    if JSON_ENCODER is None:
        import json

        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=allow_nan)
    make_encoder, encode_string = JSON_ENCODER
    # Fresh markers (the circular reference check) each time, as json.dumps.
    encode = make_encoder(
        {}, not_serializable, encode_string, None, ":", ",", False, False, allow_nan
    )
    return "".join(encode(value, 0))


def not_serializable(value: object) -> object:
    """Refuse value as json.JSONEncoder.default does."""
    raise TypeError(f"Object of type {value.__class__.__name__} is not JSON serializable")


def json_encoder() -> tuple[Any, Any] | None:
    """Return _json's make_encoder and encode_basestring; None without them."""
    try:
        from _json import encode_basestring, make_encoder

        make_encoder({}, not_serializable, encode_basestring, None, ":", ",", False, False, True)
    except (ImportError, TypeError):  # another interpreter, another signature
        return None
    return make_encoder, encode_basestring


JSON_ENCODER = json_encoder()


def new_main_module() -> ModuleType:
    """Make a fresh __main__ module for user code; the driver's globals stay out of it."""
    main = type(sys)("__main__")
    main.__builtins__ = builtins  # type: ignore[attr-defined]
    sys.modules["__main__"] = main
    return main


def compile_cell(source: str, filename: str) -> tuple[CodeType, CodeType | None]:
    """Compile the cell's statements, and its last one apart when that is an expression."""
    tree = compile(source, filename, "exec", COMPILE_FLAGS | _ast.PyCF_ONLY_AST, dont_inherit=True)
    last = None
    if tree.body and isinstance(tree.body[-1], _ast.Expr):
        expression = _ast.Expression(tree.body.pop().value)
        last = compile(expression, filename, "eval", COMPILE_FLAGS, dont_inherit=True)
    return compile(tree, filename, "exec", COMPILE_FLAGS, dont_inherit=True), last


def format_exception(exc: BaseException, tb: TracebackType | None, only: bool = False) -> list[str]:
    """Format exc as traceback does, importing traceback on the first error.

    An idle kernel, one in each of thousands of sandboxes, holds no traceback
    module (some 200 KB).
    """
    import traceback

    if only:
        return traceback.format_exception_only(type(exc), exc)
    return traceback.format_exception(type(exc), exc, tb)


def user_traceback(tb: TracebackType | None, filename: str) -> TracebackType | None:
    """Drop the driver's frames from tb, starting at the cell's own frame if it has one."""
    entries = []
    while tb is not None:
        if tb.tb_frame.f_globals is not DRIVER_GLOBALS:
            entries.append(tb)
        tb = tb.tb_next
    for i, entry in enumerate(entries):
        if entry.tb_frame.f_code.co_filename == filename:
            entries = entries[i:]
            break
    for entry, following in zip(entries, [*entries[1:], None]):
        entry.tb_next = following
    return entries[0] if entries else None


def error_info(exc: BaseException, text: str, kind: str) -> Error:
    try:
        value = str(exc)
    except Exception:
        value = "<exception str() failed>"
    return {
        "name": type(exc).__name__,
        "value": value,
        "traceback": text.rstrip("\n"),
        "kind": kind,
    }


def mime_bundle(obj: object) -> Bundle:
    """Bundle repr(obj) as text/plain with whatever obj's _repr_*_ methods give."""
    bundle: Bundle = {}
    if not isinstance(obj, type):  # on a class, the _repr_*_ are unbound methods
        data = call_repr(obj, "_repr_mimebundle_", include=None, exclude=None)
        if isinstance(data, tuple) and len(data) == 2:  # (data, metadata)
            data = data[0]
        if isinstance(data, dict):
            for mime, value in data.items():
                add_mime(bundle, mime, value)
        for mime, method in REPR_METHODS:
            if mime not in bundle:
                add_mime(bundle, mime, call_repr(obj, method))
    if "text/plain" not in bundle:
        bundle["text/plain"] = safe_repr(obj)
    return bundle


def call_repr(obj: object, method: str, **kwargs: object) -> object:
    try:
        return getattr(obj, method)(**kwargs)
    except Exception:  # a broken _repr_*_ method just adds nothing
        return None


def add_mime(bundle: Bundle, mime: object, value: object) -> None:
    """Add value under mime if it fits: text as str, binary as base64, JSON as JSON."""
    if isinstance(value, tuple) and len(value) == 2:  # (data, metadata)
        value = value[0]
    if value is None or not isinstance(mime, str):
        return
    if mime == "application/json" or mime.endswith("+json"):
        try:
            json_dumps(value, allow_nan=False)
        except Exception:
            return
        bundle[mime] = value
    elif isinstance(value, (bytes, bytearray)):
        bundle[mime] = base64(value)
    elif isinstance(value, str):
        bundle[mime] = "".join(value.split()) if mime in ("image/png", "image/jpeg") else value


def safe_repr(obj: object) -> str:
    try:
        return repr(obj)
    except Exception as exc:
        return f"<{type(obj).__qualname__} object; repr() raised {type(exc).__name__}>"


def missing_user_site() -> str | None:
    """Return the user's site-packages when Python's start left it out (it did not exist)."""
    site: Any = sys.modules.get("site")  # none under python -S
    if site is None or not site.ENABLE_USER_SITE:
        return None
    path: str = site.getusersitepackages()
    return None if path in sys.path else path


def add_user_site(path: str) -> None:
    """Add the user's site-packages as Python's start does: before the system's, .pth files read."""
    import site

    packages = (i for i, p in enumerate(sys.path) if p.endswith(("site-packages", "dist-packages")))
    at = next(packages, len(sys.path))
    sys.path.insert(at, path)
    site.addsitedir(path)  # its .pth files (editable installs); the path is in already


def set_environ(entries: list[str]) -> list[str]:
    """Set each "NAME=value" entry in os.environ ("NAME" alone unsets it).

    Return the entries that put back what they replaced, in reverse order.
    """
    saved = []
    for entry in entries:
        name, eq, value = entry.partition("=")
        old = os.environ.get(name)
        saved.append(name if old is None else f"{name}={old}")
        if eq:
            os.environ[name] = value
        else:
            os.environ.pop(name, None)
    saved.reverse()
    return saved


def base64(data: bytes | bytearray) -> str:
    return binascii.b2a_base64(data, newline=False).decode("ascii")


def flush_std(*streams: object) -> None:
    """Flush streams, by default the current and the kernel's stdout and stderr."""
    for stream in streams or (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            stream.flush()  # type: ignore[union-attr]  # None too: the except covers it
        except Exception:  # user code may have replaced or closed them
            pass


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def main() -> None:
    for fd in (REQUESTS, CONTROL):
        os.set_inheritable(fd, False)  # not for the processes user code starts
    # This file came on stdin, now at its end: user code reads /dev/null instead.
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    # Held to each line's end, not written through (PYTHONUNBUFFERED, for
    # the Pythons user code starts): print writes its text and its end
    # apart, which a client would get as two chunks of output.
    for stream in (sys.stdout, sys.stderr):
        stream.reconfigure(  # type: ignore[union-attr]  # a TextIOWrapper
            encoding="utf-8", errors="backslashreplace", line_buffering=True, write_through=False
        )
    os.environ.setdefault("MPLBACKEND", "Agg")
    Kernel().serve()


main()
