package manager

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/runtime/fakeruntime"
	"github.com/agent2env/agent2env/internal/sandbox"
	"github.com/agent2env/agent2env/internal/store"
)

func ptr[T any](v T) *T { return &v }

func TestCreateImagePresentStartsAtOnce(t *testing.T) {
	e := newEnv(t, Config{DefaultTTL: 300})
	sb := e.create(t, CreateRequest{Image: "alpine", CPU: "500m", Memory: "256Mi", Env: map[string]string{"GREETING": "hi"}})

	exp := epoch.Add(300 * time.Second)
	want := &store.Sandbox{
		ID: sb.ID, Image: "alpine", CPU: "500m", Memory: "256Mi", TTL: 300, Env: map[string]string{"GREETING": "hi"},
		Status: "running", Reason: "agent ready", Runtime: fakeruntime.Name,
		CreatedAt: epoch, UpdatedAt: epoch, ExpiresAt: &exp, AccessToken: sb.AccessToken,
	}
	if len(sb.AccessToken) != 64 {
		t.Errorf("access token %q is not 64 hex characters", sb.AccessToken)
	}
	if diff := cmp.Diff(want, sb); diff != "" {
		t.Errorf("returned sandbox (-want +got):\n%s", diff)
	}
	got, err := e.m.Get(context.Background(), sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("stored sandbox (-want +got):\n%s", diff)
	}

	spec, err := e.rt.Spec(sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	wantSpec := &sandbox.Spec{
		ID: sb.ID, Image: "alpine",
		Env:       []string{"GREETING=hi"}, // the runtime puts it over the image's
		Cwd:       sandbox.WorkDir,
		Resources: sandbox.Resources{MilliCPU: 500, MemoryBytes: 256 << 20, Pids: 512, DiskBytes: 1 << 30},
		Labels:    map[string]string{"agent2env.image": "alpine"},
	}
	if diff := cmp.Diff(wantSpec, spec); diff != "" {
		t.Errorf("runtime spec (-want +got):\n%s", diff)
	}
	if got := e.rt.State(sb.ID); got != sandbox.StateRunning {
		t.Errorf("runtime state %q, want running", got)
	}
	if n := e.imgs.ensureCalls(); n != 0 {
		t.Errorf("Ensure called %d times for a present image", n)
	}
}

func TestCreateTTL(t *testing.T) {
	tests := []struct {
		name       string
		defaultTTL int
		ttl        *int
		wantTTL    int
	}{
		{name: "default", defaultTTL: 60, wantTTL: 60},
		{name: "no default", wantTTL: 0},
		{name: "explicit", defaultTTL: 60, ttl: ptr(5), wantTTL: 5},
		{name: "zero never expires", defaultTTL: 60, ttl: ptr(0), wantTTL: 0},
		{name: "largest", ttl: ptr(maxTTL), wantTTL: maxTTL},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, Config{DefaultTTL: tt.defaultTTL})
			sb := e.create(t, CreateRequest{TTL: tt.ttl})
			if sb.TTL != tt.wantTTL {
				t.Errorf("ttl %d, want %d", sb.TTL, tt.wantTTL)
			}
			var want *time.Time
			if tt.wantTTL > 0 {
				want = ptr(epoch.Add(time.Duration(tt.wantTTL) * time.Second))
			}
			if diff := cmp.Diff(want, sb.ExpiresAt); diff != "" {
				t.Errorf("expires at (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCreateImageAbsent(t *testing.T) {
	tests := []struct {
		name       string
		failErr    error
		want       api.SandboxStatus
		wantReason string
	}{
		{name: "ensured", want: api.StatusRunning, wantReason: "agent ready"},
		{name: "ensure fails", failErr: errors.New("registry unreachable"), want: api.StatusFailed,
			wantReason: "prepare image python:3.12: registry unreachable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, Config{})
			gate := make(chan struct{})
			e.imgs.gate, e.imgs.failErr = gate, tt.failErr

			sb := e.create(t, CreateRequest{Image: "python:3.12"})
			if sb.Status != string(api.StatusPending) {
				t.Fatalf("new sandbox is %s, want pending while the image is prepared", sb.Status)
			}
			// Nothing runs before the image is there.
			if got := e.waitStatus(t, sb.ID, api.StatusPending); got.Reason != "" {
				t.Errorf("pending reason %q", got.Reason)
			}
			if calls := e.rt.Calls(); calls.Create != 0 {
				t.Errorf("runtime Create called %d times before the image was ready", calls.Create)
			}
			close(gate)
			got := e.waitStatus(t, sb.ID, tt.want)
			if got.Reason != tt.wantReason {
				t.Errorf("reason %q, want %q", got.Reason, tt.wantReason)
			}
			wantIDs := []string{}
			if tt.want == api.StatusRunning {
				wantIDs = []string{sb.ID}
			}
			if diff := cmp.Diff(wantIDs, e.rt.IDs(), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("runtime sandboxes (-want +got):\n%s", diff)
			}
			if n := e.imgs.ensureCalls(); n != 1 {
				t.Errorf("Ensure called %d times, want 1", n)
			}
		})
	}
}

func TestCreateFailures(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name       string
		hooks      fakeruntime.Hooks
		getErr     error
		startLimit time.Duration
		wantReason string
		wantImage  bool // StartFailure is ErrImageUnavailable
		wantCalls  fakeruntime.Calls
	}{
		{
			name:       "runtime create",
			hooks:      fakeruntime.Hooks{Create: func(context.Context, *sandbox.Spec) error { return boom }},
			wantReason: "create sandbox: boom",
			wantCalls:  fakeruntime.Calls{ImageReady: 1, Create: 1},
		},
		{
			name:       "runtime start",
			hooks:      fakeruntime.Hooks{Start: func(context.Context, string) error { return boom }},
			wantReason: "start sandbox: boom",
			// The created sandbox is deleted again.
			wantCalls: fakeruntime.Calls{ImageReady: 1, Create: 1, Start: 1, Delete: 1},
		},
		{
			name: "runtime start, image not found",
			hooks: fakeruntime.Hooks{Start: func(context.Context, string) error {
				return fmt.Errorf("%w: alpine (ErrImagePull: not found)", sandbox.ErrImageNotFound)
			}},
			wantReason: "pull image alpine: image not found: alpine (ErrImagePull: not found)",
			wantImage:  true,
			wantCalls:  fakeruntime.Calls{ImageReady: 1, Create: 1, Start: 1, Delete: 1},
		},
		{
			name: "runtime start hangs",
			hooks: fakeruntime.Hooks{Start: func(ctx context.Context, _ string) error {
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(5 * time.Second):
					return errors.New("start was never cancelled")
				}
			}},
			startLimit: 50 * time.Millisecond,
			wantReason: "start sandbox: context deadline exceeded",
			wantCalls:  fakeruntime.Calls{ImageReady: 1, Create: 1, Start: 1, Delete: 1},
		},
		{
			name:       "image lookup",
			getErr:     fmt.Errorf("read image index: %w", errdefs.ErrUnavailable),
			wantReason: "look up image alpine: read image index: unavailable",
			wantImage:  true,
			wantCalls:  fakeruntime.Calls{ImageReady: 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, Config{StartTimeout: tt.startLimit})
			e.rt.SetHooks(tt.hooks)
			e.imgs.getErr = tt.getErr
			sb, err := e.m.Create(context.Background(), CreateRequest{Image: "alpine"})
			if err != nil {
				t.Fatalf("create: %v (a failed start is a failed sandbox, not an error)", err)
			}
			if sb.Status != string(api.StatusFailed) || sb.Reason != tt.wantReason {
				t.Errorf("sandbox is %s (%s), want failed (%s)", sb.Status, sb.Reason, tt.wantReason)
			}
			if got := e.waitStatus(t, sb.ID, api.StatusFailed); got.Reason != tt.wantReason {
				t.Errorf("stored reason %q, want %q", got.Reason, tt.wantReason)
			}
			if err := StartFailure(sb); errors.Is(err, ErrImageUnavailable) != tt.wantImage {
				t.Errorf("StartFailure = %v, image unavailable %v; want %v", err, !tt.wantImage, tt.wantImage)
			}
			if ids := e.rt.IDs(); len(ids) != 0 {
				t.Errorf("runtime still holds %v", ids)
			}
			if diff := cmp.Diff(tt.wantCalls, e.rt.Calls()); diff != "" {
				t.Errorf("runtime calls (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCreateDisk: a request's disk is the sandbox's disk limit, over the
// daemon's default, whether from an image or a template; a template's
// sandbox stays its owner's.
func TestCreateDisk(t *testing.T) {
	tests := []struct {
		name string
		req  CreateRequest
		want int64
	}{
		{"default", CreateRequest{Image: "alpine"}, 3 << 30},
		{"from an image", CreateRequest{Image: "alpine", Disk: "2Gi"}, 2 << 30},
		{"from a template", CreateRequest{Template: "py", Disk: "512Mi", ManagedBy: "runs"}, 512 << 20},
	}
	e := templateEnv(t, fakeTemplates{"py": {Image: "alpine"}})
	e.m.cfg.DefaultDisk = 3 << 30
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sb := e.create(t, tt.req)
			spec, err := e.rt.Spec(sb.ID)
			if err != nil {
				t.Fatal(err)
			}
			if spec.Resources.DiskBytes != tt.want {
				t.Errorf("disk limit %d, want %d", spec.Resources.DiskBytes, tt.want)
			}
			if sb.ManagedBy != tt.req.ManagedBy {
				t.Errorf("managed by %q, want %q", sb.ManagedBy, tt.req.ManagedBy)
			}
		})
	}
}

func TestCreateInvalid(t *testing.T) {
	tests := []struct {
		name string
		req  CreateRequest
	}{
		{name: "no image", req: CreateRequest{}},
		{name: "blank image", req: CreateRequest{Image: "  "}},
		{name: "bad ref", req: CreateRequest{Image: "Not A Ref!"}},
		{name: "uppercase repository", req: CreateRequest{Image: "Alpine"}},
		{name: "cpu not a number", req: CreateRequest{Image: "alpine", CPU: "lots"}},
		{name: "cpu zero", req: CreateRequest{Image: "alpine", CPU: "0"}},
		{name: "cpu negative", req: CreateRequest{Image: "alpine", CPU: "-1"}},
		{name: "cpu zero millicores", req: CreateRequest{Image: "alpine", CPU: "0m"}},
		{name: "cpu rounds to zero", req: CreateRequest{Image: "alpine", CPU: "0.0001"}},
		// Runtimes refuse to start a sandbox below 10m.
		{name: "cpu below 10m", req: CreateRequest{Image: "alpine", CPU: "9m"}},
		{name: "cpu below 10m, in cores", req: CreateRequest{Image: "alpine", CPU: "0.005"}},
		{name: "cpu NaN", req: CreateRequest{Image: "alpine", CPU: "NaN"}},
		{name: "memory not a size", req: CreateRequest{Image: "alpine", Memory: "lots"}},
		{name: "memory zero", req: CreateRequest{Image: "alpine", Memory: "0"}},
		{name: "memory below minimum", req: CreateRequest{Image: "alpine", Memory: "1Mi"}},
		{name: "memory negative", req: CreateRequest{Image: "alpine", Memory: "-1Gi"}},
		{name: "disk not a size", req: CreateRequest{Image: "alpine", Disk: "lots"}},
		{name: "disk zero", req: CreateRequest{Image: "alpine", Disk: "0"}},
		{name: "disk below minimum", req: CreateRequest{Image: "alpine", Disk: "1Mi"}},
		{name: "ttl negative", req: CreateRequest{Image: "alpine", TTL: ptr(-1)}},
		{name: "ttl overflows a duration", req: CreateRequest{Image: "alpine", TTL: ptr(maxTTL + 1)}},
		{name: "env empty name", req: CreateRequest{Image: "alpine", Env: map[string]string{"": "x"}}},
		{name: "env name with =", req: CreateRequest{Image: "alpine", Env: map[string]string{"A=B": "x"}}},
		{name: "env name with NUL", req: CreateRequest{Image: "alpine", Env: map[string]string{"A\x00": "x"}}},
		{name: "env value with NUL", req: CreateRequest{Image: "alpine", Env: map[string]string{"A": "x\x00y"}}},
	}
	e := newEnv(t, Config{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sb, err := e.m.Create(context.Background(), tt.req)
			checkErr(t, err, errdefs.ErrInvalidArgument, "")
			if sb != nil {
				t.Errorf("got a sandbox with the error: %+v", sb)
			}
		})
	}
	if ids := e.records(t); len(ids) != 0 {
		t.Errorf("invalid requests left records %v", ids)
	}
	if diff := cmp.Diff(fakeruntime.Calls{}, e.rt.Calls()); diff != "" {
		t.Errorf("invalid requests reached the runtime (-want +got):\n%s", diff)
	}
}

func TestMaxSandboxes(t *testing.T) {
	e := newEnv(t, Config{MaxSandboxes: 2})
	first := e.running(t)
	e.running(t)
	_, err := e.m.Create(context.Background(), CreateRequest{Image: "alpine"})
	checkErr(t, err, errdefs.ErrResourceExhausted, api.CodeLimitExceeded)
	if n := len(e.records(t)); n != 2 {
		t.Errorf("%d records, want 2", n)
	}
	// Deleting one makes room again.
	if err := e.m.Delete(context.Background(), first); err != nil {
		t.Fatal(err)
	}
	e.running(t)
}

// TestMaxSandboxesConcurrent checks that concurrent creates cannot pass the
// limit together (they once all counted before any of them stored).
func TestMaxSandboxesConcurrent(t *testing.T) {
	const limit, tries = 3, 12
	e := newEnv(t, Config{MaxSandboxes: limit})
	e.imgs.present = map[string]bool{} // pending: no agents needed
	e.imgs.gate = make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, tries)
	for range tries {
		wg.Go(func() {
			_, err := e.m.Create(context.Background(), CreateRequest{Image: "alpine"})
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	ok := 0
	for err := range errs {
		switch {
		case err == nil:
			ok++
		case errdefs.Code(err) != api.CodeLimitExceeded:
			t.Errorf("create: %v", err)
		}
	}
	if ok != limit {
		t.Errorf("%d creates succeeded, want %d", ok, limit)
	}
	if n := len(e.records(t)); n != limit {
		t.Errorf("%d records, want %d", n, limit)
	}
}

// TestMaxSandboxesConcurrentRunning is TestMaxSandboxesConcurrent with
// sandboxes that start at once: of 50 concurrent creates against a limit
// of 5, exactly 5 make a sandbox and the others get the limit error.
func TestMaxSandboxesConcurrentRunning(t *testing.T) {
	const limit, tries = 5, 50
	e := newEnv(t, Config{MaxSandboxes: limit})
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok, refused := 0, 0
	for range tries {
		wg.Go(func() {
			sb, err := e.m.Create(context.Background(), CreateRequest{Image: "alpine"})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil && sb.Status == string(api.StatusRunning):
				ok++
			case err == nil:
				t.Errorf("sandbox %s is %s (%s), want running", sb.ID, sb.Status, sb.Reason)
			case errors.Is(err, errdefs.ErrResourceExhausted) && errdefs.Code(err) == api.CodeLimitExceeded:
				refused++
			default:
				t.Errorf("create: %v", err)
			}
		})
	}
	wg.Wait()
	if ok != limit || refused != tries-limit {
		t.Errorf("%d created, %d refused; want %d and %d", ok, refused, limit, tries-limit)
	}
	if n := len(e.records(t)); n != limit {
		t.Errorf("%d records, want %d", n, limit)
	}
	if c := e.rt.Calls(); c.Create != limit {
		t.Errorf("%d runtime creates, want %d", c.Create, limit)
	}
}

// TestCreatesOverlap checks that no lock is held across a sandbox's
// creation: a create whose runtime side is slow does not hold up others.
func TestCreatesOverlap(t *testing.T) {
	e := newEnv(t, Config{MaxSandboxes: 10})
	first := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	e.rt.SetHooks(fakeruntime.Hooks{Create: func(ctx context.Context, spec *sandbox.Spec) error {
		held := false
		once.Do(func() { held = true })
		if held { // the first create waits until the second is done
			close(first)
			<-release
		}
		return nil
	}})
	done := make(chan error, 1)
	go func() {
		_, err := e.m.Create(context.Background(), CreateRequest{Image: "alpine"})
		done <- err
	}()
	<-first
	second := make(chan error, 1)
	go func() {
		sb, err := e.m.Create(context.Background(), CreateRequest{Image: "alpine"})
		if err == nil && sb.Status != string(api.StatusRunning) {
			err = fmt.Errorf("sandbox is %s (%s)", sb.Status, sb.Reason)
		}
		second <- err
	}()
	select {
	case err := <-second:
		if err != nil {
			t.Errorf("second create while the first is in the runtime: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Error("the second create waited for the first one's runtime create")
	}
	close(release)
	if err := <-done; err != nil {
		t.Errorf("first create: %v", err)
	}
}
