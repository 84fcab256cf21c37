package manager

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/image"
	"github.com/agent2env/agent2env/internal/runtime/fakeruntime"
	"github.com/agent2env/agent2env/internal/store"
	"github.com/agent2env/agent2env/internal/store/sqlite"
)

// These tests run real in-process agents (package fakeruntime), whose
// reaper waits for every child of the process: nothing here may use
// os/exec.

// fakeImages is an Images whose Ensure can be held back or made to fail.
// Images have no layers.
type fakeImages struct {
	mu      sync.Mutex
	present map[string]bool
	getErr  error         // returned by Get instead of looking
	gate    chan struct{} // when set, Ensure waits for it to close
	delay   time.Duration // Ensure sleeps this long first
	failErr error         // returned by Ensure after the wait
	ensures int
}

func newFakeImages(present ...string) *fakeImages {
	f := &fakeImages{present: map[string]bool{}}
	for _, ref := range present {
		f.present[ref] = true
	}
	return f
}

// testImage is the image every fake ref resolves to.
func testImage(ref string) *image.Image {
	return &image.Image{Ref: ref, Config: image.Config{Env: []string{"FROM_IMAGE=yes", "HOME=/root"}}}
}

func (f *fakeImages) Get(ctx context.Context, ref string) (*image.Image, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.getErr != nil {
		return nil, f.getErr
	}
	if !f.present[ref] {
		return nil, errdefs.NotFound("image %s not found", ref)
	}
	return testImage(ref), nil
}

func (f *fakeImages) Ensure(ctx context.Context, ref string, p image.ProgressFunc) (*image.Image, error) {
	f.mu.Lock()
	f.ensures++
	gate, delay := f.gate, f.delay
	f.mu.Unlock()
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failErr != nil {
		return nil, f.failErr
	}
	f.present[ref] = true
	return testImage(ref), nil
}

func (f *fakeImages) ensureCalls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ensures
}

// clock is a settable time source for Manager.now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// epoch is the fake clock's start.
var epoch = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// fullStore is a store whose sandbox record updates fail, as on a full
// disk, while full is set; a test may see each update first (onUpdate).
type fullStore struct {
	store.Store
	full     atomic.Bool
	refused  atomic.Int32 // updates refused
	onUpdate atomic.Pointer[func(id string, evs []store.Event)]
}

func (s *fullStore) UpdateSandbox(ctx context.Context, id string, fn func(*store.Sandbox) error, evs ...store.Event) (*store.Sandbox, error) {
	if f := s.onUpdate.Load(); f != nil {
		(*f)(id, evs)
	}
	if s.full.Load() {
		s.refused.Add(1)
		return nil, errdefs.NoSpace(errors.New("commit write: database or disk is full (13)"))
	}
	return s.Store.UpdateSandbox(ctx, id, fn, evs...)
}

// env is a manager over a fake runtime with fake images and a real sqlite
// store (whose updates fail while st.full is set), with a fake clock.
type env struct {
	m     *Manager
	rt    *fakeruntime.Runtime
	imgs  *fakeImages
	st    *fullStore
	clock *clock
}

// newEnv returns an env whose images hold "alpine" and everything cleaned
// up when the test ends.
func newEnv(t *testing.T, cfg Config) *env {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	imgs := newFakeImages("alpine")
	rt := fakeruntime.New(fakeruntime.WithImages(imgs))
	e := &env{rt: rt, imgs: imgs, st: &fullStore{Store: st}, clock: &clock{t: epoch}}
	e.m = newManager(cfg, e)
	t.Cleanup(func() {
		e.m.Close()
		if err := rt.Close(); err != nil {
			t.Errorf("close runtime: %v", err)
		}
		st.Close()
	})
	return e
}

// newManager returns a manager on e's runtime, images, store and clock, as
// a restarted daemon would have.
func newManager(cfg Config, e *env) *Manager {
	if cfg.StartTimeout == 0 {
		cfg.StartTimeout = 10 * time.Second
	}
	if cfg.Host == (Host{}) { // not the test machine's: tests make many sandboxes
		cfg.Host = Host{MilliCPU: 1 << 20, MemoryBytes: 1 << 50}
	}
	m := New(cfg, e.rt, e.st, slog.New(slog.DiscardHandler))
	m.now = e.clock.Now
	return m
}

func (e *env) create(t *testing.T, req CreateRequest) *store.Sandbox {
	t.Helper()
	if req.Image == "" && req.Template == "" {
		req.Image = "alpine"
	}
	sb, err := e.m.Create(context.Background(), req)
	if err != nil {
		t.Fatalf("create %+v: %v", req, err)
	}
	return sb
}

// running creates a running sandbox.
func (e *env) running(t *testing.T) string {
	t.Helper()
	sb := e.create(t, CreateRequest{})
	if sb.Status != string(api.StatusRunning) {
		t.Fatalf("new sandbox is %s (%s), want running", sb.Status, sb.Reason)
	}
	return sb.ID
}

// waitStatus polls until sandbox id has status, and returns it.
func (e *env) waitStatus(t *testing.T, id string, status api.SandboxStatus) *store.Sandbox {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		sb, err := e.m.Get(context.Background(), id)
		if err == nil && sb.Status == string(status) {
			return sb
		}
		if time.Now().After(deadline) {
			if err != nil {
				t.Fatalf("sandbox %s: %v, want %s", id, err, status)
			}
			t.Fatalf("sandbox %s is %s (%s), want %s", id, sb.Status, sb.Reason, status)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// records returns the ids of every record.
func (e *env) records(t *testing.T) []string {
	t.Helper()
	all, err := e.st.ListSandboxes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ids := []string{}
	for _, sb := range all {
		ids = append(ids, sb.ID)
	}
	return ids
}

// checkErr fails the test unless err is of class and carries code (when
// code is not empty).
func checkErr(t *testing.T, err, class error, code string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want %v (%s)", class, code)
	}
	if !errors.Is(err, class) {
		t.Errorf("error %q is not %v", err, class)
	}
	if code != "" && errdefs.Code(err) != code {
		t.Errorf("error %q has code %q, want %q", err, errdefs.Code(err), code)
	}
}
