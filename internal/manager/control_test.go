package manager

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/runtime/fakeruntime"
	"github.com/agent2env/agent2env/internal/sandbox"
	"github.com/agent2env/agent2env/internal/store"
)

func TestStopStartRestart(t *testing.T) {
	e := templateEnv(t, fakeTemplates{"t": {Image: "alpine", StartupScript: "echo started >> starts.log"}})
	ctx := context.Background()
	sb := e.create(t, CreateRequest{Template: "t"})
	e.waitStatus(t, sb.ID, api.StatusRunning)
	if len(sb.AccessToken) != 64 {
		t.Errorf("access token %q is not 64 hex chars", sb.AccessToken)
	}
	if _, err := e.m.Upload(ctx, sb.ID, "/workspace/kept.txt", 0o644, strings.NewReader("kept")); err != nil {
		t.Fatal(err)
	}

	if _, err := e.m.Start(ctx, sb.ID); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Errorf("start of a running sandbox: %v, want failed precondition", err)
	}
	got, err := e.m.Stop(ctx, sb.ID)
	if err != nil || got.Status != string(api.StatusSucceeded) || got.Reason != "stopped by request" {
		t.Fatalf("stop = %+v, %v", got, err)
	}
	if e.rt.State(sb.ID) != sandbox.StateStopped {
		t.Errorf("runtime state after stop = %s", e.rt.State(sb.ID))
	}
	if _, err := e.m.Exec(ctx, sb.ID, ExecRequest{Command: []string{"true"}}); errdefs.Code(err) != api.CodeSandboxNotReady {
		t.Errorf("exec in a stopped sandbox: %v, want SANDBOX_NOT_READY", err)
	}
	if _, err := e.m.Stop(ctx, sb.ID); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Errorf("second stop: %v, want failed precondition", err)
	}

	if got, err = e.m.Start(ctx, sb.ID); err != nil || got.Status != string(api.StatusPending) {
		t.Fatalf("start = %+v, %v", got, err)
	}
	e.waitStatus(t, sb.ID, api.StatusRunning)
	if got, err = e.m.Restart(ctx, sb.ID); err != nil {
		t.Fatalf("restart: %v", err)
	}
	e.waitStatus(t, sb.ID, api.StatusRunning)

	res, err := e.m.Exec(ctx, sb.ID, ExecRequest{Command: []string{"cat", "kept.txt", "starts.log"}})
	if err != nil || res.Stdout != "keptstarted\nstarted\nstarted\n" {
		t.Errorf("after stop/start/restart: %+v, %v; want the file kept and the startup script run three times", res, err)
	}
}

// A sandbox whose main process exited keeps its files and starts again.
func TestStartAfterMainExit(t *testing.T) {
	e := templateEnv(t, fakeTemplates{"job": {Image: "alpine", Command: []string{"sh", "-c", "echo run >> runs.log"}}})
	ctx := context.Background()
	sb := e.create(t, CreateRequest{Template: "job"})
	for range 2 {
		e.waitStatus(t, sb.ID, api.StatusRunning)
		waitFor(t, func() bool {
			e.m.sweep(ctx)
			got, _ := e.m.Get(ctx, sb.ID)
			return got.Status == string(api.StatusSucceeded)
		})
		if _, err := e.m.Start(ctx, sb.ID); err != nil {
			t.Fatal(err)
		}
	}
	e.waitStatus(t, sb.ID, api.StatusRunning)
	dir, _ := e.rt.WorkDir(sb.ID)
	waitFor(t, func() bool {
		b, _ := os.ReadFile(filepath.Join(dir, "runs.log"))
		return string(b) == "run\nrun\nrun\n"
	})
}

func TestControlUnknownAndFailed(t *testing.T) {
	e := newEnv(t, Config{})
	ctx := context.Background()
	for name, op := range map[string]func(context.Context, string) (any, error){
		"stop":    func(c context.Context, id string) (any, error) { return e.m.Stop(c, id) },
		"start":   func(c context.Context, id string) (any, error) { return e.m.Start(c, id) },
		"restart": func(c context.Context, id string) (any, error) { return e.m.Restart(c, id) },
	} {
		if _, err := op(ctx, "nope"); errdefs.Code(err) != api.CodeSandboxNotFound {
			t.Errorf("%s unknown: %v, want SANDBOX_NOT_FOUND", name, err)
		}
	}
	e.imgs.failErr = errors.New("no such image")
	sb := e.create(t, CreateRequest{Image: "missing"})
	e.waitStatus(t, sb.ID, api.StatusFailed)
	if _, err := e.m.Restart(ctx, sb.ID); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Errorf("restart of a failed sandbox: %v, want failed precondition", err)
	}
}

// waitFor polls cond for up to 5 seconds.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// An operation whose record cannot be written (the store's disk is full)
// fails and leaves the sandbox as it was: not stopped or frozen under a
// record that says otherwise, which the sweep would take for a sandbox that
// died and delete with its files.
func TestRecordWriteFails(t *testing.T) {
	pause := func(ctx context.Context, e *env, id string) error { _, err := e.m.Pause(ctx, id); return err }
	tests := []struct {
		name  string
		setup func(ctx context.Context, e *env, id string) error // before the store fills
		op    func(ctx context.Context, e *env, id string) error
		want  sandbox.State
	}{
		{"stop", nil, func(ctx context.Context, e *env, id string) error { _, err := e.m.Stop(ctx, id); return err }, sandbox.StateRunning},
		{"restart", nil, func(ctx context.Context, e *env, id string) error { _, err := e.m.Restart(ctx, id); return err }, sandbox.StateRunning},
		{"pause", nil, pause, sandbox.StateRunning},
		{"resume", pause, func(ctx context.Context, e *env, id string) error { _, err := e.m.Resume(ctx, id); return err }, sandbox.StatePaused},
		{"snapshot and stop", nil, func(ctx context.Context, e *env, id string) error {
			_, err := e.m.Snapshot(ctx, id, SnapshotRequest{Stop: true})
			return err
		}, sandbox.StateRunning},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, _ := newSnapshotEnv(t)
			ctx := context.Background()
			id := e.running(t)
			if _, err := e.m.Upload(ctx, id, "/workspace/kept.txt", 0o644, strings.NewReader("kept")); err != nil {
				t.Fatal(err)
			}
			if tt.setup != nil {
				if err := tt.setup(ctx, e, id); err != nil {
					t.Fatal(err)
				}
			}
			before, err := e.m.Get(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			e.st.full.Store(true)
			checkErr(t, tt.op(ctx, e, id), errdefs.ErrResourceExhausted, api.CodeNoSpace)
			e.st.full.Store(false)
			if got := e.rt.State(id); got != tt.want {
				t.Errorf("runtime state after the failed %s = %q, want %q", tt.name, got, tt.want)
			}
			e.m.sweep(ctx)
			sb, err := e.m.Get(ctx, id)
			if err != nil || sb.Status != before.Status {
				t.Fatalf("after the failed %s and a sweep: %+v, %v; want it %s", tt.name, sb, err, before.Status)
			}
			if sb.Status == string(api.StatusPaused) {
				if _, err := e.m.Resume(ctx, id); err != nil {
					t.Fatal(err)
				}
			}
			res, err := e.m.Exec(ctx, id, ExecRequest{Command: []string{"cat", "kept.txt"}})
			if err != nil || res.Stdout != "kept" {
				t.Errorf("exec after the failed %s = %+v, %v; want the sandbox usable with its files", tt.name, res, err)
			}
		})
	}
}

// A stop the runtime fails, leaving the sandbox running, leaves its record
// running too.
func TestStopRuntimeFailure(t *testing.T) {
	e := newEnv(t, Config{})
	ctx := context.Background()
	id := e.running(t)
	e.rt.SetHooks(fakeruntime.Hooks{Stop: func(context.Context, string) error { return errdefs.Unavailable("crun stuck") }})
	if _, err := e.m.Stop(ctx, id); !errors.Is(err, errdefs.ErrUnavailable) {
		t.Errorf("Stop = %v, want the runtime's error", err)
	}
	e.rt.SetHooks(fakeruntime.Hooks{})
	e.m.sweep(ctx)
	e.waitStatus(t, id, api.StatusRunning)
	if res, err := e.m.Exec(ctx, id, ExecRequest{Command: []string{"true"}}); err != nil || res.ExitCode != 0 {
		t.Errorf("exec after a failed stop = %+v, %v", res, err)
	}
}

// A stopped sandbox whose start fails stays stopped with its files, to be
// started again.
func TestStartFailureKeepsFiles(t *testing.T) {
	e := newEnv(t, Config{})
	ctx := context.Background()
	id := e.running(t)
	if _, err := e.m.Upload(ctx, id, "/workspace/kept.txt", 0o644, strings.NewReader("kept")); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.Stop(ctx, id); err != nil {
		t.Fatal(err)
	}
	e.rt.SetHooks(fakeruntime.Hooks{Start: func(context.Context, string) error { return errors.New("no loop device") }})
	if _, err := e.m.Start(ctx, id); err != nil {
		t.Fatal(err)
	}
	sb := e.waitStatus(t, id, api.StatusSucceeded)
	if !strings.HasPrefix(sb.Reason, "start failed: ") || !strings.Contains(sb.Reason, "no loop device") {
		t.Errorf("reason %q, want the start's failure", sb.Reason)
	}
	if got := e.rt.State(id); got != sandbox.StateStopped {
		t.Errorf("runtime state after a failed start = %q, want stopped", got)
	}
	e.rt.SetHooks(fakeruntime.Hooks{})
	if _, err := e.m.Start(ctx, id); err != nil {
		t.Fatal(err)
	}
	e.waitStatus(t, id, api.StatusRunning)
	if res, err := e.m.Exec(ctx, id, ExecRequest{Command: []string{"cat", "kept.txt"}}); err != nil || res.Stdout != "kept" {
		t.Errorf("exec after starting again = %+v, %v; want its files", res, err)
	}
}

// A daemon that died while a stopped sandbox was being started again
// leaves it stopped, with its files, at its restart.
func TestRecoverInterruptedStart(t *testing.T) {
	e := newEnv(t, Config{})
	ctx := context.Background()
	id := e.running(t)
	if _, err := e.m.Stop(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.setStatus(ctx, id, api.StatusPending, reasonStartRequested); err != nil {
		t.Fatal(err)
	}
	if err := e.rt.Start(ctx, id); err != nil {
		t.Fatal(err)
	}
	m2 := newManager(Config{}, e)
	defer m2.Close()
	if err := m2.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	if sb, err := m2.Get(ctx, id); err != nil || sb.Status != string(api.StatusSucceeded) {
		t.Fatalf("after recovery: %+v, %v; want it succeeded (stopped)", sb, err)
	}
	if got := e.rt.State(id); got != sandbox.StateStopped {
		t.Errorf("runtime state after recovery = %q, want stopped, its files kept", got)
	}
}

// TestMakingReleasedWhenRunning: whoever makes or starts a sandbox has
// released its making by the time the record says running, so that
// whoever sees it running may stop and start it again at once (released
// after the write, a Start right after it was refused "being made or
// started by another request"). The store checks the claim as the
// running status is written: for a create, a create with a startup plan
// (made in the background) and a start again.
func TestMakingReleasedWhenRunning(t *testing.T) {
	ctx := context.Background()
	stopped := func(t *testing.T, e *env) string {
		sb := e.create(t, CreateRequest{Template: "t"})
		e.waitStatus(t, sb.ID, api.StatusRunning)
		if _, err := e.m.Stop(ctx, sb.ID); err != nil {
			t.Fatal(err)
		}
		return sb.ID
	}
	tests := []struct {
		name    string
		prepare func(t *testing.T, e *env) string // what make is given
		make    func(t *testing.T, e *env, id string) string
	}{
		{"create", nil, func(t *testing.T, e *env, _ string) string {
			return e.create(t, CreateRequest{Image: "alpine"}).ID
		}},
		{"create with startup", nil, func(t *testing.T, e *env, _ string) string {
			return e.create(t, CreateRequest{Template: "t"}).ID
		}},
		{"start again", stopped, func(t *testing.T, e *env, id string) string {
			if _, err := e.m.Start(ctx, id); err != nil {
				t.Fatal(err)
			}
			return id
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := templateEnv(t, fakeTemplates{"t": {Image: "alpine", StartupScript: "true"}})
			var id string
			if tt.prepare != nil {
				id = tt.prepare(t, e)
			}
			seen := e.watchRunning(t)
			id = tt.make(t, e, id)
			e.waitStatus(t, id, api.StatusRunning)
			if got := seen(); len(got) != 1 || got[0] != id {
				t.Fatalf("running written for %v, want %s once", got, id)
			}
		})
	}
}

// watchRunning has the store check, as each sandbox's running status is
// written, that its making is not claimed; it returns the ids it saw.
func (e *env) watchRunning(t *testing.T) (seen func() []string) {
	t.Helper()
	var mu sync.Mutex
	var ids []string
	check := func(id string, evs []store.Event) {
		if len(evs) == 0 || evs[0].Status != string(api.StatusRunning) {
			return
		}
		release, err := e.m.makers.TryLock(context.Background(), id)
		if err != nil || release == nil {
			t.Errorf("sandbox %s written running with its making still claimed (%v)", id, err)
		} else {
			release()
		}
		mu.Lock()
		ids = append(ids, id)
		mu.Unlock()
	}
	e.st.onUpdate.Store(&check)
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return ids
	}
}
