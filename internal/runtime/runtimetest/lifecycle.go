package runtimetest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agent2env/agent2env/internal/agent"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/sandbox"
	"github.com/agent2env/agent2env/internal/testenv"
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
	st := status(sandbox.StateRunning)
	if st.Pid < 0 || (rt.Capabilities().LocalFiles && st.Pid == 0) {
		t.Errorf("running sandbox of a runtime with LocalFiles %v reports pid %d", rt.Capabilities().LocalFiles, st.Pid)
	}
	c, err := rt.Agent(ctx, sp.ID)
	if err != nil {
		t.Fatalf("Agent: %v", err)
	}
	// Through the agent's file API, which the fake maps into its sandbox.
	upload(t, c, "/workspace/f", []byte("kept"))
	upload(t, c, "/workspace/mb", make([]byte, 1<<20))
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
		if got := download(t, c, "/workspace/f"); got != "kept" {
			t.Errorf("file after Stop and Start = %q, want it kept", got)
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
	type call struct {
		name string
		call func() error
	}
	calls := []call{
		{"Start", func() error { return rt.Start(ctx, unknown) }},
		{"Stop", func() error { return rt.Stop(ctx, unknown, time.Second) }},
		{"Delete", func() error { return rt.Delete(ctx, unknown) }},
		{"Status", func() error { _, err := rt.Status(ctx, unknown); return err }},
		{"Agent", func() error { _, err := rt.Agent(ctx, unknown); return err }},
	}
	if ur, ok := rt.(sandbox.UsageReader); ok {
		calls = append(calls, call{"Usage", func() error { _, err := ur.Usage(ctx, unknown); return err }})
	}
	if lr, ok := rt.(sandbox.LogReader); ok {
		calls = append(calls, call{"Logs", func() error { _, err := lr.Logs(ctx, unknown, 100); return err }})
		if _, err := lr.Logs(ctx, sp.ID, -1); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("Logs with a negative limit = %v, want ErrInvalidArgument", err)
		}
	}
	for _, tc := range calls {
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
	noImage := s.spec(t)
	noImage.Image = ""
	if err := rt.Create(ctx, noImage); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("Create without an image = %v, want ErrInvalidArgument", err)
	}
	assertGone(t, rt, noImage.ID)
}

// testList checks that one List call reports every sandbox as Status
// does, and notices an agent that died behind the runtime's back: the
// daemon reconciles its records against List alone.
func (s *suite) testList(t *testing.T) {
	ctx := ctxFor(t)
	rt := s.f.New(t)
	running, created, stopped, killed := s.spec(t), s.spec(t), s.spec(t), s.spec(t)
	for _, sp := range []*sandbox.Spec{running, stopped, killed} {
		sp.Labels = map[string]string{"sandbox": sp.ID}
		started(t, rt, sp)
	}
	if err := rt.Create(ctx, created); err != nil {
		t.Fatalf("Create: %v", err)
	}
	t.Cleanup(func() { _ = rt.Delete(context.Background(), created.ID) })
	if err := rt.Stop(ctx, stopped.ID, 5*time.Second); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if s.f.Kill == nil {
		t.Fatal("the Factory has no Kill")
	}
	s.f.Kill(t, rt, killed.ID)

	list, err := rt.List(ctx)
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	got := map[string]sandbox.Status{}
	for _, st := range list {
		got[st.ID] = st
	}
	for _, tc := range []struct {
		sp   *sandbox.Spec
		want []sandbox.State
	}{
		{running, []sandbox.State{sandbox.StateRunning}},
		{created, []sandbox.State{sandbox.StateCreated}},
		{stopped, []sandbox.State{sandbox.StateStopped}},
		// Dead is all that matters: a runtime may not tell a crash from a stop.
		{killed, []sandbox.State{sandbox.StateStopped, sandbox.StateUnknown}},
	} {
		st, ok := got[tc.sp.ID]
		if !ok {
			t.Errorf("List lacks %s: %+v", tc.sp.ID, list)
			continue
		}
		if !slices.Contains(tc.want, st.State) {
			t.Errorf("List reports %s as %s, want one of %v", tc.sp.ID, st.State, tc.want)
		}
		if diff := cmp.Diff(tc.sp.Labels, st.Labels); diff != "" {
			t.Errorf("labels of %s (-want +got):\n%s", tc.sp.ID, diff)
		}
		one, err := rt.Status(ctx, tc.sp.ID)
		if err != nil || one.State != st.State || one.Pid != st.Pid {
			t.Errorf("Status of %s = %+v, %v; List says %+v", tc.sp.ID, one, err, st)
		}
	}

	if err := rt.Delete(ctx, running.ID); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	assertGone(t, rt, running.ID)
}

// testCapabilities checks that what a runtime cannot do it refuses.
func (s *suite) testCapabilities(t *testing.T) {
	ctx := ctxFor(t)
	rt := s.f.New(t)
	egress := s.spec(t)
	egress.Network.Egress = &sandbox.Egress{AllowedDomains: []string{"example.com"}}
	err := rt.Create(ctx, egress)
	if err == nil {
		t.Cleanup(func() { _ = rt.Delete(context.Background(), egress.ID) })
	}
	if rt.Capabilities().NetworkPolicy {
		if err != nil {
			t.Errorf("Create with an egress policy on a runtime with NetworkPolicy = %v", err)
		}
		return
	}
	if !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("Create with an egress policy on a runtime without NetworkPolicy = %v, want ErrInvalidArgument", err)
	}
	assertGone(t, rt, egress.ID)
}

// testClassesRefused checks that a runtime refuses the persistence, storage
// class and runtime class its Capabilities lack. (Those it has need what
// the runtime's environment provides, a cluster's classes: the runtime's
// own tests check them.)
func (s *suite) testClassesRefused(t *testing.T) {
	ctx := ctxFor(t)
	rt := s.f.New(t)
	caps := rt.Capabilities()
	for _, tc := range []struct {
		field string
		lacks bool
		edit  func(*sandbox.Spec)
	}{
		{"persistence", !caps.Persistence, func(sp *sandbox.Spec) { sp.Persistence = &sandbox.Persistence{SizeBytes: 64 << 20} }},
		// "persistence": a runtime without persistence may say that first.
		{"persistence", !caps.StorageClass, func(sp *sandbox.Spec) {
			sp.Persistence = &sandbox.Persistence{SizeBytes: 64 << 20, StorageClass: "runtimetest"}
		}},
		{"runtimeClassName", !caps.RuntimeClass, func(sp *sandbox.Spec) { sp.RuntimeClass = "runtimetest" }},
	} {
		if !tc.lacks {
			continue
		}
		sp := s.spec(t)
		tc.edit(sp)
		err := rt.Create(ctx, sp)
		if err == nil {
			t.Cleanup(func() { _ = rt.Delete(context.Background(), sp.ID) })
		}
		if !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("Create with %s on a runtime without it = %v, want ErrInvalidArgument naming the field", tc.field, err)
		}
		assertGone(t, rt, sp.ID)
	}
}

// testImages checks the image preparation of a runtime that implements
// sandbox.ImagePreparer.
func (s *suite) testImages(t *testing.T) {
	ctx := ctxFor(t)
	rt := s.f.New(t)
	p, ok := rt.(sandbox.ImagePreparer)
	if !ok {
		testenv.Skip(t, "%s prepares no images (it implements no sandbox.ImagePreparer)", rt.Name())
	}
	sp := s.spec(t)
	if err := p.PrepareImage(ctx, sp.Image); err != nil {
		t.Fatalf("PrepareImage(%s): %v", sp.Image, err)
	}
	if ready, err := p.ImageReady(ctx, sp.Image); err != nil || !ready {
		t.Errorf("ImageReady(%s) after PrepareImage = %v, %v", sp.Image, ready, err)
	}
	// A runtime may require images to be prepared before Create.
	unknown := s.spec(t)
	unknown.Image = "runtimetest.invalid/never-prepared:0"
	ready, err := p.ImageReady(ctx, unknown.Image)
	if err != nil {
		t.Fatalf("ImageReady(%s): %v", unknown.Image, err)
	}
	if !ready {
		if err := rt.Create(ctx, unknown); err == nil {
			t.Cleanup(func() { _ = rt.Delete(context.Background(), unknown.ID) })
			t.Errorf("Create of an image that is not ready succeeded")
		}
		assertGone(t, rt, unknown.ID)
	}
}

// assertGone fails the test if the runtime reports sandbox id.
func assertGone(t *testing.T, rt sandbox.Runtime, id string) {
	t.Helper()
	if st, err := rt.Status(ctxFor(t), id); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Status of %s = %+v, %v; want ErrNotFound", id, st, err)
	}
	list, err := rt.List(ctxFor(t))
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	for _, st := range list {
		if st.ID == id {
			t.Errorf("List holds %s: %+v", id, st)
		}
	}
}

// upload writes data to path through the agent.
func upload(t *testing.T, c *agent.Client, path string, data []byte) {
	t.Helper()
	if _, err := c.Upload(ctxFor(t), path, 0o644, bytes.NewReader(data)); err != nil {
		t.Fatalf("Upload %s: %v", path, err)
	}
}

// download reads path through the agent.
func download(t *testing.T, c *agent.Client, path string) string {
	t.Helper()
	rc, _, err := c.Download(ctxFor(t), path)
	if err != nil {
		t.Fatalf("Download %s: %v", path, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("Download %s: %v", path, err)
	}
	return string(b)
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
	// A paused sandbox stays paused across a restart of the daemon.
	var paused *sandbox.Spec
	if p := pauser(t, rt, created.ID); p != nil {
		paused = s.spec(t)
		started(t, rt, paused)
		if err := p.Pause(ctx, paused.ID); err != nil {
			t.Fatalf("Pause: %v", err)
		}
	}

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
	if paused != nil {
		want[paused.ID] = sandbox.StatePaused
	}
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
	if paused != nil {
		if err := rt2.(sandbox.Pauser).Resume(ctx, paused.ID); err != nil {
			t.Fatalf("Resume after Recover: %v", err)
		}
		c, err := rt2.Agent(ctx, paused.ID)
		if err != nil {
			t.Fatalf("Agent after Recover: %v", err)
		}
		mustSh(t, c, "true")
	}
	for _, id := range []string{running.ID, created.ID} {
		if err := rt2.Delete(ctx, id); err != nil {
			t.Errorf("Delete after Recover: %v", err)
		}
	}
}
