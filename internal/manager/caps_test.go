package manager

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

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

// A persistent sandbox keeps its files across a stop on a runtime with
// Persistence, whose other sandboxes lose theirs: it starts again, they
// do not.
func TestStartPersistent(t *testing.T) {
	e := templateEnv(t, fakeTemplates{
		"persist": {Image: "alpine", Persistence: &api.PersistenceSpec{Enabled: true, Size: "64Mi"}},
		"plain":   {Image: "alpine"},
	})
	ctx := context.Background()
	e.rt.SetCapabilities(sandbox.Capabilities{Persistence: true, MaxVolumeBytes: 1 << 30})
	for _, tc := range []struct {
		template string
		wantErr  bool
	}{{"persist", false}, {"plain", true}} {
		t.Run(tc.template, func(t *testing.T) {
			sb := e.create(t, CreateRequest{Template: tc.template})
			e.waitStatus(t, sb.ID, api.StatusRunning)
			if _, err := e.m.Stop(ctx, sb.ID); err != nil {
				t.Fatal(err)
			}
			_, err := e.m.Start(ctx, sb.ID)
			if tc.wantErr {
				checkErr(t, err, errdefs.ErrFailedPrecondition, api.CodeConflict)
				return
			}
			if err != nil {
				t.Fatalf("Start of a stopped persistent sandbox: %v", err)
			}
			e.waitStatus(t, sb.ID, api.StatusRunning)
		})
	}
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

// A template's persistence and runtime class reach the runtime's spec
// when it can honour them, and are refused, naming the field, when not.
func TestPersistenceAndRuntimeClass(t *testing.T) {
	persist := &api.PersistenceSpec{Enabled: true, Mode: "rootfs-overlay", Size: "64Mi", ReclaimPolicy: "Retain"}
	classed := *persist
	classed.StorageClassName = "fast"
	e := templateEnv(t, fakeTemplates{
		"persist":  {Image: "alpine", Persistence: persist},
		"classed":  {Image: "alpine", Persistence: &classed},
		"off":      {Image: "alpine", Persistence: &api.PersistenceSpec{Mode: "whatever"}},
		"gvisor":   {Image: "alpine", RuntimeClassName: "gvisor"},
		"too-big":  {Image: "alpine", Persistence: &api.PersistenceSpec{Enabled: true, Size: "2Gi", ReclaimPolicy: "Delete"}},
		"bad-size": {Image: "alpine", Persistence: &api.PersistenceSpec{Enabled: true, Size: "lots"}},
	})
	ctx := context.Background()
	all := sandbox.Capabilities{StopKeepsFiles: true, Persistence: true, StorageClass: true, RuntimeClass: true, MaxVolumeBytes: 1 << 30}
	tests := []struct {
		template string
		caps     sandbox.Capabilities
		want     *sandbox.Spec // Persistence and RuntimeClass; nil: refused
		wantErr  string
	}{
		{template: "persist", caps: all, want: &sandbox.Spec{Persistence: &sandbox.Persistence{SizeBytes: 64 << 20, Retain: true}}},
		{template: "classed", caps: all, want: &sandbox.Spec{Persistence: &sandbox.Persistence{SizeBytes: 64 << 20, StorageClass: "fast", Retain: true}}},
		{template: "off", caps: sandbox.Capabilities{}, want: &sandbox.Spec{}},
		{template: "gvisor", caps: all, want: &sandbox.Spec{RuntimeClass: "gvisor"}},
		{template: "persist", caps: sandbox.Capabilities{}, wantErr: "persistence: runtime"},
		{template: "classed", caps: sandbox.Capabilities{Persistence: true}, wantErr: `persistence.storageClassName "fast"`},
		{template: "gvisor", caps: sandbox.Capabilities{Persistence: true}, wantErr: `runtimeClassName "gvisor"`},
		{template: "too-big", caps: all, wantErr: "persistence.size 2147483648 is more than"},
		{template: "bad-size", caps: all, wantErr: "persistence.size"},
	}
	for _, tt := range tests {
		t.Run(tt.template, func(t *testing.T) {
			e.rt.SetCapabilities(tt.caps)
			before := e.rt.Calls()
			sb, err := e.m.Create(ctx, CreateRequest{Template: tt.template})
			if tt.want == nil {
				checkErr(t, err, errdefs.ErrInvalidArgument, "")
				if err != nil && !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("error %q does not say %q", err, tt.wantErr)
				}
				if calls := e.rt.Calls(); calls != before {
					t.Errorf("a refused create called the runtime: %+v, before %+v", calls, before)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			e.waitStatus(t, sb.ID, api.StatusRunning)
			spec, err := e.rt.Spec(sb.ID)
			if err != nil {
				t.Fatal(err)
			}
			got := &sandbox.Spec{Persistence: spec.Persistence, RuntimeClass: spec.RuntimeClass}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("runtime spec (-want +got):\n%s", diff)
			}
		})
	}
}

// A sandbox made from an image with a network gets that egress from the
// runtime, reports it (Network), and is never served by a warm pool's
// sandbox, which has none; with a template, a network is refused.
func TestCreateWithNetwork(t *testing.T) {
	e := templateEnv(t, fakeTemplates{"plain": {Image: "alpine"}})
	ctx := context.Background()
	e.rt.SetCapabilities(sandbox.Capabilities{NetworkPolicy: true})
	var got *sandbox.Egress
	e.rt.SetHooks(fakeruntime.Hooks{Create: func(_ context.Context, spec *sandbox.Spec) error {
		got = spec.Network.Egress
		return nil
	}})
	req := CreateRequest{Image: "alpine", Network: &api.NetworkSpec{AllowedDomains: []string{"A.Allowed.Test.", "*.pypi.org"}}}
	sb := e.create(t, req)
	sb = e.waitStatus(t, sb.ID, api.StatusRunning)
	want := &sandbox.Egress{AllowedDomains: []string{"a.allowed.test", "*.pypi.org"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("runtime egress (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(&api.NetworkSpec{AllowedDomains: want.AllowedDomains}, Network(sb)); diff != "" {
		t.Errorf("Network (-want +got):\n%s", diff)
	}
	if req.Fits(sb) {
		t.Error("a request with a network fits a sandbox of the same image")
	}

	plain := e.create(t, CreateRequest{Image: "alpine"})
	if n := Network(plain); n != nil {
		t.Errorf("Network of a sandbox without one: %+v", n)
	}
	for _, bad := range []CreateRequest{
		{Template: "plain", Network: &api.NetworkSpec{AllowedDomains: []string{"example.com"}}},
		{Image: "alpine", Network: &api.NetworkSpec{AllowedDomains: []string{"http://example.com/"}}},
	} {
		_, err := e.m.Create(ctx, bad)
		checkErr(t, err, errdefs.ErrInvalidArgument, "")
	}
	e.rt.SetCapabilities(sandbox.Capabilities{})
	_, err := e.m.Create(ctx, req)
	checkErr(t, err, errdefs.ErrInvalidArgument, "")
}
