package pool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/agent"
	"github.com/agent2env/agent2env/internal/contexts"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/manager"
	"github.com/agent2env/agent2env/internal/sandbox"
	"github.com/agent2env/agent2env/internal/store"
)

// fakeManager is a Manager that makes sandbox records in memory. Its
// agent, when set, is a client of a fake agent (see fakeAgent).
type fakeManager struct {
	mu       sync.Mutex
	n        int
	version  int                     // TemplateVersion of the sandboxes it makes from templates
	failures []error                 // returned by the next CreatePooled calls, in turn
	gone     bool                    // the template is deleted: CreatePooled fails
	hold     chan struct{}           // when set, CreatePooled waits for it before it returns
	allow    int                     // when > 0, CreatePooled calls past this many block until ctx is done
	creates  []string                // pool names, per CreatePooled call
	reqs     []manager.CreateRequest // requests, per CreatePooled call
	live     map[string]*store.Sandbox
	dead     map[string]bool // Claim fails for these
	claimed  []string
	deleted  []string
	agent    *agent.Client // nil: Agent fails
	onClaim  func()        // when set, Claim calls it first
}

func newFakeManager() *fakeManager {
	return &fakeManager{live: map[string]*store.Sandbox{}, dead: map[string]bool{}}
}

func (f *fakeManager) CreatePooled(ctx context.Context, req manager.CreateRequest, pool string) (*store.Sandbox, error) {
	f.mu.Lock()
	f.creates = append(f.creates, pool)
	f.reqs = append(f.reqs, req)
	if len(f.failures) > 0 {
		err := f.failures[0]
		f.failures = f.failures[1:]
		f.mu.Unlock()
		return nil, err
	}
	if f.allow > 0 && len(f.creates) > f.allow {
		f.mu.Unlock()
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if f.gone {
		f.mu.Unlock()
		return nil, errdefs.WithCode(errdefs.NotFound("template %q not found", req.Template), api.CodeTemplateNotFound)
	}
	f.n++
	if hold := f.hold; hold != nil {
		f.mu.Unlock()
		<-hold
		f.mu.Lock()
	}
	sb := &store.Sandbox{
		ID: fmt.Sprintf("sb-%d", f.n), Image: req.Image, Template: req.Template,
		Status: string(api.StatusRunning), Pool: pool, CPU: "1", Memory: "1Gi",
	}
	if req.Template != "" {
		sb.TemplateVersion = f.version
	}
	f.live[sb.ID] = sb
	f.mu.Unlock()
	c := *sb
	return &c, nil
}

func (f *fakeManager) Claim(ctx context.Context, id string, c manager.Claim) (*store.Sandbox, error) {
	if f.onClaim != nil {
		f.onClaim()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	sb, ok := f.live[id]
	if !ok {
		return nil, errdefs.NotFound("sandbox %s not found", id)
	}
	if f.dead[id] || sb.Pool == "" {
		return nil, errdefs.Precondition("sandbox %s is not a running pooled sandbox", id)
	}
	if _, bad := c.Metadata["invalid"]; bad {
		return nil, errdefs.Invalid("metadata key invalid is not valid")
	}
	sb.Pool, sb.ManagedBy, sb.Metadata = "", c.Owner, c.Metadata
	if c.TTL != nil {
		sb.TTL = *c.TTL
	}
	f.claimed = append(f.claimed, id)
	out := *sb
	return &out, nil
}

func (f *fakeManager) DeletePooled(ctx context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	sb, ok := f.live[id]
	if !ok {
		return errdefs.NotFound("sandbox %s not found", id)
	}
	if sb.Pool == "" {
		return errdefs.Precondition("sandbox %s is no longer in a warm pool", id)
	}
	delete(f.live, id)
	f.deleted = append(f.deleted, id)
	return nil
}

func (f *fakeManager) PooledAgent(ctx context.Context, id string) (*agent.Client, error) {
	f.mu.Lock()
	pooled := f.live[id] != nil && f.live[id].Pool != ""
	f.mu.Unlock()
	if !pooled {
		return nil, errdefs.Precondition("sandbox %s is not a running pooled sandbox", id)
	}
	return f.Agent(ctx, id)
}

func (f *fakeManager) Agent(ctx context.Context, id string) (*agent.Client, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.agent == nil {
		return nil, errdefs.Precondition("sandbox %s has no agent here", id)
	}
	return f.agent, nil
}

func (f *fakeManager) setDead(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dead[id] = true
}

// calls returns copies of what the fake recorded.
func (f *fakeManager) calls() (creates, claimed, deleted []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string{}, f.creates...), append([]string{}, f.claimed...), append([]string{}, f.deleted...)
}

func (f *fakeManager) createCount(pool string) int {
	creates, _, _ := f.calls()
	n := 0
	for _, p := range creates {
		if p == pool {
			n++
		}
	}
	return n
}

var quiet = slog.New(slog.DiscardHandler)

func newPools(t *testing.T, m Manager, specs ...Spec) *Pools {
	t.Helper()
	p, err := New(m, specs, quiet)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return p
}

// run runs p until stop is called (or the test ends), then Closes it.
func run(t *testing.T, p *Pools) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.Run(ctx)
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				t.Errorf("Run did not return after its context ended")
			}
		})
	}
	t.Cleanup(func() {
		stop()
		_ = p.Close(context.Background())
	})
	return stop
}

func stats(p *Pools, name string) Stats {
	for _, s := range p.Stats() {
		if s.Name == name {
			return s
		}
	}
	return Stats{Name: "<none>"}
}

// waitReady waits until pool name has n sandboxes ready.
func waitReady(t *testing.T, p *Pools, name string, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for stats(p, name).Ready != n {
		if time.Now().After(deadline) {
			t.Fatalf("pool %s: %+v, want %d ready", name, stats(p, name), n)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func TestNew(t *testing.T) {
	ttl := 0
	tests := []struct {
		name    string
		specs   []Spec
		wantErr string // "" for none
	}{
		{"none", nil, ""},
		{"sizes 0 and more", []Spec{{Name: "a", Size: 0}, {Name: "b", Size: 3}}, ""},
		{"duplicate", []Spec{{Name: "a", Size: 1}, {Name: "a", Size: 2}}, "twice"},
		{"negative size", []Spec{{Name: "a", Size: -1}}, "size"},
		{"no name", []Spec{{Size: 1}}, "name"},
		{"cpu", []Spec{{Name: "a", Size: 1, Request: manager.CreateRequest{Image: "x", CPU: "1"}}}, "overrides"},
		{"memory", []Spec{{Name: "a", Size: 1, Request: manager.CreateRequest{Image: "x", Memory: "1Gi"}}}, "overrides"},
		{"ttl", []Spec{{Name: "a", Size: 1, Request: manager.CreateRequest{Image: "x", TTL: &ttl}}}, "overrides"},
		{"env", []Spec{{Name: "a", Size: 1, Request: manager.CreateRequest{Image: "x", Env: map[string]string{"A": "1"}}}}, "overrides"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := New(newFakeManager(), tt.specs, nil)
			if tt.wantErr == "" {
				if err != nil || p == nil {
					t.Fatalf("New: %v", err)
				}
				if got := len(p.Stats()); got != len(tt.specs) {
					t.Errorf("%d pools, want %d", got, len(tt.specs))
				}
				return
			}
			if err == nil {
				t.Fatalf("New accepted %+v", tt.specs)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error %q lacks %q", err, tt.wantErr)
			}
		})
	}
}

func TestRunFills(t *testing.T) {
	m := newFakeManager()
	specs := []Spec{
		{Name: "a", Size: 2, Request: manager.CreateRequest{Image: "img-a"}},
		{Name: "b", Size: 3, Request: manager.CreateRequest{Template: "tpl-b"}},
		{Name: "none", Size: 0, Request: manager.CreateRequest{Image: "img-none"}},
	}
	p := newPools(t, m, specs...)
	run(t, p)
	for _, s := range specs {
		waitReady(t, p, s.Name, s.Size)
	}
	time.Sleep(50 * time.Millisecond) // nothing more is made
	for _, s := range specs {
		if got := m.createCount(s.Name); got != s.Size {
			t.Errorf("pool %s: %d sandboxes made, want %d", s.Name, got, s.Size)
		}
		if st := stats(p, s.Name); st.Ready != s.Size || st.Size != s.Size || st.Hits != 0 || st.Misses != 0 {
			t.Errorf("pool %s: %+v", s.Name, st)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, pool := range m.creates {
		want := map[string]manager.CreateRequest{"a": specs[0].Request, "b": specs[1].Request}[pool]
		if !reflect.DeepEqual(m.reqs[i], want) {
			t.Errorf("pool %s made %+v, want %+v", pool, m.reqs[i], want)
		}
	}
	for id, sb := range m.live {
		if sb.Pool == "" {
			t.Errorf("sandbox %s made for no pool", id)
		}
	}
}

func TestTake(t *testing.T) {
	m := newFakeManager()
	p := newPools(t, m, Spec{Name: "py", Size: 2, Request: manager.CreateRequest{Image: "img"}})
	run(t, p)
	waitReady(t, p, "py", 2)

	w, ok := p.Take(context.Background(), "py", "")
	if !ok {
		t.Fatal("Take of a full pool: none")
	}
	if w.Sandbox == nil || w.Sandbox.ID != "sb-1" || w.Sandbox.Pool != "" || w.KernelID != "" || w.Language != "" {
		t.Errorf("Take: %+v (sandbox %+v), want sb-1 claimed, no kernel", w, w.Sandbox)
	}
	if _, claimed, _ := m.calls(); !reflect.DeepEqual(claimed, []string{"sb-1"}) {
		t.Errorf("claimed %v, want [sb-1]", claimed)
	}
	if st := stats(p, "py"); st.Hits != 1 || st.Misses != 0 {
		t.Errorf("after a hit: %+v", st)
	}
	// What was taken is made again.
	waitReady(t, p, "py", 2)
	if got := m.createCount("py"); got != 3 {
		t.Errorf("%d sandboxes made, want 3 (2 and a refill)", got)
	}

	// An unknown pool is neither a hit nor a miss.
	if w, ok := p.Take(context.Background(), "nosuch", ""); ok || w.Sandbox != nil {
		t.Errorf("Take of an unknown pool: %+v %v", w, ok)
	}
	if st := stats(p, "py"); st.Hits != 1 || st.Misses != 0 {
		t.Errorf("after an unknown pool: %+v", st)
	}
}

func TestTakeEmptyMisses(t *testing.T) {
	m := newFakeManager()
	m.allow = 1 // one sandbox, then the refill hangs
	p := newPools(t, m, Spec{Name: "py", Size: 1, Request: manager.CreateRequest{Image: "img"}})
	run(t, p)
	waitReady(t, p, "py", 1)
	ctx := context.Background()
	if _, ok := p.Take(ctx, "py", ""); !ok {
		t.Fatal("first Take: none")
	}
	for range 3 {
		if w, ok := p.Take(ctx, "py", ""); ok {
			t.Fatalf("Take of an empty pool: %+v", w)
		}
	}
	if st := stats(p, "py"); st.Hits != 1 || st.Misses != 3 || st.Ready != 0 {
		t.Errorf("stats %+v, want 1 hit, 3 misses", st)
	}

	// A pool that never ran is empty too.
	q := newPools(t, newFakeManager(), Spec{Name: "py", Size: 1, Request: manager.CreateRequest{Image: "img"}})
	if _, ok := q.Take(ctx, "py", ""); ok {
		t.Error("Take of a pool never filled: got one")
	}
	if st := stats(q, "py"); st.Misses != 1 {
		t.Errorf("stats %+v, want 1 miss", st)
	}
}

func TestTakeDropsDead(t *testing.T) {
	tests := []struct {
		name     string
		dead     []string
		want     string // "" for a miss
		wantGone []string
	}{
		{"first died", []string{"sb-1"}, "sb-2", []string{"sb-1"}},
		{"all died", []string{"sb-1", "sb-2", "sb-3"}, "", []string{"sb-1", "sb-2", "sb-3"}},
		{"none died", nil, "sb-1", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newFakeManager()
			m.allow = 3 // no refill
			p := newPools(t, m, Spec{Name: "py", Size: 3, Request: manager.CreateRequest{Image: "img"}})
			run(t, p)
			waitReady(t, p, "py", 3)
			for _, id := range tt.dead {
				m.setDead(id)
			}
			w, ok := p.Take(context.Background(), "py", "")
			if tt.want == "" {
				if ok {
					t.Fatalf("Take: %+v, want none", w.Sandbox)
				}
			} else if !ok || w.Sandbox.ID != tt.want {
				t.Fatalf("Take: %+v %v, want %s", w.Sandbox, ok, tt.want)
			}
			_, claimed, deleted := m.calls()
			if !reflect.DeepEqual(deleted, tt.wantGone) && !(len(deleted) == 0 && len(tt.wantGone) == 0) {
				t.Errorf("deleted %v, want %v", deleted, tt.wantGone)
			}
			if tt.want != "" && !reflect.DeepEqual(claimed, []string{tt.want}) {
				t.Errorf("claimed %v, want [%s]", claimed, tt.want)
			}
			st := stats(p, "py")
			wantHits, wantMisses := uint64(1), uint64(0)
			if tt.want == "" {
				wantHits, wantMisses = 0, 1
			}
			if st.Hits != wantHits || st.Misses != wantMisses {
				t.Errorf("stats %+v, want %d hits %d misses", st, wantHits, wantMisses)
			}
			if want := 3 - len(tt.wantGone) - int(wantHits); st.Ready != want {
				t.Errorf("%d ready, want %d", st.Ready, want)
			}
		})
	}
}

func TestTakeSandbox(t *testing.T) {
	ttl0, ttl60 := 0, 60
	tests := []struct {
		name string
		req  manager.CreateRequest
		want string // pool taken from, "" for none
	}{
		// The manager resolves the version first (manager
		// TestCreateAsksPoolForResolvedVersion): one left unresolved is
		// none the pool has.
		{"template, version unresolved", manager.CreateRequest{Template: "web"}, ""},
		{"template, its version", manager.CreateRequest{Template: "web", TemplateVersion: 3}, "web"},
		{"template, another version", manager.CreateRequest{Template: "web", TemplateVersion: 2}, ""},
		{"template, a later version", manager.CreateRequest{Template: "web", TemplateVersion: 4}, ""},
		{"image", manager.CreateRequest{Image: "alpine"}, "alpine"},
		{"another image", manager.CreateRequest{Image: "ubuntu"}, ""},
		{"another template", manager.CreateRequest{Template: "other"}, ""},
		{"template and image", manager.CreateRequest{Template: "web", Image: "alpine"}, ""},
		{"nothing", manager.CreateRequest{}, ""},
		{"other cpu", manager.CreateRequest{Template: "web", TemplateVersion: 3, CPU: "2"}, ""},
		{"other memory", manager.CreateRequest{Template: "web", TemplateVersion: 3, Memory: "512Mi"}, ""},
		// The amounts the pool's sandboxes have (they have 1 cpu, 1Gi).
		{"same cpu and memory", manager.CreateRequest{Image: "alpine", CPU: "1000m", Memory: "1024Mi"}, "alpine"},
		{"disk", manager.CreateRequest{Image: "alpine", Disk: "1Gi"}, ""},
		// The claim sets the request's TTL and metadata on what it takes
		// (manager TestTTLFromPool, TestMetadataFromPool).
		{"ttl 0", manager.CreateRequest{Template: "web", TemplateVersion: 3, TTL: &ttl0}, "web"},
		{"ttl", manager.CreateRequest{Image: "alpine", TTL: &ttl60}, "alpine"},
		{"metadata", manager.CreateRequest{Image: "alpine", Metadata: map[string]string{"run": "7"}}, "alpine"},
		// A claim refused for what it asks leaves the sandbox in its pool.
		{"metadata the claim refuses", manager.CreateRequest{Image: "alpine", Metadata: map[string]string{"invalid": "x"}}, ""},
		{"env", manager.CreateRequest{Image: "alpine", Env: map[string]string{"A": "1"}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newFakeManager()
			m.version = 3
			m.allow = 2 // no refill
			p := newPools(t, m,
				Spec{Name: "web", Size: 1, Request: manager.CreateRequest{Template: "web"}},
				Spec{Name: "alpine", Size: 1, Request: manager.CreateRequest{Image: "alpine"}})
			run(t, p)
			waitReady(t, p, "web", 1)
			waitReady(t, p, "alpine", 1)
			before := map[string]Stats{"web": stats(p, "web"), "alpine": stats(p, "alpine")}

			sb, ok := p.TakeSandbox(context.Background(), tt.req)
			_, claimed, _ := m.calls()
			if tt.want == "" {
				if ok || sb != nil {
					t.Fatalf("TakeSandbox(%+v): %+v, want none", tt.req, sb)
				}
				if len(claimed) != 0 {
					t.Errorf("claimed %v", claimed)
				}
				for name, st := range before {
					if got := stats(p, name); got.Ready != st.Ready || got.Hits != 0 {
						t.Errorf("pool %s: %+v", name, got)
					}
				}
				return
			}
			if !ok || sb == nil {
				t.Fatalf("TakeSandbox(%+v): none, want one of %s", tt.req, tt.want)
			}
			if sb.Pool != "" || !reflect.DeepEqual(claimed, []string{sb.ID}) {
				t.Errorf("sandbox %+v not claimed (claimed %v)", sb, claimed)
			}
			if (tt.req.TTL != nil && sb.TTL != *tt.req.TTL) || !maps.Equal(sb.Metadata, tt.req.Metadata) {
				t.Errorf("claimed %+v, want the request's TTL and metadata", sb)
			}
			if st := stats(p, tt.want); st.Ready != 0 || st.Hits != 1 {
				t.Errorf("pool %s: %+v, want 0 ready, 1 hit", tt.want, st)
			}
		})
	}
}

// TestTakeSandboxCountsOnce: a create a pool could not serve is one miss
// of the pool, however the take failed, on a daemon's own pools or on a
// shared store.
func TestTakeSandboxCountsOnce(t *testing.T) {
	refused := map[string]string{"invalid": "x"}
	tests := []struct {
		name   string
		shared bool
		req    manager.CreateRequest
		hits   uint64
		misses uint64
	}{
		{"taken", false, manager.CreateRequest{Template: "web", TemplateVersion: 1}, 1, 0},
		{"another version", false, manager.CreateRequest{Template: "web", TemplateVersion: 2}, 0, 1},
		{"claim refused", false, manager.CreateRequest{Template: "web", TemplateVersion: 1, Metadata: refused}, 0, 1},
		{"shared, taken", true, manager.CreateRequest{Template: "web", TemplateVersion: 1}, 1, 0},
		{"shared, claim refused", true, manager.CreateRequest{Template: "web", TemplateVersion: 1, Metadata: refused}, 0, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newFakeManager()
			m.version = 1
			spec := Spec{Name: "web", Size: 1, Request: manager.CreateRequest{Template: "web"}}
			var opts []Option
			if tt.shared {
				opts = append(opts, WithSharedStore(pooled{m}))
			}
			p, err := New(m, []Spec{spec}, quiet, opts...)
			if err != nil {
				t.Fatal(err)
			}
			if tt.shared {
				if _, err := m.CreatePooled(context.Background(), spec.Request, "web"); err != nil {
					t.Fatal(err)
				}
			} else {
				m.allow = 1 // no refill
				run(t, p)
				waitReady(t, p, "web", 1)
			}
			p.TakeSandbox(context.Background(), tt.req)
			if st := stats(p, "web"); st.Hits != tt.hits || st.Misses != tt.misses {
				t.Errorf("stats %+v, want %d hits, %d misses", st, tt.hits, tt.misses)
			}
		})
	}
}

// readyVersions returns the template versions of the sandboxes ready in
// pool name, in order, once they are want (or fails the test).
func readyVersions(t *testing.T, p *Pools, name string, want []int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		wp := p.pools[name]
		wp.mu.Lock()
		var got []int
		for _, e := range wp.ready {
			got = append(got, e.sandbox.TemplateVersion)
		}
		wp.mu.Unlock()
		if slices.Equal(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pool %s holds versions %v, want %v", name, got, want)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestTemplateChanged: when a pool's template changes, the sandboxes it
// holds are retired (deleted) and it refills with the template as it now
// is: none while it is deleted. Other pools are left alone.
func TestTemplateChanged(t *testing.T) {
	tests := []struct {
		name     string
		changed  string // the template that changes
		gone     bool   // it is deleted
		versions []int  // what the web pool then holds
		retired  int    // sandboxes deleted
	}{
		{"new version", "web", false, []int{2, 2}, 2},
		{"deleted", "web", true, nil, 2},
		{"a template without a pool", "none", false, []int{1, 1}, 0},
		{"another pool's template", "other", false, []int{1, 1}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newFakeManager()
			m.version = 1
			p := newPools(t, m,
				Spec{Name: "web", Size: 2, Request: manager.CreateRequest{Template: "web"}},
				Spec{Name: "other", Size: 1, Request: manager.CreateRequest{Template: "other"}})
			run(t, p)
			readyVersions(t, p, "web", []int{1, 1})
			waitReady(t, p, "other", 1)
			m.mu.Lock()
			m.version, m.gone = 2, tt.gone
			m.mu.Unlock()

			p.TemplateChanged(context.Background(), tt.changed)
			readyVersions(t, p, "web", tt.versions)
			p.stops.Wait() // the retiring is done
			if _, _, deleted := m.calls(); len(deleted) != tt.retired {
				t.Errorf("deleted %v, want %d retired", deleted, tt.retired)
			}
			if sb, ok := p.TakeSandbox(context.Background(), manager.CreateRequest{Template: "web", TemplateVersion: 1}); ok != (tt.changed != "web") {
				t.Errorf("take of version 1: %+v, %v; want one only if web did not change", sb, ok)
			}
		})
	}
}

// TestTemplateChangedWhileMaking: a sandbox being made as its template
// changes is of the version before: it is deleted once made, not kept.
func TestTemplateChangedWhileMaking(t *testing.T) {
	m := newFakeManager()
	m.version = 1
	m.hold = make(chan struct{})
	p := newPools(t, m, Spec{Name: "web", Size: 1, Request: manager.CreateRequest{Template: "web"}})
	run(t, p)
	for m.createCount("web") == 0 {
		time.Sleep(2 * time.Millisecond)
	}
	m.mu.Lock()
	m.version = 2
	hold := m.hold
	m.hold = nil
	m.mu.Unlock()
	p.TemplateChanged(context.Background(), "web")
	close(hold) // the first, of version 1, is made now
	readyVersions(t, p, "web", []int{2})
	if _, _, deleted := m.calls(); !slices.Equal(deleted, []string{"sb-1"}) {
		t.Errorf("deleted %v, want the sandbox of version 1, sb-1", deleted)
	}
}

// TestRefusedClaimComesBack: a sandbox whose claim is refused for what the
// request asks goes back to its pool, unless the pool no longer wants it:
// its template changed during the claim, or the pool refilled its place
// or is refilling it. The pool holds its size of the latest version.
func TestRefusedClaimComesBack(t *testing.T) {
	tests := []struct {
		name string
		// during runs in the claim of sb-1, the oldest ready sandbox.
		during   func(t *testing.T, m *fakeManager, p *Pools) (after func())
		versions []int    // what the pool then holds
		deleted  []string // the sandboxes retired
	}{
		{name: "nothing happens", during: func(*testing.T, *fakeManager, *Pools) func() { return nil },
			versions: []int{1, 1}},
		{name: "the template changes", versions: []int{2, 2}, deleted: []string{"sb-1", "sb-2"},
			during: func(t *testing.T, m *fakeManager, p *Pools) func() {
				m.mu.Lock()
				m.version = 2
				m.mu.Unlock()
				p.TemplateChanged(context.Background(), "web")
				return nil
			}},
		{name: "the pool refilled its place", versions: []int{1, 1}, deleted: []string{"sb-1"},
			during: func(t *testing.T, m *fakeManager, p *Pools) func() {
				p.pools["web"].refill <- struct{}{}
				waitReady(t, p, "web", 2)
				return nil
			}},
		{name: "the pool is refilling its place", versions: []int{1, 1}, deleted: []string{"sb-3"},
			during: func(t *testing.T, m *fakeManager, p *Pools) func() {
				hold := make(chan struct{})
				m.mu.Lock()
				m.hold = hold
				m.mu.Unlock()
				p.pools["web"].refill <- struct{}{}
				for m.createCount("web") < 3 {
					time.Sleep(2 * time.Millisecond)
				}
				return func() { close(hold) }
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newFakeManager()
			m.version = 1
			p := newPools(t, m, Spec{Name: "web", Size: 2, Request: manager.CreateRequest{Template: "web"}})
			run(t, p)
			readyVersions(t, p, "web", []int{1, 1})
			var after func()
			m.onClaim = func() { after = tt.during(t, m, p) }
			req := manager.CreateRequest{Template: "web", TemplateVersion: 1, Metadata: map[string]string{"invalid": ""}}
			if sb, ok := p.TakeSandbox(context.Background(), req); ok {
				t.Fatalf("took %+v with a claim that is refused", sb)
			}
			if after != nil {
				after()
			}
			readyVersions(t, p, "web", tt.versions)
			deadline := time.Now().Add(5 * time.Second)
			for {
				p.stops.Wait()
				_, _, deleted := m.calls()
				slices.Sort(deleted)
				if slices.Equal(deleted, tt.deleted) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("deleted %v, want %v", deleted, tt.deleted)
				}
				time.Sleep(2 * time.Millisecond)
			}
			readyVersions(t, p, "web", tt.versions)
		})
	}
}

// pooled lists and counts the fake's pooled sandboxes as a shared store
// does (Lister), oldest first.
type pooled struct{ *fakeManager }

func (l pooled) ListSandboxPage(_ context.Context, f store.SandboxFilter, p store.Page) ([]*store.Sandbox, string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []*store.Sandbox
	for i := 1; i <= l.n; i++ {
		sb, ok := l.live[fmt.Sprintf("sb-%d", i)]
		if !ok || sb.Pool != f.Pool || (len(f.Statuses) > 0 && !slices.Contains(f.Statuses, sb.Status)) {
			continue
		}
		c := *sb
		out = append(out, &c)
	}
	if p.Limit > 0 && len(out) > p.Limit {
		out = out[:p.Limit]
	}
	return out, "", nil
}

func (l pooled) CountSandboxes(ctx context.Context, f store.SandboxFilter) (int, error) {
	sbs, _, err := l.ListSandboxPage(ctx, f, store.Page{})
	return len(sbs), err
}

// TestTakeSandboxSharedVersion: on a shared store a pool may hold
// sandboxes of two versions of its template (one made as the template
// changed); a create gets one of the version it asks for, whichever is
// oldest, or none.
func TestTakeSandboxSharedVersion(t *testing.T) {
	tests := []struct {
		version int
		want    string // "" for none
	}{
		{2, "sb-2"},
		{1, "sb-1"},
		{3, ""},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint("version ", tt.version), func(t *testing.T) {
			m := newFakeManager()
			spec := Spec{Name: "web", Size: 2, Request: manager.CreateRequest{Template: "web"}}
			for _, v := range []int{1, 2} { // oldest first
				m.version = v
				if _, err := m.CreatePooled(context.Background(), spec.Request, "web"); err != nil {
					t.Fatal(err)
				}
			}
			p, err := New(m, []Spec{spec}, quiet, WithSharedStore(pooled{m}))
			if err != nil {
				t.Fatal(err)
			}
			sb, ok := p.TakeSandbox(context.Background(), manager.CreateRequest{Template: "web", TemplateVersion: tt.version})
			_, claimed, _ := m.calls()
			if tt.want == "" {
				if ok || len(claimed) != 0 {
					t.Fatalf("took %+v (claimed %v), want none", sb, claimed)
				}
				return
			}
			if !ok || sb.ID != tt.want || sb.TemplateVersion != tt.version || !reflect.DeepEqual(claimed, []string{tt.want}) {
				t.Fatalf("took %+v, %v (claimed %v), want %s", sb, ok, claimed, tt.want)
			}
		})
	}
}

// TestTakeSandboxSameSource: two pools make the same sandboxes (the
// default sources of python and bash are both agent2env/python); a create
// must be served by whichever has one ready, whatever the map order.
func TestTakeSandboxSameSource(t *testing.T) {
	tests := []struct {
		name  string
		sizes [2]int
	}{
		{"other pool size 0", [2]int{1, 0}},
		{"other pool empty", [2]int{1, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for i := range 20 { // map order varies
				m := newFakeManager()
				m.allow = 1 // only the first pool's sandbox
				p := newPools(t, m,
					Spec{Name: "python", Size: tt.sizes[0], Request: manager.CreateRequest{Image: "agent2env/python"}},
					Spec{Name: "bash", Size: tt.sizes[1], Request: manager.CreateRequest{Image: "agent2env/python"}})
				stop := run(t, p)
				deadline := time.Now().Add(5 * time.Second)
				for stats(p, "python").Ready+stats(p, "bash").Ready != 1 {
					if time.Now().After(deadline) {
						t.Fatalf("pools never filled: %+v", p.Stats())
					}
					time.Sleep(2 * time.Millisecond)
				}
				sb, ok := p.TakeSandbox(context.Background(), manager.CreateRequest{Image: "agent2env/python"})
				stop()
				if !ok || sb == nil {
					t.Fatalf("try %d: no sandbox, though one is ready: %+v", i, p.Stats())
				}
			}
		})
	}
}

func TestClose(t *testing.T) {
	m := newFakeManager()
	p := newPools(t, m,
		Spec{Name: "a", Size: 2, Request: manager.CreateRequest{Image: "a"}},
		Spec{Name: "b", Size: 1, Request: manager.CreateRequest{Image: "b"}})
	stop := run(t, p)
	waitReady(t, p, "a", 2)
	waitReady(t, p, "b", 1)
	w, ok := p.Take(context.Background(), "a", "")
	if !ok {
		t.Fatal("Take: none")
	}
	waitReady(t, p, "a", 2)
	stop()
	if err := p.Close(context.Background()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.live) != 1 || m.live[w.Sandbox.ID] == nil {
		t.Errorf("after Close, live %v: want only the claimed %s", m.live, w.Sandbox.ID)
	}
	if len(m.deleted) != 3 {
		t.Errorf("deleted %v, want the 3 ready", m.deleted)
	}
	for _, s := range p.Stats() {
		if s.Ready != 0 {
			t.Errorf("after Close: %+v", s)
		}
	}
}

func TestCloseReportsErrors(t *testing.T) {
	m := newFakeManager()
	p := newPools(t, m, Spec{Name: "a", Size: 1, Request: manager.CreateRequest{Image: "a"}})
	stop := run(t, p)
	waitReady(t, p, "a", 1)
	stop()
	m.mu.Lock()
	m.live = map[string]*store.Sandbox{} // Delete now fails: not found
	m.mu.Unlock()
	if err := p.Close(context.Background()); err == nil {
		t.Error("Close hid a failed delete")
	}
}

func TestMetrics(t *testing.T) {
	m := newFakeManager()
	p := newPools(t, m,
		Spec{Name: "a", Size: 2, Request: manager.CreateRequest{Image: "a"}},
		Spec{Name: "b", Size: 1, Request: manager.CreateRequest{Image: "b"}})
	stop := run(t, p)
	waitReady(t, p, "a", 2)
	waitReady(t, p, "b", 1)
	stop() // no refills from here
	ctx := context.Background()
	for _, name := range []string{"a", "b", "b", "b"} {
		p.Take(ctx, name, "")
	}
	want := `# HELP agent2env_pool_ready Sandboxes ready in the warm pool.
# TYPE agent2env_pool_ready gauge
agent2env_pool_ready{pool="a"} 1
agent2env_pool_ready{pool="b"} 0
# HELP agent2env_pool_target Sandboxes the warm pool keeps ready.
# TYPE agent2env_pool_target gauge
agent2env_pool_target{pool="a"} 2
agent2env_pool_target{pool="b"} 1
# HELP agent2env_pool_hits_total Requests served from the warm pool.
# TYPE agent2env_pool_hits_total counter
agent2env_pool_hits_total{pool="a"} 1
agent2env_pool_hits_total{pool="b"} 1
# HELP agent2env_pool_misses_total Requests the warm pool could not serve.
# TYPE agent2env_pool_misses_total counter
agent2env_pool_misses_total{pool="a"} 0
agent2env_pool_misses_total{pool="b"} 2
`
	// Through a registry, as /metrics serves them: a collector that
	// described its metrics wrongly fails here.
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(p)
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Error(err)
	}

	// No pools: no samples.
	if n := testutil.CollectAndCount(newPools(t, m)); n != 0 {
		t.Errorf("no pools, yet %d samples", n)
	}
}

func TestFillBacksOff(t *testing.T) {
	m := newFakeManager()
	m.failures = []error{errors.New("no room")}
	p := newPools(t, m, Spec{Name: "a", Size: 1, Request: manager.CreateRequest{Image: "a"}})
	start := time.Now()
	run(t, p)
	deadline := time.Now().Add(4 * time.Second)
	for stats(p, "a").Ready != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("pool never recovered: %+v, %d creates", stats(p, "a"), m.createCount("a"))
		}
		time.Sleep(5 * time.Millisecond)
	}
	if d := time.Since(start); d < 900*time.Millisecond {
		t.Errorf("refilled %v after a failure: no back-off", d)
	}
	if got := m.createCount("a"); got != 2 {
		t.Errorf("%d creates, want 2 (a failure, then a success)", got)
	}
}

func TestFillStopsWhileBackingOff(t *testing.T) {
	m := newFakeManager()
	m.failures = []error{errors.New("no room"), errors.New("no room")}
	p := newPools(t, m, Spec{Name: "a", Size: 1, Request: manager.CreateRequest{Image: "a"}})
	stop := run(t, p)
	deadline := time.Now().Add(2 * time.Second)
	for m.createCount("a") == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no create")
		}
		time.Sleep(time.Millisecond)
	}
	start := time.Now()
	stop()
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Errorf("Run took %v to stop while backing off", d)
	}
}

// fakeAgent answers the kernel requests of a pool: creates (or refuses
// them with code), deletes; it records them.
type fakeAgent struct {
	mu      sync.Mutex
	code    string // error code of kernel creates ("" succeeds)
	created []agent.KernelSpec
	deleted []string
}

func (a *fakeAgent) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/kernels":
		var spec agent.KernelSpec
		if err := json.NewDecoder(r.Body).Decode(&spec); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		a.created = append(a.created, spec)
		w.Header().Set("Content-Type", "application/json")
		if a.code != "" {
			w.WriteHeader(http.StatusBadRequest)
			json.NewEncoder(w).Encode(map[string]string{"error": "no " + spec.Language, "code": a.code})
			return
		}
		w.WriteHeader(http.StatusCreated)
		json.NewEncoder(w).Encode(agent.KernelInfo{ID: spec.ID, Language: spec.Language})
	case r.Method == http.MethodDelete && strings.HasPrefix(r.URL.Path, "/v1/kernels/"):
		a.deleted = append(a.deleted, strings.TrimPrefix(r.URL.Path, "/v1/kernels/"))
		w.WriteHeader(http.StatusNoContent)
	default:
		http.NotFound(w, r)
	}
}

func (a *fakeAgent) calls() ([]agent.KernelSpec, []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]agent.KernelSpec{}, a.created...), append([]string{}, a.deleted...)
}

func startFakeAgent(t *testing.T, code string) (*fakeAgent, *agent.Client) {
	t.Helper()
	fa := &fakeAgent{code: code}
	ts := httptest.NewServer(fa)
	t.Cleanup(ts.Close)
	addr := ts.Listener.Addr().String()
	var d net.Dialer
	c := agent.NewClient(func(ctx context.Context) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }, "")
	t.Cleanup(c.Close)
	return fa, c
}

func TestKernels(t *testing.T) {
	t.Run("started and handed out", func(t *testing.T) {
		fa, ac := startFakeAgent(t, "")
		m := newFakeManager()
		m.agent = ac
		m.allow = 2
		p := newPools(t, m, Spec{Name: "python", Size: 2, Language: "python", Request: manager.CreateRequest{Image: "agent2env/python"}})
		run(t, p)
		waitReady(t, p, "python", 2)
		created, _ := fa.calls()
		if len(created) != 2 {
			t.Fatalf("kernels created: %+v, want 2", created)
		}
		for _, spec := range created {
			if spec.Language != "python" || spec.Cwd != sandbox.WorkDir || !strings.HasPrefix(spec.ID, "ctx-") {
				t.Errorf("kernel spec %+v", spec)
			}
		}
		w, ok := p.Take(context.Background(), "python", "")
		if !ok || w.KernelID != created[0].ID || w.Language != "python" {
			t.Errorf("Take: %+v %v, want kernel %s", w, ok, created[0].ID)
		}
		// A sandbox create gets the sandbox, its kernel stopped (in the
		// background).
		sb, ok := p.TakeSandbox(context.Background(), manager.CreateRequest{Image: "agent2env/python"})
		if !ok || sb == nil {
			t.Fatal("TakeSandbox: none")
		}
		p.stops.Wait()
		if _, deleted := fa.calls(); !reflect.DeepEqual(deleted, []string{created[1].ID}) {
			t.Errorf("kernels deleted %v, want [%s]", deleted, created[1].ID)
		}
	})
	t.Run("no interpreter", func(t *testing.T) {
		_, ac := startFakeAgent(t, "NO_INTERPRETER")
		m := newFakeManager()
		m.agent = ac
		m.allow = 1
		p := newPools(t, m, Spec{Name: "python", Size: 1, Language: "python", Request: manager.CreateRequest{Image: "plain"}})
		run(t, p)
		waitReady(t, p, "python", 1)
		w, ok := p.Take(context.Background(), "python", "")
		if !ok || w.KernelID != "" {
			t.Errorf("Take: %+v %v, want a sandbox without a kernel", w, ok)
		}
		if _, _, deleted := m.calls(); len(deleted) != 0 {
			t.Errorf("deleted %v", deleted)
		}
	})
	t.Run("kernel fails", func(t *testing.T) {
		for _, code := range []string{"KERNEL_FAILED", ""} {
			m := newFakeManager()
			if code != "" {
				_, m.agent = startFakeAgent(t, code)
			} // else Agent fails
			p := newPools(t, m, Spec{Name: "python", Size: 1, Language: "python", Request: manager.CreateRequest{Image: "x"}})
			stop := run(t, p)
			deadline := time.Now().Add(2 * time.Second)
			for {
				if _, _, deleted := m.calls(); len(deleted) > 0 {
					if !reflect.DeepEqual(deleted, []string{"sb-1"}) {
						t.Errorf("deleted %v, want [sb-1]", deleted)
					}
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("code %q: the sandbox whose kernel failed was not deleted", code)
				}
				time.Sleep(2 * time.Millisecond)
			}
			stop()
			if st := stats(p, "python"); st.Ready != 0 {
				t.Errorf("code %q: %+v, want none ready", code, st)
			}
		}
	})
}

func TestSpecs(t *testing.T) {
	defaults := contexts.Sources(map[string]contexts.Source{api.LanguagePython: {Template: "py-tpl"}})
	got := Specs(map[string]int{"python": 2, "javascript": 1, "web": 3, "bash": 0}, defaults)
	want := []Spec{
		{Name: "bash", Size: 0, Language: "bash", Request: manager.CreateRequest{Image: "agent2env/code-interpreter", SpareKernel: "bash"}},
		{Name: "javascript", Size: 1, Language: "javascript", Request: manager.CreateRequest{Image: "agent2env/code-interpreter", SpareKernel: "javascript"}},
		{Name: "python", Size: 2, Language: "python", Request: manager.CreateRequest{Template: "py-tpl", SpareKernel: "python"}},
		{Name: "web", Size: 3, Language: "python", Request: manager.CreateRequest{Template: "web", SpareKernel: "python"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Specs:\n got %+v\nwant %+v", got, want)
	}
	if got := Specs(nil, defaults); len(got) != 0 {
		t.Errorf("Specs(nil): %+v", got)
	}
	if _, err := New(newFakeManager(), want, nil); err != nil {
		t.Errorf("New(Specs(...)): %v", err)
	}
}

// Fill runs one pool, as the daemon's supervisor does: it fills that pool
// only, returns when its context ends, and run again (after a failure)
// keeps what was ready instead of making it again.
func TestFill(t *testing.T) {
	m := newFakeManager()
	p := newPools(t, m, Spec{Name: "a", Size: 2, Request: manager.CreateRequest{Image: "alpine"}},
		Spec{Name: "b", Size: 1, Request: manager.CreateRequest{Image: "busybox"}})
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	if got := p.Names(); !reflect.DeepEqual(got, []string{"a", "b"}) {
		t.Errorf("Names: %v", got)
	}
	if err := p.Fill(context.Background(), "nope"); err == nil {
		t.Error("Fill of an unknown pool: no error")
	}
	for range 2 {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- p.Fill(ctx, "a") }()
		waitReady(t, p, "a", 2)
		cancel()
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("Fill after cancel: %v, want context.Canceled", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Fill did not return after its context ended")
		}
	}
	if n, other := m.createCount("a"), m.createCount("b"); n != 2 || other != 0 {
		t.Errorf("two Fills of a made %d sandboxes of a and %d of b, want 2 and 0", n, other)
	}
}
