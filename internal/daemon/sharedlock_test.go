package daemon

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/manager"
	"github.com/agent2env/agent2env/internal/runtime/fakeruntime"
)

// A sandbox deleted through one daemon while another stops it: the
// deletion waits for the stop (the sandbox's lock holds among the
// daemons), then removes it; the runtime never has the two at once.
func TestSandboxLockAcrossDaemons(t *testing.T) {
	ctx := context.Background()
	ds := startShared(t, nil)
	ds[0].importTiny()
	sb := ds[0].create(api.CreateSandboxRequest{Image: tinyRef})
	rt := ds[0].sys.cfg.runtime.(*fakeruntime.Runtime)
	var stopping, overlapped atomic.Bool
	entered, release := make(chan struct{}), make(chan struct{})
	rt.SetHooks(fakeruntime.Hooks{
		Stop: func(context.Context, string) error {
			stopping.Store(true)
			close(entered)
			<-release
			stopping.Store(false)
			return nil
		},
		Delete: func(context.Context, string) error {
			overlapped.Store(overlapped.Load() || stopping.Load())
			return nil
		},
	})
	stopped := make(chan error, 1)
	go func() {
		_, err := ds[0].sys.Manager.Stop(ctx, sb.ID)
		stopped <- err
	}()
	<-entered
	deleted := make(chan error, 1)
	go func() { deleted <- ds[1].api.Sandbox.Delete(ctx, sb.ID) }()
	select {
	case err := <-deleted:
		t.Fatalf("deleted through the other daemon while a stop held the sandbox: %v", err)
	case <-time.After(500 * time.Millisecond):
	}
	close(release)
	if err := <-stopped; err != nil {
		t.Errorf("stop: %v", err)
	}
	if err := <-deleted; err != nil {
		t.Errorf("delete after the stop: %v", err)
	}
	if overlapped.Load() {
		t.Error("the runtime deleted the sandbox while stopping it")
	}
	if _, err := ds[0].sys.Store.GetSandbox(ctx, sb.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("the sandbox's record after the delete: %v; want none", err)
	}
}

// A sandbox another daemon is creating is left alone by the leader's
// sweep while that daemon lives; once it is gone (killed mid-create: its
// leases no longer renewed), the leader fails the pending record, saying
// why, and deletes its runtime side.
func TestUnmadeSandboxReclaimed(t *testing.T) {
	ctx := context.Background()
	ds := startShared(t, nil)
	ds[1].importTiny()
	for !ds[0].sys.Leader.Leading() && !ds[1].sys.Leader.Leading() {
		time.Sleep(10 * time.Millisecond)
	}
	maker := ds[1]
	if maker.sys.Leader.Leading() {
		maker = ds[0]
		maker.importTiny()
	}
	rt := maker.sys.cfg.runtime.(*fakeruntime.Runtime)
	entered, release := make(chan string, 1), make(chan struct{})
	rt.SetHooks(fakeruntime.Hooks{Start: func(_ context.Context, id string) error {
		entered <- id
		<-release
		return nil
	}})
	defer close(release)
	go func() { _, _ = maker.sys.Manager.Create(ctx, manager.CreateRequest{Image: tinyRef}) }()
	id := <-entered

	time.Sleep(3 * time.Second) // the leader sweeps every second
	if sb, err := maker.sys.Store.GetSandbox(ctx, id); err != nil || sb.Status != string(api.StatusPending) {
		t.Fatalf("a sandbox being made after the leader's sweeps: %+v, %v; want it pending", sb, err)
	}

	// The maker dies: its leases are no longer renewed, and run out.
	conn, err := pgx.Connect(ctx, maker.sys.cfg.Store)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `UPDATE key_leases SET holder = 'killed', until = now() - interval '1 second' WHERE key = $1`, id); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		sb, err := maker.sys.Store.GetSandbox(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if sb.Status == string(api.StatusFailed) {
			if want := "its daemon stopped while the sandbox was being created"; !strings.Contains(sb.Reason, want) {
				t.Errorf("the reclaimed sandbox's reason: %q; want %q", sb.Reason, want)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("10 s after its maker died the sandbox is %s (%s); want failed", sb.Status, sb.Reason)
		}
	}
	if _, err := rt.Status(ctx, id); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("the reclaimed sandbox's runtime side: %v; want it deleted", err)
	}
}

// A daemon shut down with a create in flight ends it within its shutdown
// timeout: the create's start is cancelled and its sandbox failed, not
// left pending, and its locks let go, so another daemon deletes it at
// once.
func TestShutdownEndsCreates(t *testing.T) {
	ctx := context.Background()
	ds := startShared(t, nil)
	d := ds[1]
	d.importTiny()
	rt := d.sys.cfg.runtime.(*fakeruntime.Runtime)
	entered := make(chan string, 1)
	rt.SetHooks(fakeruntime.Hooks{Start: func(ctx context.Context, id string) error {
		entered <- id
		<-ctx.Done() // as a Pod that is never scheduled
		return ctx.Err()
	}})
	go func() { _, _ = d.api.Sandbox.Create(ctx, api.CreateSandboxRequest{Image: tinyRef}) }()
	id := <-entered
	stopped := time.Now()
	if err := d.stop(); err != nil {
		t.Errorf("shutdown: %v", err)
	}
	if took, limit := time.Since(stopped), d.sys.cfg.ShutdownTimeout+5*time.Second; took > limit {
		t.Errorf("shutdown with a create in flight took %v; want at most %v", took, limit)
	}
	sb, err := ds[0].sys.Store.GetSandbox(ctx, id)
	if err != nil || sb.Status != string(api.StatusFailed) {
		t.Fatalf("the sandbox being created at the shutdown: %+v, %v; want it failed", sb, err)
	}
	rt.SetHooks(fakeruntime.Hooks{})
	deleteCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := ds[0].api.Sandbox.Delete(deleteCtx, id); err != nil {
		t.Errorf("delete it through the other daemon: %v", err)
	}
}
