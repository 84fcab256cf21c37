package cli

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/api/client"
)

func TestPassAtK(t *testing.T) {
	for _, tt := range []struct {
		n, c, k int
		want    float64
	}{
		{5, 0, 1, 0}, {5, 5, 1, 1}, {5, 2, 1, 0.4}, {5, 1, 5, 1}, {5, 0, 5, 0},
		{10, 3, 2, 1 - (7.0*6)/(10*9)}, {0, 0, 1, 0},
	} {
		if got := passAtK(tt.n, tt.c, tt.k); math.Abs(got-tt.want) > 1e-9 {
			t.Errorf("pass@%d of %d/%d = %v, want %v", tt.k, tt.c, tt.n, got, tt.want)
		}
	}
}

func TestCounted(t *testing.T) {
	for _, tt := range []struct {
		n    int
		want string
	}{{0, "0 runs"}, {1, "1 run"}, {2, "2 runs"}} {
		if got := counted(tt.n, "run"); got != tt.want {
			t.Errorf("counted(%d, run) = %q, want %q", tt.n, got, tt.want)
		}
	}
}

func TestTaskValidate(t *testing.T) {
	dir := t.TempDir()
	good, bad, worse := filepath.Join(dir, "good.yaml"), filepath.Join(dir, "bad.yaml"), filepath.Join(dir, "worse.yaml")
	os.WriteFile(good, []byte("name: g\nagent: custom\ngoal: x\nentrypoint: 'true'\n"), 0o644)
	os.WriteFile(bad, []byte("name: b\nagent: nope\n"), 0o644)
	os.WriteFile(worse, []byte("name: b\nagent: custom\nend: {timeout: soon}\n"), 0o644)
	code, stdout, _ := run(t, "task", "validate", good, bad, worse)
	if code != 1 || !strings.Contains(stdout, good+": ok") {
		t.Errorf("exit %d, stdout:\n%s", code, stdout)
	}
	for _, want := range []string{"line 2: agent: unknown agent", "goal: is required", "end.timeout"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
}

// runsDaemon is a fake daemon of the run API: a submission makes two
// runs, one that succeeds and one that fails, which end at the second
// poll.
type runsDaemon struct {
	mu    sync.Mutex
	req   api.RunSubmitRequest
	polls int
}

func (d *runsDaemon) handler() http.Handler {
	mux := http.NewServeMux()
	ended := time.Date(2026, 1, 1, 0, 0, 10, 0, time.UTC)
	started := ended.Add(-5 * time.Second)
	runs := []api.Run{
		{ID: "run-1", BatchID: "b-1", Task: "t", Agent: "custom", Repeat: 0, Status: api.RunRunning, Phase: api.PhaseAgent, StartedAt: &started},
		{ID: "run-2", BatchID: "b-1", Task: "t", Agent: "custom", Repeat: 1, Status: api.RunQueued, Phase: api.PhaseQueued},
	}
	mux.HandleFunc("POST /api/v1/runs", func(w http.ResponseWriter, r *http.Request) {
		d.mu.Lock()
		defer d.mu.Unlock()
		json.NewDecoder(r.Body).Decode(&d.req)
		reply(w, http.StatusCreated, api.RunBatch{ID: "b-1", Task: "t", Runs: runs})
	})
	mux.HandleFunc("GET /api/v1/runs", func(w http.ResponseWriter, r *http.Request) {
		d.mu.Lock()
		defer d.mu.Unlock()
		d.polls++
		out := append([]api.Run(nil), runs...)
		if d.polls >= 2 {
			out[0].Status, out[0].Phase, out[0].EndedAt = api.RunSucceeded, api.PhaseDone, &ended
			out[0].Artifacts = []api.RunArtifact{{Path: "/workspace/out.txt", Size: 2}}
			out[0].LLM, out[0].ConversationID = api.RunLLMUsage{Requests: 1, InputTokens: 7, OutputTokens: 3}, "llx_1"
			out[1].Status, out[1].Phase, out[1].Reason, out[1].StartedAt, out[1].EndedAt = api.RunHung, api.PhaseDone, "no progress", &started, &ended
		}
		reply(w, http.StatusOK, api.RunList{Items: out})
	})
	mux.HandleFunc("GET /api/v1/runs/{id}/logs", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "output of "+r.PathValue("id")+"\n")
	})
	mux.HandleFunc("GET /api/v1/llm/exchanges/export", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"id":"llx_1","run_id":"`+r.URL.Query().Get("run")+`"}`+"\n")
	})
	mux.HandleFunc("GET /api/v1/runs/{id}/artifacts", func(w http.ResponseWriter, r *http.Request) {
		tw := tar.NewWriter(w)
		tw.WriteHeader(&tar.Header{Name: "workspace/out.txt", Mode: 0o644, Size: 2, Typeflag: tar.TypeReg})
		io.WriteString(tw, "ok")
		tw.Close()
	})
	return mux
}

// task run submits the file with its inputs and the overrides, watches the
// runs, writes the results and exits 1 because one run did not succeed.
func TestTaskRun(t *testing.T) {
	d := &runsDaemon{}
	srv := httptest.NewServer(d.handler())
	t.Cleanup(srv.Close)
	t.Setenv(client.EnvURL, srv.URL)
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "repo", "sub"), 0o755)
	os.WriteFile(filepath.Join(dir, "repo", "sub", "a.py"), []byte("print(1)\n"), 0o644)
	file := filepath.Join(dir, "t.yaml")
	os.WriteFile(file, []byte("name: t\nagent: custom\ngoal: x\nentrypoint: 'true'\ninputs: [{source: ./repo, destination: /workspace/repo}]\n"), 0o644)
	out := filepath.Join(t.TempDir(), "results")

	var stdout, stderr bytes.Buffer
	cmd, err := execute(t.Context(), env{stdout: &stdout, stderr: &stderr, poll: time.Millisecond}, []string{"task", "run", file, "-k", "2",
		"--parallel", "2", "--agent", "custom", "--model", "a,b", "--out", out})
	code := report(&stderr, cmd, err)
	if code != 1 {
		t.Errorf("exit %d, want 1 (a run hung); stderr:\n%s", code, stderr.String())
	}
	if d.req.Repeats != 2 || d.req.Parallel != 2 || strings.Join(d.req.Agents, ",") != "custom" || strings.Join(d.req.Models, ",") != "a,b" ||
		!strings.Contains(d.req.Task, "name: t") {
		t.Errorf("submitted %+v", d.req)
	}
	if files := untarGz(t, d.req.Inputs); files["repo/sub/a.py"] != "print(1)\n" || len(files) != 1 {
		t.Errorf("inputs sent: %v", files)
	}
	if !strings.Contains(stderr.String(), "agent2env: task t: 2 runs (batch b-1)\n") {
		t.Errorf("stderr lacks the batch's run count:\n%s", stderr.String())
	}
	for _, want := range []string{"run-1 t custom - #0 running (agent)", "run-2 t custom - #1 hung 5s: no progress", "1/2", "0.50", "1.00 (k=2)"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout.String())
		}
	}
	for p, want := range map[string]string{
		"run-1/output.log":                  "output of run-1\n",
		"run-1/artifacts/workspace/out.txt": "ok",
		"run-2/output.log":                  "output of run-2\n",
		"run-1/conversation.jsonl":          `{"id":"llx_1","run_id":"run-1"}` + "\n",
	} {
		if b, err := os.ReadFile(filepath.Join(out, p)); err != nil || string(b) != want {
			t.Errorf("%s = %q, %v; want %q", p, b, err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(out, "run-2", "conversation.jsonl")); !os.IsNotExist(err) {
		t.Errorf("run-2, which made no model call, has a conversation.jsonl: %v", err)
	}
	var r api.Run
	if b, err := os.ReadFile(filepath.Join(out, "run-2", "result.json")); err != nil || json.Unmarshal(b, &r) != nil || r.Status != api.RunHung {
		t.Errorf("run-2/result.json: %+v, %v", r, err)
	}
	var sum []combo
	if b, err := os.ReadFile(filepath.Join(out, "summary.json")); err != nil || json.Unmarshal(b, &sum) != nil || len(sum) != 1 || sum[0].Succeeded != 1 {
		t.Errorf("summary.json: %+v, %v", sum, err)
	}
}

// TestTaskRunCancels checks that task run cancels every run it submitted
// when it stops before they end: a later task refused, or interrupted
// before its watch had listed them.
func TestTaskRunCancels(t *testing.T) {
	tests := []struct {
		name      string
		files     int
		interrupt bool // on the first listing of the runs
		wantCode  int
	}{
		{name: "second task refused", files: 2, wantCode: 1},
		{name: "interrupted while listing", files: 1, interrupt: true, wantCode: 130},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, interrupt := context.WithCancelCause(t.Context())
			defer interrupt(nil)
			var mu sync.Mutex
			submits := 0
			var cancelled []string
			mux := http.NewServeMux()
			mux.HandleFunc("POST /api/v1/runs", func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				defer mu.Unlock()
				if submits++; submits > 1 {
					fail(w, http.StatusBadRequest, api.CodeInvalidRequest, "task: goal: is required")
					return
				}
				reply(w, http.StatusCreated, api.RunBatch{ID: "b-1", Task: "t", Runs: []api.Run{
					{ID: "run-1", BatchID: "b-1", Status: api.RunQueued}, {ID: "run-2", BatchID: "b-1", Status: api.RunQueued}}})
			})
			mux.HandleFunc("GET /api/v1/runs", func(w http.ResponseWriter, r *http.Request) {
				interrupt(&signalError{sig: syscall.SIGINT})
				<-r.Context().Done()
			})
			mux.HandleFunc("POST /api/v1/runs/{id}/cancel", func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				defer mu.Unlock()
				cancelled = append(cancelled, r.PathValue("id"))
				reply(w, http.StatusOK, api.Run{ID: r.PathValue("id"), Status: api.RunCancelled})
			})
			srv := httptest.NewServer(mux)
			t.Cleanup(srv.Close)
			t.Setenv(client.EnvURL, srv.URL)
			file := filepath.Join(t.TempDir(), "t.yaml")
			os.WriteFile(file, []byte("name: t\nagent: custom\ngoal: x\nentrypoint: 'true'\n"), 0o644)
			args := []string{"task", "run"}
			for range tt.files {
				args = append(args, file)
			}
			var stdout, stderr bytes.Buffer
			cmd, err := execute(ctx, env{stdout: &stdout, stderr: &stderr, poll: time.Millisecond}, args)
			if code := report(&stderr, cmd, interrupted(ctx, err)); code != tt.wantCode {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, tt.wantCode, stderr.String())
			}
			mu.Lock()
			defer mu.Unlock()
			if want := []string{"run-1", "run-2"}; !slices.Equal(cancelled, want) {
				t.Errorf("cancelled %v, want %v", cancelled, want)
			}
		})
	}
}

func untarGz(t *testing.T, b64 string) map[string]string {
	t.Helper()
	data, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	out := map[string]string{}
	for {
		h, err := tr.Next()
		if err != nil {
			return out
		}
		b, _ := io.ReadAll(tr)
		out[h.Name] = string(b)
	}
}

// task show prints a run's model calls, tokens and conversations, and
// why artifacts are missing.
func TestPrintRunTokens(t *testing.T) {
	var b bytes.Buffer
	printRun(&b, api.Run{ID: "run-1", Status: api.RunSucceeded, ConversationIDs: []string{"llx_1", "llx_9"},
		LLM:                api.RunLLMUsage{Requests: 3, InputTokens: 120, CachedTokens: 100, OutputTokens: 30, Source: "proxy"},
		ArtifactsTruncated: true, ArtifactsError: "the sandbox was lost\nwith its files"})
	for _, want := range []string{
		"llm:      3 requests, 120 tokens in (100 cached), 30 out (proxy)",
		"conversations: llx_1, llx_9 (agent2env llm ls --run run-1)",
		"artifacts: more left out at the size limit",
		"artifacts: not all collected: the sandbox was lost\n          with its files",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("task show lacks %q:\n%s", want, b.String())
		}
	}
}

// task rm removes each ended run it is given, prints those removed, goes
// on past a refusal (a run not ended, an unknown id) and then exits 1.
func TestTaskRemove(t *testing.T) {
	var rec recorder
	var mu sync.Mutex
	runs := map[string]api.RunStatus{"run-1": api.RunSucceeded, "run-2": api.RunRunning, "run-3": api.RunFailed}
	mux := http.NewServeMux()
	mux.HandleFunc("DELETE /api/v1/runs/{id}", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		id := r.PathValue("id")
		switch st, ok := runs[id]; {
		case !ok:
			fail(w, http.StatusNotFound, api.CodeNotFound, "run "+id+" not found")
		case !st.Final():
			fail(w, http.StatusConflict, api.CodeConflict, "run "+id+" is "+string(st)+": cancel it first")
		default:
			delete(runs, id)
			w.WriteHeader(http.StatusNoContent)
		}
	})
	rec.serve(t, mux)
	tests := []struct {
		name string
		args []string
		want result
		left []string
	}{
		{"removes what it can", []string{"task", "rm", "run-1", "run-2", "nope", "run-3"}, result{Code: 1, Stdout: "run-1\nrun-3\n",
			Stderr: "agent2env task: delete run run-2: run run-2 is running: cancel it first (CONFLICT, HTTP 409)\n" +
				"agent2env task: delete run nope: run nope not found (NOT_FOUND, HTTP 404)\n"}, []string{"run-2"}},
		{"removed already", []string{"task", "remove", "run-1"}, result{Code: 1,
			Stderr: "agent2env task: delete run run-1: run run-1 not found (NOT_FOUND, HTTP 404)\n"}, []string{"run-2"}},
		{"once ended", []string{"task", "rm", "run-2"}, result{Stdout: "run-2\n"}, []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.name == "once ended" {
				mu.Lock()
				runs["run-2"] = api.RunCancelled
				mu.Unlock()
			}
			check(t, tt.args, tt.want)
			mu.Lock()
			left := []string{}
			for id := range runs {
				left = append(left, id)
			}
			mu.Unlock()
			slices.Sort(left)
			if !slices.Equal(left, tt.left) {
				t.Errorf("runs left: %v, want %v", left, tt.left)
			}
		})
	}
	checkUsageError(t, &recorder{}, []string{"task", "rm"}, "need at least one run id")
}

// TestTaskRunIDArgs checks that the commands of one run say what is wrong
// with their arguments: a run id missing, or one argument too many (not
// "need a run id" when there is one).
func TestTaskRunIDArgs(t *testing.T) {
	for _, cmd := range []string{"show", "logs", "artifacts"} {
		checkUsageError(t, &recorder{}, []string{"task", cmd}, "need a run id")
		checkUsageError(t, &recorder{}, []string{"task", cmd, "run-1", "out"}, `unexpected argument "out"`)
	}
}

// listDaemon serves the lists the ls commands page, each one page with
// the next page's cursor "next" when the request has a limit.
func listDaemon(t *testing.T) *recorder {
	rec := &recorder{}
	next := func(r *http.Request) string {
		if r.URL.Query().Has("limit") {
			return "next"
		}
		return ""
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/runs", func(w http.ResponseWriter, r *http.Request) {
		reply(w, http.StatusOK, api.RunList{Items: []api.Run{}, NextCursor: next(r)})
	})
	mux.HandleFunc("GET /api/v1/sandboxes", func(w http.ResponseWriter, r *http.Request) {
		reply(w, http.StatusOK, api.SandboxList{Items: []api.Sandbox{}, NextCursor: next(r)})
	})
	mux.HandleFunc("GET /api/v1/contexts", func(w http.ResponseWriter, r *http.Request) {
		reply(w, http.StatusOK, api.ContextList{Items: []api.Context{}, Contexts: []api.Context{}, NextCursor: next(r)})
	})
	mux.HandleFunc("GET /api/v1/sessions", func(w http.ResponseWriter, r *http.Request) {
		reply(w, http.StatusOK, api.SessionList{Items: []api.Session{}, NextCursor: next(r)})
	})
	mux.HandleFunc("GET /api/v1/snapshots", func(w http.ResponseWriter, r *http.Request) {
		reply(w, http.StatusOK, api.SnapshotList{Items: []api.Snapshot{}, NextCursor: next(r)})
	})
	mux.HandleFunc("GET /api/v1/templates/{name}/versions", func(w http.ResponseWriter, r *http.Request) {
		reply(w, http.StatusOK, api.VersionList{Items: []api.TemplateVersion{}, NextCursor: next(r)})
	})
	mux.HandleFunc("GET /api/v1/llm/exchanges", func(w http.ResponseWriter, r *http.Request) {
		reply(w, http.StatusOK, api.LLMExchangeList{Items: []api.LLMExchange{}, NextCursor: next(r)})
	})
	mux.HandleFunc("GET /api/v1/llm/keys", func(w http.ResponseWriter, r *http.Request) {
		reply(w, http.StatusOK, api.LLMKeyList{Items: []api.LLMKey{}, NextCursor: next(r)})
	})
	mux.HandleFunc("GET /api/v1/images/prepull", func(w http.ResponseWriter, r *http.Request) {
		reply(w, http.StatusOK, api.PrepullList{Items: []api.PrepullTask{}, NextCursor: next(r)})
	})
	rec.serve(t, mux)
	return rec
}

// listRequests runs each command of tests, checking that it asks the
// daemon for the request of its want and prints its out.
func listRequests(t *testing.T, rec *recorder, tests []struct {
	args      []string
	want, out string
}) {
	t.Helper()
	for _, tt := range tests {
		rec.mu.Lock()
		rec.requests = nil
		rec.mu.Unlock()
		code, out, errOut := run(t, tt.args...)
		if code != 0 {
			t.Fatalf("%v: exit %d %s", tt.args, code, errOut)
		}
		if out != tt.out {
			t.Errorf("%v: printed %q, want %q", tt.args, out, tt.out)
		}
		rec.mu.Lock()
		if !slices.Equal(rec.requests, []string{tt.want}) {
			t.Errorf("%v: requests %q, want %q", tt.args, rec.requests, tt.want)
		}
		rec.mu.Unlock()
	}
}

// task ls, sandbox ls, context ls and session ls ask for their list
// newest first with --newest, and in the daemon's order (oldest first)
// without it; snapshot ls and template versions, newest first by default,
// oldest first with --oldest.
func TestListNewest(t *testing.T) {
	listRequests(t, listDaemon(t), []struct {
		args      []string
		want, out string
	}{
		{[]string{"task", "ls", "-q"}, "GET /api/v1/runs", ""},
		{[]string{"task", "ls", "-q", "--newest"}, "GET /api/v1/runs?order=desc", ""},
		{[]string{"task", "ls", "-q", "--newest", "--batch", "b-1"}, "GET /api/v1/runs?batch=b-1&order=desc", ""},
		{[]string{"task", "ls", "-q", "--status", "queued,running", "--status", "hung"}, "GET /api/v1/runs?status=queued&status=running&status=hung", ""},
		{[]string{"task", "ls", "-q", "--agent", "codex,claude-code", "--model", "gpt-5"}, "GET /api/v1/runs?agent=codex&agent=claude-code&model=gpt-5", ""},
		{[]string{"sandbox", "ls", "-q"}, "GET /api/v1/sandboxes", ""},
		{[]string{"sandbox", "ls", "-q", "--newest"}, "GET /api/v1/sandboxes?order=desc", ""},
		{[]string{"context", "ls", "-q"}, "GET /api/v1/contexts", ""},
		{[]string{"context", "ls", "-q", "--newest", "--session", "s1"}, "GET /api/v1/contexts?order=desc&session_name=s1", ""},
		{[]string{"session", "ls", "-q"}, "GET /api/v1/sessions", ""},
		{[]string{"session", "ls", "-q", "--newest"}, "GET /api/v1/sessions?order=desc", ""},
		{[]string{"snapshot", "ls", "-q"}, "GET /api/v1/snapshots", ""},
		{[]string{"snapshot", "ls", "-q", "--oldest"}, "GET /api/v1/snapshots?order=asc", ""},
		{[]string{"template", "versions", "-q", "web"}, "GET /api/v1/templates/web/versions", ""},
		{[]string{"template", "versions", "-q", "--oldest", "web"}, "GET /api/v1/templates/web/versions?order=asc", ""},
		{[]string{"llm", "keys", "ls", "-q"}, "GET /api/v1/llm/keys", ""},
		{[]string{"llm", "keys", "ls", "-q", "--oldest"}, "GET /api/v1/llm/keys?order=asc", ""},
		{[]string{"prepull", "ls", "-q"}, "GET /api/v1/images/prepull", ""},
		{[]string{"prepull", "ls", "-q", "--oldest", "--status", "failed"}, "GET /api/v1/images/prepull?order=asc&status=failed", ""},
	})
}

// task ls, sandbox ls, context ls, llm ls, snapshot ls, session ls, llm
// keys ls, prepull ls and template versions ask for one page with --limit
// and --cursor, and print the next page's cursor with -o json as the API names it; without
// --limit they print the whole list as before. A --limit the API does not
// take is a usage error.
func TestListPages(t *testing.T) {
	rec := listDaemon(t)
	listRequests(t, rec, []struct {
		args      []string
		want, out string
	}{
		{[]string{"task", "ls", "-o", "json", "--limit", "2", "--cursor", "c1"}, "GET /api/v1/runs?cursor=c1&limit=2",
			"{\n  \"items\": [],\n  \"next_cursor\": \"next\"\n}\n"},
		{[]string{"sandbox", "ls", "-o", "json", "--limit", "2", "--cursor", "c1", "--newest"}, "GET /api/v1/sandboxes?cursor=c1&limit=2&order=desc",
			"{\n  \"items\": [],\n  \"nextCursor\": \"next\"\n}\n"},
		{[]string{"sandbox", "ls", "-o", "json"}, "GET /api/v1/sandboxes", "{\n  \"items\": []\n}\n"},
		{[]string{"context", "ls", "-o", "json", "--limit", "1000", "--cursor", "c1", "--sandbox", "sb1"},
			"GET /api/v1/contexts?cursor=c1&limit=1000&sandbox_id=sb1", "{\n  \"items\": [],\n  \"next_cursor\": \"next\"\n}\n"},
		{[]string{"context", "ls", "-o", "json"}, "GET /api/v1/contexts", "{\n  \"items\": []\n}\n"},
		{[]string{"llm", "ls", "-o", "json", "--limit", "1"}, "GET /api/v1/llm/exchanges?limit=1",
			"{\n  \"items\": [],\n  \"nextCursor\": \"next\"\n}\n"},
		{[]string{"snapshot", "ls", "-o", "json", "--limit", "2", "--cursor", "c1", "--sandbox", "sb1"},
			"GET /api/v1/snapshots?cursor=c1&limit=2&sandbox_id=sb1", "{\n  \"items\": [],\n  \"next_cursor\": \"next\"\n}\n"},
		{[]string{"snapshot", "ls", "-o", "json"}, "GET /api/v1/snapshots", "{\n  \"items\": []\n}\n"},
		{[]string{"session", "ls", "-o", "json", "--limit", "5", "--cursor", "c1", "--newest"}, "GET /api/v1/sessions?cursor=c1&limit=5&order=desc",
			"{\n  \"items\": [],\n  \"total\": 0,\n  \"next_cursor\": \"next\"\n}\n"},
		{[]string{"session", "ls", "-o", "json"}, "GET /api/v1/sessions", "{\n  \"items\": [],\n  \"total\": 0\n}\n"},
		{[]string{"template", "versions", "-o", "json", "--limit", "2", "--cursor", "c1", "web"},
			"GET /api/v1/templates/web/versions?cursor=c1&limit=2", "{\n  \"items\": [],\n  \"total\": 0,\n  \"next_cursor\": \"next\"\n}\n"},
		{[]string{"llm", "keys", "ls", "-o", "json", "--limit", "2", "--cursor", "c1"},
			"GET /api/v1/llm/keys?cursor=c1&limit=2", "{\n  \"items\": [],\n  \"next_cursor\": \"next\"\n}\n"},
		{[]string{"llm", "keys", "ls", "-o", "json"}, "GET /api/v1/llm/keys", "{\n  \"items\": []\n}\n"},
		{[]string{"prepull", "ls", "-o", "json", "--limit", "2", "--cursor", "c1", "--image", "alpine"},
			"GET /api/v1/images/prepull?cursor=c1&image=alpine&limit=2", "{\n  \"items\": [],\n  \"next_cursor\": \"next\"\n}\n"},
	})
	rec.mu.Lock()
	rec.requests = nil
	rec.mu.Unlock()
	checkUsageError(t, rec, []string{"task", "ls", "--status", "running,done"},
		`--status "done": want one or more of queued, running, succeeded, failed, hung, timeout, sandbox_lost, cancelled`)
	checkUsageError(t, rec, []string{"task", "ls", "--agent", "codex,claude"},
		`--agent "claude": want one or more of claude-code, codex, gemini-cli, opencode, qwen-code, custom`)
	checkUsageError(t, rec, []string{"task", "ls", "--model", "a,"}, `--model: an empty name`)
	for _, cmd := range []string{"task", "sandbox", "context", "llm", "snapshot", "template", "session", "llm keys", "prepull"} {
		for _, limit := range []string{"0", "-1", "1001", "x"} {
			args := append(strings.Fields(cmd), "ls", "--limit", limit)
			if cmd == "template" {
				args = []string{cmd, "versions", "web", "--limit", limit}
			}
			checkUsageError(t, rec, args, `invalid argument "`+limit+`" for "--limit" flag: want a number from 1 to 1000`)
		}
	}
}
