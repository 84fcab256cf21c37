package session

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/contexts"
	"github.com/agent2env/agent2env/internal/manager"
	"github.com/agent2env/agent2env/internal/pool"
	"github.com/agent2env/agent2env/internal/store"
)

// poolFunc is a contexts.Pool that is a func, for a pool built after the
// service that takes from it.
type poolFunc func(ctx context.Context, source, owner string) (contexts.Warm, bool)

func (f poolFunc) Take(ctx context.Context, source, owner string) (contexts.Warm, bool) {
	return f(ctx, source, owner)
}

// TestWarmSandboxOwner: a sandbox that a session or a context takes from a
// real warm pool is marked with its owner, as one made for them is, so
// the reaper sees it as theirs: once nothing refers to it, it is an
// orphan and goes.
func TestWarmSandboxOwner(t *testing.T) {
	var pools *pool.Pools
	e := newEnv(t, func(su *setup) {
		su.pool = poolFunc(func(ctx context.Context, source, owner string) (contexts.Warm, bool) {
			return pools.Take(ctx, source, owner)
		})
	})
	pools, err := pool.New(e.M, []pool.Spec{{Name: api.LanguagePython, Size: 2, Language: api.LanguagePython,
		Request: manager.CreateRequest{Image: "agent2env/code-interpreter"}}}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(bg)
	done := make(chan struct{})
	go func() {
		defer close(done)
		pools.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		if err := pools.Close(bg); err != nil {
			t.Error(err)
		}
	})
	ready := func() {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); pools.Stats()[0].Ready < 2; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("warm pool not filled: %+v", pools.Stats())
			}
		}
	}
	ready()
	r := e.execute(t, bg, api.SessionExecuteRequest{Code: "1", SessionID: "s"})
	ready()
	c := e.create(t, api.CreateContextRequest{Language: api.LanguagePython})
	if st := pools.Stats()[0]; st.Hits != 2 {
		t.Fatalf("the session and the context did not take from the pool: %+v", st)
	}
	sessionSandbox := e.record(t, "", r.SessionID).SandboxID
	for id, owner := range map[string]string{sessionSandbox: ManagedBy, c.SandboxID: contexts.ManagedBy} {
		if sb, err := e.St.GetSandbox(bg, id); err != nil || sb.ManagedBy != owner || sb.Pool != "" {
			t.Errorf("claimed sandbox %s: %+v %v, want managed by %s", id, sb, err, owner)
		}
	}
	// The session's records go, as a crash may leave it: its sandbox is an
	// orphan once past the grace period.
	if err := e.St.DeleteSession(bg, store.SessionKey("", r.SessionID)); err != nil {
		t.Fatal(err)
	}
	for _, id := range e.Contexts(t) {
		if e.Context(t, id).SandboxID == sessionSandbox {
			if err := e.St.DeleteContext(bg, id); err != nil {
				t.Fatal(err)
			}
		}
	}
	e.clock.Add(6 * time.Minute)
	if r, err := e.svc.Reap(bg); err != nil || r.Orphans != 1 {
		t.Errorf("reap: %+v %v, want the session's warm sandbox as the one orphan", r, err)
	}
	if e.SandboxExists(t, sessionSandbox) || !e.SandboxExists(t, c.SandboxID) {
		t.Errorf("after the reap: session's sandbox exists %v, context's %v; want false, true",
			e.SandboxExists(t, sessionSandbox), e.SandboxExists(t, c.SandboxID))
	}
}
