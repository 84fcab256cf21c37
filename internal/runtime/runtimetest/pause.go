package runtimetest

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agent2env/agent2env/internal/agent"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/sandbox"
)

// pauser returns rt as a sandbox.Pauser when its Capabilities claim Pause;
// otherwise it checks that a pause is refused as not implemented and
// returns nil.
func pauser(t *testing.T, rt sandbox.Runtime, id string) sandbox.Pauser {
	t.Helper()
	p, ok := rt.(sandbox.Pauser)
	if rt.Capabilities().Pause {
		if !ok {
			t.Fatalf("runtime %s claims Pause but is no sandbox.Pauser", rt.Name())
		}
		return p
	}
	if ok {
		if err := p.Pause(ctxFor(t), id); !errors.Is(err, errdefs.ErrNotImplemented) {
			t.Errorf("Pause on a runtime without the Pause capability = %v, want ErrNotImplemented", err)
		}
	}
	return nil
}

// testPause checks the states of a pause: refused before the sandbox runs,
// StatePaused in Status and List, idempotent both ways, and a paused
// sandbox that stops, starts and is deleted like a running one.
func (s *suite) testPause(t *testing.T) {
	ctx := ctxFor(t)
	rt := s.f.New(t)
	sp := s.spec(t)
	if err := rt.Create(ctx, sp); err != nil {
		t.Fatalf("Create: %v", err)
	}
	t.Cleanup(func() { _ = rt.Delete(context.Background(), sp.ID) })
	p := pauser(t, rt, sp.ID)
	if p == nil {
		return
	}
	state := func(want sandbox.State) {
		t.Helper()
		st, err := rt.Status(ctx, sp.ID)
		if err != nil || st.State != want {
			t.Fatalf("Status = %+v, %v; want state %s", st, err, want)
		}
		list, err := rt.List(ctx)
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		for _, st := range list {
			if st.ID == sp.ID && st.State != want {
				t.Fatalf("List reports %s %s, want %s", sp.ID, st.State, want)
			}
		}
	}
	if err := p.Pause(ctx, sp.ID); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Errorf("Pause of a created sandbox = %v, want ErrFailedPrecondition", err)
	}
	if err := p.Pause(ctx, "rtnosuchsandbox"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Pause of an unknown sandbox = %v, want ErrNotFound", err)
	}
	if err := rt.Start(ctx, sp.ID); err != nil {
		t.Fatalf("Start: %v", err)
	}
	for range 2 {
		if err := p.Pause(ctx, sp.ID); err != nil {
			t.Fatalf("Pause: %v", err)
		}
		state(sandbox.StatePaused)
	}
	for range 2 {
		if err := p.Resume(ctx, sp.ID); err != nil {
			t.Fatalf("Resume: %v", err)
		}
		state(sandbox.StateRunning)
	}
	c, err := rt.Agent(ctx, sp.ID)
	if err != nil {
		t.Fatalf("Agent: %v", err)
	}
	if _, err := c.Info(ctx); err != nil {
		t.Fatalf("agent after Resume: %v", err)
	}

	if err := p.Pause(ctx, sp.ID); err != nil {
		t.Fatalf("Pause: %v", err)
	}
	if err := rt.Stop(ctx, sp.ID, 5*time.Second); err != nil {
		t.Fatalf("Stop of a paused sandbox: %v", err)
	}
	state(sandbox.StateStopped)
	if err := p.Resume(ctx, sp.ID); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Errorf("Resume of a stopped sandbox = %v, want ErrFailedPrecondition", err)
	}
	if err := rt.Start(ctx, sp.ID); err != nil {
		t.Fatalf("Start after a paused sandbox stopped: %v", err)
	}
	state(sandbox.StateRunning)
	if err := p.Pause(ctx, sp.ID); err != nil {
		t.Fatalf("Pause: %v", err)
	}
	if err := rt.Delete(ctx, sp.ID); err != nil {
		t.Fatalf("Delete of a paused sandbox: %v", err)
	}
	assertGone(t, rt, sp.ID)
}

// testPauseFreezes checks what a pause does inside: a loop that counts
// and notes the time makes no progress while the sandbox is paused, and
// after Resume it goes on counting from where it was (its memory kept).
func (s *suite) testPauseFreezes(t *testing.T) {
	rt, sp, c := s.sandboxWith(t, nil)
	p := pauser(t, rt, sp.ID)
	if p == nil {
		return
	}
	ctx := ctxFor(t)
	// Builtins only but sleep: /proc/uptime is the kernel's clock, which
	// runs on while the loop is frozen.
	mustSh(t, c, `(i=0; while :; do i=$((i+1)); read up _ </proc/uptime; echo "$i $up" >>/tmp/count; sleep 0.02; done) </dev/null >/dev/null 2>&1 &`)
	waitLines(t, c, 5)
	const paused = time.Second
	if err := p.Pause(ctx, sp.ID); err != nil {
		t.Fatalf("Pause: %v", err)
	}
	time.Sleep(paused)
	if err := p.Resume(ctx, sp.ID); err != nil {
		t.Fatalf("Resume: %v", err)
	}
	n := waitLines(t, c, 0)
	counts := waitLines(t, c, len(n)+5)
	var gap float64
	for i, l := range counts {
		f := strings.Fields(l)
		k, _ := strconv.Atoi(f[0])
		if k != i+1 {
			t.Fatalf("line %d counts %d: the loop started again or lost count (memory not kept?):\n%s", i+1, k, strings.Join(counts, "\n"))
		}
		if i > 0 {
			up, _ := strconv.ParseFloat(f[1], 64)
			prev, _ := strconv.ParseFloat(strings.Fields(counts[i-1])[1], 64)
			gap = max(gap, up-prev)
		}
	}
	// Uptime has centiseconds; a loop that ran while paused has no gap
	// near the pause's length.
	if gap < paused.Seconds()-0.05 {
		t.Errorf("longest pause of the counting loop %.2fs, want about %s: it ran while paused", gap, paused)
	}
}

// waitLines waits until /tmp/count has at least n lines and returns them.
func waitLines(t *testing.T, c *agent.Client, n int) []string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := lines(mustSh(t, c, "cat /tmp/count 2>/dev/null || true"))
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("the counting loop wrote %d lines in 10 s, want %d", len(got), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
