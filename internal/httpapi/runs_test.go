package httpapi

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agent2env/agent2env/api"
	"github.com/agent2env/agent2env/internal/contexts/contextstest"
	"github.com/agent2env/agent2env/internal/manager"
	"github.com/agent2env/agent2env/internal/run"
	"github.com/agent2env/agent2env/internal/service"
	"github.com/agent2env/agent2env/internal/store"
)

// TestRunListQuery reads the run list's query: status (repeated or
// separated by commas), batch, limit; what it does not know is 400.
func TestRunListQuery(t *testing.T) {
	ce := contextstest.NewEnv(t, manager.Config{}, nil)
	// The service's loop is not started: the queued runs stay queued.
	svc, err := run.New(run.Config{Dir: filepath.Join(t.TempDir(), "runs")}, service.NewSandboxes(ce.M, ""), ce.St, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now().UTC().Truncate(time.Microsecond)
	statuses := []api.RunStatus{api.RunQueued, api.RunFailed, api.RunSucceeded, api.RunFailed, api.RunTimeout, api.RunFailed}
	for i, st := range statuses {
		if err := ce.St.CreateRun(t.Context(), &store.Run{ID: fmt.Sprintf("r%d", i), BatchID: fmt.Sprintf("b%d", i%2), Task: "t",
			Agent: "custom", Status: string(st), CreatedAt: t0.Add(time.Duration(i) * time.Second), UpdatedAt: t0}); err != nil {
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
	for _, query := range []string{"?status=done", "?status=", "?status=failed,", "?limit=0", "?limit=x", "?cursor=nope"} {
		if code, body := get(query); code != http.StatusBadRequest {
			t.Errorf("%s: %d %s, want 400", query, code, body)
		} else {
			checkErrorBody(t, body, api.CodeInvalidRequest)
		}
	}
}
