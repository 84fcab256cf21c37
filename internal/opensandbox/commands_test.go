package opensandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/service"
)

// fakeCommands keeps background commands in memory: "run" runs with
// output "hello\nworld\n", "done" has ended with code 3, "exit137" with
// code 137 of its own, "killed" was killed by SIGKILL, "late" by its
// timeout, and "stubborn" runs and ignores SIGTERM; a started command is
// "proc-new". A signal that ends a command ends it as the agent reports:
// exit code 128+n, the signal named.
type fakeCommands struct {
	mu      sync.Mutex
	procs   map[string]*service.Proc
	output  map[string]string
	started []service.ProcRequest
	signals []string // pid:sig
}

var started = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func newFakeCommands() *fakeCommands {
	return &fakeCommands{
		procs: map[string]*service.Proc{
			"run":      {ID: "run", Command: []string{"bash", "-c", "echo hello; echo world"}, Running: true, Started: started},
			"done":     {ID: "done", Command: []string{"false", "x"}, Started: started, Ended: started.Add(time.Second), ExitCode: 3},
			"exit137":  {ID: "exit137", Command: []string{"bash", "-c", "exit 137"}, Started: started, Ended: started.Add(time.Second), ExitCode: 137},
			"killed":   {ID: "killed", Command: []string{"sleep", "9"}, Started: started, Ended: started.Add(time.Second), ExitCode: 137, Signal: "SIGKILL"},
			"late":     {ID: "late", Command: []string{"sleep", "9"}, Started: started, Ended: started.Add(time.Second), ExitCode: 137, Signal: "SIGKILL", TimedOut: true},
			"stubborn": {ID: "stubborn", Command: []string{"trap", "TERM"}, Running: true, Started: started},
		},
		output: map[string]string{"run": "hello\nworld\n"},
	}
}

func (f *fakeCommands) StartProc(_ context.Context, id string, req service.ProcRequest) (service.Proc, error) {
	if req.Timeout > service.MaxExecTimeout {
		return service.Proc{}, errdefs.Invalid("timeout too long")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.started = append(f.started, req)
	p := &service.Proc{ID: "proc-new", Command: req.Command, Running: true, Started: started}
	f.procs[p.ID] = p
	return *p, nil
}

func (f *fakeCommands) get(id, pid string) (*service.Proc, error) {
	if p, ok := f.procs[pid]; ok && id == "a" {
		return p, nil
	}
	return nil, errdefs.NotFound("sandbox %s has no process '%s'", id, pid)
}

func (f *fakeCommands) Proc(_ context.Context, id, pid string) (service.Proc, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p, err := f.get(id, pid)
	if err != nil {
		return service.Proc{}, err
	}
	return *p, nil
}

func (f *fakeCommands) ProcOutput(_ context.Context, id, pid string, opts service.ProcOutputOptions, stdout, _ io.Writer) (service.ProcOutputResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p, err := f.get(id, pid)
	if err != nil {
		return service.ProcOutputResult{}, err
	}
	out := f.output[pid]
	since := min(opts.Since, int64(len(out)))
	_, _ = io.WriteString(stdout, out[since:])
	return service.ProcOutputResult{Next: int64(len(out)), Proc: *p}, nil
}

func (f *fakeCommands) SignalProc(_ context.Context, id, pid, sig string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	p, err := f.get(id, pid)
	if err != nil {
		return err
	}
	f.signals = append(f.signals, pid+":"+sig)
	if sig == "KILL" || pid != "stubborn" {
		n := map[string]int{"TERM": 15, "KILL": 9}[sig]
		p.Running, p.ExitCode, p.Signal, p.Ended = false, 128+n, "SIG"+sig, started.Add(2*time.Second)
	}
	return nil
}

func newCommandsSetup(t *testing.T) (*setup, *fakeCommands) {
	s, _ := newExecdSetup(t)
	fc := newFakeCommands()
	s.h.cfg.Commands = fc
	return s, fc
}

func TestBackgroundCommand(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		wantStatus int
		wantReq    string
	}{
		{name: "shell text", body: `{"command":"sleep 100","background":true}`, wantStatus: 200,
			wantReq: `{[bash -c sleep 100]  map[]  0s}`},
		{name: "argv, cwd, envs, timeout in ms", body: `{"argv":["sleep","1"],"cwd":"/tmp","envs":{"A":"1"},"timeout":1500,"background":true}`,
			wantStatus: 200, wantReq: `{[sleep 1]  map[A:1] /tmp 1.5s}`},
		{name: "huge timeout", body: `{"command":"id","timeout":9000000000000000,"background":true}`, wantStatus: 400},
		{name: "another uid", body: `{"command":"id","uid":0,"background":true}`, wantStatus: 400},
		{name: "no command", body: `{"background":true}`, wantStatus: 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, fc := newCommandsSetup(t)
			rec := execdDo(t, s, "POST", "/opensandbox/a/execd/command", "application/json", strings.NewReader(tc.body), "tok-a")
			if rec.Code != tc.wantStatus {
				t.Fatalf("status %d %s, want %d", rec.Code, rec.Body, tc.wantStatus)
			}
			if rec.Code != 200 {
				return
			}
			if got := fmt.Sprint(fc.started); got != "["+tc.wantReq+"]" {
				t.Errorf("started %s, want [%s]", got, tc.wantReq)
			}
			evs := events(t, rec.Body.String())
			if len(evs) != 2 || evs[0]["type"] != "init" || evs[0]["text"] != "proc-new" || evs[1]["type"] != "execution_complete" {
				t.Errorf("events %v", evs)
			}
		})
	}
}

func TestCommandStatusLogsInterrupt(t *testing.T) {
	for _, tc := range []struct {
		name, method, target string
		wantStatus           int
		wantBody             string // exact, when set
		wantCursor           string
		wantSignals          string
	}{
		{name: "status running", method: "GET", target: "/command/status/run", wantStatus: 200,
			wantBody: `{"id":"run","content":"echo hello; echo world","running":true,"exit_code":null,"started_at":"2026-01-02T03:04:05Z","finished_at":null}`},
		{name: "status ended", method: "GET", target: "/command/status/done", wantStatus: 200,
			wantBody: `{"id":"done","content":"false x","running":false,"exit_code":3,"error":"exit status 3","started_at":"2026-01-02T03:04:05Z","finished_at":"2026-01-02T03:04:06Z"}`},
		{name: "status of exit 137", method: "GET", target: "/command/status/exit137", wantStatus: 200,
			wantBody: `{"id":"exit137","content":"exit 137","running":false,"exit_code":137,"error":"exit status 137","started_at":"2026-01-02T03:04:05Z","finished_at":"2026-01-02T03:04:06Z"}`},
		{name: "status killed", method: "GET", target: "/command/status/killed", wantStatus: 200,
			wantBody: `{"id":"killed","content":"sleep 9","running":false,"exit_code":-1,"error":"signal: killed","started_at":"2026-01-02T03:04:05Z","finished_at":"2026-01-02T03:04:06Z"}`},
		{name: "status timed out", method: "GET", target: "/command/status/late", wantStatus: 200,
			wantBody: `{"id":"late","content":"sleep 9","running":false,"exit_code":-1,"error":"command timed out","started_at":"2026-01-02T03:04:05Z","finished_at":"2026-01-02T03:04:06Z"}`},
		{name: "status unknown", method: "GET", target: "/command/status/none", wantStatus: 404},
		{name: "status by POST", method: "POST", target: "/command/status/run", wantStatus: 405},
		{name: "logs from the start", method: "GET", target: "/command/run/logs", wantStatus: 200, wantBody: "hello\nworld\n", wantCursor: "12"},
		{name: "logs by cursor", method: "GET", target: "/command/run/logs?cursor=6", wantStatus: 200, wantBody: "world\n", wantCursor: "12"},
		{name: "logs at the end", method: "GET", target: "/command/run/logs?cursor=12", wantStatus: 200, wantBody: "", wantCursor: "12"},
		{name: "logs bad cursor", method: "GET", target: "/command/run/logs?cursor=x", wantStatus: 400},
		{name: "logs negative cursor", method: "GET", target: "/command/run/logs?cursor=-1", wantStatus: 400},
		{name: "logs unknown", method: "GET", target: "/command/none/logs", wantStatus: 404},
		{name: "other route", method: "GET", target: "/command/run/other", wantStatus: 404},
		{name: "interrupt", method: "DELETE", target: "/command?id=run", wantStatus: 200, wantSignals: "[run:TERM]"},
		{name: "interrupt, then kill", method: "DELETE", target: "/command?id=stubborn", wantStatus: 200, wantSignals: "[stubborn:TERM stubborn:KILL]"},
		{name: "interrupt an ended command", method: "DELETE", target: "/command?id=done", wantStatus: 200, wantSignals: "[]"},
		{name: "interrupt unknown", method: "DELETE", target: "/command?id=none", wantStatus: 404, wantSignals: "[]"},
		{name: "interrupt without id", method: "DELETE", target: "/command", wantStatus: 400, wantSignals: "[]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func(g time.Duration) { interruptGrace = g }(interruptGrace)
			interruptGrace = 100 * time.Millisecond
			s, fc := newCommandsSetup(t)
			rec := execdDo(t, s, tc.method, "/opensandbox/a/execd"+tc.target, "", nil, "tok-a")
			if rec.Code != tc.wantStatus {
				t.Fatalf("status %d %s, want %d", rec.Code, rec.Body, tc.wantStatus)
			}
			if tc.wantBody != "" || tc.wantCursor != "" {
				if got := strings.TrimSpace(rec.Body.String()); got != strings.TrimSpace(tc.wantBody) {
					t.Errorf("body %q, want %q", got, tc.wantBody)
				}
			}
			if strings.HasPrefix(tc.wantBody, "{") {
				var v map[string]any
				if err := json.Unmarshal(rec.Body.Bytes(), &v); err != nil {
					t.Error(err)
				}
			}
			if got := rec.Header().Get(HeaderTailCursor); got != tc.wantCursor {
				t.Errorf("cursor %q, want %q", got, tc.wantCursor)
			}
			if tc.wantSignals != "" && fmt.Sprint(fc.signals) != tc.wantSignals {
				t.Errorf("signals %v, want %s", fc.signals, tc.wantSignals)
			}
		})
	}
}

// An interrupt goes on to its kill when the client that asked for it
// leaves during the grace: a command that ignores SIGTERM is not left
// running for good.
func TestInterruptClientGone(t *testing.T) {
	defer func(g time.Duration) { interruptGrace = g }(interruptGrace)
	interruptGrace = 100 * time.Millisecond
	s, fc := newCommandsSetup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	req := httptest.NewRequestWithContext(ctx, "DELETE", "/opensandbox/a/execd/command?id=stubborn", nil)
	req.Header.Set(HeaderAccessToken, "tok-a")
	s.h.ServeHTTP(httptest.NewRecorder(), req)
	fc.mu.Lock()
	defer fc.mu.Unlock()
	if got := fmt.Sprint(fc.signals); got != "[stubborn:TERM stubborn:KILL]" {
		t.Errorf("signals %s, want [stubborn:TERM stubborn:KILL]", got)
	}
}

// An interrupted command's status is stock execd's: exit code -1 and Go's
// words for the signal that ended it.
func TestInterruptedStatus(t *testing.T) {
	defer func(g time.Duration) { interruptGrace = g }(interruptGrace)
	interruptGrace = 100 * time.Millisecond
	for _, tc := range []struct{ pid, wantError string }{
		{pid: "run", wantError: "signal: terminated"},
		{pid: "stubborn", wantError: "signal: killed"},
	} {
		t.Run(tc.pid, func(t *testing.T) {
			s, _ := newCommandsSetup(t)
			if rec := execdDo(t, s, "DELETE", "/opensandbox/a/execd/command?id="+tc.pid, "", nil, "tok-a"); rec.Code != 200 {
				t.Fatalf("interrupt: status %d %s", rec.Code, rec.Body)
			}
			rec := execdDo(t, s, "GET", "/opensandbox/a/execd/command/status/"+tc.pid, "", nil, "tok-a")
			var st commandStatus
			if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil {
				t.Fatalf("status %d %s: %v", rec.Code, rec.Body, err)
			}
			if st.Running || st.ExitCode == nil || *st.ExitCode != -1 || st.Error != tc.wantError {
				t.Errorf("status %s, want exit_code -1 and error %q", rec.Body, tc.wantError)
			}
		})
	}
}

// runForeground runs command body in the foreground on sandbox a and
// returns the id of its init event.
func runForeground(t *testing.T, s *setup, body string) string {
	t.Helper()
	rec := execdDo(t, s, "POST", "/opensandbox/a/execd/command", "application/json", strings.NewReader(body), "tok-a")
	if rec.Code != 200 {
		t.Fatalf("run %s: status %d %s", body, rec.Code, rec.Body)
	}
	evs := events(t, rec.Body.String())
	id, _ := evs[0]["text"].(string)
	if evs[0]["type"] != "init" || id == "" {
		t.Fatalf("first event %v, want init with an id", evs[0])
	}
	return id
}

// A foreground command's status, by the id of its init event, is stock
// execd's once it has ended: its exit code and Go's error, as its
// stream's last event says; its logs are a 400 (its output went to its
// stream), an interrupt of it answers at once, and another sandbox does
// not know it.
func TestForegroundCommandStatus(t *testing.T) {
	const at = `"started_at":"2026-12-04T15:00:00Z","finished_at":"2026-12-04T15:00:00Z"`
	for _, tc := range []struct{ name, body, want string }{
		{name: "exit 0", body: `{"command":"echo hi"}`,
			want: `"content":"echo hi","running":false,"exit_code":0,` + at},
		{name: "exit 3", body: `{"command":"exit 3"}`,
			want: `"content":"exit 3","running":false,"exit_code":3,"error":"exit status 3",` + at},
		{name: "argv", body: `{"argv":["python3","-c","ok"]}`,
			want: `"content":"python3 -c ok","running":false,"exit_code":0,` + at},
		{name: "a signal", body: `{"command":"kill -TERM $$"}`,
			want: `"content":"kill -TERM $$","running":false,"exit_code":-1,"error":"signal: terminated",` + at},
		{name: "timed out", body: `{"command":"timeout"}`,
			want: `"content":"timeout","running":false,"exit_code":-1,"error":"command timed out",` + at},
		{name: "broken", body: `{"command":"broken"}`,
			want: `"content":"broken","running":false,"exit_code":1,"error":"agent connection lost",` + at},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := newCommandsSetup(t)
			id := runForeground(t, s, tc.body)
			rec := execdDo(t, s, "GET", "/opensandbox/a/execd/command/status/"+id, "", nil, "tok-a")
			if want := `{"id":"` + id + `",` + tc.want + "}"; rec.Code != 200 || strings.TrimSpace(rec.Body.String()) != want {
				t.Errorf("status %d %s, want 200 %s", rec.Code, rec.Body, want)
			}
			rec = execdDo(t, s, "GET", "/opensandbox/a/execd/command/"+id+"/logs", "", nil, "tok-a")
			if rec.Code != 400 || !strings.Contains(rec.Body.String(), "not running in background") {
				t.Errorf("logs: %d %s, want 400 not running in background", rec.Code, rec.Body)
			}
			if rec := execdDo(t, s, "DELETE", "/opensandbox/a/execd/command?id="+id, "", nil, "tok-a"); rec.Code != 200 {
				t.Errorf("interrupt of the ended command: %d %s, want 200", rec.Code, rec.Body)
			}
			if _, ok := s.h.foregrounds.get("b", id); ok {
				t.Error("sandbox b knows sandbox a's command")
			}
		})
	}
}

// A foreground command's status while it runs has no exit code nor end,
// as stock execd's; interrupted, it is a command SIGKILL ended.
func TestForegroundCommandStatusRunning(t *testing.T) {
	s, _ := newCommandsSetup(t)
	srv := httptest.NewServer(s.h)
	t.Cleanup(srv.Close)
	dec, id := openStream(t, srv, "/opensandbox/a/execd/command", `{"command":"block"}`)
	status := func() string {
		t.Helper()
		rec := execdDo(t, s, "GET", "/opensandbox/a/execd/command/status/"+id, "", nil, "tok-a")
		if rec.Code != 200 {
			t.Fatalf("status %d %s", rec.Code, rec.Body)
		}
		return strings.TrimSpace(rec.Body.String())
	}
	if got, want := status(), `{"id":"`+id+`","content":"block","running":true,"exit_code":null,"started_at":"2026-12-04T15:00:00Z","finished_at":null}`; got != want {
		t.Errorf("running: %s, want %s", got, want)
	}
	if rec := execdDo(t, s, "DELETE", "/opensandbox/a/execd/command?id="+id, "", nil, "tok-a"); rec.Code != 200 {
		t.Fatalf("interrupt: %d %s", rec.Code, rec.Body)
	}
	lastEvent(dec)
	if got, want := status(), `{"id":"`+id+`","content":"block","running":false,"exit_code":-1,"error":"signal: killed","started_at":"2026-12-04T15:00:00Z","finished_at":"2026-12-04T15:00:00Z"}`; got != want {
		t.Errorf("interrupted: %s, want %s", got, want)
	}
}

// The ended foreground commands kept are the most recent, within
// foregroundKept of them and foregroundKeptText bytes of command text:
// an older one's status is a 404, as an unknown command's.
func TestForegroundCommandsKept(t *testing.T) {
	for _, tc := range []struct {
		name       string
		kept, text int
		want       string // of the three commands run, which are known
	}{
		{name: "all", kept: 3, text: 100, want: "[true true true]"},
		{name: "by number", kept: 2, text: 100, want: "[false true true]"},
		{name: "by text", kept: 3, text: 15, want: "[false false true]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func(k, b int) { foregroundKept, foregroundKeptText = k, b }(foregroundKept, foregroundKeptText)
			foregroundKept, foregroundKeptText = tc.kept, tc.text
			s, _ := newCommandsSetup(t)
			var known []bool
			var ids []string
			for _, cmd := range []string{"echo one", "echo two", "echo three"} {
				ids = append(ids, runForeground(t, s, `{"command":"`+cmd+`"}`))
			}
			for _, id := range ids {
				rec := execdDo(t, s, "GET", "/opensandbox/a/execd/command/status/"+id, "", nil, "tok-a")
				if rec.Code != 200 && rec.Code != 404 {
					t.Fatalf("status %d %s, want 200 or 404", rec.Code, rec.Body)
				}
				known = append(known, rec.Code == 200)
			}
			if got := fmt.Sprint(known); got != tc.want {
				t.Errorf("known %s, want %s", got, tc.want)
			}
			s.h.foregrounds.mu.Lock()
			defer s.h.foregrounds.mu.Unlock()
			if n := strings.Count(tc.want, "true"); len(s.h.foregrounds.m) != n || len(s.h.foregrounds.ended) != n {
				t.Errorf("%d kept, %d ended, want %d", len(s.h.foregrounds.m), len(s.h.foregrounds.ended), n)
			}
		})
	}
}
