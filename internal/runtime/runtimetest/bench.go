package runtimetest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/agent2env/agent2env/internal/agent"
	"github.com/agent2env/agent2env/internal/sandbox"
)

// Benchmark measures what every runtime does, so that runtimes compare in
// one go test -bench run: "start" is Create and Start of a sandbox of
// newSpec (its image already prepared: one sandbox is started before the
// timer) until its agent answers, "exec" a round trip of `true` in a
// running sandbox. Each reports its median and 90th percentile as p50-ms
// and p90-ms beside ns/op.
func Benchmark(b *testing.B, rt sandbox.Runtime, newSpec func(id string) *sandbox.Spec) {
	ctx := context.Background()
	start := func(b *testing.B) (string, *agent.Client) {
		b.Helper()
		sp := newSpec(newID(b))
		sp.Resources = testResources
		c := started(b, rt, sp)
		if _, err := c.Info(ctx); err != nil {
			b.Fatalf("the agent of %s: %v", sp.ID, err)
		}
		return sp.ID, c
	}
	_, c := start(b) // the image prepared, pulled or unpacked
	b.Run("start", func(b *testing.B) {
		var took []time.Duration
		for b.Loop() {
			t0 := time.Now()
			id, _ := start(b)
			took = append(took, time.Since(t0))
			b.StopTimer()
			if err := rt.Delete(ctx, id); err != nil {
				b.Fatalf("Delete: %v", err)
			}
			b.StartTimer()
		}
		ReportPercentiles(b, took)
	})
	b.Run("exec", func(b *testing.B) {
		var took []time.Duration
		for b.Loop() {
			t0 := time.Now()
			res, err := c.Exec(ctx, agent.ExecRequest{Command: []string{"true"}}, nil, nil, nil)
			if err != nil || res.ExitCode != 0 {
				b.Fatalf("exec true: %+v, %v", res, err)
			}
			took = append(took, time.Since(t0))
		}
		ReportPercentiles(b, took)
	})
}

// ReportPercentiles reports the median and the 90th percentile of took,
// in milliseconds, as the metrics p50-ms and p90-ms.
func ReportPercentiles(b *testing.B, took []time.Duration) {
	if len(took) == 0 {
		return
	}
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(took[len(took)*90/100].Microseconds())/1000, "p90-ms")
}
