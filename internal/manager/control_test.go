package manager

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/sandbox"
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
