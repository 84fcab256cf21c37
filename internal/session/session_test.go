package session

import (
	"context"
	"errors"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/agent"
	"github.com/agent2env/agent2env/internal/auth"
	"github.com/agent2env/agent2env/internal/contexts"
	"github.com/agent2env/agent2env/internal/contexts/contextstest"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/manager"
	"github.com/agent2env/agent2env/internal/sandbox"
	"github.com/agent2env/agent2env/internal/store"
)

func TestExecuteCodeSessions(t *testing.T) {
	e := newEnv(t)
	first := e.execute(t, bg, api.SessionExecuteRequest{Code: "x = 41\nprint('hi')"})
	if !first.Created || !strings.HasPrefix(first.SessionID, "ses-") || first.Output.Stdout != "hi\n" || !first.Success ||
		first.Language != api.LanguagePython || first.ContextID == "" {
		t.Fatalf("first execution: %+v", first)
	}
	if want := e.clock.Now().Add(30 * time.Minute); !first.ExpiresAt.Equal(want) {
		t.Errorf("expires_at %v, want %v (30 minutes after the request)", first.ExpiresAt, want)
	}
	// A known id reuses the session: the same kernel, with its state.
	again := e.execute(t, bg, api.SessionExecuteRequest{Code: "x + 1", SessionID: first.SessionID})
	if again.Created || again.SessionID != first.SessionID || again.Result != "42" || again.ContextID != first.ContextID {
		t.Errorf("reuse: %+v", again)
	}
	// An unknown id makes a session under that id.
	named := e.execute(t, bg, api.SessionExecuteRequest{Code: "'x' in globals()", SessionID: "my-session"})
	if !named.Created || named.SessionID != "my-session" || named.Result != "False" {
		t.Errorf("unknown id: %+v", named)
	}
	if keys := e.sessions(t); !reflect.DeepEqual(sorted(keys), sorted([]string{"/" + first.SessionID, "/my-session"})) {
		t.Errorf("sessions %v", keys)
	}
	info, err := e.svc.Get(bg, first.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	rec := e.record(t, "", first.SessionID)
	want := &api.Session{SessionID: first.SessionID, Flavor: "small", CPU: "1", Memory: "1Gi", SandboxID: rec.SandboxID,
		Languages: []string{"python"}, CreatedAt: rec.CreatedAt, LastUsedAt: rec.LastUsedAt, ExpiresAt: rec.ExpiresAt,
		EndsAt: rec.EndsAt, IdleTimeout: 1800, ExecutionCount: 2, ExecutionTime: rec.ExecutionTime.Seconds()}
	if diff := cmp.Diff(want, info); diff != "" || rec.ExecutionTime <= 0 {
		t.Errorf("session info (-want +got):\n%s", diff)
	}
	if ends := rec.CreatedAt.Add(24 * time.Hour); rec.EndsAt == nil || !rec.EndsAt.Equal(ends) {
		t.Errorf("ends_at %v, want %v", rec.EndsAt, ends)
	}
}

// TestMixLanguages runs python, javascript and bash in one session: one
// sandbox, a kernel each.
func TestMixLanguages(t *testing.T) {
	e := newEnv(t)
	py := e.execute(t, bg, api.SessionExecuteRequest{Code: "open('f', 'w').write('py')", SessionID: "mix"})
	js := e.execute(t, bg, api.SessionExecuteRequest{Code: "require('fs').readFileSync('f', 'utf8')", Language: "javascript", SessionID: "mix"})
	sh := e.execute(t, bg, api.SessionExecuteRequest{Code: "cat f", Language: "sh", SessionID: "mix"})
	if js.Result != "'py'" || sh.Output.Stdout != "py" || js.Created || sh.Created || sh.Language != api.LanguageBash {
		t.Errorf("javascript %+v, bash %+v", js, sh)
	}
	info, err := e.svc.Get(bg, "mix")
	if err != nil || !reflect.DeepEqual(info.Languages, []string{"bash", "javascript", "python"}) {
		t.Errorf("languages: %+v %v", info, err)
	}
	if ks := e.Kernels(t, info.SandboxID); len(ks) != 3 || len(e.Sandboxes(t)) != 1 || py.ContextID == js.ContextID {
		t.Errorf("kernels %v, sandboxes %v", ks, e.Sandboxes(t))
	}
}

// Fifty concurrent first calls with one id make one session.
func TestConcurrentFirstCalls(t *testing.T) {
	e := newEnv(t)
	const n = 50
	var wg sync.WaitGroup
	resps := make([]*api.SessionExecuteResponse, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			resps[i], _, errs[i] = e.svc.ExecuteCode(bg, api.SessionExecuteRequest{Code: "1", SessionID: "same"}, nil)
		})
	}
	wg.Wait()
	created := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("call %d: %v", i, errs[i])
		}
		if resps[i].Created {
			created++
		}
		if resps[i].ContextID != resps[0].ContextID {
			t.Errorf("call %d ran in context %s, call 0 in %s", i, resps[i].ContextID, resps[0].ContextID)
		}
	}
	if created != 1 || len(e.Sandboxes(t)) != 1 || len(e.Contexts(t)) != 1 || !reflect.DeepEqual(e.sessions(t), []string{"/same"}) {
		t.Errorf("%d calls said created; sandboxes %v, contexts %v, sessions %v", created, e.Sandboxes(t), e.Contexts(t), e.sessions(t))
	}
	if e.record(t, "", "same").ExecutionCount != n {
		t.Errorf("execution count %d, want %d", e.record(t, "", "same").ExecutionCount, n)
	}
	if e.svc.locks.Len() != 0 || e.svc.kernels.Len() != 0 || len(e.svc.active) != 0 {
		t.Errorf("state kept after the calls: %d locks, %d kernel locks, %d active", e.svc.locks.Len(), e.svc.kernels.Len(), len(e.svc.active))
	}
}

// TestIdleExpiry: a session goes once idle for its timeout, counted from
// the end of its last request, and never while a request runs in it.
func TestIdleExpiry(t *testing.T) {
	e := newEnv(t, func(su *setup) { su.cfg.IdleTimeout = 10 * time.Minute })
	e.execute(t, bg, api.SessionExecuteRequest{Code: "1", SessionID: "idle"})
	e.clock.Add(9 * time.Minute)
	if r, err := e.svc.Reap(bg); err != nil || r.Idle != 0 {
		t.Fatalf("reap before the deadline: %+v %v", r, err)
	}
	// A long request: its start is after the deadline would pass.
	started, finish := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, _, err := e.svc.ExecuteCommand(bg, api.SessionCommandRequest{Command: api.CommandLine{Shell: "echo go; read x"}, SessionID: "idle"},
			sinkFunc(func(string) { close(started); <-finish }))
		done <- err
	}()
	<-started
	e.clock.Add(5 * time.Minute) // 14 minutes after the first request ended
	if r, err := e.svc.Reap(bg); err != nil || r.Idle != 0 {
		t.Errorf("reaped while a request ran in it: %+v %v", r, err)
	}
	close(finish)
	// The command waits for input it never gets: its stdin is closed.
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	ended := e.clock.Now()
	if rec := e.record(t, "", "idle"); !rec.ExpiresAt.Equal(ended.Add(10 * time.Minute)) {
		t.Errorf("idle deadline %v, want 10 minutes after the request ended (%v)", rec.ExpiresAt, ended)
	}
	e.clock.Add(9 * time.Minute)
	if r, _ := e.svc.Reap(bg); r.Idle != 0 {
		t.Error("reaped 9 minutes after its last request")
	}
	sb := e.record(t, "", "idle").SandboxID
	e.clock.Add(time.Minute)
	if r, err := e.svc.Reap(bg); err != nil || r.Idle != 1 {
		t.Fatalf("reap after the deadline: %+v %v", r, err)
	}
	if len(e.sessions(t)) != 0 || e.SandboxExists(t, sb) || len(e.Contexts(t)) != 0 {
		t.Errorf("left after expiry: sessions %v, sandbox %v, contexts %v", e.sessions(t), e.SandboxExists(t, sb), e.Contexts(t))
	}
	// The id is free again: using it makes a new session.
	if r := e.execute(t, bg, api.SessionExecuteRequest{Code: "1", SessionID: "idle"}); !r.Created {
		t.Error("an expired session's id reused the old session")
	}
}

// sinkFunc is a sink calling fn once with the first output.
type sinkFunc func(string)

func (f sinkFunc) Stdout(s string) error { f(s); return nil }
func (f sinkFunc) Stderr(s string) error { return nil }
func (f sinkFunc) Result(api.ExecutionResult) error {
	return nil
}

func TestMaxLifetimeAndKeepAlive(t *testing.T) {
	e := newEnv(t, func(su *setup) { su.cfg.MaxLifetime = time.Hour })
	e.execute(t, bg, api.SessionExecuteRequest{Code: "1", SessionID: "s"})
	for range 2 { // kept alive and used within its lifetime
		e.clock.Add(25 * time.Minute)
		got, err := e.svc.KeepAlive(bg, "s", api.KeepAliveRequest{IdleTimeout: 3600})
		if err != nil || got.IdleTimeout != 3600 || !got.ExpiresAt.Equal(e.clock.Now().Add(time.Hour)) {
			t.Fatalf("keep-alive: %+v %v", got, err)
		}
		e.execute(t, bg, api.SessionExecuteRequest{Code: "1", SessionID: "s"})
		if r, _ := e.svc.Reap(bg); r != (Reaped{}) {
			t.Errorf("reaped %+v within the lifetime", r)
		}
	}
	e.clock.Add(10 * time.Minute) // past it, kept alive all the same
	if r, err := e.svc.Reap(bg); err != nil || r.Expired != 1 || len(e.sessions(t)) != 0 {
		t.Errorf("reap past the lifetime: %+v %v; sessions %v", r, err, e.sessions(t))
	}
	_, err := e.svc.KeepAlive(bg, "s", api.KeepAliveRequest{})
	checkErr(t, err, errdefs.ErrNotFound, api.CodeSessionNotFound)
	for _, bad := range []float64{-1, 25 * 3600} {
		e.execute(t, bg, api.SessionExecuteRequest{Code: "1", SessionID: "t"})
		_, err := e.svc.KeepAlive(bg, "t", api.KeepAliveRequest{IdleTimeout: bad})
		checkErr(t, err, errdefs.ErrInvalidArgument, "")
	}
}

// TestTenants: with keys on, a session id names the key's own session.
func TestTenants(t *testing.T) {
	e := newEnv(t)
	a := e.execute(t, as("tenant-a"), api.SessionExecuteRequest{Code: "secret = 'a'", SessionID: "s1"})
	b := e.execute(t, as("tenant-b"), api.SessionExecuteRequest{Code: "'secret' in globals()", SessionID: "s1"})
	if !a.Created || !b.Created || b.Result != "False" || a.ContextID == b.ContextID {
		t.Errorf("a %+v, b %+v: tenant b reached tenant a's session", a, b)
	}
	if ga, gb := e.record(t, "tenant-a", "s1"), e.record(t, "tenant-b", "s1"); ga.SandboxID == gb.SandboxID {
		t.Error("two tenants share a sandbox")
	}
	for _, tenant := range []string{"tenant-a", "tenant-b"} {
		list, err := e.svc.List(as(tenant))
		if err != nil || len(list) != 1 || list[0].SessionID != "s1" {
			t.Errorf("list of %s: %+v %v", tenant, list, err)
		}
	}
	if list, err := e.svc.List(bg); err != nil || len(list) != 0 {
		t.Errorf("list without a tenant: %+v %v", list, err)
	}
	checkErr(t, e.svc.Delete(as("tenant-c"), "s1"), errdefs.ErrNotFound, api.CodeSessionNotFound)
	if err := e.svc.Delete(as("tenant-b"), "s1"); err != nil {
		t.Fatal(err)
	}
	if r := e.execute(t, as("tenant-a"), api.SessionExecuteRequest{Code: "secret", SessionID: "s1"}); r.Created || r.Result != "'a'" {
		t.Errorf("tenant a after tenant b's delete: %+v", r)
	}
	if auth.Tenant("key-1") == auth.Tenant("key-2") || strings.Contains(auth.Tenant("key-1"), "/") || strings.Contains(auth.Tenant("key-1"), "key") {
		t.Errorf("tenants %q %q", auth.Tenant("key-1"), auth.Tenant("key-2"))
	}
}

func TestFlavors(t *testing.T) {
	e := newEnv(t, func(su *setup) {
		su.cfg.Flavors = []Flavor{{Name: "tiny", CPU: "250m", Memory: "256Mi"}}
		su.cfg.DefaultFlavor = "tiny"
	})
	for _, tt := range []struct{ flavor, cpu, memory string }{
		{"", "250m", "256Mi"}, {"small", "1", "1Gi"}, {"medium", "2", "2Gi"}, {"large", "4", "4Gi"},
	} {
		r := e.execute(t, bg, api.SessionExecuteRequest{Code: "1", Flavor: tt.flavor})
		sb, err := e.M.Get(bg, e.record(t, "", r.SessionID).SandboxID)
		if err != nil || sb.CPU != tt.cpu || sb.Memory != tt.memory || sb.ManagedBy != ManagedBy {
			t.Errorf("flavor %q: sandbox %+v %v", tt.flavor, sb, err)
		}
	}
	_, _, err := e.svc.ExecuteCode(bg, api.SessionExecuteRequest{Code: "1", Flavor: "huge"}, nil)
	checkErr(t, err, errdefs.ErrInvalidArgument, "")
	if _, err := New(Config{DefaultFlavor: "huge"}, e.M, e.St, e.ctxs, nil); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("an unknown default flavor: %v", err)
	}
}

// TestLimits: past the maximum of sandboxes (429) or the host's capacity
// (507) a new session is refused with the usage and a suggestion, and
// nothing is made; sessions that exist go on.
func TestLimits(t *testing.T) {
	e := newEnv(t, func(su *setup) {
		su.mgr.MaxSandboxes = 2
		su.mgr.CPUOvercommit, su.mgr.MemoryOvercommit = 1, 1
		su.mgr.Host = manager.Host{MilliCPU: 3500, MemoryBytes: 8 << 30}
	})
	e.execute(t, bg, api.SessionExecuteRequest{Code: "1", SessionID: "one", Flavor: "medium"})
	check := func(err error, code, suggestion string) {
		t.Helper()
		checkErr(t, err, errdefs.ErrResourceExhausted, code)
		d := errdefs.Details(err)
		u, _ := d["usage"].(api.Usage)
		if s, _ := d["suggestion"].(string); !strings.Contains(s, suggestion) || u.Sandboxes != len(e.Sandboxes(t)) ||
			u.Sessions != 1 || u.MilliCPUCapacity != 3500 || u.MilliCPU != 2000 {
			t.Errorf("details %+v", d)
		}
		if len(e.sessions(t)) != 1 || len(e.Sandboxes(t)) != 1 {
			t.Errorf("made: sessions %v, sandboxes %v", e.sessions(t), e.Sandboxes(t))
		}
	}
	_, _, err := e.svc.ExecuteCode(bg, api.SessionExecuteRequest{Code: "1", SessionID: "two", Flavor: "medium"}, nil)
	check(err, api.CodeInsufficientCapacity, "use flavor small")
	_, _, err = e.svc.ExecuteCommand(bg, api.SessionCommandRequest{Command: api.CommandLine{Shell: "true"}, SessionID: "two", Flavor: "large"}, nil)
	check(err, api.CodeInsufficientCapacity, "delete idle sessions")
	// A sandbox clients made counts toward the maximum.
	if _, err := e.M.Create(bg, manager.CreateRequest{Image: "x", CPU: "100m", Memory: "64Mi"}); err != nil {
		t.Fatal(err)
	}
	_, _, err = e.svc.ExecuteCode(bg, api.SessionExecuteRequest{Code: "1", SessionID: "two", Flavor: "small"}, nil)
	checkErr(t, err, errdefs.ErrResourceExhausted, api.CodeLimitExceeded)
	if s, _ := errdefs.Details(err)["suggestion"].(string); !strings.Contains(s, "--max-sandboxes") {
		t.Errorf("suggestion %q", s)
	}
	if len(e.sessions(t)) != 1 {
		t.Errorf("sessions %v", e.sessions(t))
	}
	if r := e.execute(t, bg, api.SessionExecuteRequest{Code: "2", SessionID: "one"}); r.Created || r.Result != "2" {
		t.Errorf("the existing session: %+v", r)
	}
}

func TestExecuteCommand(t *testing.T) {
	e := newEnv(t)
	var mu sync.Mutex
	var streamed strings.Builder
	sink := collect{mu: &mu, b: &streamed}
	r, _, err := e.svc.ExecuteCommand(bg, api.SessionCommandRequest{Command: api.CommandLine{Shell: "echo $A; pwd; echo err >&2; exit 3"},
		SessionID: "cmd", Cwd: "/etc", Env: map[string]string{"A": "from env"}}, sink)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Created || r.ExitCode != 3 || r.Stdout != "from env\n/etc\n" || r.Stderr != "err\n" || streamed.String() != r.Stdout {
		t.Errorf("command: %+v, streamed %q", r, streamed.String())
	}
	r, _, err = e.svc.ExecuteCommand(bg, api.SessionCommandRequest{Command: api.CommandLine{Argv: []string{"sleep", "5"}}, SessionID: "cmd", Timeout: 0.2}, nil)
	if err != nil || r.Created || !r.TimedOut {
		t.Errorf("timeout: %+v %v", r, err)
	}
	if rec := e.record(t, "", "cmd"); rec.ExecutionCount != 2 || rec.ErrorCount != 2 {
		t.Errorf("record %+v", rec)
	}
	st, err := e.svc.Stats(bg)
	if err != nil || st.Executions.Count != 2 || st.Executions.Errors != 2 || st.Executions.P50 <= 0 || st.Sessions.Active != 1 ||
		st.Sandboxes["running"] != 1 || st.Resources.MilliCPUCommitted != 1000 {
		t.Errorf("stats %+v %v", st, err)
	}
}

// collect is a sink gathering stdout.
type collect struct {
	mu *sync.Mutex
	b  *strings.Builder
}

func (c collect) Stdout(s string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.b.WriteString(s)
	return nil
}
func (c collect) Stderr(string) error { return nil }

// Bad input is refused before anything is made.
func TestBadInput(t *testing.T) {
	e := newEnv(t)
	code := []struct {
		name string
		req  api.SessionExecuteRequest
		code string
	}{
		{"language", api.SessionExecuteRequest{Code: "1", Language: "cobol"}, api.CodeInvalidLanguage},
		{"no code", api.SessionExecuteRequest{}, ""},
		{"timeout", api.SessionExecuteRequest{Code: "1", Timeout: -1}, ""},
		{"flavor", api.SessionExecuteRequest{Code: "1", Flavor: "xl"}, ""},
		{"id with slash", api.SessionExecuteRequest{Code: "1", SessionID: "a/b"}, ""},
		{"id with space", api.SessionExecuteRequest{Code: "1", SessionID: "a b"}, ""},
		{"id too long", api.SessionExecuteRequest{Code: "1", SessionID: strings.Repeat("x", 129)}, ""},
		{"id .", api.SessionExecuteRequest{Code: "1", SessionID: "."}, ""},
		{"id ..", api.SessionExecuteRequest{Code: "1", SessionID: ".."}, ""},
	}
	for _, tt := range code {
		_, _, err := e.svc.ExecuteCode(bg, tt.req, nil)
		checkErr(t, err, errdefs.ErrInvalidArgument, tt.code)
	}
	commands := []api.SessionCommandRequest{
		{},
		{Command: api.CommandLine{Argv: []string{}}},
		{Command: api.CommandLine{Argv: []string{""}}},
		{Command: api.CommandLine{Shell: "true"}, Timeout: 1e9},
		{Command: api.CommandLine{Shell: "true"}, Cwd: "../etc"},
		{Command: api.CommandLine{Shell: "true"}, Env: map[string]string{"A=B": "x"}},
	}
	for _, req := range commands {
		_, _, err := e.svc.ExecuteCommand(bg, req, nil)
		checkErr(t, err, errdefs.ErrInvalidArgument, "")
	}
	for _, id := range []string{"", "a/b"} {
		_, err := e.svc.Get(bg, id)
		checkErr(t, err, errdefs.ErrInvalidArgument, "")
	}
	_, err := e.svc.Get(bg, "nosuch")
	checkErr(t, err, errdefs.ErrNotFound, api.CodeSessionNotFound)
	// A bad path is refused before a session is made for it.
	at := Target{SessionID: "new"}
	for _, p := range []string{"", "../etc/passwd", strings.Repeat("a", 5000)} {
		_, _, err := e.svc.WriteFile(bg, at, p, strings.NewReader("x"))
		checkErr(t, err, errdefs.ErrInvalidArgument, "")
		_, _, err = e.svc.ReadFile(bg, at, p, 10)
		checkErr(t, err, errdefs.ErrInvalidArgument, "")
		_, _, err = e.svc.ListFiles(bg, at, p)
		checkErr(t, err, errdefs.ErrInvalidArgument, "")
	}
	if len(e.Sandboxes(t)) != 0 || len(e.sessions(t)) != 0 {
		t.Errorf("made: %v %v", e.Sandboxes(t), e.sessions(t))
	}
}

// A request that made its session and then failed leaves nothing.
func TestFailedRequestLeavesNothing(t *testing.T) {
	e := newEnv(t, func(su *setup) {
		su.images = contextstest.NewInterpreterImages(t, map[string][]string{"agent2env/code-interpreter:latest": {"python3", "bash"}})
	})
	_, _, err := e.svc.ExecuteCode(bg, api.SessionExecuteRequest{Code: "1", Language: "javascript", SessionID: "new"}, nil)
	checkErr(t, err, errdefs.ErrInvalidArgument, api.CodeLanguageMissing)
	// A command the sandbox refuses (its working directory is missing)
	// is an error, not a panic, and gives back its output budget.
	_, release, err := e.svc.ExecuteCommand(bg, api.SessionCommandRequest{Command: api.CommandLine{Shell: "true"},
		SessionID: "new", Cwd: "/nonexistent"}, nil)
	checkErr(t, err, errdefs.ErrInvalidArgument, "")
	if release != nil {
		t.Error("a failed command returned a release")
	}
	if len(e.Sandboxes(t)) != 0 || len(e.sessions(t)) != 0 {
		t.Errorf("made: %v %v", e.Sandboxes(t), e.sessions(t))
	}
	// In a session that exists, the failure changes nothing.
	e.execute(t, bg, api.SessionExecuteRequest{Code: "x = 1", SessionID: "old"})
	_, _, err = e.svc.ExecuteCode(bg, api.SessionExecuteRequest{Code: "1", Language: "javascript", SessionID: "old"}, nil)
	checkErr(t, err, errdefs.ErrInvalidArgument, api.CodeLanguageMissing)
	if r := e.execute(t, bg, api.SessionExecuteRequest{Code: "x", SessionID: "old"}); r.Created || r.Result != "1" {
		t.Errorf("the session after a failed request: %+v", r)
	}
}

// TestOrphans: Reap deletes sandboxes a service made that nothing refers
// to, once past the grace period; failed ones past the retention; and
// runtime state no record knows. A client's sandboxes stay.
func TestOrphans(t *testing.T) {
	e := newEnv(t, func(su *setup) { su.cfg.IdleTimeout = 23 * time.Hour })
	orphan, err := e.M.Create(bg, manager.CreateRequest{Image: "x", ManagedBy: ManagedBy})
	if err != nil {
		t.Fatal(err)
	}
	user := e.Sandbox(t)
	kept := e.execute(t, bg, api.SessionExecuteRequest{Code: "1", SessionID: "kept"})
	// Runtime state without a record, as a crash between the two leaves.
	leftover, err := e.M.Create(bg, manager.CreateRequest{Image: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.St.DeleteSandbox(bg, leftover.ID); err != nil {
		t.Fatal(err)
	}
	if r, err := e.svc.Reap(bg); err != nil || r != (Reaped{Leftovers: 1}) {
		t.Errorf("reap within the grace period: %+v %v", r, err)
	}
	if _, err := e.Rt.Status(bg, leftover.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("runtime leftover %s: %v", leftover.ID, err)
	}
	e.clock.Add(6 * time.Minute)
	if r, err := e.svc.Reap(bg); err != nil || r != (Reaped{Orphans: 1}) {
		t.Errorf("reap past the grace period: %+v %v", r, err)
	}
	if e.SandboxExists(t, orphan.ID) || !e.SandboxExists(t, user.ID) || !e.SandboxExists(t, e.record(t, "", kept.SessionID).SandboxID) {
		t.Errorf("after the reap: orphan %v, user %v", e.SandboxExists(t, orphan.ID), e.SandboxExists(t, user.ID))
	}
	// A failed sandbox of a session goes after the retention, the session
	// with it.
	sb := e.record(t, "", kept.SessionID).SandboxID
	if _, err := e.St.UpdateSandbox(bg, sb, func(s *store.Sandbox) error {
		s.Status, s.UpdatedAt = string(api.StatusFailed), time.Now().UTC()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	e.clock.Add(30 * time.Minute)
	if r, _ := e.svc.Reap(bg); r.Failed != 0 {
		t.Errorf("failed sandbox reaped within the retention: %+v", r)
	}
	e.clock.Add(31 * time.Minute)
	if r, err := e.svc.Reap(bg); err != nil || r.Failed != 1 || e.SandboxExists(t, sb) || len(e.sessions(t)) != 0 {
		t.Errorf("reap past the retention: %+v %v; sessions %v", r, err, e.sessions(t))
	}
}

// A session whose sandbox failed starts again under its id.
func TestSandboxGone(t *testing.T) {
	e := newEnv(t)
	first := e.execute(t, bg, api.SessionExecuteRequest{Code: "x = 1", SessionID: "s"})
	sb := e.record(t, "", "s").SandboxID
	if err := e.Rt.Stop(bg, sb, time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := e.St.UpdateSandbox(bg, sb, func(s *store.Sandbox) error {
		s.Status = string(api.StatusFailed)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	r := e.execute(t, bg, api.SessionExecuteRequest{Code: "'x' in globals()", SessionID: "s"})
	if !r.Created || r.Result != "False" || r.ContextID == first.ContextID || e.record(t, "", "s").SandboxID == sb {
		t.Errorf("after its sandbox failed: %+v", r)
	}
}

func TestDelete(t *testing.T) {
	e := newEnv(t)
	e.execute(t, bg, api.SessionExecuteRequest{Code: "1", SessionID: "d"})
	sb := e.record(t, "", "d").SandboxID
	if err := e.svc.Delete(bg, "d"); err != nil {
		t.Fatal(err)
	}
	if e.SandboxExists(t, sb) || len(e.Contexts(t)) != 0 || len(e.sessions(t)) != 0 {
		t.Error("left after delete")
	}
	checkErr(t, e.svc.Delete(bg, "d"), errdefs.ErrNotFound, api.CodeSessionNotFound)
}

func TestFiles(t *testing.T) {
	e := newEnv(t)
	fi, info, err := e.svc.WriteFile(bg, Target{SessionID: "f"}, "dir/a.txt", strings.NewReader("hello"))
	if err != nil || fi.Path != "/workspace/dir/a.txt" || fi.Size != 5 || info == nil || !info.Created {
		t.Fatalf("write: %+v %+v %v", fi, info, err)
	}
	data, info, err := e.svc.ReadFile(bg, Target{SessionID: "f"}, "/workspace/dir/a.txt", 100)
	if err != nil || string(data) != "hello" || info.Created {
		t.Errorf("read: %q %+v %v", data, info, err)
	}
	if _, _, err := e.svc.ReadFile(bg, Target{SessionID: "f"}, "dir/a.txt", 4); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("read past the limit: %v", err)
	}
	list, _, err := e.svc.ListFiles(bg, Target{SessionID: "f"}, "dir")
	if err != nil || len(list) != 1 || list[0].Name != "a.txt" {
		t.Errorf("list: %+v %v", list, err)
	}
	if r := e.execute(t, bg, api.SessionExecuteRequest{Code: "open('dir/a.txt').read()", SessionID: "f"}); r.Result != "'hello'" {
		t.Errorf("the code's view: %+v", r)
	}
	sb := e.record(t, "", "f").SandboxID
	if data, info, err := e.svc.ReadFile(bg, Target{SandboxID: sb}, "dir/a.txt", 100); err != nil || string(data) != "hello" || info != nil {
		t.Errorf("read by sandbox: %q %+v %v", data, info, err)
	}
	_, _, err = e.svc.ReadFile(bg, Target{SessionID: "f"}, "nope", 100)
	checkErr(t, err, errdefs.ErrNotFound, api.CodeFileNotFound)
	_, _, err = e.svc.ListFiles(bg, Target{SessionID: "f"}, "nope")
	checkErr(t, err, errdefs.ErrNotFound, api.CodeFileNotFound)
	for _, bad := range []Target{{}, {SessionID: "f", SandboxID: sb}} {
		_, _, err := e.svc.ListFiles(bg, bad, "/")
		checkErr(t, err, errdefs.ErrInvalidArgument, "")
	}
	_, _, err = e.svc.WriteFile(bg, Target{SessionID: "f"}, "../escape", strings.NewReader("x"))
	checkErr(t, err, errdefs.ErrInvalidArgument, "")
	if _, err := e.svc.SessionSandbox(bg, "nosuch"); !errors.Is(err, errdefs.ErrNotFound) || len(e.sessions(t)) != 1 {
		t.Errorf("SessionSandbox of an unknown session: %v (sessions %v)", err, e.sessions(t))
	}
}

// TestReadsMakeNoSession: a file read or list naming a session that does
// not exist, or whose sandbox is not running, is SESSION_NOT_FOUND and
// changes nothing: no session is made (nor made and removed), no record
// touched; a write makes the session.
func TestReadsMakeNoSession(t *testing.T) {
	rec := &records{}
	e := newEnv(t, func(su *setup) { su.log = slog.New(rec) })
	e.execute(t, bg, api.SessionExecuteRequest{Code: "1", SessionID: "dead"})
	sb := e.record(t, "", "dead").SandboxID
	if _, err := e.St.UpdateSandbox(bg, sb, func(s *store.Sandbox) error {
		s.Status = string(api.StatusFailed)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	before := e.record(t, "", "dead")
	read := func(id string) error {
		_, _, err := e.svc.ReadFile(bg, Target{SessionID: id}, "a.txt", 100)
		return err
	}
	list := func(id string) error {
		_, _, err := e.svc.ListFiles(bg, Target{SessionID: id}, "/workspace")
		return err
	}
	for _, tt := range []struct {
		name, id string
		op       func(id string) error
	}{
		{"read of an unknown session", "nosuch", read},
		{"list of an unknown session", "nosuch", list},
		{"read of a session whose sandbox failed", "dead", read},
		{"list of a session whose sandbox failed", "dead", list},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rec.clear()
			checkErr(t, tt.op(tt.id), errdefs.ErrNotFound, api.CodeSessionNotFound)
			if l, ok := rec.find("session created", "session="+tt.id+" "); ok {
				t.Errorf("the read made a session: %s", l)
			}
			if l, ok := rec.find("session removed", "session="+tt.id+" "); ok {
				t.Errorf("the read removed a session: %s", l)
			}
			if got := e.sessions(t); !slices.Equal(got, []string{before.Key}) {
				t.Errorf("sessions after the read: %v", got)
			}
			if got := e.record(t, "", "dead"); !reflect.DeepEqual(got, before) {
				t.Errorf("the session's record after the read:\n%+v\nwant\n%+v", got, before)
			}
		})
	}
	// A write makes the session it names.
	if _, info, err := e.svc.WriteFile(bg, Target{SessionID: "nosuch"}, "a.txt", strings.NewReader("x")); err != nil || !info.Created {
		t.Errorf("write to an unknown session: %+v %v", info, err)
	}
}

func TestWarmPoolSession(t *testing.T) {
	pool := &fakePool{}
	e := newEnv(t, func(su *setup) { su.pool = pool })
	pool.e = e
	r := e.execute(t, bg, api.SessionExecuteRequest{Code: "1 + 1", SessionID: "warm"})
	if !r.Created || r.Result != "2" || r.ContextID != pool.kernel {
		t.Errorf("first execution of a warm session: %+v (warm kernel %s)", r, pool.kernel)
	}
	// A command-only session stops the warm kernel it did not use; a
	// flavor other than the pool's makes a sandbox of its own.
	pool.kernel = ""
	c, _, err := e.svc.ExecuteCommand(bg, api.SessionCommandRequest{Command: api.CommandLine{Shell: "true"}, SessionID: "cmd"}, nil)
	if err != nil || !c.Created {
		t.Fatalf("command: %+v %v", c, err)
	}
	if ks := e.Kernels(t, e.record(t, "", "cmd").SandboxID); len(ks) != 0 {
		t.Errorf("kernels left in a command session: %v", ks)
	}
	taken := pool.taken
	e.execute(t, bg, api.SessionExecuteRequest{Code: "1", SessionID: "big", Flavor: "medium"})
	if pool.taken != taken {
		t.Error("a medium session took a warm sandbox of the small flavor")
	}
}

// fakePool makes a sandbox with a started python kernel on every Take.
type fakePool struct {
	e      *env
	kernel string
	taken  int
}

func (p *fakePool) Take(ctx context.Context, source, owner string) (contexts.Warm, bool) {
	sb, err := p.e.M.Create(ctx, manager.CreateRequest{Image: "agent2env/code-interpreter", ManagedBy: owner})
	if err != nil {
		return contexts.Warm{}, false
	}
	id := contexts.NewID()
	ac, err := p.e.M.Agent(ctx, sb.ID)
	if err == nil {
		_, err = ac.CreateKernel(ctx, agent.KernelSpec{ID: id, Language: source, Cwd: sandbox.WorkDir})
	}
	if err != nil {
		return contexts.Warm{}, false
	}
	p.kernel = id
	p.taken++
	return contexts.Warm{Sandbox: sb, KernelID: id, Language: source}, true
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}
