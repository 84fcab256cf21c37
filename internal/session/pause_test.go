package session

import (
	"testing"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/sandbox"
)

// TestPauseAfterIdle: with PauseAfter set, a session idle that long has
// its sandbox paused by the reaper, once; its next request resumes it,
// through the session API or a context of the session, with its kernel's
// state kept. Without it nothing is paused.
func TestPauseAfterIdle(t *testing.T) {
	e := newEnv(t, func(su *setup) { su.cfg.PauseAfter = 5 * time.Minute })
	e.execute(t, bg, api.SessionExecuteRequest{Code: "x = 41", SessionID: "p"})
	sb := e.record(t, "", "p").SandboxID
	status := func(want api.SandboxStatus, state sandbox.State) {
		t.Helper()
		rec, err := e.M.Get(bg, sb)
		if err != nil || rec.Status != string(want) || e.Rt.State(sb) != state {
			t.Fatalf("sandbox %s: %+v %v, runtime %s; want %s, %s", sb, rec, err, e.Rt.State(sb), want, state)
		}
	}
	e.clock.Add(4 * time.Minute)
	if r, err := e.svc.Reap(bg); err != nil || r.Paused != 0 {
		t.Fatalf("reap before the pause is due: %+v %v", r, err)
	}
	status(api.StatusRunning, sandbox.StateRunning)
	e.clock.Add(time.Minute)
	if r, err := e.svc.Reap(bg); err != nil || r.Paused != 1 || r.Idle != 0 {
		t.Fatalf("reap once the pause is due: %+v %v, want one paused", r, err)
	}
	status(api.StatusPaused, sandbox.StatePaused)
	if r, err := e.svc.Reap(bg); err != nil || r.Paused != 0 {
		t.Errorf("second reap: %+v %v, want nothing more paused", r, err)
	}
	if r := e.execute(t, bg, api.SessionExecuteRequest{Code: "x + 1", SessionID: "p"}); r.Created || r.Result != "42" {
		t.Errorf("the next request: created %v, result %q; want the session resumed with x kept", r.Created, r.Result)
	}
	status(api.StatusRunning, sandbox.StateRunning)

	// A context of a session reaches the sandbox directly; its execution
	// resumes it too.
	c := e.create(t, api.CreateContextRequest{SessionName: "q", Language: "python"})
	e.exec(t, c.ContextID, "y = 1")
	sb = e.record(t, "", "q").SandboxID
	e.clock.Add(6 * time.Minute)
	if r, err := e.svc.Reap(bg); err != nil || r.Paused != 2 {
		t.Fatalf("reap: %+v %v, want both sessions paused", r, err)
	}
	status(api.StatusPaused, sandbox.StatePaused)
	if r := e.exec(t, c.ContextID, "y + 1"); r.Result != "2" {
		t.Errorf("execution in a paused session's context: %+v, want 2", r)
	}
	status(api.StatusRunning, sandbox.StateRunning)
}

func TestNoPauseByDefault(t *testing.T) {
	e := newEnv(t)
	e.execute(t, bg, api.SessionExecuteRequest{Code: "1", SessionID: "p"})
	e.clock.Add(29 * time.Minute)
	if r, err := e.svc.Reap(bg); err != nil || r.Paused != 0 {
		t.Errorf("reap: %+v %v, want nothing paused", r, err)
	}
	if st := e.Rt.State(e.record(t, "", "p").SandboxID); st != sandbox.StateRunning {
		t.Errorf("sandbox %s, want running", st)
	}
}
