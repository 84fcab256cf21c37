package agent

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agent2env/agent2env/internal/testenv"
)

// requireIPython stops t unless the host's python3 imports IPython, which
// the Python kernel uses for the cells that are IPython's.
func requireIPython(t *testing.T) {
	t.Helper()
	if _, err := withoutReaping(exec.Command("python3", "-c", "import IPython").Output); err != nil {
		testenv.Missing(t, "the IPython kernel tests need IPython for the host's python3: pip install ipython (%v)", err)
	}
}

// ipythonStep is one cell of an IPython kernel test and what it must give.
type ipythonStep struct {
	code       string
	timeout    time.Duration
	wantOut    string            // stdout must equal
	outHas     string            // stdout must contain
	errHas     string            // stderr must contain
	wantResult string            // the result's text/plain
	wantError  string            // error name, "" for none
	wantKind   string            // the error's kind
	tbHas      []string          // the traceback must contain each
	tbLacks    string            // the traceback must not contain
	display    map[string]string // one display, with these MIME types and values
}

// check compares one step's output with what it wants.
func (st ipythonStep) check(t *testing.T, where string, out execOutput) {
	t.Helper()
	if st.wantError == "" && out.res.Error != nil {
		t.Fatalf("%s: unexpected error %+v (stderr %q)", where, out.res.Error, out.stderr)
	}
	if st.wantError != "" {
		if out.res.Error == nil || out.res.Error.Name != st.wantError || out.res.Error.Kind != st.wantKind {
			t.Fatalf("%s: error %+v, want %s (%s)", where, out.res.Error, st.wantError, st.wantKind)
		}
		for _, s := range st.tbHas {
			if !strings.Contains(out.res.Error.Traceback, s) {
				t.Errorf("%s: traceback %q lacks %q", where, out.res.Error.Traceback, s)
			}
		}
		if st.tbLacks != "" && strings.Contains(out.res.Error.Traceback, st.tbLacks) {
			t.Errorf("%s: traceback %q has %q", where, out.res.Error.Traceback, st.tbLacks)
		}
	}
	if st.wantOut != "" && out.stdout != st.wantOut {
		t.Errorf("%s: stdout %q, want %q", where, out.stdout, st.wantOut)
	}
	if !strings.Contains(out.stdout, st.outHas) {
		t.Errorf("%s: stdout %q lacks %q", where, out.stdout, st.outHas)
	}
	if !strings.Contains(out.stderr, st.errHas) {
		t.Errorf("%s: stderr %q lacks %q", where, out.stderr, st.errHas)
	}
	if got := resultText(out.res); got != st.wantResult {
		t.Errorf("%s: result %q, want %q", where, got, st.wantResult)
	}
	if st.display == nil && len(out.displays) != 0 {
		t.Errorf("%s: displays %v, want none", where, out.displays)
	}
	if st.display != nil {
		if len(out.displays) != 1 {
			t.Fatalf("%s: displays %v, want one", where, out.displays)
		}
		for mime, want := range st.display {
			if got := out.displays[0][mime]; got != want {
				t.Errorf("%s: display's %s %q, want %q", where, mime, got, want)
			}
		}
	}
	if out.res.StateLost {
		t.Errorf("%s: state lost", where)
	}
}

// TestKernelIPython runs IPython's syntax in a Python kernel, cell after
// cell as a stock code interpreter's agent writes it: shell commands, line
// and cell magics, help, IPython's display; plain cells import no IPython.
func TestKernelIPython(t *testing.T) {
	requireIPython(t)
	c := startKernelAgent(t)
	newKernel(t, c, "ipy", LangPython)
	dir := t.TempDir()
	script := filepath.Join(dir, "f.py")
	steps := []ipythonStep{
		{code: "import sys\nx = 5\n'IPython' in sys.modules", wantResult: "False"},
		{code: "!echo hello-shell {x}", wantOut: "hello-shell 5\n"},
		{code: "!echo $x", wantOut: "5\n"},
		{code: "files = !printf 'a\\nb\\n'\nfiles", wantResult: "['a', 'b']"},
		{code: "def f(n):\n    !echo in-function {n}\nf(x)", wantOut: "in-function 5\n"},
		{code: "%timeit -n1 -r1 sum(range(x))", outHas: "per loop"},
		{code: "%time x + 1", outHas: "Wall time", wantResult: "6"},
		{code: "%cd " + dir, wantOut: dir + "\n"},
		{code: "import os\nos.getcwd()", wantResult: "'" + dir + "'"},
		{code: "%env A2E_IPY=on", wantOut: "env: A2E_IPY=on\n"},
		{code: "!echo $A2E_IPY", wantOut: "on\n"},
		{code: "%pip --version", outHas: "pip "},
		{code: "%%bash\necho cellmagic\necho to-err >&2", wantOut: "cellmagic\n", errHas: "to-err"},
		{code: "%%sh\necho from-sh", wantOut: "from-sh\n"},
		{code: "%%writefile " + script + "\nVALUE = 7\n", wantOut: "Writing " + script + "\n"},
		{code: "open(" + fmt.Sprintf("%q", script) + ").read()", wantResult: `'VALUE = 7\n'`},
		{code: "%%capture cap\nprint('hidden')\n!echo hidden-too\ndisplay('hidden display')"},
		{code: "cap.stdout, len(cap.outputs)", wantResult: `('hidden\nhidden-too\n', 1)`},
		{code: "%load_ext autoreload"},
		{code: "from IPython.display import HTML, display\ndisplay(HTML('<b>x</b>'))",
			display: map[string]string{"text/html": "<b>x</b>", "text/plain": "<IPython.core.display.HTML object>"}},
		{code: "%%html\n<i>h</i>", display: map[string]string{"text/html": "<i>h</i>\n"}},
		{code: "%%markdown\n# Title", display: map[string]string{"text/markdown": "# Title\n"}},
		{code: "del display\ndisplay({'a': 1})", display: map[string]string{"text/plain": "{'a': 1}"}},
		{code: "x?", outHas: "Type:"},
		{code: "len??", outHas: "Return the number of items"},
		{code: "import IPython\nIPython.get_ipython() is get_ipython() and get_ipython().user_ns is globals()", wantResult: "True"},
		{code: "import signal\n(sys.displayhook is sys.__displayhook__, sys.excepthook is sys.__excepthook__, signal.getsignal(signal.SIGINT).__name__)",
			wantResult: "(True, True, 'on_sigint')"},
		{code: "!exit 3\n_exit_code", wantResult: "3"},
		{code: "!echo before\n1/0", wantOut: "before\n", wantError: "ZeroDivisionError", wantKind: KindRuntime,
			tbHas: []string{`File "<cell-29>", line 2`, "1/0"}},
		{code: "%%bash\nexit 3", wantError: "CalledProcessError", wantKind: KindRuntime, tbHas: []string{"<cell-30>", "exit status 3"}},
		{code: "%no_such_magic", wantError: "UsageError", wantKind: KindRuntime, tbHas: []string{"no_such_magic"}},
		{code: "!echo ok\ndef broken(:", wantError: "SyntaxError", wantKind: KindSyntax, tbLacks: "needs IPython"},
		{code: "exit()", wantError: "SystemExit", wantKind: KindRuntime},
		{code: "x", wantResult: "5"},
	}
	for i, st := range steps {
		st.check(t, fmt.Sprintf("step %d %q", i, st.code), execute(t, c, "ipy", st.code, st.timeout))
	}
}

// TestKernelIPythonOnlyWhenLike checks that a cell that is neither
// Python nor like IPython's (a typo) does not load IPython, and that the
// forms of IPython's that plain lines do not show still run: a cell
// indented as a whole, pasted prompts, a magic's value assigned.
func TestKernelIPythonOnlyWhenLike(t *testing.T) {
	requireIPython(t)
	c := startKernelAgent(t)
	newKernel(t, c, "ipy-like", LangPython)
	steps := []ipythonStep{
		{code: "def broken(:\n  pass", wantError: "SyntaxError", wantKind: KindSyntax},
		{code: "print('a' 'b' +)", wantError: "SyntaxError", wantKind: KindSyntax},
		{code: "import sys\n'IPython' in sys.modules", wantResult: "False"},
		{code: "    x = 2\n    x * 3", wantResult: "6"},
		{code: ">>> y = 4\n>>> y + 1", wantResult: "5"},
		{code: "t = %time x + 1\nt", outHas: "Wall time", wantResult: "3"},
	}
	for i, st := range steps {
		st.check(t, fmt.Sprintf("step %d %q", i, st.code), execute(t, c, "ipy-like", st.code, 0))
	}
}

// TestKernelIPythonInterrupt checks that an interrupt stops a shell
// command and the cell that runs it, and that the kernel keeps its state.
func TestKernelIPythonInterrupt(t *testing.T) {
	requireIPython(t)
	c := startKernelAgent(t)
	newKernel(t, c, "ipy-int", LangPython)
	t.Run("timeout", func(t *testing.T) {
		// A loop of commands stops at the first: IPython would go on to the next.
		start := time.Now()
		out := execute(t, c, "ipy-int", "for _ in range(3):\n    !sleep 30", 300*time.Millisecond)
		if out.res.Error == nil || out.res.Error.Name != "TimeoutError" || out.res.StateLost {
			t.Fatalf("%+v, want a TimeoutError and the state kept", out.res)
		}
		if d := time.Since(start); d > interruptGrace {
			t.Errorf("the interrupted cell took %v", d)
		}
	})
	t.Run("output captured", func(t *testing.T) {
		// IPython's x = !cmd would swallow the interrupt and go on.
		out := execute(t, c, "ipy-int", "x = !sleep 30\nprint('went on')", 300*time.Millisecond)
		if out.res.Error == nil || out.res.Error.Name != "TimeoutError" || out.res.StateLost || strings.Contains(out.stdout, "went on") {
			t.Fatalf("%+v, stdout %q: want a TimeoutError, the cell stopped and the state kept", out.res, out.stdout)
		}
	})
	t.Run("cancel", func(t *testing.T) { checkCancelInterrupts(t, c, "ipy-int", "!sleep 30") })
}

// TestKernelIPythonStreams checks that a shell command's output comes as
// the command writes it, not at the cell's end.
func TestKernelIPythonStreams(t *testing.T) {
	requireIPython(t)
	c := startKernelAgent(t)
	newKernel(t, c, "ipy-stream", LangPython)
	for _, code := range []string{"!echo first; sleep 1; echo second", "%%bash\necho first\nsleep 1\necho second"} {
		var first time.Time
		var stdout strings.Builder
		_, err := c.Execute(context.Background(), "ipy-stream", KernelExecRequest{Code: code}, KernelOutput{
			Stdout: func(p []byte) error {
				if first.IsZero() {
					first = time.Now()
				}
				stdout.Write(p)
				return nil
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		if stdout.String() != "first\nsecond\n" {
			t.Errorf("%q: stdout %q", code, stdout.String())
		}
		if d := time.Since(first); d < 500*time.Millisecond {
			t.Errorf("%q: the first line came %v before the end, want it a second before", code, d)
		}
	}
}

// TestKernelWithoutIPython checks a kernel whose Python has no IPython: its
// syntax stays a SyntaxError, with a hint naming IPython where a line looks
// like it, and get_ipython() is None as outside IPython.
func TestKernelWithoutIPython(t *testing.T) {
	requireInterpreters(t)
	// An IPython package that fails to import, first on the path.
	shadow := t.TempDir()
	if err := os.Mkdir(filepath.Join(shadow, "IPython"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(shadow, "IPython", "__init__.py"), []byte("raise ImportError('no IPython here')\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, _ := startAgentEnv(t, []string{"PATH=" + os.Getenv("PATH"), "PYTHONPATH=" + shadow})
	newKernel(t, c, "plain", LangPython)
	steps := []ipythonStep{
		{code: "!echo hi", wantError: "SyntaxError", wantKind: KindSyntax, tbHas: []string{"!echo hi", "needs IPython"}},
		{code: "x = 1\nx?", wantError: "SyntaxError", wantKind: KindSyntax, tbHas: []string{"needs IPython"}},
		{code: "def broken(:\n  pass", wantError: "SyntaxError", wantKind: KindSyntax, tbLacks: "IPython"},
		{code: "get_ipython() is None", wantResult: "True"},
	}
	for i, st := range steps {
		st.check(t, fmt.Sprintf("step %d %q", i, st.code), execute(t, c, "plain", st.code, 0))
	}
}
