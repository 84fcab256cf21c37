// Package poolbench measures warm pools over a sandbox runtime, through
// the daemon's manager and pools: what runtimetest.Benchmark measures of
// the runtime alone, one layer up. It is apart from runtimetest, which
// packages below the manager use.
package poolbench

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/agent2env/agent2env/internal/manager"
	"github.com/agent2env/agent2env/internal/pool"
	"github.com/agent2env/agent2env/internal/runtime/runtimetest"
	"github.com/agent2env/agent2env/internal/sandbox"
	"github.com/agent2env/agent2env/internal/store/sqlite"
)

// Benchmark measures a warm pool over rt, through the daemon's
// sandbox manager (with its SQLite store) and pools, as serve runs them:
// "claim" takes a started sandbox of image from a pool of poolSize for a
// create, "claim+exec" is that and the first `exec true` in it (the
// agent's first connection), "exec" a round trip of `true` in a sandbox
// claimed before. Between claims the pool refills and the claimed sandbox
// is deleted, so that every claim finds one ready.
func Benchmark(b *testing.B, rt sandbox.Runtime, image string) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "state.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	log := slog.New(slog.NewTextHandler(b.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	// Half a CPU each: the pool, the sandbox claimed and its replacement
	// fit on a test node of two.
	m := manager.New(manager.Config{DefaultCPU: "500m", DefaultMemory: "256Mi", StartTimeout: 2 * time.Minute}, rt, st, log)
	b.Cleanup(m.Close)
	const poolSize = 2
	req := manager.CreateRequest{Image: image}
	pools, err := pool.New(m, []pool.Spec{{Name: "bench", Size: poolSize, Request: req}}, log)
	if err != nil {
		b.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	filled := make(chan struct{})
	go func() {
		defer close(filled)
		pools.Run(runCtx)
	}()
	b.Cleanup(func() {
		stop()
		<-filled
		if err := pools.Close(ctx); err != nil {
			b.Error(err)
		}
	})
	waitFull := func(b *testing.B) {
		b.Helper()
		deadline := time.Now().Add(5 * time.Minute)
		for pools.Stats()[0].Ready < poolSize {
			if time.Now().After(deadline) {
				b.Fatalf("the warm pool did not fill: %+v", pools.Stats())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	claim := func(b *testing.B) string {
		b.Helper()
		sb, ok := pools.TakeSandbox(ctx, req)
		if !ok {
			b.Fatalf("no warm sandbox: %+v", pools.Stats())
		}
		return sb.ID
	}
	execTrue := func(b *testing.B, id string) {
		b.Helper()
		res, err := m.Exec(ctx, id, manager.ExecRequest{Command: []string{"true"}})
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("exec true in %s: %+v, %v", id, res, err)
		}
	}
	// The timer runs through the refills, which pace the loop (a stopped
	// timer would have b.Loop claim thousands of times); ns/op is then
	// replaced with the claims' mean.
	claimed := func(b *testing.B, exec bool) {
		var took []time.Duration
		var sum time.Duration
		for b.Loop() {
			waitFull(b)
			t0 := time.Now()
			id := claim(b)
			if exec {
				execTrue(b, id)
			}
			took = append(took, time.Since(t0))
			sum += took[len(took)-1]
			if err := m.Delete(ctx, id); err != nil {
				b.Fatalf("Delete: %v", err)
			}
		}
		b.ReportMetric(float64(sum.Nanoseconds())/float64(len(took)), "ns/op")
		runtimetest.ReportPercentiles(b, took)
	}
	waitFull(b)
	b.Run("claim", func(b *testing.B) { claimed(b, false) })
	b.Run("claim+exec", func(b *testing.B) { claimed(b, true) })
	waitFull(b)
	id := claim(b)
	execTrue(b, id)
	b.Run("exec", func(b *testing.B) {
		var took []time.Duration
		for b.Loop() {
			t0 := time.Now()
			execTrue(b, id)
			took = append(took, time.Since(t0))
		}
		runtimetest.ReportPercentiles(b, took)
	})
	if err := m.Delete(ctx, id); err != nil {
		b.Fatalf("Delete: %v", err)
	}
}
