package daemon

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/contexts"
	"github.com/agent2env/agent2env/internal/store"
)

// A warm pool of two daemons on one PostgreSQL store: the leader fills it,
// a follower claims from it (with its kernel), the leader refills what the
// follower took, and creates sent to both at once never get one sandbox
// twice.
func TestWarmPoolAcrossDaemons(t *testing.T) {
	ctx := context.Background()
	const size = 3
	ds := startShared(t, func(cfg *Config) {
		cfg.Contexts.Defaults = map[string]contexts.Source{api.LanguagePython: {Image: tinyRef}}
		cfg.WarmPools = map[string]int{api.LanguagePython: size}
	})
	for _, d := range ds {
		d.importTiny()
	}
	ready := func() int {
		n, err := ds[0].sys.Store.CountSandboxes(ctx, store.SandboxFilter{Pool: api.LanguagePython, Statuses: []string{string(api.StatusRunning)}})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	waitReady := func(want int) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); ready() != want; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("warm pool has %d ready, want %d", ready(), want)
			}
		}
	}
	waitReady(size)
	leader, follower := ds[0], ds[1]
	if !leader.sys.Leader.Leading() {
		leader, follower = follower, leader
	}
	seen := map[string]bool{}
	first := follower.create(api.CreateSandboxRequest{Image: tinyRef})
	seen[first.ID] = true
	if st := follower.sys.Pools.Stats(); len(st) != 1 || st[0].Hits != 1 {
		t.Errorf("the follower's pool after a create: %+v; want a hit", st)
	}
	// Its kernel was found and stopped: a plain sandbox runs none.
	ac, err := follower.sys.Manager.Agent(ctx, first.ID)
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		ks, err := ac.Kernels(ctx)
		if err == nil && len(ks) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("kernels in the sandbox taken from the pool: %+v, %v; want the pool's stopped", ks, err)
		}
	}
	waitReady(size) // refilled by the leader

	var (
		mu  sync.Mutex
		got []string
		wg  sync.WaitGroup
	)
	for i := range 2 * size {
		wg.Go(func() {
			sb, err := ds[i%2].api.Sandbox.Create(ctx, api.CreateSandboxRequest{Image: tinyRef})
			if err != nil {
				t.Errorf("create %d on daemon %d: %v", i, i%2, err)
				return
			}
			mu.Lock()
			got = append(got, sb.ID)
			mu.Unlock()
		})
	}
	wg.Wait()
	for _, id := range got {
		if seen[id] {
			t.Errorf("sandbox %s handed out twice (%v)", id, got)
		}
		seen[id] = true
		sb, err := ds[0].sys.Store.GetSandbox(ctx, id)
		if err != nil || sb.Pool != "" {
			t.Errorf("created sandbox %s: %+v, %v; want it out of the pool", id, sb, err)
		}
	}
	var hits uint64
	for _, d := range ds {
		hits += d.sys.Pools.Stats()[0].Hits
	}
	if hits < 1+size {
		t.Errorf("pool hits on both daemons: %d; want at least %d (the follower's first, then every ready one)", hits, 1+size)
	}
}
