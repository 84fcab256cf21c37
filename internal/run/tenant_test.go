package run

import (
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/auth"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/service"
)

// A run is its submitting tenant's: no other tenant (nor "", the tenant
// without API keys) gets or lists it; the runner's own recovery and loop
// still take it up after a restart and carry it out.
func TestRunsPerTenant(t *testing.T) {
	e := newEnv(t, Config{})
	e.stop() // the run waits in the queue for the next daemon
	a, b := auth.WithTenant(bg, "tenant-a"), auth.WithTenant(bg, "tenant-b")
	batch, err := e.svc.Submit(a, api.RunSubmitRequest{Task: "name: t\nagent: custom\ngoal: g\nentrypoint: 'true'\n"})
	if err != nil {
		t.Fatal(err)
	}
	id := batch.Runs[0].ID
	svc, err := New(e.svc.cfg, service.NewSandboxes(e.M, ""), e.St, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	e.svc = svc
	e.start(t)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		r, err := e.svc.Get(a, id)
		if err != nil {
			t.Fatal(err)
		}
		if r.Status.Final() {
			if r.Status != api.RunSucceeded {
				t.Errorf("the run after a restart: %s %s, want succeeded", r.Status, r.Reason)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run never ended: %+v", r)
		}
	}
	for name, call := range map[string]func() error{
		"get":    func() error { _, err := e.svc.Get(b, id); return err },
		"cancel": func() error { _, err := e.svc.Cancel(b, id); return err },
		"delete": func() error { return e.svc.Delete(b, id) },
		"logs":   func() error { _, err := e.svc.Logs(b, id); return err },
		"follow": func() error { return e.svc.Follow(b, id, 0, func(api.RunEvent) error { return nil }) },
		"artifact": func() error {
			_, _, err := e.svc.Artifact(b, id, "/workspace/x")
			return err
		},
		"get without a tenant": func() error { _, err := e.svc.Get(bg, id); return err },
	} {
		if err := call(); !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("another tenant's %s: %v, want ErrNotFound", name, err)
		}
	}
	for _, other := range []struct {
		name string
		list func() (*api.RunList, error)
	}{
		{"tenant-b", func() (*api.RunList, error) { return e.svc.List(b, ListOptions{}) }},
		{"no tenant", func() (*api.RunList, error) { return e.svc.List(bg, ListOptions{BatchID: batch.ID}) }},
	} {
		if l, err := other.list(); err != nil || len(l.Items) != 0 {
			t.Errorf("%s lists %+v, %v; want none", other.name, l, err)
		}
	}
	if l, err := e.svc.List(a, ListOptions{}); err != nil || len(l.Items) != 1 {
		t.Errorf("its tenant lists %+v, %v; want its run", l, err)
	}
	if err := e.svc.Delete(a, id); err != nil {
		t.Errorf("its tenant deletes it: %v", err)
	}
}
