package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agent2env/agent2env/internal/errdefs"
)

// The kernel tests run the drivers with the host's interpreters, as the
// test's own user: python3, node and bash must be installed (they are on
// every machine this project builds on).
func requireInterpreters(t testing.TB) {
	t.Helper()
	for _, p := range []string{"python3", "node", "bash"} {
		if _, err := exec.LookPath(p); err != nil {
			t.Fatalf("kernel tests need %s on PATH: %v", p, err)
		}
	}
}

// startKernelAgent is startAgent with the host's PATH, so that the
// interpreters are found wherever they are installed.
func startKernelAgent(t testing.TB) *Client {
	t.Helper()
	requireInterpreters(t)
	c, _ := startAgent(t)
	return c
}

type execOutput struct {
	res            KernelResult
	stdout, stderr string
	displays       []map[string]any
}

func execute(t *testing.T, c *Client, id, code string, timeout time.Duration) execOutput {
	t.Helper()
	return executeLimit(t, c, id, code, timeout, 0)
}

func executeLimit(t *testing.T, c *Client, id, code string, timeout time.Duration, limit int64) execOutput {
	t.Helper()
	var out execOutput
	var stdout, stderr strings.Builder
	res, err := c.Execute(context.Background(), id, KernelExecRequest{Code: code, Timeout: timeout, OutputLimit: limit}, KernelOutput{
		Stdout:  func(p []byte) error { stdout.Write(p); return nil },
		Stderr:  func(p []byte) error { stderr.Write(p); return nil },
		Display: func(d map[string]any) error { out.displays = append(out.displays, d); return nil },
	})
	if err != nil {
		t.Fatalf("execute %q: %v", code, err)
	}
	out.res, out.stdout, out.stderr = res, stdout.String(), stderr.String()
	return out
}

func newKernel(t *testing.T, c *Client, id, lang string) KernelInfo {
	t.Helper()
	info, err := c.CreateKernel(context.Background(), KernelSpec{ID: id, Language: lang})
	if err != nil {
		t.Fatalf("create %s kernel: %v", lang, err)
	}
	return info
}

func resultText(r KernelResult) string {
	s, _ := r.Result["text/plain"].(string)
	return s
}

func TestKernelLanguages(t *testing.T) {
	c := startKernelAgent(t)
	type step struct {
		code       string
		timeout    time.Duration
		wantOut    string // stdout must equal
		wantErrOut string // stderr must contain
		wantResult string
		wantError  string // error name
		wantKind   string
		wantTB     string // traceback must contain
	}
	tests := []struct {
		lang  string
		steps []step
	}{
		{LangPython, []step{
			{code: "x = 41\ndef inc(v):\n    return v + 1", wantOut: ""},
			{code: "import math\nprint('hi', inc(x))\ninc(x)", wantOut: "hi 42\n", wantResult: "42"},
			{code: "math.sqrt(16)", wantResult: "4.0"},
			{code: "import sys\nprint('to err', file=sys.stderr)", wantErrOut: "to err"},
			{code: "print('héllo 世界 🎉')", wantOut: "héllo 世界 🎉\n"},
			{code: "def f():\n    return 1/0\nf()", wantError: "ZeroDivisionError", wantKind: KindRuntime, wantTB: "1/0"},
			{code: "def broken(:\n  pass", wantError: "SyntaxError", wantKind: KindSyntax},
			{code: "raise SystemExit(3)", wantError: "SystemExit", wantKind: KindRuntime},
			{code: "while True:\n    pass", timeout: 300 * time.Millisecond, wantError: "TimeoutError", wantKind: KindSystem},
			{code: "import time\ntime.sleep(100)", timeout: 300 * time.Millisecond, wantError: "TimeoutError", wantKind: KindSystem},
			{code: "inc(x)", wantResult: "42"}, // state survived the interrupts
			{code: "input()", wantError: "EOFError", wantKind: KindRuntime},
		}},
		{LangJavaScript, []step{
			{code: "var x = 41; function inc(v) { return v + 1 }", wantOut: ""},
			{code: "console.log('hi', inc(x)); inc(x)", wantOut: "hi 42\n", wantResult: "42"},
			{code: "const os = require('os'); typeof os.hostname", wantResult: "'function'"},
			{code: "console.error('to err')", wantErrOut: "to err"},
			{code: "console.log('héllo 世界 🎉')", wantOut: "héllo 世界 🎉\n"},
			{code: "null.foo", wantError: "TypeError", wantKind: KindRuntime},
			{code: "function (", wantError: "SyntaxError", wantKind: KindSyntax},
			{code: "await new Promise(r => setTimeout(() => r(7), 10))", wantResult: "7"},
			{code: "while (true) {}", timeout: 300 * time.Millisecond, wantError: "TimeoutError", wantKind: KindSystem},
			{code: "await new Promise(() => {})", timeout: 300 * time.Millisecond, wantError: "TimeoutError", wantKind: KindSystem},
			{code: "inc(x)", wantResult: "42"},
		}},
		{LangBash, []step{
			{code: "X=41; inc() { echo $(( $1 + 1 )); }", wantOut: ""},
			{code: "inc $X", wantOut: "42\n"},
			{code: "cd /tmp && echo ok", wantOut: "ok\n"},
			{code: "pwd", wantOut: "/tmp\n"},
			{code: "echo to err >&2", wantErrOut: "to err"},
			{code: "echo 'héllo 世界 🎉'", wantOut: "héllo 世界 🎉\n"},
			{code: "false", wantError: "ExitStatus", wantKind: KindRuntime},
			{code: "if then fi", wantError: "SyntaxError", wantKind: KindSyntax},
			{code: "sleep 100", timeout: 300 * time.Millisecond, wantError: "TimeoutError", wantKind: KindSystem},
			{code: "inc $X", wantOut: "42\n"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.lang, func(t *testing.T) {
			t.Parallel()
			newKernel(t, c, "k-"+tt.lang, tt.lang)
			for i, st := range tt.steps {
				out := execute(t, c, "k-"+tt.lang, st.code, st.timeout)
				where := fmt.Sprintf("step %d %q", i, st.code)
				if st.wantError == "" && out.res.Error != nil {
					t.Fatalf("%s: unexpected error %+v (stderr %q)", where, out.res.Error, out.stderr)
				}
				if st.wantError != "" {
					if out.res.Error == nil || out.res.Error.Name != st.wantError || out.res.Error.Kind != st.wantKind {
						t.Fatalf("%s: error %+v, want %s (%s)", where, out.res.Error, st.wantError, st.wantKind)
					}
					if !strings.Contains(out.res.Error.Traceback, st.wantTB) {
						t.Errorf("%s: traceback %q lacks %q", where, out.res.Error.Traceback, st.wantTB)
					}
				}
				if st.wantError == "" && out.stdout != st.wantOut {
					t.Errorf("%s: stdout %q, want %q", where, out.stdout, st.wantOut)
				}
				if !strings.Contains(out.stderr, st.wantErrOut) {
					t.Errorf("%s: stderr %q lacks %q", where, out.stderr, st.wantErrOut)
				}
				if got := resultText(out.res); got != st.wantResult {
					t.Errorf("%s: result %q, want %q", where, got, st.wantResult)
				}
				if out.res.StateLost {
					t.Errorf("%s: state lost", where)
				}
				if out.res.ExecutionCount != i+1 {
					t.Errorf("%s: execution count %d, want %d", where, out.res.ExecutionCount, i+1)
				}
			}
		})
	}
}

// TestKernelEnv checks that an execution's environment is the
// interpreter's, its child processes' too, for that execution only: what
// it replaced (a variable an earlier run set, or none) is put back.
func TestKernelEnv(t *testing.T) {
	c := startKernelAgent(t)
	env := map[string]string{"A2E_NEW": "new value\nline 2 é", "A2E_OLD": "replaced"}
	const child = "printf '%s|%s|%s' \"$A2E_NEW\" \"$A2E_OLD\" \"${A2E_NEW+set}\""
	tests := []struct {
		lang, set, show string
	}{
		{LangPython, "import os, subprocess\nos.environ['A2E_OLD'] = 'old'",
			"print(subprocess.run(['sh', '-c', " + strconv.Quote(child) + "], capture_output=True, text=True).stdout, end='')"},
		{LangJavaScript, "process.env.A2E_OLD = 'old'",
			"process.stdout.write(require('child_process').execFileSync('sh', ['-c', " + strconv.Quote(child) + "]).toString())"},
		{LangBash, "A2E_OLD=old", "sh -c " + shellQuote(child)},
	}
	for _, tt := range tests {
		t.Run(tt.lang, func(t *testing.T) {
			t.Parallel()
			id := "env-" + tt.lang
			newKernel(t, c, id, tt.lang)
			execute(t, c, id, tt.set, 0)
			run := func(env map[string]string) string {
				var stdout strings.Builder
				res, err := c.Execute(context.Background(), id, KernelExecRequest{Code: tt.show, Env: env}, KernelOutput{
					Stdout: func(p []byte) error { stdout.WriteString(string(p)); return nil },
				})
				if err != nil || res.Error != nil {
					t.Fatalf("execute: %v %+v", err, res.Error)
				}
				return stdout.String()
			}
			// bash's A2E_OLD, set without export, reaches no child before or after.
			before := map[bool]string{true: "||", false: "|old|"}[tt.lang == LangBash]
			for i, want := range []struct {
				env map[string]string
				out string
			}{{nil, before}, {env, "new value\nline 2 é|replaced|set"}, {nil, before}} {
				if got := run(want.env); got != want.out {
					t.Errorf("run %d: the child saw %q, want %q", i, got, want.out)
				}
			}
		})
	}
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func TestKernelRichOutput(t *testing.T) {
	c := startKernelAgent(t)
	newKernel(t, c, "rich", LangPython)
	out := execute(t, c, "rich", `class Page:
    def _repr_html_(self):
        return "<b>bold</b>"
    def __repr__(self):
        return "Page()"
display(Page())
print("between")
Page()`, 0)
	if out.res.Error != nil {
		t.Fatalf("error: %+v", out.res.Error)
	}
	if len(out.displays) != 1 || out.displays[0]["text/html"] != "<b>bold</b>" {
		t.Errorf("displays %v, want one with text/html", out.displays)
	}
	if out.res.Result["text/html"] != "<b>bold</b>" || resultText(out.res) != "Page()" {
		t.Errorf("result %v, want html and text", out.res.Result)
	}
	if out.stdout != "between\n" {
		t.Errorf("stdout %q", out.stdout)
	}
}

func TestKernelOutput(t *testing.T) {
	c := startKernelAgent(t)
	newKernel(t, c, "out", LangPython)
	t.Run("1 MB whole", func(t *testing.T) {
		out := execute(t, c, "out", "import sys\nsys.stdout.write('x' * (1 << 20))", 0)
		if len(out.stdout) != 1<<20 || strings.Trim(out.stdout, "x") != "" || out.res.Dropped != 0 {
			t.Errorf("stdout %d bytes (dropped %d), want 1 MiB of x", len(out.stdout), out.res.Dropped)
		}
	})
	t.Run("capped with a marker", func(t *testing.T) {
		out := executeLimit(t, c, "out", "print('y' * (1 << 20))", 0, 64<<10)
		if out.res.Dropped != (1<<20)+1-(64<<10) {
			t.Errorf("dropped %d", out.res.Dropped)
		}
		if !strings.HasPrefix(out.stdout, strings.Repeat("y", 64<<10)) || !strings.Contains(out.stdout, "[output truncated:") {
			t.Errorf("stdout does not end in the marker: %q", out.stdout[max(0, len(out.stdout)-200):])
		}
	})
	t.Run("binary-ish bytes pass through", func(t *testing.T) {
		out := execute(t, c, "out", "import sys\nsys.stdout.buffer.write(bytes(range(256)))\nsys.stdout.flush()", 0)
		if len(out.stdout) != 256 || out.stdout[255] != 255 || out.stdout[0] != 0 {
			t.Errorf("stdout %q", out.stdout)
		}
	})
	t.Run("marker-like text is output", func(t *testing.T) {
		out := execute(t, c, "out", `print("\x1ea2e-not-the-marker\x1e")`, 0)
		if out.stdout != "\x1ea2e-not-the-marker\x1e\n" {
			t.Errorf("stdout %q", out.stdout)
		}
	})
	t.Run("a printed line comes whole", func(t *testing.T) {
		// print writes its text and its end apart: the stream holds them
		// to the line's end, as a terminal's does, so that each chunk a
		// client's callback gets (E2B's on_stdout) is whole lines.
		var chunks []string
		code := "import time\nfor i in range(4):\n    print(i, flush=True)\n    time.sleep(0.05)\nprint('part', end='', flush=True)"
		_, err := c.Execute(context.Background(), "out", KernelExecRequest{Code: code}, KernelOutput{
			Stdout: func(p []byte) error { chunks = append(chunks, string(p)); return nil },
		})
		if err != nil {
			t.Fatal(err)
		}
		// A slow reader may get several lines in one chunk; none may end
		// mid-line but the last, which was flushed without its end.
		if got := strings.Join(chunks, ""); got != "0\n1\n2\n3\npart" {
			t.Errorf("stdout %q", got)
		}
		for i, c := range chunks[:max(len(chunks)-1, 0)] {
			if !strings.HasSuffix(c, "\n") {
				t.Errorf("chunk %d of %q ends mid-line", i, chunks)
			}
		}
	})
	t.Run("a partial line shows while the run lasts", func(t *testing.T) {
		// Held to its line's end, the text would wait for the run's end
		// without the driver's flushes (Jupyter's too) while a run lasts.
		first := make(chan string, 1)
		code := "import time\nprint('working', end='')\ntime.sleep(3)\nprint(' done')"
		start := time.Now()
		var took time.Duration
		_, err := c.Execute(context.Background(), "out", KernelExecRequest{Code: code}, KernelOutput{
			Stdout: func(p []byte) error {
				select {
				case first <- string(p):
					took = time.Since(start)
				default:
				}
				return nil
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		if got := <-first; got != "working" || took > 2*time.Second {
			t.Errorf("first chunk %q after %v, want %q before the run's end", got, took, "working")
		}
	})
	t.Run("subprocess output", func(t *testing.T) {
		out := execute(t, c, "out", "import subprocess\nsubprocess.run(['echo', 'from child'])", 0)
		if out.stdout != "from child\n" {
			t.Errorf("stdout %q", out.stdout)
		}
	})
}

func TestKernelRestart(t *testing.T) {
	c := startKernelAgent(t)
	tests := []struct {
		name      string
		code      string
		timeout   time.Duration
		kill      bool // kill the driver from outside before running code
		wantError string
	}{
		{name: "exits during a run", code: "import os\nos._exit(3)", wantError: "KernelDied"},
		{name: "killed during a run", code: "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)", wantError: "KernelDied"},
		{name: "ignores interrupts", code: "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass", timeout: 200 * time.Millisecond, wantError: "TimeoutError"},
		{name: "killed from outside while idle", kill: true, code: "1 + 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := strings.ReplaceAll(tt.name, " ", "-")
			info := newKernel(t, c, id, LangPython)
			execute(t, c, id, "state = 'kept'", 0)
			if tt.kill {
				if err := syscall.Kill(info.Pid, syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
				time.Sleep(50 * time.Millisecond)
			}
			out := execute(t, c, id, tt.code, tt.timeout)
			if !out.res.StateLost {
				t.Errorf("state_lost not set: %+v", out.res)
			}
			if tt.wantError != "" && (out.res.Error == nil || out.res.Error.Name != tt.wantError || out.res.Error.Kind != KindSystem) {
				t.Errorf("error %+v, want %s", out.res.Error, tt.wantError)
			}
			// The kernel works again, with its state gone.
			out = execute(t, c, id, "'state' in globals()", 0)
			if out.res.Error != nil || resultText(out.res) != "False" || out.res.StateLost {
				t.Errorf("after restart: %+v", out.res)
			}
		})
	}
}

func TestKernelCancelInterrupts(t *testing.T) {
	c := startKernelAgent(t)
	newKernel(t, c, "cancel", LangPython)
	checkCancelInterrupts(t, c, "cancel", "import time\ntime.sleep(100)")
}

// checkCancelInterrupts sets n = 5 in the Python kernel id, cancels code
// as it runs, and checks that the kernel, its state kept, runs the next
// code at once: code was interrupted.
func checkCancelInterrupts(t *testing.T, c *Client, id, code string) {
	t.Helper()
	execute(t, c, id, "n = 5", 0)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := c.Execute(ctx, id, KernelExecRequest{Code: code}, KernelOutput{})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("execute: %v, want deadline exceeded", err)
	}
	start := time.Now()
	out := execute(t, c, id, "n * 2", 0)
	if resultText(out.res) != "10" || out.res.StateLost {
		t.Errorf("after cancel: %+v", out.res)
	}
	if d := time.Since(start); d > interruptGrace {
		t.Errorf("next run waited %v: the cancelled one was not interrupted", d)
	}
}

// A timeout that ends before the driver has taken the code interrupts
// the code all the same, and the kernel keeps its state: the agent holds
// the interrupt back until the driver says the run started. (Bash is
// left out: it still loses, now and then, a SIGINT that comes as the code
// starts, in bash itself; its driver no longer ignores one that came
// before its syntax check had ended, as it did in CI under load.)
func TestKernelInterruptBeforeStart(t *testing.T) {
	c := startKernelAgent(t)
	newKernel(t, c, "early", LangPython)
	execute(t, c, "early", "n = 5", 0)
	for i := range 5 {
		out := execute(t, c, "early", "import time\ntime.sleep(100)", time.Millisecond)
		if out.res.Error == nil || out.res.Error.Name != "TimeoutError" || out.res.StateLost {
			t.Fatalf("run %d: %+v, want a TimeoutError and the state kept", i, out.res)
		}
	}
	if out := execute(t, c, "early", "n * 2", 0); resultText(out.res) != "10" || out.res.StateLost {
		t.Errorf("after the timeouts: %+v", out.res)
	}
}

func TestKernelRegistry(t *testing.T) {
	c := startKernelAgent(t)
	ctx := context.Background()
	newKernel(t, c, "a", LangPython)
	newKernel(t, c, "b", LangBash)
	if _, err := c.CreateKernel(ctx, KernelSpec{ID: "a", Language: LangPython}); !errors.Is(err, errdefs.ErrAlreadyExists) {
		t.Errorf("duplicate: %v", err)
	}
	if _, err := c.CreateKernel(ctx, KernelSpec{ID: "c", Language: "cobol"}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("unknown language: %v", err)
	}
	list, err := c.Kernels(ctx)
	if err != nil || len(list) != 2 {
		t.Fatalf("list: %v %v", list, err)
	}
	if err := c.DeleteKernel(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteKernel(ctx, "a"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("delete twice: %v", err)
	}
	if _, err := c.Execute(ctx, "a", KernelExecRequest{Code: "1"}, KernelOutput{}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("execute deleted: %v", err)
	}
	// Deleting a kernel mid-run ends the run and does not restart it.
	done := make(chan KernelResult, 1)
	go func() {
		res, _ := c.Execute(ctx, "b", KernelExecRequest{Code: "sleep 100"}, KernelOutput{})
		done <- res
	}()
	time.Sleep(200 * time.Millisecond)
	if err := c.DeleteKernel(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	select {
	case res := <-done:
		if res.Error == nil {
			t.Errorf("run of a deleted kernel: %+v", res)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("run of a deleted kernel did not end")
	}
	if list, _ := c.Kernels(ctx); len(list) != 0 {
		t.Errorf("kernels left: %+v", list)
	}
}

func TestKernelNoInterpreter(t *testing.T) {
	requireInterpreters(t)
	srvClient, _ := startAgentEnv(t, []string{"PATH=/nonexistent"})
	_, err := srvClient.CreateKernel(context.Background(), KernelSpec{ID: "x", Language: LangPython})
	var ae *Error
	if !errors.As(err, &ae) || ae.Code != "NO_INTERPRETER" {
		t.Errorf("create without python3: %v, want NO_INTERPRETER", err)
	}
}

func TestKernelsConcurrent(t *testing.T) {
	c := startKernelAgent(t)
	const n = 20
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("k%d", i)
			lang := []string{LangPython, LangJavaScript, LangBash}[i%3]
			if _, err := c.CreateKernel(context.Background(), KernelSpec{ID: id, Language: lang}); err != nil {
				t.Errorf("create %s: %v", id, err)
				return
			}
			code := map[string]string{LangPython: "print(%d)", LangJavaScript: "console.log(%d)", LangBash: "echo %d"}[lang]
			for j := range 5 {
				var stdout strings.Builder
				_, err := c.Execute(context.Background(), id, KernelExecRequest{Code: fmt.Sprintf(code, i*100+j)}, KernelOutput{
					Stdout: func(p []byte) error { stdout.Write(p); return nil },
				})
				if want := fmt.Sprintf("%d\n", i*100+j); err != nil || stdout.String() != want {
					t.Errorf("%s run %d: %q %v, want %q", id, j, stdout.String(), err, want)
				}
			}
		}()
	}
	wg.Wait()
}

// BenchmarkKernelStart measures a python kernel's start until its driver
// is ready beside the floor, the bare interpreter (python3 -c pass)
// started through the same agent, one after the other in each iteration
// so that the machine's load weighs on both alike. It reports the medians
// and the median of the per-iteration ratios (driver / floor).
func BenchmarkKernelStart(b *testing.B) {
	c := startKernelAgent(b)
	ctx := context.Background()
	var drivers, floors, ratios []float64
	for i := range b.N {
		id := fmt.Sprintf("bench-%d", i)
		start := time.Now()
		if _, err := c.CreateKernel(ctx, KernelSpec{ID: id, Language: LangPython}); err != nil {
			b.Fatal(err)
		}
		driver := time.Since(start)
		if err := c.DeleteKernel(ctx, id); err != nil {
			b.Fatal(err)
		}
		start = time.Now()
		if res, err := c.Exec(ctx, ExecRequest{Command: []string{"python3", "-c", "pass"}}, nil, io.Discard, io.Discard); err != nil || res.ExitCode != 0 {
			b.Fatalf("python3 -c pass: %+v %v", res, err)
		}
		floor := time.Since(start)
		drivers, floors = append(drivers, driver.Seconds()*1000), append(floors, floor.Seconds()*1000)
		ratios = append(ratios, float64(driver)/float64(floor))
	}
	b.ReportMetric(median(drivers), "driver-ms")
	b.ReportMetric(median(floors), "floor-ms")
	b.ReportMetric(median(ratios), "driver/floor")
}

// median is the median of xs, which it sorts.
func median(xs []float64) float64 {
	slices.Sort(xs)
	return xs[len(xs)/2]
}

// BenchmarkKernelExecute measures a cell's round trip on a warm python
// kernel (a trivial expression and its result): Execute, which attaches
// to the run it starts, and in turn the same cell on one plain request
// (POST .../execute, an older agent's route), so that the machine's load
// weighs on both alike. It reports the medians and the median of the
// per-iteration differences (attach - request).
func BenchmarkKernelExecute(b *testing.B) {
	c := startKernelAgent(b)
	ctx := context.Background()
	if _, err := c.CreateKernel(ctx, KernelSpec{ID: "bench", Language: LangPython}); err != nil {
		b.Fatal(err)
	}
	req := []byte(`{"code":"1+1"}`)
	var attached, plain, diffs []float64
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		res, err := c.Execute(ctx, "bench", KernelExecRequest{Code: "1+1"}, KernelOutput{})
		if err != nil || resultText(res) != "2" {
			b.Fatalf("execute 1+1 = %+v, %v", res, err)
		}
		a := time.Since(start).Seconds() * 1000
		start = time.Now()
		if res, err = c.executeRequest(ctx, "bench", req, KernelOutput{}); err != nil || resultText(res) != "2" {
			b.Fatalf("execute 1+1 on one request = %+v, %v", res, err)
		}
		p := time.Since(start).Seconds() * 1000
		attached, plain, diffs = append(attached, a), append(plain, p), append(diffs, a-p)
	}
	b.ReportMetric(median(attached), "attach-ms")
	b.ReportMetric(median(plain), "request-ms")
	b.ReportMetric(median(diffs), "attach-request-ms")
}

// TestKernelPythonIdleModules checks what an idle Python kernel holds: of
// the modules the driver uses only now and then (json's package and re,
// linecache and tokenize, ast, traceback, signal's enums), none that a bare
// interpreter of the host does not hold too — a kernel idles in each of
// thousands of sandboxes. Cells' lines still show in tracebacks that user
// code prints.
func TestKernelPythonIdleModules(t *testing.T) {
	c := startKernelAgent(t)
	newKernel(t, c, "idle", LangPython)
	const held = "import sys\nprint(*sorted(m for m in ('json', 're', 'linecache', 'tokenize', 'ast', 'traceback', 'signal', 'enum') if m in sys.modules))"
	// Python 3.13's -c imports linecache (for the command's lines in
	// tracebacks); the kernel, its driver on stdin, need not.
	bare, err := withoutReaping(exec.Command("python3", "-c", held).Output)
	if err != nil {
		t.Fatalf("bare python3: %v", err)
	}
	execute(t, c, "idle", `print({"a": [1.5, None, "é"]})`, 0)
	out := execute(t, c, "idle", held, 0)
	for _, m := range strings.Fields(out.stdout) {
		if !slices.Contains(strings.Fields(string(bare)), m) {
			t.Errorf("an idle kernel holds %s; a bare python3 %s", out.stdout, bare)
			break
		}
	}
	execute(t, c, "idle", "def f():\n    return 1/0", 0)
	out = execute(t, c, "idle", "import traceback\ntry:\n    f()\nexcept ZeroDivisionError:\n    traceback.print_exc()", 0)
	if !strings.Contains(out.stderr, "return 1/0") || !strings.Contains(out.stderr, "    f()") {
		t.Errorf("traceback.print_exc() printed %q, want the cells' lines", out.stderr)
	}
	if got := resultText(execute(t, c, "idle", `{"x": [float("inf"), "\u2028"]}`, 0).res); got != `{'x': [inf, '\u2028']}` {
		t.Errorf("result %q", got)
	}
}

// TestKernelPythonUserSite checks that what pip installs as the sandbox's
// user, into a user site-packages that did not exist when the kernel
// started, imports in the next cell, its .pth files (editable installs)
// read, and ahead of the system's packages as at Python's start.
func TestKernelPythonUserSite(t *testing.T) {
	c := startKernelAgent(t)
	base := t.TempDir()
	if _, err := c.CreateKernel(context.Background(), KernelSpec{ID: "usersite", Language: LangPython, Env: []string{"PYTHONUSERBASE=" + base}}); err != nil {
		t.Fatal(err)
	}
	// As pip leaves them: a module, and a .pth naming a source tree.
	src := filepath.Join(base, "src")
	install := fmt.Sprintf(`import os, site
p = site.getusersitepackages()
os.makedirs(p)
os.makedirs(%[1]q)
open(os.path.join(p, "a2e_installed.py"), "w").write("X = 7")
open(os.path.join(%[1]q, "a2e_editable.py"), "w").write("Y = 8")
open(os.path.join(p, "__editable__.a2e.pth"), "w").write(%[1]q + "\n")`, src)
	if out := execute(t, c, "usersite", install, 0); out.res.Error != nil {
		t.Fatalf("install: %+v", out.res.Error)
	}
	out := execute(t, c, "usersite", "import sys, site, a2e_installed, a2e_editable\n"+
		"(a2e_installed.X, a2e_editable.Y, sys.path.index(site.getusersitepackages()) < min(i for i, p in enumerate(sys.path) if p.endswith('-packages') and p != site.getusersitepackages()))", 0)
	if out.res.Error != nil || resultText(out.res) != "(7, 8, True)" {
		t.Errorf("the next cell: %q, error %+v, want (7, 8, True)", resultText(out.res), out.res.Error)
	}
}

// TestKernelPythonDriverOnStdin checks that the Python kernel took its
// driver on stdin, not on its command line (which it would hold for good;
// the command line names the kernel for ps and tests),
// that user code sees sys.argv and sys.path[0] as before, and that it and
// the processes it starts still read /dev/null as stdin.
// (TestKernelCancelInterrupts covers SIGINT, set through _signal.)
func TestKernelPythonDriverOnStdin(t *testing.T) {
	c := startKernelAgent(t)
	newKernel(t, c, "stdin", LangPython)
	out := execute(t, c, "stdin", `import os, subprocess, sys
cmdline = open("/proc/self/cmdline", "rb").read()
print(len(cmdline) < 200 and b"<agent2env kernel>" in cmdline, sys.argv, repr(sys.path[0]))
print(os.path.samestat(os.fstat(0), os.stat(os.devnull)), repr(sys.stdin.read()))
print(repr(subprocess.run(["cat"], capture_output=True).stdout))
try:
    input()
except EOFError:
    print("EOF")`, 0)
	if want := "True ['-c'] ''\nTrue ''\nb''\nEOF\n"; out.stdout != want || out.res.Error != nil {
		t.Errorf("stdout %q, error %+v; want %q", out.stdout, out.res.Error, want)
	}
}

// A kernel leaves no file behind: deleted, restarted after its driver
// died, or left to the agent's stop.
func TestKernelNoLeak(t *testing.T) {
	requireInterpreters(t)
	for _, how := range []string{"delete", "restart", "stop"} {
		t.Run(how, func(t *testing.T) {
			before := fdBaseline(t)
			sock, _, stop := serveAgent(t, func(dir string) ServerConfig {
				return ServerConfig{Env: []string{"PATH=" + os.Getenv("PATH")}, Cwd: dir, UID: -1, GID: -1}
			})
			c := NewClient(UnixDialer(sock), "")
			for _, lang := range []string{LangPython, LangJavaScript, LangBash} {
				newKernel(t, c, lang, lang)
				switch how {
				case "delete":
					if err := c.DeleteKernel(context.Background(), lang); err != nil {
						t.Fatal(err)
					}
				case "restart":
					if lang == LangPython {
						for range 3 {
							execute(t, c, lang, "import os\nos._exit(3)", 0)
						}
					}
					if err := c.DeleteKernel(context.Background(), lang); err != nil {
						t.Fatal(err)
					}
				}
			}
			c.Close()
			stop()
			waitFor(t, "the files to close", func() bool { return openFDs(t) <= before })
		})
	}
}
