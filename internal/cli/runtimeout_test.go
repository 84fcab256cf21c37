package cli

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agent2env/agent2env/api"
)

// timeoutDaemon answers the routes of the commands that run code or a
// command, and sandbox ls, each after delay, recording the timeout each
// request carried.
type timeoutDaemon struct {
	recorder
	delay time.Duration
	// timeouts are the "timeout" fields of the requests, by route: "METHOD
	// PATH timeout".
	timeouts []string
}

func newTimeoutDaemon(t *testing.T, delay time.Duration) *timeoutDaemon {
	d := &timeoutDaemon{delay: delay}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/sessions/execute", func(w http.ResponseWriter, r *http.Request) {
		reply(w, http.StatusOK, api.SessionExecuteResponse{ExecuteResponse: api.ExecuteResponse{Success: true}})
	})
	mux.HandleFunc("POST /api/v1/sessions/command", func(w http.ResponseWriter, r *http.Request) {
		reply(w, http.StatusOK, api.SessionCommandResponse{})
	})
	mux.HandleFunc("POST /api/v1/contexts/{id}/execute", func(w http.ResponseWriter, r *http.Request) {
		reply(w, http.StatusOK, api.ExecuteResponse{Success: true})
	})
	mux.HandleFunc("POST /api/v1/sandboxes/{id}/exec/stream", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		sse(w, "exit", api.ExecEvent{Type: "exit"})
	})
	mux.HandleFunc("GET /api/v1/sandboxes", func(w http.ResponseWriter, r *http.Request) {
		reply(w, http.StatusOK, api.SandboxList{Items: []api.Sandbox{{ID: "sb7", Status: api.StatusRunning}}})
	})
	d.serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Timeout float64 `json:"timeout"`
		}
		json.NewDecoder(r.Body).Decode(&body)
		d.mu.Lock()
		d.timeouts = append(d.timeouts, fmt.Sprintf("%s %s %g", r.Method, r.URL.Path, body.Timeout))
		d.mu.Unlock()
		time.Sleep(d.delay)
		mux.ServeHTTP(w, r)
	}))
	return d
}

// The routes of timeoutDaemon that take a timeout, as its timeouts name
// them.
const (
	sessionExec = "POST /api/v1/sessions/execute"
	sessionRun  = "POST /api/v1/sessions/command"
	contextExec = "POST /api/v1/contexts/cx1/execute"
	sandboxExec = "POST /api/v1/sandboxes/sb7/exec/stream"
)

// TestRunTimeoutVariable checks that SANDBOX_TIMEOUT means for the CLI what
// it means for the SDKs and "agent2env mcp": the timeout of an execution
// whose command gives no --timeout, not a bound on the wait for the
// daemon's answer.
func TestRunTimeoutVariable(t *testing.T) {
	tests := []struct {
		name  string
		env   string // $SANDBOX_TIMEOUT; "" for unset
		args  []string
		delay time.Duration // before the daemon answers
		// want is the request the daemon got, "METHOD PATH timeout",
		// unless err says why there is none.
		want, err string
	}{
		{name: "session exec", env: "30", args: []string{"session", "exec", "1"}, want: sessionExec + " 30"},
		{name: "session run", env: "30", args: []string{"session", "run", "--", "true"}, want: sessionRun + " 30"},
		{name: "context exec", env: "30", args: []string{"context", "exec", "cx1", "1", "-o", "json"}, want: contextExec + " 30"},
		{name: "sandbox exec", env: "30", args: []string{"sandbox", "exec", "sb7", "--", "true"}, want: sandboxExec + " 30"},
		{name: "fractional seconds", env: "2.5", args: []string{"session", "run", "--", "true"}, want: sessionRun + " 2.5"},
		{name: "sandbox exec counts whole seconds, rounded up", env: "2.5", args: []string{"sandbox", "exec", "sb7", "--", "true"},
			want: sandboxExec + " 3"},
		{name: "a duration", env: "1m30s", args: []string{"context", "exec", "cx1", "1", "-o", "json"}, want: contextExec + " 90"},
		{name: "unset: the daemon's", args: []string{"session", "exec", "1"}, want: sessionExec + " 0"},

		{name: "session exec's flag wins", env: "30", args: []string{"session", "exec", "--timeout", "5s", "1"}, want: sessionExec + " 5"},
		{name: "session run's flag wins", env: "30", args: []string{"session", "run", "--timeout", "1m", "--", "true"}, want: sessionRun + " 60"},
		{name: "context exec's flag wins", env: "30", args: []string{"context", "exec", "cx1", "1", "--timeout", "2m", "-o", "json"},
			want: contextExec + " 120"},
		{name: "sandbox exec's flag wins", env: "30", args: []string{"sandbox", "exec", "sb7", "--timeout", "600", "--", "true"},
			want: sandboxExec + " 600"},
		{name: "--timeout 0 leaves it to the daemon", env: "30", args: []string{"session", "exec", "--timeout", "0", "1"},
			want: sessionExec + " 0"},

		// The daemon answers an execution once it has ended, after making
		// the session's sandbox first; any request may take long.
		{name: "an execution answered after the variable's time", env: "0.2", delay: 600 * time.Millisecond,
			args: []string{"session", "exec", "1"}, want: sessionExec + " 0.2"},
		{name: "a request answered after the variable's time", env: "0.2", delay: 600 * time.Millisecond,
			args: []string{"sandbox", "ls", "-q"}, want: "GET /api/v1/sandboxes 0"},

		{name: "not a number", env: "soon", args: []string{"session", "exec", "1"},
			err: `agent2env session: SANDBOX_TIMEOUT="soon": want seconds or a duration such as 1m30s`},
		{name: "zero", env: "0", args: []string{"context", "exec", "cx1", "1"}, err: `agent2env context: SANDBOX_TIMEOUT="0": must be positive`},
		{name: "negative", env: "-3", args: []string{"session", "run", "--", "true"}, err: `agent2env session: SANDBOX_TIMEOUT="-3": must be positive`},
		{name: "infinite", env: "inf", args: []string{"sandbox", "exec", "sb7", "--", "true"},
			err: `agent2env sandbox: SANDBOX_TIMEOUT="inf": want seconds or a duration such as 1m30s`},
		{name: "too long", env: "1e300", args: []string{"sandbox", "exec", "sb7", "--", "true"}, err: `SANDBOX_TIMEOUT="1e300": too long`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newTimeoutDaemon(t, tt.delay)
			if tt.env != "" {
				t.Setenv(envRunTimeout, tt.env)
			}
			code, _, stderr := run(t, tt.args...)
			var want []string
			if tt.err != "" {
				if code != 1 || !strings.Contains(stderr, tt.err) {
					t.Errorf("exit %d, stderr:\n%s\nwant exit 1 and %q", code, stderr, tt.err)
				}
			} else {
				if code != 0 {
					t.Errorf("exit %d, stderr:\n%s", code, stderr)
				}
				want = []string{tt.want}
			}
			d.mu.Lock()
			defer d.mu.Unlock()
			if diff := cmp.Diff(want, d.timeouts); diff != "" {
				t.Errorf("requests (-want +got):\n%s", diff)
			}
		})
	}
}

// TestTimeoutFlag checks that every command's --timeout takes the values
// $SANDBOX_TIMEOUT does, seconds or a duration, and sends the daemon the
// same timeout for either.
func TestTimeoutFlag(t *testing.T) {
	commands := []struct {
		name string
		args func(timeout string) []string
		// want is the request the daemon gets for a timeout of 90 s.
		want string
	}{
		{"sandbox exec", func(v string) []string { return []string{"sandbox", "exec", "sb7", "--timeout", v, "--", "true"} }, sandboxExec + " 90"},
		{"context exec", func(v string) []string { return []string{"context", "exec", "cx1", "1", "--timeout", v, "-o", "json"} }, contextExec + " 90"},
		{"session exec", func(v string) []string { return []string{"session", "exec", "--timeout", v, "1"} }, sessionExec + " 90"},
		{"session run", func(v string) []string { return []string{"session", "run", "--timeout", v, "--", "true"} }, sessionRun + " 90"},
	}
	for _, c := range commands {
		for _, v := range []string{"90", "1m30s", "90.0"} {
			t.Run(c.name+" "+v, func(t *testing.T) {
				d := newTimeoutDaemon(t, 0)
				if code, _, stderr := run(t, c.args(v)...); code != 0 {
					t.Fatalf("exit %d, stderr:\n%s", code, stderr)
				}
				if diff := cmp.Diff([]string{c.want}, d.timeouts); diff != "" {
					t.Errorf("requests (-want +got):\n%s", diff)
				}
			})
		}
		for v, want := range map[string]string{
			"soon": `invalid argument "soon" for "--timeout" flag: want seconds or a duration such as 1m30s`,
			"-1":   `invalid argument "-1" for "--timeout" flag: must not be negative`,
			"-1m":  `invalid argument "-1m" for "--timeout" flag: must not be negative`,
		} {
			t.Run(c.name+" "+v, func(t *testing.T) {
				d := newTimeoutDaemon(t, 0)
				code, _, stderr := run(t, c.args(v)...)
				if code != 2 || !strings.Contains(stderr, want) {
					t.Errorf("exit %d, stderr:\n%s\nwant exit 2 and %q", code, stderr, want)
				}
				if len(d.timeouts) != 0 {
					t.Errorf("the daemon got %q", d.timeouts)
				}
			})
		}
	}
}
