package manager

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/runtime/fakeruntime"
	"github.com/agent2env/agent2env/internal/sandbox"
)

func TestPauseResume(t *testing.T) {
	e := newEnv(t, Config{})
	ctx := context.Background()
	id := e.running(t)
	before, err := e.m.Usage(ctx)
	if err != nil {
		t.Fatal(err)
	}

	sb, err := e.m.Pause(ctx, id)
	if err != nil || sb.Status != string(api.StatusPaused) || sb.Reason != "paused by request" {
		t.Fatalf("Pause = %+v, %v", sb, err)
	}
	if got := e.rt.State(id); got != sandbox.StatePaused {
		t.Errorf("runtime state %s, want paused", got)
	}
	// What reaches the agent is refused, naming the state and the way out
	// (each client names its own way to resume: the details say which
	// sandbox, TestNotRunningDetails).
	_, err = e.m.Exec(ctx, id, ExecRequest{Command: []string{"true"}})
	checkErr(t, err, errdefs.ErrFailedPrecondition, api.CodeSandboxNotReady)
	if !strings.Contains(err.Error(), "is paused") || !strings.Contains(err.Error(), "resume it first") {
		t.Errorf("exec in a paused sandbox: %q, want it to say paused and to resume it", err)
	}
	_, err = e.m.Upload(ctx, id, "/workspace/f", 0o644, strings.NewReader("x"))
	checkErr(t, err, errdefs.ErrFailedPrecondition, api.CodeSandboxNotReady)
	_, err = e.m.Pause(ctx, id)
	checkErr(t, err, errdefs.ErrFailedPrecondition, api.CodeConflict)
	// It holds its limits still.
	if u, err := e.m.Usage(ctx); err != nil || u != before {
		t.Errorf("usage while paused = %+v, %v; want %+v", u, err, before)
	}

	sb, err = e.m.Resume(ctx, id)
	if err != nil || sb.Status != string(api.StatusRunning) || sb.Reason != "resumed by request" {
		t.Fatalf("Resume = %+v, %v", sb, err)
	}
	if res, err := e.m.Exec(ctx, id, ExecRequest{Command: []string{"echo", "on"}}); err != nil || res.Stdout != "on\n" {
		t.Errorf("exec after Resume = %+v, %v", res, err)
	}
	_, err = e.m.Resume(ctx, id)
	checkErr(t, err, errdefs.ErrFailedPrecondition, api.CodeConflict)

	// A paused sandbox stops, and starts again running.
	if _, err := e.m.Pause(ctx, id); err != nil {
		t.Fatal(err)
	}
	if sb, err := e.m.Stop(ctx, id); err != nil || sb.Status != string(api.StatusSucceeded) {
		t.Fatalf("Stop of a paused sandbox = %+v, %v", sb, err)
	}
	_, err = e.m.Resume(ctx, id)
	checkErr(t, err, errdefs.ErrFailedPrecondition, api.CodeConflict)
	if _, err := e.m.Start(ctx, id); err != nil {
		t.Fatal(err)
	}
	e.waitStatus(t, id, api.StatusRunning)

	// And is deleted as it is.
	if _, err := e.m.Pause(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := e.m.Delete(ctx, id); err != nil {
		t.Fatalf("Delete of a paused sandbox: %v", err)
	}
	if ids := e.rt.IDs(); len(ids) != 0 {
		t.Errorf("runtime holds %v after Delete", ids)
	}
	_, err = e.m.Pause(ctx, id)
	checkErr(t, err, errdefs.ErrNotFound, api.CodeSandboxNotFound)
}

// A runtime that cannot pause is 501, saying why, and nothing changes.
func TestPauseNotImplemented(t *testing.T) {
	for _, tc := range []struct {
		name string
		caps sandbox.Capabilities
		why  string
	}{
		{"no freezer", sandbox.Capabilities{LocalFiles: true, StopKeepsFiles: true}, "no cgroup freezer"},
		{"remote nodes", sandbox.Capabilities{StopKeepsFiles: true}, "run on other machines"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, Config{})
			ctx := context.Background()
			id := e.running(t)
			e.rt.SetCapabilities(tc.caps)
			for _, op := range []func(context.Context, string) (any, error){
				func(ctx context.Context, id string) (any, error) { return e.m.Pause(ctx, id) },
				func(ctx context.Context, id string) (any, error) { return e.m.Resume(ctx, id) },
			} {
				_, err := op(ctx, id)
				checkErr(t, err, errdefs.ErrNotImplemented, api.CodeNotImplemented)
				if err != nil && !strings.Contains(err.Error(), tc.why) {
					t.Errorf("error %q does not say %q", err, tc.why)
				}
			}
			if calls := e.rt.Calls(); calls.Pause+calls.Resume != 0 {
				t.Errorf("runtime called: %+v", calls)
			}
			e.waitStatus(t, id, api.StatusRunning)
		})
	}
}

// A pause the runtime fails leaves the sandbox running.
func TestPauseRuntimeFailure(t *testing.T) {
	e := newEnv(t, Config{})
	ctx := context.Background()
	id := e.running(t)
	e.rt.SetHooks(fakeruntime.Hooks{Pause: func(context.Context, string) error {
		return errdefs.Unavailable("freezer stuck")
	}})
	if _, err := e.m.Pause(ctx, id); !errors.Is(err, errdefs.ErrUnavailable) {
		t.Errorf("Pause = %v, want the runtime's ErrUnavailable", err)
	}
	e.waitStatus(t, id, api.StatusRunning)
	if res, err := e.m.Exec(ctx, id, ExecRequest{Command: []string{"true"}}); err != nil || res.ExitCode != 0 {
		t.Errorf("exec after a failed pause = %+v, %v", res, err)
	}
}
