package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/api/sse"
	"github.com/agent2env/agent2env/internal/auth"
	"github.com/agent2env/agent2env/internal/contexts/contextstest"
	"github.com/agent2env/agent2env/internal/errdefs"
	"github.com/agent2env/agent2env/internal/manager"
	"github.com/agent2env/agent2env/internal/run"
	"github.com/agent2env/agent2env/internal/service"
	"github.com/agent2env/agent2env/internal/store"
)

// newRunService returns a run service over a real store, its runs'
// files in dir, whose loop is not started: the runs a test stores stay as
// they are.
func newRunService(t *testing.T) (svc *run.Service, st store.Store, dir string) {
	t.Helper()
	ce := contextstest.NewEnv(t, manager.Config{}, nil)
	dir = filepath.Join(t.TempDir(), "runs")
	svc, err := run.New(run.Config{Dir: dir}, service.NewSandboxes(ce.M, ""), ce.St, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return svc, ce.St, dir
}

// TestRunListQuery reads the run list's query: status, agent and model
// (each repeated or separated by commas), batch, limit; a status or agent
// it does not know is 400, a model that no run has an empty list.
func TestRunListQuery(t *testing.T) {
	svc, runs, _ := newRunService(t)
	t0 := time.Now().UTC().Truncate(time.Microsecond)
	statuses := []api.RunStatus{api.RunQueued, api.RunFailed, api.RunSucceeded, api.RunFailed, api.RunTimeout, api.RunFailed}
	agents := []string{"claude-code", "codex", "claude-code", "custom", "codex", "claude-code"}
	models := []string{"opus", "", "sonnet", "opus", "gpt-5", "opus"}
	for i, st := range statuses {
		if err := runs.CreateRun(t.Context(), &store.Run{ID: fmt.Sprintf("r%d", i), BatchID: fmt.Sprintf("b%d", i%2), Task: "t",
			Agent: agents[i], Model: models[i], Status: string(st), CreatedAt: t0.Add(time.Duration(i) * time.Second), UpdatedAt: t0}); err != nil {
			t.Fatal(err)
		}
	}
	mux := http.NewServeMux()
	NewRunRoutes(svc).Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	get := func(query string) (int, []byte) {
		resp, err := http.Get(srv.URL + "/api/v1/runs" + query)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body json.RawMessage
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, body
	}
	tests := []struct {
		query string
		want  []string
		next  bool
	}{
		{"", []string{"r0", "r1", "r2", "r3", "r4", "r5"}, false},
		{"?status=failed", []string{"r1", "r3", "r5"}, false},
		{"?status=failed&limit=2", []string{"r1", "r3"}, true},
		{"?status=failed,timeout", []string{"r1", "r3", "r4", "r5"}, false},
		{"?status=queued&status=timeout", []string{"r0", "r4"}, false},
		{"?status=failed&batch=b1", []string{"r1", "r3", "r5"}, false},
		{"?status=failed&batch=b0", []string{}, false},
		{"?status=cancelled&limit=5", []string{}, false},
		{"?order=desc", []string{"r5", "r4", "r3", "r2", "r1", "r0"}, false},
		{"?order=asc&limit=2", []string{"r0", "r1"}, true},
		{"?status=failed&order=desc&limit=2", []string{"r5", "r3"}, true},
		{"?agent=claude-code", []string{"r0", "r2", "r5"}, false},
		{"?agent=codex,custom", []string{"r1", "r3", "r4"}, false},
		{"?agent=claude-code&agent=codex&limit=4", []string{"r0", "r1", "r2", "r4"}, true},
		{"?agent=gemini-cli", []string{}, false},
		{"?agent=claude-code&status=failed", []string{"r5"}, false},
		{"?model=opus", []string{"r0", "r3", "r5"}, false},
		{"?model=sonnet,gpt-5&order=desc", []string{"r4", "r2"}, false},
		{"?agent=claude-code&model=opus&limit=1", []string{"r0"}, true},
		{"?model=nope", []string{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			code, body := get(tt.query)
			if code != http.StatusOK {
				t.Fatalf("%d %s", code, body)
			}
			var l api.RunList
			if err := json.Unmarshal(body, &l); err != nil {
				t.Fatal(err)
			}
			got := []string{}
			for _, r := range l.Items {
				got = append(got, r.ID)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" || (l.NextCursor != "") != tt.next {
				t.Errorf("runs (-want +got):\n%s\nnext cursor %q, want one: %v", diff, l.NextCursor, tt.next)
			}
		})
	}
	for _, query := range []string{"?status=done", "?status=", "?status=failed,", "?limit=0", "?limit=x", "?cursor=nope", "?order=newest",
		"?agent=claude", "?agent=", "?agent=codex,", "?agent=Codex", "?model=", "?model=opus,"} {
		if code, body := get(query); code != http.StatusBadRequest {
			t.Errorf("%s: %d %s, want 400", query, code, body)
		} else {
			checkErrorBody(t, body, api.CodeInvalidRequest)
		}
	}
}

// TestRunDelete: DELETE removes an ended run of the caller's tenant, its
// record and files (204); a run not ended is 409 CONFLICT, another
// tenant's or an unknown one 404 NOT_FOUND, and neither changes
// anything, nor a store that fails (503).
func TestRunDelete(t *testing.T) {
	ce := contextstest.NewEnv(t, manager.Config{}, nil)
	dir := filepath.Join(t.TempDir(), "runs")
	svc, err := run.New(run.Config{Dir: dir}, service.NewSandboxes(ce.M, ""), ce.St, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now().UTC()
	for id, st := range map[string]api.RunStatus{"run-ended": api.RunFailed, "run-active": api.RunRunning} {
		r := &store.Run{ID: id, BatchID: "b", Task: "t", Agent: "custom", Status: string(st), Tenant: auth.Tenant("key-a"),
			CreatedAt: t0, UpdatedAt: t0}
		if st.Final() {
			r.EndedAt = &t0
		}
		if err := ce.St.CreateRun(t.Context(), r); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(dir, id, "artifacts"), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	// down is the same runs over a store that fails to delete.
	svcDown, err := run.New(run.Config{Dir: dir}, service.NewSandboxes(ce.M, ""), noDelete{ce.St}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	mux, down := http.NewServeMux(), http.NewServeMux()
	NewRunRoutes(svc).Register(mux)
	NewRunRoutes(svcDown).Register(down)
	// The tenant the auth middleware gives the request's key; without
	// one, none.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if key := r.Header.Get("X-Test-Key"); key != "" {
			r = r.WithContext(auth.WithTenant(r.Context(), auth.Tenant(key)))
		}
		if r.Header.Get("X-Test-Down") != "" {
			down.ServeHTTP(w, r)
			return
		}
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	do := func(method, id, key string, storeDown bool) (int, []byte) {
		req, _ := http.NewRequest(method, srv.URL+"/api/v1/runs/"+id, nil)
		req.Header.Set("X-Test-Key", key)
		if storeDown {
			req.Header.Set("X-Test-Down", "1")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	exists := func(id string) (record, files bool) {
		_, err := ce.St.GetRun(t.Context(), id)
		_, statErr := os.Stat(filepath.Join(dir, id))
		return err == nil, statErr == nil
	}
	tests := []struct {
		name, id, key string
		down          bool // the store fails to delete
		status        int
		code          string // of the error
		gone          bool   // the run is removed after
	}{
		{"not ended", "run-active", "key-a", false, http.StatusConflict, api.CodeConflict, false},
		{"another tenant's", "run-ended", "key-b", false, http.StatusNotFound, api.CodeNotFound, false},
		{"without a key", "run-ended", "", false, http.StatusNotFound, api.CodeNotFound, false},
		{"unknown", "run-none", "key-a", false, http.StatusNotFound, api.CodeNotFound, true},
		{"the store fails", "run-ended", "key-a", true, http.StatusServiceUnavailable, api.CodeUnavailable, false},
		{"ended, its tenant's", "run-ended", "key-a", false, http.StatusNoContent, "", true},
		{"removed already", "run-ended", "key-a", false, http.StatusNotFound, api.CodeNotFound, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := do(http.MethodDelete, tt.id, tt.key, tt.down)
			if code != tt.status {
				t.Fatalf("DELETE: %d %s, want %d", code, body, tt.status)
			}
			if tt.code != "" {
				checkErrorBody(t, body, tt.code)
			}
			if record, files := exists(tt.id); record == tt.gone || files == tt.gone {
				t.Errorf("after: record %v, files %v; want both %v", record, files, !tt.gone)
			}
		})
	}
	if code, body := do(http.MethodGet, "run-ended", "key-a", false); code != http.StatusNotFound {
		t.Errorf("GET the removed run: %d %s, want 404", code, body)
	}
	if record, files := exists("run-active"); !record || !files {
		t.Errorf("the active run after it all: record %v, files %v", record, files)
	}
}

// noDelete is a store whose DeleteRun fails as a store out of reach does.
type noDelete struct{ store.Store }

func (noDelete) DeleteRun(context.Context, string) error {
	return errdefs.Unavailable("the store is out of reach")
}

// TestRunEventsResume: each event of a run's stream has its seq for id,
// and the stream resumes after the seq ?after= or Last-Event-ID (which
// wins) names; one that is not a non-negative integer is 400.
func TestRunEventsResume(t *testing.T) {
	svc, st, dir := newRunService(t)
	t0 := time.Now().UTC()
	if err := st.CreateRun(t.Context(), &store.Run{ID: "run-1", BatchID: "b", Task: "t", Agent: "custom",
		Status: string(api.RunSucceeded), CreatedAt: t0, UpdatedAt: t0, EndedAt: &t0}); err != nil {
		t.Fatal(err)
	}
	var log []byte
	for seq := int64(1); seq <= 6; seq++ {
		ev := api.RunEvent{Seq: seq, Time: t0, Type: api.RunEventOutput, Text: fmt.Sprint("line ", seq)}
		if seq == 6 {
			ev = api.RunEvent{Seq: seq, Time: t0, Type: api.RunEventEnd, Status: api.RunSucceeded}
		}
		b, _ := json.Marshal(ev)
		log = append(append(log, b...), '\n')
	}
	if err := os.MkdirAll(filepath.Join(dir, "run-1"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "run-1", "events.jsonl"), log, 0o600); err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	NewRunRoutes(svc).Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	get := func(query, lastID string) (*http.Response, []byte) {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/api/v1/runs/run-1/events"+query, nil)
		if lastID != "" {
			req.Header.Set("Last-Event-ID", lastID)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	tests := []struct {
		name, query, lastID string
		want                []string // the events' ids
	}{
		{"from the start", "", "", []string{"1", "2", "3", "4", "5", "6"}},
		{"after", "?after=3", "", []string{"4", "5", "6"}},
		{"after 0", "?after=0", "", []string{"1", "2", "3", "4", "5", "6"}},
		{"Last-Event-ID", "", "4", []string{"5", "6"}},
		{"Last-Event-ID wins", "?after=1", "5", []string{"6"}},
		{"after the end", "?after=6", "", nil},
		{"past the end", "?after=99", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := get(tt.query, tt.lastID)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%d %s", resp.StatusCode, body)
			}
			var ids []string
			events := sse.NewReader(bytes.NewReader(body))
			for {
				ev, err := events.Next()
				if err != nil {
					break
				}
				var re api.RunEvent
				if ev.Name != "event" || json.Unmarshal(ev.Data, &re) != nil || fmt.Sprint(re.Seq) != ev.ID {
					t.Errorf("event %s %q, id %q: want an event whose id is its seq", ev.Name, ev.Data, ev.ID)
				}
				ids = append(ids, ev.ID)
			}
			if diff := cmp.Diff(tt.want, ids); diff != "" {
				t.Errorf("ids (-want +got):\n%s", diff)
			}
		})
	}
	for _, tt := range []struct{ query, lastID string }{
		{"?after=-1", ""}, {"?after=x", ""}, {"?after=1.5", ""}, {"?after=99999999999999999999", ""}, {"", "abc"}, {"?after=2", "-3"},
	} {
		if resp, body := get(tt.query, tt.lastID); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s, Last-Event-ID %q: %d %s, want 400", tt.query, tt.lastID, resp.StatusCode, body)
		} else {
			checkErrorBody(t, body, api.CodeInvalidRequest)
		}
	}
}
