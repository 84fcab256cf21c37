package cli

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/api/client"
)

// fakeSessionDaemon answers the session and stats routes with canned
// values and records the requests it got.
type fakeSessionDaemon struct {
	sessions []api.Session
	execute  api.SessionExecuteResponse
	command  api.SessionCommandResponse
	stats    api.Stats
	// got are the bodies of the execute and command requests.
	gotExecute api.SessionExecuteRequest
	gotCommand api.SessionCommandRequest
	deleted    []string
}

func newFakeSessionDaemon(t *testing.T) *fakeSessionDaemon {
	t.Helper()
	d := &fakeSessionDaemon{}
	mux := http.NewServeMux()
	reply := func(w http.ResponseWriter, v any) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(v)
	}
	mux.HandleFunc("GET /api/v1/sessions", func(w http.ResponseWriter, r *http.Request) {
		reply(w, api.SessionList{Items: d.sessions, Total: len(d.sessions)})
	})
	mux.HandleFunc("GET /api/v1/sessions/{id}", func(w http.ResponseWriter, r *http.Request) {
		for _, s := range d.sessions {
			if s.SessionID == r.PathValue("id") {
				reply(w, s)
				return
			}
		}
		w.WriteHeader(http.StatusNotFound)
		reply(w, api.Error{Message: "session not found", Code: api.CodeSessionNotFound})
	})
	mux.HandleFunc("DELETE /api/v1/sessions/{id}", func(w http.ResponseWriter, r *http.Request) {
		d.deleted = append(d.deleted, r.PathValue("id"))
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /api/v1/sessions/execute", func(w http.ResponseWriter, r *http.Request) {
		d.gotExecute = api.SessionExecuteRequest{}
		json.NewDecoder(r.Body).Decode(&d.gotExecute)
		reply(w, d.execute)
	})
	mux.HandleFunc("POST /api/v1/sessions/command", func(w http.ResponseWriter, r *http.Request) {
		d.gotCommand = api.SessionCommandRequest{}
		json.NewDecoder(r.Body).Decode(&d.gotCommand)
		reply(w, d.command)
	})
	mux.HandleFunc("GET /api/v1/stats", func(w http.ResponseWriter, r *http.Request) { reply(w, d.stats) })
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	t.Setenv(client.EnvURL, srv.URL)
	return d
}

func TestSessionList(t *testing.T) {
	d := newFakeSessionDaemon(t)
	at := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	d.sessions = []api.Session{
		{SessionID: "s1", Flavor: "small", CPU: "1", Memory: "1Gi", SandboxID: "sb1", Languages: []string{"python"},
			CreatedAt: at, LastUsedAt: at, ExpiresAt: at.Add(30 * time.Minute), IdleTimeout: 1800, ExecutionCount: 2},
		{SessionID: "s2", Flavor: "large", CPU: "4", Memory: "4Gi", SandboxID: "sb2", Languages: []string{},
			CreatedAt: at, LastUsedAt: at, ExpiresAt: at.Add(time.Hour), IdleTimeout: 3600},
	}
	checkListOutput(t, []string{"session", "ls"}, api.SessionList{Items: d.sessions, Total: 2}, "s1\ns2\n")
	code, out, stderr := run(t, "session", "info", "s2")
	if code != 0 || !strings.Contains(out, "s2") || !strings.Contains(out, "large") {
		t.Errorf("session info: exit %d, %q %q", code, out, stderr)
	}
	if code, _, stderr := run(t, "session", "info", "nope"); code != 1 || strings.Count(stderr, "session not found") != 1 ||
		!strings.Contains(stderr, api.CodeSessionNotFound) {
		t.Errorf("session info of an unknown id: exit %d, stderr %q; want 1 and the server's message and code once", code, stderr)
	}
	if code, _, stderr := run(t, "session", "rm", "s1", "s2"); code != 0 || !cmp.Equal(d.deleted, []string{"s1", "s2"}) {
		t.Errorf("session rm: exit %d (%s), deleted %v", code, stderr, d.deleted)
	}
}

func TestSessionExec(t *testing.T) {
	d := newFakeSessionDaemon(t)
	info := api.SessionInfo{SessionID: "s9", Created: true, ExpiresAt: time.Now().Add(time.Hour)}
	tests := []struct {
		name       string
		args       []string
		stdin      string
		resp       api.ExecuteResponse
		want       api.SessionExecuteRequest
		code       int
		stdout     string
		stderrPart string
	}{
		{name: "code argument, new session", args: []string{"print(1)"},
			resp: api.ExecuteResponse{Success: true, Output: api.ExecutionOutput{Stdout: "1\n"}},
			want: api.SessionExecuteRequest{Code: "print(1)", Language: "python"}, stdout: "1\n", stderrPart: "session s9 created"},
		{name: "standard input, flags", args: []string{"-s", "s9", "-l", "javascript", "--flavor", "medium", "--timeout", "1m"}, stdin: "1+1",
			resp: api.ExecuteResponse{Success: true, Results: []api.ExecutionResult{{Text: "2", IsMainResult: true}}},
			want: api.SessionExecuteRequest{Code: "1+1", Language: "javascript", SessionID: "s9", Flavor: "medium", Timeout: 60}, stdout: "2\n"},
		{name: "variables of this run", args: []string{"-e", "TOKEN=t", "print(1)"},
			resp: api.ExecuteResponse{Success: true, Output: api.ExecutionOutput{Stdout: "1\n"}},
			want: api.SessionExecuteRequest{Code: "print(1)", Language: "python", Env: map[string]string{"TOKEN": "t"}}, stdout: "1\n"},
		{name: "failed code exits 1", args: []string{"1/0"},
			resp: api.ExecuteResponse{Error: &api.ExecutionError{Name: "ZeroDivisionError", Value: "division by zero"}},
			want: api.SessionExecuteRequest{Code: "1/0", Language: "python"}, code: 1, stderrPart: "ZeroDivisionError: division by zero"},
		{name: "timeout exits 124 and says so", args: []string{"--timeout", "1s", "import time; time.sleep(3)"},
			resp: api.ExecuteResponse{Error: &api.ExecutionError{Name: api.ErrorNameTimeout, Kind: api.ErrorKindSystem,
				Value: "execution exceeded the timeout of 1s and was interrupted", Traceback: "KeyboardInterrupt\n"}},
			want: api.SessionExecuteRequest{Code: "import time; time.sleep(3)", Language: "python", Timeout: 1}, code: 124,
			stderrPart: "KeyboardInterrupt\nTimeoutError: execution exceeded the timeout of 1s and was interrupted\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d.execute = api.SessionExecuteResponse{SessionInfo: info, ExecuteResponse: tt.resp}
			code, out, stderr := runIn(t, tt.stdin, append([]string{"session", "exec"}, tt.args...)...)
			if code != tt.code || out != tt.stdout || !strings.Contains(stderr, tt.stderrPart) {
				t.Errorf("exit %d, stdout %q, stderr %q; want %d, %q, stderr with %q", code, out, stderr, tt.code, tt.stdout, tt.stderrPart)
			}
			if diff := cmp.Diff(tt.want, d.gotExecute); diff != "" {
				t.Errorf("request (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSessionRun(t *testing.T) {
	d := newFakeSessionDaemon(t)
	tests := []struct {
		name                string
		args                []string
		resp                api.ExecResponse
		want                api.SessionCommandRequest
		code                int
		wantStdout, wantErr string
	}{
		{name: "argv, exit code passed on", args: []string{"-s", "s1", "--cwd", "/tmp", "-e", "A=1", "--", "sh", "-c", "exit 3"},
			resp: api.ExecResponse{ExitCode: 3, Stdout: "out\n", Stderr: "err\n"},
			want: api.SessionCommandRequest{Command: api.CommandLine{Argv: []string{"sh", "-c", "exit 3"}}, SessionID: "s1", Cwd: "/tmp",
				Env: map[string]string{"A": "1"}, OutputEncoding: api.OutputBase64},
			code: 3, wantStdout: "out\n", wantErr: "err\n"},
		{name: "shell string", args: []string{"-s", "s1", "--shell", "echo hi | tr a-z A-Z"},
			resp:       api.ExecResponse{Stdout: "HI\n"},
			want:       api.SessionCommandRequest{Command: api.CommandLine{Shell: "echo hi | tr a-z A-Z"}, SessionID: "s1", OutputEncoding: api.OutputBase64},
			wantStdout: "HI\n"},
		{name: "timeout exits 124", args: []string{"-s", "s1", "--timeout", "1s", "--", "sleep", "3"},
			resp: api.ExecResponse{ExitCode: 137, TimedOut: true, Stdout: "partial\n"},
			want: api.SessionCommandRequest{Command: api.CommandLine{Argv: []string{"sleep", "3"}}, SessionID: "s1", Timeout: 1,
				OutputEncoding: api.OutputBase64},
			code: 124, wantStdout: "partial\n", wantErr: "agent2env session run: the command timed out and was killed\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d.command = api.SessionCommandResponse{SessionInfo: api.SessionInfo{SessionID: "s1"}, ExecResponse: tt.resp}
			code, out, stderr := run(t, append([]string{"session", "run"}, tt.args...)...)
			if diff := cmp.Diff([]any{tt.code, tt.wantStdout, tt.wantErr}, []any{code, out, stderr}); diff != "" {
				t.Errorf("exit code, stdout, stderr (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.want, d.gotCommand); diff != "" {
				t.Errorf("request (-want +got):\n%s", diff)
			}
		})
	}
	d.command = api.SessionCommandResponse{SessionInfo: api.SessionInfo{SessionID: "s1"}, ExecResponse: api.ExecResponse{ExitCode: 3}}
	// Output that is not UTF-8 is written as it came.
	d.command.Stdout, d.command.Encoding = api.EncodeOutput(binaryOutput, api.OutputBase64)
	d.command.Stderr, _ = api.EncodeOutput(binaryOutput[:10], api.OutputBase64)
	if code, out, stderr := run(t, "session", "run", "-s", "s1", "--", "cat", "f"); code != 3 || out != binaryOutput || stderr != binaryOutput[:10] {
		t.Errorf("binary output: exit %d, stdout %q, stderr %q; want the exact bytes", code, out, stderr)
	}
	if code, _, stderr := run(t, "session", "run"); code != 2 || !strings.Contains(stderr, "--shell") {
		t.Errorf("run without a command: exit %d, %q; want a usage error", code, stderr)
	}
	if code, _, _ := run(t, "session", "run", "--shell", "true", "--", "ls"); code != 2 {
		t.Errorf("run with both a command and --shell: exit %d, want 2", code)
	}
}

func TestStats(t *testing.T) {
	d := newFakeSessionDaemon(t)
	d.stats = api.Stats{Sessions: api.SessionStats{Active: 2, Busy: 1}, Sandboxes: map[string]int{"running": 3, "pooled": 1},
		Resources:  api.ResourceStats{MilliCPUCommitted: 2000, MilliCPUCapacity: 8000, MemoryBytesCommitted: 2 << 30, MemoryBytesCapacity: 16 << 30},
		Executions: api.ExecutionStats{Count: 10, Errors: 1, P50: 0.002, P95: 0.01}}
	code, out, _ := run(t, "stats")
	for _, want := range []string{"sessions active", "sandboxes running", "2.00 of 8.00", "2.0 GiB of 16.0 GiB", "10 (1 failed)"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("stats: exit %d, output lacks %q:\n%s", code, want, out)
		}
	}
	code, out, _ = run(t, "stats", "-o", "json")
	got, err := decodeStrict[api.Stats]([]byte(out))
	if code != 0 || err != nil || !cmp.Equal(got, d.stats) {
		t.Errorf("stats -o json: exit %d, %v\n%s", code, err, out)
	}
}
