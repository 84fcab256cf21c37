package manager

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/runtime/fakeruntime"
	"github.com/agent2env/agent2env/internal/sandbox"
	"github.com/agent2env/agent2env/internal/store"
)

func TestDelete(t *testing.T) {
	e := newEnv(t, Config{})
	id := e.running(t)
	// The runtime side goes first, while the record says terminating.
	var during *store.Sandbox
	e.rt.SetHooks(fakeruntime.Hooks{Delete: func(ctx context.Context, got string) error {
		sb, err := e.st.GetSandbox(ctx, got)
		if err != nil {
			return fmt.Errorf("record gone before the runtime state: %w", err)
		}
		during = sb
		return nil
	}})
	if err := e.m.Delete(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	if during == nil || during.Status != string(api.StatusTerminating) || during.Reason != "deleted by request" {
		t.Errorf("record while the runtime deleted: %+v", during)
	}
	if ids := e.records(t); len(ids) != 0 {
		t.Errorf("records left: %v", ids)
	}
	if ids := e.rt.IDs(); len(ids) != 0 {
		t.Errorf("runtime sandboxes left: %v", ids)
	}
	_, err := e.m.Get(context.Background(), id)
	checkErr(t, err, errdefs.ErrNotFound, api.CodeSandboxNotFound)
	checkErr(t, e.m.Delete(context.Background(), id), errdefs.ErrNotFound, api.CodeSandboxNotFound)
}

func TestDeleteRuntimeFailure(t *testing.T) {
	e := newEnv(t, Config{})
	id := e.running(t)
	e.rt.SetHooks(fakeruntime.Hooks{Delete: func(context.Context, string) error { return errors.New("device busy") }})
	err := e.m.Delete(context.Background(), id)
	if err == nil || !strings.Contains(err.Error(), "device busy") {
		t.Fatalf("delete: %v, want the runtime's error", err)
	}
	sb := e.waitStatus(t, id, api.StatusTerminating)
	if sb.Reason != "deleted by request" {
		t.Errorf("reason %q", sb.Reason)
	}
	if got := e.rt.State(id); got == "" {
		t.Fatal("runtime state gone although its Delete failed")
	}
	// Exec is refused from now on.
	_, err = e.m.Exec(context.Background(), id, ExecRequest{Command: []string{"true"}})
	checkErr(t, err, errdefs.ErrFailedPrecondition, api.CodeSandboxNotReady)

	// The daemon restarts; recovery finishes the deletion.
	e.rt.SetHooks(fakeruntime.Hooks{})
	m2 := newManager(Config{}, e)
	defer m2.Close()
	if err := m2.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	if ids := e.records(t); len(ids) != 0 {
		t.Errorf("records left: %v", ids)
	}
	if ids := e.rt.IDs(); len(ids) != 0 {
		t.Errorf("runtime sandboxes left: %v", ids)
	}
}

func TestDeleteRetry(t *testing.T) {
	e := newEnv(t, Config{})
	id := e.running(t)
	e.rt.SetHooks(fakeruntime.Hooks{Delete: func(context.Context, string) error { return errors.New("device busy") }})
	if err := e.m.Delete(context.Background(), id); err == nil {
		t.Fatal("delete succeeded despite the runtime")
	}
	e.rt.SetHooks(fakeruntime.Hooks{})
	if err := e.m.Delete(context.Background(), id); err != nil {
		t.Fatalf("second delete: %v", err)
	}
	if ids, rids := e.records(t), e.rt.IDs(); len(ids)+len(rids) != 0 {
		t.Errorf("left: records %v, runtime %v", ids, rids)
	}
}

// TestDeletePending deletes a sandbox whose image is still being prepared:
// when the image arrives, nothing may be started for it.
func TestDeletePending(t *testing.T) {
	e := newEnv(t, Config{})
	gate := make(chan struct{})
	e.imgs.gate = gate
	sb := e.create(t, CreateRequest{Image: "python"})
	if err := e.m.Delete(context.Background(), sb.ID); err != nil {
		t.Fatal(err)
	}
	close(gate)
	e.m.Close() // waits for the background start
	if ids, rids := e.records(t), e.rt.IDs(); len(ids)+len(rids) != 0 {
		t.Errorf("left: records %v, runtime %v", ids, rids)
	}
	if calls := e.rt.Calls(); calls.Create != 0 {
		t.Errorf("runtime Create called %d times for a deleted sandbox", calls.Create)
	}
}

// TestDeleteWhileStarting deletes a sandbox whose runtime start waits
// (a Pod the scheduler cannot place): the Delete ends the start rather
// than wait for it, and nothing is left.
func TestDeleteWhileStarting(t *testing.T) {
	e := newEnv(t, Config{})
	entered := make(chan string, 1)
	e.rt.SetHooks(fakeruntime.Hooks{Start: func(ctx context.Context, id string) error {
		entered <- id
		<-ctx.Done()
		return ctx.Err()
	}})
	created := make(chan error, 1)
	go func() {
		_, err := e.m.Create(context.Background(), CreateRequest{Image: "alpine"})
		created <- err
	}()
	id := <-entered
	began := time.Now()
	if err := e.m.Delete(context.Background(), id); err != nil {
		t.Fatalf("delete while starting: %v", err)
	}
	// Without the cancel, the Delete waits for the start's own timeout.
	if took := time.Since(began); took > 2*time.Second {
		t.Errorf("the delete took %v: it waited for the start", took)
	}
	select {
	case <-created:
	case <-time.After(5 * time.Second):
		t.Fatal("the create still waits after its sandbox was deleted")
	}
	e.rt.SetHooks(fakeruntime.Hooks{})
	if ids, rids := e.records(t), e.rt.IDs(); len(ids)+len(rids) != 0 {
		t.Errorf("left: records %v, runtime %v", ids, rids)
	}
}

func TestRecover(t *testing.T) {
	const id = "sb1"
	tests := []struct {
		name string
		// record is the stored status ("" for none), runtime the runtime
		// state ("" for none).
		record  api.SandboxStatus
		runtime sandbox.State
		// want* describe the end: record status ("" for gone), reason,
		// runtime state ("" for gone).
		wantRecord  api.SandboxStatus
		wantReason  string
		wantRuntime sandbox.State
	}{
		{name: "running adopted", record: api.StatusRunning, runtime: sandbox.StateRunning,
			wantRecord: api.StatusRunning, wantReason: "agent ready", wantRuntime: sandbox.StateRunning},
		{name: "paused adopted", record: api.StatusPaused, runtime: sandbox.StatePaused,
			wantRecord: api.StatusPaused, wantReason: "paused by request", wantRuntime: sandbox.StatePaused},
		{name: "paused by a pause not recorded", record: api.StatusRunning, runtime: sandbox.StatePaused,
			wantRecord: api.StatusRunning, wantReason: "agent ready", wantRuntime: sandbox.StateRunning},
		{name: "resumed by a resume not recorded", record: api.StatusPaused, runtime: sandbox.StateRunning,
			wantRecord: api.StatusRunning, wantReason: "resumed while the daemon was down", wantRuntime: sandbox.StateRunning},
		{name: "paused gone", record: api.StatusPaused,
			wantRecord: api.StatusFailed, wantReason: "sandbox stopped while the daemon was down"},
		{name: "paused stopped", record: api.StatusPaused, runtime: sandbox.StateStopped,
			wantRecord: api.StatusFailed, wantReason: "sandbox stopped while the daemon was down"},
		{name: "stopped but paused", record: api.StatusSucceeded, runtime: sandbox.StatePaused,
			wantRecord: api.StatusSucceeded, wantReason: "stopped by request", wantRuntime: sandbox.StateStopped},
		{name: "orphan paused", runtime: sandbox.StatePaused},
		{name: "running gone", record: api.StatusRunning,
			wantRecord: api.StatusFailed, wantReason: "sandbox stopped while the daemon was down"},
		{name: "running stopped", record: api.StatusRunning, runtime: sandbox.StateStopped,
			wantRecord: api.StatusFailed, wantReason: "sandbox stopped while the daemon was down"},
		{name: "running only created", record: api.StatusRunning, runtime: sandbox.StateCreated,
			wantRecord: api.StatusFailed, wantReason: "sandbox stopped while the daemon was down"},
		{name: "pending without runtime", record: api.StatusPending,
			wantRecord: api.StatusFailed, wantReason: "daemon restarted while the sandbox was being created"},
		{name: "pending created", record: api.StatusPending, runtime: sandbox.StateCreated,
			wantRecord: api.StatusFailed, wantReason: "daemon restarted while the sandbox was being created"},
		{name: "pending running", record: api.StatusPending, runtime: sandbox.StateRunning,
			wantRecord: api.StatusFailed, wantReason: "daemon restarted while the sandbox was being created"},
		{name: "terminating", record: api.StatusTerminating, runtime: sandbox.StateRunning},
		{name: "terminating without runtime", record: api.StatusTerminating},
		{name: "orphan running", runtime: sandbox.StateRunning},
		{name: "orphan stopped", runtime: sandbox.StateStopped},
		{name: "failed with leftovers", record: api.StatusFailed, runtime: sandbox.StateStopped,
			wantRecord: api.StatusFailed, wantReason: "earlier reason"},
		{name: "failed clean", record: api.StatusFailed,
			wantRecord: api.StatusFailed, wantReason: "earlier reason"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, Config{})
			ctx := context.Background()
			if tt.record != "" {
				reason := map[api.SandboxStatus]string{
					api.StatusRunning: "agent ready", api.StatusFailed: "earlier reason", api.StatusTerminating: "deleted by request",
					api.StatusPaused: "paused by request", api.StatusSucceeded: "stopped by request",
				}[tt.record]
				err := e.st.CreateSandbox(ctx, &store.Sandbox{ID: id, Image: "alpine", CPU: "1", Memory: "1Gi",
					Status: string(tt.record), Reason: reason, Runtime: fakeruntime.Name, CreatedAt: epoch, UpdatedAt: epoch})
				if err != nil {
					t.Fatal(err)
				}
			}
			if tt.runtime != "" {
				spec := &sandbox.Spec{ID: id, Image: "alpine", Cwd: sandbox.WorkDir, Env: []string{"PATH=/usr/bin:/bin"}}
				if err := e.rt.Seed(spec, tt.runtime); err != nil {
					t.Fatal(err)
				}
			}

			if err := e.m.Recover(ctx); err != nil {
				t.Fatalf("recover: %v", err)
			}

			sb, err := e.st.GetSandbox(ctx, id)
			switch {
			case tt.wantRecord == "":
				if !errors.Is(err, errdefs.ErrNotFound) {
					t.Errorf("record: %+v, %v; want none", sb, err)
				}
			case err != nil:
				t.Errorf("record: %v", err)
			case sb.Status != string(tt.wantRecord) || sb.Reason != tt.wantReason:
				t.Errorf("record is %s (%s), want %s (%s)", sb.Status, sb.Reason, tt.wantRecord, tt.wantReason)
			}
			if got := e.rt.State(id); got != tt.wantRuntime {
				t.Errorf("runtime state %q, want %q", got, tt.wantRuntime)
			}
			if tt.wantRuntime == sandbox.StateRunning {
				// An adopted sandbox is usable at once.
				res, err := e.m.Exec(ctx, id, ExecRequest{Command: []string{"echo", "adopted"}})
				if err != nil || res.Stdout != "adopted\n" {
					t.Errorf("exec in adopted sandbox: %+v, %v", res, err)
				}
			}
		})
	}
}

func TestRecoverMany(t *testing.T) {
	e := newEnv(t, Config{})
	keep := e.running(t)
	gone := e.running(t)
	orphan := &sandbox.Spec{ID: "orphan", Cwd: sandbox.WorkDir}
	if err := e.rt.Seed(orphan, sandbox.StateRunning); err != nil {
		t.Fatal(err)
	}
	if err := e.rt.Delete(context.Background(), gone); err != nil {
		t.Fatal(err)
	}
	m2 := newManager(Config{}, e)
	defer m2.Close()
	if err := m2.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{keep}, e.rt.IDs()); diff != "" {
		t.Errorf("runtime sandboxes (-want +got):\n%s", diff)
	}
	e.waitStatus(t, keep, api.StatusRunning)
	e.waitStatus(t, gone, api.StatusFailed)
}

func TestRecoverErrors(t *testing.T) {
	e := newEnv(t, Config{})
	e.rt.SetHooks(fakeruntime.Hooks{Recover: func(context.Context) error { return errors.New("state dir unreadable") }})
	if err := e.m.Recover(context.Background()); err == nil || !strings.Contains(err.Error(), "state dir unreadable") {
		t.Errorf("recover: %v, want the runtime's error", err)
	}

	// A terminating record whose runtime state cannot be deleted stays
	// for the next recovery.
	e.rt.SetHooks(fakeruntime.Hooks{Delete: func(context.Context, string) error { return errors.New("device busy") }})
	id := e.running(t)
	if err := e.m.Delete(context.Background(), id); err == nil {
		t.Fatal("delete succeeded despite the runtime")
	}
	// Recovery carries on past it (one stuck sandbox must not keep the
	// daemon from serving), and the record stays for the sweeper.
	if err := e.m.Recover(context.Background()); err != nil {
		t.Errorf("recover: %v", err)
	}
	e.waitStatus(t, id, api.StatusTerminating)
	e.rt.SetHooks(fakeruntime.Hooks{})
	e.m.sweep(context.Background())
	if _, err := e.m.Get(context.Background(), id); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("after the sweep retried the deletion: %v, want not found", err)
	}
}

func TestSweep(t *testing.T) {
	tests := []struct {
		name    string
		ttl     int
		advance time.Duration
		pause   bool // the sandbox is paused first
		kill    bool // the sandbox dies
		lose    bool // its runtime state disappears
		// want is the record's status afterwards ("" for gone) and reason.
		want       api.SandboxStatus
		wantReason string
		wantState  sandbox.State
	}{
		{name: "expired", ttl: 60, advance: 61 * time.Second},
		{name: "not yet expired", ttl: 60, advance: 59 * time.Second,
			want: api.StatusRunning, wantReason: "agent ready", wantState: sandbox.StateRunning},
		{name: "ttl 0 never expires", ttl: 0, advance: 100 * 365 * 24 * time.Hour,
			want: api.StatusRunning, wantReason: "agent ready", wantState: sandbox.StateRunning},
		{name: "died", ttl: 60, kill: true, want: api.StatusFailed, wantReason: "sandbox exited: " + fakeruntime.KilledReason},
		{name: "lost", ttl: 0, lose: true, want: api.StatusFailed, wantReason: "sandbox lost: status of sandbox"},
		{name: "died and expired", ttl: 60, advance: time.Hour, kill: true},
		// Paused time counts: a paused sandbox expires on time.
		{name: "paused expired", ttl: 60, advance: 61 * time.Second, pause: true},
		{name: "paused kept", ttl: 60, advance: 59 * time.Second, pause: true,
			want: api.StatusPaused, wantReason: "paused by request", wantState: sandbox.StatePaused},
		{name: "paused died", ttl: 60, pause: true, kill: true, want: api.StatusFailed, wantReason: "sandbox exited: " + fakeruntime.KilledReason},
		{name: "paused lost", ttl: 0, pause: true, lose: true, want: api.StatusFailed, wantReason: "sandbox lost: status of sandbox"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, Config{})
			ctx := context.Background()
			id := e.create(t, CreateRequest{TTL: ptr(tt.ttl)}).ID
			if tt.pause {
				if _, err := e.m.Pause(ctx, id); err != nil {
					t.Fatal(err)
				}
			}
			if tt.kill {
				if err := e.rt.Kill(id); err != nil {
					t.Fatal(err)
				}
			}
			if tt.lose {
				if err := e.rt.Delete(ctx, id); err != nil {
					t.Fatal(err)
				}
			}
			e.clock.Advance(tt.advance)
			e.m.sweep(ctx)

			sb, err := e.st.GetSandbox(ctx, id)
			switch {
			case tt.want == "":
				if !errors.Is(err, errdefs.ErrNotFound) {
					t.Errorf("record: %+v, %v; want none", sb, err)
				}
			case err != nil:
				t.Errorf("record: %v", err)
			case sb.Status != string(tt.want) || !strings.HasPrefix(sb.Reason, tt.wantReason):
				t.Errorf("record is %s (%s), want %s (%s...)", sb.Status, sb.Reason, tt.want, tt.wantReason)
			}
			if got := e.rt.State(id); got != tt.wantState {
				t.Errorf("runtime state %q, want %q", got, tt.wantState)
			}
		})
	}
}

// TestSweepListsOnce: the sweep learns the state of every sandbox from one
// List, whatever their number (on a cluster each Status is a remote call);
// Status is asked only of a sandbox the List says is dead.
func TestSweepListsOnce(t *testing.T) {
	e := newEnv(t, Config{})
	ctx := context.Background()
	var ids []string
	for range 5 {
		ids = append(ids, e.running(t))
	}
	if err := e.rt.Kill(ids[0]); err != nil {
		t.Fatal(err)
	}
	before := e.rt.Calls()
	e.m.sweep(ctx)
	after := e.rt.Calls()
	if list, status := after.List-before.List, after.Status-before.Status; list != 1 || status != 1 {
		t.Errorf("one sweep of 5 sandboxes, 1 dead, made %d List and %d Status calls, want 1 and 1", list, status)
	}
	for i, id := range ids {
		want := api.StatusRunning
		if i == 0 {
			want = api.StatusFailed
		}
		if sb, err := e.m.Get(ctx, id); err != nil || sb.Status != string(want) {
			t.Errorf("sandbox %d: %+v, %v; want %s", i, sb, err, want)
		}
	}
}

// TestSweepRevived: a sandbox that the List reported dead but that runs
// again by the time the sweep holds its lock (stopped and started in
// between) is left alone.
func TestSweepRevived(t *testing.T) {
	e := newEnv(t, Config{})
	ctx := context.Background()
	id := e.running(t)
	if err := e.rt.Kill(id); err != nil {
		t.Fatal(err)
	}
	// The hook runs as the sweep looks again, after its List.
	e.rt.SetHooks(fakeruntime.Hooks{Status: func(ctx context.Context, got string) error {
		if got == id {
			return e.rt.Start(ctx, id)
		}
		return nil
	}})
	e.m.sweep(ctx)
	if sb, err := e.m.Get(ctx, id); err != nil || sb.Status != string(api.StatusRunning) {
		t.Errorf("revived sandbox: %+v, %v; want running", sb, err)
	}
	if got := e.rt.State(id); got != sandbox.StateRunning {
		t.Errorf("runtime state %q, want running", got)
	}
}

// TestSweepListFails: a sweep whose List fails changes nothing.
func TestSweepListFails(t *testing.T) {
	e := newEnv(t, Config{})
	ctx := context.Background()
	id := e.running(t)
	e.rt.SetHooks(fakeruntime.Hooks{List: func(context.Context) error { return errors.New("apiserver unreachable") }})
	e.m.sweep(ctx)
	if sb, err := e.m.Get(ctx, id); err != nil || sb.Status != string(api.StatusRunning) {
		t.Errorf("sandbox after a failed List: %+v, %v; want running", sb, err)
	}
}

// TestSweepExpiresFailed: a failed sandbox is removed when its TTL ends,
// like any other.
func TestSweepExpiresFailed(t *testing.T) {
	e := newEnv(t, Config{})
	e.imgs.failErr = errors.New("no such image")
	sb := e.create(t, CreateRequest{Image: "python", TTL: ptr(10)})
	e.waitStatus(t, sb.ID, api.StatusFailed)
	e.clock.Advance(11 * time.Second)
	e.m.sweep(context.Background())
	if ids := e.records(t); len(ids) != 0 {
		t.Errorf("records left: %v", ids)
	}
}

// TestSweepStoreFull: while the store refuses writes for want of room,
// the sweep's first refused write (an expiry here; two sandboxes are due)
// pauses it for fullBackoff and is said once, naming the full file
// system, not as the sandbox's failure; the paused sweep writes nothing,
// the next one tries again (said no sooner than fullWarnEvery), and once
// there is room it expires them.
func TestSweepStoreFull(t *testing.T) {
	e := newEnv(t, Config{})
	var logs bytes.Buffer
	e.m.log = slog.New(slog.NewTextHandler(&logs, nil))
	ctx := context.Background()
	e.create(t, CreateRequest{TTL: ptr(10)})
	e.create(t, CreateRequest{TTL: ptr(10)})
	e.clock.Advance(11 * time.Second)
	e.st.full.Store(true)
	e.m.sweep(ctx)
	if n := e.st.refused.Load(); n != 1 {
		t.Errorf("sweep on a full store: %d writes refused, want 1 (then it pauses)", n)
	}
	if c := strings.Count(logs.String(), "file system of its database"); c != 1 || strings.Contains(logs.String(), "sweep: expire") {
		t.Errorf("logs: %s\nwant one warning of the full disk", logs.String())
	}
	e.clock.Advance(fullBackoff / 2)
	e.m.sweep(ctx)
	if n := e.st.refused.Load(); n != 1 {
		t.Errorf("paused sweep: %d writes refused, want none more", n)
	}
	e.clock.Advance(fullBackoff)
	e.m.sweep(ctx)
	if n := e.st.refused.Load(); n != 2 {
		t.Errorf("sweep after the pause: %d writes refused, want one more", n)
	}
	if c := strings.Count(logs.String(), "file system of its database"); c != 1 {
		t.Errorf("%d warnings within %v, want 1", c, fullWarnEvery)
	}
	e.st.full.Store(false)
	e.clock.Advance(fullBackoff)
	e.m.sweep(ctx)
	if ids := e.records(t); len(ids) != 0 {
		t.Errorf("records left once there is room: %v", ids)
	}
}

func TestRun(t *testing.T) {
	e := newEnv(t, Config{})
	id := e.create(t, CreateRequest{TTL: ptr(1)}).ID
	e.clock.Advance(2 * time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		e.m.Run(ctx)
		close(done)
	}()
	deadline := time.Now().Add(5 * time.Second)
	for len(e.records(t)) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("Run did not expire sandbox %s", id)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	<-done
}

func TestLogs(t *testing.T) {
	e := newEnv(t, Config{})
	ctx := context.Background()
	id := e.running(t)
	if err := e.rt.AppendLog(id, []byte("console line\n")); err != nil {
		t.Fatal(err)
	}
	got, err := e.m.Logs(ctx, id, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	logs, events := got.Logs, got.Events
	want := []string{
		"2030-01-02T03:04:05.000Z pending: created from image alpine",
		"2030-01-02T03:04:05.000Z running: agent ready",
	}
	if diff := cmp.Diff(want, events); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if !strings.Contains(logs, "fake agent for sandbox "+id+" listening\n") || !strings.HasSuffix(logs, "console line\n") {
		t.Errorf("logs %q lack the console output", logs)
	}
	if got, err := e.m.Logs(ctx, id, 5); err != nil || got.Logs != "line\n" {
		t.Errorf("last 5 bytes: %+v, %v", got, err)
	}

	// A history at its bound: a pause drops the oldest event, and the
	// logs say so.
	filler := make([]store.Event, store.MaxEvents-len(want))
	for i := range filler {
		filler[i] = store.Event{At: e.clock.Now(), Status: "running", Message: "exec"}
	}
	if _, err := e.st.UpdateSandbox(ctx, id, func(*store.Sandbox) error { return nil }, filler...); err != nil {
		t.Fatal(err)
	}
	if got, err = e.m.Logs(ctx, id, 0); err != nil || len(got.Events) != store.MaxEvents || got.EventsDropped != 0 {
		t.Fatalf("full history: %d events, %d dropped, %v; want %d, none dropped", len(got.Events), got.EventsDropped, err, store.MaxEvents)
	}
	if _, err := e.m.Pause(ctx, id); err != nil {
		t.Fatal(err)
	}
	got, err = e.m.Logs(ctx, id, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Events) != store.MaxEvents || got.EventsDropped != 1 || got.Events[0] != want[1] ||
		!strings.HasSuffix(got.Events[len(got.Events)-1], " paused: paused by request") {
		t.Errorf("after a pause: %d events, %q to %q, %d dropped; want %d, %q to the pause, 1 dropped",
			len(got.Events), got.Events[0], got.Events[len(got.Events)-1], got.EventsDropped, store.MaxEvents, want[1])
	}

	// A sandbox that fails in the background, later.
	e.imgs.gate = make(chan struct{})
	e.imgs.failErr = errors.New("manifest unknown")
	failed := e.create(t, CreateRequest{Image: "python"})
	e.clock.Advance(1500 * time.Millisecond)
	close(e.imgs.gate)
	e.waitStatus(t, failed.ID, api.StatusFailed)
	got, err = e.m.Logs(ctx, failed.ID, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	logs, events = got.Logs, got.Events
	// The background goroutine's first event may come before or after the
	// clock moved: its time is not compared.
	if len(events) == 3 && strings.HasSuffix(events[1], " pending: preparing image python") {
		events[1] = "pending: preparing image python"
	}
	want = []string{
		"2030-01-02T03:04:05.000Z pending: created from image python",
		"pending: preparing image python",
		"2030-01-02T03:04:06.500Z failed: prepare image python: manifest unknown",
	}
	if diff := cmp.Diff(want, events); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if logs != "" {
		t.Errorf("logs of a sandbox that never ran: %q", logs)
	}

	_, err = e.m.Logs(ctx, "nosuchsandbox", 10)
	checkErr(t, err, errdefs.ErrNotFound, api.CodeSandboxNotFound)
}

// TestConcurrency creates, uses and deletes many sandboxes at once, with
// lists and sweeps in between, and checks that nothing is left.
func TestConcurrency(t *testing.T) {
	const n = 50
	e := newEnv(t, Config{})
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	for i := range n {
		wg.Go(func() {
			if err := lifecycle(ctx, e.m, i); err != nil {
				errs <- fmt.Errorf("sandbox %d: %w", i, err)
			}
		})
		if i%10 == 0 {
			wg.Go(func() {
				if _, err := e.m.List(ctx); err != nil {
					errs <- err
				}
				e.m.sweep(ctx)
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if ids := e.records(t); len(ids) != 0 {
		t.Errorf("records left: %v", ids)
	}
	if ids := e.rt.IDs(); len(ids) != 0 {
		t.Errorf("runtime sandboxes left: %v", ids)
	}
	if calls := e.rt.Calls(); calls.Create != n || calls.Delete != n {
		t.Errorf("runtime calls %+v, want %d creates and deletes", calls, n)
	}
	if n := e.m.locks.Len(); n != 0 {
		t.Errorf("%d sandbox locks left after every operation ended; want none", n)
	}
}

// TestLocksBounded checks that operations on ids that do not exist leave
// no lock behind (the lock map once kept an entry for every id any
// request named).
func TestLocksBounded(t *testing.T) {
	e := newEnv(t, Config{})
	ctx := context.Background()
	for i := range 100 {
		id := fmt.Sprintf("bogus-%d", i)
		if err := e.m.Delete(ctx, id); !errors.Is(err, errdefs.ErrNotFound) {
			t.Fatalf("delete %s: %v, want not found", id, err)
		}
		if _, err := e.m.Stop(ctx, id); !errors.Is(err, errdefs.ErrNotFound) {
			t.Fatalf("stop %s: %v, want not found", id, err)
		}
	}
	e.m.Delete(ctx, e.running(t))
	if n := e.m.locks.Len(); n != 0 {
		t.Errorf("%d sandbox locks kept; want none", n)
	}
}

func lifecycle(ctx context.Context, m *Manager, i int) error {
	req := CreateRequest{Image: "alpine", Env: map[string]string{"N": fmt.Sprint(i)}}
	if i%2 == 1 {
		req.Image = "python" // prepared in the background (the fake has it at once)
	}
	sb, err := m.Create(ctx, req)
	if err != nil {
		return err
	}
	for deadline := time.Now().Add(10 * time.Second); sb.Status != string(api.StatusRunning); time.Sleep(5 * time.Millisecond) {
		if sb, err = m.Get(ctx, sb.ID); err != nil {
			return err
		}
		if sb.Status == string(api.StatusFailed) || time.Now().After(deadline) {
			return fmt.Errorf("sandbox is %s (%s)", sb.Status, sb.Reason)
		}
	}
	res, err := m.Exec(ctx, sb.ID, ExecRequest{Command: []string{"sh", "-c", "echo $N"}})
	if err != nil {
		return err
	}
	if want := fmt.Sprintf("%d\n", i); res.Stdout != want {
		return fmt.Errorf("exec printed %q, want %q", res.Stdout, want)
	}
	if _, err := m.Upload(ctx, sb.ID, "f", 0o644, strings.NewReader("x")); err != nil {
		return err
	}
	return m.Delete(ctx, sb.ID)
}

// TestDeadKeepsFiles: a sandbox that dies is released whole, unless its
// owner collects from its dead sandboxes (Config.KeepDeadFiles) and the
// runtime's Stop keeps files: then its processes go, its files stay, it
// is failed all the same, and Start brings it back with its files until
// the owner deletes it. CheckDead finds the death at once, as the sweep
// would.
func TestDeadKeepsFiles(t *testing.T) {
	tests := []struct {
		name      string
		owner     string
		noKeep    bool // the runtime's Stop loses files
		check     bool // CheckDead instead of the sweep
		wantState sandbox.State
	}{
		{name: "a client's", owner: "", wantState: ""},
		{name: "another service's", owner: "sessions", wantState: ""},
		{name: "an owner that collects", owner: "runs", wantState: sandbox.StateStopped},
		{name: "found by CheckDead", owner: "runs", check: true, wantState: sandbox.StateStopped},
		{name: "a runtime whose stop loses files", owner: "runs", noKeep: true, wantState: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, Config{KeepDeadFiles: []string{"runs"}})
			if tt.noKeep {
				e.rt.SetCapabilities(sandbox.Capabilities{})
			}
			ctx := context.Background()
			id := e.create(t, CreateRequest{ManagedBy: tt.owner}).ID
			if _, err := e.m.Upload(ctx, id, "/workspace/out.txt", 0o644, strings.NewReader("result")); err != nil {
				t.Fatal(err)
			}
			if err := e.rt.Kill(id); err != nil {
				t.Fatal(err)
			}
			if tt.check {
				sb, err := e.m.CheckDead(ctx, id)
				if err != nil || sb.Status != string(api.StatusFailed) {
					t.Fatalf("CheckDead = %+v, %v; want failed", sb, err)
				}
			} else {
				e.m.sweep(ctx)
			}
			sb := e.waitStatus(t, id, api.StatusFailed)
			if !strings.HasPrefix(sb.Reason, "sandbox exited") {
				t.Errorf("reason %q", sb.Reason)
			}
			if got := e.rt.State(id); got != tt.wantState {
				t.Fatalf("runtime state %q, want %q", got, tt.wantState)
			}
			_, err := e.m.Start(ctx, id)
			if tt.wantState == "" {
				checkErr(t, err, errdefs.ErrFailedPrecondition, api.CodeConflict)
				return
			}
			if err != nil {
				t.Fatalf("start the dead sandbox: %v", err)
			}
			e.waitStatus(t, id, api.StatusRunning)
			res, err := e.m.Exec(ctx, id, ExecRequest{Command: []string{"cat", "out.txt"}})
			if err != nil || res.Stdout != "result" {
				t.Errorf("the dead sandbox's file after its start: %+v, %v", res, err)
			}
			if err := e.m.Delete(ctx, id); err != nil {
				t.Fatal(err)
			}
			if got := e.rt.State(id); got != "" {
				t.Errorf("runtime state after delete %q", got)
			}
		})
	}
}

// TestCheckDeadLive: CheckDead leaves a live sandbox, and one not running,
// as they are.
func TestCheckDeadLive(t *testing.T) {
	e := newEnv(t, Config{})
	ctx := context.Background()
	id := e.running(t)
	if sb, err := e.m.CheckDead(ctx, id); err != nil || sb.Status != string(api.StatusRunning) {
		t.Errorf("CheckDead of a live sandbox = %+v, %v", sb, err)
	}
	if _, err := e.m.Stop(ctx, id); err != nil {
		t.Fatal(err)
	}
	if sb, err := e.m.CheckDead(ctx, id); err != nil || sb.Status != string(api.StatusSucceeded) || e.rt.State(id) != sandbox.StateStopped {
		t.Errorf("CheckDead of a stopped sandbox = %+v, %v", sb, err)
	}
	if _, err := e.m.CheckDead(ctx, "nope"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("CheckDead of no sandbox: %v", err)
	}
}

// The sweep settles a pending sandbox whose maker is gone (its daemon
// stopped, or the maker's last write failed) as Recover would, and
// leaves alone one being made, whose maker holds its claim.
func TestSweepReclaimsUnmade(t *testing.T) {
	for _, tc := range []struct {
		name      string
		reason    string // the pending record's
		lose      bool   // its runtime side is gone (or was never made)
		want      api.SandboxStatus
		wantWhy   string
		wantState sandbox.State // "": no runtime side
	}{
		{name: "created", reason: "created from image alpine",
			want: api.StatusFailed, wantWhy: "its daemon stopped while the sandbox was being created"},
		{name: "created, before its runtime side", reason: "created from image alpine", lose: true,
			want: api.StatusFailed, wantWhy: "its daemon stopped while the sandbox was being created"},
		{name: "started again", reason: reasonStartRequested,
			want: api.StatusSucceeded, wantWhy: "its daemon stopped while the sandbox was being started again", wantState: sandbox.StateStopped},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, Config{})
			ctx := context.Background()
			id := e.running(t)
			if tc.lose {
				if err := e.rt.Delete(ctx, id); err != nil {
					t.Fatal(err)
				}
			}
			// What a maker that is gone leaves: the record pending, its
			// making claimed by no one.
			if _, err := e.st.UpdateSandbox(ctx, id, func(sb *store.Sandbox) error {
				sb.Status, sb.Reason = string(api.StatusPending), tc.reason
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			e.m.sweep(ctx)
			sb, err := e.st.GetSandbox(ctx, id)
			if err != nil || sb.Status != string(tc.want) || sb.Reason != tc.wantWhy {
				t.Fatalf("after the sweep: %+v, %v; want %s (%s)", sb, err, tc.want, tc.wantWhy)
			}
			st, err := e.rt.Status(ctx, id)
			if tc.wantState == "" && !errors.Is(err, errdefs.ErrNotFound) || tc.wantState != "" && st.State != tc.wantState {
				t.Errorf("its runtime side after the sweep: %+v, %v; want state %q", st, err, tc.wantState)
			}
		})
	}

	t.Run("being made", func(t *testing.T) {
		e := newEnv(t, Config{})
		ctx := context.Background()
		entered, release := make(chan string, 1), make(chan struct{})
		e.rt.SetHooks(fakeruntime.Hooks{Start: func(_ context.Context, id string) error {
			entered <- id
			<-release
			return nil
		}})
		type result struct {
			sb  *store.Sandbox
			err error
		}
		created := make(chan result, 1)
		go func() {
			sb, err := e.m.Create(ctx, CreateRequest{Image: "alpine"})
			created <- result{sb, err}
		}()
		id := <-entered
		swept := make(chan struct{})
		go func() {
			defer close(swept)
			e.m.sweep(ctx)
		}()
		select {
		case <-swept:
		case <-time.After(2 * time.Second):
			t.Error("the sweep waits for the create in progress")
		}
		close(release)
		<-swept
		if r := <-created; r.err != nil || r.sb.ID != id || r.sb.Status != string(api.StatusRunning) {
			t.Errorf("the create the sweep met: %+v, %v; want %s running", r.sb, r.err, id)
		}
	})
}
