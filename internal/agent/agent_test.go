package agent

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agent2env/agent2env/internal/errdefs"
)

// startAgent serves an agent running commands as the test's own user on a
// unix socket in a fresh directory, and returns a client for it.
func startAgent(t testing.TB) (*Client, string) {
	t.Helper()
	return startAgentEnv(t, []string{"PATH=" + os.Getenv("PATH"), "BASE=1"})
}

// startAgentEnv is startAgent with the given command environment.
func startAgentEnv(t testing.TB, env []string) (*Client, string) {
	t.Helper()
	sock, dir, _ := serveAgent(t, func(dir string) ServerConfig {
		work := filepath.Join(dir, "work")
		if err := os.Mkdir(work, 0o755); err != nil {
			t.Fatal(err)
		}
		return ServerConfig{Env: env, Cwd: work, UID: -1, GID: -1}
	})
	c := NewClient(UnixDialer(sock), "")
	t.Cleanup(c.Close)
	return c, filepath.Join(dir, "work")
}

// serveAgent serves an agent configured by config(dir) on a unix socket
// in a fresh directory dir until the test ends or stop.
func serveAgent(t testing.TB, config func(dir string) ServerConfig) (sock, dir string, stop func()) {
	t.Helper()
	dir, err := os.MkdirTemp("", "a2e-agent-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock = filepath.Join(dir, "agent.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(config(dir))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, l) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("serve: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return sock, dir, stop
}

func TestExec(t *testing.T) {
	c, work := startAgent(t)
	tests := []struct {
		name       string
		req        ExecRequest
		stdin      string
		wantCode   int
		wantOut    string
		wantErrOut string
		wantSignal string
		timedOut   bool
	}{
		{name: "argv", req: ExecRequest{Command: []string{"echo", "hello", "world"}}, wantOut: "hello world\n"},
		{name: "shell", req: ExecRequest{Shell: "echo out; echo err >&2; exit 3"}, wantCode: 3, wantOut: "out\n", wantErrOut: "err\n"},
		{name: "env merged", req: ExecRequest{Shell: `echo "$BASE $EXTRA"`, Env: []string{"EXTRA=2"}}, wantOut: "1 2\n"},
		{name: "env overrides", req: ExecRequest{Shell: `echo $BASE`, Env: []string{"BASE=x"}}, wantOut: "x\n"},
		{name: "default cwd", req: ExecRequest{Command: []string{"pwd"}}, wantOut: work + "\n"},
		{name: "cwd", req: ExecRequest{Command: []string{"pwd"}, Cwd: "/"}, wantOut: "/\n"},
		{name: "stdin", req: ExecRequest{Command: []string{"cat"}, Stdin: true}, stdin: "piped\x00bytes", wantOut: "piped\x00bytes"},
		{name: "no stdin is empty", req: ExecRequest{Command: []string{"cat"}}, wantOut: ""},
		{name: "not found", req: ExecRequest{Command: []string{"no-such-command-a2e"}}, wantCode: 127,
			wantErrOut: "agent2env: no-such-command-a2e: executable file not found in $PATH\n"},
		{name: "signal", req: ExecRequest{Shell: "kill -TERM $$"}, wantCode: 128 + 15, wantSignal: "SIGTERM"},
		{name: "timeout", req: ExecRequest{Shell: "echo started; sleep 30", Timeout: 200 * time.Millisecond}, wantCode: 128 + 9, wantOut: "started\n", wantSignal: "SIGKILL", timedOut: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			res, err := c.Exec(context.Background(), tt.req, strings.NewReader(tt.stdin), &stdout, &stderr)
			if err != nil {
				t.Fatalf("exec: %v", err)
			}
			if res.ExitCode != tt.wantCode || res.Signal != tt.wantSignal || res.TimedOut != tt.timedOut {
				t.Errorf("result = %+v, want code %d signal %q timed out %v", res, tt.wantCode, tt.wantSignal, tt.timedOut)
			}
			if stdout.String() != tt.wantOut {
				t.Errorf("stdout = %q, want %q", stdout.String(), tt.wantOut)
			}
			if stderr.String() != tt.wantErrOut {
				t.Errorf("stderr = %q, want %q", stderr.String(), tt.wantErrOut)
			}
		})
	}
}

func TestExecTimeoutKillsGroup(t *testing.T) {
	c, work := startAgent(t)
	marker := filepath.Join(work, "survived")
	// A background child of the command must die with it.
	req := ExecRequest{Shell: "(sleep 1; touch " + marker + ") & sleep 30", Timeout: 100 * time.Millisecond}
	res, err := c.Exec(context.Background(), req, nil, nil, nil)
	if err != nil || !res.TimedOut {
		t.Fatalf("exec = %+v, %v; want timed out", res, err)
	}
	time.Sleep(1500 * time.Millisecond)
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("background child survived the timeout")
	}
}

func TestExecCancelKillsCommand(t *testing.T) {
	c, work := startAgent(t)
	marker := filepath.Join(work, "survived")
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := c.Exec(ctx, ExecRequest{Shell: "sleep 1; touch " + marker}, nil, nil, nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("exec err = %v, want deadline exceeded", err)
	}
	time.Sleep(1500 * time.Millisecond)
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("command survived the cancelled request")
	}
}

func TestExecBackgroundDoesNotHang(t *testing.T) {
	c, _ := startAgent(t)
	start := time.Now()
	res, err := c.Exec(context.Background(), ExecRequest{Shell: "sleep 5 & echo done"}, nil, nil, nil)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("exec = %+v, %v", res, err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("exec waited %v for a background job holding stdout", d)
	}
}

// A working directory that cannot be one is refused, naming it, before
// anything starts.
func TestExecBadCwd(t *testing.T) {
	c, work := startAgent(t)
	file := filepath.Join(work, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(work, "missing")
	tests := []struct {
		req  ExecRequest
		want string
	}{
		{ExecRequest{Command: []string{"pwd"}, Cwd: missing}, "working directory " + missing + " does not exist"},
		{ExecRequest{Command: []string{"pwd"}, Cwd: file}, "working directory " + file + " is not a directory"},
		{ExecRequest{Command: []string{"pwd"}, Cwd: missing, Main: true}, "working directory " + missing + " does not exist"},
	}
	for _, tt := range tests {
		res, err := c.Exec(context.Background(), tt.req, nil, nil, nil)
		if !errors.Is(err, errdefs.ErrInvalidArgument) || err.Error() != tt.want {
			t.Errorf("exec %+v = %+v, %v; want invalid argument %q", tt.req, res, err, tt.want)
		}
	}
	_, err := c.CreateKernel(context.Background(), KernelSpec{ID: "k", Language: LangBash, Cwd: missing})
	if !errors.Is(err, errdefs.ErrInvalidArgument) || err.Error() != tests[0].want {
		t.Errorf("kernel in a missing directory: %v, want invalid argument %q", err, tests[0].want)
	}
}

func TestExecInvalid(t *testing.T) {
	c, _ := startAgent(t)
	for _, req := range []ExecRequest{{}, {Command: []string{""}}, {Command: []string{"a"}, Shell: "b"}, {Shell: "x", Timeout: -1}} {
		if _, err := c.Exec(context.Background(), req, nil, nil, nil); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("exec %+v: err = %v, want invalid argument", req, err)
		}
	}
}

func TestExecConcurrent(t *testing.T) {
	c, _ := startAgent(t)
	const n = 50
	errs := make(chan error, n)
	for i := range n {
		go func() {
			var out bytes.Buffer
			want := strings.Repeat("x", i*1000) + "\n"
			res, err := c.Exec(context.Background(), ExecRequest{Command: []string{"printf", "%s\\n", want[:len(want)-1]}}, nil, &out, nil)
			switch {
			case err != nil:
				errs <- err
			case res.ExitCode != 0 || out.String() != want:
				errs <- errors.New("crossed or lost output")
			default:
				errs <- nil
			}
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

func TestFiles(t *testing.T) {
	c, work := startAgent(t)
	ctx := context.Background()
	data := make([]byte, 3<<20+17)
	if _, err := rand.Read(data); err != nil {
		t.Fatal(err)
	}
	fi, err := c.Upload(ctx, "sub/dir/blob.bin", 0o600, bytes.NewReader(data))
	if err != nil {
		t.Fatalf("upload: %v", err)
	}
	if fi.Path != filepath.Join(work, "sub/dir/blob.bin") || fi.Size != int64(len(data)) || fi.Mode.Perm() != 0o600 {
		t.Errorf("upload info = %+v", fi)
	}
	rc, size, err := c.Download(ctx, filepath.Join(work, "sub/dir/blob.bin"))
	if err != nil {
		t.Fatalf("download: %v", err)
	}
	var got bytes.Buffer
	if _, err := got.ReadFrom(rc); err != nil {
		t.Fatal(err)
	}
	rc.Close()
	if size != int64(len(data)) || !bytes.Equal(got.Bytes(), data) {
		t.Fatalf("download: %d bytes (size %d), want %d identical", got.Len(), size, len(data))
	}

	if err := c.Mkdir(ctx, "a/b", false); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("mkdir without parents: %v, want not found", err)
	}
	if err := c.Mkdir(ctx, "a/b", true); err != nil {
		t.Errorf("mkdir -p: %v", err)
	}
	if err := c.Mkdir(ctx, "a/b", false); !errors.Is(err, errdefs.ErrAlreadyExists) {
		t.Errorf("mkdir existing: %v, want already exists", err)
	}
	if err := c.Move(ctx, "sub/dir/blob.bin", "a/b/moved.bin"); err != nil {
		t.Errorf("move: %v", err)
	}
	ents, err := c.List(ctx, "a/b")
	if err != nil || len(ents) != 1 || ents[0].Name != "moved.bin" {
		t.Errorf("list = %+v, %v", ents, err)
	}
	if _, err := c.Stat(ctx, "sub/dir/blob.bin"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("stat moved-away file: %v, want not found", err)
	}
	if _, _, err := c.Download(ctx, "a"); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("download a directory: %v, want invalid argument", err)
	}
	if err := c.Remove(ctx, "a", false); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("remove non-empty dir: %v, want invalid argument", err)
	}
	if err := c.Remove(ctx, "a", true); err != nil {
		t.Errorf("remove -r: %v", err)
	}
	if err := c.Remove(ctx, "a", true); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("remove missing: %v, want not found", err)
	}
}

// A failed upload leaves neither a partial file nor a temporary one.
func TestUploadFailureLeavesNothing(t *testing.T) {
	c, work := startAgent(t)
	ctx, cancel := context.WithCancel(context.Background())
	r, w := io.Pipe()
	// The body never ends; the upload is cancelled midway. (The writer
	// must not be what cancels: it may block once the client stops
	// reading.)
	go func() { _, _ = w.Write(make([]byte, 1<<20)) }()
	time.AfterFunc(300*time.Millisecond, cancel)
	_, err := c.Upload(ctx, "partial.bin", 0o644, r)
	w.CloseWithError(errors.New("test over"))
	if err == nil {
		t.Fatal("upload succeeded after cancel")
	}
	time.Sleep(200 * time.Millisecond)
	ents, _ := os.ReadDir(work)
	if len(ents) != 0 {
		t.Fatalf("left behind: %v", ents)
	}
}

func TestToken(t *testing.T) {
	dir, _ := os.MkdirTemp("", "a2e-agent-")
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "s")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go NewServer(ServerConfig{UID: -1, GID: -1, Token: "s3cret"}).Serve(ctx, l)
	tests := []struct {
		token string
		want  error
	}{{"", errdefs.ErrUnauthenticated}, {"wrong", errdefs.ErrUnauthenticated}, {"s3cret", nil}}
	for _, tt := range tests {
		_, err := NewClient(UnixDialer(sock), tt.token).Info(context.Background())
		if !errors.Is(err, tt.want) && !(tt.want == nil && err == nil) {
			t.Errorf("token %q: err = %v, want %v", tt.token, err, tt.want)
		}
	}
}

func TestInfo(t *testing.T) {
	c, _ := startAgent(t)
	info, err := c.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.Version != Version || info.Processes == 0 {
		t.Errorf("info = %+v", info)
	}
}

func TestMergeEnv(t *testing.T) {
	got := mergeEnv([]string{"A=1", "B=2"}, []string{"B=3", "C=4", "A=5"})
	want := []string{"A=5", "B=3", "C=4"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("mergeEnv = %v, want %v", got, want)
	}
}

// TestMainProcessStartRace starts main processes at once: exactly one
// starts. (The busy check and the start were once apart, and several
// starts could pass the check together.)
func TestMainProcessStartRace(t *testing.T) {
	c, _ := startAgent(t)
	ctx := context.Background()
	const n = 16
	results := make(chan ExecResult, n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			res, err := c.Exec(ctx, ExecRequest{Command: []string{"sleep", "1"}, Main: true}, nil, nil, nil)
			if err != nil {
				t.Error(err)
			}
			results <- res
		})
	}
	wg.Wait()
	close(results)
	started := 0
	for res := range results {
		switch {
		case res.Error == "" && res.Pid != 0:
			started++
		case !strings.Contains(res.Error, "already running"):
			t.Errorf("start main = %+v, want started or already running", res)
		}
	}
	if started != 1 {
		t.Errorf("%d of %d concurrent starts started a main process, want 1", started, n)
	}
}

func TestMainProcess(t *testing.T) {
	c, work := startAgent(t)
	ctx := context.Background()
	marker := filepath.Join(work, "main-ran")
	res, err := c.Exec(ctx, ExecRequest{Shell: "sleep 0.3; touch " + marker + "; exit 4", Main: true}, nil, nil, nil)
	if err != nil || res.Pid == 0 || res.Error != "" {
		t.Fatalf("start main = %+v, %v", res, err)
	}
	info, err := c.Info(ctx)
	if err != nil || info.Main == nil || info.Main.Pid != res.Pid || info.Main.Exited {
		t.Fatalf("info while main runs = %+v, %v", info.Main, err)
	}
	if res, _ := c.Exec(ctx, ExecRequest{Command: []string{"true"}, Main: true}, nil, nil, nil); res.Error == "" {
		t.Errorf("a second main process started while the first runs: %+v", res)
	}
	deadline := time.Now().Add(5 * time.Second)
	for info.Main == nil || !info.Main.Exited {
		if time.Now().After(deadline) {
			t.Fatal("main process exit not reported")
		}
		time.Sleep(50 * time.Millisecond)
		info, _ = c.Info(ctx)
	}
	if info.Main.ExitCode != 4 {
		t.Errorf("main exit = %+v, want code 4", info.Main)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Errorf("main process did not run: %v", err)
	}
	if _, err := c.Exec(ctx, ExecRequest{Command: []string{"true"}, Main: true, Timeout: time.Second}, nil, nil, nil); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("main with a timeout: %v, want invalid argument", err)
	}
}

// stallWriter keeps what is written to it, the first write taking
// stall: a client, or a pump, that falls behind for a while.
type stallWriter struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	stall time.Duration
}

func (w *stallWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stall > 0 {
		time.Sleep(w.stall)
		w.stall = 0
	}
	return w.buf.Write(p)
}

// TestExecOutputAfterExit: output the command made before it exited is
// delivered however late its pump gets to it (a slow client, a loaded
// machine); the grace for descendants holding the pipe is no deadline for
// output already in it.
func TestExecOutputAfterExit(t *testing.T) {
	c, _ := startAgent(t)
	out := &stallWriter{stall: 5 * drainGrace}
	res, err := c.Exec(context.Background(), ExecRequest{Shell: "printf first; sleep 0.05; printf second"}, nil, out, nil)
	if err != nil || res.ExitCode != 0 || out.buf.String() != "firstsecond" {
		t.Errorf("exec = %+v with output %q, want first and second", res, out.buf.String())
	}
}

// TestNoCommandBeforeSpareThreads: a command waits for the agent to hold
// its spare threads, which the agent starts beside serving (Run), so that
// a fork bomb started at once cannot take them first.
func TestNoCommandBeforeSpareThreads(t *testing.T) {
	spare := make(chan struct{})
	s := NewServer(ServerConfig{Env: []string{"PATH=" + os.Getenv("PATH")}, Cwd: t.TempDir(), UID: -1, GID: -1, Spare: spare})
	done := make(chan error, 1)
	go func() {
		_, err := s.procs.start(&ProcRequest{Shell: "true"}, true)
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("the command ran before the spare threads were held (%v)", err)
	case <-time.After(200 * time.Millisecond):
	}
	close(spare)
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("start: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the command did not run once the spare threads were held")
	}
}
