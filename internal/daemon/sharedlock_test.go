package daemon

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
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
