package manager

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/metrics"
	"github.com/agent2env/agent2env/internal/metrics/metricstest"
	"github.com/agent2env/agent2env/internal/store"
)

// gauges reads the sandbox gauges of mt: by status, and "pooled".
func gauges(t *testing.T, mt *metrics.Metrics) map[string]float64 {
	t.Helper()
	fams, err := mt.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range fams {
		switch f.GetName() {
		case "agent2env_sandboxes":
			for _, m := range f.GetMetric() {
				got[m.GetLabel()[0].GetValue()] = m.GetGauge().GetValue()
			}
		case "agent2env_sandboxes_pooled":
			got["pooled"] = f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	return got
}

// checkGauges fails the test unless the gauges count the records as they
// are in the store.
func checkGauges(t *testing.T, e *env, mt *metrics.Metrics, step string) {
	t.Helper()
	want := map[string]float64{"pending": 0, "running": 0, "paused": 0, "succeeded": 0, "failed": 0, "terminating": 0, "pooled": 0}
	all, err := e.st.ListSandboxes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, sb := range all {
		if sb.Pool != "" {
			want["pooled"]++
		} else {
			want[sb.Status]++
		}
	}
	if diff := cmp.Diff(want, gauges(t, mt)); diff != "" {
		t.Errorf("%s: gauges differ from the records (-records +gauges):\n%s", step, diff)
	}
}

// TestSandboxGauges: the gauges count the records after Recover and after
// every status change, pooled sandboxes apart.
func TestSandboxGauges(t *testing.T) {
	e := newEnv(t, Config{})
	ctx := context.Background()
	// Left by a previous daemon: one running, one stopped, one pooled.
	kept := e.running(t)
	stopped := e.running(t)
	if _, err := e.m.Stop(ctx, stopped); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.CreatePooled(ctx, CreateRequest{Image: "alpine"}, "p"); err != nil {
		t.Fatal(err)
	}
	e.m.Close()

	mt := metrics.New()
	e.m = New(Config{StartTimeout: 10 * time.Second}, e.rt, e.st, slog.New(slog.DiscardHandler), WithMetrics(mt))
	e.m.now = e.clock.Now
	if err := mt.Register(e.m); err != nil {
		t.Fatal(err)
	}
	if err := e.m.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	checkGauges(t, e, mt, "recover")
	if got := gauges(t, mt); got["running"] != 1 || got["succeeded"] != 1 {
		t.Errorf("after recover: %v, want 1 running and 1 succeeded", got)
	}

	steps := []struct {
		name string
		do   func(t *testing.T)
	}{
		{"create", func(t *testing.T) { e.running(t) }},
		{"create pooled", func(t *testing.T) {
			sb, err := e.m.CreatePooled(ctx, CreateRequest{Image: "alpine"}, "p")
			if err != nil {
				t.Fatal(err)
			}
			checkGauges(t, e, mt, "pooled")
			if _, err := e.m.Claim(ctx, sb.ID, Claim{}); err != nil {
				t.Fatal(err)
			}
		}},
		{"pause", func(t *testing.T) {
			if _, err := e.m.Pause(ctx, kept); err != nil {
				t.Fatal(err)
			}
		}},
		{"stop", func(t *testing.T) {
			if _, err := e.m.Stop(ctx, kept); err != nil {
				t.Fatal(err)
			}
		}},
		{"start", func(t *testing.T) {
			if _, err := e.m.Start(ctx, stopped); err != nil {
				t.Fatal(err)
			}
			e.waitStatus(t, stopped, api.StatusRunning)
		}},
		{"create that fails", func(t *testing.T) {
			e.imgs.mu.Lock()
			e.imgs.failErr = errors.New("registry unreachable")
			e.imgs.mu.Unlock()
			sb := e.create(t, CreateRequest{Image: "elsewhere"})
			e.waitStatus(t, sb.ID, api.StatusFailed)
		}},
		{"expire", func(t *testing.T) {
			e.create(t, CreateRequest{TTL: ptr(10)})
			e.clock.Advance(11 * time.Second)
			e.m.sweep(ctx)
		}},
		{"delete all", func(t *testing.T) {
			for _, id := range e.records(t) {
				if err := e.m.Delete(ctx, id); err != nil {
					t.Fatal(err)
				}
			}
		}},
	}
	for _, s := range steps {
		s.do(t)
		checkGauges(t, e, mt, s.name)
	}
	for name, v := range gauges(t, mt) {
		if v != 0 {
			t.Errorf("after deleting everything, %s = %v", name, v)
		}
	}
}

// TestCreateAndExecDurations: each create and exec is observed once, by
// source and outcome.
func TestCreateAndExecDurations(t *testing.T) {
	e := newEnv(t, Config{})
	mt := metrics.New()
	e.m.metrics = mt
	ctx := context.Background()
	id := e.running(t)
	e.create(t, CreateRequest{Image: "pulled"}) // pending while it is pulled
	e.m.pool = warmOne{&store.Sandbox{ID: "warm", Image: "warm", Status: string(api.StatusRunning)}}
	if sb := e.create(t, CreateRequest{Image: "warm"}); sb.ID != "warm" {
		t.Fatalf("create took %s, not the warm sandbox", sb.ID)
	}
	if _, err := e.m.Create(ctx, CreateRequest{Image: "alpine", CPU: "lots"}); err == nil {
		t.Fatal("invalid create: no error")
	}
	for _, cmd := range []ExecRequest{
		{Command: []string{"true"}},
		{Command: []string{"false"}}, // ran: an exit code is the command's business
		{Command: []string{"sleep", "5"}, Timeout: 50 * time.Millisecond},
		{Command: []string{"/no/such/command"}},
	} {
		if _, err := e.m.Exec(ctx, id, cmd); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.m.Exec(ctx, "nosuchsandbox", ExecRequest{Command: []string{"true"}}); err == nil {
		t.Fatal("exec in no sandbox: no error")
	}
	if _, err := e.m.Exec(ctx, id, ExecRequest{}); err == nil {
		t.Fatal("invalid exec: no error")
	}

	creates := map[string]uint64{
		"outcome=running,source=cold": 1,
		"outcome=pending,source=cold": 1,
		"outcome=error,source=cold":   1,
		"outcome=running,source=pool": 1,
	}
	if diff := cmp.Diff(creates, metricstest.Observations(t, mt, "agent2env_sandbox_create_duration_seconds")); diff != "" {
		t.Errorf("creates (-want +got):\n%s", diff)
	}
	execs := map[string]uint64{
		"outcome=ok":      2,
		"outcome=timeout": 1,
		// Could not start, or no sandbox to run in; invalid requests are
		// refused before anything is timed.
		"outcome=error": 2,
	}
	if diff := cmp.Diff(execs, metricstest.Observations(t, mt, "agent2env_sandbox_exec_duration_seconds")); diff != "" {
		t.Errorf("execs (-want +got):\n%s", diff)
	}
}

// warmOne is a warm pool holding one sandbox for creates from its image.
type warmOne struct{ sb *store.Sandbox }

func (w warmOne) TakeSandbox(_ context.Context, req CreateRequest) (*store.Sandbox, bool) {
	return w.sb, req.Image == w.sb.Image
}
