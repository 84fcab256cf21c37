package session

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/auth"
	"github.com/agent2env/agent2env/internal/contexts"
	"github.com/agent2env/agent2env/internal/contexts/contextstest"
	"github.com/agent2env/agent2env/internal/manager"
	"github.com/agent2env/agent2env/internal/runtime"
	"github.com/agent2env/agent2env/internal/store"
)

// These tests run the service over the real contexts service and manager
// of package contextstest. Nothing here may start processes with os/exec:
// the in-process agents' reaper waits for every child.

var bg = context.Background()

var checkErr = contextstest.CheckErr

// clock is a settable time.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// env is a session service over real contexts and manager services.
type env struct {
	*contextstest.Env
	svc   *Service
	ctxs  *contexts.Service
	clock *clock
}

// setup configures what newEnv builds.
type setup struct {
	cfg    Config
	mgr    manager.Config
	images runtime.Images
	pool   contexts.Pool
	log    *slog.Logger // nil: discarded
}

func newEnv(t *testing.T, opts ...func(*setup)) *env {
	t.Helper()
	su := setup{mgr: manager.Config{Host: manager.Host{MilliCPU: 64000, MemoryBytes: 256 << 30}}}
	for _, o := range opts {
		o(&su)
	}
	ce := contextstest.NewEnv(t, su.mgr, su.images)
	log := su.log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	// Contexts share the manager's output budget, as in the daemon.
	ctxs := contexts.New(contexts.Config{ReadyTimeout: 10 * time.Second, Outputs: ce.M.OutputBudget()}, ce.M, ce.St, su.pool, log)
	c := &clock{now: time.Now().UTC().Truncate(time.Microsecond)} // as the store keeps times
	svc, err := New(su.cfg, ce.M, ce.St, ctxs, log, WithClock(c.Now))
	if err != nil {
		t.Fatal(err)
	}
	ctxs.SetSessions(svc)
	return &env{Env: ce, svc: svc, ctxs: ctxs, clock: c}
}

// as returns a context of tenant's requests.
func as(tenant string) context.Context { return auth.WithTenant(bg, tenant) }

func (e *env) execute(t *testing.T, ctx context.Context, req api.SessionExecuteRequest) *api.SessionExecuteResponse {
	t.Helper()
	resp, release, err := e.svc.ExecuteCode(ctx, req, nil)
	if err != nil {
		t.Fatalf("execute %+v: %v", req, err)
	}
	release()
	return resp
}

func (e *env) create(t *testing.T, req api.CreateContextRequest) *api.Context {
	t.Helper()
	c, err := e.ctxs.Create(bg, req)
	if err != nil {
		t.Fatalf("create context %+v: %v", req, err)
	}
	return c
}

func (e *env) exec(t *testing.T, id, code string) *api.ExecuteResponse {
	t.Helper()
	resp, err := e.ctxs.Execute(bg, id, api.ExecuteRequest{Code: code})
	if err != nil {
		t.Fatalf("execute %q: %v", code, err)
	}
	resp.Release()
	return resp.ExecuteResponse
}

// sessions returns the keys of every session record.
func (e *env) sessions(t *testing.T) []string {
	t.Helper()
	all, err := e.St.ListSessions(bg, store.SessionFilter{AllTenants: true})
	if err != nil {
		t.Fatal(err)
	}
	keys := []string{}
	for _, s := range all {
		keys = append(keys, s.Key)
	}
	return keys
}

func (e *env) record(t *testing.T, tenant, id string) *store.Session {
	t.Helper()
	s, err := e.St.GetSession(bg, store.SessionKey(tenant, id))
	if err != nil {
		t.Fatalf("session record %s/%s: %v", tenant, id, err)
	}
	return s
}
