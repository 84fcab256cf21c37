package run

import (
	"cmp"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/agent"
	"github.com/agent2env/agent2env/internal/service"
)

// restart stops e's service as a stopping daemon does, runs between (nil:
// nothing) while no daemon runs, and starts a new one over the same
// store, sandboxes and directory.
func (e *env) restart(t *testing.T, between func()) {
	t.Helper()
	e.stop()
	if between != nil {
		between()
	}
	svc, err := New(e.svc.cfg, service.NewSandboxes(e.M, ""), e.St, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	e.svc = svc
	e.start(t)
}

// readRun returns run id's output log and event log as they are now.
func readRun(t *testing.T, e *env, id string) (output, events string) {
	t.Helper()
	rc, err := e.svc.Logs(bg, id)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	out, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := os.ReadFile(filepath.Join(e.svc.runDir(id), eventsFile))
	if err != nil {
		t.Fatal(err)
	}
	return string(out), string(ev)
}

// A run survives its daemon's restart in its agent and check phases: the
// agent goes on in its sandbox, and the next daemon reads its output on
// from where the last one stopped (an unterminated line joined whole),
// ends it with its exit and checks its end conditions, or runs its check
// again; the run's timeout and a cancel hold across the restart. Earlier
// phases, and an agent gone from its sandbox, end failed.
func TestCarryOn(t *testing.T) {
	const restarted = "the daemon restarted: the run goes on in its "
	for _, tc := range []struct {
		name       string
		setup      string // the task's one setup command ("": none)
		entrypoint string
		check      string
		timeout    string
		phase      string // the daemon stops once the run is in this phase
		printed    string // ... and has printed this
		// between runs while no daemon runs; cancel cancels the run once
		// the next one has taken it up.
		between func(t *testing.T, e *env, sandboxID string)
		cancel  bool
		want    api.RunStatus
		reason  string // in the run's reason
		output  string // the whole output log, when set
		events  []string
		once    []string // lines in the output log and the event log exactly once
	}{{
		name:       "agent",
		entrypoint: "echo one; printf two-; sleep 1; echo half; sleep 0.2; echo three >&2; echo done > done.txt",
		phase:      api.PhaseAgent, printed: "one",
		want: api.RunSucceeded, output: "one\ntwo-half\n[stderr] three\n",
		events: []string{restarted + "agent phase"},
	}, {
		// As a daemon killed up to saveEvery after its last save leaves
		// it: the output logged since is read again, and logged once.
		name:       "agent read again after a stale state",
		entrypoint: "echo one; echo two; echo three >&2; sleep 1; echo four; echo done > done.txt",
		phase:      api.PhaseAgent, printed: "[stderr] three",
		between: func(t *testing.T, e *env, _ string) {
			dir := e.svc.runDir(e.onlyRun(t))
			st := readState(t, dir)
			var logged int64
			st.Next, st.Logged, st.Tail = 0, &logged, nil
			if err := writeResume(dir, st); err != nil {
				t.Fatal(err)
			}
		},
		want: api.RunSucceeded,
		once: []string{"one", "two", "three", "four"},
	}, {
		name:       "agent ended while no daemon ran",
		entrypoint: "echo start; sleep 0.3; for i in 1 2 3; do echo l$i; done; echo done > done.txt",
		phase:      api.PhaseAgent, printed: "start",
		between: func(*testing.T, *env, string) { time.Sleep(time.Second) },
		want:    api.RunSucceeded, output: "start\nl1\nl2\nl3\n",
	}, {
		name:       "agent failed while no daemon ran",
		entrypoint: "echo start; sleep 0.3; exit 3",
		phase:      api.PhaseAgent, printed: "start",
		between: func(*testing.T, *env, string) { time.Sleep(time.Second) },
		want:    api.RunFailed, reason: "the agent exited 3, not 0",
	}, {
		name:       "output lost while no daemon ran",
		entrypoint: "echo start; sleep 0.3; head -c 5000 /dev/zero | tr '\\0' x; echo; echo end; echo done > done.txt",
		phase:      api.PhaseAgent, printed: "start",
		between: func(*testing.T, *env, string) { time.Sleep(time.Second) },
		want:    api.RunSucceeded,
		events:  []string{"bytes of the agent's output were lost: written while no daemon read them"},
	}, {
		name:       "check run again",
		entrypoint: "echo done > done.txt",
		check:      "echo checking; sleep 1; echo checked",
		phase:      api.PhaseCheck, printed: "checking",
		want: api.RunSucceeded, output: "checking\nchecking\nchecked\n",
		events: []string{restarted + "check phase"},
	}, {
		name:       "timeout while no daemon ran",
		entrypoint: "echo start; sleep 300",
		timeout:    "2s",
		phase:      api.PhaseAgent, printed: "start",
		between: func(*testing.T, *env, string) { time.Sleep(2500 * time.Millisecond) },
		want:    api.RunTimeout,
	}, {
		name:       "cancelled after the restart",
		entrypoint: "echo start; sleep 300",
		phase:      api.PhaseAgent, printed: "start",
		cancel: true,
		want:   api.RunCancelled,
	}, {
		name:       "agent gone",
		entrypoint: "echo start; sleep 300",
		phase:      api.PhaseAgent, printed: "start",
		between: func(t *testing.T, e *env, sandboxID string) {
			if _, err := e.M.KillProc(bg, sandboxID, agentTag); err != nil {
				t.Fatal(err)
			}
		},
		want: api.RunFailed, reason: ReasonRestarted + ": the agent's process was no longer in its sandbox",
	}, {
		name:       "agent not started",
		entrypoint: "echo start; if [ -f again ]; then echo done > done.txt; exit 0; fi; touch again; sleep 300",
		phase:      api.PhaseAgent, printed: "start",
		between: func(t *testing.T, e *env, sandboxID string) {
			// As a daemon that stopped before its start request reached
			// the sandbox leaves it.
			if _, err := e.M.KillProc(bg, sandboxID, agentTag); err != nil {
				t.Fatal(err)
			}
			dir := e.svc.runDir(e.onlyRun(t))
			st := readState(t, dir)
			st.Started, st.Next = false, 0
			if err := writeResume(dir, st); err != nil {
				t.Fatal(err)
			}
		},
		want: api.RunSucceeded,
	}, {
		name:       "setup",
		setup:      "echo setting; sleep 1",
		entrypoint: "echo done > done.txt",
		phase:      api.PhaseSetup, printed: "setting",
		want: api.RunFailed, reason: ReasonRestarted,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "output lost while no daemon ran" {
				defer func(n int) { agentOutputKept = n }(agentOutputKept)
				agentOutputKept = agent.MinProcOutput
			}
			e := newEnv(t, Config{})
			content := taskYAML(tc.entrypoint, cmp.Or(tc.timeout, "1m"), cmp.Or(tc.check, "true"), "1m", "30s")
			if tc.setup != "" {
				content += "setup: [" + quote(tc.setup) + "]\n"
			}
			b := e.submit(t, content, api.RunSubmitRequest{})
			id := b.Runs[0].ID
			sandboxID := waitPhase(t, e, id, tc.phase)
			waitOutput(t, e, id, tc.printed)
			e.restart(t, func() {
				if tc.between != nil {
					tc.between(t, e, sandboxID)
				}
			})
			if tc.cancel {
				waitEvent(t, e, id, restarted)
				if _, err := e.svc.Cancel(bg, id); err != nil {
					t.Fatal(err)
				}
			}
			r := e.wait(t, b, 20*time.Second)[0]
			if r.Status != tc.want || !strings.Contains(r.Reason, tc.reason) {
				t.Errorf("run: %s %q, want %s %q", r.Status, r.Reason, tc.want, tc.reason)
			}
			output, events := readRun(t, e, id)
			if tc.output != "" && output != tc.output {
				t.Errorf("output log %q, want %q", output, tc.output)
			}
			for _, want := range tc.events {
				if !strings.Contains(events, want) {
					t.Errorf("no event %q in %s", want, events)
				}
			}
			for _, line := range tc.once {
				if n := strings.Count(output, line+"\n"); n != 1 {
					t.Errorf("%q %d times in the output log, want once: %s", line, n, output)
				}
				if n := strings.Count(events, `"text":"`+line+`"`); n != 1 {
					t.Errorf("%q %d times in the event log, want once: %s", line, n, events)
				}
			}
			if tc.want == api.RunSucceeded && (r.ExitCode == nil || *r.ExitCode != 0 || r.Timings[api.PhaseAgent] <= 0) {
				t.Errorf("exit code %v, timings %v", r.ExitCode, r.Timings)
			}
			// Removed just after the end is recorded (a daemon that dies
			// in between leaves the state of a run that ended, which no
			// recovery reads): give it the moment.
			resume := filepath.Join(e.svc.runDir(id), resumeFile)
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				_, err := os.Stat(resume)
				if os.IsNotExist(err) {
					break
				}
				if time.Now().After(deadline) {
					t.Errorf("the resume state is left after the run's end: %v", err)
					break
				}
			}
			e.noSandboxes(t)
		})
	}
}

// waitEvent waits for run id's event log to hold text.
func waitEvent(t *testing.T, e *env, id, text string) {
	t.Helper()
	for range 500 {
		if _, events := readRun(t, e, id); strings.Contains(events, text) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("run %s never logged %q", id, text)
}

// onlyRun returns the id of the one run e's store holds.
func (e *env) onlyRun(t *testing.T) string {
	t.Helper()
	list, err := e.svc.List(bg, ListOptions{})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("runs: %+v, %v", list, err)
	}
	return list.Items[0].ID
}

// readState reads the resume state in run directory dir.
func readState(t *testing.T, dir string) *resumeState {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, resumeFile))
	if err != nil {
		t.Fatal(err)
	}
	var st resumeState
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	return &st
}
