package contexts

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/agent"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/image"
	"github.com/agent2env/agent2env/internal/manager"
	"github.com/agent2env/agent2env/internal/metrics"
	"github.com/agent2env/agent2env/internal/metrics/metricstest"
	"github.com/agent2env/agent2env/internal/runtime/fakeruntime"
	"github.com/agent2env/agent2env/internal/sandbox"
	"github.com/agent2env/agent2env/internal/store"
	"github.com/agent2env/agent2env/internal/store/sqlite"
)

// These tests run real in-process agents (package fakeruntime), whose
// reaper waits for every child of the process: nothing here may use
// os/exec. The kernels are the host's python3 (node, bash) run by those
// agents.

// fakeImages knows every image; images have no layers.
type fakeImages struct{}

func (fakeImages) Get(ctx context.Context, ref string) (*image.Image, error) {
	return &image.Image{Ref: ref}, nil
}

func (fakeImages) Ensure(ctx context.Context, ref string, p image.ProgressFunc) (*image.Image, error) {
	return &image.Image{Ref: ref}, nil
}

// interpreterImages are images that run only the interpreters each has:
// an image's PATH is a directory holding a wrapper of each of its
// interpreters (which runs the host's with the host's PATH). Images it
// does not list are unknown.
type interpreterImages map[string]string // normalized ref -> its PATH

// newInterpreterImages makes the PATH directory of each image, given the
// interpreters (python3, node, bash) it has.
func newInterpreterImages(t *testing.T, images map[string][]string) interpreterImages {
	t.Helper()
	out := interpreterImages{}
	for ref, progs := range images {
		dir := filepath.Join(t.TempDir(), "bin")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, prog := range progs {
			host, err := exec.LookPath(prog)
			if err != nil {
				t.Fatalf("the tests need %s on the host: %v", prog, err)
			}
			script := fmt.Sprintf("#!/bin/sh\nPATH=%q exec %q \"$@\"\n", os.Getenv("PATH"), host)
			if err := os.WriteFile(filepath.Join(dir, prog), []byte(script), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		out[ref] = dir
	}
	return out
}

func (im interpreterImages) Get(ctx context.Context, ref string) (*image.Image, error) {
	norm, err := image.Normalize(ref)
	if err != nil {
		return nil, err
	}
	path, ok := im[norm]
	if !ok {
		return nil, errdefs.NotFound("image %s not found", ref)
	}
	return &image.Image{Ref: norm, Config: image.Config{Env: []string{"PATH=" + path}}}, nil
}

func (im interpreterImages) Ensure(ctx context.Context, ref string, p image.ProgressFunc) (*image.Image, error) {
	return im.Get(ctx, ref)
}

// env is the service over a real manager, a fake runtime and a sqlite
// store.
type env struct {
	svc *Service
	m   *manager.Manager
	st  store.Store
	rt  *fakeruntime.Runtime
}

func newEnv(t *testing.T, pool Pool) *env {
	t.Helper()
	return newEnvImages(t, pool, fakeImages{})
}

// newEnvImages is newEnv with an image store of its own.
func newEnvImages(t *testing.T, pool Pool, images manager.Images) *env {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	rt := fakeruntime.New()
	m := manager.New(manager.Config{StartTimeout: 10 * time.Second}, rt, images, st, log)
	svc := New(Config{ReadyTimeout: 10 * time.Second}, m, st, pool, log)
	t.Cleanup(func() {
		m.Close()
		if err := rt.Close(); err != nil {
			t.Errorf("close runtime: %v", err)
		}
		st.Close()
	})
	return &env{svc: svc, m: m, st: st, rt: rt}
}

var bg = context.Background()

func (e *env) create(t *testing.T, req api.CreateContextRequest) *api.Context {
	t.Helper()
	c, err := e.svc.Create(bg, req)
	if err != nil {
		t.Fatalf("create context %+v: %v", req, err)
	}
	return c
}

// sandbox creates a running sandbox through the manager.
func (e *env) sandbox(t *testing.T) *store.Sandbox {
	t.Helper()
	sb, err := e.m.Create(bg, manager.CreateRequest{Image: "agent2env/python"})
	if err != nil {
		t.Fatal(err)
	}
	if sb.Status != string(api.StatusRunning) {
		t.Fatalf("sandbox %s is %s: %s", sb.ID, sb.Status, sb.Reason)
	}
	return sb
}

func (e *env) exec(t *testing.T, id, code string, timeout float64) *api.ExecuteResponse {
	t.Helper()
	resp, err := e.svc.Execute(bg, id, api.ExecuteRequest{Code: code, Timeout: timeout})
	if err != nil {
		t.Fatalf("execute %q: %v", code, err)
	}
	return resp
}

// sandboxes returns the ids of every sandbox record.
func (e *env) sandboxes(t *testing.T) []string {
	t.Helper()
	all, err := e.st.ListSandboxes(bg)
	if err != nil {
		t.Fatal(err)
	}
	ids := []string{}
	for _, sb := range all {
		ids = append(ids, sb.ID)
	}
	return ids
}

// contexts returns the ids of every context record.
func (e *env) contexts(t *testing.T) []string {
	t.Helper()
	all, err := e.st.ListContexts(bg, store.ContextFilter{})
	if err != nil {
		t.Fatal(err)
	}
	ids := []string{}
	for _, c := range all {
		ids = append(ids, c.ID)
	}
	return ids
}

func (e *env) record(t *testing.T, id string) *store.Context {
	t.Helper()
	c, err := e.st.GetContext(bg, id)
	if err != nil {
		t.Fatalf("context record %s: %v", id, err)
	}
	return c
}

// kernels returns the ids of the kernels the agent of sandbox id runs.
func (e *env) kernels(t *testing.T, id string) []string {
	t.Helper()
	ac, err := e.m.Agent(bg, id)
	if err != nil {
		t.Fatal(err)
	}
	ks, err := ac.Kernels(bg)
	if err != nil {
		t.Fatal(err)
	}
	ids := []string{}
	for _, k := range ks {
		ids = append(ids, k.ID)
	}
	slices.Sort(ids)
	return ids
}

func (e *env) sandboxExists(t *testing.T, id string) bool {
	t.Helper()
	_, err := e.m.Get(bg, id)
	if err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatal(err)
	}
	return err == nil
}

// checkErr fails the test unless err is of class and carries code (when
// code is not empty).
func checkErr(t *testing.T, err, class error, code string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want %v (%s)", class, code)
	}
	if class != nil && !errors.Is(err, class) {
		t.Errorf("error %q is not %v", err, class)
	}
	if code != "" && errdefs.Code(err) != code {
		t.Errorf("error %q has code %q, want %q", err, errdefs.Code(err), code)
	}
}

func TestLanguage(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", api.LanguagePython},
		{"python", api.LanguagePython},
		{"python3", api.LanguagePython},
		{"py", api.LanguagePython},
		{" Python ", api.LanguagePython},
		{"javascript", api.LanguageJavaScript},
		{"js", api.LanguageJavaScript},
		{"node", api.LanguageJavaScript},
		{"nodejs", api.LanguageJavaScript},
		{"JS", api.LanguageJavaScript},
		{"bash", api.LanguageBash},
		{"sh", api.LanguageBash},
		{"shell", api.LanguageBash},
		{"bad", ""},
		{"cobol", ""},
		{"python2", ""},
		{"r", ""},
	}
	for _, tt := range tests {
		got, err := Language(tt.in)
		if tt.want == "" {
			if err == nil {
				t.Errorf("Language(%q) = %q, want an error", tt.in, got)
				continue
			}
			if !errors.Is(err, errdefs.ErrInvalidArgument) || errdefs.Code(err) != api.CodeInvalidLanguage {
				t.Errorf("Language(%q): error %v (code %q), want invalid %s", tt.in, err, errdefs.Code(err), api.CodeInvalidLanguage)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("Language(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

func TestNewID(t *testing.T) {
	a, b := NewID(), NewID()
	if a == b || !strings.HasPrefix(a, "ctx-") || len(a) != len("ctx-")+16 {
		t.Errorf("NewID: %q, %q", a, b)
	}
}

func TestSources(t *testing.T) {
	got := Sources(map[string]Source{api.LanguagePython: {Template: "py"}})
	want := map[string]Source{
		api.LanguagePython:     {Template: "py"},
		api.LanguageJavaScript: {Image: "agent2env/code-interpreter"},
		api.LanguageBash:       {Image: "agent2env/code-interpreter"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Sources: %+v, want %+v", got, want)
	}
	if DefaultSources[api.LanguagePython] != (Source{Image: "agent2env/code-interpreter"}) {
		t.Errorf("Sources changed the defaults: %+v", DefaultSources)
	}
}

func TestCreateInvalid(t *testing.T) {
	e := newEnv(t, nil)
	tests := []struct {
		name string
		req  api.CreateContextRequest
		code string
	}{
		{"type", api.CreateContextRequest{Type: "notebook"}, ""},
		{"language", api.CreateContextRequest{Language: "cobol"}, api.CodeInvalidLanguage},
		{"working dir up", api.CreateContextRequest{WorkingDir: "../etc"}, ""},
		{"working dir up inside", api.CreateContextRequest{WorkingDir: "sub/../../x"}, ""},
		{"working dir absolute up", api.CreateContextRequest{WorkingDir: "/workspace/../etc"}, ""},
		{"working dir NUL", api.CreateContextRequest{WorkingDir: "a\x00b"}, ""},
		{"env name with =", api.CreateContextRequest{Env: map[string]string{"A=B": "1"}}, ""},
		{"env empty name", api.CreateContextRequest{Env: map[string]string{"": "1"}}, ""},
		{"env NUL", api.CreateContextRequest{Env: map[string]string{"A": "x\x00y"}}, ""},
		{"env with session", api.CreateContextRequest{SessionName: "s", Env: map[string]string{"A=": "1"}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := e.svc.Create(bg, tt.req)
			if c != nil {
				t.Errorf("Create returned %+v", c)
			}
			checkErr(t, err, errdefs.ErrInvalidArgument, tt.code)
			if ids := e.sandboxes(t); len(ids) != 0 {
				t.Errorf("sandboxes made: %v", ids)
			}
			if ids := e.contexts(t); len(ids) != 0 {
				t.Errorf("contexts made: %v", ids)
			}
		})
	}
}

func TestCreateOwnSandbox(t *testing.T) {
	e := newEnv(t, nil)
	c := e.create(t, api.CreateContextRequest{})
	if !strings.HasPrefix(c.ContextID, "ctx-") || c.Type != api.ContextTypeJupyter || c.Status != api.ContextStatusActive ||
		c.Language != api.LanguagePython || c.WorkingDir != sandbox.WorkDir || c.SandboxID == "" ||
		c.CreatedAt.IsZero() || !c.LastUsedAt.Equal(c.CreatedAt) || c.ExecutionCount != 0 {
		t.Errorf("context %+v", c)
	}
	rec := e.record(t, c.ContextID)
	if !rec.OwnsSandbox || rec.SandboxID != c.SandboxID {
		t.Errorf("record %+v: want it to own sandbox %s", rec, c.SandboxID)
	}
	sb, err := e.m.Get(bg, c.SandboxID)
	if err != nil {
		t.Fatal(err)
	}
	if sb.Status != string(api.StatusRunning) || !strings.Contains(sb.Image, "agent2env/code-interpreter") {
		t.Errorf("sandbox %+v", sb)
	}
	if ks := e.kernels(t, c.SandboxID); !reflect.DeepEqual(ks, []string{c.ContextID}) {
		t.Errorf("kernels %v, want [%s]", ks, c.ContextID)
	}
	got, err := e.svc.Get(bg, c.ContextID)
	if err != nil || !reflect.DeepEqual(got, c) {
		t.Errorf("Get: %+v %v, want %+v", got, err, c)
	}

	if err := e.svc.Delete(bg, c.ContextID); err != nil {
		t.Fatal(err)
	}
	if e.sandboxExists(t, c.SandboxID) {
		t.Error("the context's own sandbox outlived it")
	}
	if ids := e.contexts(t); len(ids) != 0 {
		t.Errorf("contexts left: %v", ids)
	}
	checkErr(t, e.svc.Delete(bg, c.ContextID), errdefs.ErrNotFound, api.CodeContextNotFound)
}

func TestCreateKernelFailsReleasesSandbox(t *testing.T) {
	e := newEnv(t, nil)
	_, err := e.svc.Create(bg, api.CreateContextRequest{WorkingDir: "/nonexistent-a2e-test/dir"})
	if err == nil {
		t.Fatal("a kernel in a missing directory started")
	}
	if ids := e.sandboxes(t); len(ids) != 0 {
		t.Errorf("sandboxes left: %v", ids)
	}
	if ids := e.contexts(t); len(ids) != 0 {
		t.Errorf("contexts left: %v", ids)
	}
}

// TestFailedCreateKeepsSession is the regression test of a defect: a
// context create that failed in an existing session (here the image has no
// interpreter for the language, or the directory is missing) deleted the
// session's sandbox, and with it the other contexts and their state. A
// failed request must change nothing that exists.
func TestFailedCreateKeepsSession(t *testing.T) {
	tests := []struct {
		name string
		req  api.CreateContextRequest
		code string
	}{
		{"no interpreter", api.CreateContextRequest{SessionName: "s1", Language: "javascript",
			Env: map[string]string{"PATH": "/nonexistent-a2e-test"}}, api.CodeLanguageMissing},
		{"missing directory", api.CreateContextRequest{SessionName: "s1", Language: "javascript",
			WorkingDir: "/nonexistent-a2e-test/dir"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, nil)
			py := e.create(t, api.CreateContextRequest{SessionName: "s1", Language: "python"})
			e.exec(t, py.ContextID, "x = 5", 0)
			_, err := e.svc.Create(bg, tt.req)
			checkErr(t, err, nil, tt.code)
			if !e.sandboxExists(t, py.SandboxID) {
				t.Fatal("the failed create deleted the session's sandbox")
			}
			if ids := e.contexts(t); !reflect.DeepEqual(ids, []string{py.ContextID}) {
				t.Errorf("contexts %v, want only [%s]", ids, py.ContextID)
			}
			if r := e.exec(t, py.ContextID, "x", 0); r.Result != "5" || r.StateLost {
				t.Errorf("x after the failed create: %+v", r)
			}
		})
	}
}

// TestSessionMixesLanguages is the regression test of a defect: one
// session could not mix languages, since its sandbox came from the first
// language's image (agent2env/python has no node). The default image of
// every language now has every interpreter.
func TestSessionMixesLanguages(t *testing.T) {
	e := newEnvImages(t, nil, newInterpreterImages(t, map[string][]string{
		"agent2env/python:latest":           {"python3", "bash"},
		"agent2env/node:latest":             {"node", "bash"},
		"agent2env/code-interpreter:latest": {"python3", "node", "bash"},
	}))
	py := e.create(t, api.CreateContextRequest{SessionName: "s1", Language: "python"})
	e.exec(t, py.ContextID, "open('from-python.txt', 'w').write('py')", 0)
	js, err := e.svc.Create(bg, api.CreateContextRequest{SessionName: "s1", Language: "javascript"})
	if err != nil {
		t.Fatalf("javascript context in a python session: %v", err)
	}
	sh := e.create(t, api.CreateContextRequest{SessionName: "s1", Language: "bash"})
	if js.SandboxID != py.SandboxID || sh.SandboxID != py.SandboxID {
		t.Errorf("one session in sandboxes %s, %s, %s", py.SandboxID, js.SandboxID, sh.SandboxID)
	}
	if r := e.exec(t, js.ContextID, "require('fs').readFileSync('from-python.txt', 'utf8')", 0); r.Result != "'py'" {
		t.Errorf("javascript read %+v", r)
	}
	if r := e.exec(t, sh.ContextID, "cat from-python.txt", 0); r.Output.Stdout != "py" {
		t.Errorf("bash read %+v", r)
	}
}

func TestSession(t *testing.T) {
	e := newEnv(t, nil)
	a := e.create(t, api.CreateContextRequest{SessionName: "s1"})
	b := e.create(t, api.CreateContextRequest{SessionName: "s1", Language: "py"})
	other := e.create(t, api.CreateContextRequest{SessionName: "s2"})
	if a.SandboxID != b.SandboxID {
		t.Errorf("one session, two sandboxes: %s, %s", a.SandboxID, b.SandboxID)
	}
	if other.SandboxID == a.SandboxID {
		t.Error("two sessions share a sandbox")
	}
	if a.SessionName != "s1" || !e.record(t, b.ContextID).OwnsSandbox {
		t.Errorf("contexts %+v, %+v", a, e.record(t, b.ContextID))
	}
	// The session's contexts share files.
	e.exec(t, a.ContextID, "open('shared.txt', 'w').write('from a')", 0)
	if r := e.exec(t, b.ContextID, "open('shared.txt').read()", 0); r.Result != "'from a'" {
		t.Errorf("b read %+v", r)
	}
	list, err := e.svc.List(bg, store.ContextFilter{SessionName: "s1"})
	if err != nil || len(list) != 2 || list[0].ContextID != a.ContextID || list[1].ContextID != b.ContextID {
		t.Errorf("List session s1: %+v %v", list, err)
	}

	if err := e.svc.Delete(bg, a.ContextID); err != nil {
		t.Fatal(err)
	}
	if !e.sandboxExists(t, a.SandboxID) {
		t.Fatal("the session's sandbox went with its first context")
	}
	if ks := e.kernels(t, a.SandboxID); !reflect.DeepEqual(ks, []string{b.ContextID}) {
		t.Errorf("kernels %v, want only [%s]", ks, b.ContextID)
	}
	if r := e.exec(t, b.ContextID, "1 + 1", 0); r.Result != "2" {
		t.Errorf("b after a went: %+v", r)
	}
	if err := e.svc.Delete(bg, b.ContextID); err != nil {
		t.Fatal(err)
	}
	if e.sandboxExists(t, a.SandboxID) {
		t.Error("the session's sandbox outlived its last context")
	}
	if !e.sandboxExists(t, other.SandboxID) {
		t.Error("another session's sandbox went")
	}
}

// TestOwnSandboxJoinedByID: a sandbox the service made goes with the last
// context in it, whichever order they are deleted in, also when another
// context was put in it by id.
func TestOwnSandboxJoinedByID(t *testing.T) {
	for _, ownFirst := range []bool{false, true} {
		t.Run(fmt.Sprintf("own deleted first %v", ownFirst), func(t *testing.T) {
			e := newEnv(t, nil)
			own := e.create(t, api.CreateContextRequest{})
			joined := e.create(t, api.CreateContextRequest{SandboxID: own.SandboxID})
			order := []string{joined.ContextID, own.ContextID}
			if ownFirst {
				order = []string{own.ContextID, joined.ContextID}
			}
			if err := e.svc.Delete(bg, order[0]); err != nil {
				t.Fatal(err)
			}
			if !e.sandboxExists(t, own.SandboxID) {
				t.Fatal("the sandbox went while a context was in it")
			}
			if err := e.svc.Delete(bg, order[1]); err != nil {
				t.Fatal(err)
			}
			if e.sandboxExists(t, own.SandboxID) {
				t.Errorf("sandbox %s the service made is left with no context in it", own.SandboxID)
			}
		})
	}
}

func TestSessionConcurrent(t *testing.T) {
	e := newEnv(t, nil)
	const n = 4
	var wg sync.WaitGroup
	got := make([]*api.Context, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], errs[i] = e.svc.Create(bg, api.CreateContextRequest{SessionName: "s"})
		}()
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("create %d: %v", i, errs[i])
		}
		if got[i].SandboxID != got[0].SandboxID {
			t.Errorf("context %d in sandbox %s, context 0 in %s", i, got[i].SandboxID, got[0].SandboxID)
		}
	}
	if ids := e.sandboxes(t); len(ids) != 1 {
		t.Errorf("sandboxes %v, want one", ids)
	}
	if n := e.svc.sessions.Len(); n != 0 {
		t.Errorf("%d session locks kept after the creates ended; want none", n)
	}
}

// TestSessionsConcurrent checks that one session's sandbox being made does
// not hold up another session's.
func TestSessionsConcurrent(t *testing.T) {
	e := newEnv(t, nil)
	first, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	e.rt.SetHooks(fakeruntime.Hooks{Create: func(ctx context.Context, spec *sandbox.Spec) error {
		held := false
		once.Do(func() { held = true })
		if held {
			close(first)
			<-release
		}
		return nil
	}})
	slow := make(chan error, 1)
	go func() {
		_, err := e.svc.Create(bg, api.CreateContextRequest{SessionName: "slow"})
		slow <- err
	}()
	<-first
	other := make(chan error, 1)
	go func() {
		_, err := e.svc.Create(bg, api.CreateContextRequest{SessionName: "other"})
		other <- err
	}()
	select {
	case err := <-other:
		if err != nil {
			t.Errorf("create in another session: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Error("a session waited for another session's sandbox")
	}
	close(release)
	if err := <-slow; err != nil {
		t.Errorf("create in the slow session: %v", err)
	}
	if ids := e.sandboxes(t); len(ids) != 2 {
		t.Errorf("sandboxes %v, want one per session", ids)
	}
}

// TestSessionLocksBounded checks that session names clients choose leave
// nothing behind once their contexts are gone, nor when creates fail (the
// service once kept a lock for every session name it was ever given).
func TestSessionLocksBounded(t *testing.T) {
	e := newEnv(t, nil)
	for i := range 50 {
		_, err := e.svc.Create(bg, api.CreateContextRequest{SessionName: fmt.Sprintf("bogus-%d", i), SandboxID: "nosuch"})
		if !errors.Is(err, errdefs.ErrNotFound) {
			t.Fatalf("create in an unknown sandbox: %v, want not found", err)
		}
	}
	sb := e.sandbox(t)
	var ids []string
	for i := range 5 {
		ids = append(ids, e.create(t, api.CreateContextRequest{SandboxID: sb.ID, SessionName: fmt.Sprintf("s%d", i)}).ContextID)
	}
	for _, id := range ids {
		if err := e.svc.Delete(bg, id); err != nil {
			t.Fatal(err)
		}
	}
	if n := e.svc.sessions.Len(); n != 0 {
		t.Errorf("%d session locks kept; want none", n)
	}
}

// A create that waits for its session gives up when its request does.
func TestSessionWaitCancelled(t *testing.T) {
	e := newEnv(t, nil)
	unlock := e.svc.sessions.Lock("s")
	defer unlock()
	ctx, cancel := context.WithTimeout(bg, 50*time.Millisecond)
	defer cancel()
	if _, err := e.svc.Create(ctx, api.CreateContextRequest{SessionName: "s"}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("create while the session is busy past the deadline: %v, want deadline exceeded", err)
	}
	if ids := e.sandboxes(t); len(ids) != 0 {
		t.Errorf("sandboxes %v made by a create that gave up", ids)
	}
}

func TestNamedSandbox(t *testing.T) {
	e := newEnv(t, nil)
	sb := e.sandbox(t)
	c := e.create(t, api.CreateContextRequest{SandboxID: sb.ID, Language: "python", SessionName: "s"})
	if c.SandboxID != sb.ID || e.record(t, c.ContextID).OwnsSandbox {
		t.Errorf("context %+v (record %+v): want it in %s, not owning it", c, e.record(t, c.ContextID), sb.ID)
	}
	// A context of the same session joins it, without owning it either.
	d := e.create(t, api.CreateContextRequest{SessionName: "s"})
	if d.SandboxID != sb.ID || e.record(t, d.ContextID).OwnsSandbox {
		t.Errorf("session peer %+v: want it in %s, not owning it", d, sb.ID)
	}
	got, err := e.svc.GetIn(bg, sb.ID, c.ContextID)
	if err != nil || got.ContextID != c.ContextID {
		t.Errorf("GetIn: %+v %v", got, err)
	}
	list, err := e.svc.List(bg, store.ContextFilter{SandboxID: sb.ID})
	if err != nil || len(list) != 2 {
		t.Errorf("List in %s: %+v %v", sb.ID, list, err)
	}
	if err := e.svc.DeleteIn(bg, sb.ID, c.ContextID); err != nil {
		t.Fatal(err)
	}
	if err := e.svc.Delete(bg, d.ContextID); err != nil {
		t.Fatal(err)
	}
	if !e.sandboxExists(t, sb.ID) {
		t.Fatal("deleting contexts deleted the sandbox they were put in")
	}
	if ks := e.kernels(t, sb.ID); len(ks) != 0 {
		t.Errorf("kernels left: %v", ks)
	}
}

func TestCreateUnknownSandbox(t *testing.T) {
	e := newEnv(t, nil)
	_, err := e.svc.Create(bg, api.CreateContextRequest{SandboxID: "nosuchsandbox"})
	checkErr(t, err, errdefs.ErrNotFound, api.CodeSandboxNotFound)
	if ids := e.contexts(t); len(ids) != 0 {
		t.Errorf("contexts made: %v", ids)
	}
	_, err = e.svc.List(bg, store.ContextFilter{SandboxID: "nosuchsandbox"})
	checkErr(t, err, errdefs.ErrNotFound, api.CodeSandboxNotFound)
}

func TestNotInSandbox(t *testing.T) {
	e := newEnv(t, nil)
	a, b := e.sandbox(t), e.sandbox(t)
	c := e.create(t, api.CreateContextRequest{SandboxID: a.ID})
	req := api.ExecuteRequest{Code: "1"}
	tests := []struct {
		name string
		err  func() error
		code string
	}{
		{"GetIn other", func() error { _, err := e.svc.GetIn(bg, b.ID, c.ContextID); return err }, api.CodeContextNotFound},
		{"DeleteIn other", func() error { return e.svc.DeleteIn(bg, b.ID, c.ContextID) }, api.CodeContextNotFound},
		{"ExecuteIn other", func() error { _, err := e.svc.ExecuteIn(bg, b.ID, c.ContextID, req); return err }, api.CodeContextNotFound},
		{"Stream other", func() error { _, err := e.svc.Stream(bg, b.ID, c.ContextID, req); return err }, api.CodeContextNotFound},
		{"GetIn unknown sandbox", func() error { _, err := e.svc.GetIn(bg, "nosuchsandbox", c.ContextID); return err }, api.CodeSandboxNotFound},
		{"DeleteIn unknown sandbox", func() error { return e.svc.DeleteIn(bg, "nosuchsandbox", c.ContextID) }, api.CodeSandboxNotFound},
		{"Get unknown", func() error { _, err := e.svc.Get(bg, "ctx-nosuch"); return err }, api.CodeContextNotFound},
		{"GetIn unknown", func() error { _, err := e.svc.GetIn(bg, a.ID, "ctx-nosuch"); return err }, api.CodeContextNotFound},
		{"Delete unknown", func() error { return e.svc.Delete(bg, "ctx-nosuch") }, api.CodeContextNotFound},
		{"DeleteIn unknown", func() error { return e.svc.DeleteIn(bg, a.ID, "ctx-nosuch") }, api.CodeContextNotFound},
		{"Execute unknown", func() error { _, err := e.svc.Execute(bg, "ctx-nosuch", req); return err }, api.CodeContextNotFound},
		{"Stream unknown", func() error { _, err := e.svc.Stream(bg, "", "ctx-nosuch", req); return err }, api.CodeContextNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkErr(t, tt.err(), errdefs.ErrNotFound, tt.code)
		})
	}
	// The context is still there, in its sandbox.
	if got, err := e.svc.GetIn(bg, a.ID, c.ContextID); err != nil || got.SandboxID != a.ID {
		t.Errorf("GetIn own sandbox: %+v %v", got, err)
	}
	if got, err := e.svc.Get(bg, c.ContextID); err != nil || got.ContextID != c.ContextID {
		t.Errorf("Get: %+v %v", got, err)
	}
	if r, err := e.svc.ExecuteIn(bg, a.ID, c.ContextID, api.ExecuteRequest{Code: "6 * 7"}); err != nil || r.Result != "42" {
		t.Errorf("ExecuteIn own sandbox: %+v %v", r, err)
	}
}

func TestListAndMetrics(t *testing.T) {
	e := newEnv(t, nil)
	sb := e.sandbox(t)
	a := e.create(t, api.CreateContextRequest{SandboxID: sb.ID})
	b := e.create(t, api.CreateContextRequest{SandboxID: sb.ID, SessionName: "s"})
	list, err := e.svc.List(bg, store.ContextFilter{})
	if err != nil || len(list) != 2 || list[0].ContextID != a.ContextID || list[1].ContextID != b.ContextID {
		t.Errorf("List: %+v %v", list, err)
	}
	list, err = e.svc.List(bg, store.ContextFilter{SessionName: "nosuch"})
	if err != nil || list == nil || len(list) != 0 {
		t.Errorf("List of no session: %#v %v", list, err)
	}
	want := "# HELP agent2env_contexts Code-interpreter contexts.\n# TYPE agent2env_contexts gauge\nagent2env_contexts 2\n"
	if err := testutil.CollectAndCompare(e.svc, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}

// TestExecutionMetrics: every execution is observed once, under the
// context's language and its outcome.
func TestExecutionMetrics(t *testing.T) {
	e := newEnv(t, nil)
	mt := metrics.New()
	e.svc.metrics = mt
	c := e.create(t, api.CreateContextRequest{})
	for _, code := range []string{"1", "2", "1/0", "import time\ntime.sleep(20)"} {
		e.exec(t, c.ContextID, code, 0.3)
	}
	if _, err := e.m.Stop(bg, c.SandboxID); err != nil {
		t.Fatal(err)
	}
	if r := e.exec(t, c.ContextID, "1", 0); r.Error == nil || r.Error.Name != api.ErrorNameSandboxGone {
		t.Errorf("execute in a stopped sandbox: %+v, want %s", r.Error, api.ErrorNameSandboxGone)
	}
	got := metricstest.Observations(t, mt, "agent2env_context_execution_duration_seconds")
	want := map[string]uint64{
		"language=python,outcome=ok":         2,
		"language=python,outcome=code_error": 1,
		"language=python,outcome=timeout":    1,
		"language=python,outcome=error":      1,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("executions by labels (-want +got):\n%s", diff)
	}
}

func TestExecute(t *testing.T) {
	e := newEnv(t, nil)
	c := e.create(t, api.CreateContextRequest{})
	tests := []struct {
		code      string
		timeout   float64
		stdout    string
		stderr    string // must contain
		result    string
		errName   string
		errKind   string
		errTB     string // traceback must contain
		nResults  int
		firstHTML string
	}{
		{code: "x = 41"},
		{code: "print('hi', x + 1)\nx + 1", stdout: "hi 42\n", result: "42", nResults: 1},
		{code: "import sys\nprint('oops', file=sys.stderr)", stderr: "oops\n"},
		{code: "print('héllo 世界 🎉')", stdout: "héllo 世界 🎉\n"},
		{code: "def f():\n    return 1/0\nf()", errName: "ZeroDivisionError", errKind: api.ErrorKindRuntime, errTB: "1/0"},
		{code: "def broken(:\n    pass", errName: "SyntaxError", errKind: api.ErrorKindSyntax},
		{code: "import time\ntime.sleep(20)", timeout: 0.3, errName: api.ErrorNameTimeout, errKind: api.ErrorKindSystem},
		{code: "x", result: "41", nResults: 1}, // state survived the timeout
		{code: "class H:\n    def _repr_html_(self):\n        return '<b>hi</b>'\ndisplay(H())\n7", result: "7", nResults: 2, firstHTML: "<b>hi</b>"},
	}
	for i, tt := range tests {
		where := fmt.Sprintf("step %d %q", i, tt.code)
		start := time.Now()
		r := e.exec(t, c.ContextID, tt.code, tt.timeout)
		if r.ContextID != c.ContextID || r.ExecutionCount != i+1 || r.StateLost || r.Truncated {
			t.Errorf("%s: response %+v, want execution %d", where, r, i+1)
		}
		if r.Results == nil {
			t.Errorf("%s: results nil, want []", where)
		}
		if r.ExecutionTime <= 0 || r.ExecutionTime > time.Since(start).Seconds() {
			t.Errorf("%s: execution time %v", where, r.ExecutionTime)
		}
		if tt.errName != "" {
			if r.Success || r.Error == nil || r.Error.Name != tt.errName || r.Error.Kind != tt.errKind {
				t.Errorf("%s: success %v, error %+v, want %s (%s)", where, r.Success, r.Error, tt.errName, tt.errKind)
			} else if !strings.Contains(r.Error.Traceback, tt.errTB) {
				t.Errorf("%s: traceback %q lacks %q", where, r.Error.Traceback, tt.errTB)
			}
			continue
		}
		if !r.Success || r.Error != nil {
			t.Errorf("%s: success %v, error %+v", where, r.Success, r.Error)
		}
		if r.Output.Stdout != tt.stdout || !strings.Contains(r.Output.Stderr, tt.stderr) {
			t.Errorf("%s: output %+v, want stdout %q, stderr with %q", where, r.Output, tt.stdout, tt.stderr)
		}
		if r.Result != tt.result || len(r.Results) != tt.nResults {
			t.Errorf("%s: result %q, results %+v; want %q, %d results", where, r.Result, r.Results, tt.result, tt.nResults)
			continue
		}
		if tt.result != "" {
			last := r.Results[len(r.Results)-1]
			if !last.IsMainResult || last.Text != tt.result {
				t.Errorf("%s: last result %+v, want the main one", where, last)
			}
			for _, other := range r.Results[:len(r.Results)-1] {
				if other.IsMainResult {
					t.Errorf("%s: display %+v marked main", where, other)
				}
			}
		}
		if tt.firstHTML != "" && r.Results[0].HTML != tt.firstHTML {
			t.Errorf("%s: display %+v, want html %q", where, r.Results[0], tt.firstHTML)
		}
	}
	got, err := e.svc.Get(bg, c.ContextID)
	if err != nil {
		t.Fatal(err)
	}
	if got.ExecutionCount != len(tests) || !got.LastUsedAt.After(c.CreatedAt) {
		t.Errorf("context after %d executions: %+v", len(tests), got)
	}
	if rec := e.record(t, c.ContextID); rec.ExecutionCount != len(tests) {
		t.Errorf("record count %d, want %d", rec.ExecutionCount, len(tests))
	}
}

func TestExecuteInvalid(t *testing.T) {
	tests := []struct {
		name string
		req  api.ExecuteRequest
	}{
		{"no code", api.ExecuteRequest{}},
		{"NUL", api.ExecuteRequest{Code: "1\x00"}},
		{"negative timeout", api.ExecuteRequest{Code: "1", Timeout: -1}},
		{"NaN timeout", api.ExecuteRequest{Code: "1", Timeout: math.NaN()}},
		{"infinite timeout", api.ExecuteRequest{Code: "1", Timeout: math.Inf(1)}},
		{"timeout too long", api.ExecuteRequest{Code: "1", Timeout: MaxTimeout.Seconds() + 1}},
		{"code too long", api.ExecuteRequest{Code: strings.Repeat("#", MaxCodeBytes+1)}},
	}
	for _, tt := range tests {
		if _, err := execRequest(tt.req, 0); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("%s: %v, want invalid", tt.name, err)
		}
	}
	// Defaults and conversions.
	r, err := execRequest(api.ExecuteRequest{Code: "1"}, 7)
	if err != nil || r.Timeout != DefaultTimeout || r.OutputLimit != 7 || r.Code != "1" {
		t.Errorf("execRequest default: %+v %v", r, err)
	}
	if r, err := execRequest(api.ExecuteRequest{Code: "1", Timeout: 1.5}, 0); err != nil || r.Timeout != 1500*time.Millisecond {
		t.Errorf("execRequest 1.5s: %+v %v", r, err)
	}
	if _, err := execRequest(api.ExecuteRequest{Code: "1", Timeout: MaxTimeout.Seconds()}, 0); err != nil {
		t.Errorf("execRequest max timeout: %v", err)
	}

	e := newEnv(t, nil)
	c := e.create(t, api.CreateContextRequest{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.svc.Execute(bg, c.ContextID, tt.req)
			checkErr(t, err, errdefs.ErrInvalidArgument, "")
			_, err = e.svc.Stream(bg, "", c.ContextID, tt.req)
			checkErr(t, err, errdefs.ErrInvalidArgument, "")
		})
	}
	if rec := e.record(t, c.ContextID); rec.ExecutionCount != 0 {
		t.Errorf("invalid requests counted: %d", rec.ExecutionCount)
	}
}

func TestExecuteSandboxDeleted(t *testing.T) {
	e := newEnv(t, nil)
	c := e.create(t, api.CreateContextRequest{})
	if err := e.m.Delete(bg, c.SandboxID); err != nil {
		t.Fatal(err)
	}
	_, err := e.svc.Execute(bg, c.ContextID, api.ExecuteRequest{Code: "1"})
	checkErr(t, err, errdefs.ErrNotFound, api.CodeContextNotFound)
	_, err = e.svc.Get(bg, c.ContextID)
	checkErr(t, err, errdefs.ErrNotFound, api.CodeContextNotFound)
	checkErr(t, e.svc.Delete(bg, c.ContextID), errdefs.ErrNotFound, api.CodeContextNotFound)
	if ids := e.contexts(t); len(ids) != 0 {
		t.Errorf("context records outlived their sandbox: %v", ids)
	}
}

func TestExecuteSandboxStopped(t *testing.T) {
	e := newEnv(t, nil)
	c := e.create(t, api.CreateContextRequest{})
	if _, err := e.m.Stop(bg, c.SandboxID); err != nil {
		t.Fatal(err)
	}
	r, err := e.svc.Execute(bg, c.ContextID, api.ExecuteRequest{Code: "1"})
	if err != nil {
		t.Fatalf("execute in a stopped sandbox: %v, want a response", err)
	}
	if r.Success || r.Error == nil || r.Error.Name != api.ErrorNameSandboxGone || r.Error.Kind != api.ErrorKindSystem || r.Error.Value == "" {
		t.Errorf("response %+v (error %+v), want SandboxGone", r, r.Error)
	}
	if r.ContextID != c.ContextID || r.Results == nil {
		t.Errorf("response %+v", r)
	}
	// The stream form says the same.
	run, err := e.svc.Stream(bg, "", c.ContextID, api.ExecuteRequest{Code: "1"})
	if err != nil {
		t.Fatal(err)
	}
	rs := &recSink{}
	r, err = run(bg, rs)
	if err != nil || r.Error == nil || r.Error.Name != api.ErrorNameSandboxGone {
		t.Errorf("stream in a stopped sandbox: %+v %v", r, err)
	}
	// The context (and its own sandbox) can still be deleted.
	if err := e.svc.Delete(bg, c.ContextID); err != nil {
		t.Fatal(err)
	}
	if e.sandboxExists(t, c.SandboxID) {
		t.Error("the stopped own sandbox outlived its context")
	}
}

func TestKernelLost(t *testing.T) {
	e := newEnv(t, nil)
	c := e.create(t, api.CreateContextRequest{Env: map[string]string{"A2E_TEST": "kept"}})
	e.exec(t, c.ContextID, "x = 1", 0)
	ac, err := e.m.Agent(bg, c.SandboxID)
	if err != nil {
		t.Fatal(err)
	}
	if err := ac.DeleteKernel(bg, c.ContextID); err != nil {
		t.Fatal(err)
	}
	r := e.exec(t, c.ContextID, "import os\n('x' in globals(), os.environ.get('A2E_TEST'), os.getcwd().endswith('/workspace') or os.getcwd())", 0)
	if !r.StateLost || r.Error != nil || !strings.HasPrefix(r.Result, "(False, 'kept', ") {
		t.Errorf("after the kernel went: %+v (error %+v), want state lost, same env", r, r.Error)
	}
	if r.ExecutionCount != 2 {
		t.Errorf("execution count %d, want 2", r.ExecutionCount)
	}
	r = e.exec(t, c.ContextID, "1", 0)
	if r.StateLost || r.Result != "1" {
		t.Errorf("next execution: %+v", r)
	}
	if ks := e.kernels(t, c.SandboxID); !reflect.DeepEqual(ks, []string{c.ContextID}) {
		t.Errorf("kernels %v, want [%s]", ks, c.ContextID)
	}
}

// recSink records what a Sink is given, in order.
type recSink struct {
	mu     sync.Mutex
	events []string // "stdout:text", "stderr:text", "result:text"
	stdout strings.Builder
	stderr strings.Builder
	res    []api.ExecutionResult
	fail   error // returned by every call
}

func (s *recSink) Stdout(text string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = append(s.events, "stdout:"+text)
	s.stdout.WriteString(text)
	return s.fail
}

func (s *recSink) Stderr(text string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = append(s.events, "stderr:"+text)
	s.stderr.WriteString(text)
	return s.fail
}

func (s *recSink) Result(r api.ExecutionResult) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = append(s.events, "result:"+r.Text)
	s.res = append(s.res, r)
	return s.fail
}

// joinOutput joins the stdout (stderr) events in a row.
func joinOutput(events []string) []string {
	var out []string
	for _, ev := range events {
		if n := len(out); n > 0 && !strings.HasPrefix(ev, "result:") {
			kind, _, _ := strings.Cut(ev, ":")
			if strings.HasPrefix(out[n-1], kind+":") {
				out[n-1] += strings.TrimPrefix(ev, kind+":")
				continue
			}
		}
		out = append(out, ev)
	}
	return out
}

func TestStream(t *testing.T) {
	e := newEnv(t, nil)
	c := e.create(t, api.CreateContextRequest{})
	// Pauses between outputs of different streams keep their order.
	code := `import sys, time
print('out1')
time.sleep(0.15)
print('err1', file=sys.stderr)
time.sleep(0.15)
display(123)
time.sleep(0.15)
print('out2')
time.sleep(0.15)
1 + 1`
	req := api.ExecuteRequest{Code: code}
	run, err := e.svc.Stream(bg, "", c.ContextID, req)
	if err != nil {
		t.Fatal(err)
	}
	sink := &recSink{}
	got, err := run(bg, sink)
	if err != nil {
		t.Fatal(err)
	}
	// Output may come in any number of chunks: join those in a row.
	want := []string{"stdout:out1\n", "stderr:err1\n", "result:123", "stdout:out2\n", "result:2"}
	if got := joinOutput(sink.events); !reflect.DeepEqual(got, want) {
		t.Errorf("sink got %q, want %q", sink.events, want)
	}
	if sink.stdout.String() != got.Output.Stdout || sink.stderr.String() != got.Output.Stderr {
		t.Errorf("streamed %q/%q, response %+v", sink.stdout.String(), sink.stderr.String(), got.Output)
	}
	if !reflect.DeepEqual(sink.res, got.Results) {
		t.Errorf("streamed results %+v, response %+v", sink.res, got.Results)
	}
	if got.ExecutionCount != 1 {
		t.Errorf("stream execution count %d", got.ExecutionCount)
	}

	// Execute gives the same response (but for time and count).
	exe := e.exec(t, c.ContextID, code, 0)
	if exe.ExecutionCount != 2 {
		t.Errorf("execute execution count %d", exe.ExecutionCount)
	}
	got.ExecutionTime, exe.ExecutionTime = 0, 0
	got.ExecutionCount, exe.ExecutionCount = 0, 0
	if !reflect.DeepEqual(got, exe) {
		t.Errorf("stream response %+v\nexecute response %+v", got, exe)
	}

	// In the context's sandbox, and errors.
	run, err = e.svc.Stream(bg, c.SandboxID, c.ContextID, api.ExecuteRequest{Code: "raise ValueError('bad')"})
	if err != nil {
		t.Fatal(err)
	}
	sink = &recSink{}
	got, err = run(bg, sink)
	if err != nil || got.Success || got.Error == nil || got.Error.Name != "ValueError" || got.Error.Value != "bad" || got.Error.Kind != api.ErrorKindRuntime {
		t.Errorf("stream of an error: %+v (error %+v) %v", got, got.Error, err)
	}
	if len(sink.events) != 0 {
		t.Errorf("sink got %q for an error", sink.events)
	}
}

func TestStreamSinkFails(t *testing.T) {
	e := newEnv(t, nil)
	c := e.create(t, api.CreateContextRequest{})
	gone := errors.New("client gone")
	for _, code := range []string{"print('x')", "import sys\nprint('x', file=sys.stderr)", "display(1)", "1"} {
		run, err := e.svc.Stream(bg, "", c.ContextID, api.ExecuteRequest{Code: code})
		if err != nil {
			t.Fatal(err)
		}
		sink := &recSink{fail: gone}
		if r, err := run(bg, sink); !errors.Is(err, gone) {
			t.Errorf("%q: %+v %v, want the sink's error", code, r, err)
		}
	}
	// The context still works.
	if r := e.exec(t, c.ContextID, "2", 0); r.Result != "2" {
		t.Errorf("after failed sinks: %+v", r)
	}
}

func TestCollector(t *testing.T) {
	type chunk struct {
		stream int
		b      string
	}
	tests := []struct {
		name   string
		chunks []chunk
		want   []string // sink calls, "stdout:" or "stderr:" text
	}{
		{"whole", []chunk{{0, "héllo"}}, []string{"stdout:héllo"}},
		{"cut inside é", []chunk{{0, "h\xc3"}, {0, "\xa9llo"}}, []string{"stdout:h", "stdout:éllo"}},
		{"only the first byte", []chunk{{0, "\xc3"}, {0, "\xa9"}}, []string{"stdout:é"}},
		{"emoji in three", []chunk{{0, "a\xf0\x9f"}, {0, "\x8e"}, {0, "\x89b"}}, []string{"stdout:a", "stdout:🎉b"}},
		{"emoji last byte", []chunk{{0, "\xf0\x9f\x8e"}, {0, "\x89"}}, []string{"stdout:🎉"}},
		{"cjk", []chunk{{1, "世\xe7"}, {1, "\x95"}, {1, "\x8c"}}, []string{"stderr:世", "stderr:界"}},
		{"invalid byte", []chunk{{0, "a\xffb"}}, []string{"stdout:a\uFFFDb"}},
		{"invalid at the end", []chunk{{0, "a\xff"}}, []string{"stdout:a\uFFFD"}},
		{"stray continuation", []chunk{{0, "a\xa9"}, {0, "b"}}, []string{"stdout:a\uFFFD", "stdout:b"}},
		{"bad continuation", []chunk{{0, "\xc3"}, {0, "("}}, []string{"stdout:\uFFFD("}},
		{"left incomplete", []chunk{{0, "ok\xe4\xb8"}}, []string{"stdout:ok", "stdout:\uFFFD"}},
		{"streams apart", []chunk{{0, "\xc3"}, {1, "\xc3"}, {1, "\xa9"}, {0, "\xa9"}}, []string{"stderr:é", "stdout:é"}},
		{"empty chunk", []chunk{{0, ""}, {0, "x"}}, []string{"stdout:x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sink := &recSink{}
			col := &collector{sink: sink}
			for _, ch := range tt.chunks {
				f := col.stdoutBytes
				if ch.stream == 1 {
					f = col.stderrBytes
				}
				if err := f([]byte(ch.b)); err != nil {
					t.Fatal(err)
				}
			}
			col.flush()
			if !reflect.DeepEqual(sink.events, tt.want) {
				t.Errorf("sink got %q, want %q", sink.events, tt.want)
			}
			for _, ev := range sink.events {
				if !utf8.ValidString(ev) {
					t.Errorf("sink got invalid UTF-8 %q", ev)
				}
			}
			if col.stdout.String() != sink.stdout.String() || col.stderr.String() != sink.stderr.String() {
				t.Errorf("kept %q/%q, streamed %q/%q", col.stdout.String(), col.stderr.String(), sink.stdout.String(), sink.stderr.String())
			}
		})
	}

	// Byte by byte, every call is whole characters.
	text := "héllo 世界 🎉 ok"
	sink := &recSink{}
	col := &collector{sink: sink}
	for i := range len(text) {
		_ = col.stdoutBytes([]byte{text[i]})
	}
	col.flush()
	if sink.stdout.String() != text || col.stdout.String() != text {
		t.Errorf("byte by byte: %q", sink.stdout.String())
	}
	for _, ev := range sink.events {
		if !utf8.ValidString(ev) || strings.ContainsRune(ev, utf8.RuneError) {
			t.Errorf("byte by byte: sink got %q", ev)
		}
	}

	// Without a sink it only collects; the sink's first error is kept and
	// nothing more is sent.
	col = &collector{}
	_ = col.stdoutBytes([]byte("a"))
	_ = col.display(map[string]any{"text/plain": "1"})
	if col.stdout.String() != "a" || len(col.results) != 1 {
		t.Errorf("without a sink: %q %+v", col.stdout.String(), col.results)
	}
	gone := errors.New("gone")
	sink = &recSink{fail: gone}
	col = &collector{sink: sink}
	_ = col.stdoutBytes([]byte("a"))
	_ = col.stderrBytes([]byte("b"))
	if !errors.Is(col.err, gone) || len(sink.events) != 1 || col.stderr.String() != "b" {
		t.Errorf("after a sink error: err %v, sink %q, stderr %q", col.err, sink.events, col.stderr.String())
	}
}

func TestToResult(t *testing.T) {
	got := toResult(map[string]any{
		"text/plain": "t", "text/html": "h", "text/markdown": "m", "image/svg+xml": "s", "image/png": "p",
		"image/jpeg": "j", "text/latex": "l", "application/javascript": "js", "application/json": map[string]any{"a": 1.0},
		"text/other": "ignored",
	})
	want := api.ExecutionResult{Text: "t", HTML: "h", Markdown: "m", SVG: "s", PNG: "p", JPEG: "j", LaTeX: "l",
		JavaScript: "js", JSON: map[string]any{"a": 1.0}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("toResult: %+v, want %+v", got, want)
	}
	if got := toResult(map[string]any{"text/plain": 5}); got.Text != "" {
		t.Errorf("non-string text: %+v", got)
	}
}

// fakePool hands out one warm sandbox, recording the sources asked for.
type fakePool struct {
	mu      sync.Mutex
	warm    *Warm
	sources []string
}

func (p *fakePool) Take(ctx context.Context, source string) (Warm, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sources = append(p.sources, source)
	if p.warm == nil {
		return Warm{}, false
	}
	w := *p.warm
	p.warm = nil
	return w, true
}

func TestWarmPool(t *testing.T) {
	tests := []struct {
		name      string
		req       api.CreateContextRequest
		warmLang  string // the language the pool says its kernel is
		noKernel  bool   // the warm sandbox has no kernel
		empty     bool   // the pool has none
		source    string
		adopt     bool
		checkCode string // runs in the context; its result must be checkWant
		checkWant string
	}{
		{name: "matching", req: api.CreateContextRequest{}, warmLang: "python", source: "python", adopt: true},
		{name: "alias", req: api.CreateContextRequest{Language: "py", WorkingDir: sandbox.WorkDir}, warmLang: "python", source: "python", adopt: true},
		{name: "template", req: api.CreateContextRequest{Template: "web"}, warmLang: "python", source: "web", adopt: true},
		{name: "other language", req: api.CreateContextRequest{Language: "python"}, warmLang: "javascript", source: "python"},
		{name: "env", req: api.CreateContextRequest{Env: map[string]string{"A2E": "set"}}, warmLang: "python", source: "python",
			checkCode: "import os\nos.environ.get('A2E')", checkWant: "'set'"},
		{name: "working dir", req: api.CreateContextRequest{WorkingDir: "/tmp"}, warmLang: "python", source: "python",
			checkCode: "import os\nos.getcwd()", checkWant: "'/tmp'"},
		{name: "no kernel", req: api.CreateContextRequest{}, noKernel: true, source: "python"},
		{name: "empty pool", req: api.CreateContextRequest{}, empty: true, source: "python"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pool := &fakePool{}
			e := newEnv(t, pool)
			warm := e.sandbox(t)
			kernel := ""
			if !tt.noKernel {
				kernel = NewID()
				ac, err := e.m.Agent(bg, warm.ID)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := ac.CreateKernel(bg, agent.KernelSpec{ID: kernel, Language: "python", Cwd: sandbox.WorkDir}); err != nil {
					t.Fatal(err)
				}
			}
			if !tt.empty {
				pool.warm = &Warm{Sandbox: warm, KernelID: kernel, Language: tt.warmLang}
			}

			c := e.create(t, tt.req)
			if !reflect.DeepEqual(pool.sources, []string{tt.source}) {
				t.Errorf("pool asked for %q, want [%q]", pool.sources, tt.source)
			}
			if tt.empty {
				if c.SandboxID == warm.ID {
					t.Fatal("an empty pool gave a sandbox")
				}
			} else if c.SandboxID != warm.ID || !e.record(t, c.ContextID).OwnsSandbox {
				t.Fatalf("context %+v: want it in the warm sandbox %s, owning it", c, warm.ID)
			}
			if adopted := c.ContextID == kernel; adopted != tt.adopt {
				t.Errorf("context %s, warm kernel %s: adopted %v, want %v", c.ContextID, kernel, adopted, tt.adopt)
			}
			if !tt.empty {
				// Only the context's kernel runs: a warm one not adopted is stopped.
				if ks := e.kernels(t, warm.ID); !reflect.DeepEqual(ks, []string{c.ContextID}) {
					t.Errorf("kernels %v, want [%s]", ks, c.ContextID)
				}
			}
			if r := e.exec(t, c.ContextID, "21 * 2", 0); r.Result != "42" || r.StateLost {
				t.Errorf("execute: %+v", r)
			}
			if tt.checkCode != "" {
				if r := e.exec(t, c.ContextID, tt.checkCode, 0); r.Result != tt.checkWant {
					t.Errorf("%q: %+v (error %+v), want %s", tt.checkCode, r, r.Error, tt.checkWant)
				}
			}
			if err := e.svc.Delete(bg, c.ContextID); err != nil {
				t.Fatal(err)
			}
			if e.sandboxExists(t, c.SandboxID) {
				t.Error("the sandbox provided for the context outlived it")
			}
		})
	}
}

// TestLanguages runs each language's kernel (it needs the drivers in
// internal/agent/kernels and the host's python3, node and bash).
func TestLanguages(t *testing.T) {
	e := newEnv(t, nil)
	sb := e.sandbox(t)
	tests := []struct {
		lang, code, stdout, result string
	}{
		{"python", "print('hi')\n1 + 1", "hi\n", "2"},
		{"js", "console.log('hi'); 1 + 1", "hi\n", "2"},
		{"sh", "echo hi", "hi\n", ""},
	}
	for _, tt := range tests {
		t.Run(tt.lang, func(t *testing.T) {
			c, err := e.svc.Create(bg, api.CreateContextRequest{Language: tt.lang, SandboxID: sb.ID})
			if err != nil {
				t.Fatal(err)
			}
			r := e.exec(t, c.ContextID, tt.code, 0)
			if !r.Success || r.Output.Stdout != tt.stdout || r.Result != tt.result {
				t.Errorf("%s %q: %+v (error %+v)", c.Language, tt.code, r, r.Error)
			}
		})
	}
}
