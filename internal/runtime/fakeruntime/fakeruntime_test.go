package fakeruntime

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/agent2env/agent2env/internal/agent"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/image"
	"github.com/agent2env/agent2env/internal/runtime/runtimetest"
	"github.com/agent2env/agent2env/internal/sandbox"
)

func newRuntime(t *testing.T, opts ...Option) *Runtime {
	t.Helper()
	r := New(opts...)
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return r
}

func spec(id string) *sandbox.Spec {
	return &sandbox.Spec{ID: id, Image: "alpine", Cwd: sandbox.WorkDir,
		Env: []string{"PATH=/usr/bin:/bin", "FROM_SPEC=1"}, Labels: map[string]string{"k": "v"}}
}

func exec(t *testing.T, c *agent.Client, req agent.ExecRequest, stdin string) (agent.ExecResult, string) {
	t.Helper()
	var out bytes.Buffer
	res, err := c.Exec(context.Background(), req, strings.NewReader(stdin), &out, io.Discard)
	if err != nil {
		t.Fatalf("exec %v: %v", req.Command, err)
	}
	return res, out.String()
}

func TestLifecycle(t *testing.T) {
	r := newRuntime(t)
	ctx := context.Background()
	if err := r.Create(ctx, spec("a")); err != nil {
		t.Fatal(err)
	}
	checkErr(t, r.Create(ctx, spec("a")), errdefs.ErrAlreadyExists)
	st, err := r.Status(ctx, "a")
	if err != nil || st.State != sandbox.StateCreated || st.Labels["k"] != "v" {
		t.Errorf("status after create: %+v, %v", st, err)
	}
	c, err := r.Agent(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	// Not started: the agent cannot be reached.
	_, err = c.Info(ctx)
	checkErr(t, err, errdefs.ErrUnavailable)

	if err := r.Start(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Info(ctx); err != nil {
		t.Fatalf("info after start: %v", err)
	}
	work, err := r.WorkDir("a")
	if err != nil {
		t.Fatal(err)
	}
	res, out := exec(t, c, agent.ExecRequest{Shell: `pwd; echo $FROM_SPEC`}, "")
	if res.ExitCode != 0 || out != work+"\n1\n" {
		t.Errorf("exec: %+v, %q", res, out)
	}

	if err := r.Stop(ctx, "a", 0); err != nil {
		t.Fatal(err)
	}
	if got := r.State("a"); got != sandbox.StateStopped {
		t.Errorf("state after stop %q", got)
	}
	_, err = c.Info(ctx)
	checkErr(t, err, errdefs.ErrUnavailable)
	if err := r.Start(ctx, "a"); err != nil {
		t.Fatalf("restart: %v", err)
	}
	if _, err := c.Info(ctx); err != nil {
		t.Fatalf("info after restart: %v", err)
	}

	list, err := r.List(ctx)
	if err != nil || len(list) != 1 || list[0].ID != "a" || list[0].State != sandbox.StateRunning {
		t.Errorf("list: %+v, %v", list, err)
	}
	if err := r.Delete(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(work); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("workspace survived delete: %v", err)
	}
	checkErr(t, r.Delete(ctx, "a"), errdefs.ErrNotFound)
	_, err = r.Status(ctx, "a")
	checkErr(t, err, errdefs.ErrNotFound)
	_, err = r.Agent(ctx, "a")
	checkErr(t, err, errdefs.ErrNotFound)
	checkErr(t, r.Start(ctx, "a"), errdefs.ErrNotFound)
	checkErr(t, r.Stop(ctx, "a", 0), errdefs.ErrNotFound)
	_, err = r.Logs(ctx, "a", 10)
	checkErr(t, err, errdefs.ErrNotFound)

	want := Calls{Create: 2, Start: 3, Stop: 2, Delete: 2, Status: 2, List: 1, Agent: 2, Logs: 1}
	if diff := cmp.Diff(want, r.Calls()); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
}

// TestPathMapping checks that /workspace and /tmp paths reach the
// sandbox's own directories, never the host's, and come back as the
// sandbox's paths.
func TestPathMapping(t *testing.T) {
	r := newRuntime(t)
	ctx := context.Background()
	if err := r.Seed(spec("a"), sandbox.StateRunning); err != nil {
		t.Fatal(err)
	}
	c, _ := r.Agent(ctx, "a")
	work, _ := r.WorkDir("a")
	// A name of its own: under /tmp, the host's file of that name must not
	// be the one written.
	const sub = "a2e-fake-path-mapping"
	for _, tt := range []struct {
		dir  string // in the sandbox
		host string // where it is on the host; "" where the test cannot tell
	}{
		{sandbox.WorkDir, work},
		{"/tmp", ""},
	} {
		t.Run(tt.dir, func(t *testing.T) {
			file := tt.dir + "/" + sub + "/f.txt"
			fi, err := c.Upload(ctx, file, 0o640, strings.NewReader("data"))
			if err != nil {
				t.Fatal(err)
			}
			if fi.Path != file || fi.Mode.Perm() != 0o640 {
				t.Errorf("upload info %+v", fi)
			}
			if tt.host != "" {
				if b, err := os.ReadFile(filepath.Join(tt.host, sub, "f.txt")); err != nil || string(b) != "data" {
					t.Errorf("uploaded file: %q, %v", b, err)
				}
			}
			if _, err := os.Stat(filepath.Join(tt.dir, sub)); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("the host's %s/%s: %v; want it absent", tt.dir, sub, err)
			}
			rc, _, err := c.Download(ctx, file)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(rc)
			rc.Close()
			if string(b) != "data" {
				t.Errorf("download %q", b)
			}
			res, out := exec(t, c, agent.ExecRequest{Command: []string{"pwd"}, Cwd: tt.dir + "/" + sub}, "")
			if res.ExitCode != 0 || out == tt.dir+"/"+sub+"\n" || (tt.host != "" && out != filepath.Join(tt.host, sub)+"\n") {
				t.Errorf("exec in %s/%s: %+v, %q", tt.dir, sub, res, out)
			}
			// Stdin passes through the rewritten request.
			res, out = exec(t, c, agent.ExecRequest{Command: []string{"cat"}, Stdin: true, Cwd: tt.dir}, "in\x00put")
			if res.ExitCode != 0 || out != "in\x00put" {
				t.Errorf("exec with stdin: %+v, %q", res, out)
			}
			list, err := c.List(ctx, tt.dir)
			if err != nil || len(list) != 1 || list[0].Path != tt.dir+"/"+sub {
				t.Errorf("list: %+v, %v", list, err)
			}
			_, err = c.Stat(ctx, tt.dir+"/missing")
			checkErr(t, err, errdefs.ErrNotFound)
			if strings.Contains(err.Error(), filepath.Dir(work)) {
				t.Errorf("error %q shows the host path", err)
			}
		})
	}
}

// TestUnreadStdin runs commands that leave their stdin unread, each
// followed by another exec on the same pooled connection (see the
// golang/go#68560 workaround in shim.exec).
func TestUnreadStdin(t *testing.T) {
	r := newRuntime(t)
	ctx := context.Background()
	if err := r.Seed(spec("a"), sandbox.StateRunning); err != nil {
		t.Fatal(err)
	}
	c, _ := r.Agent(ctx, "a")
	reqs := []agent.ExecRequest{
		{Command: []string{"true"}, Stdin: true},
		{Command: []string{"true"}, Stdin: true, Cwd: "/nonexistent"},
		{Command: []string{"no-such-command-a2e"}, Stdin: true},
		{Command: []string{"true"}},
	}
	for i := range 200 {
		req := reqs[i%len(reqs)]
		_, err := c.Exec(ctx, req, strings.NewReader("unread"), nil, nil)
		if req.Cwd != "" { // refused before it starts
			checkErr(t, err, errdefs.ErrInvalidArgument)
		} else if err != nil {
			t.Fatalf("exec %d %+v: %v", i, req, err)
		}
	}
}

func TestHooks(t *testing.T) {
	r := newRuntime(t)
	ctx := context.Background()
	boom := errors.New("boom")
	r.SetHooks(Hooks{Create: func(context.Context, *sandbox.Spec) error { return boom }})
	if err := r.Create(ctx, spec("a")); !errors.Is(err, boom) {
		t.Errorf("create: %v", err)
	}
	if ids := r.IDs(); len(ids) != 0 {
		t.Errorf("failed create left %v", ids)
	}
	r.SetHooks(Hooks{
		Start:  func(context.Context, string) error { return boom },
		Delete: func(context.Context, string) error { return boom },
		Status: func(context.Context, string) error { return boom },
	})
	if err := r.Create(ctx, spec("a")); err != nil {
		t.Fatal(err)
	}
	if err := r.Start(ctx, "a"); !errors.Is(err, boom) {
		t.Errorf("start: %v", err)
	}
	if err := r.Delete(ctx, "a"); !errors.Is(err, boom) {
		t.Errorf("delete: %v", err)
	}
	if _, err := r.Status(ctx, "a"); !errors.Is(err, boom) {
		t.Errorf("status: %v", err)
	}
	if got := r.State("a"); got != sandbox.StateCreated {
		t.Errorf("state %q after failed start", got)
	}

	r.SetHooks(Hooks{Exec: func(id string, req *agent.ExecRequest) error {
		if req.Command[0] != "echo" {
			return errors.New("only echo")
		}
		return nil
	}})
	if err := r.Start(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	c, _ := r.Agent(ctx, "a")
	if _, out := exec(t, c, agent.ExecRequest{Command: []string{"echo", "ok"}}, ""); out != "ok\n" {
		t.Errorf("allowed exec printed %q", out)
	}
	_, err := c.Exec(ctx, agent.ExecRequest{Command: []string{"true"}}, nil, nil, nil)
	checkErr(t, err, errdefs.ErrPermissionDenied)
}

func TestKillAndLogs(t *testing.T) {
	r := newRuntime(t)
	ctx := context.Background()
	if err := r.Seed(spec("a"), sandbox.StateRunning); err != nil {
		t.Fatal(err)
	}
	c, _ := r.Agent(ctx, "a")
	if err := r.Kill("a"); err != nil {
		t.Fatal(err)
	}
	if st, err := r.Status(ctx, "a"); err != nil || st.State != sandbox.StateStopped {
		t.Errorf("status after kill: %+v, %v", st, err)
	}
	_, err := c.Info(ctx)
	checkErr(t, err, errdefs.ErrUnavailable)
	if err := r.AppendLog("a", []byte("tail")); err != nil {
		t.Fatal(err)
	}
	logs, err := r.Logs(ctx, "a", 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	want := "fake agent for sandbox a listening\nfake agent for sandbox a stopped\ntail"
	if string(logs) != want {
		t.Errorf("logs %q, want %q", logs, want)
	}
	if logs, _ := r.Logs(ctx, "a", 4); string(logs) != "tail" {
		t.Errorf("last 4 bytes %q", logs)
	}
	checkErr(t, r.Seed(spec("b"), sandbox.StateUnknown), errdefs.ErrInvalidArgument)
	checkErr(t, r.Kill("b"), errdefs.ErrNotFound)
}

func TestRecover(t *testing.T) {
	r := newRuntime(t)
	for id, st := range map[string]sandbox.State{"a": sandbox.StateRunning, "b": sandbox.StateStopped, "c": sandbox.StateCreated} {
		if err := r.Seed(spec(id), st); err != nil {
			t.Fatal(err)
		}
	}
	got, err := r.Recover(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := []sandbox.Status{
		{ID: "a", State: sandbox.StateRunning, Pid: os.Getpid(), Labels: map[string]string{"k": "v"}},
		{ID: "b", State: sandbox.StateStopped, Labels: map[string]string{"k": "v"}},
		{ID: "c", State: sandbox.StateCreated, Labels: map[string]string{"k": "v"}},
	}
	if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(sandbox.Status{}, "CreatedAt")); diff != "" {
		t.Errorf("recover (-want +got):\n%s", diff)
	}
	if calls := r.Calls(); calls != (Calls{Recover: 1}) {
		t.Errorf("calls %+v", calls)
	}
}

func checkErr(t *testing.T, err, class error) {
	t.Helper()
	if !errors.Is(err, class) {
		t.Errorf("error %v, want %v", err, class)
	}
}

// TestConformance runs the contract part of the runtime conformance suite:
// the fake must behave as a runtime does wherever it does not isolate.
func TestConformance(t *testing.T) {
	for _, tc := range []struct {
		name string
		caps *sandbox.Capabilities
	}{
		{name: "all capabilities"},
		{name: "none", caps: &sandbox.Capabilities{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt := newRuntime(t, WithImages(newStoredImages("alpine")))
			if tc.caps != nil {
				rt.SetCapabilities(*tc.caps)
			}
			runtimetest.RunContract(t, runtimetest.Factory{
				// The fake's state is the value itself: a "new" runtime
				// on the same state is the same one.
				New:     func(*testing.T) sandbox.Runtime { return rt },
				NewSpec: func(_ *testing.T, id string) *sandbox.Spec { return spec(id) },
				Kill: func(t *testing.T, _ sandbox.Runtime, id string) {
					if err := rt.Kill(id); err != nil {
						t.Fatal(err)
					}
				},
			})
		})
	}
}

// storedImages is an image store holding some refs; Ensure stores any
// other ref except "missing".
type storedImages struct {
	mu   sync.Mutex
	refs map[string]bool
}

func newStoredImages(refs ...string) *storedImages {
	s := &storedImages{refs: map[string]bool{}}
	for _, r := range refs {
		s.refs[r] = true
	}
	return s
}

func (s *storedImages) Get(ctx context.Context, ref string) (*image.Image, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.refs[ref] {
		return nil, errdefs.NotFound("image %s not found", ref)
	}
	return &image.Image{Ref: ref, Config: image.Config{Env: []string{"FROM_IMAGE=" + ref, "HOME=/root"}}}, nil
}

func (s *storedImages) Ensure(ctx context.Context, ref string, _ image.ProgressFunc) (*image.Image, error) {
	if ref == "missing" {
		return nil, errdefs.NotFound("image %s not found", ref)
	}
	s.mu.Lock()
	s.refs[ref] = true
	s.mu.Unlock()
	return s.Get(ctx, ref)
}

// TestImages checks that images come from the image store, their
// environment under the spec's.
func TestImages(t *testing.T) {
	ctx := context.Background()
	r := newRuntime(t, WithImages(newStoredImages("alpine")))
	sp := spec("a")
	sp.Image = "python"
	if ready, err := r.ImageReady(ctx, "python"); err != nil || ready {
		t.Errorf("ImageReady of an image not stored = %v, %v", ready, err)
	}
	checkErr(t, r.Create(ctx, sp), errdefs.ErrNotFound)
	if ids := r.IDs(); len(ids) != 0 {
		t.Errorf("a failed Create left %v", ids)
	}
	checkErr(t, r.PrepareImage(ctx, "missing"), errdefs.ErrNotFound)
	if err := r.PrepareImage(ctx, "python"); err != nil {
		t.Fatal(err)
	}
	if err := r.Create(ctx, sp); err != nil {
		t.Fatal(err)
	}
	if err := r.Start(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	c, _ := r.Agent(ctx, "a")
	res, out := exec(t, c, agent.ExecRequest{Shell: `echo $FROM_IMAGE $FROM_SPEC $HOME`}, "")
	if res.ExitCode != 0 || out != "python 1 "+sandbox.HomeDir+"\n" {
		t.Errorf("image and spec environment: %+v, %q", res, out)
	}
	want := Calls{ImageReady: 1, PrepareImage: 2, Create: 2, Start: 1, Agent: 1}
	if diff := cmp.Diff(want, r.Calls()); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
}
