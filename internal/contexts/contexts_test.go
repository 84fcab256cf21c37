package contexts

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
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
	"github.com/agent2env/agent2env/internal/auth"
	"github.com/agent2env/agent2env/internal/contexts/contextstest"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/manager"
	"github.com/agent2env/agent2env/internal/metrics"
	"github.com/agent2env/agent2env/internal/metrics/metricstest"
	"github.com/agent2env/agent2env/internal/outbuf"
	"github.com/agent2env/agent2env/internal/sandbox"
	"github.com/agent2env/agent2env/internal/store"
)

// These tests run real in-process agents (package fakeruntime), whose
// reaper waits for every child of the process: nothing here may use
// os/exec. The kernels are the host's python3 (node, bash) run by those
// agents.

// env is the service over a real manager, a fake runtime and a sqlite
// store.
type env struct {
	*contextstest.Env
	svc *Service
}

func newEnv(t *testing.T, pool Pool) *env {
	t.Helper()
	ce := contextstest.NewEnv(t, manager.Config{}, nil)
	svc := New(Config{ReadyTimeout: 10 * time.Second}, ce.M, ce.St, pool, slog.New(slog.DiscardHandler))
	return &env{Env: ce, svc: svc}
}

var bg = context.Background()

var checkErr = contextstest.CheckErr

func (e *env) create(t *testing.T, req api.CreateContextRequest) *api.Context {
	t.Helper()
	c, err := e.svc.Create(bg, req)
	if err != nil {
		t.Fatalf("create context %+v: %v", req, err)
	}
	return c
}

func (e *env) exec(t *testing.T, id, code string, timeout float64) *api.ExecuteResponse {
	t.Helper()
	resp, err := e.svc.Execute(bg, id, api.ExecuteRequest{Code: code, Timeout: timeout})
	if err != nil {
		t.Fatalf("execute %q: %v", code, err)
	}
	resp.Release()
	return resp.ExecuteResponse
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
		{"name NUL", api.CreateContextRequest{Name: "a\x00b"}, ""},
		{"description NUL", api.CreateContextRequest{Description: "a\x00b"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := e.svc.Create(bg, tt.req)
			if c != nil {
				t.Errorf("Create returned %+v", c)
			}
			checkErr(t, err, errdefs.ErrInvalidArgument, tt.code)
			if ids := e.Sandboxes(t); len(ids) != 0 {
				t.Errorf("sandboxes made: %v", ids)
			}
			if ids := e.Contexts(t); len(ids) != 0 {
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
	rec := e.Context(t, c.ContextID)
	if !rec.OwnsSandbox || rec.SandboxID != c.SandboxID {
		t.Errorf("record %+v: want it to own sandbox %s", rec, c.SandboxID)
	}
	sb, err := e.M.Get(bg, c.SandboxID)
	if err != nil {
		t.Fatal(err)
	}
	if sb.Status != string(api.StatusRunning) || !strings.Contains(sb.Image, "agent2env/code-interpreter") {
		t.Errorf("sandbox %+v", sb)
	}
	if ks := e.Kernels(t, c.SandboxID); !reflect.DeepEqual(ks, []string{c.ContextID}) {
		t.Errorf("kernels %v, want [%s]", ks, c.ContextID)
	}
	got, err := e.svc.Get(bg, c.ContextID)
	if err != nil || !reflect.DeepEqual(got, c) {
		t.Errorf("Get: %+v %v, want %+v", got, err, c)
	}

	if err := e.svc.Delete(bg, c.ContextID); err != nil {
		t.Fatal(err)
	}
	if e.SandboxExists(t, c.SandboxID) {
		t.Error("the context's own sandbox outlived it")
	}
	if ids := e.Contexts(t); len(ids) != 0 {
		t.Errorf("contexts left: %v", ids)
	}
	checkErr(t, e.svc.Delete(bg, c.ContextID), errdefs.ErrNotFound, api.CodeContextNotFound)
}

// A working directory that does not exist is the caller's error, and
// says which; the sandbox made for the context goes.
func TestCreateKernelFailsReleasesSandbox(t *testing.T) {
	e := newEnv(t, nil)
	const dir = "/nonexistent-a2e-test/dir"
	_, err := e.svc.Create(bg, api.CreateContextRequest{WorkingDir: dir})
	checkErr(t, err, errdefs.ErrInvalidArgument, "")
	if err != nil && !strings.Contains(err.Error(), "working directory "+dir+" does not exist") {
		t.Errorf("error %q does not name the directory", err)
	}
	if ids := e.Sandboxes(t); len(ids) != 0 {
		t.Errorf("sandboxes left: %v", ids)
	}
	if ids := e.Contexts(t); len(ids) != 0 {
		t.Errorf("contexts left: %v", ids)
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
			if !e.SandboxExists(t, own.SandboxID) {
				t.Fatal("the sandbox went while a context was in it")
			}
			if err := e.svc.Delete(bg, order[1]); err != nil {
				t.Fatal(err)
			}
			if e.SandboxExists(t, own.SandboxID) {
				t.Errorf("sandbox %s the service made is left with no context in it", own.SandboxID)
			}
		})
	}
}

func TestCreateUnknownSandbox(t *testing.T) {
	e := newEnv(t, nil)
	_, err := e.svc.Create(bg, api.CreateContextRequest{SandboxID: "nosuchsandbox"})
	checkErr(t, err, errdefs.ErrNotFound, api.CodeSandboxNotFound)
	if ids := e.Contexts(t); len(ids) != 0 {
		t.Errorf("contexts made: %v", ids)
	}
	_, _, err = e.svc.List(bg, store.ContextFilter{SandboxID: "nosuchsandbox"}, store.Page{})
	checkErr(t, err, errdefs.ErrNotFound, api.CodeSandboxNotFound)
}

// A create that names a sandbox and a template is refused, with nothing
// made, unless the sandbox was made from that template.
func TestCreateSandboxAndTemplate(t *testing.T) {
	e := newEnv(t, nil)
	fromTemplate, fromImage := e.Sandbox(t), e.Sandbox(t)
	if _, err := e.St.UpdateSandbox(bg, fromTemplate.ID, func(sb *store.Sandbox) error {
		sb.Template = "py-tools"
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, sandbox, template string
		want                    string // in the error; "" for none
	}{
		{"its template", fromTemplate.ID, "py-tools", ""},
		{"no template", fromTemplate.ID, "", ""},
		{"another template", fromTemplate.ID, "node-tools", `template "node-tools" is not the template of sandbox ` + fromTemplate.ID + `, which was made from template py-tools`},
		{"a sandbox of no template", fromImage.ID, "py-tools", "which was made from image agent2env/python"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before, kernels := e.Contexts(t), e.Kernels(t, tt.sandbox)
			c, err := e.svc.Create(bg, api.CreateContextRequest{SandboxID: tt.sandbox, Template: tt.template})
			if tt.want == "" {
				if err != nil || c.SandboxID != tt.sandbox {
					t.Fatalf("create: %+v %v", c, err)
				}
				return
			}
			checkErr(t, err, errdefs.ErrInvalidArgument, "")
			if err != nil && !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q, want it to say %q", err, tt.want)
			}
			if after, ks := e.Contexts(t), e.Kernels(t, tt.sandbox); !slices.Equal(after, before) || !slices.Equal(ks, kernels) {
				t.Errorf("contexts %v, before %v; kernels %v, before %v", after, before, ks, kernels)
			}
		})
	}
	if ids := e.Sandboxes(t); len(ids) != 2 {
		t.Errorf("sandboxes %v, want the two of the test", ids)
	}
}

func TestNotInSandbox(t *testing.T) {
	e := newEnv(t, nil)
	a, b := e.Sandbox(t), e.Sandbox(t)
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
		{"StreamChecked other", func() error { _, err := e.svc.StreamChecked(bg, b.ID, c.ContextID, req); return err }, api.CodeContextNotFound},
		{"StreamChecked unknown", func() error { _, err := e.svc.StreamChecked(bg, a.ID, "ctx-nosuch", req); return err }, api.CodeContextNotFound},
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

// TestTenants: with API keys, a context is its key's own: another key
// neither lists nor reaches it.
func TestTenants(t *testing.T) {
	e := newEnv(t, nil)
	a, b := auth.WithTenant(bg, "tenant-a"), auth.WithTenant(bg, "tenant-b")
	c, err := e.svc.Create(a, api.CreateContextRequest{Name: "mine", Description: "a's"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Name != "mine" || c.Description != "a's" || e.Context(t, c.ContextID).Tenant != "tenant-a" {
		t.Errorf("context %+v, record %+v", c, e.Context(t, c.ContextID))
	}
	_, err = e.svc.Get(b, c.ContextID)
	checkErr(t, err, errdefs.ErrNotFound, api.CodeContextNotFound)
	_, err = e.svc.Execute(b, c.ContextID, api.ExecuteRequest{Code: "1"})
	checkErr(t, err, errdefs.ErrNotFound, api.CodeContextNotFound)
	_, err = e.svc.Stream(b, "", c.ContextID, api.ExecuteRequest{Code: "1"})
	checkErr(t, err, errdefs.ErrNotFound, api.CodeContextNotFound)
	checkErr(t, e.svc.Delete(b, c.ContextID), errdefs.ErrNotFound, api.CodeContextNotFound)
	checkErr(t, e.svc.DeleteIn(b, c.SandboxID, c.ContextID), errdefs.ErrNotFound, api.CodeContextNotFound)
	for ctx, want := range map[context.Context]int{a: 1, b: 0, bg: 0} {
		if list, _, err := e.svc.List(ctx, store.ContextFilter{}, store.Page{}); err != nil || len(list) != want {
			t.Errorf("list of %q: %+v %v; want %d", auth.TenantOf(ctx), list, err, want)
		}
	}
	if r, err := e.svc.Execute(a, c.ContextID, api.ExecuteRequest{Code: "6 * 7"}); err != nil || r.Result != "42" {
		t.Errorf("execute as its tenant: %+v %v", r, err)
	}
}

// Without a session service, a context cannot name a session (the
// session tests of package session cover them).
func TestSessionWithoutSessions(t *testing.T) {
	e := newEnv(t, nil)
	_, err := e.svc.Create(bg, api.CreateContextRequest{SessionName: "s"})
	checkErr(t, err, errdefs.ErrNotImplemented, "")
	if ids := e.Sandboxes(t); len(ids) != 0 {
		t.Errorf("sandboxes made: %v", ids)
	}
}

func TestListAndMetrics(t *testing.T) {
	e := newEnv(t, nil)
	sb := e.Sandbox(t)
	a := e.create(t, api.CreateContextRequest{SandboxID: sb.ID})
	b := e.create(t, api.CreateContextRequest{SandboxID: sb.ID})
	list, next, err := e.svc.List(bg, store.ContextFilter{}, store.Page{})
	if err != nil || len(list) != 2 || list[0].ContextID != a.ContextID || list[1].ContextID != b.ContextID || next != "" {
		t.Errorf("List: %+v %q %v", list, next, err)
	}
	list, _, err = e.svc.List(bg, store.ContextFilter{}, store.Page{Desc: true})
	if err != nil || len(list) != 2 || list[0].ContextID != b.ContextID || list[1].ContextID != a.ContextID {
		t.Errorf("List newest first: %+v %v", list, err)
	}
	list, next, err = e.svc.List(bg, store.ContextFilter{}, store.Page{Limit: 1})
	if err != nil || len(list) != 1 || list[0].ContextID != a.ContextID || next == "" {
		t.Fatalf("List's first page: %+v %q %v", list, next, err)
	}
	list, next, err = e.svc.List(bg, store.ContextFilter{}, store.Page{Limit: 1, After: next})
	if err != nil || len(list) != 1 || list[0].ContextID != b.ContextID || next != "" {
		t.Errorf("List's last page: %+v %q %v", list, next, err)
	}
	list, _, err = e.svc.List(bg, store.ContextFilter{SessionName: "nosuch"}, store.Page{})
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
	if _, err := e.M.Stop(bg, c.SandboxID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Execute(bg, c.ContextID, api.ExecuteRequest{Code: "1"}); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Errorf("execute in a stopped sandbox: %v, want a precondition error", err)
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
	if rec := e.Context(t, c.ContextID); rec.ExecutionCount != len(tests) {
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
		{"env name empty", api.ExecuteRequest{Code: "1", Env: map[string]string{"": "x"}}},
		{"env name with '='", api.ExecuteRequest{Code: "1", Env: map[string]string{"A=B": "x"}}},
		{"env name with '-'", api.ExecuteRequest{Code: "1", Env: map[string]string{"A-B": "x"}}},
		{"env name from a digit", api.ExecuteRequest{Code: "1", Env: map[string]string{"1A": "x"}}},
		{"env value with NUL", api.ExecuteRequest{Code: "1", Env: map[string]string{"A": "x\x00"}}},
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
	env := map[string]string{"_A1": "x\ny", "b": ""}
	if r, err := execRequest(api.ExecuteRequest{Code: "1", Env: env}, 0); err != nil || !maps.Equal(r.Env, env) {
		t.Errorf("execRequest env: %+v %v", r, err)
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
	if rec := e.Context(t, c.ContextID); rec.ExecutionCount != 0 {
		t.Errorf("invalid requests counted: %d", rec.ExecutionCount)
	}
}

func TestExecuteSandboxDeleted(t *testing.T) {
	e := newEnv(t, nil)
	c := e.create(t, api.CreateContextRequest{})
	if err := e.M.Delete(bg, c.SandboxID); err != nil {
		t.Fatal(err)
	}
	_, err := e.svc.Execute(bg, c.ContextID, api.ExecuteRequest{Code: "1"})
	checkErr(t, err, errdefs.ErrNotFound, api.CodeContextNotFound)
	_, err = e.svc.Get(bg, c.ContextID)
	checkErr(t, err, errdefs.ErrNotFound, api.CodeContextNotFound)
	checkErr(t, e.svc.Delete(bg, c.ContextID), errdefs.ErrNotFound, api.CodeContextNotFound)
	if ids := e.Contexts(t); len(ids) != 0 {
		t.Errorf("context records outlived their sandbox: %v", ids)
	}
}

// An execution in a context whose sandbox is paused or stopped is refused
// as the manager refuses the sandbox's other requests (409
// SANDBOX_NOT_READY, saying how to go on), in the buffered and the stream
// forms, before anything runs; one whose sandbox goes after the caller's
// own check ends with SandboxGone.
func TestExecuteSandboxNotRunning(t *testing.T) {
	for _, tt := range []struct {
		name    string
		op      func(m *manager.Manager, id string) error
		status  api.SandboxStatus
		message string
	}{
		{"stopped", func(m *manager.Manager, id string) error { _, err := m.Stop(bg, id); return err },
			api.StatusSucceeded, "not running"},
		{"paused", func(m *manager.Manager, id string) error { _, err := m.Pause(bg, id); return err },
			api.StatusPaused, "is paused, not running: resume it first"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, nil)
			c := e.create(t, api.CreateContextRequest{})
			if err := tt.op(e.M, c.SandboxID); err != nil {
				t.Fatal(err)
			}
			check := func(what string, err error) {
				t.Helper()
				checkErr(t, err, errdefs.ErrFailedPrecondition, api.CodeSandboxNotReady)
				if err != nil && !strings.Contains(err.Error(), tt.message) {
					t.Errorf("%s: %q, want it to say %q", what, err, tt.message)
				}
				if d := errdefs.Details(err); d["sandbox_id"] != c.SandboxID || d["status"] != string(tt.status) {
					t.Errorf("%s: details %v", what, d)
				}
			}
			_, err := e.svc.Execute(bg, c.ContextID, api.ExecuteRequest{Code: "1"})
			check("execute", err)
			_, err = e.svc.ExecuteIn(bg, c.SandboxID, c.ContextID, api.ExecuteRequest{Code: "1"})
			check("execute in the sandbox", err)
			// The stream form says so before the stream starts.
			_, err = e.svc.Stream(bg, "", c.ContextID, api.ExecuteRequest{Code: "1"})
			check("stream", err)
			if rec := e.Context(t, c.ContextID); rec.ExecutionCount != 0 {
				t.Errorf("refused executions counted: %d", rec.ExecutionCount)
			}
			// The context (and its own sandbox) can still be deleted.
			if err := e.svc.Delete(bg, c.ContextID); err != nil {
				t.Fatal(err)
			}
			if e.SandboxExists(t, c.SandboxID) {
				t.Errorf("the %s own sandbox outlived its context", tt.name)
			}
		})
	}
}

// A caller that found the sandbox running just before it stopped (the
// E2B surface's access check) gets SandboxGone in the answer.
func TestExecuteCheckedSandboxGone(t *testing.T) {
	e := newEnv(t, nil)
	c := e.create(t, api.CreateContextRequest{})
	run, err := e.svc.StreamChecked(bg, c.SandboxID, c.ContextID, api.ExecuteRequest{Code: "1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.M.Stop(bg, c.SandboxID); err != nil {
		t.Fatal(err)
	}
	r, err := run(bg, &recSink{})
	if err != nil || r.Success || r.Error == nil || r.Error.Name != api.ErrorNameSandboxGone || r.Error.Kind != api.ErrorKindSystem || r.Error.Value == "" {
		t.Fatalf("checked stream in a stopped sandbox: %+v %v", r, err)
	}
	if r.ContextID != c.ContextID || r.Results == nil {
		t.Errorf("response %+v", r)
	}
}

func TestKernelLost(t *testing.T) {
	e := newEnv(t, nil)
	c := e.create(t, api.CreateContextRequest{Env: map[string]string{"A2E_TEST": "kept"}})
	e.exec(t, c.ContextID, "x = 1", 0)
	ac, err := e.M.Agent(bg, c.SandboxID)
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
	if ks := e.Kernels(t, c.SandboxID); !reflect.DeepEqual(ks, []string{c.ContextID}) {
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
	if got.Output != (api.ExecutionOutput{}) {
		t.Errorf("stream response keeps the output it streamed: %+v", got.Output)
	}
	if !reflect.DeepEqual(sink.res, got.Results) {
		t.Errorf("streamed results %+v, response %+v", sink.res, got.Results)
	}
	if got.ExecutionCount != 1 {
		t.Errorf("stream execution count %d", got.ExecutionCount)
	}

	// Execute gives the same response (but for time and count), with the
	// output the stream sent.
	exe := e.exec(t, c.ContextID, code, 0)
	if exe.ExecutionCount != 2 {
		t.Errorf("execute execution count %d", exe.ExecutionCount)
	}
	got.Output = api.ExecutionOutput{Stdout: sink.stdout.String(), Stderr: sink.stderr.String()}
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

	// The form for a caller that has just found the sandbox running runs
	// the same, in the same kernel.
	run, err = e.svc.StreamChecked(bg, c.SandboxID, c.ContextID, api.ExecuteRequest{Code: "x = 6 * 7; x"})
	if err != nil {
		t.Fatal(err)
	}
	sink = &recSink{}
	got, err = run(bg, sink)
	if err != nil || !got.Success || got.Result != "42" || got.ExecutionCount != 4 || fmt.Sprint(sink.events) != "[result:42]" {
		t.Errorf("checked stream: %+v %q %v", got, sink.events, err)
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
	budget := outbuf.NewBudget(1 << 20)
	buffered := func() *collector {
		return &collector{out: [2]*outbuf.Buffer{budget.NewBuffer("sb", 1<<10), budget.NewBuffer("sb", 1<<10)}}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The same chunks to a sink and to buffers.
			sink := &recSink{}
			col, kept := &collector{sink: sink}, buffered()
			for _, ch := range tt.chunks {
				for _, c := range []*collector{col, kept} {
					f := c.stdoutBytes
					if ch.stream == 1 {
						f = c.stderrBytes
					}
					if err := f([]byte(ch.b)); err != nil {
						t.Fatal(err)
					}
				}
			}
			col.flush()
			kept.flush()
			if !reflect.DeepEqual(sink.events, tt.want) {
				t.Errorf("sink got %q, want %q", sink.events, tt.want)
			}
			for _, ev := range sink.events {
				if !utf8.ValidString(ev) {
					t.Errorf("sink got invalid UTF-8 %q", ev)
				}
			}
			if kept.out[0].String() != sink.stdout.String() || kept.out[1].String() != sink.stderr.String() {
				t.Errorf("kept %q/%q, streamed %q/%q", kept.out[0].String(), kept.out[1].String(), sink.stdout.String(), sink.stderr.String())
			}
		})
	}

	// Byte by byte, every call is whole characters.
	text := "héllo 世界 🎉 ok"
	sink := &recSink{}
	col, kept := &collector{sink: sink}, buffered()
	for i := range len(text) {
		_ = col.stdoutBytes([]byte{text[i]})
		_ = kept.stdoutBytes([]byte{text[i]})
	}
	col.flush()
	kept.flush()
	if sink.stdout.String() != text || kept.out[0].String() != text {
		t.Errorf("byte by byte: %q, kept %q", sink.stdout.String(), kept.out[0].String())
	}
	for _, ev := range sink.events {
		if !utf8.ValidString(ev) || strings.ContainsRune(ev, utf8.RuneError) {
			t.Errorf("byte by byte: sink got %q", ev)
		}
	}

	// Without a sink it only collects; the sink's first error is kept and
	// nothing more is sent.
	col = buffered()
	_ = col.stdoutBytes([]byte("a"))
	_ = col.display(map[string]any{"text/plain": "1"})
	if col.out[0].String() != "a" || len(col.results) != 1 {
		t.Errorf("without a sink: %q %+v", col.out[0].String(), col.results)
	}
	gone := errors.New("gone")
	sink = &recSink{fail: gone}
	col = &collector{sink: sink}
	_ = col.stdoutBytes([]byte("a"))
	_ = col.stderrBytes([]byte("b"))
	if !errors.Is(col.err, gone) || len(sink.events) != 1 {
		t.Errorf("after a sink error: err %v, sink %q", col.err, sink.events)
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

func (p *fakePool) Take(ctx context.Context, source, owner string) (Warm, bool) {
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
		{name: "working dir", req: api.CreateContextRequest{WorkingDir: "/etc"}, warmLang: "python", source: "python",
			checkCode: "import os\nos.getcwd()", checkWant: "'/etc'"},
		{name: "no kernel", req: api.CreateContextRequest{}, noKernel: true, source: "python"},
		{name: "empty pool", req: api.CreateContextRequest{}, empty: true, source: "python"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pool := &fakePool{}
			e := newEnv(t, pool)
			warm := e.Sandbox(t)
			kernel := ""
			if !tt.noKernel {
				kernel = NewID()
				ac, err := e.M.Agent(bg, warm.ID)
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
			} else if c.SandboxID != warm.ID || !e.Context(t, c.ContextID).OwnsSandbox {
				t.Fatalf("context %+v: want it in the warm sandbox %s, owning it", c, warm.ID)
			}
			if adopted := c.ContextID == kernel; adopted != tt.adopt {
				t.Errorf("context %s, warm kernel %s: adopted %v, want %v", c.ContextID, kernel, adopted, tt.adopt)
			}
			if !tt.empty {
				// Only the context's kernel runs: a warm one not adopted is stopped.
				if ks := e.Kernels(t, warm.ID); !reflect.DeepEqual(ks, []string{c.ContextID}) {
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
			if e.SandboxExists(t, c.SandboxID) {
				t.Error("the sandbox provided for the context outlived it")
			}
		})
	}
}

// TestLanguages runs each language's kernel (it needs the drivers in
// internal/agent/kernels and the host's python3, node and bash).
func TestLanguages(t *testing.T) {
	e := newEnv(t, nil)
	sb := e.Sandbox(t)
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

// Buffered executions hold their output within the output budget: those
// it cuts short say truncated, with a marker that says why, and all of it
// comes back once their answers are released.
func TestExecuteOutputBudget(t *testing.T) {
	e := newEnv(t, nil)
	const budget, each = 1 << 20, 400_000
	svc := New(Config{ReadyTimeout: 10 * time.Second, Outputs: outbuf.NewBudget(budget)}, e.M, e.St, nil, slog.New(slog.DiscardHandler))
	sb := e.Sandbox(t)
	const n = 4 // 1.6 MB wanted of 1 MiB
	code := fmt.Sprintf("import sys\nsys.stdout.write('x' * %d)", each)
	answers := make([]*Execution, n)
	var wg sync.WaitGroup
	for i := range n {
		c := e.create(t, api.CreateContextRequest{SandboxID: sb.ID})
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			if answers[i], err = svc.Execute(bg, c.ContextID, api.ExecuteRequest{Code: code}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	if peak := svc.cfg.Outputs.Peak(); peak > budget {
		t.Errorf("buffered output peaked at %d bytes, above the budget of %d", peak, budget)
	}
	cut := 0
	for _, a := range answers {
		out := a.Output.Stdout
		if !a.Success {
			t.Errorf("execution failed: %+v", a.Error)
		}
		if !a.Truncated {
			if out != strings.Repeat("x", each) {
				t.Errorf("whole output has %d bytes, want %d", len(out), each)
			}
			continue
		}
		cut++
		text, marker, _ := strings.Cut(out, "\n[output truncated: ")
		if strings.Trim(text, "x") != "" || !strings.Contains(marker, "the daemon's output memory") {
			t.Errorf("truncated output ends %q", out[max(len(out)-200, 0):])
		}
	}
	if cut == 0 {
		t.Error("no execution was cut short")
	}
	for _, a := range answers {
		a.Release()
	}
	if in := svc.cfg.Outputs.InUse(); in != 0 {
		t.Errorf("budget in use after release: %d", in)
	}
}

// A context in no session idle past IdleTimeout is deleted with the
// sandbox made for it; one running code is not, however old its last
// use.
func TestReapIdle(t *testing.T) {
	e := newEnv(t, nil)
	idle := e.create(t, api.CreateContextRequest{})
	busy := e.create(t, api.CreateContextRequest{})
	later := time.Now().Add(31 * time.Minute)
	e.svc.now = func() time.Time { return later }
	running := make(chan struct{})
	go func() {
		defer close(running)
		e.exec(t, busy.ContextID, "import time; time.sleep(2)", 30)
	}()
	for !e.svc.busy(busy.ContextID) {
		time.Sleep(5 * time.Millisecond)
	}
	n, err := e.svc.ReapIdle(bg)
	if err != nil || n != 1 {
		t.Fatalf("ReapIdle: %d, %v; want the idle context", n, err)
	}
	if _, err := e.svc.Get(bg, idle.ContextID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("the idle context: %v, want it gone", err)
	}
	if e.SandboxExists(t, idle.SandboxID) {
		t.Error("the idle context's sandbox outlived it")
	}
	<-running
	if _, err := e.svc.Get(bg, busy.ContextID); err != nil {
		t.Errorf("the context that ran code: %v", err)
	}
}
