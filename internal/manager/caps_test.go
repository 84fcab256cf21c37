package manager

import (
	"context"
	"log/slog"
	"testing"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/runtime/fakeruntime"
	"github.com/agent2env/agent2env/internal/sandbox"
)

// What the runtime cannot do is refused with a clear error, never ignored.
func TestCapabilitiesRefused(t *testing.T) {
	e := templateEnv(t, fakeTemplates{
		"net":   {Image: "alpine", Network: &api.NetworkSpec{AllowedDomains: []string{"example.com"}}},
		"plain": {Image: "alpine"},
	})
	ctx := context.Background()
	e.rt.SetCapabilities(sandbox.Capabilities{})

	_, err := e.m.Create(ctx, CreateRequest{Template: "net"})
	checkErr(t, err, errdefs.ErrInvalidArgument, "")
	if ids := e.records(t); len(ids) != 0 {
		t.Errorf("a refused create left records %v", ids)
	}
	if calls := e.rt.Calls(); calls != (fakeruntime.Calls{}) {
		t.Errorf("a refused create called the runtime: %+v", calls)
	}

	sb := e.create(t, CreateRequest{Template: "plain"})
	e.waitStatus(t, sb.ID, api.StatusRunning)
	if _, err := e.m.Stop(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	_, err = e.m.Start(ctx, sb.ID)
	checkErr(t, err, errdefs.ErrFailedPrecondition, api.CodeConflict)
}

// A runtime that prepares no images (a cluster's nodes pull them) starts
// every sandbox at once.
func TestCreateWithoutImagePreparer(t *testing.T) {
	e := newEnv(t, Config{})
	rt := fakeruntime.New() // every image is ready
	t.Cleanup(func() { _ = rt.Close() })
	// Only the Runtime methods: no ImagePreparer.
	m := New(Config{StartTimeout: e.m.cfg.StartTimeout}, struct{ sandbox.Runtime }{rt}, e.st, slog.New(slog.DiscardHandler))
	t.Cleanup(m.Close)
	sb, err := m.Create(context.Background(), CreateRequest{Image: "python:3.12"})
	if err != nil || sb.Status != string(api.StatusRunning) {
		t.Fatalf("create = %+v, %v; want running at once", sb, err)
	}
}
