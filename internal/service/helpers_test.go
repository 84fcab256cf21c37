package service

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/manager"
	"github.com/agent2env/agent2env/internal/runtime/fakeruntime"
	"github.com/agent2env/agent2env/internal/store/sqlite"
)

// These tests run real in-process agents (package fakeruntime), whose
// reaper waits for every child of the process: nothing here may use
// os/exec.

// templates resolves template names to specs of version 1.
type templates map[string]api.TemplateSpec

func (t templates) Resolve(ctx context.Context, name string, version int) (api.TemplateSpec, int, error) {
	spec, ok := t[name]
	if !ok {
		return api.TemplateSpec{}, 0, errdefs.WithCode(errdefs.NotFound("template '%s' not found", name), "TEMPLATE_NOT_FOUND")
	}
	return spec, 1, nil
}

// testTemplates are the templates every env knows.
var testTemplates = templates{
	"small": {Image: "alpine", Resources: api.ResourceSpec{CPU: "500m", Memory: "256Mi"}, TTL: 60},
}

// env is a Sandboxes service over a real manager, a fake runtime, an image
// store that has every image and a sqlite store.
type env struct {
	sb *Sandboxes
	m  *manager.Manager
	st *sqlite.Store
	rt *fakeruntime.Runtime
}

func newEnv(t *testing.T, publicURL string, opts ...fakeruntime.Option) *env {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	rt := fakeruntime.New(opts...)
	m := manager.New(manager.Config{StartTimeout: 10 * time.Second, ExecOutputLimit: 1000}, rt, st,
		slog.New(slog.DiscardHandler), manager.WithTemplates(testTemplates))
	t.Cleanup(func() {
		m.Close()
		if err := rt.Close(); err != nil {
			t.Errorf("close runtime: %v", err)
		}
		st.Close()
	})
	return &env{sb: NewSandboxes(m, publicURL), m: m, st: st, rt: rt}
}

// running creates a running sandbox from "alpine".
func (e *env) running(t *testing.T) *api.Sandbox {
	t.Helper()
	sb, err := e.sb.Create(context.Background(), api.CreateSandboxRequest{Image: "alpine"})
	if err != nil {
		t.Fatal(err)
	}
	if sb.Status != api.StatusRunning {
		t.Fatalf("new sandbox is %s (%s), want running", sb.Status, sb.Reason)
	}
	return sb
}

// checkErr fails the test unless err is of class (nil: no error) and
// carries code (when code is not empty).
func checkErr(t *testing.T, err, class error, code string) {
	t.Helper()
	if class == nil {
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return
	}
	if !errors.Is(err, class) {
		t.Fatalf("error %v, want class %v", err, class)
	}
	if code != "" && errdefs.Code(err) != code {
		t.Errorf("error %v has code %q, want %q", err, errdefs.Code(err), code)
	}
}

func ptr[T any](v T) *T { return &v }
