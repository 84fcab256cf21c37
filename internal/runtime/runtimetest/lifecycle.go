package runtimetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/sandbox"
)

func (s *suite) testLifecycle(t *testing.T) {
	ctx := ctxFor(t)
	rt := s.f.New(t)
	sp := s.spec(t)
	sp.Labels = map[string]string{"owner": "runtimetest"}

	status := func(want sandbox.State) sandbox.Status {
		t.Helper()
		st, err := rt.Status(ctx, sp.ID)
		if err != nil {
			t.Fatalf("Status: %v", err)
		}
		if st.State != want {
			t.Fatalf("state = %s, want %s", st.State, want)
		}
		if diff := cmp.Diff(sp.Labels, st.Labels); diff != "" {
			t.Errorf("labels (-want +got):\n%s", diff)
		}
		return st
	}

	if err := rt.Create(ctx, sp); err != nil {
		t.Fatalf("Create: %v", err)
	}
	t.Cleanup(func() { _ = rt.Delete(context.Background(), sp.ID) })
	status(sandbox.StateCreated)
	list, err := rt.List(ctx)
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	found := false
	for _, st := range list {
		found = found || st.ID == sp.ID
	}
	if !found {
		t.Errorf("List = %v, does not hold %s", list, sp.ID)
	}

	if err := rt.Start(ctx, sp.ID); err != nil {
		t.Fatalf("Start: %v", err)
	}
	if st := status(sandbox.StateRunning); st.Pid <= 0 {
		t.Errorf("running sandbox reports pid %d", st.Pid)
	}
	c, err := rt.Agent(ctx, sp.ID)
	if err != nil {
		t.Fatalf("Agent: %v", err)
	}
	mustSh(t, c, "echo kept > /workspace/f && echo kept > $HOME/f && dd if=/dev/urandom of=/tmp/mb bs=64k count=16 2>/dev/null")
	if ur, ok := rt.(sandbox.UsageReader); ok {
		u, err := ur.Usage(ctx, sp.ID)
		if err != nil {
			t.Fatalf("Usage: %v", err)
		}
		if u.CPUNanos == 0 || u.MemoryBytes == 0 || u.Pids == 0 || u.DiskBytes < 1<<20 {
			t.Errorf("Usage of a running sandbox that wrote 1 MiB = %+v", u)
		}
	}

	if err := rt.Stop(ctx, sp.ID, 5*time.Second); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	status(sandbox.StateStopped)
	if _, err := c.Info(ctx); err == nil {
		t.Error("agent of a stopped sandbox answers")
	}

	if err := rt.Start(ctx, sp.ID); err != nil {
		t.Fatalf("Start after Stop: %v", err)
	}
	status(sandbox.StateRunning)
	if rt.Capabilities().StopKeepsFiles {
		if got := mustSh(t, c, "cat /workspace/f $HOME/f"); got != "kept\nkept\n" {
			t.Errorf("files after Stop and Start = %q, want them kept", got)
		}
	}

	if err := rt.Delete(ctx, sp.ID); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := rt.Status(ctx, sp.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Status after Delete = %v, want ErrNotFound", err)
	}
	if err := rt.Delete(ctx, sp.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("second Delete = %v, want ErrNotFound", err)
	}
}

func (s *suite) testErrors(t *testing.T) {
	ctx := ctxFor(t)
	rt := s.f.New(t)
	sp := s.spec(t)
	if err := rt.Create(ctx, sp); err != nil {
		t.Fatalf("Create: %v", err)
	}
	t.Cleanup(func() { _ = rt.Delete(context.Background(), sp.ID) })
	if err := rt.Create(ctx, sp); !errors.Is(err, errdefs.ErrAlreadyExists) {
		t.Errorf("Create of an existing id = %v, want ErrAlreadyExists", err)
	}

	const unknown = "rtnosuchsandbox"
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"Start", func() error { return rt.Start(ctx, unknown) }},
		{"Stop", func() error { return rt.Stop(ctx, unknown, time.Second) }},
		{"Delete", func() error { return rt.Delete(ctx, unknown) }},
		{"Status", func() error { _, err := rt.Status(ctx, unknown); return err }},
		{"Agent", func() error { _, err := rt.Agent(ctx, unknown); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.call(); !errors.Is(err, errdefs.ErrNotFound) {
				t.Errorf("%s of an unknown id = %v, want ErrNotFound", tc.name, err)
			}
		})
	}

	bad := s.spec(t)
	bad.ID = "Not/A/Valid/Id"
	if err := rt.Create(ctx, bad); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("Create with id %q = %v, want ErrInvalidArgument", bad.ID, err)
	}
}

// testRecover drops a Runtime with sandboxes in every state and checks
// that the next one re-adopts them.
func (s *suite) testRecover(t *testing.T) {
	ctx := ctxFor(t)
	rt := s.f.New(t)
	running, created := s.spec(t), s.spec(t)
	started(t, rt, running)
	if err := rt.Create(ctx, created); err != nil {
		t.Fatalf("Create: %v", err)
	}
	t.Cleanup(func() { _ = rt.Delete(context.Background(), created.ID) })

	rt2 := s.f.New(t)
	sts, err := rt2.Recover(ctx)
	if err != nil {
		t.Fatalf("Recover: %v", err)
	}
	got := map[string]sandbox.State{}
	for _, st := range sts {
		got[st.ID] = st.State
	}
	want := map[string]sandbox.State{running.ID: sandbox.StateRunning, created.ID: sandbox.StateCreated}
	for id, state := range want {
		if got[id] != state {
			t.Errorf("Recover reports %s as %q, want %q (all: %v)", id, got[id], state, got)
		}
	}
	c, err := rt2.Agent(ctx, running.ID)
	if err != nil {
		t.Fatalf("Agent after Recover: %v", err)
	}
	if out := mustSh(t, c, "echo recovered"); out != "recovered\n" {
		t.Errorf("exec after Recover = %q", out)
	}
	if err := rt2.Start(ctx, created.ID); err != nil {
		t.Fatalf("Start after Recover: %v", err)
	}
	for _, id := range []string{running.ID, created.ID} {
		if err := rt2.Delete(ctx, id); err != nil {
			t.Errorf("Delete after Recover: %v", err)
		}
	}
}
