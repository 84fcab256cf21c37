package manager

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/runtime/fakeruntime"
	"github.com/agent2env/agent2env/internal/sandbox"
)

// TestAdmission: every create passes one admission check. Past
// MaxSandboxes it is 429 RESOURCE_LIMIT, past the host's capacity 507
// INSUFFICIENT_CAPACITY; both carry the usage and a suggestion and leave
// nothing behind. Warm pools' sandboxes count, stopped ones do not, and a
// start is admitted like a create.
func TestAdmission(t *testing.T) {
	e := newEnv(t, Config{MaxSandboxes: 4, Host: Host{MilliCPU: 2000, MemoryBytes: 4 << 30}, CPUOvercommit: 1.5, MemoryOvercommit: 1})
	ctx := context.Background()
	check := func(err error, code, suggestion string, want api.Usage) {
		t.Helper()
		checkErr(t, err, errdefs.ErrResourceExhausted, code)
		d := errdefs.Details(err)
		if s, _ := d["suggestion"].(string); !strings.Contains(s, suggestion) {
			t.Errorf("suggestion %q, want it to say %q", s, suggestion)
		}
		if diff := cmp.Diff(want, d["usage"]); diff != "" {
			t.Errorf("usage (-want +got):\n%s", diff)
		}
	}
	base := api.Usage{MaxSandboxes: 4, MilliCPUCapacity: 3000, MemoryBytesCapacity: 4 << 30}
	one := e.create(t, CreateRequest{CPU: "1", Memory: "1Gi"})
	pooled, err := e.m.CreatePooled(ctx, CreateRequest{Image: "alpine", CPU: "1", Memory: "1Gi"}, "p")
	if err != nil {
		t.Fatal(err)
	}
	u := base
	u.Sandboxes, u.MilliCPU, u.MemoryBytes = 2, 2000, 2<<30
	if got, err := e.m.Usage(ctx); err != nil || !cmp.Equal(got, u) {
		t.Errorf("usage %+v %v, want %+v", got, err, u)
	}
	// 2 of 3 cpus are committed, the warm sandbox's included.
	_, err = e.m.Create(ctx, CreateRequest{Image: "alpine", CPU: "1500m", Memory: "64Mi"})
	check(err, api.CodeInsufficientCapacity, "ask for less cpu and memory", u)
	_, err = e.m.Create(ctx, CreateRequest{Image: "alpine", CPU: "100m", Memory: "3Gi"})
	check(err, api.CodeInsufficientCapacity, "--memory-overcommit", u)
	if len(e.records(t)) != 2 {
		t.Errorf("records after refusals: %v", e.records(t))
	}
	// A stopped sandbox commits nothing; starting it again is admitted.
	if _, err := e.m.Stop(ctx, one.ID); err != nil {
		t.Fatal(err)
	}
	big := e.create(t, CreateRequest{CPU: "1500m", Memory: "1Gi"})
	_, err = e.m.Start(ctx, one.ID)
	u.Sandboxes, u.MilliCPU = 3, 2500
	check(err, api.CodeInsufficientCapacity, "ask for less cpu", u)
	if sb, _ := e.m.Get(ctx, one.ID); sb.Status != string(api.StatusSucceeded) {
		t.Errorf("a refused start left the sandbox %s", sb.Status)
	}
	// Past the maximum of sandboxes (stopped ones count): 429.
	e.create(t, CreateRequest{CPU: "100m", Memory: "64Mi"})
	_, err = e.m.Create(ctx, CreateRequest{Image: "alpine", CPU: "100m", Memory: "64Mi"})
	u.Sandboxes, u.MilliCPU, u.MemoryBytes = 4, 2600, 2<<30+64<<20
	check(err, api.CodeLimitExceeded, "--max-sandboxes", u)
	if want := "4 sandboxes exist, stopped and failed ones included, and the maximum is 4 (--max-sandboxes)"; !strings.Contains(err.Error(), want) {
		t.Errorf("past the maximum: %v, want it to say %q", err, want)
	}
	// Claiming the warm sandbox commits nothing new: never refused.
	if _, err := e.m.Claim(ctx, pooled.ID, Claim{}); err != nil {
		t.Errorf("claim at capacity: %v", err)
	}
	for _, id := range []string{big.ID, one.ID} {
		if err := e.m.Delete(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	e.create(t, CreateRequest{CPU: "1", Memory: "1Gi"})
}

// TestAdmissionHost: a runtime whose host has no room left for a sandbox
// (sandbox.HostChecker: the oci runtime's process ids) has creates and
// starts refused with 507 INSUFFICIENT_CAPACITY, its message and the usage,
// and nothing made or changed; once the host has room again they pass.
func TestAdmissionHost(t *testing.T) {
	e := newEnv(t, Config{})
	ctx := context.Background()
	stopped := e.create(t, CreateRequest{})
	if _, err := e.m.Stop(ctx, stopped.ID); err != nil {
		t.Fatal(err)
	}
	short := fmt.Errorf("the host is out of process ids for another sandbox: %w", errdefs.ErrResourceExhausted)
	e.rt.SetHooks(fakeruntime.Hooks{CheckHost: func() error { return short }})
	calls := e.rt.Calls()
	for name, call := range map[string]func() error{
		"create": func() error { _, err := e.m.Create(ctx, CreateRequest{Image: "alpine"}); return err },
		"start":  func() error { _, err := e.m.Start(ctx, stopped.ID); return err },
	} {
		err := call()
		checkErr(t, err, errdefs.ErrResourceExhausted, api.CodeInsufficientCapacity)
		if !strings.Contains(err.Error(), "out of process ids") {
			t.Errorf("%s: %v, want the host's reason", name, err)
		}
		d := errdefs.Details(err)
		if s, _ := d["suggestion"].(string); s != SuggestHostRoom {
			t.Errorf("%s: suggestion %q", name, s)
		}
		if u, _ := d["usage"].(api.Usage); u.Sandboxes != 1 {
			t.Errorf("%s: usage %+v, want the one sandbox", name, d["usage"])
		}
	}
	if got := e.rt.Calls(); got.Create != calls.Create || got.Start != calls.Start {
		t.Errorf("refused requests reached the runtime: %+v, before %+v", got, calls)
	}
	if recs := e.records(t); len(recs) != 1 {
		t.Errorf("records after refusals: %v", recs)
	}
	if sb, _ := e.m.Get(ctx, stopped.ID); sb.Status != string(api.StatusSucceeded) {
		t.Errorf("a refused start left the sandbox %s", sb.Status)
	}
	e.rt.SetHooks(fakeruntime.Hooks{})
	if _, err := e.m.Start(ctx, stopped.ID); err != nil {
		t.Errorf("start with room: %v", err)
	}
	e.create(t, CreateRequest{})
}

// A create or start is refused with 507 NO_SPACE while the data dir's file
// system has less than the reserve free, whatever the disks of the
// sandboxes add up to; one it cannot ask about is not refused.
func TestAdmissionDisk(t *testing.T) {
	const reserve = 1 << 30
	tests := []struct {
		name    string
		dir     string
		reserve int64
		free    int64
		probe   error
		refused bool
	}{
		{"room", "/data", reserve, 10 << 30, nil, false},
		{"exactly the reserve", "/data", reserve, reserve, nil, false},
		{"short", "/data", reserve, reserve - 1, nil, true},
		{"full", "/data", reserve, 0, nil, true},
		{"cannot ask", "/data", reserve, 0, errors.New("statfs: permission denied"), false},
		{"no reserve", "/data", 0, 0, nil, false},
		{"no dir", "", reserve, 0, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, Config{DiskDir: tt.dir, DiskReserve: tt.reserve})
			ctx := context.Background()
			stopped := e.create(t, CreateRequest{})
			if _, err := e.m.Stop(ctx, stopped.ID); err != nil {
				t.Fatal(err)
			}
			var asked []string
			e.m.freeSpace = func(path string) (int64, error) {
				asked = append(asked, path)
				return tt.free, tt.probe
			}
			for name, call := range map[string]func() error{
				"create": func() error { _, err := e.m.Create(ctx, CreateRequest{Image: "alpine"}); return err },
				"start":  func() error { _, err := e.m.Start(ctx, stopped.ID); return err },
			} {
				err := call()
				if !tt.refused {
					if err != nil {
						t.Errorf("%s: %v, want it admitted", name, err)
					}
					continue
				}
				checkErr(t, err, errdefs.ErrResourceExhausted, api.CodeNoSpace)
				if !strings.Contains(err.Error(), "/data") || !strings.Contains(err.Error(), "1024Mi kept free") {
					t.Errorf("%s: %v, want the dir and the reserve named", name, err)
				}
				if s, _ := errdefs.Details(err)["suggestion"].(string); s != SuggestHostRoom {
					t.Errorf("%s: suggestion %q", name, s)
				}
			}
			if checked := tt.dir != "" && tt.reserve > 0; checked != (len(asked) > 0) || checked && asked[0] != tt.dir {
				t.Errorf("free space asked of %q; want it asked of %q: %v", asked, tt.dir, checked)
			}
			if recs := e.records(t); tt.refused && len(recs) != 1 {
				t.Errorf("records after refusals: %v, want the stopped one only", recs)
			}
		})
	}
}

// TestRuntimeNoSpace: a create the runtime refuses for want of room on
// the host (the oci runtime's thick disk, errdefs.NoSpace) is refused as
// admission refuses one, 507 NO_SPACE with the usage and a suggestion,
// its record removed; one refused in the background, after the create
// was answered pending (its image being prepared), fails with the
// runtime's words. Another failure of the runtime's Create still fails
// the sandbox.
func TestRuntimeNoSpace(t *testing.T) {
	e := newEnv(t, Config{})
	ctx := context.Background()
	full := errdefs.NoSpace(errors.New("no room on the host for the sandbox's disk of 1024Mi"))
	e.rt.SetHooks(fakeruntime.Hooks{Create: func(context.Context, *sandbox.Spec) error { return full }})
	_, err := e.m.Create(ctx, CreateRequest{Image: "alpine"})
	checkErr(t, err, errdefs.ErrResourceExhausted, api.CodeNoSpace)
	if !strings.Contains(err.Error(), "disk of 1024Mi") {
		t.Errorf("refusal %q does not say the runtime's words", err)
	}
	if s, _ := errdefs.Details(err)["suggestion"].(string); s != SuggestHostRoom {
		t.Errorf("suggestion %q, want %q", s, SuggestHostRoom)
	}
	if recs := e.records(t); len(recs) != 0 {
		t.Errorf("records after the refusal: %v, want none", recs)
	}

	sb := e.create(t, CreateRequest{Image: "python"}) // not prepared: answered pending
	if sb.Status != string(api.StatusPending) {
		t.Fatalf("create of an image to prepare: %s, want pending", sb.Status)
	}
	if failed := e.waitStatus(t, sb.ID, api.StatusFailed); !strings.Contains(failed.Reason, "disk of 1024Mi") {
		t.Errorf("reason %q does not say the runtime's words", failed.Reason)
	}

	e.rt.SetHooks(fakeruntime.Hooks{Create: func(context.Context, *sandbox.Spec) error { return errors.New("mount: broken") }})
	if sb := e.create(t, CreateRequest{Image: "alpine"}); sb.Status != string(api.StatusFailed) {
		t.Errorf("create the runtime failed otherwise: %s, want failed", sb.Status)
	}
}

// TestAdmissionBound: a caller that arrived before admit's last read of
// the store is admitted against that read plus what was admitted since,
// without a read of its own; a later caller reads again, and so does one
// the bound would refuse, which is refused only by what the store holds.
func TestAdmissionBound(t *testing.T) {
	e := newEnv(t, Config{MaxSandboxes: 3, Host: Host{MilliCPU: 2000, MemoryBytes: 4 << 30}, CPUOvercommit: 1, MemoryOvercommit: 1})
	ctx := context.Background()
	e.create(t, CreateRequest{CPU: "1", Memory: "1Gi"}) // the one stored record: 1 of 2 cpus
	e.m.admitMu.Lock()
	defer e.m.admitMu.Unlock()
	r := e.m.usageReads.Load()
	for _, s := range []struct {
		name      string
		arrived   uint64 // m.usageReads when the caller arrived
		milliCPU  int64
		newRecord bool
		wantReads uint64 // m.usageReads after the call
		wantCode  string // "": admitted
	}{
		{"the first reads the store", r, 500, true, r + 1, ""},
		{"arrived before that read: the bound alone", r, 250, true, r + 1, ""},
		{"the bound (1.75 cpus) would refuse: a read, admitted by the store", r, 500, false, r + 2, ""},
		{"refused after a read", r + 1, 1100, false, r + 3, api.CodeInsufficientCapacity},
		{"arrived after the last read: reads again", r + 3, 0, true, r + 4, ""},
		{"arrived before it: the bound's record count, 3 of 3", r + 3, 0, true, r + 4, ""},
		{"the bound would refuse the 4th record: a read, admitted by the store", r + 3, 0, true, r + 5, ""},
	} {
		err := e.m.admit(ctx, s.arrived, s.milliCPU, 0, s.newRecord)
		if got := e.m.usageReads.Load(); got != s.wantReads {
			t.Errorf("%s: %d reads, want %d", s.name, got-r, s.wantReads-r)
		}
		switch {
		case s.wantCode == "" && err != nil:
			t.Errorf("%s: %v", s.name, err)
		case s.wantCode != "" && errdefs.Code(err) != s.wantCode:
			t.Errorf("%s: error %v, want code %s", s.name, err, s.wantCode)
		}
	}
}

// TestAdmissionConcurrent: concurrent creates cannot pass the capacity
// together.
func TestAdmissionConcurrent(t *testing.T) {
	e := newEnv(t, Config{Host: Host{MilliCPU: 3000, MemoryBytes: 64 << 30}, CPUOvercommit: 1, MemoryOvercommit: 1})
	var wg sync.WaitGroup
	var mu sync.Mutex
	made, refused := 0, 0
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := e.m.Create(context.Background(), CreateRequest{Image: "alpine", CPU: "1", Memory: "64Mi"})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				made++
			case errdefs.Code(err) == api.CodeInsufficientCapacity:
				refused++
			default:
				t.Errorf("create: %v", err)
			}
		}()
	}
	wg.Wait()
	if made != 3 || refused != 7 || len(e.records(t)) != 3 {
		t.Errorf("made %d, refused %d, records %v; want 3, 7 and 3", made, refused, e.records(t))
	}
}

// Check refuses what no create could ever make, as a create would, and
// makes nothing; more than the whole capacity is ErrInvalidArgument,
// whatever the sandboxes that exist hold, and room they hold is not its
// concern.
func TestCheck(t *testing.T) {
	e := newEnv(t, Config{MaxSandboxes: 1, Host: Host{MilliCPU: 2000, MemoryBytes: 4 << 30}, CPUOvercommit: 1.5, MemoryOvercommit: 1})
	ctx := context.Background()
	e.create(t, CreateRequest{CPU: "3", Memory: "4Gi"}) // the host is full, and at MaxSandboxes
	tests := []struct {
		name  string
		req   CreateRequest
		class error
		want  string
	}{
		{"fits the whole host", CreateRequest{Image: "alpine", CPU: "3", Memory: "4Gi"}, nil, ""},
		{"cpu", CreateRequest{Image: "alpine", CPU: "3.001"}, errdefs.ErrInvalidArgument, "more than the host's whole capacity of 3 cpu and 4096Mi"},
		{"memory", CreateRequest{Image: "alpine", Memory: "5Gi"}, errdefs.ErrInvalidArgument, "cpu 1 and memory 5Gi: more than"},
		{"image", CreateRequest{Image: "UPPER CASE!!"}, errdefs.ErrInvalidArgument, "invalid image reference"},
		{"template", CreateRequest{Template: "nope"}, errdefs.ErrNotFound, `template "nope" not found`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := e.m.Check(ctx, tt.req)
			if tt.class == nil && err != nil || tt.class != nil && (!errors.Is(err, tt.class) || !strings.Contains(err.Error(), tt.want)) {
				t.Errorf("check: %v, want %v naming %q", err, tt.class, tt.want)
			}
		})
	}
	if n := len(e.rt.IDs()); n != 1 {
		t.Errorf("%d sandboxes after checks, want the one made before", n)
	}
}
