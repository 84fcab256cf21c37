package manager

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/runtime/fakeruntime"
)

// execOutcome is the part of an ExecResult the tests compare.
type execOutcome struct {
	ExitCode       int
	Stdout, Stderr string
	TimedOut       bool
	Truncated      bool
}

func outcome(r *ExecResult) execOutcome {
	return execOutcome{ExitCode: r.ExitCode, Stdout: r.Stdout, Stderr: r.Stderr, TimedOut: r.TimedOut, Truncated: r.Truncated}
}

func TestExec(t *testing.T) {
	e := newEnv(t, Config{})
	sb := e.create(t, CreateRequest{Env: map[string]string{"GREETING": "hi"}})
	work, err := e.rt.WorkDir(sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(work, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		req  ExecRequest
		want execOutcome
	}{
		{name: "stdout", req: ExecRequest{Command: []string{"echo", "hello", "world"}},
			want: execOutcome{Stdout: "hello world\n"}},
		{name: "stderr and exit code", req: ExecRequest{Command: []string{"sh", "-c", "echo out; echo err >&2; exit 3"}},
			want: execOutcome{ExitCode: 3, Stdout: "out\n", Stderr: "err\n"}},
		{name: "sandbox env", req: ExecRequest{Command: []string{"sh", "-c", `echo "$GREETING $FROM_IMAGE $HOME"`}},
			want: execOutcome{Stdout: "hi yes /home/sandbox\n"}},
		{name: "request env", req: ExecRequest{Command: []string{"sh", "-c", `echo "$GREETING $EXTRA"`}, Env: map[string]string{"GREETING": "bye", "EXTRA": "x"}},
			want: execOutcome{Stdout: "bye x\n"}},
		{name: "stdin", req: ExecRequest{Command: []string{"cat"}, Stdin: strings.NewReader("piped\nin")},
			want: execOutcome{Stdout: "piped\nin"}},
		{name: "default cwd is the workspace", req: ExecRequest{Command: []string{"pwd"}},
			want: execOutcome{Stdout: work + "\n"}},
		{name: "relative cwd", req: ExecRequest{Command: []string{"pwd"}, Cwd: "sub"},
			want: execOutcome{Stdout: filepath.Join(work, "sub") + "\n"}},
		{name: "absolute cwd", req: ExecRequest{Command: []string{"pwd"}, Cwd: "/workspace/sub/"},
			want: execOutcome{Stdout: filepath.Join(work, "sub") + "\n"}},
		{name: "not found", req: ExecRequest{Command: []string{"no-such-command-a2e"}},
			want: execOutcome{ExitCode: 127, Stderr: "agent2env: no-such-command-a2e: executable file not found in $PATH\n"}},
		{name: "timeout", req: ExecRequest{Command: []string{"sh", "-c", "echo started; sleep 10"}, Timeout: 200 * time.Millisecond},
			want: execOutcome{ExitCode: 128 + 9, Stdout: "started\n", TimedOut: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			res, err := e.m.Exec(context.Background(), sb.ID, tt.req)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, outcome(res)); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("took %v", d)
			}
		})
	}
}

func TestExecOutputLimit(t *testing.T) {
	e := newEnv(t, Config{ExecOutputLimit: 8})
	id := e.running(t)
	tests := []struct {
		name string
		cmd  string
		want execOutcome
	}{
		{name: "under", cmd: "printf 1234567", want: execOutcome{Stdout: "1234567"}},
		{name: "exactly", cmd: "printf 12345678", want: execOutcome{Stdout: "12345678"}},
		{name: "stdout over", cmd: "printf 1234567890", want: execOutcome{Stdout: "12345678", Truncated: true}},
		{name: "stderr over", cmd: "printf 1234567890 >&2; printf ok", want: execOutcome{Stdout: "ok", Stderr: "12345678", Truncated: true}},
		{name: "many writes", cmd: "for i in 1 2 3 4 5 6; do printf ab; sleep 0.01; done", want: execOutcome{Stdout: "abababab", Truncated: true}},
		{name: "large", cmd: "head -c 1000000 /dev/zero", want: execOutcome{Stdout: "\x00\x00\x00\x00\x00\x00\x00\x00", Truncated: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := e.m.Exec(context.Background(), id, ExecRequest{Command: []string{"sh", "-c", tt.cmd}})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, outcome(res)); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCapped(t *testing.T) {
	c := &capped{limit: 5}
	for _, p := range []string{"ab", "cd", "ef", "", "gh"} {
		if n, err := c.Write([]byte(p)); n != len(p) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", p, n, err)
		}
	}
	if c.String() != "abcde" || c.dropped != 3 {
		t.Errorf("kept %q, dropped %d; want abcde, 3", c.String(), c.dropped)
	}
}

func TestExecStream(t *testing.T) {
	e := newEnv(t, Config{ExecOutputLimit: 1})
	id := e.running(t)
	var stdout, stderr bytes.Buffer
	// Streaming is not capped.
	res, err := e.m.ExecStream(context.Background(), id,
		ExecRequest{Command: []string{"sh", "-c", "echo out-long; echo err-long >&2"}}, &stdout, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 || stdout.String() != "out-long\n" || stderr.String() != "err-long\n" {
		t.Errorf("got %+v, stdout %q, stderr %q", res, stdout.String(), stderr.String())
	}
}

func TestExecInvalid(t *testing.T) {
	e := newEnv(t, Config{})
	id := e.running(t)
	tests := []struct {
		name string
		req  ExecRequest
	}{
		{name: "no command", req: ExecRequest{}},
		{name: "empty argv0", req: ExecRequest{Command: []string{"", "x"}}},
		{name: "NUL in argument", req: ExecRequest{Command: []string{"echo", "a\x00b"}}},
		{name: "negative timeout", req: ExecRequest{Command: []string{"true"}, Timeout: -time.Second}},
		{name: "timeout too long", req: ExecRequest{Command: []string{"true"}, Timeout: MaxExecTimeout + time.Second}},
		{name: "env name with =", req: ExecRequest{Command: []string{"true"}, Env: map[string]string{"A=B": "x"}}},
		{name: "env value with NUL", req: ExecRequest{Command: []string{"true"}, Env: map[string]string{"A": "\x00"}}},
		{name: "cwd traversal", req: ExecRequest{Command: []string{"true"}, Cwd: "../etc"}},
		{name: "cwd NUL", req: ExecRequest{Command: []string{"true"}, Cwd: "a\x00"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.m.Exec(context.Background(), id, tt.req)
			checkErr(t, err, errdefs.ErrInvalidArgument, "")
			checkErr(t, e.m.ValidateExec(tt.req), errdefs.ErrInvalidArgument, "")
			// Bad requests are refused before the sandbox is looked at.
			_, err = e.m.Exec(context.Background(), "nosuchsandbox", tt.req)
			checkErr(t, err, errdefs.ErrInvalidArgument, "")
		})
	}
	if err := e.m.ValidateExec(ExecRequest{Command: []string{"true"}, Cwd: "/tmp"}); err != nil {
		t.Errorf("valid request: %v", err)
	}
}

func TestExecNotRunning(t *testing.T) {
	e := newEnv(t, Config{})
	// A failed sandbox.
	e.rt.SetHooks(fakeruntime.Hooks{Start: func(context.Context, string) error { return errors.New("no agent") }})
	failed := e.create(t, CreateRequest{})
	e.rt.SetHooks(fakeruntime.Hooks{})
	// A pending sandbox.
	e.imgs.gate = make(chan struct{})
	pending := e.create(t, CreateRequest{Image: "python"})
	// A running record whose agent died (the sweeper has not noticed yet).
	dead := e.running(t)
	if err := e.rt.Kill(dead); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name    string
		id      string
		class   error
		code    string
		wantMsg string
	}{
		{name: "failed", id: failed.ID, class: errdefs.ErrFailedPrecondition, code: api.CodeSandboxNotReady,
			wantMsg: "is failed, not running: start sandbox: no agent"},
		{name: "pending", id: pending.ID, class: errdefs.ErrFailedPrecondition, code: api.CodeSandboxNotReady,
			wantMsg: "is pending, not running"},
		{name: "unknown", id: "nosuchsandbox", class: errdefs.ErrNotFound, code: api.CodeSandboxNotFound},
		{name: "agent dead", id: dead, class: errdefs.ErrUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.m.Exec(context.Background(), tt.id, ExecRequest{Command: []string{"true"}})
			checkErr(t, err, tt.class, tt.code)
			if err != nil && !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("error %q does not say %q", err, tt.wantMsg)
			}
			_, _, err = e.m.Download(context.Background(), tt.id, "f")
			checkErr(t, err, tt.class, tt.code)
			_, err = e.m.Upload(context.Background(), tt.id, "f", 0o644, strings.NewReader("x"))
			checkErr(t, err, tt.class, tt.code)
		})
	}
}

// An exchange with the agent that its sandbox's stop or delete breaks off
// says so, as a request made after them would, rather than that a
// connection failed (503, worth a retry).
func TestExecInterrupted(t *testing.T) {
	type outcome struct {
		code, msg string
	}
	tests := []struct {
		name string
		act  func(e *env, id string) error
		// want holds the outcomes allowed: a delete's may come while the
		// record says terminating or once it is gone.
		want []outcome
	}{
		{name: "deleted", act: func(e *env, id string) error { return e.m.Delete(context.Background(), id) },
			want: []outcome{{api.CodeSandboxNotReady, "is terminating, not running: deleted by request"}, {api.CodeSandboxNotFound, "was deleted"}}},
		{name: "stopped", act: func(e *env, id string) error { _, err := e.m.Stop(context.Background(), id); return err },
			want: []outcome{{api.CodeSandboxNotReady, "not running: stopped by request"}}},
		{name: "agent died", act: func(e *env, id string) error { return e.rt.Kill(id) },
			want: []outcome{{"", "exec stream ended before the result"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, Config{})
			id := e.running(t)
			accepted := make(chan struct{})
			done := make(chan error, 1)
			go func() {
				_, err := e.m.ExecStream(context.Background(), id, ExecRequest{Command: []string{"sleep", "30"},
					Accepted: func() { close(accepted) }}, io.Discard, io.Discard)
				done <- err
			}()
			<-accepted
			if err := tt.act(e, id); err != nil {
				t.Fatal(err)
			}
			var err error
			select {
			case err = <-done:
			case <-time.After(20 * time.Second):
				t.Fatal("the exec still runs")
			}
			// Still an ErrUnavailable: what the daemon's own code acts on.
			if !errors.Is(err, errdefs.ErrUnavailable) {
				t.Errorf("error %v is not %v", err, errdefs.ErrUnavailable)
			}
			for _, w := range tt.want {
				if errdefs.Code(err) == w.code && strings.Contains(fmt.Sprint(err), w.msg) {
					return
				}
			}
			t.Errorf("error %v (code %q), want one of %q", err, errdefs.Code(err), tt.want)
		})
	}
}

func TestCleanPath(t *testing.T) {
	tests := []struct {
		in      string
		want    string
		invalid bool
	}{
		{in: "file.txt", want: "/workspace/file.txt"},
		{in: "dir/file.txt", want: "/workspace/dir/file.txt"},
		{in: "./dir//file.txt", want: "/workspace/dir/file.txt"},
		{in: ".", want: "/workspace"},
		{in: "/workspace/a/", want: "/workspace/a"},
		{in: "/tmp/x", want: "/tmp/x"},
		{in: "/", want: "/"},
		{in: "/a/./b", want: "/a/b"},
		{in: "a..b", want: "/workspace/a..b"},
		{in: "...", want: "/workspace/..."},
		{in: "", invalid: true},
		{in: "..", invalid: true},
		{in: "../etc/passwd", invalid: true},
		{in: "a/../../etc", invalid: true},
		{in: "/workspace/../etc/shadow", invalid: true},
		{in: "/..", invalid: true},
		{in: "a/..", invalid: true},
		{in: "a\x00b", invalid: true},
		{in: "\x00", invalid: true},
		{in: "/" + strings.Repeat("a", maxPath-1), want: "/" + strings.Repeat("a", maxPath-1)},
		{in: "/" + strings.Repeat("a", maxPath), invalid: true},
	}
	for _, tt := range tests {
		t.Run(tt.in[:min(len(tt.in), 40)], func(t *testing.T) {
			got, err := CleanPath(tt.in)
			if tt.invalid {
				checkErr(t, err, errdefs.ErrInvalidArgument, "")
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("CleanPath(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestFiles(t *testing.T) {
	e := newEnv(t, Config{})
	id := e.running(t)
	work, err := e.rt.WorkDir(id)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	fi, err := e.m.Upload(ctx, id, "dir/hello.txt", 0o600, strings.NewReader("hello\x00world"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Path != "/workspace/dir/hello.txt" || fi.Name != "hello.txt" || fi.Size != 11 || fi.Mode.Perm() != 0o600 {
		t.Errorf("upload info %+v", fi)
	}
	if b, err := os.ReadFile(filepath.Join(work, "dir", "hello.txt")); err != nil || string(b) != "hello\x00world" {
		t.Errorf("file in the workspace: %q, %v", b, err)
	}
	for _, p := range []string{"dir/hello.txt", "/workspace/dir/hello.txt", "./dir//hello.txt"} {
		rc, size, err := e.m.Download(ctx, id, p)
		if err != nil {
			t.Fatalf("download %s: %v", p, err)
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || string(b) != "hello\x00world" || size != 11 {
			t.Errorf("download %s: %q (size %d), %v", p, b, size, err)
		}
	}

	tests := []struct {
		name  string
		path  string
		class error
		code  string
	}{
		{name: "missing file", path: "nope.txt", class: errdefs.ErrNotFound, code: api.CodeFileNotFound},
		{name: "directory", path: "dir", class: errdefs.ErrInvalidArgument},
		{name: "traversal", path: "../../etc/passwd", class: errdefs.ErrInvalidArgument},
		{name: "NUL", path: "a\x00b", class: errdefs.ErrInvalidArgument},
		{name: "empty", path: "", class: errdefs.ErrInvalidArgument},
	}
	for _, tt := range tests {
		t.Run("download "+tt.name, func(t *testing.T) {
			_, _, err := e.m.Download(ctx, id, tt.path)
			checkErr(t, err, tt.class, tt.code)
		})
	}
	t.Run("upload traversal", func(t *testing.T) {
		_, err := e.m.Upload(ctx, id, "../escape.txt", 0o644, strings.NewReader("x"))
		checkErr(t, err, errdefs.ErrInvalidArgument, "")
		if _, err := os.Stat(filepath.Join(filepath.Dir(work), "escape.txt")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("file written outside the workspace: %v", err)
		}
	})
	t.Run("upload over a directory", func(t *testing.T) {
		_, err := e.m.Upload(ctx, id, "/workspace/dir", 0o644, strings.NewReader("x"))
		checkErr(t, err, errdefs.ErrInvalidArgument, "")
	})
	t.Run("unknown sandbox", func(t *testing.T) {
		_, err := e.m.Upload(ctx, "nosuchsandbox", "f", 0o644, strings.NewReader("x"))
		checkErr(t, err, errdefs.ErrNotFound, api.CodeSandboxNotFound)
	})
}

// However many buffered executions produce output at once, what they hold
// stays within the output budget, and one sandbox's within half of it:
// those it cuts short say truncated, another sandbox's output is kept, and
// all of it comes back once their results are released.
func TestExecOutputBudget(t *testing.T) {
	const budget, perStream = 4 << 20, 1 << 20
	e := newEnv(t, Config{ExecOutputLimit: 2 * perStream, OutputBudget: budget})
	id := e.running(t)
	// 12 executions of 2 MiB each, none released until all are done.
	const n = 12
	cmd := fmt.Sprintf("head -c %d /dev/zero | tr '\\0' o; head -c %d /dev/zero | tr '\\0' e >&2", perStream, perStream)
	results := make([]*ExecResult, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			if results[i], err = e.m.Exec(context.Background(), id, ExecRequest{Command: []string{"sh", "-c", cmd}}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	if peak := e.m.OutputBudget().Peak(); peak > budget {
		t.Errorf("buffered output peaked at %d bytes, above the budget of %d", peak, budget)
	}
	kept, cut := 0, 0
	for _, r := range results {
		kept += len(r.Stdout) + len(r.Stderr)
		switch {
		case r.Truncated:
			cut++
		case len(r.Stdout) != perStream || len(r.Stderr) != perStream:
			t.Errorf("whole result has %d and %d bytes, want %d", len(r.Stdout), len(r.Stderr), perStream)
		}
		if strings.Trim(r.Stdout, "o") != "" || strings.Trim(r.Stderr, "e") != "" {
			t.Errorf("output mixed or corrupted")
		}
	}
	if kept > budget/2 || cut == 0 {
		t.Errorf("%d bytes kept (budget %d, one sandbox's share half of it), %d of %d results truncated", kept, budget, cut, n)
	}
	// Another sandbox's output is kept whole while the first one's is
	// held: one sandbox takes at most half the budget.
	const half = perStream / 2
	small := fmt.Sprintf("head -c %d /dev/zero | tr '\\0' o; head -c %d /dev/zero | tr '\\0' e >&2", half, half)
	other, err := e.m.Exec(context.Background(), e.running(t), ExecRequest{Command: []string{"sh", "-c", small}})
	if err != nil {
		t.Fatal(err)
	}
	if other.Truncated || len(other.Stdout) != half || len(other.Stderr) != half {
		t.Errorf("another sandbox's result: %d and %d bytes, truncated %v; want %d each", len(other.Stdout), len(other.Stderr), other.Truncated, half)
	}
	other.Release()
	for _, r := range results {
		r.Release()
	}
	if in := e.m.OutputBudget().InUse(); in != 0 {
		t.Errorf("budget in use after release: %d", in)
	}
}

// The messages of failed file operations and deletes, which the API sends
// as they are, say what went wrong and not what was asked: the client
// names that ("download /x from sandbox ID: …"), and would say it twice.
func TestErrorsNameNoRequest(t *testing.T) {
	e := newEnv(t, Config{})
	id := e.running(t)
	ctx := context.Background()
	if _, err := e.m.Upload(ctx, id, "dir/f", 0o644, strings.NewReader("x")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		op   func() error
		want string // what the message ends with
	}{
		{"download a missing file", func() error { _, _, err := e.m.Download(ctx, id, "nope.txt"); return err }, "nope.txt: no such file or directory"},
		{"list a missing directory", func() error { _, err := e.m.ListDir(ctx, id, "nodir"); return err }, "nodir: no such file or directory"},
		{"upload over a directory", func() error {
			_, err := e.m.Upload(ctx, id, "dir", 0o644, strings.NewReader("x"))
			return err
		}, "dir: is a directory"},
		{"delete a missing sandbox", func() error { return e.m.Delete(ctx, "nosuch1") }, "sandbox nosuch1 not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.op()
			if err == nil || !strings.HasSuffix(err.Error(), tt.want) || strings.Contains(err.Error(), "sandbox "+id) ||
				strings.Contains(err.Error(), "terminating") {
				t.Errorf("got %v, want the failure alone, ending %q", err, tt.want)
			}
		})
	}
}

// A sandbox that is not running says so with its id and status as
// details, from which a client names its own way to start or resume it.
func TestNotRunningDetails(t *testing.T) {
	e := newEnv(t, Config{})
	ctx := context.Background()
	tests := []struct {
		name   string
		status api.SandboxStatus
		set    func(id string) error
	}{
		{"paused", api.StatusPaused, func(id string) error { _, err := e.m.Pause(ctx, id); return err }},
		{"stopped", api.StatusSucceeded, func(id string) error { _, err := e.m.Stop(ctx, id); return err }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := e.running(t)
			if err := tt.set(id); err != nil {
				t.Fatal(err)
			}
			_, err := e.m.Agent(ctx, id)
			body := errdefs.Body(err)
			want := map[string]any{"sandbox_id": id, "status": string(tt.status)}
			if body.Code != api.CodeSandboxNotReady || !cmp.Equal(body.Details, want) || strings.Contains(body.Message, "/api/") {
				t.Errorf("got %+v, want %s with details %v and no REST path", body, api.CodeSandboxNotReady, want)
			}
		})
	}
}
