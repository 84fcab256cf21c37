package opensandbox

import (
	"strings"
	"testing"

	"github.com/agent2env/agent2env/api"
)

func TestExecdSessionRun(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		wantStatus int
		// wantEvents are the events after init (keys sorted, without
		// timestamps).
		wantEvents []string
		// wantCode and wantTimeout are what the session's shell was sent.
		wantCode    string
		wantTimeout float64
	}{
		{
			name: "output and success", body: `{"command":"echo hi"}`, wantStatus: 200,
			wantEvents:  []string{`{"text":"hi\n","type":"stdout"}`, `{"execution_time":12,"type":"execution_complete"}`},
			wantCode:    sessionPrelude + "\necho hi",
			wantTimeout: codeTimeout,
		},
		{
			name: "cwd and a timeout in milliseconds", body: `{"command":"echo hi","cwd":"/work space/it's","timeout":1500}`, wantStatus: 200,
			wantEvents:  []string{`{"text":"hi\n","type":"stdout"}`, `{"execution_time":12,"type":"execution_complete"}`},
			wantCode:    sessionPrelude + ` cd -- '/work space/it'\''s' || return;` + "\necho hi",
			wantTimeout: 1.5,
		},
		{
			name: "exit code", body: `{"command":"echo hi; exit 3"}`, wantStatus: 200,
			wantEvents: []string{`{"text":"hi\n","type":"stdout"}`,
				`{"error":{"ename":"CommandExecError","evalue":"3","traceback":["exit status 3"]},"type":"error"}`},
			wantCode: sessionPrelude + "\necho hi; exit 3", wantTimeout: codeTimeout,
		},
		{
			name: "syntax error is bash's 2", body: `{"command":"if"}`, wantStatus: 200,
			wantEvents: []string{`{"error":{"ename":"CommandExecError","evalue":"2","traceback":["syntax error: unexpected end of file"]},"type":"error"}`},
			wantCode:   sessionPrelude + "\nif", wantTimeout: codeTimeout,
		},
		{
			name: "timeout is -1, as /command's", body: `{"command":"sleep 100","timeout":100}`, wantStatus: 200,
			wantEvents: []string{`{"error":{"ename":"CommandExecError","evalue":"-1","traceback":["command timed out"]},"type":"error"}`},
			wantCode:   sessionPrelude + "\nsleep 100", wantTimeout: 0.1,
		},
		{
			name: "the shell died: its own error", body: `{"command":"kill -9 $$"}`, wantStatus: 200,
			wantEvents: []string{`{"error":{"ename":"KernelDied","evalue":"the bash kernel was killed by SIGKILL; it was restarted","traceback":[]},"type":"error"}`},
			wantCode:   sessionPrelude + "\nkill -9 $$", wantTimeout: codeTimeout,
		},
		{
			name: "the run fails", body: `{"command":"broken"}`, wantStatus: 200,
			wantEvents: []string{`{"error":{"ename":"CommandExecError","evalue":"agent connection lost","traceback":["agent connection lost"]},"type":"error"}`},
			wantCode:   sessionPrelude + "\nbroken", wantTimeout: codeTimeout,
		},
		{name: "no command", body: `{"command":" "}`, wantStatus: 400},
		{name: "negative timeout", body: `{"command":"echo hi","timeout":-1}`, wantStatus: 400},
		{name: "not JSON", body: `{"command":`, wantStatus: 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, codes := newCodeSetup(t)
			codes.byID["ctx-9"] = &api.Context{ContextID: "ctx-9", Language: "bash", SandboxID: "a", Name: sessionName}
			rec := execdDo(t, s, "POST", "/opensandbox/a/execd/session/ctx-9/run", "application/json", strings.NewReader(tc.body), "tok-a")
			if rec.Code != tc.wantStatus {
				t.Fatalf("status %d %s, want %d", rec.Code, rec.Body, tc.wantStatus)
			}
			if tc.wantStatus != 200 {
				if len(codes.runs) != 0 {
					t.Errorf("a refused request ran: %v", codes.runs)
				}
				return
			}
			evs := events(t, rec.Body.String())
			if len(evs) == 0 || evs[0]["type"] != "init" || evs[0]["text"] != "ctx-9" {
				t.Fatalf("first event %v, want init with the session id", evs)
			}
			got := withoutTimestamps(evs[1:])
			if strings.Join(got, "\n") != strings.Join(tc.wantEvents, "\n") {
				t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.wantEvents, "\n"))
			}
			if len(codes.runs) != 1 || codes.runs[0].Code != tc.wantCode || codes.runs[0].Timeout != tc.wantTimeout {
				t.Errorf("runs %+v, want one of %q with timeout %v", codes.runs, tc.wantCode, tc.wantTimeout)
			}
		})
	}
}

func TestExecdSessions(t *testing.T) {
	type step struct {
		method, target, ctype, body string
		wantStatus                  int
		wantBody                    string // when set
	}
	for _, tc := range []struct {
		name  string
		steps []step
		// wantMade are the contexts made (language/name@working dir) and
		// wantOps the files operations.
		wantMade, wantOps string
	}{
		{
			name: "create without a body, run, delete",
			steps: []step{
				{"POST", "/session", "", "", 200, `{"session_id":"ctx-3"}`},
				{"POST", "/session/ctx-3/run", "application/json", `{"command":"echo hi"}`, 200, ""},
				{"GET", "/code/contexts", "", "", 200, `[{"id":"ctx-1","language":"python"}]`}, // not a code context
				{"DELETE", "/session/ctx-3", "", "", 200, ""},
				{"POST", "/session/ctx-3/run", "application/json", `{"command":"echo hi"}`, 404, ""},
				{"DELETE", "/session/ctx-3", "", "", 404, ""},
			},
			wantMade: "bash/" + sessionName + "@",
		},
		{
			name: "create in a directory, made first",
			steps: []step{
				{"POST", "/session", "application/json", `{"cwd":"/workspace/s"}`, 200, `{"session_id":"ctx-3"}`},
			},
			wantMade: "bash/" + sessionName + "@/workspace/s", wantOps: "mkdir /workspace/s",
		},
		{
			name: "a session refused removes the directory it made",
			steps: []step{
				{"POST", "/session", "application/json", `{"cwd":"/nope"}`, 400, ""},
			},
			wantOps: "mkdir /nope,rm /nope true",
		},
		{
			name: "create in a directory that exists",
			steps: []step{
				{"POST", "/session", "application/json", `{"cwd":"/w"}`, 200, ""},
			},
			wantMade: "bash/" + sessionName + "@/w", wantOps: "mkdir /w",
		},
		{
			name: "only sessions of this sandbox",
			steps: []step{
				{"POST", "/session/ctx-1/run", "application/json", `{"command":"echo hi"}`, 404, ""}, // a code context
				{"DELETE", "/session/ctx-1", "", "", 404, ""},
				{"POST", "/session/ctx-2/run", "application/json", `{"command":"echo hi"}`, 404, ""}, // sandbox p's
				{"POST", "/session/nope/run", "application/json", `{"command":"echo hi"}`, 404, ""},
			},
		},
		{
			name: "refusals",
			steps: []step{
				{"POST", "/session", "text/plain", `{"cwd":"/x"}`, 415, ""},
				{"POST", "/session", "application/json", `{"cwd":`, 400, ""},
				{"POST", "/session", "application/json", `{"cwd":"` + strings.Repeat("d", maxBody) + `"}`, 413, ""},
				{"GET", "/session", "", "", 405, ""},
				{"GET", "/session/ctx-1/run", "", "", 405, ""},
				{"POST", "/session/a/b/run", "application/json", `{"command":"x"}`, 404, ""},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _, ff := newFilesSetup(t)
			codes := newFakeCodes()
			codes.byID["ctx-1"] = &api.Context{ContextID: "ctx-1", Language: "python", SandboxID: "a"}
			codes.byID["ctx-2"] = &api.Context{ContextID: "ctx-2", Language: "bash", SandboxID: "p", Name: sessionName}
			codes.next = 2
			s.h.cfg.Codes = codes
			for _, st := range tc.steps {
				rec := execdDo(t, s, st.method, "/opensandbox/a/execd"+st.target, st.ctype, strings.NewReader(st.body), "tok-a")
				if rec.Code != st.wantStatus {
					t.Fatalf("%s %s: %d %s, want %d", st.method, st.target, rec.Code, rec.Body, st.wantStatus)
				}
				if st.wantBody != "" && strings.TrimSpace(rec.Body.String()) != st.wantBody {
					t.Errorf("%s %s: body %s, want %s", st.method, st.target, rec.Body, st.wantBody)
				}
			}
			var made []string
			for _, c := range codes.creates {
				made = append(made, c.Language+"/"+c.Name+"@"+c.WorkingDir)
			}
			if got := strings.Join(made, ","); got != tc.wantMade {
				t.Errorf("contexts made %q, want %q", got, tc.wantMade)
			}
			if got := strings.Join(ff.ops, ","); got != tc.wantOps {
				t.Errorf("files operations %q, want %q", got, tc.wantOps)
			}
		})
	}
}
